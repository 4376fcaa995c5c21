"""Whether a statement in a request takes it back or says it is done already.

:func:`~soloflow_core.memory.asking.loose_ends` reports these as the ``taken back`` loose
end: the speaker has, keeps, wants or remembers the thing (``… I need it``, ``… I can make
it``, ``… I remember it now``), is there or can do it now (``I'll be there``, ``I can log in
again``), the thing is already where the job would bring it (``It is here``, ``It boots
again``), the speaker knows the answer, or a past form says the job is done (``It's paid.``,
``Booked.``, ``… to eng-oncall added.``). The text is read with its values marked
(:data:`MARK`).
"""

from __future__ import annotations

import re

from soloflow_core.memory.forms import IRREGULAR, SAME_PAST
from soloflow_core.store.fulltext import stem

__all__ = ["MARK", "done_already", "taken_back"]

MARK = "qqvalueqq"
"""The word a value is replaced by in the text read here."""
_MARK = MARK

_CLAUSE = (
    r"(?:^|[.!?;,:(\u3002\uff01\uff1f]\s*|\s[-\u2013\u2014/]\s*|"
    rf"{_MARK}[.!?;,]?['\"\u2019)]?\s+|['\"\u2019)]\s+|\b(?:and|but|so|because|as|since)\s+)"
)
_SOFT = r"(?:(?:now|also|really|still|actually|honestly|anyway|oh|well|ok|okay)\s*,?\s+){0,3}"
_AUX = (
    r"(?:'(?:ll|ve)\b|\s+(?:can|could|do|did|will|'ll|still|really|actually|now|already|just|"
    r"have|'ve|had|also|totally|definitely|truly)){0,4}"
)
_OBJECT = (
    r"(?:it|that|this|them|those|these|(?:that|this|my|our|the|those|these)\s+[a-z]+(?:\s+one)?)"
)
_TAIL = (
    r"(?:\s+(?:now|too|again|still|after\s+all|anyway|already|here|then|though|thanks|"
    r"thank\s+you)){0,3}\s*(?:[.!?;,)\u3002]|$)"
)
_KEEPS = frozenset(
    stem(w)
    for w in "need want like love keep prefer make have use enjoy found got remember recall".split()
)
"""Verbs of a statement that the speaker has, keeps or still wants the thing (``I need it``,
``I like my reservation``, ``I can make it``)."""
_HOLDS = re.compile(
    rf"(?P<at>{_CLAUSE}){_SOFT}(?:i|we)(?P<aux>{_AUX})\s+(?P<verb>[a-z]+)\s+{_OBJECT}{_TAIL}",
    re.IGNORECASE,
)
_STATE = re.compile(
    rf"{_CLAUSE}{_SOFT}(?:it|that|this|(?:my|our|the)\s+[a-z]+(?:\s+[a-z]+)?)(?:'s|\s+is|\s+was|"
    r"\s+has|\s+has\s+been|\s+now|\s+just|\s+already){0,3}\s+(?:here|arrived|delivered|back|"
    r"in\s+(?:my|our)\s+(?:inbox|mailbox|hands)|found|fine|"
    r"ok|okay|done|sorted|fixed|resolved|works|worked|working|came|boots|booting|booted|on|"
    rf"back\s+on|runs|running|starts|starting|started|turns\s+on){_TAIL}"
    rf"|{_CLAUSE}{_SOFT}(?:login|log-?in|logging\s+in|access|sign-?in|signing\s+in|it|everything)"
    rf"(?:'s|\s+is|\s+are)(?:\s+(?:now|all|just|already))*\s+(?:working|fine|ok|okay|back){_TAIL}"
    rf"|{_CLAUSE}{_SOFT}(?:i|we)(?:\s+(?:already|really|do|now|just|totally|still)){{0,3}}\s+"
    r"(?:know|knew)\s+(?!(?:if|whether|that\s+(?:you|u)|(?:you|u))\b)[a-z]",
    re.IGNORECASE,
)
"""A statement that the thing is already where the job would bring it, or that the speaker
knows the answer: ``It is here``, ``my order arrived``, ``login is working again``, ``I know
where it is``."""
_SENTENCE = (
    r"(?:^|[.!?;,(\u3002\uff01\uff1f]\s*|\s[-\u2013\u2014/]\s*|\bbut\s+|"
    rf"{_MARK}[.!?;,]?['\"\u2019)]?\s+|['\"\u2019)]\s+)"
)
"""Where a statement of its own may start: a mark ending a sentence or a clause, a dash, a
bracket, ``but``, or right after a value or a quote (``… 2026-12-03 I'll be there``)."""
_STILL_WANTED = re.compile(
    rf"{_SENTENCE}{_SOFT}(?:i|we)(?:'d|\s+would|'ll|\s+will|\s+really|\s+still|\s+do)*\s+"
    r"(?:need|needs|have|want|like|got)\s+to\s+(?:make\s+it|be\s+there|attend|get\s+on|be\s+on|"
    r"fly|travel|keep\s+it)\b"
    rf"|{_SENTENCE}{_SOFT}(?:i|we)(?:'ll|\s+will)\s+be\s+on\s+(?:the|my|that)\s+(?:flight|plane|trip)\b"
    r"|\b(?:i|we)\s+(?:can|could|will|'ll)\s+(?:still\s+|now\s+)?make\s+it\s+(?:to|for|on|at|by)\b",
    re.IGNORECASE,
)
"""The speaker still needs what the request would take away (``…, I need to make it``, ``…,
I want to get on the flight``, ``…, I can make it on 2026-12-09``)."""
_KEPT = re.compile(
    r"[,.;!]\s*(?:but\s+)?(?:i|we)(?:'d|\s+would)\s+(?:like|love|prefer)\s+(?:to\s+keep\s+)?"
    r"(?:the|my|our)\s+(?:right\s+)?(?P<noun>[a-z]+)\s*(?:[.!]|$)",
    re.IGNORECASE,
)
_STAYS = re.compile(
    r"\b(?:it|that|this)\s+(?:needs|has|is)\s+to\s+(?:be|stay|remain)\s+(?P<done>[a-z]+)",
    re.IGNORECASE,
)
_THERE = re.compile(
    rf"{_SENTENCE}{_SOFT}(?:i|we)(?:'m|'re|'ll|\s+am|\s+are|\s+will|\s+can|\s+could)"
    r"(?:\s+(?:now|already|just|still|also))?(?:\s+be)?\s+(?:there|in|logged\s+in|back(?:\s+in)?|"
    rf"online){_TAIL}"
    rf"|{_SENTENCE}{_SOFT}(?:i|we)(?:\s+(?:can|could|will)|'ll)\s+[a-z]+(?:\s+(?:in|on|out|there))?"
    rf"\s+(?:now|again){_TAIL}"
    rf"|{_SENTENCE}{_SOFT}(?:(?:i|we)\s+)?(?:just\s+)?(?:remembered|recalled)\s+(?:it|that){_TAIL}",
    re.IGNORECASE,
)
"""A sentence of its own saying the speaker is there or can do it now (``I'll be there``,
``I'm in again``, ``I can log in now``, ``I can travel again``): the reason is gone. A
clause of purpose is no such sentence (``… so I can log in again``)."""
_DONE = re.compile(  # a look-ahead: statements may overlap (`… - qqvalueqq. It's done.`)
    rf"(?=(?P<at>{_SENTENCE}){_SOFT}(?:(?:it|that|this|i|we|(?:(?:my|our|the|a|an)\s+)?[a-z]+(?:\s+[a-z]+)?)"
    r"(?:'s|'ve|\s+is|\s+are|\s+was|\s+were|\s+has|\s+have|\s+got|\s+been|\s+now|\s+just|"
    r"\s+already){0,3}\s+)?(?P<done>[a-z]+)(?:\s+(?:it|that|them|this))?"
    rf"{_TAIL})",
    re.IGNORECASE,
)
_ONE_ACTION = (
    frozenset(stem(w) for w in ("send", "pay", "transfer", "wire")),
    frozenset(stem(w) for w in ("send", "email", "mail", "forward")),
    frozenset(stem(w) for w in ("change", "update", "set", "modify", "edit", "adjust", "alter")),
)
"""Verbs one of which done answers a request for another (``Send 250 to … It's paid.``)."""


def _past(word: str) -> str:
    """The stem of the verb a past form is of (``paid`` → ``pay``, ``reset``, ``refunded``)."""
    w = word.lower()
    return stem(IRREGULAR.get(w, w))


_LAST_DONE = re.compile(r"\s(?P<done>[a-z]+)\s*[.!]*\s*$", re.IGNORECASE)
"""The text's last word, run on with no mark before it (``… to eng-oncall added.``)."""
_CAUSATIVE = re.compile(
    r"\b(?:need|needs|want|wants|like|love|prefer|wish|get|gets|getting|got|have|has|having)\b",
    re.IGNORECASE,
)
"""Words that ask for a thing done (``I need my invoice emailed``, ``get it refunded``)."""


def done_already(text: str, verbs: frozenset[str]) -> bool:
    """Whether a statement says the thing asked for is done: ``Please refund my order …
    It's refunded.``, ``… order a laptop… I ordered it.``, ``… 2026-12-03. Booked.``,
    ``Send 250 to … It's paid.``, ``Thanks, but it's sent. Please send…`` — a word the
    rest of the text uses, or a verb of ``verbs`` one of :data:`_ONE_ACTION` holds with it,
    in a past form; or the text's last word, run on, a past form of a word it used before
    with no word asking for a thing done (``Add … to eng-oncall added.``; not ``I need my
    invoice emailed``)."""
    for m in _DONE.finditer(text):
        word = m.group("done").lower()
        if not (word in IRREGULAR or word in SAME_PAST or word.endswith("ed")):
            continue
        done = _past(word)
        rest = text[: m.start()] + " " + text[m.end("done") :]  # said before it, or after
        before = {stem(w.lower()) for w in re.findall(r"[A-Za-z']+", rest)}
        if done in before or any(done in g and before & verbs & g for g in _ONE_ACTION):
            return True
    last = _LAST_DONE.search(text)
    if last and not _CAUSATIVE.search(text, 0, last.start()):
        word = last.group("done").lower()
        if word in IRREGULAR or (word.endswith("ed") and not word.endswith("eed")):
            said = {stem(w.lower()) for w in re.findall(r"[A-Za-z']+", text[: last.start()])}
            return _past(word) in said
    return False


def taken_back(marked: str, verbs: frozenset[str]) -> bool:
    """Whether a statement takes the request back or answers it: the speaker has, keeps or
    wants the thing (``Cancel my meeting… I need it``, ``… I can make it``, ``I like my
    reservation``); a later sentence in which the speaker did the job's action (``Reset my
    password. I reset it.``); the thing is already there or the speaker knows the answer
    (:data:`_STATE`). Negated statements (``I can't make it``, ``I don't need it``) are
    reasons for the request, and ``I would like it…`` asks."""
    if _STATE.search(marked) or _STILL_WANTED.search(marked):
        return True
    for m in _KEPT.finditer(marked):  # `Please refund my last order, I'd like the order.`
        before = {stem(w) for w in re.findall(r"[a-z]+", marked[: m.start()].lower())}
        if stem(m.group("noun").lower()) in before:
            return True
    for m in _STAYS.finditer(marked):  # `Unlock E-1042, it needs to be locked`
        before = {stem(w) for w in re.findall(r"[a-z]+", marked[: m.start()].lower())}
        if "un" + _past(m.group("done")) in before:
            return True
    if _THERE.search(marked):
        return True
    for m in _HOLDS.finditer(marked):
        verb = _past(m.group("verb"))
        if verb in _KEEPS:
            return True
        future = re.search(r"\b(?:can|could|will|'ll)\b", m.group("aux"), re.IGNORECASE)
        at = m.group("at").strip().lower()
        later = at[:1] in tuple(".!?;(\u3002") or at == "but"
        if verb in verbs and later and future is None:
            return True
    return False
