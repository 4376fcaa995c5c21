"""Ways of writing a request that change what its words say: letters spelled apart, dotted
abbreviations, signs, emoticons and tone tags, plural nouns.

:func:`~soloflow_core.memory.reading.read_request` uses these before it reads the words:

- letters spelled apart (``N O T``, ``D-O-N-T``, ``N.O.T.``) and dotted abbreviations
  (``e.g.``, ``i.e.``, ``P.S.``) are read as one word (``not``, ``eg``), so a negation
  spelled out is a negation and an abbreviation is a word of its own, not nothing;
- mathematical signs outside ASCII (``≠``, ``¬``, ``×``, ``∅``), emoticons (``;)``, ``:P``)
  and tone tags (``/s``, ``/j``) say something the reading does not read (no, irony, a
  joke): they flag the request, as an emoji does;
- a noun in a plural form (``orders``, ``invoices``) names several things: a job whose
  requests always name one is not asked for (``refund my orders``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["joined_letters", "plural_stems", "unread_marks"]

_SPELLED = re.compile(r"(?<![\w@.'’-])[A-Za-z](?:[ .\-][A-Za-z]){2,}\.?(?![\w@'’-])")
"""Three or more single letters apart (``N O T``, ``D-O-N-T``, ``N.O.T.``)."""
_DOTTED = re.compile(r"(?<![\w@.'’-])(?:[A-Za-z]\.){2,}(?![\w@])")
"""Two or more single letters each followed by a dot (``e.g.``, ``i.e.``, ``P.S.``)."""


def _glued(m: re.Match[str]) -> str:
    return "".join(ch for ch in m.group(0) if ch.isalpha())


def joined_letters(text: str) -> str:
    """``text`` with letters spelled apart and dotted abbreviations read as one word.

    Example:
        >>> joined_letters("Please N O T refund it, e.g. now")
        'Please NOT refund it, eg now'
    """
    if "." not in text and " " not in text and "-" not in text:
        return text
    return _SPELLED.sub(_glued, _DOTTED.sub(_glued, text))


_EMOTICON = re.compile(
    r"(?:^|(?<=\s))(?:[:;][-'^o]?[()\[\]DPpOo/\\|*3$@]+|[xX][Dd]|<3|\^_*\^|-_+-)(?=$|\s|[.,!?])"
)
_TONE_TAG = re.compile(
    r"(?:^|(?<=\s))/(?:s|j|jk|hj|srs|nsrs|lh|nm|g|p|t|gen|pos|neg|sarc|hyp|rh|ij|nbh)(?=$|\s|[.,!?])",
    re.IGNORECASE,
)


def unread_marks(text: str) -> str | None:
    """What in ``text`` says something the reading does not read — a mathematical sign
    outside ASCII (``≠``, ``¬``), an emoticon (``;)``), a tone tag (``/s``) — or None."""
    if not text.isascii() and any(
        unicodedata.category(ch) in ("Sm", "Sk") for ch in text if not ch.isascii()
    ):
        return "it holds signs (≠, ¬, ×…) whose meaning is not read"
    if _EMOTICON.search(text) or _TONE_TAG.search(text):
        return "it holds an emoticon or a tone tag (;), /s) whose meaning is not read"
    return None


_NOT_PLURAL = ("ss", "us", "is", "ous", "'s", "’s")


def plural_stems(
    words: list[str], *, content: Callable[[str], str | None], skip: frozenset[str]
) -> tuple[str, ...]:
    """The terms (``content`` of a word) of the words of ``words`` (lowercased) in a plural
    form: an ``-s`` the term does not keep (``orders`` → ``order``, ``reservations`` →
    ``reservation``); words in ``skip`` (question words, auxiliaries) and their ``-s`` forms
    are no nouns."""
    out: list[str] = []
    for w in words:
        if len(w) < 4 or not w.endswith("s") or w.endswith(_NOT_PLURAL):
            continue
        singles = {w[:-1], w[:-3] + "y"} if w.endswith("ies") else {w[:-1]}
        if w in skip or singles & skip:
            continue
        term = content(w)
        if term is not None and any(content(x) == term for x in singles):
            out.append(term)
    return tuple(dict.fromkeys(out))
