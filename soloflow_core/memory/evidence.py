"""What a flow's job is known by (:class:`JobEvidence`): the words, forms and loose ends of
the task texts of its runs, of requests the model sent to its tool and of a person's
phrasings. :mod:`soloflow_core.memory.intent` judges a request against it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from soloflow_core.memory.asking import loose_ends, opening_label, value_objects
from soloflow_core.memory.forms import (
    blank_value,
    changed_by,
    hyphen_parts,
    quantified,
    recurring,
    repeated,
    states_only,
)
from soloflow_core.memory.reading import ACTION_STEMS, ACTION_WORDS, REQUEST_STEMS, read_request
from soloflow_core.memory.typos import held, spelled_right
from soloflow_core.memory.which import (
    filler_plurals,
    offers_choice,
    other_people,
    owned_nouns,
    picked_out,
    recency_picks,
    roles_named,
)
from soloflow_core.store.fulltext import VALUE_PATTERN, stem

__all__ = [
    "COMMON_SHARE",
    "CONFIRMATIONS",
    "FAMILIAR_MIN",
    "FAMILIAR_SHARE",
    "KEY_SHARE",
    "MIN_EXEMPLARS",
    "DOING",
    "THEN_VERBS",
    "JobEvidence",
]

DOING = REQUEST_STEMS | ACTION_STEMS
"""Stems of verbs of request or action."""
_ACTION_WORDS = frozenset(ACTION_WORDS)
THEN_VERBS = DOING - {stem(w) for w in ("want", "need", "request", "get", "help")}
"""Verbs a second action after ``and`` is told by (those that only ask are not)."""

_QUOTED = re.compile(
    r"(?:(?<=^)|(?<=[\s(\[:,]))(?P<open>['\"\u2018\u201c])(?P<inside>[^'\"\u2018\u2019\u201c\u201d\n]{1,80})"
    r"['\"\u2019\u201d](?=$|[\s.,;:!?)\]])"
)
"""A quoted free text (``subject 'Rent'``, ``reference "Invoice 2022-118"``); an apostrophe
inside a word (``I'd``, ``it's``) opens none."""


def _quoted_only(text: str) -> frozenset[str]:
    """The terms ``text`` holds only inside quotes: a free text's words are its data, not the
    job's (a reference ``"Invoice 2022-118"`` does not teach the bank's payment job
    ``invoice``)."""
    spans = [m.group("inside") for m in _QUOTED.finditer(text)]
    if not spans:
        return frozenset()
    inside = {t for span in spans for t in read_request(span).terms}
    return frozenset(inside - set(read_request(_QUOTED.sub(" ", text)).terms))


MIN_EXEMPLARS = 3
"""Task texts a learned flow's evidence needs before it may run without the model."""
COMMON_SHARE = 0.25
"""A word of the job is *common* when at least this share of the evidence's texts hold it."""
KEY_SHARE = 0.5
"""A word of the job can be a *key word* when at least this share of its texts hold it."""
FAMILIAR_SHARE = 0.1
"""A word of the job is *familiar* when at least three of the evidence's texts, and this
share of them, hold it: an action, another person or a way of asking the job is done with."""
FAMILIAR_MIN = 3
CONFIRMATIONS = 2
"""Hinted texts (the model chose the offered flow tool) that must hold a word before the job
knows it, when no run of the job and no person gave it."""


@dataclass(frozen=True, slots=True)
class JobEvidence:
    """What a flow's job is known by.

    Built with :meth:`of` from the task texts of its runs (``texts``) and, for a flow a
    person wrote, its declared words (``declared``: name, description, trigger keywords).
    """

    texts: int
    """How many task texts the evidence holds."""
    df: Mapping[str, int]
    """Stem → how many of the texts hold it."""
    declared: frozenset[str] = frozenset()
    """Stems a person declared (a user-submitted flow's name, description, keywords)."""
    user_submitted: bool = False
    parties: Mapping[str, int] = field(default_factory=dict)
    """Other person → how many of the texts name them."""
    leads: Mapping[str, int] = field(default_factory=dict)
    """Question opening → how many of the texts open a sentence with it."""
    unconfirmed: frozenset[str] = frozenset()
    """Words only *hinted* texts hold, fewer than :data:`CONFIRMATIONS` of them: not known."""
    seen: int | None = None
    """How many of the texts show the job done (runs, hinted requests); a person's confirmed
    phrasings teach words, not that the job repeats. None: all of them."""
    actions: Mapping[str, int] = field(default_factory=dict)
    """Verb of action (used as a verb: ``RequestText.actions``) → how many texts use it."""
    plurals: Mapping[str, int] = field(default_factory=dict)
    """Stem → how many of the texts use it in a plural form (``RequestText.plurals``)."""
    objects: frozenset[tuple[str, str]] = frozenset()
    """(verb, term) pairs the texts hold: the term just after the verb or just before it
    (``cancel my reservation``, ``password reset``): what the job's actions act on."""
    targets: Mapping[str, int] = field(default_factory=dict)
    """Noun naming the value a verb of action acts on (``RequestText.targets``) → how many
    texts."""
    direct: Mapping[str, int] = field(default_factory=dict)
    """Verb of action → how many texts give it a value as its whole object (``Unlock E-1``:
    :func:`~soloflow_core.memory.asking.value_objects`)."""
    direct_kinds: frozenset[tuple[str, str]] = frozenset()
    """(verb, kind of value) the texts give a verb as its whole object."""
    namers: frozenset[str] = frozenset()
    """Terms the texts put just before a value (``reservation``, ``account``, ``user``)."""
    heads: frozenset[str] = frozenset()
    """Terms the texts put just after a value, no value following (``RequestText.around``)."""
    labels: frozenset[str] = frozenset()
    """Labels the texts open with before a colon (a word and a colon opening them)."""
    quantified: frozenset[str] = frozenset()
    """Nouns the texts quantify over (``all my payments``:
    :func:`~soloflow_core.memory.forms.quantified`)."""
    changes: int = 0
    """How many texts qualify a value as a change of a quantity (``2 more``, ``by 20``:
    :func:`~soloflow_core.memory.forms.changed_by`)."""
    picked: frozenset[tuple[str, str]] = frozenset()
    """(word, noun) pairs the texts pick a thing out of several by (``old account``:
    :func:`~soloflow_core.memory.which.picked_out`)."""
    repeats: int = 0
    """How many texts ask for the job again (:func:`~soloflow_core.memory.forms.repeated`)."""
    recurs: int = 0
    """How many texts ask for it on a schedule (:func:`~soloflow_core.memory.forms.recurring`)."""
    every: frozenset[str] = frozenset()
    """Words every text holds, written right or with one typo (``invioce``:
    :func:`~soloflow_core.memory.typos.held`)."""
    loose: Mapping[str, int] = field(default_factory=dict)
    """Kind of loose end (:func:`~soloflow_core.memory.asking.loose_ends`) → how many texts."""
    pairs: frozenset[tuple[str, str]] = frozenset()
    """Terms side by side in the texts (``RequestText.pairs``)."""
    owned: Mapping[str, int] = field(default_factory=dict)
    """Stem → how many texts name it as one particular thing (``my latest order``:
    :func:`~soloflow_core.memory.which.owned_nouns`)."""
    phrasings: frozenset[str] = frozenset()
    """The :func:`phrasing` of each run's text and each phrasing a person confirmed (not of
    hinted texts): a request worded as one of them, values aside, is a request the job was
    done for."""
    recent: frozenset[tuple[str, str]] = frozenset()
    """(kind, stem) of the words the texts put right after a word of recency or newness
    (``latest invoice``, ``replacement laptop``:
    :func:`~soloflow_core.memory.which.recency_picks`): the things the job picks by when they
    came (one counts once it is a known word of the job, :attr:`vocabulary`)."""
    recent_texts: Mapping[str, int] = field(default_factory=dict)
    """Kind (``recent``, ``new``) → how many texts pick a thing so."""
    roles: frozenset[str] = frozenset()
    """The roles the texts name a value by (``recipient FR80…``:
    :func:`~soloflow_core.memory.which.roles_named`)."""
    choices: int = 0
    """How many texts offer a choice (``or``: :func:`~soloflow_core.memory.which.offers_choice`)."""
    named_only: frozenset[str] = frozenset()
    """Stems the texts hold only inside hyphenated names (``sre-admins``): no word of the
    job when a request uses them alone (:func:`~soloflow_core.memory.forms.hyphen_parts`)."""

    @classmethod
    def of(
        cls,
        texts: Iterable[str],
        declared: Iterable[str] = (),
        *,
        user_submitted: bool = False,
        hinted: Iterable[str] = (),
        confirmed: Iterable[str] = (),
    ) -> JobEvidence:
        """The evidence of ``texts`` (runs that were the job), a person's ``declared`` words,
        ``hinted`` texts (requests the model sent to the flow's tool after the gate declined
        them and offered it; a word only they hold is known once :data:`CONFIRMATIONS` of
        them hold it) and ``confirmed`` phrasings a person added (their words are known; they
        do not count toward :data:`MIN_EXEMPLARS`, and one with no word is ignored)."""
        df: Counter[str] = Counter()
        parties: Counter[str] = Counter()
        leads: Counter[str] = Counter()
        actions: Counter[str] = Counter()
        plurals: Counter[str] = Counter()
        objects: set[tuple[str, str]] = set()
        targets: Counter[str] = Counter()
        direct: Counter[str] = Counter()
        direct_kinds: set[tuple[str, str]] = set()
        around: set[tuple[str, str]] = set()
        first_hand: set[str] = set()
        every_of: set[str] = set()
        labels: set[str] = set()
        picked: set[tuple[str, str]] = set()
        pairs: set[tuple[str, str]] = set()
        inside: set[str] = set()
        outside: set[str] = set()
        loose: Counter[str] = Counter()
        owned: Counter[str] = Counter()
        each: list[frozenset[str]] = []
        phrasings: set[str] = set()
        recent: Counter[tuple[str, str]] = Counter()
        recent_texts: Counter[str] = Counter()
        roles: set[str] = set()
        n = seen = changes = repeats = recurs = choices = 0
        every = [*(("run", x) for x in texts), *(("hint", x) for x in hinted)]
        for kind, text in [*every, *(("person", x) for x in confirmed)]:
            if not isinstance(text, str) or not text.strip():
                continue
            read = read_request(text)
            if kind == "person" and not read.terms:
                continue
            n += 1
            seen += kind != "person"
            df.update(set(read.terms) - _quoted_only(read.normalized))
            parties.update(other_people(read.normalized, read.parties))
            leads.update(read.leads)
            actions.update(set(read.actions) - states_only(read.normalized, read.actions))
            plurals.update(read.plurals + filler_plurals(read.normalized))
            objects.update((v, w) for v, *around in read.objects for w in around if w)
            targets.update(read.targets)
            took = value_objects(read.normalized, _ACTION_WORDS)
            direct.update({verb for verb, kind in took if kind != "'s"})
            direct_kinds |= took
            around.update(read.around)
            changes += bool(changed_by(read.normalized, read.values))
            every_of.update(quantified(read.normalized))
            picked.update(picked_out(read.normalized))
            owned.update(owned_nouns(read.normalized))
            pairs.update(read.pairs)
            repeats += repeated(read.normalized, verbs=DOING)
            recurs += bool(recurring(read.normalized))
            loose.update(loose_ends(read.normalized, verbs=THEN_VERBS))
            each.append(frozenset(read.terms))
            named, alone = hyphen_parts(read.normalized)
            inside |= named
            outside |= alone
            labels.add(opening_label(read.normalized))
            by_time = recency_picks(read.normalized)
            recent.update({(kind, w) for kind, after in by_time for w in after})
            recent_texts.update({kind for kind, _ in by_time})
            choices += offers_choice(read.normalized)
            roles.update(roles_named(read.normalized))
            if kind != "hint":
                first_hand.update(read.terms)
                phrasings.add(phrasing(text))
        words: set[str] = set()
        for phrase in declared:
            read = read_request(phrase)
            words.update(read.terms)
            words.update(read.actions)  # `e-mail the invoice`: the person declared sending
        return cls(
            texts=n,
            df=dict(df),
            declared=frozenset(words),
            user_submitted=user_submitted,
            parties=dict(parties),
            leads=dict(leads),
            unconfirmed=frozenset(
                w for w, k in df.items() if w not in first_hand and k < CONFIRMATIONS
            ),
            seen=seen,
            actions=dict(actions),
            plurals=dict(plurals),
            objects=frozenset(objects),
            targets=dict(targets),
            direct=dict(direct),
            direct_kinds=frozenset(direct_kinds),
            namers=frozenset(b for b, _ in around if b),
            heads=frozenset(a for _, a in around if a),
            labels=frozenset(labels - {""}),
            quantified=frozenset(every_of),
            changes=changes,
            picked=frozenset(picked),
            repeats=repeats,
            recurs=recurs,
            every=frozenset(spelled_right([w for w in df if all(held(w, t) for t in each)], df)),
            loose=dict(loose),
            named_only=frozenset(inside - outside),
            pairs=frozenset(pairs),
            owned=dict(owned),
            phrasings=frozenset(phrasings),
            recent=frozenset(recent),
            recent_texts=dict(recent_texts),
            choices=choices,
            roles=frozenset(roles),
        )

    @property
    def vocabulary(self) -> frozenset[str]:
        return (frozenset(self.df) - self.unconfirmed) | self.declared

    def _at_least(self, share: float, minimum: float) -> frozenset[str]:
        floor = max(minimum, share * self.texts)
        return frozenset(w for w, n in self.df.items() if n >= floor)

    def common(self) -> frozenset[str]:
        """Words a quarter of the texts (at least two, when there are several) hold, and the
        words a person declared."""
        return self._at_least(COMMON_SHARE, 1 if self.texts < 4 else 2) | self.declared

    def strong(self) -> frozenset[str]:
        """Words half of the texts hold (at least two), and the words a person declared: the
        candidates for key words."""
        return self._at_least(KEY_SHARE, 2) | self.declared

    def held_by_most(self) -> frozenset[str]:
        """Words more than half of the texts (at least :data:`MIN_EXEMPLARS`) hold; a
        person's declared words are not counted."""
        return frozenset(w for w, n in self.df.items() if n * 2 > self.texts and n >= MIN_EXEMPLARS)

    def familiar(self) -> frozenset[str]:
        """Words three of the texts (and :data:`FAMILIAR_SHARE` of them) hold, or a person
        declared: an action word among them is part of the job."""
        return self._at_least(FAMILIAR_SHARE, FAMILIAR_MIN) | self.declared

    def familiar_actions(self) -> frozenset[str]:
        """Verbs of action two of the texts (and :data:`FAMILIAR_SHARE` of them) use as
        verbs, or a person declared: the job is done with them (the bank's `transfer` and
        `pay` beside `send`, each in two of its eight texts)."""
        floor = max(2, FAMILIAR_SHARE * self.texts)
        return frozenset(w for w, n in self.actions.items() if n >= floor) | self.declared

    def familiar_parties(self) -> frozenset[str]:
        floor = max(FAMILIAR_MIN, FAMILIAR_SHARE * self.texts)
        return frozenset(w for w, n in self.parties.items() if n >= floor)

    def familiar_leads(self) -> frozenset[str]:
        """Question openings two of the texts (and :data:`FAMILIAR_SHARE` of them) have."""
        floor = max(2, FAMILIAR_SHARE * self.texts)
        return frozenset(w for w, n in self.leads.items() if n >= floor)

    @property
    def enough(self) -> bool:
        """Whether there is enough evidence to run without the model at all."""
        return self.shown >= MIN_EXEMPLARS or (self.user_submitted and bool(self.declared))

    @property
    def shown(self) -> int:
        """How many texts show the job done (see ``seen``)."""
        return self.texts if self.seen is None else self.seen


def phrasing(text: str) -> str:
    """``text`` as it is worded, values aside: its values (:data:`VALUE_PATTERN`) blanked
    (the marks ending one kept), case folded, runs of white space one space; every word and
    mark kept, invisible characters too.

    Example:
        >>> phrasing("Cancel my meeting on 2026-12-14!") == phrasing("cancel my  meeting on 2027-01-05!")
        True
        >>> phrasing("Cancel my meeting on 2026-12-14") == phrasing("Cancelled my meeting on 2026-12-14")
        False
        >>> phrasing("Cancel my meeting on 2026-12-14...")
        'cancel my meeting on \\x00 ...'
    """
    return " ".join(VALUE_PATTERN.sub(_blanked, text).casefold().split())


def _blanked(value: re.Match[str]) -> str:
    return " \x00" + blank_value(value)  # the marks ending it stay: `… E-1618...` is cut off
