"""Why a value found in a request may not be bound (:func:`set_aside`): it is not plain
ASCII, stands inside a link, runs into the text around it or is glued to a sign, is set
aside, compared or given another role by the words before it (``not``, ``old``, ``like``,
``by``, ``from``), or is introduced by a noun the job's requests never put before it. Used by
:func:`~soloflow_core.memory.binding.bind_inputs`.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from soloflow_core.flow.patterns import label_before
from soloflow_core.generalize.extraction import PREPOSITIONS
from soloflow_core.generalize.shapes import CURRENCY_SIGNS
from soloflow_core.memory.reading import FILLER, NEGATION, NOUN_ENDINGS, REQUEST_STEMS, words_of
from soloflow_core.store.fulltext import stem

__all__ = ["MARKS", "URL", "set_aside"]

_SET_ASIDE = frozenset(
    "not no never isn't wasn't aren't cc bcc old former formerly previous previously used "
    "instead except excluding besides unlike wrong typo than".split()
)
"""Words that, just before a value in its clause, say the value is not the one to use."""
_LIKENED = frozenset({"but", "like"})
"""Words that, right before a value, compare it or except it (``all IBANs but …``, ``IBANs
like …``) — unless ``like`` is wanting (``I'd like …``, ``would like …``)."""
_WANTING = frozenset({"i'd", "we'd", "you'd", "would", "d", "'d"})
_LIKING = _WANTING | frozenset(
    "i we you they to do does did don't dont didn't really also would should".split()
)
"""Words before ``like`` that make it a verb (``I'd like``, ``we really like``); ``just
like`` compares."""


def _comparing(words: list[str], back: int) -> bool:
    """Whether the ``like`` ``back`` words from the end of ``words`` compares (``… laptop
    like employee E-1234``, ``… like on 2026-12-09``) rather than wants (``I'd like``)."""
    k = len(words) - back
    return not (k > 0 and words[k - 1] in _LIKING)


_GUESSED = (["could", "be"], ["might", "be"], ["may", "be"], ["will", "be"], ["maybe"], ["perhaps"])
"""Words right before a value that name it as a guess or as another time's (``my email could
be …``, ``… will be …``, ``my email was …``): not the value as it is."""
_GUESS_AFTER = re.compile(r"\s*[,(]?\s*(?:could|might|may)\s+be\b", re.IGNORECASE)
_MEANT_FOR = frozenset("placed bought ordered purchased gifted got was were is are".split())
"""Words that, before ``for`` and a value, make the value the one a thing was meant for (``I
placed it for zoe@…``, ``it was for zoe@…``, ``the order is for zoe@…``), not whose it
is."""
_ROLE = frozenset({"by", "from", "as"})
"""Words that, just before a value, give it another role than the input's: ``by 1`` (a
change by an amount), ``from bob@…`` (a source), ``as bob@…``, ``by user …`` (an agent)."""
_BEFORE = 4
_PLAIN = frozenset({"is", "are", "am", "i'm", "im"})
"""Words before a value that say nothing of what it is (``my user id is …``, ``I'm …``)."""


def _says_nothing(word: str) -> bool:
    """Whether ``word`` just before a value says nothing of what the value is: filler, a
    copula, or a verb taking it as its object (``cancel ZFA04Y``) — not a noun made from one
    (``reservation 2``, ``booking 2``: the value is that thing's)."""
    if word in FILLER or word in _PLAIN:
        return True
    noun = word.endswith(NOUN_ENDINGS) or (word.endswith("ing") and len(word) > 5)
    return stem(word) in REQUEST_STEMS and not noun


_GLUE = frozenset("+-$€£¥%*/^=<>~&|@#")
"""Signs and symbols that, touching a value, change what it says (``-1``, ``1+1``, ``10%``,
``$1``, ``CQT8JK/4C7C4P``, ``#8``: another item's number)."""
MARKS = CURRENCY_SIGNS + "#"
URL = re.compile(r"(?:https?://|www\.|mailto:)\S+", re.IGNORECASE)


def set_aside(
    text: str,
    start: int,
    end: int,
    *,
    urls: list[tuple[int, int]],
    labels: frozenset[str],
    signs: str = "",
    preps: Collection[str] | None = None,
) -> str | None:
    """Why a value found at ``text[start:end]`` may not be bound, or None. ``signs``: the
    currency signs the job's own requests wrote against the value (``€15``)."""
    value = text[start:end]
    if not value.isascii():
        return f"{value!r} holds characters outside ASCII"
    if any(a <= start and end <= b for a, b in urls):
        return f"{value!r} stands inside a link"
    if (start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum()):
        return f"{value!r} runs into the text around it"
    glue = _GLUE - set(signs)
    if (start > 0 and text[start - 1] in glue) or (end < len(text) and text[end] in glue):
        return f"{value!r} is glued to a sign or symbol ({text[max(0, start - 1) : end + 1]!r})"
    before = text[:start]
    clause = re.split(r"[.;!?()\n\u2014]|\s-\s", before)[-1]
    near = words_of(clause)[-_BEFORE:]
    role = [w for w in near[-2:] if w in _ROLE and w not in labels]
    if role:
        return f"{value!r} follows {role[0]!r}: another role (a source, an agent, an amount)"
    if labels and near[-1:] == ["with"] and "with" not in labels:  # `share with roadmap.pdf`
        return f"{value!r} follows 'with': someone or something beside what the job acts on"
    said = label_before(text, start)
    if preps is not None and said in PREPOSITIONS and said not in preps and said not in labels:
        return (
            f"{value!r} follows {said!r}, which the job's requests never put before it: "
            "another role (whose thing, for whom)"
        )
    if near[-2:] in _GUESSED or near[-1:] in (["was"], ["were"]) or _GUESS_AFTER.match(text, end):
        return f"{value!r} is a guess or another time's ({' '.join(near)} …): not named as it is"
    if said == "for" and set(near[-4:-1]) & _MEANT_FOR:  # `I placed it for zoe@…`
        return f"{value!r} follows 'for' after {' '.join(near)}: the one it was meant for"
    if any(w in _SET_ASIDE or NEGATION.fullmatch(w) for w in near):
        return f"{value!r} is set aside by the words before it ({' '.join(near)})"
    if near and near[-1] in _LIKENED and not any(w in _WANTING for w in near[:-1]):
        return f"{value!r} is compared or excepted by {near[-1]!r}, not named"
    likened = [k for k, w in enumerate(near) if w == "like"]
    if likened and _comparing(words_of(clause), len(near) - likened[-1]):
        return f"{value!r} is compared by 'like' ({' '.join(near)}), not named"
    label = re.findall(r"[^\W\d_]+(?:['’][^\W\d_]+)?$", before.rstrip(" :=#'\"("))
    word = label[0].lower().replace("’", "'") if label else ""
    if labels and word and not _says_nothing(word) and stem(word) not in labels:
        return f"{value!r} is introduced as {word!r}, which the job's requests never put before it"
    return None
