"""Extraction rules: how an input's value is found again in a new task text.

A rule is a value shape (a regex) and, when the values are always introduced by the same
words, those words as an anchor (:func:`~soloflow_core.flow.patterns.extraction_regex`).
A rule is learned only when it gives back every recorded value from its task text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from soloflow_core.flow import patterns
from soloflow_core.flow.phrases import MAX_PHRASE_CHARS, MAX_PHRASE_WORDS, QUOTES
from soloflow_core.generalize.shapes import (
    CURRENCY_SIGNS,
    IBAN_PATTERN,
    MOD97,
    WORD_AFTER,
    learn_bounds,
    learn_shape,
    learn_to_come,
)

__all__ = [
    "PREPOSITIONS",
    "extract_inputs",
    "extract_value",
    "learn_extraction",
    "names_number",
]

_SHAPES = [
    ("email", r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    ("integer", r"\d+"),
    ("integer", r"-?\d+"),
    ("number", r"-?\d+(?:\.\d+)?"),
    ("phone", r"\+\d{6,15}"),
    ("token", r"[^\W_][\w\-./:]*"),
]


def learn_extraction(
    values: list[str], tasks: list[str], *, asked_at: Sequence[datetime | None] = ()
) -> dict[str, Any] | None:
    """A rule that finds the value in a task text: a value shape and, when every occurrence
    has the same word before the value, that word as an anchor. It keeps the words seen
    right before the value (``labels``: ``reservation``, ``booking``): routing sets aside a
    value introduced by another noun (``flight HAT170`` is no reservation); and the bounds of
    the values (:func:`~soloflow_core.generalize.shapes.learn_bounds`: ``digits``,
    ``date_format``), outside which routing sets a value aside (``999`` bags, ``2024-02-30``);
    ``to_come`` when every date was a day to come when its task was asked (``asked_at``, each
    task's time: :func:`~soloflow_core.generalize.shapes.learn_to_come`), so that a day that
    has passed is set aside."""
    rule = _shape_rule(values, tasks)
    if rule is None or (not rule["anchor"] and _another_of_the_shape(rule, tasks)):
        rule = _labelled_rule(values, tasks) or rule  # `transaction 7 to 1200`: two numbers
    rule = rule or _phrase_rule(values, tasks)
    if rule is not None and rule["shape"] == "email":  # `my last order to zoe@…`: a role
        rule["preps"] = sorted(
            {
                w
                for v, t in zip(values, tasks, strict=True)
                if (w := _word_before(v, t)) in PREPOSITIONS
            }
        )
    if rule is not None and rule["shape"] not in (
        "email",
        "phrase",
    ):  # an address is nothing but an address
        rule["labels"] = sorted({_word_before(v, t) for v, t in zip(values, tasks, strict=True)})
        numeric = rule["shape"] in ("integer", "number")
        # a number's bounds as the tasks wrote it (`42.50` has two decimals; JSON says 42.5)
        written = [extract_value(rule, t) or v for v, t in zip(values, tasks, strict=True)]
        rule.update(learn_bounds(written if numeric else values))
        fmt = rule.get("date_format")
        if isinstance(fmt, str) and learn_to_come(values, asked_at, fmt):
            rule["to_come"] = True
        signs = _signs(written, tasks) if numeric else ""
        if signs:
            rule["signs"] = signs
        if numeric:  # `2 bags`, `1100 EUR`: what may follow the number; `3 payments` may not
            rule["after"] = sorted(
                {_word_after(v, t) for v, t in zip(written, tasks, strict=True)} - {""}
            )
        wide = {**rule, "pattern": IBAN_PATTERN}  # any IBAN's length: check digits decide
        if rule.get("check_digits") == MOD97 and rule["shape"] == "learned":
            rule = wide if _gives_back(wide, values, tasks) else rule
    return rule


PREPOSITIONS = frozenset({"to"})
"""Words that give an address a role right before it (``my last order to zoe@…``: the one it
went to, not whose it is): an address rule keeps those its examples followed (``preps``:
``send … to bob@…``). ``for``, ``of`` and ``on`` are not among them: ``the password for
bob@…``, ``of``, ``on`` name the account itself as often as another one."""


_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?![\w@]|\.\d)")


def names_number(value: Any, task: str) -> bool:
    """Whether ``task`` names the number ``value`` standing alone, however written
    (``42.50`` or ``42.5`` for ``42.5``, ``1200`` for ``1200.0``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return any(float(m.group()) == value for m in _NUMBER.finditer(task))


def _standalone(value: str, task: str) -> int:
    """Where ``value`` stands alone in ``task`` (not inside a longer word: the ``2`` of
    ``to 2``, not of ``PY7FF2``), else its first occurrence."""
    m = re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", task)
    if m is None and re.fullmatch(r"-?\d+(?:\.\d+)?", value):  # 1200.0 written 1200
        m = next((n for n in _NUMBER.finditer(task) if float(n.group()) == float(value)), None)
    return m.start() if m else task.find(value)


def _word_after(value: str, task: str) -> str:
    """The word (or ``%``, ``/``) right after ``value`` in ``task``, lowercased; "" when
    punctuation or nothing follows."""
    i = _standalone(value, task)
    if i < 0:
        return ""
    m = WORD_AFTER.match(task, i + len(value))
    return (m.group(1) or "").lower() if m else ""


def _word_before(value: str, task: str) -> str:
    return patterns.label_before(task, _standalone(value, task))


def _labelled_rule(values: list[str], tasks: list[str]) -> dict[str, Any] | None:
    """A number rule told apart from the task's other numbers by the words that introduce
    it (``labelled``): ``scheduled transaction 7 to 1200`` holds the id after
    ``transaction`` and the amount after ``to``. Learned from two values or more when a word
    introduces each value and, in every task, the value is the only one of its shape that
    those words introduce."""
    shape = next((s for s in _SHAPES[1:4] if all(re.fullmatch(s[1], v) for v in values)), None)
    if shape is None or len(values) < 2:
        return None
    labels = sorted({_word_before(v, t) for v, t in zip(values, tasks, strict=True)})
    if "" in labels:
        return None
    rule: dict[str, Any] = {"shape": shape[0], "pattern": shape[1], "anchor": ""}
    rule.update(labels=labels, labelled=True)
    for v, t in zip(values, tasks, strict=True):
        found = {m.group("v") for m in patterns.find_all(rule, t, field="extraction pattern")}
        if len(found) != 1 or not _same(found.pop(), v, numeric=True):
            return None
    return rule


def _shape_rule(values: list[str], tasks: list[str]) -> dict[str, Any] | None:
    shape = next((s for s in _SHAPES if all(re.fullmatch(s[1], v) for v in values)), None)
    anchors = _anchors(values, tasks)
    if shape is None or shape[0] == "token":  # any word is a token: the values' own shape says more
        learned = _learned_rule(values, tasks, anchors)
        if learned is not None or shape is None:
            return learned
    # The rule must give back the recorded value from every recorded task.
    for anchor in (*anchors[:1], "", *anchors[1:]):
        rule = {"shape": shape[0], "pattern": shape[1], "anchor": anchor}
        if _gives_back(rule, values, tasks):
            return rule
    return None if shape[0] == "token" else _learned_rule(values, tasks, anchors)


def _signs(values: list[str], tasks: list[str]) -> str:
    """The currency signs and ``#`` the tasks write against the value (``€15``, ``35€``,
    ``#31``)."""
    found: set[str] = set()
    for v, t in zip(values, tasks, strict=True):
        for m in re.finditer(rf"(?<![\w.]){re.escape(v)}(?:0*)(?![\w])", t):
            around = t[m.start() - 1 : m.start()] + t[m.end() : m.end() + 1]
            found.update(c for c in around if c in CURRENCY_SIGNS or c == "#")
    return "".join(sorted(found))


def _phrase_rule(values: list[str], tasks: list[str]) -> dict[str, Any] | None:
    """A phrase rule (:mod:`~soloflow_core.flow.phrases`) for free-text values a label
    introduces in every task (``subject 'Rent'``, ``reference: Cinema``): its labels, those
    that introduced an unquoted value (``bare``), and one word more than the longest value
    held. Learned from three values or more when one label introduces most of them, no label
    is a verb of action or of request, and it gives back every value."""
    if len(values) < PHRASE_MIN:
        return None
    # here, not at the top: the CLI imports this module and starts without the store's stack
    from soloflow_core.memory.reading import ACTION_STEMS, REQUEST_STEMS
    from soloflow_core.store.fulltext import stem

    labels: list[str] = []
    bare: set[str] = set()
    for v, t in zip(values, tasks, strict=True):
        i = t.find(v)
        if not v.strip() or len(v) > MAX_PHRASE_CHARS or i < 0 or len(v.split()) > MAX_PHRASE_WORDS:
            return None
        found = re.findall(r"[^\W\d_]+$", t[:i].rstrip(" \t:=#'\"(-\u2013\u2018\u201c"))
        label = found[0].lower() if found else ""
        if not label or stem(label) in ACTION_STEMS | REQUEST_STEMS:
            return None
        labels.append(label)
        if t[i - 1 : i] not in QUOTES:
            bare.add(label)
    if Counter(labels).most_common(1)[0][1] * 2 < len(labels):
        return None
    rule: dict[str, Any] = {
        "shape": "phrase",
        "anchor": "",
        "labels": sorted(set(labels)),
        "bare": sorted(bare),
        "words": min(MAX_PHRASE_WORDS, max(len(v.split()) for v in values) + 1),
    }
    return rule if _gives_back(rule, values, tasks) else None


PHRASE_MIN = 3
"""Values a phrase rule is learned from, at least."""


def _anchors(values: list[str], tasks: list[str]) -> list[str]:
    """The words that stand right before the value in every task: one word when a single one
    does (``from``), then the two words before it (``to account``) when those are the same
    in every task. Every place the value stands alone counts, so a value a task names twice
    (``to cid from cid's account``) is introduced by the word its every task shares."""
    found = []
    for width in (1, 2):
        common: set[str] | None = None
        for v, t in zip(values, tasks, strict=True):
            words = _words_before(v, t, width)
            common = words if common is None else common & words
        if common and len(common) == 1:
            found.append(common.pop())
    return found


def _words_before(value: str, task: str, width: int) -> set[str]:
    """The ``width`` words before each place ``value`` stands alone in ``task`` (its first
    place when it never stands alone), lowercased; "" when there are none."""
    starts = [m.start() for m in re.finditer(rf"(?<![\w]){re.escape(value)}(?![\w])", task)]
    out = set()
    for i in starts or [task.find(value)]:
        before = task[:i].rstrip(" :=#'\"(")
        m = re.search(rf"[\w-]+(?: [\w-]+){{{width - 1}}}$", before)
        out.add(m.group().lower() if m else "")
    return out


def _learned_rule(values: list[str], tasks: list[str], anchors: list[str]) -> dict[str, Any] | None:
    """The rule of the values' learned shape (:func:`learn_shape`), when it finds each value
    first in its task. When some task holds another value of that shape (two account
    numbers: where each stands is all that tells them apart, and a rephrased task swaps
    them), an anchor that gives back every value is preferred to the value's position."""
    if len(values) < 2:
        return None
    pattern = learn_shape(values)
    if pattern is None:
        return None
    rule = {"shape": "learned", "pattern": pattern, "anchor": ""}
    plain = _gives_back(rule, values, tasks)
    if plain and not _another_of_the_shape(rule, tasks):
        return rule
    for anchor in anchors:
        anchored = {**rule, "anchor": anchor}
        if _gives_back(anchored, values, tasks):
            return anchored
    return rule if plain else None


def _another_of_the_shape(rule: dict[str, Any], tasks: list[str]) -> bool:
    """Whether some task holds two different values the (unanchored) rule matches."""
    for t in tasks:
        found = {m.group("v") for m in patterns.find_all(rule, t, field="extraction pattern")}
        if len(found) > 1:
            return True
    return False


def _gives_back(rule: dict[str, Any], values: list[str], tasks: list[str]) -> bool:
    numeric = rule["shape"] in ("integer", "number")
    return all(
        _same(extract_value(rule, t), v, numeric=numeric)
        for v, t in zip(values, tasks, strict=True)
    )


def _same(found: str | None, value: str, *, numeric: bool) -> bool:
    """Whether the text a rule found is the recorded value: the same text, or for a number
    shape the same number (``42.50`` in the task for the recorded ``42.5``)."""
    if found is None or found == value:
        return found is not None
    if not numeric:
        return False
    try:
        return float(found) == float(value)
    except ValueError:
        return False


def extract_value(
    rule: dict[str, Any],
    task: str,
    *,
    field: str = "extraction pattern",
    flow: str | None = None,
) -> str | None:
    """Apply an extraction rule to a task text (its pattern matched with a time limit).

    Raises:
        PatternTimeoutError: the pattern ran past its time limit; names ``flow`` and ``field``.
    """
    m = patterns.search(rule, task, field=field, flow=flow)
    return m.group("v") if m else None


def extract_inputs(
    extraction: dict[str, dict[str, Any]], task: str, *, flow: str | None = None
) -> dict[str, Any]:
    """Recover flow inputs from a new task text with the learned rules (missing ones left out).

    Raises:
        PatternTimeoutError: a rule's pattern ran past its time limit (names ``flow``, the
            rule's field path and the pattern).
    """
    out: dict[str, Any] = {}
    for name, rule in extraction.items():
        v = extract_value(rule, task, field=f"extraction.{name}.pattern", flow=flow)
        if v is None:
            continue
        t = rule.get("type")
        try:
            out[name] = int(v) if t == "integer" else float(v) if t == "number" else v
        except ValueError:
            out[name] = v
    return out
