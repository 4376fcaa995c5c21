"""The shape of a value learned from its examples (:func:`learn_shape`): what an extraction
rule looks for when the words before the value vary (``mia_li_3668``, ``ZFA04Y``, ``HAT170``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["learn_shape"]

_CLASSES = (
    ("[a-z]+", re.compile(r"[a-z]+")),
    ("[A-Z][a-z]+", re.compile(r"[A-Z][a-z]+")),
    ("[A-Z]+", re.compile(r"[A-Z]+")),
    (r"\d+", re.compile(r"\d+")),
)
_CLASS_NAMES = frozenset(name for name, _ in _CLASSES)


def _shape_tokens(value: str) -> list[str] | None:
    """``value`` as a list of character-class runs and literal separators, e.g.
    ``mia_li_3668`` → ``["[a-z]+", "_", "[a-z]+", "_", "\\d+"]``; None for a value with
    spaces or other characters than letters, digits and ``_-./:#@``."""
    out: list[str] = []
    pos = 0
    while pos < len(value):
        ch = value[pos]
        if ch in "_-./:#@":
            out.append(re.escape(ch))
            pos += 1
            continue
        for token, rx in _CLASSES:
            m = rx.match(value, pos)
            if m:
                out.append(token)
                pos = m.end()
                break
        else:
            return None
    return out


def _collapse(tokens: list[str]) -> str:
    """The regex of ``tokens`` with each run of (class, separator) pairs written once, ``+``:
    ``[a-z]+ _ [a-z]+ _ \\d+`` → ``(?:[a-z]+_)+\\d+``."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        unit = tokens[i : i + 2]
        if len(unit) == 2 and unit[0] in _CLASS_NAMES and unit[1] not in _CLASS_NAMES:
            while tokens[i : i + 2] == unit:
                i += 2
            out.append("(?:" + "".join(unit) + ")+")
        else:
            out.append(tokens[i])
            i += 1
    return "".join(out)


def learn_shape(values: Sequence[str]) -> str | None:
    """A regex every value matches whole, from their character classes: the same run of
    letters, digits and separators (a repeated word-and-separator counted once, so
    ``mia_li_3668`` and ``aarav_ahmed_6699`` and ``ana_de_la_cruz_1`` share
    ``(?:[a-z]+_)+\\d+``); codes of one length mixing capitals and digits in any order
    (``ZFA04Y``, ``1N99U6``) share ``[A-Z0-9]{6}`` with a digit and a capital required; ids
    of fixed-length groups between the same separators (UUIDs) share their groups. None
    when the values differ in shape otherwise, or the shape is a single class of characters
    (a plain word or number says nothing of where it stands).
    """
    shapes = set()
    for v in values:
        tokens = _shape_tokens(v)
        if tokens is None or len(tokens) < 3:
            return _code_shape(values)
        shapes.add(_collapse(tokens))
        if len(shapes) > 1:
            return _code_shape(values)
    return shapes.pop() if shapes else None


_CODE_ALPHABETS = (("A-Z0-9", "A-Z"), ("a-z0-9", "a-z"))
_RUN = re.compile(r"(?P<upper>[A-Z]+)|(?P<lower>[a-z]+)|(?P<digit>\d+)|(?P<other>.)", re.DOTALL)
_RUN_CLASS = {"upper": "[A-Z]", "lower": "[a-z]", "digit": r"\d", "other": ""}


def _runs(value: str) -> list[tuple[str, re.Match[str]]]:
    return [(str(m.lastgroup), m) for m in _RUN.finditer(value)]


def _code_shape(values: Sequence[str]) -> str | None:
    """The shape of codes of one length: the same runs of capitals, small letters and digits
    of the same lengths (``HAT170``, ``HAT005``: ``[A-Z]{3}\\d{3}``), or capitals and digits
    (or small letters and digits) in any order, each holding both (``ZFA04Y``, ``1N99U6``):
    a digit and a letter are required, so no plain word or number has it. None otherwise."""
    if len(values) < 2 or len({len(v) for v in values}) != 1 or len(values[0]) < 4:
        return None
    runs = {tuple((_RUN_CLASS[k], len(m.group())) for k, m in _runs(v)) for v in values}
    if len(runs) == 1 and len(next(iter(runs))) > 1 and all(c for c, _ in next(iter(runs))):
        return "".join(f"{c}{{{n}}}" for c, n in next(iter(runs)))  # HAT170: [A-Z]{3}\d{3}
    for alphabet, letters in _CODE_ALPHABETS:
        if all(
            re.fullmatch(f"[{alphabet}]+", v)
            and re.search(r"\d", v)
            and re.search(f"[{letters}]", v)
            for v in values
        ):
            n = len(values[0])
            return rf"(?=[{alphabet}]*\d)(?=[{alphabet}]*[{letters}])[{alphabet}]{{{n}}}"
    return _grouped_shape(values)


_SEPARATOR = re.compile(r"([-_./:#])")
_GROUP_ALPHABETS = (r"\d", "[0-9a-f]", "[0-9A-F]", "[A-Z0-9]", "[a-z0-9]")


def _grouped_shape(values: Sequence[str]) -> str | None:
    """The shape of ids made of groups of one length each between the same separators, every
    group over one alphabet (``3f2b8c1e-9d4a-4c7e-b5a1-0e6f2d9c8b7a``: ``[0-9a-f]{8}-…``), the
    values holding a digit and a letter. None otherwise."""
    parts = [_SEPARATOR.split(v) for v in values]
    skeleton = {tuple(p if i % 2 else len(p) for i, p in enumerate(ps)) for ps in parts}
    if len(skeleton) != 1 or len(parts[0]) < 3:
        return None
    if not all(re.search(r"\d", v) and re.search(r"[^\W\d_]", v) for v in values):
        return None
    out: list[str] = []
    for i, group in enumerate(parts[0]):
        if i % 2:
            out.append(re.escape(group))
            continue
        column = "".join(ps[i] for ps in parts)
        alphabet = next((a for a in _GROUP_ALPHABETS if re.fullmatch(f"{a}+", column)), None)
        if alphabet is None or not group:
            return None
        out.append(f"{alphabet}{{{len(group)}}}")
    return "".join(out)
