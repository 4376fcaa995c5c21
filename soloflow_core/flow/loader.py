"""Flow files: a ``FlowDefinition`` from JSON or YAML, every problem at its line.

The format is picked by the extension (``.json``, ``.yaml``, ``.yml``), else sniffed: a file
whose first character is ``{`` is JSON. Each problem — a syntax error, a wrong type, an
unknown field, a cycle, an unknown step or ``skill_key`` — is reported with the field's path
(``steps[2].retry_max``) and, where it can be found, its line and column::

    flow.yaml:14:5: steps[2].retry_max: Input should be a valid integer (got 'three')
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from soloflow_core.errors import FlowFileError, FlowFileProblem, FlowValidationError
from soloflow_core.flow.validate import FlowPlan, validate_flow
from soloflow_core.models import FlowDefinition, FlowStep

__all__ = ["load_flow_file", "validate_flow_file"]

Loc = tuple[str | int, ...]
Position = tuple[int, int]
"""1-based (line, column)."""


@dataclass(slots=True)
class _Parsed:
    data: Any
    positions: dict[Loc, Position]
    problems: list[FlowFileProblem]
    """Parsed, but suspicious (duplicate keys)."""


def load_flow_file(path: str | Path) -> FlowDefinition:
    """Read a flow definition from a JSON or YAML file.

    Raises:
        FlowFileError: the file cannot be read or parsed, or a field is missing, unknown or of
            the wrong type; every problem carries its field path and line.
    """
    flow, _ = _load(Path(path))
    return flow


def validate_flow_file(
    path: str | Path, *, executors: Collection[str] | None = None
) -> tuple[FlowDefinition, FlowPlan]:
    """Load a flow file and validate the flow (DAG, references, templates, executors).

    Args:
        path: the JSON or YAML file.
        executors: the registered ``skill_key``s; when given, each step's must be one.

    Raises:
        FlowFileError: with every problem, each at its field path and line.
    """
    file = Path(path)
    flow, positions = _load(file)
    try:
        plan = validate_flow(flow, executors=executors)
    except FlowValidationError as exc:
        index = {s.id: i for i, s in enumerate(flow.steps)}  # a duplicated id: its last use
        issues = []
        for step, field, message in exc.problems:
            loc: Loc = (("steps", index[step]) if step in index else ()) + _field_loc(field or "")
            issues.append(_problem(loc, message, positions))
        raise FlowFileError(str(file), issues, flow=flow.name) from None
    return flow, plan


def _load(file: Path) -> tuple[FlowDefinition, dict[Loc, Position]]:
    name = str(file)
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise FlowFileError(
                name,
                [
                    FlowFileProblem(
                        path=None,
                        line=None,
                        column=None,
                        message=f"the file is {size:,} bytes; a flow file is at most "
                        f"{MAX_FILE_BYTES:,}",
                    )
                ],
            )
        raw = file.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = getattr(exc, "strerror", None) or exc
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=None,
                    column=None,
                    message=f"cannot read the file ({reason}); check the path",
                )
            ],
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=line,
                    column=None,
                    message=f"not UTF-8 text (byte {exc.start}); save the file as UTF-8",
                )
            ],
        ) from None
    if not text.strip():
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=None,
                    column=None,
                    message="the file is empty; write a flow with `name` and `steps`",
                )
            ],
        )
    suffix = file.suffix.lower()
    is_json = suffix == ".json" or (
        suffix not in (".yaml", ".yml") and text.lstrip().startswith("{")
    )
    parsed = _parse_json(name, text) if is_json else _parse_yaml(name, text)
    try:
        flow = FlowDefinition.model_validate(parsed.data)
    except ValidationError as exc:
        issues = [_pydantic_problem(e, parsed.positions) for e in exc.errors(include_url=False)]
        raise FlowFileError(name, sorted(parsed.problems + issues, key=_line_order)) from None
    if parsed.problems:
        raise FlowFileError(name, parsed.problems, flow=flow.name)
    return flow, parsed.positions


def _line_order(p: FlowFileProblem) -> tuple[int, int]:
    return (p.line or 0, p.column or 0)


# ---------------------------------------------------------------- YAML


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader when PyYAML was built with it: ten times faster, the same marks."""
MAX_FILE_BYTES = 10 * 1024 * 1024
"""Largest flow file read."""
MAX_YAML_NODES = 100_000
"""Most values a YAML file may stand for once its aliases (``*name``) are expanded."""
MAX_DEPTH = 100
"""Deepest nesting of mappings and lists in a flow file."""


class _TooBig(Exception):
    def __init__(self, node: Any, message: str) -> None:
        super().__init__(message)
        self.node, self.message = node, message


def _check_size(node: Any) -> None:
    """Refuse a node graph that expands past :data:`MAX_YAML_NODES` or nests past
    :data:`MAX_DEPTH`, before anything walks it expanded (a "billion laughs" file is a few
    hundred bytes that stand for billions of values). Each node is counted once: linear."""
    sizes: dict[int, int] = {}

    def size(n: Any, depth: int) -> int:
        known = sizes.get(id(n))
        if known is not None:
            return known
        if depth > MAX_DEPTH:
            raise _TooBig(n, f"nested deeper than {MAX_DEPTH} levels; flatten the value")
        sizes[id(n)] = 1  # an alias of its own ancestor counts once (it is refused later)
        total = 1
        if isinstance(n, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total += sum(size(v, depth + 1) for v in n.value)
        if total > MAX_YAML_NODES:
            raise _TooBig(
                n,
                f"this value expands to more than {MAX_YAML_NODES:,} values through "
                "YAML aliases (*name); write the values out, or use fewer aliases",
            )
        sizes[id(n)] = total
        return total

    size(node, 0)


def _parse_yaml(name: str, text: str) -> _Parsed:
    loader = _YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_size(node)
        data = loader.construct_document(node) if node is not None else None
    except _TooBig as exc:
        line, col = _mark(exc.node)
        raise FlowFileError(
            name, [FlowFileProblem(path=None, line=line, column=col, message=exc.message)]
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(x for x in (exc.context, exc.problem) if x) or "YAML syntax error"
        fix = "fix the YAML at this line"
        lines = text.splitlines()
        if mark is not None and mark.line < len(lines) and "{{" in lines[mark.line]:
            # YAML reads a bare `{{...}}` as a mapping inside a mapping.
            fix = 'quote the template: "{{step_1.field}}", not {{step_1.field}}'
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                    message=f"YAML syntax error: {what}; {fix}",
                )
            ],
        ) from None
    except yaml.YAMLError as exc:
        raise FlowFileError(
            name, [FlowFileProblem(path=None, line=None, column=None, message=f"YAML error: {exc}")]
        ) from None
    except RecursionError:
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=None,
                    column=None,
                    message="the YAML is nested too deeply or refers to itself",
                )
            ],
        ) from None
    finally:
        loader.dispose()
    positions: dict[Loc, Position] = {}
    problems: list[FlowFileProblem] = []
    if node is not None:
        _walk_yaml(node, (), positions, problems=problems, active=set())
    return _Parsed(data, positions, problems)


def _mark(node: Any) -> Position:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _walk_yaml(
    node: Any,
    loc: Loc,
    positions: dict[Loc, Position],
    *,
    problems: list[FlowFileProblem],
    active: set[int],
) -> None:
    if id(node) in active:  # an alias that refers to its own ancestor
        return
    active.add(id(node))
    positions.setdefault(loc, _mark(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            k = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            if k in seen:
                line, col = _mark(key)
                problems.append(
                    FlowFileProblem(
                        path=_format_loc(loc + (k,)),
                        line=line,
                        column=col,
                        message=f"key {k!r} appears twice in this mapping; keep one",
                    )
                )
            seen.add(k)
            positions[loc + (k,)] = _mark(key)
            _walk_yaml(value, loc + (k,), positions, problems=problems, active=active)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk_yaml(item, loc + (i,), positions, problems=problems, active=active)
    active.discard(id(node))


# ---------------------------------------------------------------- JSON

_JSON_TOKEN = re.compile(r'[{}\[\]:,]|"(?:[^"\\]|\\.)*"|[^\s{}\[\]:,"]+', re.DOTALL)


def _parse_json(name: str, text: str) -> _Parsed:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=exc.lineno,
                    column=exc.colno,
                    message=f"JSON syntax error: {exc.msg}; fix the JSON at this line",
                )
            ],
        ) from None
    except RecursionError:
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None, line=None, column=None, message="the JSON is nested too deeply"
                )
            ],
        ) from None
    except ValueError as exc:  # a number of more than 4,300 digits
        raise FlowFileError(
            name,
            [
                FlowFileProblem(
                    path=None,
                    line=None,
                    column=None,
                    message=f"JSON value refused: {str(exc).split(';')[0]}; write a shorter number",
                )
            ],
        ) from None
    positions, problems = _json_positions(text)
    return _Parsed(data, positions, problems)


def _json_positions(text: str) -> tuple[dict[Loc, Position], list[FlowFileProblem]]:
    """Where each key and array item of valid JSON text starts (a token scan, no recursion)."""
    starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def pos(offset: int) -> Position:
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    positions: dict[Loc, Position] = {}
    problems: list[FlowFileProblem] = []
    # Each frame: [loc, is_object, current key or index, keys seen]
    stack: list[list[Any]] = []
    expect_key = False

    def value_at(offset: int) -> Loc:
        if not stack:
            loc: Loc = ()
        else:
            top = stack[-1]
            loc = top[0] + (top[2],)
        if not stack or not stack[-1][1]:
            positions.setdefault(loc, pos(offset))
        return loc

    for m in _JSON_TOKEN.finditer(text):
        tok, start = m.group(), m.start()
        if tok in "{[":
            if len(stack) >= MAX_DEPTH:
                line, col = pos(start)
                problems.append(
                    FlowFileProblem(
                        path=_format_loc(value_at(start)),
                        line=line,
                        column=col,
                        message=f"nested deeper than {MAX_DEPTH} levels; flatten the value",
                    )
                )
                break
            stack.append([value_at(start), tok == "{", 0, set()])
            expect_key = tok == "{"
        elif tok in "}]":
            stack.pop()
            expect_key = False
        elif tok == ":":
            expect_key = False
        elif tok == ",":
            top = stack[-1]
            if top[1]:
                expect_key = True
            else:
                top[2] += 1
        elif expect_key:
            top = stack[-1]
            key = json.loads(tok)
            top[2] = key
            loc = top[0] + (key,)
            if key in top[3]:
                line, col = pos(start)
                problems.append(
                    FlowFileProblem(
                        path=_format_loc(loc),
                        line=line,
                        column=col,
                        message=f"key {key!r} appears twice in this object; keep one",
                    )
                )
            top[3].add(key)
            positions[loc] = pos(start)
        else:
            value_at(start)
    return positions, problems


# ---------------------------------------------------------------- problems


def _format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _field_loc(field: str) -> Loc:
    """``input_map.items[0].id`` → ``("input_map", "items", 0, "id")``."""
    loc: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        loc.append(int(index) if index else name)
    return tuple(loc)


def _position(loc: Loc, positions: dict[Loc, Position]) -> Position | None:
    """The field's position, else its nearest ancestor's (a missing field: its parent)."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in positions:
            return positions[loc[:n]]
    return None


def _problem(loc: Loc, message: str, positions: dict[Loc, Position]) -> FlowFileProblem:
    at = _position(loc, positions)
    return FlowFileProblem(
        path=_format_loc(loc) or None,
        line=at[0] if at else None,
        column=at[1] if at else None,
        message=message,
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _model_at(loc: Loc) -> type[BaseModel] | None:
    if len(loc) == 1:
        return FlowDefinition
    if len(loc) == 3 and loc[0] == "steps" and isinstance(loc[1], int):
        return FlowStep
    return None


def _pydantic_problem(err: Any, positions: dict[Loc, Position]) -> FlowFileProblem:
    loc: Loc = tuple(err["loc"])
    kind, value = err["type"], err.get("input")
    if not loc:
        message = (
            f"the file must hold one flow: a mapping with `name` and `steps` "
            f"(got {type(value).__name__})"
        )
    elif kind == "missing":
        message = f"required field {loc[-1]!r} is missing; add it"
    elif kind == "extra_forbidden":
        model = _model_at(loc)
        allowed = list(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        message = f"unknown field {loc[-1]!r}"
        message += f"; did you mean {close[0]!r}?" if close else "; remove it"
        if allowed:
            message += f" (allowed: {', '.join(allowed)})"
    elif kind == "value_error":  # a check of ours: its message names the value already
        message = str(err["msg"]).removeprefix("Value error, ")
    else:
        message = f"{err['msg']} (got {_short(value)})"
    return _problem(loc, message, positions)
