"""Whether a request is the job a flow was learned for: the gate before a run without the model.

A flow may run with no model call only when the request is its job. The evidence of the job
(:class:`JobEvidence`) is the task texts of the runs the flow was learned from and of later
agent runs of the same sequence, and, for a flow a person wrote, its name, description and
trigger keywords. A request (:func:`read_request`) is read the same way:

- values — e-mail addresses, URLs, and words holding a digit (``O-5001``, ``2026-11-27``,
  ``aarav_ahmed_6699``) — are taken out first: they are the job's inputs, never its intent;
- the rest is split into words, lowercased, accents dropped, and stemmed (Snowball,
  ``orders`` → ``order``); filler words (articles, pronouns, "please", "could you") are
  left out, question words and conditionals (``how``, ``why``, ``if``) are kept;
- a negation (``not``, ``don't``, ``never``, ``no longer``, ``without``…) is noted.

:func:`judge_intent` then answers ``run``, ``hint`` or ``none`` (:class:`IntentVerdict`):

- ``run`` needs all of: enough evidence (:data:`MIN_EXEMPLARS` texts for a learned flow; a
  person's words for a user-submitted one); at least one word besides values; a request
  shorter than :data:`MAX_REQUEST_CHARS`, mostly in the Latin script; no negation governing
  a word of the job or an action (``don't send…``, ``no longer want a refund``); at most a
  third of its words (``(n - 1) // 3``) unknown to the evidence; no action word
  (:data:`ACTION_STEMS`: ``cancel``, ``delete``, ``reset``, ``send``…) and no other person
  (:data:`PARTY_WORDS`: ``accountant``, ``friend``…) the job's evidence is not *familiar*
  with (two texts and 5 % of them); no unknown word that is common in another flow's job;
  at least one word *common* in the job's evidence (a quarter of its texts, or declared);
- ``hint`` needs one such common word, whatever else the request says;
- otherwise ``none``.

Every required input must also be bound from the request itself (:func:`bind_inputs`): one
distinct value per input, of the input's shape and type, and no value in the request left
unused. See ``docs/agents.md`` ("Routing").
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from soloflow_core.store.fulltext import VALUE_PATTERN, stem

__all__ = [
    "ACTION_STEMS",
    "MIN_EXEMPLARS",
    "Binding",
    "IntentVerdict",
    "JobEvidence",
    "RequestText",
    "bind_inputs",
    "judge_intent",
    "read_request",
]

MIN_EXEMPLARS = 3
"""Task texts a learned flow's evidence needs before it may run without the model."""
COMMON_SHARE = 0.25
"""A word of the job is *common* when at least this share of the evidence's texts hold it."""
FAMILIAR_SHARE = 0.05
"""A word of the job is *familiar* when at least two of the evidence's texts, and this
share of them, hold it: an action or another person the job is done with."""
MAX_REQUEST_CHARS = 4000
"""A longer request is never run without the model (it is a conversation, not a request)."""

_VALUE = VALUE_PATTERN
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|neither|nor|without|cannot|unless|instead|"
    r"stop|avoid|refrain|dont|doesnt|didnt|wont|cant|shouldnt|isnt|arent|wasnt|"
    r"no\s+longer)\b|\b\w+n['’]t\b",
    re.IGNORECASE,
)

FILLER = frozenset(
    """a an the this that these those it its it's i i'm im me my mine myself we us our ours you
    your yours he him his she her they them their there here is am are was were be been being
    do does did done have has had having can could would will shall may might must should to
    for of on in at by with from into onto about as and or but so also just please pls plz
    kindly thanks thank thx hi hello hey dear ok okay yes sir madam team support some any
    get got give gimme want wanted need needed like would'd let know tell quick quickly asap
    again now today right away soon one really very much many lot lots all""".split()
)
"""Words that say nothing of the job. Question words, conditionals and verbs of action are
not here: they are what tells one job from another."""
_FILLER_EXTRA = frozenset({"e", "mail", "email", "address", "s", "t", "d", "ll", "re", "ve", "m"})
"""Parts of a value's wording (``e-mail``, ``my address is``) and of contractions."""

ACTION_WORDS = (
    "add activate approve archive block book buy cancel change close confirm create deactivate "
    "decline delete deny disable dispute downgrade drop edit enable erase escalate export "
    "forward freeze grant import install invite merge modify move open pause pay publish "
    "reactivate reject remove rename renew reopen replace reschedule reserve reset restart "
    "restore resume return revoke schedule sell send share submit subscribe suspend switch "
    "terminate transfer unblock unfreeze uninstall unsubscribe update upgrade upload void "
    "withdraw wipe"
).split()
"""Verbs that change the world. Words that are mostly nouns in requests (``order``,
``purchase``, ``charge``) are not here."""
PARTY_WORDS = frozenset(
    """accountant assistant attorney aunt boss brother child children client clients colleague
    colleagues coworker coworkers customers dad daughter everybody everyone family father
    friend friends husband lawyer manager mom mother neighbour neighbor parent parents partner
    someone somebody son sister spouse team teammate uncle users wife""".split()
)
"""Words naming another person: a request for someone else is not the job learned from
requests for oneself, unless the job's evidence says so."""


ACTION_STEMS = frozenset(stem(w) for w in ACTION_WORDS)
"""Stems of verbs that change the world: one the job's evidence does not hold vetoes a run."""
_FILLER_STEMS = frozenset(stem(w) for w in FILLER | _FILLER_EXTRA) | FILLER | _FILLER_EXTRA


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


NEGATION_SCOPE = 6
_CLAUSE_END = re.compile(r"[,.;:!?()]|\b(?:but|and|so|because|since|although|though)\b", re.IGNORECASE)


def _negated_terms(text: str) -> tuple[str, ...]:
    """Stems governed by a negation in ``text`` (values already taken out)."""
    folded = _fold(text).replace("’", "'")
    out: dict[str, None] = {}
    for cue in _NEGATION.finditer(folded):
        clause = folded[cue.end():]
        end = _CLAUSE_END.search(clause)
        scope = clause[: end.start()] if end else clause
        words = [w for w in _WORD.findall(scope) if w not in FILLER and w not in _FILLER_EXTRA]
        for word in words[:NEGATION_SCOPE]:
            s = stem(word.replace("'", ""))
            if s and s not in _FILLER_STEMS:
                out[s] = None
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RequestText:
    """A text read for its job: its words (stems, values taken out) and its values."""

    text: str
    terms: tuple[str, ...]
    """Distinct stems of its words, in order, filler left out."""
    values: tuple[str, ...]
    """E-mail addresses, URLs and words holding a digit, as written, in order."""
    negated: tuple[str, ...]
    """Stems of the words a negation governs: those after a negation cue up to the end of
    its clause (``,`` ``.`` ``;`` ``but``…), at most :data:`NEGATION_SCOPE` words."""
    foreign: bool
    """Whether most of its letters are outside the Latin script."""
    parties: tuple[str, ...] = ()
    """Words of :data:`PARTY_WORDS` it holds (another person)."""


def read_request(text: str) -> RequestText:
    """Read ``text`` as :mod:`the module docstring <soloflow_core.memory.intent>` says.

    Example:
        >>> r = read_request("Where are my orders? I'm dave@example.com")
        >>> r.terms, r.values, r.negated
        (('where', 'order'), ('dave@example.com',), ())
    """
    text = text if isinstance(text, str) else ""
    values = tuple(m.group(0).rstrip(".,;:!?)") for m in _VALUE.finditer(text))
    rest = _VALUE.sub(" ", text)
    rest = re.sub(r"\be-mail", "email", rest, flags=re.IGNORECASE)
    letters = [ch for ch in rest if ch.isalpha()]
    foreign = bool(letters) and sum(not ch.isascii() for ch in letters) * 2 > len(letters)
    words = [w.replace("’", "'") for w in _WORD.findall(_fold(rest))]
    terms: dict[str, None] = {}
    for word in words:
        if word in FILLER or word in _FILLER_EXTRA or _NEGATION.fullmatch(word):
            continue
        base = word.split("'", 1)[0] if word.endswith(("'s", "'ll", "'re", "'ve", "'d")) else word
        s = stem(base.replace("'", ""))
        if s and s not in _FILLER_STEMS and (len(s) > 1 or not s.isascii()):
            terms[s] = None
    negated = _negated_terms(rest)
    parties = tuple(dict.fromkeys(w for w in words if w in PARTY_WORDS))
    return RequestText(text=text, terms=tuple(terms), values=values, negated=negated,
                       foreign=foreign, parties=parties)  # fmt: skip


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
    parties: Mapping[str, int] = field(default_factory=dict)
    """Word of :data:`PARTY_WORDS` → how many of the texts hold it."""
    declared: frozenset[str] = frozenset()
    """Stems a person declared (a user-submitted flow's name, description, keywords)."""
    user_submitted: bool = False

    @classmethod
    def of(
        cls, texts: Iterable[str], declared: Iterable[str] = (), *, user_submitted: bool = False
    ) -> JobEvidence:
        df: Counter[str] = Counter()
        parties: Counter[str] = Counter()
        n = 0
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                continue
            n += 1
            read = read_request(text)
            df.update(read.terms)
            parties.update(read.parties)
        words: set[str] = set()
        for phrase in declared:
            words.update(read_request(phrase).terms)
        return cls(texts=n, df=dict(df), parties=dict(parties), declared=frozenset(words),
                   user_submitted=user_submitted)  # fmt: skip

    @property
    def vocabulary(self) -> frozenset[str]:
        return frozenset(self.df) | self.declared

    def _floor(self) -> float:
        return max(1 if self.texts < 4 else 2, COMMON_SHARE * self.texts)

    def common(self) -> frozenset[str]:
        """The job's common words: held by ≥ :data:`COMMON_SHARE` of the texts (at least two
        texts when there are several), or declared by a person."""
        floor = self._floor()
        return frozenset(w for w, n in self.df.items() if n >= floor) | self.declared

    def _familiar_floor(self) -> float:
        return max(2.0, FAMILIAR_SHARE * self.texts)

    def familiar(self) -> frozenset[str]:
        """Words two texts (and :data:`FAMILIAR_SHARE` of them) hold, or a person declared:
        an action word among them is part of the job."""
        floor = self._familiar_floor()
        return frozenset(w for w, n in self.df.items() if n >= floor) | self.declared

    def familiar_parties(self) -> frozenset[str]:
        """Other people the job is done for, as often as a familiar word
        (:data:`PARTY_WORDS`)."""
        floor = self._familiar_floor()
        return frozenset(w for w, n in self.parties.items() if n >= floor)

    @property
    def enough(self) -> bool:
        """Whether there is enough evidence to run without the model at all."""
        return self.texts >= MIN_EXEMPLARS or (self.user_submitted and bool(self.declared))


Verdict = Literal["run", "hint", "none"]


@dataclass(frozen=True, slots=True)
class IntentVerdict:
    """What :func:`judge_intent` found: ``run`` (the job, unasked), ``hint`` (offer the flow
    to the model), or ``none``."""

    verdict: Verdict
    score: float
    """Share of the request's words the job's evidence holds, weighted towards common words:
    orders flows when several may run."""
    known: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    """Why not ``run`` (empty when it is)."""


def judge_intent(
    evidence: JobEvidence,
    request: RequestText,
    *,
    other_jobs: Iterable[str] = (),
) -> IntentVerdict:
    """Whether ``request`` is the job of ``evidence`` (see the module docstring).

    Args:
        other_jobs: common words of the namespace's other flows' jobs: an unknown word among
            them vetoes a run.
    """
    terms = request.terms
    vocab = evidence.vocabulary
    common = evidence.common()
    known = tuple(t for t in terms if t in vocab)
    unknown = tuple(t for t in terms if t not in vocab)
    anchors = [t for t in known if t in common]
    score = 0.0
    if terms:
        score = sum(1.0 if t in common else 0.5 for t in known) / len(terms)
    reasons: list[str] = []
    if not evidence.enough:
        reasons.append(f"the job is known by {evidence.texts} task text(s), fewer than "
                       f"{MIN_EXEMPLARS}")  # fmt: skip
    if not request.text.strip() or not terms:
        reasons.append("the request says nothing but values")
    if len(request.text) > MAX_REQUEST_CHARS:
        reasons.append(f"the request is longer than {MAX_REQUEST_CHARS} characters")
    if request.foreign:
        reasons.append("the request is mostly in a script the job's evidence is not in")
    denied = [t for t in request.negated if t in vocab or t in ACTION_STEMS]
    if denied:
        reasons.append(f"the request negates {', '.join(denied)}")
    if terms and not anchors:
        reasons.append("no word of the request is common in the job's evidence")
    allowed = max(0, (len(terms) - 1) // 3)
    if len(unknown) > allowed:
        reasons.append(f"words unknown to the job: {', '.join(unknown)}")
    familiar = evidence.familiar()
    actions = [t for t in terms if t in ACTION_STEMS and t not in familiar]
    strangers = [p for p in request.parties if p not in evidence.familiar_parties()]
    if strangers:
        reasons.append(f"asks for someone else: {', '.join(strangers)}")
    others = set(other_jobs)
    elsewhere = [t for t in unknown if t in others and t not in actions]
    if actions:
        reasons.append(f"asks for another action: {', '.join(actions)}")
    if elsewhere:
        reasons.append(f"words of another flow's job: {', '.join(elsewhere)}")
    if not reasons:
        return IntentVerdict("run", round(score, 4), known, unknown)
    verdict: Verdict = "hint" if anchors else "none"
    return IntentVerdict(verdict, round(score, 4), known, unknown, tuple(reasons))


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Binding:
    """The flow's inputs bound from a request, and what stops a run without the model."""

    inputs: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """One sentence per input that is missing, ambiguous or of the wrong shape, and per
    value of the request no input takes."""

    @property
    def complete(self) -> bool:
        return not self.problems


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
}  # fmt: skip


def _matches(rule: Mapping[str, Any], text: str) -> list[str]:
    """Every value the extraction ``rule`` finds in ``text``, distinct, in order."""
    pattern = str(rule.get("pattern") or "")
    if not pattern:
        return []
    value = f"(?P<v>{pattern})"
    anchor = str(rule.get("anchor") or "")
    if anchor:
        rx = re.compile(rf"\b{re.escape(anchor)}\b[\s:=#'\"(]*{value}", re.IGNORECASE)
    else:
        rx = re.compile(rf"(?<![\w@.\-]){value}(?![\w@])")
    return list(dict.fromkeys(m.group("v") for m in rx.finditer(text)))


def _typed(value: str, jtype: str | None) -> Any:
    if jtype == "integer":
        return int(value)
    if jtype == "number":
        return float(value)
    if jtype == "boolean":
        if value.lower() not in ("true", "false"):
            raise ValueError(value)
        return value.lower() == "true"
    return value


def bind_inputs(
    input_schema: Mapping[str, Any] | None,
    extraction: Mapping[str, Mapping[str, Any]],
    request: RequestText,
) -> Binding:
    """Bind every required input of a flow from the request's own text.

    An input is bound when its extraction rule finds exactly one distinct value in the
    request, of the rule's shape and the input's JSON type. A required input with no rule
    (the caller must give it) cannot be bound. A value the request names that no input
    takes (another id, a second address) is a problem too: the flow could not honour it.

    Example:
        >>> schema = {"properties": {"email": {"type": "string"}}, "required": ["email"]}
        >>> rule = {"email": {"pattern": r"[\\w.+-]+@[\\w-]+(?:\\.[\\w-]+)+", "anchor": ""}}
        >>> bind_inputs(schema, rule, read_request("status of a@x.io")).inputs
        {'email': 'a@x.io'}
        >>> bind_inputs(schema, rule, read_request("a@x.io or b@x.io?")).problems[0]
        "input 'email': the request holds 2 values of its shape (a@x.io, b@x.io)"
    """
    schema = dict(input_schema or {})
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    inputs: dict[str, Any] = {}
    problems: list[str] = []
    used: set[str] = set()
    for name in required:
        rule = extraction.get(name)
        if rule is None:
            problems.append(f"input {name!r} is not in the task text: the caller must give it")
            continue
        found = _matches(rule, request.text)
        if not found:
            problems.append(f"input {name!r}: no value of its shape in the request")
            continue
        if len(found) > 1:
            problems.append(f"input {name!r}: the request holds {len(found)} values of its shape "
                            f"({', '.join(found[:4])})")  # fmt: skip
            continue
        spec = props.get(name) if isinstance(props.get(name), Mapping) else {}
        jtype = spec.get("type") if isinstance(spec, Mapping) else None
        try:
            value = _typed(found[0], jtype if isinstance(jtype, str) else None)
        except ValueError:
            problems.append(f"input {name!r}: {found[0]!r} is not of type {jtype}")
            continue
        ok = _JSON_TYPES.get(jtype) if isinstance(jtype, str) else None
        if ok is not None and not isinstance(value, ok):
            problems.append(f"input {name!r}: {found[0]!r} is not of type {jtype}")
            continue
        inputs[name] = value
        used.add(found[0])
    if not problems:
        spare = [v for v in request.values if not any(v == u or v in u or u in v for u in used)]
        if spare:
            problems.append("the request names " + ", ".join(repr(v) for v in spare[:4])
                            + ", which no input of the flow takes")  # fmt: skip
    return Binding(inputs=inputs, problems=tuple(problems))


def evidence_texts(tasks: Sequence[str | None]) -> list[str]:
    """The usable task texts of ``tasks`` (empty and missing ones dropped)."""
    return [t for t in tasks if isinstance(t, str) and t.strip()]
