"""Which one a request names: one picked out of several of its kind (``my old account``),
any one (``an order``), one particular thing (``my latest order``), several (``the last
emails``). :func:`~soloflow_core.memory.intent.judge_intent` compares each with what the
job's texts say (:class:`~soloflow_core.memory.evidence.JobEvidence`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from soloflow_core.store.fulltext import STOPWORDS, VALUE_PATTERN, stem

__all__ = [
    "ARTICLES",
    "INSTANCE_WORDS",
    "ROLE_PARTIES",
    "filler_plurals",
    "other_people",
    "owned_nouns",
    "picked_out",
    "NEWNESS",
    "RECENCY",
    "offers_choice",
    "picked_by_property",
    "roles_named",
    "recency_picks",
]

INSTANCE_WORDS = frozenset(
    "old older oldest former previous prior earlier other another second secondary backup "
    "spare alternate alternative different extra duplicate spouse's partner's work business "
    "personal joint shared closed deleted dormant inactive expired cancelled canceled".split()
)
"""Words that pick one thing out of several of its kind (``my old account``, ``the other
reservation``, ``my work account``): the request may be about another one than usual."""
ARTICLES = frozenset({"a", "an", "any", "some", "this", "that"})
"""Articles that name one of several without saying which (``refund an order``, ``cancel a
meeting on…``, ``refund that order`` as a first message) where the job's requests say which
(``my latest order``, ``my meeting``)."""
_PICK_WORDS = re.compile(r"[a-z][a-z'’-]*|[^\sa-z]+", re.IGNORECASE)
_BETWEEN = frozenset({"one", "email", "e-mail", "mail", "login", "user"})
"""Words between the picking word and its noun (``old email address``, ``other user id``)."""


def picked_out(text: str) -> tuple[tuple[str, str], ...]:
    """(word, stem of the noun) for each noun ``text`` picks out of several of its kind with
    one of :data:`INSTANCE_WORDS` (``the password on my old account`` → ``(old,
    account)``) or names with one of :data:`ARTICLES` (``an order`` → ``(an, order)``); a
    noun like ``one`` alone is no noun.

    Example:
        >>> picked_out("Reset the password on my old account, the old one is gone")
        (('old', 'account'),)
    """
    words = [w.lower() for w in _PICK_WORDS.findall(text)]
    out: list[tuple[str, str]] = []
    for i, word in enumerate(words[:-1]):
        if word not in INSTANCE_WORDS and word not in ARTICLES:
            continue
        j = i + 2 if words[i + 1] in _BETWEEN - {"one"} and i + 2 < len(words) else i + 1
        noun = words[j]
        if noun.isalpha() and len(noun) > 2 and noun not in INSTANCE_WORDS | _NOT_NOUNS:
            out.append((word, stem(noun)))
    return tuple(dict.fromkeys(out))


_FILLER_PLURALS = re.compile(r"\b(?P<one>e-?mail|mail|address)(?:s|es)\b", re.IGNORECASE)


def filler_plurals(text: str) -> tuple[str, ...]:
    """The words that word an address (``email``, ``mail``, ``address``: no terms of a
    request) ``text`` uses in a plural form, singular: ``forward the last emails`` names
    several.

    Example:
        >>> filler_plurals("Forward the last emails and e-mails to my addresses")
        ('email', 'address')
    """
    found = (m.group("one").lower().replace("-", "") for m in _FILLER_PLURALS.finditer(text))
    return tuple(dict.fromkeys(found))


_OWNERS = frozenset("my our the that this your his her their".split())


def owned_nouns(text: str) -> frozenset[str]:
    """Stems of the words up to three after a possessive or definite word (``my most recent
    order`` → ``most``, ``recent``, ``order``): nouns ``text`` names as one particular thing.

    Example:
        >>> sorted(owned_nouns("Please refund my last order"))
        ['last', 'order']
    """
    words = [w.lower() for w in _PICK_WORDS.findall(text)]
    return frozenset(
        stem(w)
        for i, word in enumerate(words)
        if word in _OWNERS
        for w in words[i + 1 : i + 4]
        if w.isalpha() and w not in _OWNERS
    )


_NOT_NOUNS = frozenset("one ones and but the that this then than for from with was were".split())


ROLE_PARTIES = frozenset(
    "participant participants attendee attendees invitee invitees member members".split()
)
"""Words naming a person by the role a job gives them (``add a participant to…``), read as
other people beside :data:`~soloflow_core.memory.reading.PARTY_WORDS`."""
_LABEL_GAP = frozenset("id number no num # : is email e-mail address iban account code".split())
"""Words that may stand between a label and its value (``employee id E-3307``, ``user id:
x``)."""
_TOKENS = re.compile(r"\x00|[a-z][a-z'-]*|[#:]", re.IGNORECASE)


def other_people(text: str, parties: Iterable[str]) -> tuple[str, ...]:
    """Of ``parties`` (the words a text names other people by) and the role words
    (:data:`ROLE_PARTIES`) it holds, those used for a person and not only as a value's label
    or role: ``employee E-1042`` and ``add bob@… as a participant`` name the value itself;
    ``for my employee``, ``the employee of E-7301``, ``add a participant to…`` name someone
    the request gives no value for.

    Example:
        >>> other_people("Unlock the account of employee E-1042", ["employee"])
        ()
        >>> other_people("I'm E-2468; please unlock the account of my employee", ["employee"])
        ('employee',)
    """
    marked = VALUE_PATTERN.sub(" \x00 ", text)
    tokens = [t.lower() for t in _TOKENS.findall(marked)]
    wanted = set(parties) | ROLE_PARTIES
    found: list[str] = []
    for i, word in enumerate(tokens):
        if word not in wanted:
            continue
        after = tokens[i + 1 : i + 4]
        labels = next((t for t in after if t not in _LABEL_GAP), "") == "\x00"
        role = tokens[max(0, i - 2) : i] in (["as", "a"], ["as", "an"], ["as", "the"])
        if not labels and not role or word.endswith(("'s", "s'")):  # `bob's`: always whose
            found.append(word)
    return tuple(dict.fromkeys(found))


RECENCY = frozenset("latest last newest recent".split())
"""Words that pick a thing by when it came (``my latest invoice``, ``most recent order``)."""
NEWNESS = frozenset("new replacement".split())
"""Words that name a thing to come in place of another (``a new laptop``, ``a replacement
laptop``)."""
_PICK_TOKENS = re.compile(r"\x00|[a-z][a-z'’-]*|[^\sa-z]", re.IGNORECASE)


def recency_picks(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """For each word of :data:`RECENCY` (kind ``recent``) or :data:`NEWNESS` (kind ``new``)
    in ``text``, its kind and the stems of the (up to two) words right after it, up to a
    value, a mark or a function word: the thing the request picks by when it came, or asks anew. A job whose
    requests pick or ask for their thing so (``my latest invoice``, ``a replacement laptop``)
    is not asked for ``my latest expense report``, ``a new screen`` or ``last week``.

    Example:
        >>> recency_picks("I need a copy of my latest expense report. frank@example.co.uk")
        (('recent', ('expens', 'report')),)
        >>> recency_picks("a new screen for my laptop, last!")
        (('new', ('screen',)), ('recent', ()))
    """
    marked = VALUE_PATTERN.sub(" \x00 ", text)
    tokens = [t.lower() for t in _PICK_TOKENS.findall(marked)]
    out: list[tuple[str, tuple[str, ...]]] = []
    for i, word in enumerate(tokens):
        kind = "recent" if word in RECENCY else "new" if word in NEWNESS else ""
        if not kind:
            continue
        after: list[str] = []
        rest = tokens[i + 1 :]
        if kind == "new" and rest[:1] in (["for"], ["of"]):  # `a replacement for the screen`
            rest = rest[1:]
            while rest and rest[0] in _OWNERS | {"a", "an"}:
                rest = rest[1:]
        for token in rest[:2]:
            if not token[0].isalpha() or token in STOPWORDS:
                break
            after.append(stem(token))
        out.append((kind, tuple(after)))
    return tuple(out)


_CHOICE = re.compile(r"\b(?:or|either)\b", re.IGNORECASE)


def offers_choice(text: str) -> bool:
    """Whether ``text`` offers a choice (``or``, ``either``) outside its values: ``a refund
    for my last order or the right size`` leaves the job to be chosen.

    Example:
        >>> offers_choice("I want a refund or the right size"), offers_choice("refund bob.or@x.io")
        (True, False)
    """
    return bool(_CHOICE.search(VALUE_PATTERN.sub(" ", text)))


_ROLE_NAMED = re.compile(
    r"\b(?P<role>receiver|recipient|beneficiary|payee|giftee|sender|owner|buyer|purchaser)s?"
    r"(?:['’]s)?(?:\s+(?:e-?mail|address|id|account|iban))?\s*(?:is|was|=|:|-)?\s*\x00",
    re.IGNORECASE,
)


def roles_named(text: str) -> tuple[str, ...]:
    """The roles ``text`` names a value by (``the receiver is zoe@…``, ``payee: FR80…``): a
    value named so is that party, which may not be the one the job acts for.

    Example:
        >>> roles_named("I want a refund for my last order, the receiver is alice@example.com")
        ('receiver',)
    """
    marked = VALUE_PATTERN.sub(" \x00 ", text)
    return tuple(dict.fromkeys(m.group("role").lower() for m in _ROLE_NAMED.finditer(marked)))


_BY_PROPERTY = re.compile(
    r"\b(?:the|that|this)\s+(?P<noun>[a-z]+)\s+(?:that|which|with|where|containing)\b",
    re.IGNORECASE,
)
_RECENTLY = re.compile(r"\b(?:latest|last|newest|recent|recently)\b", re.IGNORECASE)


def picked_by_property(text: str) -> tuple[str, ...]:
    """Stems of the nouns ``text`` picks by what they are or hold, and not by when they came
    (``the order that arrived damaged``, ``the order with the damaged item``); empty when it
    names a time of coming anywhere (``the order I placed most recently``).

    Example:
        >>> picked_by_property("refund the order with the damaged item, a@b.io")
        ('order',)
        >>> picked_by_property("refund the order that I placed most recently")
        ()
    """
    if _RECENTLY.search(text):
        return ()
    return tuple(dict.fromkeys(stem(m.group("noun").lower()) for m in _BY_PROPERTY.finditer(text)))
