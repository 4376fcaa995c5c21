"""The skill package format: a flow as an Agent Skills directory, and reading one safely.

A package is a directory named after the skill (``refund-order/``) holding:

- ``SKILL.md``: the Agent Skills file — YAML front matter (``name``: lowercase letters,
  digits and single hyphens, at most 64 characters; ``description``: at most 1,024
  characters, what it does and when to use it; ``metadata``: ``soloflow-*`` strings;
  ``allowed-tools``: the tools its steps call, space-separated), then Markdown: when to use
  it, its inputs, its steps, how to run it;
- ``flow.json``: the :class:`~soloflow_core.models.FlowDefinition`;
- ``fixtures/NNNN.json``: recorded occurrences the flow reproduces in replay (:class:`Fixture`);
- ``provenance.json``: where the flow came from (source, versions, confidence history,
  the candidate it was learned from, earlier imports);
- ``manifest.json``: the format, the skill's name and the SHA-256 of every other file.

:func:`read_package` refuses a package that is not exactly what its manifest lists: a file
outside the directory (``..``, an absolute path, a backslash, a symbolic link), a file not
listed, a listed file missing or changed, a file over 8 MiB. Every problem is reported at
once, each with its file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soloflow_core.errors import SkillPackageError
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.loops import step_calls_of

__all__ = [
    "FIXTURES_DIR",
    "FLOW_FILE",
    "MANIFEST_FILE",
    "MAX_FILE_BYTES",
    "PACKAGE_FORMAT",
    "PROVENANCE_FILE",
    "SKILL_FILE",
    "Fixture",
    "FixtureCall",
    "FixtureStep",
    "PackageFiles",
    "SkillFrontMatter",
    "check_input_schema",
    "field_path",
    "fixture_json",
    "fixture_of",
    "occurrence_of",
    "read_package",
    "render_front_matter",
    "skill_name_for",
    "write_package",
]

PACKAGE_FORMAT = 1
SKILL_FILE = "SKILL.md"
FLOW_FILE = "flow.json"
PROVENANCE_FILE = "provenance.json"
MANIFEST_FILE = "manifest.json"
FIXTURES_DIR = "fixtures"
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_FILES = 1000
MAX_NAME = 64
MAX_DESCRIPTION = 1024
_SKILL_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FIXTURE_FILE = re.compile(r"^fixtures/[0-9]{4}\.json$")
_TOP_FILES = frozenset({SKILL_FILE, FLOW_FILE, PROVENANCE_FILE})
_FRONT_MATTER_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)


def skill_name_for(flow_name: str) -> str:
    """A valid skill name for a flow: ASCII lowercase letters and digits, words joined by
    single hyphens, at most 64 characters (``"Auto: find → list"`` → ``auto-find-list``)."""
    ascii_name = unicodedata.normalize("NFKD", flow_name).encode("ascii", "ignore").decode().lower()
    words = re.findall(r"[a-z0-9]+", ascii_name)
    name = "-".join(words)[:MAX_NAME].strip("-") or "flow"
    return re.sub(r"-{2,}", "-", name)


def field_path(loc: Sequence[str | int]) -> str:
    """A pydantic error location as a field path: ``steps[1].calls[0].args``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# ---------------------------------------------------------------------- fixtures


class FixtureCall(BaseModel):
    """One recorded call of a step's tool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    args: dict[str, Any] = Field(default_factory=dict)
    output: Any = None


class FixtureStep(BaseModel):
    """What one step of the flow did in the recorded occurrence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str = Field(min_length=1)
    """The flow step's id."""
    tool: str = Field(min_length=1)
    """Its tool (``skill_key``)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The arguments of the call that represents the step (its last attempt)."""
    output: Any = None
    calls: list[FixtureCall] = Field(default_factory=list)
    """Every successful call of the step (several for a map step); empty: the one above."""
    side_effects: bool | None = None
    """Whether the step's tool changes the world, as known when the fixture was recorded
    (the step's flag, configuration, the calls' metadata); replay reads it as the calls'
    metadata (a read-only step repeated before a side effect needs one of its calls).
    Written only when known."""


class Fixture(BaseModel):
    """A recorded occurrence of the flow: the task and every step's calls, replayable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(min_length=1)
    """The captured run it was recorded in (in the exporting store)."""
    task: str = ""
    steps: list[FixtureStep] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class _Call:
    """A recorded call as replay reads it (``name``, ``args``, ``output``, ``meta``)."""

    name: str
    args: dict[str, Any]
    output: Any
    meta: dict[str, Any] | None = None


def fixture_of(
    run_id: str,
    occ: Occurrence,
    steps: Sequence[tuple[str, str]],
    *,
    side_effects: Mapping[str, bool] | None = None,
) -> Fixture:
    """The fixture of one recorded occurrence; ``steps``: the flow's (step id, tool), in order;
    ``side_effects``: tool → whether it changes the world, where known."""
    out = []
    for i, (step_id, tool) in enumerate(steps[: len(occ.args)]):
        calls = step_calls_of(occ, i)
        out.append(
            FixtureStep(
                step=step_id,
                tool=tool,
                args=dict(occ.args[i]),
                output=occ.outputs[i],
                calls=[FixtureCall(args=a, output=o) for a, o in calls] if len(calls) > 1 else [],
                side_effects=(side_effects or {}).get(tool),
            )
        )
    return Fixture(run_id=run_id, task=occ.task, steps=out)


def fixture_json(fixture: Fixture) -> dict[str, Any]:
    """A fixture as written in a package: a step's unknown ``side_effects`` is left out, so
    a package with none reads as before the field existed."""
    data = fixture.model_dump(mode="json")
    for step in data["steps"]:
        if step.get("side_effects") is None:
            step.pop("side_effects", None)
    return data


def occurrence_of(fixture: Fixture) -> Occurrence:
    """The occurrence a fixture records, as the replay reads it (a step's known side effects
    as its calls' metadata)."""
    return Occurrence(
        task=fixture.task,
        args=[dict(s.args) for s in fixture.steps],
        outputs=[s.output for s in fixture.steps],
        step_calls=[
            [
                _Call(
                    name=s.tool,
                    args=dict(c.args),
                    output=c.output,
                    meta=None if s.side_effects is None else {"side_effects": s.side_effects},
                )
                for c in s.calls
            ]
            for s in fixture.steps
        ],
    )


# ---------------------------------------------------------------------- SKILL.md


class SkillFrontMatter(BaseModel):
    """The front matter of ``SKILL.md`` as the Agent Skills format defines it."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1, max_length=MAX_NAME, pattern=_SKILL_NAME.pattern)
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION)
    license: str | None = None
    compatibility: str | None = Field(default=None, max_length=500)
    metadata: dict[str, str] = Field(default_factory=dict)
    allowed_tools: str | None = Field(default=None, alias="allowed-tools")

    @property
    def tools(self) -> list[str]:
        return (self.allowed_tools or "").split()


def render_front_matter(front: SkillFrontMatter) -> str:
    """``---`` YAML ``---``, keys in the format's order."""
    data = front.model_dump(by_alias=True, exclude_none=True)
    if not data.get("metadata"):
        data.pop("metadata", None)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{text}---\n"


def _front_matter(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the front matter's mapping, None) or (None, what is wrong)."""
    if not text.startswith("---"):
        return None, "must start with YAML front matter between '---' lines (name, description)"
    lines = text.splitlines()
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return None, "the front matter has no closing '---' line"
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        return None, f"the front matter is not YAML: {exc}".replace("\n", " ")
    if not isinstance(data, dict):
        return None, "the front matter must be a mapping (name: ..., description: ...)"
    return data, None


# ---------------------------------------------------------------------- input schema


def check_input_schema(schema: Any) -> list[tuple[str, str]]:
    """``(field path, message)`` for each way ``schema`` is not a usable flow input schema:
    a valid JSON Schema (its draft's meta-schema) of ``type: object`` whose ``required``
    names only its ``properties``."""
    if schema is None:
        return []
    from jsonschema import exceptions, validators

    if not isinstance(schema, dict):
        return [("input_schema", f"must be a JSON Schema object, got {type(schema).__name__}")]
    problems: list[tuple[str, str]] = []
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    for error in sorted(cls(cls.META_SCHEMA).iter_errors(schema), key=exceptions.relevance):
        problems.append((field_path(["input_schema", *error.absolute_path]), error.message))
    if problems:
        return problems
    if schema.get("type") != "object":
        problems.append(
            (
                "input_schema.type",
                f"must be 'object' (the flow's inputs), got {schema.get('type')!r}",
            )
        )
    props = schema.get("properties") or {}
    for i, name in enumerate(schema.get("required") or []):
        if name not in props:
            problems.append(
                (
                    f"input_schema.required[{i}]",
                    f"{name!r} is not one of the properties ({', '.join(props) or 'none'})",
                )
            )
    return problems


# ---------------------------------------------------------------------- writing


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_package(directory: Path, files: Mapping[str, bytes], *, skill_name: str) -> str:
    """Write ``files`` (package path → bytes) and their manifest into ``directory`` (made;
    it must not exist or be empty). Returns the manifest's SHA-256.

    Raises:
        SkillPackageError: ``directory`` exists and is not empty.
    """
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise SkillPackageError(
            str(directory),
            [(None, "the directory exists and is not empty; remove it or export to another --out")],
        )
    manifest = {
        "format": PACKAGE_FORMAT,
        "skill": skill_name,
        "files": {path: _digest(data) for path, data in sorted(files.items())},
    }
    blob = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    for path, data in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (directory / MANIFEST_FILE).write_bytes(blob)
    return _digest(blob)


# ---------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class PackageFiles:
    """A package whose files are exactly what its manifest lists, byte for byte."""

    directory: Path
    skill_name: str
    digest: str
    """SHA-256 of ``manifest.json``."""
    front_matter: SkillFrontMatter
    files: dict[str, bytes]
    """Package path → content, every listed file."""

    def json(self, path: str) -> Any:
        return json.loads(self.files[path])

    @property
    def fixture_paths(self) -> list[str]:
        return sorted(p for p in self.files if p.startswith(FIXTURES_DIR + "/"))


def _path_problem(path: Any) -> str | None:
    """Why ``path`` (a manifest key) may not name a package file; None when it may."""
    if not isinstance(path, str) or not path:
        return "a file name must be a non-empty string"
    if "\x00" in path or "\\" in path or path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return "not a relative POSIX path inside the package"
    parts = PurePosixPath(path).parts
    if any(p in ("..", ".", "") for p in parts) or path != "/".join(parts):
        return "not a relative POSIX path inside the package ('..' and '.' are refused)"
    if path not in _TOP_FILES and not _FIXTURE_FILE.match(path):
        return (
            f"not a file of the format ({', '.join(sorted(_TOP_FILES))}, {FIXTURES_DIR}/NNNN.json)"
        )
    return None


def _manifest(
    directory: Path, problems: list[tuple[str | None, str]]
) -> tuple[dict[str, str], str, str] | None:
    path = directory / MANIFEST_FILE
    if path.is_symlink() or not path.is_file():
        problems.append(
            (MANIFEST_FILE, "missing: not a skill package exported by `soloflow skills export`")
        )
        return None
    blob = path.read_bytes()
    try:
        manifest = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as exc:
        problems.append((MANIFEST_FILE, f"not JSON: {exc}"))
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != PACKAGE_FORMAT:
        problems.append(
            (
                MANIFEST_FILE,
                f"not a package of format {PACKAGE_FORMAT} "
                f"(format: {manifest.get('format') if isinstance(manifest, dict) else None!r})",
            )
        )
        return None
    files, skill = manifest.get("files"), manifest.get("skill")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        problems.append((MANIFEST_FILE, "files: must map each file name to its SHA-256"))
        return None
    if not isinstance(skill, str):
        problems.append((MANIFEST_FILE, "skill: the skill's name is missing"))
        return None
    return files, skill, _digest(blob)


def _unlisted(directory: Path, listed: set[str], problems: list[tuple[str | None, str]]) -> None:
    """Symbolic links anywhere, and regular files the manifest does not list."""
    count = 0
    for root, dirs, names in os.walk(directory, followlinks=False):
        for d in list(dirs):
            if (Path(root) / d).is_symlink():
                problems.append(
                    (Path(root, d).relative_to(directory).as_posix(), "a symbolic link: refused")
                )
                dirs.remove(d)
        for n in names:
            count += 1
            rel = Path(root, n).relative_to(directory).as_posix()
            if rel == MANIFEST_FILE:
                continue
            if rel in listed:
                continue  # checked as listed
            if Path(root, n).is_symlink():
                problems.append((rel, "a symbolic link: refused"))
            else:
                problems.append(
                    (rel, "not listed in manifest.json: the package was changed after export")
                )
        if count > MAX_FILES:
            problems.append((None, f"more than {MAX_FILES} files"))
            return


def read_package(directory: str | os.PathLike[str]) -> PackageFiles:
    """The package at ``directory``, checked against its manifest and the format.

    Raises:
        SkillPackageError: every problem found (see the module docstring).
    """
    root = Path(directory)
    label = str(root)
    if not root.is_dir():
        raise SkillPackageError(label, [(None, "not a directory")])
    problems: list[tuple[str | None, str]] = []
    found = _manifest(root, problems)
    if found is None:
        raise SkillPackageError(label, problems)
    listed, skill_name, digest = found
    real_root = root.resolve()
    files: dict[str, bytes] = {}
    for path, expected in sorted(listed.items()):
        why = _path_problem(path)
        if why is not None:
            problems.append((path if isinstance(path, str) else repr(path), why))
            continue
        target = root / path
        parts = PurePosixPath(path).parts
        if any(root.joinpath(*parts[:k]).is_symlink() for k in range(1, len(parts) + 1)):
            problems.append((path, "a symbolic link: refused"))
            continue
        if real_root not in target.resolve().parents:
            problems.append((path, "resolves outside the package"))
            continue
        if not target.is_file():
            problems.append((path, "listed in manifest.json but missing"))
            continue
        if target.stat().st_size > MAX_FILE_BYTES:
            problems.append((path, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB"))
            continue
        data = target.read_bytes()
        if _digest(data) != expected:
            problems.append(
                (
                    path,
                    f"changed after export: its SHA-256 is {_digest(data)[:16]}…, "
                    f"manifest.json says {expected[:16]}…",
                )
            )
            continue
        files[path] = data
    _unlisted(root, {p for p in listed if isinstance(p, str)}, problems)
    for required in (SKILL_FILE, FLOW_FILE):
        if required not in listed:
            problems.append((required, "missing from the package"))
    front = _read_front_matter(files.get(SKILL_FILE), skill_name, problems)
    if problems or front is None:
        raise SkillPackageError(label, problems)
    return PackageFiles(
        directory=root, skill_name=skill_name, digest=digest, front_matter=front, files=files
    )


def _read_front_matter(
    data: bytes | None, skill_name: str, problems: list[tuple[str | None, str]]
) -> SkillFrontMatter | None:
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        problems.append((SKILL_FILE, "not UTF-8 text"))
        return None
    raw, why = _front_matter(text)
    if raw is None:
        problems.append((SKILL_FILE, why or "no front matter"))
        return None
    for key in sorted(set(raw) - _FRONT_MATTER_KEYS, key=str):
        problems.append(
            (
                SKILL_FILE,
                f"front matter: unknown field {key!r} (the format has "
                f"{', '.join(sorted(_FRONT_MATTER_KEYS))})",
            )
        )
    known = {k: v for k, v in raw.items() if k in _FRONT_MATTER_KEYS}
    try:
        front = SkillFrontMatter.model_validate(known)
    except ValidationError as exc:
        for e in exc.errors():
            problems.append(
                (
                    SKILL_FILE,
                    f"front matter: {field_path(e['loc']) or '(front matter)'}: {e['msg']}",
                )
            )
        return None
    if front.name != skill_name:
        problems.append(
            (
                SKILL_FILE,
                f"front matter: name {front.name!r} is not the manifest's skill {skill_name!r}",
            )
        )
    return front
