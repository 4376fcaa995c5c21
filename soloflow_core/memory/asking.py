"""Who a request asks to act, and whether it asks for exactly one thing, whole.

:func:`~soloflow_core.memory.intent.judge_intent` reads these besides the request's words,
because they change what the words ask without changing which words there are:

- *whether* the action can be done (:data:`WHETHER`: ``tell me if you can cancel…``) is a
  question, not a request;
- the speaker doing the action (:func:`speaker_acts`): ``I can cancel it myself``, ``let me
  reset…``, and an offer to do it — ``Want me to add priya@… to eng-oncall?``, ``Would you
  like me to book…``, ``Need us to…``: the speaker is the one who would act;
- a label opening the text before a colon (:func:`opening_label`: ``Log: reset…``);
- loose ends (:func:`loose_ends`), each of which leaves part of the request to the flow's
  guess:

  - **another person besides the value**: ``me``/``us``/``myself`` joined to what the job acts
    on (``Add priya@… and me to eng-oncall``, ``… to EVT-2101 and me``, ``me too``), or the
    listener as the one it is for or the one it goes to (``… for you``, ``… to you``) — the
    flow takes one person;
  - **a second destination**: ``… to EVT-2101 and to my meeting``, ``… and with bob``,
    ``… to li.wang@… to me``;
  - **a second action**: a verb of request or action after ``and``/``then``/``also``
    (``Invite Z to EVT-2101 and add an event``) — the flow does one job;
  - **someone else** named by a value: ``zoe@… wants to reset my password``, ``I need E-1111
    to unlock my account``, ``FR76…, please send 100 to me`` — the value is who asks or acts;
  - **vague**: ``or so``, ``and so on``, ``or that``, ``etc``, ``+/-``, ``-ish``, a ``?`` right
    after a value mid-sentence (``cancel reservation ABC123? for user…``);
  - **someone else's thing**: ``your password``, ``its account``, ``the meeting you have on…``
    (``for your help`` is courtesy);
  - **a time of its own**: ``in March``, ``tomorrow``, ``at night``, ``on my birthday`` — the
    flow does it now;
  - **another way**: a sentence opening with ``Or``/``Otherwise`` or ``…, or can you…``
    (``Please order a new laptop for E-3333? Or can you boot it?``) — which is asked?
  - **for a while**: ``for now``, ``for the time being``, ``temporarily``, ``until…``
    — the flow makes it lasting;
  - **cut off**: the text ends on a conjunction, a preposition, a determiner or an open mark
    (``… and``, ``… or``, ``… to the``, ``…,``, ``… n``): what came next is unknown;
  - **a reply**: the text ends acknowledging (``- got it``, ``, ok.``, ``on it``, ``will
    do``): it quotes a request and answers it, it does not ask;
  - **taken back**: a statement that the speaker has, keeps, wants or remembers the thing
    (``… I can make it``, ``… We need that meeting``, ``… I remember it now``), did the
    job's action (``Reset my password. I reset it.``, ``… I've paid it.``), that the thing
    is there or works again (``It is here``, ``It boots again``), that the speaker is there
    or can do it now (``I'll be there``, ``I can log in again``), that what was asked is
    done (``… It's refunded.``, ``Send 250… It's paid.``) or that the speaker knows the
    answer (``I know where it is``) — negated, it is a reason (``I can't make it``);
  - **told**: asking to know about a value or to be told (``I'd like to know paul@…
    invited…``, ``Tell me you track…``);
  - **how to**: ``where to order``, ``how to reset…``, ``… from?``;
  - **only me**: ``just for me`` — the flow acts for everyone.

A job whose own requests (:data:`~soloflow_core.memory.intent.FAMILIAR_MIN` of them) have a
loose end of a kind is not turned down for it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from soloflow_core.memory.forms import IRREGULAR, blank_value
from soloflow_core.memory.taken_back import MARK, done_already, taken_back
from soloflow_core.store.fulltext import VALUE_PATTERN, stem

__all__ = [
    "LOOSE_ENDS",
    "MYSELF",
    "OFFERED",
    "WHETHER",
    "loose_ends",
    "offers",
    "opening_label",
    "speaker_acts",
]

WHETHER = re.compile(
    r"\b(?:know|wonder(?:ing)?|curious|ask(?:ing)?|tell\s+me|let\s+me\s+know|check)\b"
    r"[\s,:;-]*(?:\w+\s+){0,3}?(?:if|whether|can\s+you|could\s+you|would\s+you|will\s+you)\b"
    r"|\bor\s+(?:can|could|should|do|must|may|shall)\s+(?:i|we)\b"
    r"|\b(?:know|wonder(?:ing)?|curious|tell\s+me)\s*(?:[,:;.!?-]|$)"
    r"|\b(?:want|need|like|wanna)\s+to\s+know\b|\btell\s+me\s+(?:that\s+)?(?:you|u)\b",
    re.IGNORECASE,
)
"""Asking *whether* the job's action can or will be done (``I'd like to know, can you
cancel…?``, ``tell me if you can refund…``, ``… or can I?``, ``tell me: reset my
password?``), not asking for it."""
MYSELF = re.compile(
    r"(?:^|[,.;:!?(]\s*|\b(?:and|but|so|then)\s+)(?:(?:please|pls|plz|just|ok|okay|so)\s+)?"
    r"(?:(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?(?=let\b))?"
    r"(?:(?:can|could|may)\s+(?:i|we)(?:\s+(?:please|pls|plz))?(?!\s+(?:get|have)\b)"
    r"|(?:i|we)\s*(?:can|could|will|shall|'ll|might|may|gonna"
    r"|(?:am|'m|are|'re|was|were)\s+(?:going|about)\s+to)|let\s*(?:me|us|'s))"
    r"(?:\s+(?:go\s+ahead\s+and|just|also|then|now|quickly|simply|probably))*"
    r"\s+(?P<a>[\w']+)(?:\s+(?P<b>[\w']+))?",
    re.IGNORECASE,
)
"""The speaker doing the action (``I can cancel it myself``, ``let me reset…``, ``please let
me book…``, ``can you let me send…``, ``I'll go ahead and add…``, ``I was about to book…``, ``can I please unlock…``
— ``can I get``/``have`` asks), opening a clause (``how many bags I can check`` is a question's clause)."""
OFFERED = re.compile(
    r"\b(?:want|wants|wanted|need|needs|needed|like|get|expect|prefer|allow|permit|wish)\s+"
    r"(?:me|us)\s+to\s+(?:\w+ly\s+)?(?P<a>[\w']+)(?:\s+(?P<b>[\w']+))?"
    r"|(?:^|[.!?;]\s*)(?:want|need)\s+(?:to|i|we)\s+(?P<c>[\w']+)[^.!?;]*\?"
    r"|\bwould\s+(?:you|u)\s+like\s+to\s+(?P<d>[\w']+)",
    re.IGNORECASE,
)
"""An offer: the speaker would do the action if the listener wants it (``want me to add…``,
``would you like me to book…``, ``need us to cancel…``)."""


def speaker_acts(text: str) -> Iterator[tuple[str, str]]:
    """The stems of the (at most two) words after each place in ``text`` where the speaker
    does the action (:data:`MYSELF`): the caller keeps those that are the request's verbs
    of action or words of its job.

    Example:
        >>> list(speaker_acts("Please let me add priya@acme.example to eng-oncall"))
        [('add', 'priya')]
    """
    for m in MYSELF.finditer(text):
        yield stem(m.group("a").lower()), stem((m.group("b") or "").lower())


def offers(text: str) -> tuple[str, ...]:
    """How ``text`` offers that the speaker does something (:data:`OFFERED`), as written:
    whatever the verb, an offer asks the listener, it asks for nothing.

    Example:
        >>> offers("Would you like me to order a new laptop for E-1618?")
        ('like me to order',)
    """
    plain = VALUE_PATTERN.sub(lambda m: " value" + blank_value(m), text)  # its dots end nothing
    return tuple(" ".join(m.group(0).split()[:4]).lower() for m in OFFERED.finditer(plain))


_LABEL = re.compile(r"^\W*(?P<label>[A-Za-z][A-Za-z'-]*(?:\s+[A-Za-z][A-Za-z'-]*)?)\s*:\s+(?=\S)")


def opening_label(text: str) -> str:
    """The stem of the label opening ``text`` before a colon (``Log: please reset…`` →
    ``log``), when no value follows the colon (``Email: bob@…`` names its value); ``""``
    when there is none."""
    m = _LABEL.match(text)
    if m is None or VALUE_PATTERN.match(text, m.end()):
        return ""
    return stem(m.group("label").split()[-1].lower())


_MARK = MARK
_JOIN = r"(?:and|or|&|\+|plus|nor|as\s+well\s+as|along\s+with|together\s+with)"
_SELF = r"(?:me|us|myself|ourselves|yourself|yourselves)"
_NEXT = r"(?:my|our|your|his|her|their|the|a|an|" + _MARK + r")"
_PERSON = re.compile(
    rf"\b{_JOIN}\s+(?:also\s+)?{_SELF}\b(?!\s+know\b)"
    rf"|\b{_SELF}\s*,?\s*{_JOIN}\s+{_NEXT}\b"
    rf"|\b(?:for|to)\s+(?:you|u|ya|yourself|yourselves)\b|\b(?:me|us)\s*,?\s+(?:too|as\s+well|also)\b|\b{_JOIN}\s+i\s+(?:to|into|on)\b",
    re.IGNORECASE,
)
_ANOTHER = re.compile(
    rf"\b{_JOIN}\s+(?:also\s+)?(?:my|our|the|your)\s+"
    r"(?:last|latest|newest|recent|previous|first|other|next|oldest|earlier|second)\b",
    re.IGNORECASE,
)
_ADDRESS = re.compile(
    r"\b(?:last|latest|newest|recent|first|previous|an?|the)\s+e-?mail\s+address(?:es)?\s+"
    r"(?:from|of|in|on)\b",
    re.IGNORECASE,
)
_DESTINATION = re.compile(
    rf"\b{_JOIN}\s+(?:also\s+)?(?:to|into|onto|with|from|for|on|in|at)\s+{_NEXT}\b"
    rf"|\bto\s+{_MARK}\s+to\s+(?:me|us|my|our|him|her|them|his|their|{_MARK})\b"
    r"|\bwith\s+(?:me|us|myself|ourselves|you)\b"
    r"|\binto\s+(?:the\s+|an?\s+|my\s+)?(?:bank\s+)?account\b",
    re.IGNORECASE,
)
_WHETHER = re.compile(
    r"(?:^|[.:;!\u2014,]\s*)(?:(?P<modal>should|shall|can|could|would|will|may|might|must)\s+)?"
    r"(?:it|this|that|(?:the|my|our|its|this|that)\s+[a-z-]+)\s+"
    r"(?(modal)|(?:should|shall|can|could|would|will|may|might|must)\s+)"
    rf"(?:be|become|stay|remain)\s+(?:[a-z]+\s+){{0,2}}?{_MARK}[^.!?\n]{{0,40}}\?",
    re.IGNORECASE,
)
_THEN = re.compile(
    r"(?:\b(?:and|then|also|plus)|&|\+)\s+(?:(?:then|also|please|pls|plz|just|kindly|go|"
    r"ahead|and)\s+)*(?P<verb>[a-z]+)\b(?=\s+(?:\w|" + _MARK + r"))",
    re.IGNORECASE,
)
_OTHERWISE = re.compile(
    r"(?:^|[.?!;]\s*)(?:or|otherwise|alternatively|else)\b"
    r"|,\s*or\s+(?:can|could|would|will|should|maybe|perhaps|else|instead|just|rather)\b",
    re.IGNORECASE,
)
_SOMEONE = re.compile(
    rf"(?:^\s*|[.!?;:,\-\u2013\u2014(]\s*){_MARK}\s+(?:wants|wanted|needs|needed|would\s+like|'d\s+like|"
    r"asks|asked|requests|requested|is\s+asking|has\s+to|must|should|will|can|could)\b"
    rf"|\b(?:need|needs|want|wants|like|ask|asked|tell|told|get|have|let)\s+{_MARK}\s+to\b"
    rf"|\b(?:let|allow|permit|make)\s+{_MARK}\s+[a-z]"
    rf"|\b(?:tell|told|inform|notify)\s+(?:\w+\s+)?{_MARK}"
    rf"|{_MARK}\s+(?:wants|needs|knows|would|'d|would\s+like)\b"
    rf"|\b(?:i'm|i\s+am|we're)\s+(?:\w+\s+){{0,2}}with\s+(?:\w+\s+)?{_MARK}"
    rf"|\b(?:i'm|i\s+am|we're)\s+{_MARK}\s*['\u2019]s\b"
    rf"|^\s*{_MARK}\s*[,:]\s*(?:please\s+)?\w+\b[^.?!;]*?\b(?:me|us)\b"
    rf"|(?:\b(?:my|your|his|her|their|our)|{_MARK}\s*['\u2019]s|\bthe)\s+(?:replacement|successor|"
    r"substitute|stand-?in|deputy|cover)(?=\s*(?:[,.;!?)]|$|please|pls|of\b|who\b|when\b))",
    re.IGNORECASE,
)
_VALUE_DOES = re.compile(
    r"(?:^\s*|[.!?;,]\s*)(?:(?:employee|user|customer|account|id|number|iban|e-?mail|my|the)\s+){0,2}"
    rf"{_MARK}\s+(?P<v>[a-z]+)\b(?!\s*[,:])",
    re.IGNORECASE,
)
"""A value opening a sentence or a clause after a comma, and the word after it: a verb there
has the value as subject (``zoe@… reset my password``, ``…, E-1234 cracked the screen``)."""
_VAGUE = re.compile(
    r"\b(?:or\s+so|and\s+so\s+(?:on|forth)|etc|or\s+something|or\s+whatever|and\s+stuff|"
    r"or\s+similar|give\s+or\s+take|approximately|roughly|ish)\b|\+/-|"
    rf"(?:{_MARK}|\w)-ish\b|\b(?:or|and)\s+(?:that|this|it|you)\s*(?=$|[.,;:!?)]|\s+(?:to|for|with|on|"
    rf"in|from|and|or)\b)|{_MARK}\s*(?:\?|\.{{2,}}|\u2026)(?=\s*[,;]?\s*(?-i:[a-z]))",
    re.IGNORECASE,
)
_YOURS = re.compile(
    r"\b(?:your|its)\b(?!\s+(?:help|time|patience|assistance|support|understanding|attention|"
    r"kindness|service|reply|answer|quick|prompt|kind)\b)|\b(?:you|u)\s+have\s+on\b",
    re.IGNORECASE,
)
_ANOTHER_ONE = r"(?:new|old|other|right|correct|real|actual|second|updated|current|proper|another)"
_OTHER_ACCOUNT = re.compile(
    rf"{_MARK}(?:\s*['\u2019]s)?\s+(?:[a-z]+\s+)?{_ANOTHER_ONE}\s+(?:[a-z]+\s+)?(?:iban|account|card)\b"
    rf"|\b(?:the|a|an)\s+(?:[a-z]+\s+)?{_ANOTHER_ONE}\s+(?:iban|account|card)\s+of\s+{_MARK}",
    re.IGNORECASE,
)
"""Another account of a value's holder (``DE08…'s new IBAN``, ``the right account of X``)."""
_POSSESSIVE = re.compile(rf"{_MARK}\s*['\u2019]s\s+[a-z]", re.IGNORECASE)
_SPEAKER = re.compile(r"\b(?:me|my|us|our)\b", re.IGNORECASE)
_TO_VALUE = re.compile(rf"\bto\s+{_MARK}", re.IGNORECASE)
_MY_ACCOUNT = re.compile(r"\b(?P<by>from|of|for|via)\s+my\s+account\b", re.IGNORECASE)


def _whose(marked: str) -> bool:
    """Whether a value's thing stands where the speaker names themselves (``send bob@…'s
    latest invoice to me``), or ``from``/``of``/``for``/``via my account`` after a value in
    its sentence, or ``of``/``for my account`` before ``to`` a value (``send latest invoice
    to bob@… for my account``): whose is it? Each sentence read once (no
    backtracking over a long text)."""
    if _POSSESSIVE.search(marked) and _SPEAKER.search(marked):
        return True
    for sentence in re.split(r"[.?!;]", marked):
        if _MARK not in sentence:
            continue
        first = sentence.find(_MARK)
        sent_to = max((m.start() for m in _TO_VALUE.finditer(sentence)), default=-1)
        for m in _MY_ACCOUNT.finditer(sentence):
            if first < m.start() or (m.group("by").lower() in ("of", "for") and sent_to > m.end()):
                return True
    return False


_WHEN = re.compile(
    r"\b(?:in|on|by|next|this|every)\s+(?:january|february|march|april|may|june|july|august|"
    r"september|october|november|december|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday|week|month|year|weekend)\b|\b(?:tomorrow|tonight|later|at\s+night|in\s+the\s+"
    r"(?:morning|afternoon|evening)|on\s+my\s+birthday|next\s+time|at\s+noon|at\s+midnight|"
    r"on\s+(?:the\s+|[a-z]+\s+)?night)\b",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(r"\b(?:go\s+ahead|try|be\s+sure|come|go)\s+and\b", re.IGNORECASE)
_WHILE = re.compile(
    r"\bfor\s+(?:now|the\s+(?:time\s+being|moment|meantime|day|week|weekend|night)|a\s+(?:while|"
    r"bit|day|week|month|few\s+\w+))\b|\btemporar\w*|\buntil\b|\btill\b|\bfor\s+today\b",
    re.IGNORECASE,
)
_CUT_OFF = re.compile(
    r"(?:\b(?:and|or|but|nor|then|also|plus|so|because|if|when|unless|except|than|to|for|with|"
    r"from|of|into|onto|the|a|an|my|your|our|their|his|her|its|n|b|c|w|by|via|as|like|we|"
    r"would|could|need|want|tell|(?<!let me )(?<!let us )know|just|this|wants|needs|knows)|"
    r"[&+,:;(/\\-]|"
    r"[\u2013\u2014])\s*(?:\.{2,}|\u2026)?\s*$|(?:\.{3,}|\u2026)\s*$",
    re.IGNORECASE,
)
_REPLY = re.compile(
    r"(?:[-\u2013\u2014,.;:!(]|\s)\s*(?:got\s+it|on\s+it|will\s+do|noted|roger(?:\s+that)?|"
    r"understood|copy\s+that|ok(?:ay)?|k|kk|yes|yep|yeah|yup|alright|all\s+right|"
    r"sounds\s+good|gotcha)\s*[.!]*\s*$|[-\u2013\u2014,.;:!(]\s*(?:done|sure)\s*[.!]*\s*$",
    re.IGNORECASE,
)

_TO_ME = re.compile(r"\b(?:to|for)\s+(?:me|us|myself|ourselves)\b", re.IGNORECASE)
_TO_THING = re.compile(
    rf"\bto\s+(?:(?:the|my|our|this|that)\s+)?(?:(?P<noun>[a-z-]+)\s+)?{_MARK}", re.IGNORECASE
)
_WORDING = frozenset("email e-mail mail address inbox account id".split())
"""Words between ``to`` and a value that name the speaker's own address (``to my email X``)."""
_GIVING = frozenset(
    stem(w)
    for w in "forward send email e-mail mail invite add share pass deliver bring cc bcc".split()
)
"""Verbs whose indirect object ``me`` is a recipient (``forward me…``); ``show me``, ``give
me the list`` ask the listener to answer."""
_VERB_ME = re.compile(r"\b(?P<v>[a-z]+)\s*[.,!]?\s+(?:me|us)\b", re.IGNORECASE)
_ASIDE = re.compile(r"\((?P<inside>[^()]{0,80})\)|(?:^|\s)s/[^/\s]+/[^/\s]*/?", re.IGNORECASE)
_EITHER = re.compile(r"\b(?P<a>[a-z]+)\s*(?:/|\bor\b|\(\s*or\b)\s*(?P<b>[a-z]+)", re.IGNORECASE)
_HESITANT = re.compile(
    r"(?:^|[.!;:]\s*)(?:(?:please|pls|plz|ok|okay|so|then|and)\s+)?"
    r"(?!(?:hi|hello|hey|thanks|ok|okay|sorry|um+|uh+|hm+|well|so|yes|no|sure|help|please)\b)"
    r"[a-z]+\s*(?:\?+|\.{2,}|\u2026)"
    rf"\s*(?=(?-i:[a-z])|[0-9\u20ac$\u00a3]|{_MARK})",
    re.IGNORECASE,
)


def _speaker_receives(marked: str) -> bool:
    """Whether the speaker is a second recipient beside ``to`` a value: ``Forward me the last
    e-mail from X to Y``, ``… forwarded to me``, ``Forward. Me. The last…``."""
    if not any(
        m.group("noun") is None or m.group("noun").lower() not in _WORDING
        for m in _TO_THING.finditer(marked)
    ):
        return False
    return _TO_ME.search(marked) is not None or any(
        stem(m.group("v").lower()) in _GIVING for m in _VERB_ME.finditer(marked)
    )


def _two_ways(marked: str, verbs: frozenset[str]) -> bool:
    """Whether two verbs of action or request are offered side by side (``request or send?``,
    ``Email or refund my…``, ``send/request``, ``Refund (or email)…``), or an aside asks for
    another (``… (request pls)``, ``s/send/request``)."""
    asked = verbs | {"request"}
    for m in _EITHER.finditer(marked):
        a, b = stem(m.group("a").lower()), stem(m.group("b").lower())
        if a != b and a in asked and b in asked:
            return True
    for m in _ASIDE.finditer(marked):
        inside = m.group("inside")
        if inside is None:  # s/send/request
            return True
        words = re.findall(r"[a-z]+", inside.lower())
        lead = words[1] if words[:1] == ["or"] and len(words) > 1 else words[0] if words else ""
        if stem(lead) in asked and not lead.endswith("ed"):  # (request pls), (or email)
            return True
    return False


_MINE = re.compile(
    rf"\bmy\s+(?:own\s+)?iban\b|{_MARK}\s*,\s*(?:that's\s+|which\s+is\s+)?my\s+(?:own\s+)?"
    r"(?:iban|account)\b|\bpayments?\s+(?:made\s+|sent\s+)?to\s+(?:me|us|myself|my\s+(?:own\s+)?"
    r"(?:account|iban))\b",
    re.IGNORECASE,
)
_RECEIVES = re.compile(
    rf"\b(?:send|pay|transfer|wire|give|lend)\s+(?:me|us)\s+(?:[€$£]\s*)?{_MARK}"
    rf"|\b(?:send|pay|transfer|wire)\s+(?:{_MARK}\s+|money\s+)?(?:\w+\s+)?to\s+(?:me|us|myself|"
    r"my\s+(?:own\s+)?account)\b",
    re.IGNORECASE,
)
"""Money to the speaker: ``send me 250``, ``pay me 300``, ``send money to me``."""
_OWN_VALUE = re.compile(
    rf"\b(?:i'm|i\s+am|it's\s+me|it\s+is\s+me|this\s+is)\s*[,:-]?\s*{_MARK}"
    r"|\b(?:i'm|i\s+am|we're|we\s+are|i\s+sit|we\s+sit|i\s+work|we\s+work)\s+(?:sitting\s+|based\s+|"
    rf"located\s+|staying\s+)?(?:in|at|from)\s+(?:(?:the\s+)?(?:room|office|building|desk|site)\s+)?{_MARK}"
    rf"|(?:^|[.!?;,-])\s*{_MARK}\s+here\b|\bmy\s+(?:(?:own|registered|login|user|e-?mail)\s+)*"
    r"(?:e-?mail|address|account|login|id|iban|username|name|number|room|office|desk|seat)"
    r"(?:\s+(?:is|=))?\s*[:=-]?\s*"
    rf"{_MARK}|{_MARK}\s*[,(]?\s*(?:that's|that\s+is|which\s+is|it's)\s+(?:me|mine|us|ours|my\s+own)\b"
    rf"|\b(?:regards|thanks|thank\s+you|cheers|sincerely|best)\s*[,.!:-]*\s*{_MARK}\s*[.!]?\s*$"
    rf"|(?:--|\s-|\u2014|\u2013)\s*{_MARK}\s*[.!]?\s*$"
    rf"|(?:^|[.!?]\s*)account\s*:?\s*{_MARK}\s*(?:$|[.!?])"
    rf"|(?:^|[.!?])\s*{_MARK}\s+(?:please|pls|plz|kindly)\b",
    re.IGNORECASE,
)
"""A value named as the speaker's own (``I'm X``, ``X here``, ``my email is X``, ``X (that's
me)``, ``I'm in room X``, ``my office is X``), signing the request (``… Regards, X``,
``… -- X``) or addressed (``X, please…``, ``Dear X``, ``To: X``): the writer or the one
asked, not what the job acts on — unless the job's own requests name their value so."""
_ADDRESSED = re.compile(
    r"\s*(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|[A-Z]{2}\d{2}[A-Z0-9]{10,30})\s*(?:[:,]|\s-\s|--)"
)
"""An address or an IBAN opening the request before a colon, a comma or a dash: the writer,
or the one asked (``ann@…: please share…``, ``FR80…, please send 250``)."""
_GREETED = re.compile(
    rf"\b(?:hi|hello|hey|dear|yo)\s*,?\s*{_MARK}|\bto\s*:\s*{_MARK}|,\s*(?:hi|hey)\s+{_MARK}",
    re.IGNORECASE,
)
"""A value greeted or written to (``Hi alice@…, please…``, ``To: X``): the one asked."""
_HAVE_NOW = re.compile(
    rf"\b(?:i|we)\s*(?:have|'ve|'ve\s+got|have\s+got|got|currently\s+have|am\s+at|'m\s+at)\s+(?:only\s+)?"
    rf"{_MARK}|\b(?:i|we)\s+have\s+{_MARK}\s*$",
    re.IGNORECASE,
)
"""A number the speaker has now (``…, I have 2 checked bags``): the state, not the one asked."""
_ONLY_ME = re.compile(r"\b(?:just|only|solely)\s+for\s+(?:me|us|myself|ourselves)\b", re.I)
_TOLD = re.compile(
    rf"\b(?:know|knew|wonder(?:ing)?|ask(?:ing)?)\s+(?:if\s+|whether\s+)?{_MARK}"
    r"|\btell\s+me\s+(?:that\s+)?(?:you|u)\b",
    re.IGNORECASE,
)
_HOW_TO = re.compile(
    r"\b(?:where|how|when|what|whom?|which)\s+to\s+(?!me\b|us\b|you\b)[a-z]+|\bfrom\s*\?",
    re.IGNORECASE,
)

_BY_ME = re.compile(r"\b(?:from|by)\s+me\b(?!\s+(?:at|on|via)\b)", re.IGNORECASE)
"""The speaker as the one who did it (``too many failed logins on the account of E-1042 from
me``, ``the order placed by me for…``): the value may be someone else's."""
_KINDS = (
    ("person", _PERSON),
    ("another", _ANOTHER),
    ("address", _ADDRESS),
    ("only me", _ONLY_ME),
    ("mine", _RECEIVES),
    ("speaker", _OWN_VALUE),
    ("addressed", _GREETED),
    ("now", _HAVE_NOW),
    ("mine", _MINE),
    ("told", _TOLD),
    ("how to", _HOW_TO),
    ("destination", _DESTINATION),
    ("whether", _WHETHER),
    ("vague", _VAGUE),
    ("yours", _YOURS),
    ("when", _WHEN),
    ("otherwise", _OTHERWISE),
    ("while", _WHILE),
    ("cut off", _CUT_OFF),
    ("reply", _REPLY),
    ("by me", _BY_ME),
)
"""The kinds of loose end found by one pattern each, in the order they are reported."""

LOOSE_ENDS = {
    "person": "it joins another person (me, us, myself) to what the job acts on",
    "another": "it joins another of the things the job acts on (my last order, and my "
    "latest): one, or two?",
    "address": "it asks for an address (the last e-mail address from X), not a message",
    "destination": "it names a second destination (and to…, and with…, to X to me, forward me "
    "… to X, share … with me, refund … into the account of X)",
    "whether": "it asks whether a value should be so (should it be 55?, can the amount be "
    "55?, the amount should be 55?), not for the job",
    "only me": "it asks for the job only for the speaker (just for me), where the flow acts "
    "for everyone",
    "mine": "it names the speaker's own IBAN or account as the value, or payments or money "
    "to the speaker (my IBAN X, X, my account, payments to me, send me 250): the job's value "
    "is the other side",
    "speaker": "it names the value as the speaker's own, signing the request or as the one "
    "asked (I'm X, X here, my email is X, Regards, X, Dear X, X: please…) where the job's "
    "requests never do: the job's value is someone else",
    "addressed": "it greets or writes to a value (Hi X, Dear X, To: X): the one asked, not "
    "what the job acts on",
    "now": "it says what the speaker has now (I have 2 checked bags): the state, not the "
    "value asked for",
    "told": "it asks to be told or to know something (tell me you…, I'd like to know X "
    "invited…), not for the job",
    "how to": "it asks how, where or whence (how to reset, where to order, … from?), not for "
    "the job done",
    "then": "it asks for a second action after the first",
    "someone": "a value names someone who wants it or is to do it (X wants to…, I need X to…)",
    "vague": "it leaves a value or the job vague (or so, and so on, or that, +/-, 100?, "
    "cancel? my…)",
    "yours": "it asks for someone else's thing (your password, its account, the meeting you "
    "have, X's invoice to me, X … for my account): whose is it?",
    "when": "it asks for the job at a time of its own (in March, tomorrow, at night), not now",
    "otherwise": "it offers another way (Or can you…?, otherwise…, request or send?, an aside: "
    "(request pls)): which one is asked?",
    "while": "it asks for the job for a while (for now, until…), where the flow's is lasting",
    "cut off": "it is cut off (it ends on a conjunction, a preposition or an open mark)",
    "reply": "it ends acknowledging (got it, ok, will do): a reply, not a request",
    "by me": "it says the speaker did it (… from me, … by me): the value may be someone else's",
    "taken back": "a statement takes the request back or answers it (I need it, I can make "
    "it, I reset it, it is here, it boots again, I'll be there, it's paid, I know where it is)",
}
"""The kinds of loose end :func:`loose_ends` finds, and what each says."""


_VALUE_DID = re.compile(rf"{_MARK}\s+(?P<v>[a-z]+)\b(?!\s*[,:])", re.IGNORECASE)
"""A value anywhere and the word after it (``the item zoe@… received``)."""
_ACQUIRED = frozenset("received got gotten placed ordered bought purchased".split())
"""Past forms that, right after a value, make it the one who got or bought the thing (``the
item zoe@… received``, ``the order alice@… placed for me``, ``the laptop E-3456 got``): the
value is that person, not whose account the job acts on. (``reservation X cancelled``,
``flight X delayed`` are not: other past forms after a value ask or describe.)"""


def _does(word: str, verbs: frozenset[str]) -> bool:
    """Whether ``word`` after a value opening a sentence is a verb the value does: one of
    ``verbs``, or any verb in a past form (``E-3333 broke my laptop``, ``zoe@… deleted…``)."""
    past = word in IRREGULAR or (word.endswith("ed") and not word.endswith("eed") and len(word) > 4)
    return stem(word) in verbs or past


def loose_ends(text: str, *, verbs: frozenset[str]) -> tuple[str, ...]:
    """The kinds of loose end (:data:`LOOSE_ENDS`) ``text`` has; ``verbs`` are the stems of
    verbs of request or action (one after ``and``, ``then``… that follows another is a
    second action; leave out the verbs that only ask, such as ``want`` and ``need``).

    Example:
        >>> v = frozenset({"add", "invit"})
        >>> loose_ends("Add priya@acme.example to eng-oncall and me", verbs=v)
        ('person',)
        >>> loose_ends("Invite zoe@x.example to EVT-2101 and add an event", verbs=v)
        ('then',)
        >>> loose_ends("Add priya@acme.example to eng-oncall and", verbs=v)
        ('cut off',)
        >>> loose_ends("Please add priya@acme.example to eng-oncall", verbs=v)
        ()
    """
    marked = VALUE_PATTERN.sub(lambda m: f" {_MARK}" + blank_value(m), text)
    joined = _LEAD_IN.sub(" ", marked)  # `go ahead and add…` is one action
    first = next(  # where the first verb of action ends: a second one is after it
        (w.end() for w in re.finditer(r"[A-Za-z']+", joined) if stem(w.group(0).lower()) in verbs),
        None,
    )
    then = first is not None and any(
        stem(m.group("verb").lower()) in verbs and first <= m.start()
        for m in _THEN.finditer(joined)
    )
    subject = (m.group("v").lower() for m in _VALUE_DOES.finditer(marked))
    someone = _SOMEONE.search(marked) is not None or any(_does(v, verbs) for v in subject)
    someone = someone or any(  # `the item zoe@… received`, `the order alice@… placed`
        m.group("v").lower() in _ACQUIRED for m in _VALUE_DID.finditer(marked)
    )
    found = list(
        dict.fromkeys(
            kind
            for kind, regex in _KINDS
            if regex.search(marked)
            or (kind == "yours" and (_whose(marked) or _OTHER_ACCOUNT.search(marked)))
            or (kind == "speaker" and _ADDRESSED.match(text) is not None)
        )
    )
    found += ["taken back"] * (taken_back(marked, verbs) or done_already(joined, verbs))
    if "destination" not in found and _speaker_receives(marked):
        found.insert(1, "destination")
    if "otherwise" not in found and _two_ways(marked, verbs):
        found.append("otherwise")
    if "vague" not in found and _HESITANT.search(marked):
        found.append("vague")
    found[2:2] = ["then"] * then + ["someone"] * someone
    return tuple(found)


_AFTER_OBJECT = frozenset(
    "to for on at in from with into as onto please pls plz thanks thank".split()
)


def value_objects(text: str, verbs: Collection[str]) -> frozenset[tuple[str, str]]:
    """(stem, kind of value) for each of the ``verbs`` (base forms) that takes a value as its
    whole object: the value right after the verb, then the clause's end or a preposition
    (``Unlock E-7453``, ``Invite zoe@… to EVT-1``; not ``reset for bob@…``, nor ``Send bob@…
    the invoice``). The kind is ``@`` for an address, ``#`` for a value with a digit, ``a``
    for any other (``Invite EVT-1 to zoe@…`` gives the verb an id, not an address), and
    ``'s`` when the object is the value's thing (``add priya@…'s group to…``).

    Example:
        >>> sorted(value_objects("Unlock E-7453? Send bob@x.io the invoice", {"unlock", "send"}))
        [('unlock', '#')]
    """
    marked = VALUE_PATTERN.sub(lambda m: f" \x00{_kind(m.group(0))} ", text.lower())
    words = re.findall(r"[a-z]+|\x00[@#a]|[.?!;:,()]", marked)
    ends = [*words, ".", "."]
    return frozenset(
        (stem(a), "'s" if c == "s" else b[1])
        for a, b, c in zip(words, ends[1:], ends[2:], strict=False)
        if a in verbs
        and b.startswith("\x00")
        and (c in _AFTER_OBJECT or not c.isalpha() or c == "s")
    )


def _kind(value: str) -> str:
    return "@" if "@" in value else "#" if any(ch.isdigit() for ch in value) else "a"
