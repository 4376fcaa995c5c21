"""Phrase rules: a free-text value a label introduces (``subject 'Rent'``, ``reference:
Cinema``, ``for the bike repair``), found again in a new task text.

A phrase rule (``shape: "phrase"``) names its ``labels`` (the words seen right before the
value) and ``words`` (the most words a value may hold). A value is what stands after a label
(a colon, ``=`` or a dash between them allowed), either between quotes, or — after a label
that introduced an unquoted value (``bare``) — running to the end of its sentence (``.``,
``!``, ``?``, ``)``, ``;`` or the end of the text), so a value never swallows the rest of a
sentence (``subject: Rent, and close my account`` has none). Matching is plain scanning,
with no regular expression a flow could make backtrack.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_PHRASE_CHARS", "PhraseMatch", "cut_phrases", "find_phrases", "phrase_problem"]

MAX_PHRASE_CHARS = 80
"""The longest phrase value."""
MAX_PHRASE_WORDS = 8
QUOTES = {"'": "'", '"': '"', "\u2018": "\u2019", "\u201c": "\u201d"}
_SENTENCE_END = frozenset(".!?);")
_STOPS = frozenset(".,;:!?()\"'\n\u2018\u2019\u201c\u201d")
_SIGNS = frozenset(":=-\u2013")


@dataclass(frozen=True, slots=True)
class PhraseMatch:
    """A phrase found in a text: like a regular expression's match of group ``v``."""

    value: str
    begin: int
    stop: int
    quoted: bool

    def group(self, _name: str = "v") -> str:
        return self.value

    def start(self, _name: str = "v") -> int:
        return self.begin

    def end(self, _name: str = "v") -> int:
        return self.stop


@functools.lru_cache(maxsize=256)
def _label_regex(labels: tuple[str, ...]) -> re.Pattern[str]:
    words = "|".join(re.escape(w) for w in sorted(labels, key=len, reverse=True))
    return re.compile(rf"(?<![\w'-])(?:{words})(?![\w'-])", re.IGNORECASE)


def find_phrases(rule: dict[str, Any], text: str) -> list[PhraseMatch]:
    """Every phrase ``rule`` finds in ``text``, in order."""
    labels = tuple(str(w) for w in rule.get("labels") or () if str(w).strip())
    if not labels:
        return []
    bare = {str(w).lower() for w in rule.get("bare") or ()}
    most = int(rule.get("words") or MAX_PHRASE_WORDS)
    return list(_scan(text, labels, bare=bare, most=most))


def cut_phrases(rule: dict[str, Any], text: str) -> list[str]:
    """The unquoted values a bare label introduces that a comma or colon cuts short
    (``subject Rent, for the flat``): :func:`find_phrases` finds none there, yet the text
    names one (``thanks for your help,`` is no value)."""
    labels = tuple(str(w) for w in rule.get("labels") or () if str(w).strip())
    bare = {str(w).lower() for w in rule.get("bare") or ()}
    cut: list[str] = []
    for m in _label_regex(labels).finditer(text) if labels else ():
        j = _skip(text, m.end())
        thanks = re.search(
            r"\bthank(?:s|\s+you)\s*$", text[max(0, m.start() - 16) : m.start()], re.IGNORECASE
        )
        if m.group().lower() not in bare or thanks or j >= len(text) or not text[j].isalnum():
            continue
        k = j
        while k < len(text) and text[k] not in _STOPS and k - j <= MAX_PHRASE_CHARS:
            k += 1
        if k < len(text) and text[k] in ",:" and k - j <= MAX_PHRASE_CHARS:
            cut.append(text[j:k].rstrip())
    return cut


def _scan(
    text: str, labels: tuple[str, ...], *, bare: set[str], most: int
) -> Iterator[PhraseMatch]:
    for m in _label_regex(labels).finditer(text):
        j = _skip(text, m.end())
        if j < len(text) and text[j] in _SIGNS:
            j = _skip(text, j + 1)
        if j >= len(text):
            continue
        found = (
            _quoted(text, j)
            if text[j] in QUOTES
            else _bare(text, j)
            if m.group().lower() in bare
            else None
        )
        if found is None:
            continue
        begin, stop = found
        value = text[begin:stop]
        if value and value[0].isalnum() and 1 <= len(value.split()) <= most:
            yield PhraseMatch(value, begin, stop, quoted=text[j] in QUOTES)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _quoted(text: str, j: int) -> tuple[int, int] | None:
    close = text.find(QUOTES[text[j]], j + 1)
    if close < 0 or close - j - 1 > MAX_PHRASE_CHARS or "\n" in text[j + 1 : close]:
        return None
    inner = text[j + 1 : close]
    lead = len(inner) - len(inner.lstrip())
    return j + 1 + lead, j + 1 + len(inner.rstrip())


def _bare(text: str, j: int) -> tuple[int, int] | None:
    """An unquoted value from ``j`` to the end of its sentence; None when a comma, colon or
    quote comes first, or it runs past :data:`MAX_PHRASE_CHARS`."""
    k = j
    while k < len(text) and k - j <= MAX_PHRASE_CHARS:
        c = text[k]
        if c == "." and 0 < k and text[k - 1].isdigit() and text[k + 1 : k + 2].isdigit():
            k += 1  # a decimal point
            continue
        if c in _STOPS:
            break
        k += 1
    if k - j > MAX_PHRASE_CHARS:
        return None
    if k < len(text) and text[k] not in _SENTENCE_END:
        return None
    return j, j + len(text[j:k].rstrip())


def phrase_problem(rule: dict[str, Any]) -> str | None:
    """What is wrong with a phrase rule's ``labels``, ``bare`` and ``words``, or None."""
    labels = rule.get("labels")
    if not isinstance(labels, Sequence) or isinstance(labels, str) or not labels:
        return "a phrase rule needs 'labels': the words that introduce its value"
    if not all(isinstance(w, str) and re.fullmatch(r"[A-Za-z][A-Za-z'-]{0,30}", w) for w in labels):
        return "each of 'labels' must be one word of letters (e.g. subject)"
    bare = rule.get("bare") or []
    if not isinstance(bare, list) or not all(isinstance(w, str) and w in labels for w in bare):
        return "'bare' must list labels (those that introduce an unquoted value)"
    words = rule.get("words", MAX_PHRASE_WORDS)
    if isinstance(words, bool) or not isinstance(words, int) or not 1 <= words <= MAX_PHRASE_WORDS:
        return f"'words' must be a whole number from 1 to {MAX_PHRASE_WORDS}"
    return None
