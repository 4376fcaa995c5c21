"""How a request is read for its job (:func:`read_request`): its words, values, negations,
how its sentences open, whom it names — the reading both a request and a job's evidence get.

- the text is NFKC-normalised; values — e-mail addresses, URLs, words holding a digit,
  snake_case ids — are taken out first: they are the job's inputs, never its intent;
- courtesy is read plainly: ``would you mind``, ``could I have`` ask (as ``please``);
  greetings, thanks, a closing and the writer's name, and the words that introduce the
  address (``you can reach me at``, ``account holder:``) say nothing;
- the rest is split into words (quotes no apostrophes), lowercased, accents kept (a word
  with one is a word of its own: ``méeting`` is no ``meeting``), irregular past forms read
  as their verb (``sent`` → ``send``; ``did`` stays: a question about the past), stemmed
  (Snowball, ``orders`` → ``order``) — a noun made from a verb of action stays whole
  (``cancellation``); filler words (articles, pronouns of the speaker, "please", "could
  you") are left out. Question words, auxiliaries that open a question (``has my order
  been…``), verbs of action and other people's words are kept: they tell jobs apart.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from soloflow_core.memory import courtesy
from soloflow_core.memory.forms import (
    IRREGULAR,
    LIKE_TO_KNOW,
    SAME_PAST,
    SENDING,
    around_values,
    blank_value,
    gerund,
    had_done,
    joined_letters,
    objects_of,
    plural_stems,
    says_send,
    stranded,
    tag_question,
    thanked_for,
    unread_marks,
)
from soloflow_core.store.fulltext import VALUE_PATTERN, stem

__all__ = [
    "ACTION_STEMS",
    "ACTION_WORDS",
    "IRREGULAR",
    "NEGATION",
    "NEGATION_SCOPE",
    "NOUN_ENDINGS",
    "PARTY_WORDS",
    "REQUEST_STEMS",
    "REQUEST_VERBS",
    "SENDING",
    "says_send",
    "RequestText",
    "read_request",
    "words_of",
]

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]*)?")
_QUOTED = re.compile(r"(?<![\w'’])['‘’]([^'‘’\n]{1,80}?)['’](?![\w'’])")
NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|neither|nor|without|cannot|unless|instead|"
    r"stop|avoid|refrain|dont|doesnt|didnt|wont|cant|shouldnt|isnt|arent|wasnt|"
    r"no\s+longer|donot)\b|\b\w+n['’]t\b|\b\w+['’]nt\b|\bn['’]t\b",
    re.IGNORECASE,
)
_RETRACTION = re.compile(
    r"\b(?:never\s*mind|nvm|just\s+kidding|kidding|jk|scratch\s+that|forget\s+(?:it|that|about\s+it)"
    r"|nah|nope|no,?\s+wait|wait,?\s+no|actually,?\s+no|not\s+really|cancel\s+that"
    r"|ignore\s+(?:that|this|the\s+above|previous|all)|disregard|hold\s+(?:on|off|it|that)"
    r"|don'?t\s+bother|on\s+second\s+thought"
    r"|(?:^|(?<=[.!?,;:…—–-])|(?<=[.!?,;:…—–-]\s))"  # `wait` standing alone: `…, wait.`
    r"(?:wait|hang\s+on|hold\s+up)(?=\s*(?:[.!?,;…—–-]|$))"
    r"|(?:cancel|withdraw|drop|revoke|delete|scrap|void|retract)\s+(?:my|this|that|the|our|your)\s+"
    r"(?:(?:last|previous|earlier|above|own|current)\s+)?request)\b",
    re.IGNORECASE,
)
_QUOTED_WHOLE = re.compile(
    r"\s*(?:\"[^\"\u201c\u201d]+\"|\u201c[^\"\u201c\u201d]+\u201d|'[^'\u2018\u2019]+'"
    r"|\u2018[^'\u2018\u2019]+\u2019|\u00ab[^\u00ab\u00bb]+\u00bb)[\s.?!]*$"
)
"""A request in quotes and nothing else (``"Please send 250 to …"?``)."""
_MARKUP = re.compile(r"[<>{}\[\]`*|#~^\\]|(?:^|\s)_\w|\w_(?:\s|$)")
_A_MESSAGE = re.compile(r"\b(the|this|that|an?)\s+(?:email|mail)\b(?!\s+address)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[^.?!;\n]+[.?!;\n]*")
"""A sentence and the marks ending it."""
_CLAUSE_END = re.compile(
    r"[,.;:!?()\u2014\u2013]|\s-\s|\b(?:but|and|so|because|since|although|though)\b", re.IGNORECASE
)

FILLER = frozenset(
    """a an the this that it its it's i i'm im me my we us our you
    your there here to for of on in at by with from into onto as and or but so also just
    please pls plz kindly thanks thank thx hi hello hey dear ok okay yes sir madam get
    got give gimme want wanted need needed like would'd let quick quickly asap again
    now right away really very much can could would will u ya be am been being request
    requesting""".split()
)
"""Words that say nothing of the job. Question words, auxiliaries, conditionals, verbs of
action, other people's words and quantifiers (``all``, ``any``, ``some``, ``these``: *which*
of the things the job acts on) are not here: they are what tells one job from another —
``refund all my orders`` is not ``refund my last order``; nor ``know``, ``tell`` and
``via`` (``… I need to know``, ``tell E-1042 to…``, ``via bob@…`` say whether it is asked,
who is asked or whose it is; ``I'd like to know the status…`` asks like ``please``, and
``via e-mail`` is the address's wording)."""
_FILLER_EXTRA = frozenset({"e", "mail", "email", "address", "s", "t", "d", "ll", "ve", "m"})
"""Parts of a value's wording (``e-mail``, ``my address is``) and of contractions (``re`` is
not: ``re-refund``, ``RE:`` say more than ``you're``)."""
_GREETING = frozenset(
    """hi hello hey dear ok okay so well please pls plz thanks yes good morning afternoon
    evening just simply""".split()
)
_WH = frozenset(
    """how why what when where which who whom whose what's where's how's who's when's""".split()
)
_AUX = frozenset(
    """is are was were am has have had did does do should shall may might must will would can
    could isn't aren't wasn't hasn't haven't didn't doesn't""".split()
)
_AUX_FORMS = {"are": "is", "am": "is", "were": "was", "does": "do", "has": "have"}
"""Forms of one auxiliary in one tense, one word to the job's evidence (``How many bags are
free`` where its texts ask ``What is the allowance``); tenses stay apart (``did``, ``was``)."""
_PLEASE = frozenset("please pls plz kindly thanks thank thx now asap".split())
_CONJUNCTIONS = frozenset({"or", "and", "but", "so", "then"})
"""Words a sentence may open with before its question (``Or can I?``)."""
_POLITE = frozenset({"can", "could", "would", "will"})
"""Auxiliaries that open a request, not a question, when ``you``/``I``/``someone`` follows."""
_ASKER = frozenset({"you", "u", "ya", "i", "we", "someone", "somebody", "anyone"})
_LISTENER = frozenset({"you", "u", "ya"})
_S_CONTRACTIONS = frozenset(
    """it's that's what's where's here's there's who's how's let's he's she's when's why's""".split()
)

ACTION_WORDS = (
    "add activate apply approve archive assign ban block book buy cancel change close confirm "
    "create deactivate decline delete deliver deny deploy disable dispute downgrade drop edit "
    "enable erase escalate export forward freeze grant hold import install invite issue link "
    "lock merge modify move notify open pause pay process publish reactivate rebook reject "
    "remove rename renew reopen replace reschedule reserve reset restart restore resume return "
    "revert revoke schedule sell send share ship submit subscribe suspend switch terminate "
    "transfer unassign unban unblock unfreeze uninstall unlink unlock unsubscribe update "
    "upgrade upload void withdraw wipe"
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
    them they uncle user users wife accounting accountancy accounts finance payroll""".split()
)
"""Words naming another person: a request for someone else is not the job learned from
requests for oneself, unless the job's evidence says so."""

REQUEST_VERBS = frozenset(ACTION_WORDS) | frozenset(
    "check track find look show list tell give get email mail refund help resend fix reimburse "
    "lookup verify retrieve fetch provide need want request".split()
)
"""Verbs a request opens with (the imperative): ``Refund my…``, ``Track…``, ``Send me…``."""
REQUEST_STEMS = frozenset(stem(w) for w in REQUEST_VERBS)
ACTION_STEMS = frozenset(stem(w) for w in ACTION_WORDS)
_DOING = REQUEST_STEMS | ACTION_STEMS
"""Stems of verbs that change the world: one the job's evidence is not familiar with vetoes
a run."""
_FILLER_STEMS = frozenset(stem(w) for w in FILLER | _FILLER_EXTRA) | FILLER | _FILLER_EXTRA


NOUN_ENDINGS = ("tion", "tions", "sion", "sions", "ment", "ments", "ance", "ances", "ence")
"""Endings of nouns made from verbs (``cancellation``, ``payment``): the stemmer gives them
the verb's stem, but they name a thing, not the action (``cancel my cancellation``): such a
noun is its own word."""


def _normalized(text: str) -> str:
    """NFKC (fullwidth and compatibility forms to their plain letters)."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words_of(text: str) -> list[str]:
    """The words of ``text``, lowercased; accents are kept (``méeting`` is no ``meeting``, a
    look-alike; negations and retractions are read with them dropped)."""
    lower = text.lower() if text.isascii() else unicodedata.normalize("NFC", text.casefold())
    return [w.replace("’", "'") for w in _WORD.findall(_QUOTED.sub(r" \1 ", lower))]


def _content(word: str) -> str | None:
    """The stem a word contributes to the request's terms, or None (filler, a contraction)."""
    if word in FILLER or word in _FILLER_EXTRA or NEGATION.fullmatch(word):
        return None
    base = word.split("'", 1)[0] if "'" in word else word
    if base in ("mine", "yours", "ours", "myself", "ourselves") or base in PARTY_WORDS:
        return base  # whose, or who does it: not a word of the job (`… and mine`, `accountant`)
    s = stem(IRREGULAR.get(base, _AUX_FORMS.get(base, base)))
    if s in _FILLER_STEMS and base.endswith("ly"):
        return base  # `likely` is no `like`
    if s in ACTION_STEMS and base.endswith(NOUN_ENDINGS):
        return base.removesuffix("s")  # a cancellation is not the verb cancel
    return s if s and s not in _FILLER_STEMS else None


def _opened(words: list[str]) -> list[str]:
    """``words`` without the greetings and conjunctions a sentence may open with."""
    while words and (words[0] in _GREETING or words[0] in _CONJUNCTIONS):
        words = words[1:]
    return words


def _lead(words: list[str]) -> str | None:
    """The question word or auxiliary ``words`` open with as a question, or None ("can you
    …" asks; "can I?" or "or can I?" with nothing after it is a question)."""
    first = words[0] if words else ""
    first = first[:-1] if first in courtesy.WH_UNMARKED else first  # `whats` → `what`
    polite = first in _POLITE and len(words) > 2 and words[1] in _ASKER
    if polite and (words[2] in courtesy.DOUBTING or words[2] == "be"):  # `Would you really…?`
        return words[2]
    if first in _WH or (first in _AUX and not (polite and words[2] not in courtesy.WANTING)):
        return first.split("'", 1)[0]  # where's → where
    return None


def _noun_use(sentence: str, first: str) -> bool:
    """Whether ``first`` is followed, right after it (no value between), by ``of``, ``for``,
    ``on`` or ``request``: a noun (``Refund for my order…``), not the verb (``Book A4-114
    for…``, its value taken out, leaves a wider gap)."""
    at = re.search(rf"\b{re.escape(first)}\b", sentence, re.IGNORECASE)
    return at is not None and courtesy.NOUN_NEXT.match(sentence, at.end()) is not None


def _openings(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the stem each sentence opens with, the word each sentence opens with when it opens as
    a question: a question word, or an auxiliary that is not a polite ``can you``).

    A question's last clause counts too (``…, is that ok?``), and a question of nothing but
    filler (``Really?``, ``Ok?``) is read as the question ``?``."""
    openers: list[str] = []
    leads: list[str] = []
    for m in _SENTENCE_END.finditer(text):
        sentence = m.group(0)
        asked = "?" in sentence[len(sentence.rstrip(courtesy.ENDING)) :]  # `?`, `?!`, `!?`, `?.`
        raw = words_of(sentence)
        words = _opened(raw)
        # `…, really?` asks back: a last clause of filler only (`…, please?` asks for it)
        tail = words_of(sentence.rsplit(",", 1)[1]) if "," in sentence else words
        if asked and (
            not any(_content(w) for w in words)
            or tag_question(sentence)
            or (tail and not any(_content(w) or w in _PLEASE for w in tail))
        ):
            leads.append("?")
        if not words:
            continue
        first = words[0].split("'", 1)[0]
        # neither a gerund (`Cancelling …`: narrates) nor `reservation` opens a request
        verb = not first.endswith(NOUN_ENDINGS) and not gerund(first, verbs=_DOING)
        if _noun_use(sentence, first):  # `Refund for my order…`, `Transfer of 250…`
            openers.append(f"{first} {words[1]}")
        else:
            openers.append(stem(first) if verb else first)
        clauses = [words]
        if asked and "," in sentence:
            clauses.append(_opened(words_of(sentence.rsplit(",", 1)[1])))
        # `Where is my order from?` asks the origin, not where the order is
        found = [f"{x} {stranded(sentence)}".strip() if x else x for x in map(_lead, clauses)]
        if asked:  # "You refunded my order?": a statement asked back is a question
            found += [c[0] for c in clauses if c and c[0] in ("you", "u")]
        if asked and not any(found) and not courtesy.ASKS_IN.search(sentence):
            found.append("?")  # `So refund my order?`, `Ok, I need X?`: asked back, not asked
        doubt = [w for w in raw[:2] if w in courtesy.DOUBTING]  # `So would you…?`
        if asked and doubt and any(w in _POLITE for w in raw[1:3]):
            found.append(doubt[0])
        leads += [lead for lead in found if lead]
    return tuple(dict.fromkeys(openers)), tuple(dict.fromkeys(leads))


def _narrated(text: str) -> tuple[str, ...]:
    """Stems of verbs of request or action whose ``-ing`` form opens a clause (greetings and
    filler skipped: ``Cancelling reservation …``, ``Hi, refunding my order``, ``Re: resetting
    …``) in a sentence that asks for nothing (no ``please``, ``can you``, ``I'd like``): it
    narrates the action, it does not ask for it. ``text`` is the request with its courtesy
    read (``would you mind cancelling`` asks)."""
    found: list[str] = []
    for sentence in _SENTENCE_END.finditer(text):
        if courtesy.ASKING.search(sentence.group(0)):
            continue
        for clause in re.finditer(r"[^,:\u2014\u2013]+", sentence.group(0)):
            words = [w for w in words_of(clause.group(0)) if w not in _GREETING]
            while words and (words[0] in FILLER or words[0].endswith("ly")):
                words = words[1:]
            if words and gerund(words[0], verbs=_DOING):
                found.append(stem(words[0]))
    return tuple(dict.fromkeys(found))


def _parties(words: list[str]) -> tuple[str, ...]:
    """Other people a text names: :data:`PARTY_WORDS`, possessives (``wife's``, ``bob's``),
    and the listener as the subject of a question (``what transactions did you have``,
    ``do you have…``: an auxiliary before ``you`` that is no polite ``can``/``could``/
    ``would``/``will you``)."""
    found: list[str] = []
    for i, w in enumerate(words):
        if w in _LISTENER and i > 0 and words[i - 1] in _AUX and words[i - 1] not in _POLITE:
            found.append(w)
        elif w in PARTY_WORDS:
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
    reported: tuple[str, ...] = ()
    """Stems of verbs of request or action it uses in a past form opening a clause or after
    a subject (``Refunded my order?``, ``you cancelled…``, ``I sent…``): it reports what was
    done, it does not ask for it."""
    narrated: tuple[str, ...] = ()
    """Stems of verbs of request or action whose ``-ing`` form opens a clause of a sentence
    that asks for nothing (``Cancelling reservation …``): it narrates, it does not ask."""
    targets: tuple[str, ...] = ()
    """Stems of the nouns its verbs of action take as their object when the noun names a
    value: the word just before the value, at most one word (a modifier) after the verb and
    its determiners (``cancel user mia_li_3668`` → ``user``, ``cancel my upcoming
    reservation ZFA04Y`` → ``reservation``)."""
    actions: tuple[str, ...] = ()
    """Stems of its verbs of action (:data:`ACTION_STEMS`) used as verbs: not an ``-ing``
    form after ``my``/``the`` or before a value (``my booking``, ``booking ZFA04Y``); a noun
    made from one (``reservation``, ``payment``) is a word of its own. *Email* used as a verb
    (``email me…``, ``email bob@…``: :func:`says_send`) is ``send``."""
    plurals: tuple[str, ...] = ()
    """Stems of its words in a plural form (``orders`` → ``order``)."""
    objects: tuple[tuple[str, str, str], ...] = ()
    """(verb of request or action, the term after it, the term before it), per use."""
    around: tuple[tuple[str, str], ...] = ()
    """(term just before, term just after) each value (:func:`forms.around_values`)."""
    pairs: tuple[tuple[str, str], ...] = ()
    """(term, term) for two words side by side in a clause, the second one that may name a
    thing (``laptop screen``, not ``laptop is``, ``laptop broken``, ``laptop replacement``)."""


NEGATION_SCOPE = 6


def _negation(text: str) -> tuple[tuple[str, ...], bool]:
    """(stems governed by a negation, whether some negation governs nothing) in ``text``
    (values already taken out)."""
    folded = _fold(text).replace("’", "'")
    out: dict[str, None] = {}
    bare = False
    for cue in NEGATION.finditer(folded):
        clause = folded[cue.end() :]
        end = _CLAUSE_END.search(clause)
        scope = clause[: end.start()] if end else clause
        governed = [s for s in (_content(w) for w in words_of(scope)[:NEGATION_SCOPE]) if s]
        if not governed:
            bare = True
        out.update(dict.fromkeys(governed))
    return tuple(out), bare


_DETERMINERS = frozenset(
    "a an the my your our his her their its this that these those each every any".split()
)
_VALUE_MARK = "qqvalueqq"


_CLAUSE_MARKS = re.compile(r"[.;:!?,()\n\u2014\u2013]")


def _blank_marked(value: re.Match[str]) -> str:
    """A value as the mark of a value, the punctuation ending it kept (see :func:`_blank`)."""
    return f" {_VALUE_MARK}" + _blank(value)


def _actions(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(stems of the verbs of action ``text`` uses as verbs, stems of the words they take as
    their object when it names a value): see ``RequestText.actions`` and ``.targets``;
    ``text`` is the request with its courtesy read (values still in)."""
    words: list[str] = []
    clause_of: list[int] = []  # an object stays in its verb's clause
    for n, clause in enumerate(_CLAUSE_MARKS.split(VALUE_PATTERN.sub(_blank_marked, text))):
        got = words_of(clause)
        words += got
        clause_of += [n] * len(got)
    found: list[str] = []
    objects: list[str] = []
    for i, w in enumerate(words):
        s = _content(w)
        if s is None or s not in ACTION_STEMS:
            continue
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if w.endswith("ing") and (before in _DETERMINERS or after == _VALUE_MARK):
            continue
        found.append(s)
        rest = [x for j, x in enumerate(words[i + 1 :], i + 1) if clause_of[j] == clause_of[i]]
        while rest and rest[0] in _DETERMINERS:
            rest = rest[1:]
        # the noun naming the value: `cancel user mia_li_3668`, `cancel my upcoming
        # reservation ZFA04Y` (a word before the noun modifies it)
        head = rest[0] if rest[1:2] == [_VALUE_MARK] else None
        if rest[2:3] == [_VALUE_MARK] and _VALUE_MARK not in rest[:2] and _content(rest[0]):
            head = rest[1]
        thing = _content(head) if head and head != _VALUE_MARK else None
        if thing is not None:
            objects.append(thing)
    return tuple(dict.fromkeys(found)), tuple(dict.fromkeys(objects))


def _courteous(text: str) -> str:
    """``text`` with its courtesy said plainly: asking forms as ``please``; greetings, thanks,
    a closing name and the wording of its address left out. A closing "name" that is a verb
    of request or action, a negation or another person is kept (it may be an instruction)."""
    text = courtesy.VALUE_WORDING.sub(" ", text)
    sign = courtesy.SIGN_OFF.search(text)
    if sign is not None:
        name = words_of(sign.group("name"))
        if not any(
            stem(w) in REQUEST_STEMS
            or stem(w) in ACTION_STEMS
            or w in PARTY_WORDS
            or NEGATION.fullmatch(w)
            or w in _AUX
            or w in _WH
            for w in name
        ):
            text = text[: sign.start()]
    text = courtesy.COURTESY_ASK.sub(" please ", text)
    return courtesy.COURTESY.sub(" ", text)


_blank = blank_value
"""A value taken out of the text, the punctuation ending it kept (``… ZFA04Y. Or am I?``
is two sentences)."""


_SUBJECTS = frozenset({"i", "you", "u", "we", "they", "he", "she", "someone", "somebody"})
_STATE = frozenset("is are was were been being got gotten".split())
"""Words a past participle after which tells a state (``is cancelled``, ``got refunded``)."""
_PAST_OF = frozenset(IRREGULAR) - {"put"}


def _past_verb(word: str) -> str | None:
    """The stem of the verb of request or action ``word`` is a past form of (``sent``)."""
    if word in _PAST_OF:
        s = stem(IRREGULAR[word])
    elif word.endswith("ed") and len(word) > 4:
        s = stem(word)
    else:
        return None
    return s if s in _DOING else None


_ASKED = frozenset(stem(w) for w in ("want", "need", "request"))


def _future_be(words: list[str], i: int) -> bool:
    """``will be cancelled``, not ``to be cancelled`` nor ``that it be sent`` (which ask)."""
    return i > 1 and words[i - 1] == "be" and words[i - 2] in ("will", "shall", "i'll", "we'll")


def _reported(text: str) -> tuple[str, ...]:
    """Stems of verbs of request or action ``text`` uses in a past form that opens a clause
    (greetings skipped) or follows a subject (``you``, ``I``): what was done, reported.
    ``text`` keeps a mark for each value (``3 checked bags`` opens with no verb)."""
    found: list[str] = []
    for m in re.finditer(r"[^.?!;:,\n\u2014\u2013]+", text):
        words = _opened(words_of(m.group(0)))
        for i, w in enumerate(words):
            before = words[i - 1] if i else ""
            after = words[i + 1] if i + 1 < len(words) else ""
            if w == "got" and after in _DETERMINERS and (not i or before in _SUBJECTS):
                found.append("get")  # `I got a refund`, not `I got sick`
            elif not i or before in _SUBJECTS or before in _STATE or _future_be(words, i):
                s = _past_verb(w) or (stem(w) if before in _STATE and w in SAME_PAST else None)
                if s is not None:
                    found.append(s)
            elif before == _VALUE_MARK and (_past_verb(w) in _ASKED or (i == 1 and _past_verb(w))):
                # `alice@… wanted a reset`, `bob@… invited me to EVT-1`: the value is the subject
                found.append(stem(w) if _past_verb(w) in _ASKED else str(_past_verb(w)))
    return tuple(dict.fromkeys(found))


def _named(word: str) -> bool:
    """Whether ``word`` may name a thing after another noun (``laptop screen``): no verb form
    (``is``, ``broken``, ``cracked``), no noun made from a verb (``laptop replacement``)."""
    past = word in IRREGULAR or word.endswith("ed")
    return not (word in _AUX or past or word.endswith(NOUN_ENDINGS))


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
    plain = _courteous(normalized)
    rest = joined_letters(VALUE_PATTERN.sub(_blank, plain))
    rest = re.sub(r"\be-mail", "email", rest, flags=re.IGNORECASE)
    rest = _A_MESSAGE.sub(r"\g<1> message", rest)  # `cancel the email for my meeting`: a thing
    rest = re.sub(r"\bvia\s+(?=e?mail\b)", "", rest, flags=re.IGNORECASE)
    rest = LIKE_TO_KNOW.sub(r"\g<asks> ", rest)
    letters = [ch for ch in rest if ch.isalpha()]
    foreign = bool(letters) and sum(not ch.isascii() for ch in letters) * 2 > len(letters)
    words = words_of(rest)
    terms = tuple(dict.fromkeys(s for s in (_content(w) for w in words) if s))
    negated, bare = _negation(rest)
    flags: list[str] = []
    if _RETRACTION.search(_fold(rest)):
        flags.append("it takes itself back")
    if bare:
        flags.append("a negation governs the request itself")
    if _QUOTED_WHOLE.match(normalized):
        flags.append("it is quoted whole: a request reported or pasted, not asked")
    if _MARKUP.search(rest):
        flags.append("it is formatted text, not a plain request")
    flags += unread_marks(text, rest, verb=lambda w: _content(_fold(w)) in _DOING)
    openers, leads = _openings(rest)
    verbs, targets = _actions(re.sub(r"\be-mail", "email", plain, flags=re.IGNORECASE))
    _marked = VALUE_PATTERN.sub(f" {_VALUE_MARK} ", plain)
    clauses = [words_of(c) for c in re.split(r"[.?!;:,\n]", _marked)]
    return RequestText(
        text=text,
        terms=terms,
        values=values,
        negated=negated,
        foreign=foreign,
        parties=_parties(words),
        leads=leads,
        openers=openers,
        asking=courtesy.ASKING.search(rest) is not None,
        flags=tuple(flags),
        normalized=normalized,
        narrated=_narrated(VALUE_PATTERN.sub(_blank, plain)),
        targets=targets,
        plurals=plural_stems(words, content=_content, skip=_WH | _AUX),
        objects=objects_of(
            clauses,
            content=_content,
            verbs=REQUEST_STEMS | ACTION_STEMS,
            value=_VALUE_MARK,
        ),
        around=around_values(clauses, content=_content, value=_VALUE_MARK),
        pairs=tuple(
            (a, b)
            for c in ([(_content(w) or "", _named(w)) for w in ws] for ws in clauses)
            for (a, _), (b, thing) in zip(c, c[1:], strict=False)
            if a and b and thing and _VALUE_MARK not in (a, b)
        ),
        reported=_reported(_marked)
        + thanked_for(normalized, verbs=REQUEST_STEMS | ACTION_STEMS)
        + had_done(clauses, past=_past_verb, subjects=_SUBJECTS | {"i've", "we've"}),
        actions=tuple(
            dict.fromkeys([*verbs, *(("send",) if says_send(normalized) else ())])  # `email me`
        ),
    )
