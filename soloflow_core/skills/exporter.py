"""Exporting a registered flow version as a skill package (see :mod:`.package`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import NotFoundError
from soloflow_core.generalize.dataflow import side_effects_from_calls
from soloflow_core.generalize.flow_calls import flow_occurrences, known_side_effects
from soloflow_core.learning.quality import QualityScore, flow_quality
from soloflow_core.skills.package import (
    FIXTURES_DIR,
    FLOW_FILE,
    MAX_DESCRIPTION,
    PACKAGE_FORMAT,
    PROVENANCE_FILE,
    SKILL_FILE,
    Fixture,
    SkillFrontMatter,
    fixture_json,
    fixture_of,
    occurrence_of,
    render_front_matter,
    skill_name_for,
    write_package,
)

if TYPE_CHECKING:
    from soloflow_core.generalize.arguments import Occurrence
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store import Store
    from soloflow_core.store.procedural import FlowMeta

__all__ = ["MAX_FIXTURES", "ExportedSkill", "Replay", "export_skill", "render_skill_md"]

Replay = Callable[["FlowDefinition", "Occurrence"], tuple[bool, list[str]]]
"""Runs a flow against one recorded occurrence, its calls answered from the recording:
``(reproduced, what diverged)``. ``soloflow_langgraph.skills`` passes one that runs the
flow's compiled LangGraph graph (``soloflow_langgraph.verify.replay_occurrence``)."""

MAX_FIXTURES = 20
"""Fixtures written per package (the first occurrences the flow reproduces)."""
_RUNS_READ = 200


@dataclass(frozen=True, slots=True)
class ExportedSkill:
    """A package written by :func:`export_skill`."""

    directory: Path
    skill_name: str
    flow: FlowDefinition
    fixtures: int
    left_out: list[dict[str, Any]] = field(default_factory=list)
    """Recorded occurrences not written as fixtures, each with its run id and why."""
    digest: str = ""
    """SHA-256 of the package's manifest."""


def _fixtures(
    store: Store,
    flow: FlowDefinition,
    meta: FlowMeta,
    replay: Replay,
    limit: int,
    *,
    user_id: str,
    agent_id: str,
    side_effects: Mapping[str, bool | None] | None,
) -> tuple[list[Fixture], list[dict[str, Any]], dict[str, Any]]:
    """(fixtures, left out, origin): an imported version's own fixtures, else the recorded
    occurrences of its candidate that the flow reproduces, aligned and judged as replay
    verification judges them (side effects: the step's flag, else ``side_effects``, else
    the recorded calls')."""
    imported = store.get_skill_import(
        flow.name, user_id=user_id, agent_id=agent_id, version=flow.version
    )
    chance: list[str] = []
    if imported is not None:
        fixtures = [Fixture.model_validate(f) for f in imported.fixtures]
        found = [(f.run_id, occurrence_of(f)) for f in fixtures]
        recorded = {
            s.tool: s.side_effects for f in fixtures for s in f.steps if s.side_effects is not None
        }
        origin: dict[str, Any] = {
            "skill_import": {
                "skill": imported.skill_name,
                "package_digest": imported.package_digest,
            }
        }
    elif meta.candidate_id is not None:
        try:
            cand = store.get_candidate(meta.candidate_id, user_id=user_id, agent_id=agent_id)
        except NotFoundError:
            return [], [], {}
        runs = store.load_runs(cand.run_ids[:_RUNS_READ], user_id=user_id, agent_id=agent_id)
        # Aligned as replay verification aligns them (soloflow_core.generalize.flow_calls).
        found, chance = flow_occurrences(runs, flow, tool_sequence=cand.tool_sequence)
        recorded = side_effects_from_calls([c for r in runs for c in r.tool_calls])
        origin = {
            "candidate": {
                "id": cand.id,
                "tool_sequence": cand.tool_sequence,
                "occurrence_count": cand.occurrence_count,
                "fidelity": cand.fidelity,
                "verified_at": cand.verified_at and cand.verified_at.isoformat(),
                "verification_note": cand.verification_note,
                "run_ids": cand.run_ids[:100],
            }
        }
    else:
        return [], [], {}
    steps = [(s.id, s.skill_key) for s in flow.steps]
    effects = known_side_effects(flow, given=side_effects, recorded=recorded)
    kept: list[Fixture] = []
    left_out: list[dict[str, Any]] = [
        {
            "run_id": run_id,
            "why": "not the flow's: at some step the calls take none of its arguments",
        }
        for run_id in chance
    ]
    for run_id, occ in found:
        if len(kept) >= limit:
            left_out.append({"run_id": run_id, "why": f"at most {limit} fixtures per package"})
            continue
        fixture = fixture_of(run_id, occ, steps, side_effects=effects)
        reproduced, why = replay(flow, occurrence_of(fixture))
        if reproduced:
            kept.append(fixture)
        else:
            left_out.append(
                {"run_id": run_id, "why": "not reproduced in replay: " + "; ".join(why[:3])}
            )
    return kept, left_out, origin


def _inputs_table(flow: FlowDefinition) -> list[str]:
    schema = flow.input_schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    if not props:
        return ["This flow takes no inputs."]
    required = set(schema.get("required") or [])
    rows = ["| input | type | required | description |", "|---|---|---|---|"]
    for name, spec in props.items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "any")
        desc = str(spec.get("description", "")).replace("|", "\\|").replace("\n", " ")
        rows.append(
            f"| `{name}` | {kind if isinstance(kind, str) else ' or '.join(kind)} | "
            f"{'yes' if name in required else 'no'} | {desc} |"
        )
    return rows


def _description(flow: FlowDefinition, keywords: tuple[str, ...]) -> str:
    what = (
        flow.description.strip()
        or f"Runs {' → '.join(s.skill_key for s in flow.steps)} as one deterministic flow."
    )
    when = f" Use it when a task is about: {', '.join(keywords[:12])}." if keywords else ""
    text = " ".join((what + when).split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def render_skill_md(
    flow: FlowDefinition, meta: FlowMeta, *, skill_name: str, quality: QualityScore, fixtures: int
) -> str:
    """``SKILL.md``: front matter, then when to use the skill, its inputs, its steps, how to run it."""
    front = SkillFrontMatter.model_validate(
        {
            "name": skill_name,
            "description": _description(flow, meta.trigger_keywords),
            "metadata": {
                "soloflow-format": str(PACKAGE_FORMAT),
                "soloflow-flow": flow.name,
                "soloflow-version": str(flow.version),
                "soloflow-source": meta.source,
                "soloflow-quality": f"{quality.overall:.2f}",
            },
            "allowed-tools": " ".join(dict.fromkeys(s.skill_key for s in flow.steps)),
        }
    )
    example = {name: f"<{name}>" for name in ((flow.input_schema or {}).get("properties") or {})}
    lines = [
        f"# {flow.name}",
        "",
        flow.description.strip() or "A flow SoloFlow learned from repeated tool calls.",
        "",
        "## When to use it",
        "",
        f"When a task asks for what this flow does: {', '.join(meta.trigger_keywords) or flow.name}. "
        "It calls the tools below in a fixed order with no model call, and returns the output of "
        f"step `{flow.result_step}`. If the task needs something else, do it yourself.",
        "",
        "## Inputs",
        "",
        *_inputs_table(flow),
        "",
        "## Steps",
        "",
        *[
            f"{i}. `{s.skill_key}` (step `{s.id}`"
            + (f", after {', '.join(s.depends_on)}" if s.depends_on else "")
            + (", once per item" if s.map_over else "")
            + ")"
            for i, s in enumerate(flow.steps, 1)
        ],
        "",
        "## Run it",
        "",
        f"- Shell: `soloflow flows run {json.dumps(flow.name, ensure_ascii=False)} --input '{json.dumps(example)}'`",
        "- MCP: the flow's own tool on `soloflow mcp`, or `soloflow_run`",
        f"- Quality: {quality.overall:.2f} (reliability {quality.reliability:.2f}, efficiency "
        f"{quality.efficiency:.2f}, maturity {quality.maturity:.2f}, reusability {quality.reusability:.2f})",
        "",
        "## Files",
        "",
        f"- `{FLOW_FILE}`: the flow definition (SoloFlow's format)",
        f"- `{FIXTURES_DIR}/`: {fixtures} recorded occurrence(s) the flow reproduces in replay",
        f"- `{PROVENANCE_FILE}`: where it came from, its versions and confidence history",
        "- `manifest.json`: the SHA-256 of every file; `soloflow skills import` checks them",
    ]
    return render_front_matter(front) + "\n" + "\n".join(lines) + "\n"


def _provenance(
    store: Store,
    flow: FlowDefinition,
    meta: FlowMeta,
    origin: dict[str, Any],
    left_out: list[dict[str, Any]],
    kept: int,
    quality: QualityScore,
    at: datetime,
    *,
    user_id: str,
    agent_id: str,
) -> dict[str, Any]:
    versions = store.list_flow_versions(flow.name, user_id=user_id, agent_id=agent_id)
    imported = store.get_skill_import(
        flow.name, user_id=user_id, agent_id=agent_id, version=flow.version
    )
    earlier = dict(imported.provenance) if imported is not None else {}
    history = list(earlier.get("confidence_history") or [])
    history += [
        {
            "version": v.version,
            "at": v.created_at.isoformat(),
            "event": "registered",
            "source": v.source,
            "confidence": v.confidence,
        }
        for v in reversed(versions)
    ]
    history.append(
        {
            "version": meta.version,
            "at": at.isoformat(),
            "event": "exported",
            "confidence": meta.confidence,
            "success_count": meta.success_count,
            "total_executions": meta.total_executions,
        }
    )
    return {
        "format": PACKAGE_FORMAT,
        "flow": flow.name,
        "version": flow.version,
        "source": meta.source,
        "exported_at": at.isoformat(),
        "record": {
            "status": meta.status,
            "confidence": meta.confidence,
            "success_count": meta.success_count,
            "total_executions": meta.total_executions,
            "created_at": meta.created_at.isoformat(),
            "last_used": meta.last_used and meta.last_used.isoformat(),
        },
        "trigger_keywords": list(meta.trigger_keywords),
        "versions": [
            {
                "version": v.version,
                "source": v.source,
                "status": v.status,
                "confidence": v.confidence,
                "success_count": v.success_count,
                "total_executions": v.total_executions,
                "created_at": v.created_at.isoformat(),
            }
            for v in versions
        ],
        "confidence_history": history,
        "origin": origin,
        "fixtures": {"count": kept, "left_out": left_out},
        "quality": quality.as_dict(),
        "imports": list(earlier.get("imports") or []),
    }


def export_skill(
    store: Store,
    name: str,
    out_dir: str | Path,
    *,
    user_id: str,
    agent_id: str,
    replay: Replay,
    version: int | None = None,
    max_fixtures: int = MAX_FIXTURES,
    side_effects: Mapping[str, bool | None] | None = None,
) -> ExportedSkill:
    """Write flow ``name`` (``version``: default the latest) of the namespace as a skill
    package in ``out_dir/<skill name>/``. Its fixtures are the recorded occurrences it was
    verified on (its candidate's, or those it was imported with) that ``replay`` reproduces;
    ``side_effects`` (tool → bool) as for replay verification, written in each fixture.

    Raises:
        NotFoundError: no such flow (version) in the namespace.
        SkillPackageError: ``out_dir/<skill name>`` exists and is not empty.
    """
    record = store.get_flow(name, user_id=user_id, agent_id=agent_id, version=version)
    flow = record.flow
    meta = store.get_flow_meta(name, user_id=user_id, agent_id=agent_id, version=flow.version)
    kept, left_out, origin = _fixtures(
        store,
        flow,
        meta=meta,
        replay=replay,
        limit=max_fixtures,
        user_id=user_id,
        agent_id=agent_id,
        side_effects=side_effects,
    )
    at = datetime.now(UTC)
    quality = flow_quality(store, meta, user_id=user_id, agent_id=agent_id, at=at)
    skill_name = skill_name_for(flow.name)
    provenance = _provenance(
        store,
        flow,
        meta=meta,
        origin=origin,
        left_out=left_out,
        kept=len(kept),
        quality=quality,
        at=at,
        user_id=user_id,
        agent_id=agent_id,
    )
    files = {
        SKILL_FILE: render_skill_md(
            flow, meta, skill_name=skill_name, quality=quality, fixtures=len(kept)
        ).encode(),
        FLOW_FILE: (
            json.dumps(flow.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        ).encode(),
        PROVENANCE_FILE: (
            json.dumps(provenance, indent=2, ensure_ascii=False, default=str) + "\n"
        ).encode(),
    }
    for i, fixture in enumerate(kept, 1):
        files[f"{FIXTURES_DIR}/{i:04d}.json"] = (
            json.dumps(fixture_json(fixture), indent=2, ensure_ascii=False, default=str) + "\n"
        ).encode()
    directory = Path(out_dir) / skill_name
    digest = write_package(directory, files, skill_name=skill_name)
    return ExportedSkill(
        directory=directory,
        skill_name=skill_name,
        flow=flow,
        fixtures=len(kept),
        left_out=left_out,
        digest=digest,
    )
