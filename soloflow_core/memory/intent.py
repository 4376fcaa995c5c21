"""Whether a request is the job a flow was learned for: the gate before a run without the model.

A flow may run with no model call only when the request is its job. The evidence of the job
(:class:`JobEvidence`) is the task texts of the runs it was learned from and of later agent
runs that were that job and nothing else, a person's confirmed phrasings, requests the
model sent to the offered flow tool (their words count once :data:`CONFIRMATIONS` of them
hold them), and, for a flow a person wrote, its name, description and trigger keywords. A
request and the evidence are read alike (:mod:`soloflow_core.memory.reading`).

:func:`judge_intent` answers ``run``, ``hint`` or ``none`` (:class:`IntentVerdict`). ``run``
needs **all** of these — the gate is built to say no; a request it turns down still reaches
the model, with the flow offered as a tool:

- enough evidence (:data:`MIN_EXEMPLARS` task texts for a learned flow; a person's words for
  a user-submitted one); a plain request: shorter than :data:`MAX_REQUEST_CHARS`, mostly in
  the Latin script, no invisible characters, no markup (``<p>``, ``**``, code, JSON);
- every word of the request known to the evidence, a free text's aside (``data``: a
  payment's subject; a word the job's texts hold only inside a hyphenated name,
  ``sre-admins``, is not known alone: ``as admin``), at least two of them (one when it is
  the job's own verb given a value as its whole object, as two of its texts do and most
  use that verb: ``Unlock E-7453``, not ``Send tom@x.com`` when they send an invoice), and
  one of the job's *key words* (a word most of its texts hold that no other job commonly
  holds — :func:`soloflow_core.memory.router.decide_route` computes them per namespace);
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
- it names the job's own action (``reset`` for a flow that calls ``reset_password``) when
  most of the job's texts name it: ``tell me my account password`` is no password reset;
- no clause that narrates the action (an ``-ing`` form opening it, in a sentence with no
  request word: ``Cancelling reservation …``), and no verb of action done to a word the
  job's texts know but never act on (``cancel user …`` where they cancel a reservation);
- no noun in a plural form the job's texts, which name it often, never use
  (``refund my orders``: the job refunds one);
- the job's own verb acting on a word of the job its texts never put next to it (``cancel
  my account`` where the texts cancel a reservation and name an account);
- no value named by a noun before it and, governing, another after it that the job's texts
  never put after a value: a noun they put before values but never act on (``cancel my
  reservation ZFA04Y account``) or a noun made from a verb (``… ZFA04Y cancellation``,
  ``… ZFA04Y payment``);
- no noun the job's texts know picked out of several of its kind in a way they never do
  (``the password on my old account``, ``my other reservation``:
  :func:`~soloflow_core.memory.which.picked_out`), nor named with an article where the
  texts name one particular thing (``refund an order`` for ``my latest order``), nor a
  word of asking sent (``send a request for 150``);
- the job's verb given an object whenever its texts give it a value right after it
  (``please invite to the meeting EVT-4821`` gives ``invite`` none);
- no yes-or-no prompt (``? Y/N``, ``(y/n)``, ``y or n``, ``(?)``:
  :func:`~soloflow_core.memory.forms.asks_yes_or_no`);
- not asked for again (``again``, ``once more``) nor on a schedule (``every month``,
  ``weekly``, ``from now on``) unless three of the job's texts are
  (:func:`~soloflow_core.memory.forms.repeated`,
  :func:`~soloflow_core.memory.forms.recurring`): ``refund my order again`` may refund twice;
- no offer and no speaker doing it (``Want me to add…?``, ``I'll go ahead and add…``:
  :func:`~soloflow_core.memory.asking.speaker_acts`), and no loose end the job's texts do
  not have (another person joined to the value, a second destination or action, a time
  limit, an end cut off, a reply: :func:`~soloflow_core.memory.asking.loose_ends`);
- every word every one of the job's texts holds, a typo of it counting (``invioce``), when
  it has three or more (``Update reservation B6HDF4 to 2`` holds no ``bag``: 2 of what?),
  and none of them, nor a word most texts hold, followed by a word of the job no text puts
  after it (``order a laptop screen``, ``a replacement screen``: a screen, not a laptop);
- no action word (:data:`ACTION_STEMS`) and no other person (:data:`PARTY_WORDS`, a
  possessive such as ``wife's``, ``her``/``his``/``their``; a word for a person right
  before its value is that value's label: :func:`~soloflow_core.memory.which.other_people`)
  the job's evidence is not *familiar* with
  (:data:`~soloflow_core.memory.evidence.FAMILIAR_SHARE`).

``hint`` needs one common word of the job whatever else the request says; otherwise ``none``.

Every required input must also be bound from the request itself
(:func:`~soloflow_core.memory.binding.bind_inputs`). See ``docs/agents.md`` ("Routing").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

from soloflow_core.memory.asking import (
    LOOSE_ENDS,
    WHETHER,
    loose_ends,
    offers,
    opening_label,
    speaker_acts,
    value_objects,
)
from soloflow_core.memory.evidence import (
    CONFIRMATIONS,
    DOING,
    FAMILIAR_MIN,
    MIN_EXEMPLARS,
    THEN_VERBS,
    JobEvidence,
)
from soloflow_core.memory.forms import (
    asks_yes_or_no,
    changed_by,
    hyphen_parts,
    quantified,
    recurring,
    repeated,
    states_only,
)
from soloflow_core.memory.reading import (
    ACTION_STEMS,
    ACTION_WORDS,
    NOUN_ENDINGS,
    REQUEST_STEMS,
    RequestText,
    says_send,
)
from soloflow_core.memory.typos import held
from soloflow_core.memory.which import (
    ARTICLES,
    filler_plurals,
    offers_choice,
    other_people,
    picked_by_property,
    picked_out,
    recency_picks,
    roles_named,
)
from soloflow_core.store.fulltext import stem

__all__ = [
    "CONFIRMATIONS",
    "MAX_REQUEST_CHARS",
    "MIN_EXEMPLARS",
    "IntentVerdict",
    "JobEvidence",
    "judge_intent",
    "tool_actions",
]

MAX_REQUEST_CHARS = 4000
"""A longer request is never run without the model (it is a conversation, not a request)."""


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
    data: Collection[str] = (),
) -> IntentVerdict:
    """Whether ``request`` is the job of ``evidence`` (see the module docstring).

    Args:
        keys: the job's key words in its namespace (default: its strong words).
        other_jobs: common words of the namespace's other jobs (reported when the request
            holds one its own job does not know).
        own_actions: stems of the actions the job itself performs (:func:`tool_actions` of
            its side-effecting tools: ``send`` for ``send_email``): known words, never
            "another action". They are no key words and no anchors.
        data: stems of the request's free-text values (a payment's subject:
            :func:`~soloflow_core.memory.binding.phrase_words`): no words of the request's
            intent, neither known nor unknown; every other rule still reads them.
    """
    terms = tuple(t for t in request.terms if t not in data)
    vocab = evidence.vocabulary | (frozenset(own_actions) & ACTION_STEMS)
    if evidence.named_only:  # `as admin`, where the texts only say `sre-admins`
        vocab -= evidence.named_only & hyphen_parts(request.normalized or request.text)[1]
    common = evidence.common()
    key_words = evidence.strong() if keys is None else frozenset(keys)
    known = tuple(t for t in terms if t in vocab)
    unknown = tuple(t for t in terms if t not in vocab)
    anchors = [t for t in known if t in common]
    score = sum(1.0 if t in common else 0.5 for t in known) / len(terms) if terms else 0.0
    reasons: list[str] = []
    if not evidence.enough:
        reasons.append(
            f"the job is known by {evidence.shown} task text(s), fewer than {MIN_EXEMPLARS}"
        )
    if not terms:
        reasons.append("the request says nothing but values")
    if len(request.text) > MAX_REQUEST_CHARS:
        reasons.append(f"the request is longer than {MAX_REQUEST_CHARS} characters")
    if request.foreign:
        reasons.append("the request is mostly in a script the job's evidence is not in")
    reasons += [f"the request is no plain request: {flag}" for flag in request.flags]
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
    if terms and len(known) < 2 and not _own_verb_alone(evidence, request, known):
        reasons.append("the request holds fewer than two words of the job")
    if terms and not key_words & set(known):
        reasons.append(
            "the request holds none of the job's key words"
            + (f" ({', '.join(sorted(key_words)[:6])})" if key_words else "")
        )
    opened = set(request.openers) & REQUEST_STEMS or set(request.leads) & evidence.familiar_leads()
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
    named = frozenset(own_actions) & ACTION_STEMS & evidence.held_by_most()
    sends = says_send(request.normalized or request.text)
    said = set(terms) | ({"send"} if sends else set())
    if terms and named and not named & said:
        reasons.append(
            f"it does not name the job's action ({', '.join(sorted(named))}), "
            "which most of the job's requests name"
        )
    lacks = sorted(w for w in evidence.every if not held(w, said))
    if terms and evidence.texts >= MIN_EXEMPLARS and lacks:
        reasons.append(
            f"it lacks {', '.join(lacks)}, which every one of the job's {evidence.texts} "
            "requests holds (a typo of it counts)"
        )
    most = evidence.held_by_most()
    modified = sorted(
        f"{a} {b}"
        for a, b in request.pairs
        if (a, b) not in evidence.pairs and b in evidence.df and b not in DOING
        if a not in data and b not in data
        if a in most or any(held(w, {a}) for w in evidence.every)
    )
    if terms and evidence.texts >= MIN_EXEMPLARS and modified:
        reasons.append(f"it names a {modified[0]}, which the job's requests never do")
    plain = request.normalized or request.text
    swapped = [
        verb
        for verb, kind in value_objects(plain, _ACTION_WORDS)
        if evidence.direct.get(verb, 0) >= 2 and (verb, kind) not in evidence.direct_kinds
    ]
    strong = {v for v, n in evidence.direct.items() if n >= 2}
    bare = [
        m.group(1)
        for m in _NO_OBJECT.finditer(plain)
        if stem(m.group(1).lower()) in strong and not m.group(1).lower().endswith("ed")
    ]
    if bare:
        reasons.append(
            f"it gives {bare[0]} no object, where the job's requests name the value it acts on "
            "right after it"
        )
    if swapped:
        reasons.append(
            f"it gives {swapped[0]} another kind of value as its object than the job's "
            "requests do (an id where they give an address? the value's thing, X's…?)"
        )
    reasons += [
        LOOSE_ENDS[kind]
        for kind in loose_ends(plain, verbs=THEN_VERBS)
        if evidence.loose.get(kind, 0) < (1 if kind == "speaker" else FAMILIAR_MIN)
    ]  # one request of the job naming its value as the speaker's says whose it is
    done_with = evidence.familiar_actions()
    stated = states_only(request.normalized or request.text, request.actions)
    actions = [
        t
        for t in request.actions
        if t not in done_with and t not in own_actions and t not in stated
    ]
    if actions:
        reasons.append(f"asks for another action: {', '.join(actions)}")
    asked = [t for t in request.actions if t in own_actions]
    if asked and WHETHER.search(request.normalized or request.text):
        reasons.append(
            f"it asks whether the job's action ({', '.join(asked)}) can be done, not for it"
        )
    if request.narrated:
        reasons.append(
            f"it narrates the action ({', '.join(request.narrated)}…ing), it does not ask for it"
        )
    if evidence.targets:
        things = [o for o in request.targets if o in vocab and o not in evidence.targets]
        if things:
            reasons.append(
                f"its action is done to {', '.join(things)}, which the job's requests know "
                "but never act on"
            )
    heads = [  # `reservation ZFA04Y account` / `… cancellation`: the noun after it governs
        a
        for b, a in request.around
        if b
        and a != b
        and a not in evidence.heads
        and (a in evidence.namers - set(evidence.targets) or a.endswith(NOUN_ENDINGS))
    ]
    if heads:
        reasons.append(
            f"a value names a {', '.join(heads)} (the noun after it), which the job's "
            "requests name values by but never act on"
        )
    mine = [
        s
        for pair in speaker_acts(request.normalized or request.text)
        for s in pair
        if s in request.actions or (s in REQUEST_STEMS | common and s in request.terms)
    ]
    mine += offers(request.normalized or request.text)
    if mine:
        reasons.append(f"the speaker does the action ({', '.join(mine)}), it asks for nothing")
    if request.reported:
        reasons.append(
            f"it reports what was done ({', '.join(request.reported)}), it does not ask for it"
        )
    several = [
        t
        for t in request.plurals
        if evidence.df.get(t, 0) >= FAMILIAR_MIN and not evidence.plurals.get(t)
    ] + [t for t in filler_plurals(plain) if not evidence.plurals.get(t)]
    if several:
        reasons.append(
            f"it names several ({', '.join(several)}…) where the job's requests name one"
        )
    verbs = evidence.held_by_most() & (ACTION_STEMS | REQUEST_STEMS)
    acted_on = [
        f"{v} {o}"
        for v, o, _ in request.objects
        if v in verbs and o in evidence.df and (v, o) not in evidence.objects
    ]
    if acted_on and evidence.objects:
        reasons.append(
            f"it acts on something the job's requests never act on ({', '.join(acted_on)})"
        )
    changes = changed_by(request.normalized or request.text, request.values)
    if changes and evidence.changes < FAMILIAR_MIN:
        reasons.append(
            f"it changes a quantity by {', '.join(changes)} (more, another, by…), where the "
            "job's requests give the quantity itself"
        )
    wide = [
        q
        for q in quantified(request.normalized or request.text)
        if q in evidence.df and q not in evidence.quantified
    ]
    if wide:
        reasons.append(
            f"it asks for all or every {', '.join(wide)}, which the job's requests never do"
        )
    other = [
        f"{w} {n}"
        for w, n in picked_out(request.normalized or request.text)
        if n in evidence.df and (w, n) not in evidence.picked
        # `an order` where the texts say `my latest order`; `a meeting room` names any room
        if w not in ARTICLES or evidence.owned.get(n, 0) * 2 >= evidence.df[n]
    ] + [  # `send a request for 150 to…`: a word of request named as the thing acted on
        f"{w} {n}"
        for w, n in picked_out(plain)
        if w in ARTICLES and n in _ASKING_NOUNS and (w, n) not in evidence.picked
    ]
    if other:
        reasons.append(
            f"it picks one out of several or does not say which ({', '.join(other)}), which "
            "the job's requests never do: the value may name another one"
        )
    unlike = [  # `my latest expense report` where the job's requests say `latest invoice`
        (kind, " ".join(after))
        for kind, after in recency_picks(plain)
        if after and evidence.recent_texts.get(kind, 0) >= MIN_EXEMPLARS
        if not {(kind, w) for w in after if w in vocab or w not in evidence.df} & evidence.recent
    ]
    if unlike:
        kind, words = unlike[0]
        theirs = sorted(w for k, w in evidence.recent if k == kind)[:4]
        reasons.append(
            f"it asks for the {'latest' if kind == 'recent' else 'new'} {words}, where the "
            f"job's requests ask for the {'latest' if kind == 'recent' else 'new'} "
            f"{', '.join(theirs)}"
        )
    if evidence.recent_texts.get("recent", 0) >= MIN_EXEMPLARS:  # the job takes the latest
        by_what = [n for n in picked_by_property(plain) if n in evidence.df]
        if by_what:
            reasons.append(
                f"it picks the {by_what[0]} by what it is, where the job's requests pick it "
                "by when it came (the latest)"
            )
    roles = [r for r in roles_named(plain) if r not in evidence.roles]
    if roles:
        reasons.append(
            f"it names a value as the {roles[0]}, a role the job's requests never name a value by"
        )
    if offers_choice(plain) and evidence.choices < FAMILIAR_MIN:
        reasons.append("it offers a choice (or, either), which the job's requests never do")
    if asks_yes_or_no(plain):
        reasons.append("it asks to be answered yes or no (Y/N, y or n, (?)), not for the job")
    if repeated(plain, verbs=DOING) and evidence.repeats < FAMILIAR_MIN:
        reasons.append(
            "it asks for the job again (again, once more…), which the job's requests never do"
        )
    schedule = recurring(plain)
    if schedule and evidence.recurs < FAMILIAR_MIN:
        reasons.append(
            f"it asks for the job on a schedule ({', '.join(schedule)}), where the job's "
            "requests ask for it once"
        )
    label = opening_label(request.normalized or request.text)
    if label and label not in REQUEST_STEMS | evidence.labels:
        reasons.append(
            f"it opens with a label ({label}:) that frames what follows (a log, a note, a "
            "question), which the job's requests never do"
        )
    people = other_people(request.normalized or request.text, request.parties)
    strangers = [p for p in people if p not in evidence.familiar_parties()]
    if strangers:
        reasons.append(f"asks for someone else: {', '.join(strangers)}")
    if not reasons:
        return IntentVerdict("run", round(score, 4), known, unknown=unknown)
    verdict: Verdict = "hint" if anchors else "none"
    return IntentVerdict(verdict, round(score, 4), known, unknown=unknown, reasons=tuple(reasons))


_NO_OBJECT = re.compile(r"\b([A-Za-z]+)\s+(?:to|into|onto|for|on|at|in)\b")
"""A verb followed straight by a preposition: no object (``please invite to the meeting…``;
``X invited to…`` is a participle after its object)."""
_ASKING_NOUNS = frozenset(stem(w) for w in ("request", "requests", "ask"))
"""Words of asking that, after an article, name a thing sent (``send a request for 150``)."""


def _own_verb_alone(job: JobEvidence, request: RequestText, known: tuple[str, ...]) -> bool:
    """Whether one known word is enough: the job's verb, its object a value (module docstring)."""
    verb = known[0] if len(known) == 1 else ""
    took = {
        v
        for v, kind in value_objects(request.normalized or request.text, _ACTION_WORDS)
        if kind != "'s"
    }
    return (
        verb in took and job.direct.get(verb, 0) >= 2 and job.actions.get(verb, 0) * 2 > job.texts
    )


def tool_actions(tool_names: Iterable[str]) -> frozenset[str]:
    """The action stems named by tool names: ``send_email`` → ``send``, ``resetPassword`` →
    ``reset``. Only verbs of :data:`ACTION_WORDS` count, as written (``reservation`` in
    ``update_reservation`` is no ``reserve``)."""
    out: set[str] = set()
    for name in tool_names:
        for part in _TOOL_NAME_PARTS.split(name):
            word = part.lower()
            if word in _ACTION_WORDS or (word.endswith("s") and word[:-1] in _ACTION_WORDS):
                out.add(stem(word))
    return frozenset(out)


_ACTION_WORDS = frozenset(ACTION_WORDS)


_TOOL_NAME_PARTS = re.compile(r"[^A-Za-z]+|(?<=[a-z])(?=[A-Z])")
