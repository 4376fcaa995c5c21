"""The regular expressions of flows (``extraction.<input>.pattern``): bounded in size when a
flow is validated, and bounded in time whenever they are matched against a text.

Python's ``re`` backtracks without limit, so one pattern such as ``(a|aa)+$`` could hang a
process on a 40-character task text. These patterns go through the ``regex`` package instead:
every match takes a ``timeout`` (:data:`MATCH_TIMEOUT`), and running past it raises
:class:`~soloflow_core.errors.PatternTimeoutError`, naming the field and the pattern. A
pattern must also be short (:data:`MAX_PATTERN_CHARS`) and compile to a bounded program
(:data:`MAX_PATTERN_SIZE`: ``(?:a{1000}){1000}`` would take seconds and gigabytes).

The value shapes SoloFlow learns itself (:func:`~soloflow_core.generalize.arguments.learn_shape`)
are matched the same way, since they end up in flow files that users may edit.
"""

from __future__ import annotations

import functools
from typing import Any

import regex

from soloflow_core.errors import PatternTimeoutError
from soloflow_core.flow.phrases import find_phrases

__all__ = [
    "MATCH_TIMEOUT",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_SIZE",
    "extraction_regex",
    "find_all",
    "label_before",
    "pattern_problem",
    "pattern_size",
    "search",
]

MAX_PATTERN_CHARS = 1000
"""Longest ``extraction.<input>.pattern``."""

MAX_PATTERN_SIZE = 50_000
"""Largest program a pattern may compile to, counted as the pieces its repeat counts
(``{m,n}``) copy: ``\\d{4}`` is 4, ``(\\w{10}-){5}`` 55."""

MATCH_TIMEOUT = 0.25
"""Seconds one match of a flow's pattern against one text may take. The ``regex`` package
checks it as it backtracks, so a match stops within a few times this, whatever the text."""

_PROBE_TIMEOUT = 0.1
_PROBE_CONFIRM = 0.5
_PROBES = tuple(c * 64 + "!" for c in ("a", "A", "0", " ", "_", "-", ".", "@", "a0", "a "))
"""Texts on which a catastrophically backtracking pattern (``(a|aa)+$``, ``(\\w+\\s?)+x``)
runs for ever and any other takes microseconds."""

_FIX = (
    "rewrite it without nested or overlapping quantifiers (e.g. '(a+)+' → 'a+', "
    "'(a|aa)+' → 'a+', '(\\w+\\s?)+' → '[\\w\\s]+')"
)


def _repeat_at(pattern: str, i: int) -> tuple[int, int] | None:
    """The upper bound of a ``{m}``, ``{m,}`` or ``{m,n}`` quantifier at ``pattern[i]`` and
    the index after it; None when none stands there."""
    end = pattern.find("}", i)
    if end < 0:
        return None
    low, comma, high = pattern[i + 1 : end].partition(",")
    if not low.strip().isdigit() and not (comma and high.strip().isdigit()):
        return None
    bound = high.strip() if comma and high.strip() else low.strip()
    return (int(bound) if bound.isdigit() else 1), end + 1


def pattern_size(pattern: str) -> int:
    """How many pieces the compiled ``pattern`` holds: each literal, class or escape is 1, a
    group the sum of what it holds, and a ``{m,n}`` repeat multiplies what it follows by its
    upper bound (``{m,}`` by ``m``). Ends early once over :data:`MAX_PATTERN_SIZE`."""
    sums = [0]
    last = 0
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            j = i + 2
            if pattern[i + 1 : i + 2] in ("p", "P", "N") and pattern[j : j + 1] == "{":
                j = max(j, pattern.find("}", j) + 1)
            last, i = 1, j
            sums[-1] += 1
        elif ch == "[":
            j = i + 1
            if pattern[j : j + 1] == "^":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            last, i = 1, j + 1
            sums[-1] += 1
        elif ch == "(":
            sums.append(0)
            i += 1
        elif ch == ")" and len(sums) > 1:
            last = sums.pop()
            sums[-1] += last
            i += 1
        elif ch == "{" and (rep := _repeat_at(pattern, i)) is not None:
            bound, i = rep
            sums[-1] += last * (bound - 1)
            last *= bound
        else:
            last = 1
            sums[-1] += 1
            i += 1
        if sums[-1] > MAX_PATTERN_SIZE:
            break
    return sum(sums)


def pattern_problem(pattern: str) -> str | None:
    """What is wrong with a flow's ``pattern``, as a sentence that says how to fix it; None
    when it is short enough, compiles to a bounded program and does not backtrack
    catastrophically on the usual runs of one character (the check takes microseconds for a
    sound pattern, a second or two for a bad one)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"pattern is {len(pattern):,} characters; at most {MAX_PATTERN_CHARS:,}"
    size = pattern_size(pattern)
    if size > MAX_PATTERN_SIZE:
        return (
            f"pattern repeats too much (over {MAX_PATTERN_SIZE:,} pieces once its {{m,n}} "
            "counts are multiplied out); use smaller counts, or '+' / '*' instead of a large {n}"
        )
    try:
        regex.compile(pattern)  # its error's position is the pattern's own
        rx = extraction_regex(pattern, "")
    except (regex.error, RecursionError, OverflowError, MemoryError) as exc:
        return f"not a valid regular expression: {exc}; fix it (e.g. escape a literal '(' as '\\(')"
    for text in _probes(pattern):
        try:
            rx.search(text, timeout=_PROBE_TIMEOUT)
            continue
        except TimeoutError:
            pass
        try:  # confirmed with more time: a loaded machine may have held the first try
            rx.search(text, timeout=_PROBE_CONFIRM)
        except TimeoutError:
            return (
                f"pattern backtracks catastrophically: matching it against {text[:6]!r}… "
                f"({len(text)} characters) ran past {_PROBE_CONFIRM:g} s; {_FIX}"
            )
    return None


def _probes(pattern: str) -> list[str]:
    """:data:`_PROBES`, and a run of each other character the pattern names (``(b|bb)+$``
    backtracks only on a run of ``b``)."""
    taken = {text[0] for text in _PROBES}
    own = dict.fromkeys(c for c in pattern if c.isprintable() and c not in _META and c not in taken)
    return [*_PROBES, *(c * 64 + "!" for c in list(own)[:_MAX_OWN_PROBES])]


_META = frozenset("\\()[]{}|*+?^$!")
_MAX_OWN_PROBES = 24


@functools.lru_cache(maxsize=512)
def extraction_regex(pattern: str, anchor: str) -> Any:
    """The compiled form an extraction rule is matched with: the value (group ``v``) after the
    word ``anchor`` (any case), or, without an anchor, a value standing on its own.

    Raises:
        regex.error: ``pattern`` does not compile (validation refuses such a flow).
    """
    value = f"(?P<v>{pattern})"
    if anchor:
        return regex.compile(rf"\b{regex.escape(anchor)}\b[\s:=#'\"(]*{value}", regex.IGNORECASE)
    return regex.compile(rf"(?<![\w@.\-]){value}(?![\w@])")


def _timed_out(pattern: str, *, field: str, text: str, flow: str | None) -> PatternTimeoutError:
    where = (f"flow {flow!r}, " if flow else "") + f"field {field!r}"
    return PatternTimeoutError(
        f"{where}: the regular expression {pattern!r} ran past {MATCH_TIMEOUT:g} s on a "
        f"{len(text):,}-character text (it backtracks catastrophically); {_FIX}, then "
        "`soloflow flows validate` the flow",
        pattern=pattern,
        field=field,
        flow=flow,
    )


def search(rule: dict[str, Any], text: str, *, field: str, flow: str | None = None) -> Any:
    """The first match of the extraction ``rule`` in ``text`` (None if none).

    Raises:
        PatternTimeoutError: the match ran past :data:`MATCH_TIMEOUT`.
    """
    if rule.get("shape") == "phrase":  # a label's free text: scanned, no pattern
        found = find_phrases(rule, text)
        return found[0] if found else None
    if rule.get("labelled"):
        found = find_all(rule, text, field=field, flow=flow)
        return found[0] if found else None
    pattern = str(rule["pattern"])
    rx = extraction_regex(pattern, str(rule.get("anchor") or ""))
    try:
        return rx.search(text, timeout=MATCH_TIMEOUT)
    except TimeoutError:
        raise _timed_out(pattern, field=field, text=text, flow=flow) from None


def find_all(rule: dict[str, Any], text: str, *, field: str, flow: str | None = None) -> list[Any]:
    """Every match of the extraction ``rule`` in ``text``, all found within one
    :data:`MATCH_TIMEOUT`.

    Raises:
        PatternTimeoutError: the matching ran past :data:`MATCH_TIMEOUT`.
    """
    if rule.get("shape") == "phrase":
        return list(find_phrases(rule, text))
    pattern = str(rule["pattern"])
    rx = extraction_regex(pattern, str(rule.get("anchor") or ""))
    try:
        found = list(rx.finditer(text, timeout=MATCH_TIMEOUT))
    except TimeoutError:
        raise _timed_out(pattern, field=field, text=text, flow=flow) from None
    if rule.get("labelled"):  # among values of one shape, the one its own words introduce
        labels = {str(w).lower() for w in rule.get("labels") or () if str(w).strip()}
        found = [m for m in found if _is_label(label_before(text, m.start("v")), labels)]
    return found


_SKIPPED_BEFORE = " \t:=#'\"(\u2018\u201c$\u20ac\u00a3\u00a5"
"""What may stand between a value and the word that introduces it: blanks, ``:``, ``#``,
quotes, an opening parenthesis and the currency signs (``to €89.99`` is introduced by ``to``)."""
_LAST_WORD = regex.compile(r"[^\W\d_]+$")


def label_before(text: str, start: int) -> str:
    """The word that introduces the value starting at ``text[start]``, lowercased: the last
    word of letters before it, past blanks, ``:``, ``#``, quotes, ``(`` and currency signs
    (``transaction #31`` → ``transaction``); "" when a digit, a dot or nothing stands there."""
    m = _LAST_WORD.search(text[max(0, start - 64) : start].rstrip(_SKIPPED_BEFORE))
    return m.group().lower() if m else ""


def _is_label(word: str, labels: set[str]) -> bool:
    """Whether ``word`` is one of ``labels``, or one of them with a plural ``s``."""
    return bool(word) and (word in labels or (word.endswith("s") and word[:-1] in labels))
