"""Importing a skill package into a namespace: check everything, replay the fixtures, register.

Nothing is registered unless the whole package passes: its files are exactly what its
manifest lists (:func:`~soloflow_core.skills.package.read_package`), ``SKILL.md``'s front
matter agrees with ``flow.json`` (name, tools), the flow is valid and every tool it calls
is one of the target's executors, its input schema is a valid JSON Schema of an object, and
every fixture is well-formed, calls the flow's tools in the flow's order and is reproduced
when the flow is replayed against it. The flow is then registered as a user-submitted flow
in the caller's namespace — whatever namespace the package came from.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from soloflow_core.errors import FlowFileError, FlowValidationError, SkillPackageError
from soloflow_core.flow.loader import validate_flow_file
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.skills.exporter import Replay
from soloflow_core.skills.package import (
    FLOW_FILE,
    PROVENANCE_FILE,
    Fixture,
    PackageFiles,
    check_input_schema,
    field_path,
    occurrence_of,
    read_package,
)

if TYPE_CHECKING:
    import os

    import pluggy

    from soloflow_core.models import FlowDefinition
    from soloflow_core.store import Store

__all__ = ["ImportedSkill", "check_package", "import_skill"]


@dataclass(frozen=True, slots=True)
class ImportedSkill:
    """A package registered by :func:`import_skill`."""

    flow: FlowDefinition
    """As registered here: the next version of its name in the caller's namespace."""
    skill_name: str
    fixtures_replayed: int
    package_digest: str


Problems = list[tuple[str | None, str]]


def _flow(
    pkg: PackageFiles, executors: Collection[str] | None, problems: Problems
) -> FlowDefinition | None:
    """``flow.json`` validated as ``soloflow flows validate`` does, against ``executors``."""
    with tempfile.TemporaryDirectory(prefix="soloflow-skill-") as tmp:
        path = Path(tmp) / FLOW_FILE
        path.write_bytes(pkg.files[FLOW_FILE])
        try:
            flow, _ = validate_flow_file(path, executors=executors)
        except FlowFileError as exc:
            problems.extend((FLOW_FILE, _issue(p.format(FLOW_FILE))) for p in exc.issues)
            return None
    problems.extend((FLOW_FILE, f"{p}: {m}") for p, m in check_input_schema(flow.input_schema))
    return flow


def _issue(text: str) -> str:
    """A flow-file problem without its leading file name (the package's problem names it)."""
    return text[len(FLOW_FILE) + 1 :] if text.startswith(FLOW_FILE + ":") else text


def _agreement(pkg: PackageFiles, flow: FlowDefinition, problems: Problems) -> None:
    """SKILL.md's front matter says what flow.json is."""
    front = pkg.front_matter
    named = front.metadata.get("soloflow-flow")
    if named is not None and named != flow.name:
        problems.append(
            ("SKILL.md", f"metadata.soloflow-flow {named!r} is not flow.json's name {flow.name!r}")
        )
    tools = list(dict.fromkeys(s.skill_key for s in flow.steps))
    if sorted(front.tools) != sorted(tools):
        problems.append(
            (
                "SKILL.md",
                f"allowed-tools {' '.join(front.tools) or '(none)'!r} are not the tools "
                f"flow.json calls ({' '.join(tools)})",
            )
        )


def _fixtures(
    pkg: PackageFiles, flow: FlowDefinition, problems: Problems
) -> list[tuple[str, Fixture]]:
    steps = [(s.id, s.skill_key) for s in flow.steps]
    out = []
    for path in pkg.fixture_paths:
        try:
            fixture = Fixture.model_validate(json.loads(pkg.files[path]))
        except (ValueError, UnicodeDecodeError) as exc:
            if isinstance(exc, ValidationError):
                problems.extend(
                    (path, f"{field_path(e['loc']) or '(fixture)'}: {e['msg']}")
                    for e in exc.errors()
                )
            else:
                problems.append((path, f"not JSON: {exc}"))
            continue
        if len(fixture.steps) != len(steps):
            problems.append(
                (path, f"records {len(fixture.steps)} step(s); the flow has {len(steps)}")
            )
            continue
        bad = False
        for i, (got, (step_id, tool)) in enumerate(zip(fixture.steps, steps, strict=True)):
            if got.step != step_id or got.tool != tool:
                problems.append(
                    (
                        path,
                        f"steps[{i}]: records step {got.step!r} calling {got.tool!r}; the flow's "
                        f"step {i + 1} is {step_id!r} calling {tool!r}",
                    )
                )
                bad = True
        if not bad:
            out.append((path, fixture))
    return out


def _provenance(pkg: PackageFiles, problems: Problems) -> dict[str, Any]:
    if PROVENANCE_FILE not in pkg.files:
        return {}
    try:
        value = pkg.json(PROVENANCE_FILE)
    except (ValueError, UnicodeDecodeError) as exc:
        problems.append((PROVENANCE_FILE, f"not JSON: {exc}"))
        return {}
    if not isinstance(value, dict):
        problems.append((PROVENANCE_FILE, "must be a JSON object"))
        return {}
    keywords = value.get("trigger_keywords")
    if keywords is not None and (
        not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords)
    ):
        problems.append((PROVENANCE_FILE, "trigger_keywords: must be a list of strings"))
    return value


def check_package(
    directory: str | os.PathLike[str], *, executors: Collection[str] | None, replay: Replay
) -> tuple[PackageFiles, FlowDefinition, list[Fixture], dict[str, Any]]:
    """Everything :func:`import_skill` checks, registering nothing: the package's files, its
    flow (against ``executors`` when given), its fixtures (each replayed with ``replay``).

    Raises:
        SkillPackageError: every problem found, each with its file.
    """
    pkg = read_package(directory)
    problems: Problems = []
    flow = _flow(pkg, executors, problems)
    provenance = _provenance(pkg, problems)
    if flow is None:
        raise SkillPackageError(str(directory), problems)
    _agreement(pkg, flow, problems)
    fixtures = _fixtures(pkg, flow, problems)
    if problems:
        raise SkillPackageError(str(directory), problems)
    for path, fixture in fixtures:
        reproduced, why = replay(flow, occurrence_of(fixture))
        if not reproduced:
            problems.append(
                (
                    path,
                    "the flow does not reproduce this recorded occurrence: " + "; ".join(why[:3]),
                )
            )
    if problems:
        raise SkillPackageError(str(directory), problems)
    return pkg, flow, [f for _, f in fixtures], provenance


def import_skill(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    user_id: str,
    agent_id: str,
    executors: Collection[str] | None,
    replay: Replay,
    pm: pluggy.PluginManager | None = None,
) -> ImportedSkill:
    """Check the package (:func:`check_package`) and register its flow in the namespace
    (``user_id``, ``agent_id``) as a user-submitted flow, the next version of its name, with
    the package's trigger keywords; keep its fixtures and provenance beside it.

    Raises:
        SkillPackageError: the package is refused (nothing is registered).
    """
    pkg, flow, fixtures, provenance = check_package(directory, executors=executors, replay=replay)
    keywords = provenance.get("trigger_keywords") or None
    memory = ProceduralMemory(store, pm=pm)
    try:
        registered = memory.submit_workflow(
            user_id, agent_id, flow, trigger_keywords=keywords, executors=executors
        )
    except FlowValidationError as exc:
        raise SkillPackageError(
            str(directory), [(PROVENANCE_FILE if "keyword" in str(exc) else FLOW_FILE, str(exc))]
        ) from exc
    imports = list(provenance.get("imports") or [])
    imports.append(
        {
            "at": datetime.now(UTC).isoformat(),
            "skill": pkg.skill_name,
            "package_digest": pkg.digest,
            "from_version": provenance.get("version"),
            "as_version": registered.version,
            "fixtures_replayed": len(fixtures),
        }
    )
    kept = {**provenance, "imports": imports}
    store.record_skill_import(
        user_id=user_id,
        agent_id=agent_id,
        flow_name=registered.name,
        flow_version=registered.version,
        skill_name=pkg.skill_name,
        package_digest=pkg.digest,
        fixtures=[f.model_dump(mode="json") for f in fixtures],
        provenance=kept,
    )
    return ImportedSkill(
        flow=registered,
        skill_name=pkg.skill_name,
        fixtures_replayed=len(fixtures),
        package_digest=pkg.digest,
    )
