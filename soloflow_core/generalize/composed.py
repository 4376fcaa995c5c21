"""Texts composed of known values and fixed words: learned as string templates.

An agent often writes a string out of values it has seen: an e-mail body ``"Your invoice:
https://…/INV-31.pdf"`` made of a step's output, or a final answer ``"Your order O-5004 is
in transit (ETA 2026-11-28)."``. Given the same string in several occurrences and, per
occurrence, the values it may be made of (each under a template reference such as
``step_3.url`` or ``_trigger.email``), :func:`compose_template` finds the one template —
fixed text with ``{{reference}}`` holes — that writes every occurrence's string exactly.

Fixed text is the same in every occurrence; a hole takes, in every occurrence, the value
of the same reference. Values shorter than :data:`MIN_VALUE_CHARS` characters are not
looked for (a ``1`` or an ``a`` is found everywhere). A literal ``{{`` in the fixed text is
written ``{{'{{'}}`` (see :mod:`soloflow_core.flow.templates`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from soloflow_core.flow.templates import maybe_json

__all__ = ["MIN_VALUE_CHARS", "compose_template", "leaf_texts"]

MIN_VALUE_CHARS = 2
_MAX_LEAVES = 2000
_MAX_DEPTH = 6
_MAX_HOLES = 16


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    return None


def leaf_texts(root: str, value: Any) -> Iterator[tuple[str, str]]:
    """``(reference, text)`` of every scalar leaf of ``value`` under ``root`` — the whole
    value first, then fields by dotted path (JSON text is parsed; list items by index)."""
    count = 0

    def walk(node: Any, path: tuple[str, ...], depth: int) -> Iterator[tuple[str, str]]:
        nonlocal count
        node = maybe_json(node)
        count += 1
        if count > _MAX_LEAVES:
            return
        text = _text(node)
        if text is not None:
            yield ".".join((root, *path)), text
            return
        if depth >= _MAX_DEPTH:
            return
        if isinstance(node, Mapping):
            for k, v in node.items():
                if isinstance(k, str) and k and "." not in k and " " not in k and "{" not in k:
                    yield from walk(v, (*path, k), depth + 1)
        elif isinstance(node, list):
            for i, v in enumerate(node[:200]):
                yield from walk(v, (*path, str(i)), depth + 1)

    yield from walk(value, (), 0)


def _spans(text: str, values: Mapping[str, str]) -> list[tuple[int, int, list[str]]]:
    """Non-overlapping spans of ``text`` equal to some value, longest values first; each with
    every reference whose value it equals."""
    by_text: dict[str, list[str]] = {}
    for ref, value in values.items():
        if len(value) >= MIN_VALUE_CHARS:
            by_text.setdefault(value, []).append(ref)
    taken = [False] * len(text)
    spans: list[tuple[int, int, list[str]]] = []
    for value in sorted(by_text, key=len, reverse=True):
        start = text.find(value)
        while start != -1:
            end = start + len(value)
            if not any(taken[start:end]):
                spans.append((start, end, by_text[value]))
                for i in range(start, end):
                    taken[i] = True
            start = text.find(value, end)
    spans.sort()
    return spans[:_MAX_HOLES]


def _escape(fixed: str) -> str:
    return fixed.replace("{{", "{{'{{'}}")


def compose_template(texts: Sequence[str], sources: Sequence[Mapping[str, str]]) -> str | None:
    """The template that writes ``texts[k]`` from ``sources[k]`` for every k, or None.

    Args:
        texts: the string as each occurrence has it (at least two occurrences).
        sources: per occurrence, reference → the text of its value (:func:`leaf_texts`).

    Returns:
        A template with at least one hole, or None when the strings are all the same (a
        constant), differ in their fixed text, or hold no value of ``sources``.

    Example:
        >>> compose_template(
        ...     ["Your invoice: https://x/INV-1.pdf", "Your invoice: https://x/INV-7.pdf"],
        ...     [{"step_2.url": "https://x/INV-1.pdf"}, {"step_2.url": "https://x/INV-7.pdf"}])
        'Your invoice: {{step_2.url}}'
    """
    if len(texts) < 2 or len(texts) != len(sources) or len(set(texts)) == 1:
        return None
    first = texts[0]
    spans = _spans(first, sources[0])
    if not spans:
        return None
    fixed: list[str] = []
    pos = 0
    for start, end, _ in spans:
        fixed.append(first[pos:start])
        pos = end
    fixed.append(first[pos:])
    choices: list[list[str]] = [list(refs) for _, _, refs in spans]
    for text, values in zip(texts[1:], sources[1:], strict=True):
        narrowed = _consistent(text, values, fixed, choices=choices)
        if narrowed is None:
            return None
        choices = narrowed
    out = [_escape(fixed[0])]
    for i, refs in enumerate(choices):
        out.append("{{" + sorted(refs, key=lambda r: (len(r), r))[0] + "}}")
        out.append(_escape(fixed[i + 1]))
    return "".join(out)


def _consistent(
    text: str, values: Mapping[str, str], fixed: list[str], *, choices: list[list[str]]
) -> list[list[str]] | None:
    """The references of each hole that also write ``text`` with the same fixed parts; None
    when no choice does. A depth-first match of the holes left to right."""

    def match(i: int, pos: int) -> list[list[str]] | None:
        if i == len(choices):
            return [] if pos == len(text) else None
        best: list[list[str]] | None = None
        tried: dict[str, list[list[str]] | None] = {}
        keep: list[str] = []
        for ref in choices[i]:
            value = values.get(ref)
            if value is None or not text.startswith(value, pos):
                continue
            nxt = pos + len(value)
            if not text.startswith(fixed[i + 1], nxt):
                continue
            if value not in tried:
                tried[value] = match(i + 1, nxt + len(fixed[i + 1]))
            rest = tried[value]
            if rest is not None:
                keep.append(ref)
                best = (
                    rest
                    if best is None
                    else [sorted(set(a) | set(b)) for a, b in zip(best, rest, strict=True)]
                )
        if not keep or best is None:
            return None
        return [keep, *best]

    if not text.startswith(fixed[0]):
        return None
    return match(0, len(fixed[0]))
