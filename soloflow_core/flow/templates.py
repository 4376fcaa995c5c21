"""The template language of ``input_map`` values.

``{{_trigger.<name>}}`` is a flow input; ``{{<step_id>}}`` is a step's whole output and
``{{<step_id>.<dotted.path>}}`` a field of it (JSON or YAML text is parsed first, see :func:`maybe_json`; a path segment
that is a whole number indexes a list). A string that is exactly one template renders to
the referenced value itself (a dict stays a dict); templates inside longer text render as
text (JSON for non-strings). Anything that is not a string is a constant, rendered
recursively through dicts and lists. There is no ``eval``.

``{{'...'}}`` writes the quoted text as it is: ``{{'{{'}}`` is a literal ``{{``, so
``"Dear {{'{{'}}name}}"`` renders to ``Dear {{name}}``. :func:`escape_literal` writes any
recorded value that way; parsing is one pass over the string (linear in its length).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml


class _YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader, with dates and times kept as the text they are (a tool argument
    must stay JSON)."""


_YamlLoader.add_constructor(
    "tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node)
)

TRIGGER = "_trigger"
OPEN, CLOSE = "{{", "}}"
ESCAPED_OPEN = "{{'{{'}}"
"""How a literal ``{{`` is written in a template string."""
_SEGMENT = re.compile(r"^[^.\s{}]+$")
_SHOWN = 80  # characters of a bad template quoted in an error


class TemplateError(ValueError):
    """A template is malformed, or names something that is not there at run time."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed ``{{root.path}}``: ``root`` is ``_trigger`` or a step id."""

    root: str
    path: tuple[str, ...]
    text: str

    @property
    def is_trigger(self) -> bool:
        return self.root == TRIGGER


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + f"… ({len(text)} characters)"


@functools.lru_cache(maxsize=4096)
def parse_reference(text: str) -> Reference:
    """Parse the inside of ``{{...}}`` (cached: a flow's templates are rendered at every run)."""
    inner = text.strip()
    parts = inner.split(".") if inner else []
    if not parts or not all(_SEGMENT.match(p) for p in parts):
        raise TemplateError(
            f"malformed template {{{{{_shown(text)}}}}}: write {{{{_trigger.<input>}}}} or "
            "{{<step_id>.<dotted.path>}} (a literal {{ is written {{'{{'}})"
        )
    if parts[0] == TRIGGER and len(parts) < 2:
        raise TemplateError("template {{_trigger}} needs an input name: {{_trigger.<input>}}")
    return Reference(root=parts[0], path=tuple(parts[1:]), text="{{" + inner + "}}")


def _quoted(inner: str) -> str | None:
    """The text of a ``'...'`` literal template, or None when ``inner`` is not one."""
    s = inner.strip()
    if len(s) >= 2 and s[0] == s[-1] == "'" and "'" not in s[1:-1]:
        return s[1:-1]
    return None


def _scan(value: str) -> Iterator[str | Reference | TemplateError]:
    """The pieces of ``value`` in order: literal text, references, and the error of each
    malformed template. One pass: every ``find`` starts where the last one ended."""
    pos = 0
    while True:
        start = value.find(OPEN, pos)
        if start < 0:
            if pos < len(value):
                yield value[pos:]
            return
        if start > pos:
            yield value[pos:start]
        end = value.find(CLOSE, start + 2)
        if end < 0:
            yield TemplateError(
                f"unclosed template in {_shown(value)!r}: close it with }}}}, or write a "
                "literal {{ as {{'{{'}}"
            )
            return
        inner = value[start + 2 : end]
        literal = _quoted(inner)
        if literal is not None:
            yield literal
        else:
            try:
                yield parse_reference(inner)
            except TemplateError as exc:
                yield exc
        pos = end + 2


def escape_literal(value: Any) -> Any:
    """``value`` written so that it renders to itself: every ``{{`` in its strings (through
    dicts and lists) becomes ``{{'{{'}}``. For recorded constants put into ``input_map``.

    Example:
        >>> escape_literal({"x": "literal {{step_1.v}}"})
        {'x': "literal {{'{{'}}step_1.v}}"}
    """
    if isinstance(value, str):
        return value.replace(OPEN, ESCAPED_OPEN) if OPEN in value else value
    if isinstance(value, Mapping):
        return {k: escape_literal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_literal(v) for v in value]
    return value


def iter_references(value: Any, field: str = "") -> Iterator[tuple[str, Reference | TemplateError]]:
    """Every template in ``value`` with the dotted field path where it stands."""
    if isinstance(value, str):
        if OPEN in value:
            for piece in _scan(value):
                if not isinstance(piece, str):
                    yield field, piece
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from iter_references(v, f"{field}.{k}" if field else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from iter_references(v, f"{field}[{i}]")


MAX_YAML_CHARS = 200_000
"""Longer texts are not read as YAML (JSON text of any length still is)."""
_YAML_LINE = re.compile(r"^(?:- |[\w][\w .-]*:(?: |$))", re.MULTILINE)


def maybe_json(value: Any) -> Any:
    """Parse ``value`` if it is JSON text of an object or array, or YAML text of a mapping
    or a list (tools that answer in YAML, e.g. ``"- id_: '25'\n  location: Hall"``); else
    return it as is.

    YAML is read only from a text of several lines that starts like a YAML mapping or list
    (a ``key:`` or ``- `` line); a text cut off mid-document is read up to its last
    complete line.
    """
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "[") and s[-1:] in ("}", "]"):
            try:
                return json.loads(s)
            except (ValueError, RecursionError):  # not JSON, too many digits, nested too deep
                return value
        if "\n" in s and len(s) <= MAX_YAML_CHARS and _YAML_LINE.match(s):
            parsed = _yaml(s)
            if parsed is None and "\n" in s:
                parsed = _yaml(s[: s.rindex("\n")])
            if parsed is not None:
                return parsed
    return value


def _yaml(text: str) -> dict[Any, Any] | list[Any] | None:
    try:
        parsed = yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, TypeError):
        return None
    return parsed if isinstance(parsed, dict | list) and parsed else None


def lookup(value: Any, path: tuple[str, ...], *, where: str) -> Any:
    """Follow ``path`` into ``value`` (parsing JSON text on the way)."""
    current = maybe_json(value)
    for i, seg in enumerate(path):
        current = maybe_json(current)
        if isinstance(current, Mapping) and seg in current:
            current = current[seg]
        elif (
            isinstance(current, list | tuple)
            and seg.lstrip("-").isdigit()
            and -len(current) <= int(seg) < len(current)
        ):
            current = current[int(seg)]
        else:
            got = type(current).__name__
            keys = (
                f"; keys: {', '.join(map(str, list(current)[:10]))}"
                if isinstance(current, Mapping)
                else ""
            )
            raise TemplateError(
                f"{where}: no '{'.'.join(path[: i + 1])}' in the value ({got}{keys})"
            )
    return current


def _to_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


@functools.lru_cache(maxsize=4096)
def _plan(value: str) -> Reference | tuple[str | Reference, ...] | None:
    """How :func:`render` treats a string: None (no template: as is), the
    :class:`Reference` it is made of entirely (the value keeps its type), or its pieces
    (literal text and references, substituted as text). Cached, like :func:`parse_reference`.

    Raises:
        TemplateError: a template in ``value`` is malformed or unclosed.
    """
    if OPEN not in value:
        return None
    pieces: list[str | Reference] = []
    for piece in _scan(value):
        if isinstance(piece, TemplateError):
            raise piece
        if isinstance(piece, str) and pieces and isinstance(pieces[-1], str):
            pieces[-1] += piece
        else:
            pieces.append(piece)
    refs = [p for p in pieces if isinstance(p, Reference)]
    if len(refs) == 1 and all(isinstance(p, Reference) or not p.strip() for p in pieces):
        return refs[0]
    return tuple(pieces)


def render(value: Any, *, inputs: Mapping[str, Any], results: Mapping[str, Any]) -> Any:
    """Render ``value`` against flow ``inputs`` and step ``results`` (step id → output)."""

    def resolve(ref: Reference) -> Any:
        if ref.is_trigger:
            name = ref.path[0]
            if name not in inputs:
                raise TemplateError(
                    f"{ref.text}: flow input {name!r} was not given; inputs: {', '.join(inputs) or 'none'}"
                )
            return lookup(inputs[name], ref.path[1:], where=ref.text)
        if ref.root not in results:
            raise TemplateError(f"{ref.text}: step {ref.root!r} has no output yet")
        return lookup(results[ref.root], ref.path, where=ref.text)

    if isinstance(value, str):
        plan = _plan(value)
        if plan is None:
            return value
        if isinstance(plan, Reference):
            return resolve(plan)
        return "".join(p if isinstance(p, str) else _to_text(resolve(p)) for p in plan)
    if isinstance(value, Mapping):
        return {k: render(v, inputs=inputs, results=results) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render(v, inputs=inputs, results=results) for v in value]
    return value
