"""Whether a request is the job a flow was learned for: the gate before a run without the model.

A flow may run with no model call only when the request is its job. The evidence of the job
(:class:`JobEvidence`) is the task texts of the runs it was learned from and of later agent
runs that were that job and nothing else, and, for a flow a person wrote, its name,
description and trigger keywords. A request (:func:`read_request`) is read the same way:

- the text is NFKC-normalised; values — e-mail addresses, URLs, words holding a digit,
  snake_case ids — are taken out first: they are the job's inputs, never its intent;
- the rest is split into words, lowercased, accents dropped, stemmed (Snowball, ``orders`` →
  ``order``); filler words (articles, pronouns of the speaker, "please", "could you") are left
  out. Question words, auxiliaries that open a question (``has my order been…``), verbs of
  action and other people's words are kept: they are what tells one job from another.

:func:`judge_intent` answers ``run``, ``hint`` or ``none`` (:class:`IntentVerdict`). ``run``
needs **all** of these — the gate is built to say no; a request it turns down still reaches
the model, with the flow offered as a tool:

- enough evidence (:data:`MIN_EXEMPLARS` task texts for a learned flow; a person's words for
  a user-submitted one); a plain request: shorter than :data:`MAX_REQUEST_CHARS`, mostly in
  the Latin script, no invisible characters, no markup (``<p>``, ``**``, code, JSON);
- every word of the request known to the evidence, at least two of them, and one of the
  job's *key words* (a word most of its texts hold that no other job commonly holds —
  :func:`soloflow_core.memory.router.decide_route` computes them per namespace);
- no retraction (``never mind``, ``just kidding``, ``scratch that``…), no negation of a word
  of the job or of an action and no negation that governs nothing but the request itself
  (``Refund my order — NOT!``);
- it asks for something: it says ``please``, ``can you…``, ``I want/need/'d like…``, or a
  sentence of it opens with a verb of request (``Refund my…``, ``Track…``, ``Reset…``) or
  with the question the job's own texts ask (``Where is my order``) — ``My refund for the
  latest order`` or ``latest order`` ask for nothing;
- every sentence that opens as a question (``has…``, ``was…``, ``how…``, ``why…``,
  ``would a…``) opens the way the job's texts do (``where is my order`` is the order-status
  job's own question; ``has my order been refunded`` asks about a refund, it does not ask
  for one);
- no action word (:data:`ACTION_STEMS`) and no other person (:data:`PARTY_WORDS`, a
  possessive such as ``wife's``, ``her``/``his``/``their``) the job's evidence is not
  *familiar* with (:data:`FAMILIAR_SHARE`).

``hint`` needs one common word of the job whatever else the request says; otherwise ``none``.

Every required input must also be bound from the request itself (:func:`bind_inputs`): one
distinct value per input, of the input's shape and type, plain ASCII, not inside a URL, not
negated or set aside (``not``, ``used to be``, ``cc``), and no value of the request left
unused. See ``docs/agents.md`` ("Routing").
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from soloflow_core.errors import PatternTimeoutError
from soloflow_core.flow import patterns
from soloflow_core.store.fulltext import VALUE_PATTERN, stem

__all__ = [
    "ACTION_STEMS",
    "MAX_REQUEST_CHARS",
    "MIN_EXEMPLARS",
    "PARTY_WORDS",
    "REQUEST_VERBS",
    "Binding",
    "IntentVerdict",
    "JobEvidence",
    "RequestText",
    "bind_inputs",
    "judge_intent",
    "tool_actions",
    "read_request",
]

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
MAX_REQUEST_CHARS = 4000
"""A longer request is never run without the model (it is a conversation, not a request)."""

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]*)?")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|neither|nor|without|cannot|unless|instead|"
    r"stop|avoid|refrain|dont|doesnt|didnt|wont|cant|shouldnt|isnt|arent|wasnt|"
    r"no\s+longer)\b|\b\w+n['’]t\b",
    re.IGNORECASE,
)
_RETRACTION = re.compile(
    r"\b(?:never\s*mind|nvm|just\s+kidding|kidding|jk|scratch\s+that|forget\s+(?:it|that|about\s+it)"
    r"|nah|nope|no,?\s+wait|wait,?\s+no|actually,?\s+no|not\s+really|cancel\s+that"
    r"|ignore\s+(?:that|this|the\s+above|previous|all)|disregard|hold\s+(?:on|off|it|that)"
    r"|don'?t\s+bother|on\s+second\s+thought)\b",
    re.IGNORECASE,
)
_ASKING = re.compile(
    r"\b(?:please|pls|plz|kindly)\b|\b(?:can|could|would|will)\s+(?:you|u|ya|someone|somebody)\b"
    r"|\b(?:i|we)\s*(?:'d|would)?\s*(?:want|need|like|wish)\b|\bi'?d\s+like\b"
    r"|\b(?:i|we)\s+(?:am|are)\s+(?:requesting|asking)\b|\bcan\s+(?:i|we)\s+(?:get|have)\b",
    re.IGNORECASE,
)
"""Ways of asking for something (``please``, ``can you``, ``I'd like``)."""
_MARKUP = re.compile(r"[<>{}\[\]`*|#~^\\]|(?:^|\s)_\w|\w_(?:\s|$)")
_SENTENCE = re.compile(r"[.?!;\n]+")
_CLAUSE_END = re.compile(
    r"[,.;:!?()\u2014\u2013]|\s-\s|\b(?:but|and|so|because|since|although|though)\b", re.IGNORECASE
)

FILLER = frozenset(
    """a an the this that it its it's i i'm im me my mine myself we us our ours you
    your yours there here to for of on in at by with from into onto as and or but so also just
    please pls plz kindly thanks thank thx hi hello hey dear ok okay yes sir madam get
    got give gimme want wanted need needed like would'd let know tell quick quickly asap again
    now right away really very much can could would will u ya""".split()
)
"""Words that say nothing of the job. Question words, auxiliaries, conditionals, verbs of
action, other people's words and quantifiers (``all``, ``any``, ``some``, ``these``: *which*
of the things the job acts on) are not here: they are what tells one job from another —
``refund all my orders`` is not ``refund my last order``."""
_FILLER_EXTRA = frozenset({"e", "mail", "email", "address", "s", "t", "d", "ll", "re", "ve", "m"})
"""Parts of a value's wording (``e-mail``, ``my address is``) and of contractions."""
_GREETING = frozenset(
    {
        "hi",
        "hello",
        "hey",
        "dear",
        "ok",
        "okay",
        "so",
        "well",
        "please",
        "pls",
        "plz",
        "thanks",
        "yes",
        "good",
        "morning",
        "afternoon",
        "evening",
    }
)
_WH = frozenset(
    {
        "how",
        "why",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "what's",
        "where's",
        "how's",
        "who's",
        "when's",
    }
)
_AUX = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "am",
        "has",
        "have",
        "had",
        "did",
        "does",
        "do",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "will",
        "would",
        "can",
        "could",
        "isn't",
        "aren't",
        "wasn't",
        "hasn't",
        "haven't",
        "didn't",
        "doesn't",
    }
)
_POLITE = frozenset({"can", "could", "would", "will"})
"""Auxiliaries that open a request, not a question, when ``you``/``I``/``someone`` follows."""
_ASKER = frozenset({"you", "u", "ya", "i", "we", "someone", "somebody", "anyone"})
_S_CONTRACTIONS = frozenset(
    {
        "it's",
        "that's",
        "what's",
        "where's",
        "here's",
        "there's",
        "who's",
        "how's",
        "let's",
        "he's",
        "she's",
        "when's",
        "why's",
    }
)

ACTION_WORDS = (
    "add activate apply approve archive block book buy cancel change close confirm create "
    "deactivate decline delete deliver deny disable dispute downgrade drop edit enable erase "
    "escalate export forward freeze grant hold import install invite issue merge modify move "
    "notify open pause pay process publish reactivate reject remove rename renew reopen replace "
    "reschedule reserve reset restart restore resume return revoke schedule sell send share "
    "ship submit subscribe suspend switch terminate transfer unblock unfreeze uninstall "
    "unsubscribe update upgrade upload void withdraw wipe"
).split()
"""Verbs that change the world. Words that are mostly nouns in requests (``order``,
``purchase``, ``charge``) are not here."""
PARTY_WORDS = frozenset(
    """accountant assistant attorney aunt baby boss boyfriend brother child children client
    clients colleague colleagues cousin coworker coworkers customer customers dad daughter
    employee employees employer everybody everyone family father fiance fiancee friend friends
    girlfriend grandma grandmother grandpa grandfather grandson granddaughter guest guests he
    her hers him his husband kid kids landlord lawyer manager member mom mother mum neighbour
    neighbor nephew niece parent parents partner patient roommate flatmate she someone
    somebody son sister spouse stepson stepdaughter student team teammate tenant their theirs
    them they uncle user users wife""".split()
)
"""Words naming another person: a request for someone else is not the job learned from
requests for oneself, unless the job's evidence says so."""

REQUEST_VERBS = frozenset(ACTION_WORDS) | frozenset(
    "check track find look show tell give get email mail refund help resend fix reimburse "
    "lookup verify retrieve fetch provide need want".split()
)
"""Verbs a request opens with (the imperative): ``Refund my…``, ``Track…``, ``Send me…``."""
_REQUEST_STEMS = frozenset(stem(w) for w in REQUEST_VERBS)
ACTION_STEMS = frozenset(stem(w) for w in ACTION_WORDS)
"""Stems of verbs that change the world: one the job's evidence is not familiar with vetoes
a run."""
_FILLER_STEMS = frozenset(stem(w) for w in FILLER | _FILLER_EXTRA) | FILLER | _FILLER_EXTRA


def _normalized(text: str) -> str:
    """NFKC (fullwidth and compatibility forms to their plain letters)."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _invisible(text: str) -> bool:
    """Whether ``text`` holds invisible or control characters (zero-width spaces, marks that
    change the reading order), other than line breaks and tabs."""
    return any(unicodedata.category(ch) in ("Cf", "Cc") and ch not in "\n\r\t" for ch in text)


def _words(text: str) -> list[str]:
    return [w.replace("’", "'") for w in _WORD.findall(_fold(text))]


def _content(word: str) -> str | None:
    """The stem a word contributes to the request's terms, or None (filler, a contraction)."""
    if word in FILLER or word in _FILLER_EXTRA or _NEGATION.fullmatch(word):
        return None
    base = word.split("'", 1)[0] if "'" in word else word
    s = stem(base)
    return s if s and s not in _FILLER_STEMS and (len(s) > 1 or not s.isascii()) else None


def _openings(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the stem each sentence opens with, the word each sentence opens with when it opens as
    a question: a question word, or an auxiliary that is not a polite ``can you``)."""
    openers: list[str] = []
    leads: list[str] = []
    for sentence in _SENTENCE.split(text):
        words = _words(sentence)
        while words and words[0] in _GREETING:
            words.pop(0)
        if not words:
            continue
        first = words[0]
        openers.append(stem(first.split("'", 1)[0]))
        if first in _WH or (
            first in _AUX and not (first in _POLITE and len(words) > 1 and words[1] in _ASKER)
        ):
            leads.append(first.split("'", 1)[0])  # where's → where
    return tuple(dict.fromkeys(openers)), tuple(dict.fromkeys(leads))


def _parties(words: list[str]) -> tuple[str, ...]:
    """Other people a text names: :data:`PARTY_WORDS`, possessives (``wife's``, ``bob's``)."""
    found: list[str] = []
    for w in words:
        if w in PARTY_WORDS:
            found.append(w)
        elif w.endswith(("'s", "s'")) and w not in _S_CONTRACTIONS and len(w) > 3:
            found.append(w)
    return tuple(dict.fromkeys(found))


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
    its clause, at most :data:`NEGATION_SCOPE` words."""
    foreign: bool
    """Whether most of its letters are outside the Latin script."""
    parties: tuple[str, ...] = ()
    """Other people it names (:data:`PARTY_WORDS`, possessives)."""
    leads: tuple[str, ...] = ()
    """How its sentences open when they open as a question (``has``, ``how``, ``would``…)."""
    openers: tuple[str, ...] = ()
    """The stem each of its sentences opens with, greetings skipped."""
    asking: bool = False
    """Whether it asks for something in so many words (``please``, ``can you``, ``I'd like``)."""
    flags: tuple[str, ...] = ()
    """What makes it no plain request: a retraction, a negation governing nothing, invisible
    characters, markup."""
    normalized: str = ""
    """The NFKC form of the text (what inputs are bound from)."""


NEGATION_SCOPE = 6


def _negation(text: str) -> tuple[tuple[str, ...], bool]:
    """(stems governed by a negation, whether some negation governs nothing) in ``text``
    (values already taken out)."""
    folded = _fold(text).replace("’", "'")
    out: dict[str, None] = {}
    bare = False
    for cue in _NEGATION.finditer(folded):
        clause = folded[cue.end() :]
        end = _CLAUSE_END.search(clause)
        scope = clause[: end.start()] if end else clause
        governed = [s for s in (_content(w) for w in _words(scope)[:NEGATION_SCOPE]) if s]
        if not governed:
            bare = True
        out.update(dict.fromkeys(governed))
    return tuple(out), bare


def read_request(text: str) -> RequestText:
    """Read ``text`` as the module docstring says.

    Example:
        >>> r = read_request("Where are my orders? I'm dave@example.com")
        >>> r.terms, r.values, r.leads
        (('where', 'are', 'order'), ('dave@example.com',), ('where',))
    """
    text = text if isinstance(text, str) else ""
    normalized = _normalized(text)
    values = tuple(m.group(0).rstrip(".,;:!?)") for m in VALUE_PATTERN.finditer(normalized))
    rest = VALUE_PATTERN.sub(" ", normalized)
    rest = re.sub(r"\be-mail", "email", rest, flags=re.IGNORECASE)
    letters = [ch for ch in rest if ch.isalpha()]
    foreign = bool(letters) and sum(not ch.isascii() for ch in letters) * 2 > len(letters)
    words = _words(rest)
    terms = tuple(dict.fromkeys(s for s in (_content(w) for w in words) if s))
    negated, bare = _negation(rest)
    flags: list[str] = []
    if _RETRACTION.search(_fold(rest)):
        flags.append("it takes itself back")
    if bare:
        flags.append("a negation governs the request itself")
    if _invisible(text):
        flags.append("it holds invisible characters")
    if _MARKUP.search(rest):
        flags.append("it is formatted text, not a plain request")
    openers, leads = _openings(rest)
    return RequestText(
        text=text,
        terms=terms,
        values=values,
        negated=negated,
        foreign=foreign,
        parties=_parties(words),
        leads=leads,
        openers=openers,
        asking=_ASKING.search(rest) is not None,
        flags=tuple(flags),
        normalized=normalized,
    )


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

    @classmethod
    def of(
        cls, texts: Iterable[str], declared: Iterable[str] = (), *, user_submitted: bool = False
    ) -> JobEvidence:
        df: Counter[str] = Counter()
        parties: Counter[str] = Counter()
        leads: Counter[str] = Counter()
        n = 0
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                continue
            n += 1
            read = read_request(text)
            df.update(read.terms)
            parties.update(read.parties)
            leads.update(read.leads)
        words: set[str] = set()
        for phrase in declared:
            words.update(read_request(phrase).terms)
        return cls(
            texts=n,
            df=dict(df),
            declared=frozenset(words),
            user_submitted=user_submitted,
            parties=dict(parties),
            leads=dict(leads),
        )

    @property
    def vocabulary(self) -> frozenset[str]:
        return frozenset(self.df) | self.declared

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

    def familiar(self) -> frozenset[str]:
        """Words three of the texts (and :data:`FAMILIAR_SHARE` of them) hold, or a person
        declared: an action word among them is part of the job."""
        return self._at_least(FAMILIAR_SHARE, FAMILIAR_MIN) | self.declared

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
    keys: Collection[str] | None = None,
    other_jobs: Collection[str] = (),
    own_actions: Collection[str] = (),
) -> IntentVerdict:
    """Whether ``request`` is the job of ``evidence`` (see the module docstring).

    Args:
        keys: the job's key words in its namespace (default: its strong words).
        other_jobs: common words of the namespace's other jobs (reported when the request
            holds one its own job does not know).
        own_actions: stems of the actions the job itself performs (:func:`tool_actions` of
            its side-effecting tools: ``send`` for ``send_email``): known words, never
            "another action". They are no key words and no anchors.
    """
    terms = request.terms
    vocab = evidence.vocabulary | (frozenset(own_actions) & ACTION_STEMS)
    common = evidence.common()
    key_words = evidence.strong() if keys is None else frozenset(keys)
    known = tuple(t for t in terms if t in vocab)
    unknown = tuple(t for t in terms if t not in vocab)
    anchors = [t for t in known if t in common]
    score = sum(1.0 if t in common else 0.5 for t in known) / len(terms) if terms else 0.0
    reasons: list[str] = []
    if not evidence.enough:
        reasons.append(
            f"the job is known by {evidence.texts} task text(s), fewer than {MIN_EXEMPLARS}"
        )
    if not terms:
        reasons.append("the request says nothing but values")
    if len(request.text) > MAX_REQUEST_CHARS:
        reasons.append(f"the request is longer than {MAX_REQUEST_CHARS} characters")
    if request.foreign:
        reasons.append("the request is mostly in a script the job's evidence is not in")
    reasons += [f"the request is no plain request: {flag}" for flag in request.flags]
    familiar = evidence.familiar()
    denied = [t for t in request.negated if t in vocab or t in ACTION_STEMS]
    if denied:
        reasons.append(f"the request negates {', '.join(denied)}")
    if terms and not anchors:
        reasons.append("no word of the request is common in the job's evidence")
    if unknown:
        elsewhere = [t for t in unknown if t in other_jobs]
        reasons.append(
            f"words unknown to the job: {', '.join(unknown)}"
            + (f" (of another flow's job: {', '.join(elsewhere)})" if elsewhere else "")
        )
    if terms and len(known) < 2:
        reasons.append("the request holds fewer than two words of the job")
    if terms and not key_words & set(known):
        reasons.append(
            "the request holds none of the job's key words"
            + (f" ({', '.join(sorted(key_words)[:6])})" if key_words else "")
        )
    opened = set(request.openers) & _REQUEST_STEMS or set(request.leads) & evidence.familiar_leads()
    if terms and not request.asking and not opened:
        reasons.append(
            "it asks for nothing: no 'please', 'can you', 'I'd like', no verb of "
            "request opening it, nor the job's own question"
        )
    questions = [lead for lead in request.leads if lead not in evidence.familiar_leads()]
    if questions:
        reasons.append(
            f"it asks a question ({', '.join(questions)}…) the job's requests do not ask"
        )
    actions = [t for t in terms if t in ACTION_STEMS and t not in familiar and t not in own_actions]
    if actions:
        reasons.append(f"asks for another action: {', '.join(actions)}")
    strangers = [p for p in request.parties if p not in evidence.familiar_parties()]
    if strangers:
        reasons.append(f"asks for someone else: {', '.join(strangers)}")
    if not reasons:
        return IntentVerdict("run", round(score, 4), known, unknown=unknown)
    verdict: Verdict = "hint" if anchors else "none"
    return IntentVerdict(verdict, round(score, 4), known, unknown=unknown, reasons=tuple(reasons))


def tool_actions(tool_names: Iterable[str]) -> frozenset[str]:
    """The action stems named by tool names: ``send_email`` → ``send``, ``resetPassword`` →
    ``reset``. Only verbs of :data:`ACTION_WORDS` count."""
    out: set[str] = set()
    for name in tool_names:
        for part in _TOOL_NAME_PARTS.split(name):
            if part and stem(part.lower()) in ACTION_STEMS:
                out.add(stem(part.lower()))
    return frozenset(out)


_TOOL_NAME_PARTS = re.compile(r"[^A-Za-z]+|(?<=[a-z])(?=[A-Z])")


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
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_SET_ASIDE = frozenset(
    "not no never isn't wasn't aren't cc bcc old former formerly previous previously used "
    "instead except wrong typo than".split()
)
"""Words that, just before a value in its clause, say the value is not the one to use."""
_BEFORE = 4
_URL = re.compile(r"(?:https?://|www\.|mailto:)\S+", re.IGNORECASE)


def _matches(rule: Mapping[str, Any], text: str, field: str) -> list[tuple[str, int, int]]:
    """Every value the extraction ``rule`` finds in ``text``: (value, start, end).

    Raises:
        PatternTimeoutError: its pattern ran past its time limit.
    """
    if not rule.get("pattern"):
        return []
    found = patterns.find_all(dict(rule), text, field=field)
    return [(m.group("v"), m.start("v"), m.end("v")) for m in found]


def _set_aside(text: str, start: int, end: int, *, urls: list[tuple[int, int]]) -> str | None:
    """Why a value found at ``text[start:end]`` may not be bound, or None."""
    value = text[start:end]
    if not value.isascii():
        return f"{value!r} holds characters outside ASCII"
    if any(a <= start and end <= b for a, b in urls):
        return f"{value!r} stands inside a link"
    if (start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum()):
        return f"{value!r} runs into the text around it"
    before = text[:start]
    clause = re.split(r"[.;!?()\n\u2014]|\s-\s", before)[-1]
    near = _words(clause)[-_BEFORE:]
    if any(w in _SET_ASIDE or _NEGATION.fullmatch(w) for w in near):
        return f"{value!r} is set aside by the words before it ({' '.join(near)})"
    return None


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

    An input is bound when its extraction rule finds exactly one usable distinct value in
    the request (plain ASCII, not inside a link, not set aside by a ``not``, ``used to be``
    or ``cc`` just before it), of the rule's shape and the input's JSON type. A required
    input with no rule (the caller must give it) cannot be bound. A value the request names
    that no input takes (another id, a second address, a link) is a problem too: the flow
    could not honour it.

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
    text = request.normalized or request.text
    urls = [(m.start(), m.end()) for m in _URL.finditer(text)]
    inputs: dict[str, Any] = {}
    problems: list[str] = []
    used: set[str] = set()
    for name in required:
        rule = extraction.get(name)
        if rule is None:
            problems.append(f"input {name!r} is not in the task text: the caller must give it")
            continue
        found: list[str] = []
        try:
            matches = _matches(rule, text, f"extraction.{name}.pattern")
        except PatternTimeoutError as exc:
            problems.append(f"input {name!r}: {exc}")
            continue
        for value, start, end in matches:
            why = _set_aside(text, start, end, urls=urls)
            if why is not None:
                problems.append(f"input {name!r}: {why}")
            elif value not in found:
                found.append(value)
        if problems:
            continue
        if not found:
            problems.append(f"input {name!r}: no value of its shape in the request")
            continue
        if len(found) > 1:
            problems.append(
                f"input {name!r}: the request holds {len(found)} values of its shape "
                f"({', '.join(found[:4])})"
            )
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
        spare = [v for v in request.values if v not in used]
        if spare:
            problems.append(
                "the request names "
                + ", ".join(repr(v) for v in spare[:4])
                + ", which no input of the flow takes"
            )
    return Binding(inputs=inputs, problems=tuple(problems))
