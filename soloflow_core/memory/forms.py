"""Ways of writing a request that change what its words say: letters spelled apart, dotted
abbreviations, signs, emoticons and tone tags, tag questions, thanks, plural nouns.

:func:`~soloflow_core.memory.reading.read_request` uses these before it reads the words:

- letters spelled apart (``N O T``, ``D-O-N-T``, ``N.O.T.``) and dotted abbreviations
  (``e.g.``, ``i.e.``, ``P.S.``) are read as one word (``not``, ``eg``), so a negation
  spelled out is a negation and an abbreviation is a word of its own, not nothing;
- mathematical signs outside ASCII (``≠``, ``¬``, ``×``, ``∅``), emoticons (``;)``, ``:P``)
  and tone tags (``/s``, ``/j``) say something the reading does not read (no, irony, a
  joke): they flag the request, as an emoji does, and so does a word spelled apart;
- a question ending in a tag (``…, right?``) asks whether; thanks for the job (``thanks
  for cancelling…``) tell that it was done;
- a noun in a plural form (``orders``, ``invoices``) names several things: a job whose
  requests always name one is not asked for (``refund my orders``);
- a noun picked out from others of its kind (``my old account``, ``the other
  reservation``: :func:`picked_out`) may not be the one the request's value names;
- ``again``, ``once more`` ask for the job a second time (:func:`repeated`), and ``every
  month``, ``weekly``, ``from now on`` for it on a schedule (:func:`recurring`): neither is the
  one-off job, unless the job's own requests say so.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Mapping

from soloflow_core.store.fulltext import VALUE_PATTERN, stem

__all__ = [
    "LIKE_TO_KNOW",
    "SAME_PAST",
    "IRREGULAR",
    "SENDING",
    "acted_values",
    "around_values",
    "changed_by",
    "gerund",
    "hyphen_parts",
    "had_done",
    "joined_letters",
    "objects_of",
    "recurring",
    "repeated",
    "quantified",
    "plural_stems",
    "asks_yes_or_no",
    "blank_value",
    "says_send",
    "states_only",
    "stranded",
    "tag_question",
    "thanked_for",
    "unread_marks",
]

IRREGULAR: Mapping[str, str] = {
    past: base
    for base, forms in {
        "send": "sent",
        "pay": "paid",
        "buy": "bought",
        "lose": "lost",
        "make": "made",
        "take": "took taken",
        "tell": "told",
        "find": "found",
        "leave": "left",
        "break": "broke broken",
        "come": "came",
        "go": "went gone",
        "sell": "sold",
        "spend": "spent",
        "keep": "kept",
        "bring": "brought",
        "write": "wrote written",
        "choose": "chose chosen",
        "forget": "forgot forgotten",
        "give": "gave given",
        "see": "saw seen",
        "do": "done",
        "put": "put",
        "begin": "began begun",
        "hold": "held",
        "freeze": "froze frozen",
        "steal": "stole stolen",
        "get": "gotten",
    }.items()
    for past in forms.split()
}
"""Past forms of irregular verbs → the verb (``sent`` → ``send``): the stemmer leaves them."""
SAME_PAST = frozenset({"reset", "set", "put", "cut", "shut", "upset"})
"""Verbs whose past participle is their base: a state after ``is`` (``my account is reset``)."""
LIKE_TO_KNOW = re.compile(
    r"\b(?P<asks>(?:i'd|i\s+would|we'd|we\s+would)\s+like\s+to)\s+know\s+(?=(?-i:[a-z]))"
    r"(?![\w.+-]*@)(?![\w-]*\d)",
    re.IGNORECASE,
)
"""``I'd like to know the status of…``: a request for what follows, read without ``know``
(``… to know: could you…``, ``… to know, would you…`` ask whether, and so does a value
after it: ``I'd like to know paul@… invited to…``)."""

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


def _mixed_forms(word: str) -> bool:
    """Whether ``word`` holds both a plain ASCII letter or digit and a compatibility form of
    one (a full-width ``３``, a superscript ``²``)."""
    plain = folded = False
    for ch in word:
        if ch.isascii():
            plain = plain or ch.isalnum()
        else:
            form = unicodedata.normalize("NFKC", ch)
            folded = folded or (form != ch and form.isascii() and form.isalnum())
    return plain and folded


_DOUBT = re.compile("[\u203d\u2e2e\u00bf\u061f]|\\?\\s*\\?")
"""Marks of irony or doubt (``‽``, ``⸮``, ``??``), an opening ``¿``, the Arabic question
mark."""


def unread_marks(
    text: str, rest: str, *, verb: Callable[[str], bool] = lambda w: False
) -> list[str]:
    """What in ``text`` (``rest``: the same with its values taken out) says something the
    reading does not read: invisible characters, an emoji, a mathematical sign outside
    ASCII (``≠``, ``¬``), an emoticon (``;)``) or a tone tag (``/s``), a mark of irony or
    doubt (``‽``, ``⸮``, ``¿``); a word spelled apart (read as one word, but no plain
    request); a word mixing full-width and plain forms; a word with accents that ``verb``
    says is a verb of action once its accents are dropped (``invité``, Spanish for *I
    invited*, is no ``invite``)."""
    found: list[str] = []
    if _DOUBT.search(text):
        found.append("it holds a mark of irony or doubt (‽, ⸮, ??, ¿) whose meaning is not read")
    accented = [w for w in re.findall(r"[^\W\d_]+", rest) if not w.isascii() and verb(w)]
    if accented:
        found.append(
            f"a word with accents reads as a verb of action once they are dropped "
            f"({', '.join(accented[:3])}): a word of another language?"
        )
    kinds = {unicodedata.category(ch) for ch in text if not ch.isascii()}
    if any(unicodedata.category(ch) in ("Cf", "Cc") and ch not in "\n\r\t" for ch in text):
        found.append("it holds invisible characters")
    if "So" in kinds:
        found.append("it holds symbols (emoji) whose meaning is not read")
    if kinds & {"Sm", "Sk"}:
        found.append("it holds signs (≠, ¬, ×…) whose meaning is not read")
    if not text.isascii() and any(_mixed_forms(w) for w in text.split()):
        found.append(
            "a word mixes full-width (compatibility) forms with plain letters or digits: "
            "not written as one value"
        )
    if _SPELLED.search(text):
        found.append("it spells a word apart (N O T, c-a-n-c-e-l): read, but not plain")
    if _EMOTICON.search(rest) or _TONE_TAG.search(rest):
        found.append("it holds an emoticon or a tone tag (;), /s) whose meaning is not read")
    return found


_TAG = re.compile(
    r"\b(?:yes|no|ok|okay|right|correct|true|yeah|yep|eh|huh|agreed|deal|really|seriously|sure|"
    r"alright|for\s+real)\s*[?!]*\?[?!]*\s*$",
    re.IGNORECASE,
)


def tag_question(sentence: str) -> bool:
    """Whether ``sentence`` is a question ending in a tag (``…, right?``, ``… yes?``): it asks
    whether, it does not ask for."""
    return _TAG.search(sentence) is not None


_THANKED = re.compile(
    r"\bthank(?:s|\s+you)(?:\s+(?:very|so)\s+much)?\s+for\s+(?P<what>[^.;:!?,\n]+)", re.IGNORECASE
)
_THANKED_NOTHING = frozenset("help helping time assistance support patience understanding".split())


def thanked_for(text: str, *, verbs: frozenset[str]) -> tuple[str, ...]:
    """Stems of ``verbs`` (of request or action) ``text`` thanks someone for (``thanks for
    cancelling…``, ``thank you for the refund``): done, not asked for. Thanks for help or
    time say nothing."""
    out: list[str] = []
    for m in _THANKED.finditer(text):
        for w in re.findall(r"[^\W\d_]+", m.group("what").lower()):
            s = stem(w)
            if w not in _THANKED_NOTHING and s in verbs:
                out.append(s)
    return tuple(dict.fromkeys(out))


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


def objects_of(
    clauses: list[list[str]],
    *,
    content: Callable[[str], str | None],
    verbs: frozenset[str],
    value: str,
) -> tuple[tuple[str, str, str], ...]:
    """(verb, word after it, word before it) for each verb of ``verbs`` in ``clauses`` (each
    a list of lowercased words): the term of the first word after it that ``content`` reads
    (``value`` when a value comes first; ``cancel my reservation`` → ``reservation``), and of
    the word just before it (``password reset`` → ``password``); ``""`` when none."""
    out: list[tuple[str, str, str]] = []
    for words in clauses:
        terms = [value if w == value else content(w) for w in words]
        for i, t in enumerate(terms):
            if t is None or t not in verbs:
                continue
            after = next((x for x in terms[i + 1 :] if x is not None), "")
            before = terms[i - 1] if i else None
            out.append((t, after, before or ""))
    return tuple(dict.fromkeys(out))


def gerund(word: str, *, verbs: frozenset[str] | set[str]) -> bool:
    """Whether ``word`` is the ``-ing`` form of one of ``verbs`` (stems): ``cancelling``,
    ``refunding``."""
    return word.endswith("ing") and stem(word) in verbs


SENDING = re.compile(
    r"(?:^|(?<=[^\w\s])|(?<=\s))(?P<before>\w+\s+)?e-?mail(?:ed|ing)?\s+"
    r"(?:it|me|us|them|my|the|this|that|[^\s@]+@)",
    re.IGNORECASE,
)
"""``email me…``, ``e-mail it``, ``email bob@example.com``: a way of saying *send* — not
after a word that makes *email* a noun (``my email bob@…``, see :func:`says_send`)."""
_EMAIL_NOUN = frozenset(
    "my your our his her their the an this that same new old account registered login "
    "contact primary work personal".split()
)


def says_send(text: str) -> bool:
    """Whether ``text`` uses *email* as a verb (``email me``, ``e-mail it to``, ``email
    bob@example.com``), not as a noun (``my email bob@…``, ``account email a@b``)."""
    for m in SENDING.finditer(text):
        before = (m.group("before") or "").strip().lower()
        if before not in _EMAIL_NOUN:
            return True
    return False


def around_values(
    clauses: list[list[str]], *, content: Callable[[str], str | None], value: str
) -> tuple[tuple[str, str], ...]:
    """(term just before, term just after) each value of ``clauses`` (lowercased words, each
    value written as ``value``); ``""`` where the word is filler or absent. The word after
    counts only when no value follows within two words (``ZFA04Y user id mia_li_3668``:
    ``user`` names the next value): ``reservation ZFA04Y account`` → (``reservation``, ``account``)."""
    out: list[tuple[str, str]] = []
    for words in clauses:
        for i, w in enumerate(words):
            if w != value:
                continue
            before = (content(words[i - 1]) or "") if i and words[i - 1] != value else ""
            nxt = words[i + 1] if i + 1 < len(words) else ""
            named_next = value in words[i + 2 : i + 4]
            after = (content(nxt) or "") if nxt and nxt != value and not named_next else ""
            out.append((before, after))
    return tuple(dict.fromkeys(out))


_HAD_DONE = frozenset({"got", "had", "gotten"})


def had_done(
    clauses: list[list[str]], *, past: Callable[[str], str | None], subjects: frozenset[str]
) -> tuple[str, ...]:
    """Stems of verbs ``past`` reads as past participles after ``got``/``had`` + the thing
    (``I got reservation ZFA04Y cancelled``, ``I've had my order refunded``): the causative
    in the past reports what was done. ``get``/``have`` (``I'd like to have it cancelled``)
    ask. ``got``/``had`` must open the clause or follow a subject; no ``to`` between."""
    out: list[str] = []
    for words in clauses:
        for i, w in enumerate(words):
            if w not in _HAD_DONE or (i and words[i - 1] not in subjects):
                continue
            for x in words[i + 2 : i + 6]:
                if x == "to":
                    break
                s = past(x)
                if s is not None:
                    out.append(s)
                    break
    return tuple(dict.fromkeys(out))


_STRANDED = re.compile(r"\b(from|for|to|about|with|of|into)\?", re.IGNORECASE)
"""A preposition ending a question (``Where is my order from?``): the question word is its
object, so the question asks something else than the plain one (``where`` → origin)."""


def stranded(sentence: str) -> str:
    """The preposition ``sentence`` ends with before its question mark, or ``""``."""
    m = _STRANDED.search(sentence.rstrip())
    return m.group(1).lower() if m and sentence.rstrip().endswith("?") else ""


def acted_values(
    text: str, values: tuple[str, ...], *, verbs: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    """(verb stem, value) for each value of ``values`` that a verb of ``verbs`` takes as its
    whole object (determiners skipped; the value ends its clause or a preposition follows:
    ``cancel mia_li_3668 for reservation …``; ``set 3 checked bags`` is no whole object)."""
    out: list[tuple[str, str]] = []
    for value in values:
        m = re.search(
            r"([^\W\d_]+)\s+(?:(?:my|the|our|this|that|your)\s+)?"
            + re.escape(value)
            + r"(?!['’]s\b)(?=\s*(?:$|[^\w\s]|(?:for|with|on|in|of|from|at|to|please|pls|and)\b))",
            text,
            flags=re.IGNORECASE,
        )
        if m and stem(m.group(1).lower()) in verbs:
            out.append((stem(m.group(1).lower()), value))
    return tuple(dict.fromkeys(out))


_MORE = r"(?:more|extra|additional|further|fewer|less)"
_COUNT = re.compile(r"\d{1,6}")
"""A plain count: ``add 2 checked bags`` adds two (``add E-1042 to …`` names a person)."""
_BY_VERB = r"\b(?:increas|rais|bump|top\s+up|up\b|reduc|lower|decreas|cut|drop)\w*\b[^.;!?\n]{0,40}?\bby\s+"


def changed_by(text: str, values: Collection[str]) -> tuple[str, ...]:
    """The values in ``text`` holding a digit that it qualifies as a change of a quantity,
    not the quantity: ``2 more bags``, ``2 extra``, ``another 2``, ``an additional 2``,
    ``increase the order by 20``, ``add 2 checked bags``.

    Example:
        >>> changed_by("Please add 2 more checked bags to B6HDF4", ["2", "B6HDF4"])
        ('2',)
        >>> changed_by("Please set 2 checked bags on B6HDF4", ["2", "B6HDF4"])
        ()
    """
    out: list[str] = []
    for value in dict.fromkeys(v for v in values if any(ch.isdigit() for ch in v)):
        v = rf"(?<![\w.,]){re.escape(value)}(?![\w])"
        if re.search(
            rf"{v}\s+{_MORE}\b|\b(?:another|an?\s+{_MORE}|{_MORE})\s+[$€£]?{v}|{_BY_VERB}[$€£]?{v}",
            text,
            re.IGNORECASE,
        ) or (_COUNT.fullmatch(value) and re.search(rf"\b(?:add|adding|plus)\s+{v}", text, re.I)):
            out.append(value)
    return tuple(out)


_QUANTIFIED = re.compile(
    r"\b(?:all|every|each|both)\s+(?:of\s+)?(?:(?:my|the|our|your|these|those|his|her|their)\s+)?"
    r"(?P<noun>[a-z]{3,})\b",
    re.IGNORECASE,
)
_QUANTIFIED_ADVERBS = frozenset("right set done ready good well over along".split())


def quantified(text: str) -> tuple[str, ...]:
    """Stems of the nouns ``text`` quantifies over: the word after ``all``, ``every``,
    ``each`` or ``both`` and a determiner (``for all my accounts`` → ``account``, ``every
    payment`` → ``payment``).

    Example:
        >>> quantified("Show me my transactions on 2022-03-28 for all my accounts")
        ('account',)
    """
    return tuple(
        dict.fromkeys(
            stem(m.group("noun").lower())
            for m in _QUANTIFIED.finditer(text)
            if m.group("noun").lower() not in _QUANTIFIED_ADVERBS | _THANKED_NOTHING
        )
    )


_REPEATED = re.compile(
    r"\b(?:again|once\s+more|one\s+more\s+time|another\s+time|a\s+second\s+time|"
    r"twice|re-?do|repeat)\b",
    re.IGNORECASE,
)
_RECURRING = re.compile(
    r"\b(?:hourly|daily|nightly|weekly|fortnightly|biweekly|monthly|quarterly|yearly|annually|"
    r"(?:every|each)\s+(?:other\s+)?(?:\d+\s+)?(?:hour|day|night|morning|evening|week|"
    r"month|quarter|year|time|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|"
    r"from\s+now\s+on|going\s+forward|on\s+a\s+(?:regular|recurring)\s+basis|"
    r"regularly|recurring|repeatedly|automatically|whenever)\b",
    re.IGNORECASE,
)


def blank_value(value: re.Match[str]) -> str:
    """A value taken out, the punctuation ending it kept (``… ZFA04Y. Again?``)."""
    text = value.group(0)
    return " " + text[len(text.rstrip(".,;:!?)")) :]


def repeated(text: str, *, verbs: Collection[str]) -> bool:
    """Whether ``text`` asks for something a second time: ``again``, ``once more``… in a
    clause holding one of ``verbs`` (stems of verbs of request or action: ``refund my order
    again``, ``send it once more``; ``I forgot my password again, please reset it`` does not).

    Example:
        >>> v = {"refund", "reset"}
        >>> repeated("Please refund my latest order again", verbs=v)
        True
        >>> repeated("I forgot my password again, please reset it", verbs=v)
        False
    """
    # a value's own dots and hyphens end no clause (`invite zoe.clark@… to EVT-2101 again`)
    plain = VALUE_PATTERN.sub(blank_value, text)
    for clause in re.split(r"[.,;:!?()\n\u2014\u2013]|\b(?:and|but|then)\b", plain):
        if _REPEATED.search(clause) and any(
            stem(w.lower()) in verbs for w in re.findall(r"[A-Za-z]+", clause)
        ):
            return True
    return False


def recurring(text: str) -> tuple[str, ...]:
    """How ``text`` asks for something on a schedule (``every month``, ``weekly``, ``from
    now on``), as written, lowercased.

    Example:
        >>> recurring("Send my latest invoice monthly, and every Monday from now on")
        ('monthly', 'every monday', 'from now on')
    """
    return tuple(
        dict.fromkeys(" ".join(m.group(0).lower().split()) for m in _RECURRING.finditer(text))
    )


_STATE = re.compile(
    r"\b(?:am|i'm|im|is|isn't|are|aren't|was|wasn't|were|been|being|be|got|get|gets|getting|"
    r"stay|stays|remain|remains|keep\s+getting)\s+(?:(?:still|now|all|just|completely|"
    r"already|again|\w+ly)\s+)?(?P<verb>[a-z]+ed)\b",
    re.IGNORECASE,
)


def states_only(text: str, verbs: Collection[str]) -> frozenset[str]:
    """The stems among ``verbs`` that ``text`` uses only as a state — a past participle after
    a form of *be*, *get* or *stay* (``my account is locked``, ``I'm locked out``) — and
    never otherwise (``… and lock it`` asks for the action).

    Example:
        >>> sorted(states_only("I'm locked out, please unlock me", {"lock", "unlock"}))
        ['lock']
        >>> sorted(states_only("It is locked, lock it again", {"lock"}))
        []
    """
    as_state = Counter(stem(m.group("verb").lower()) for m in _STATE.finditer(text))
    out: set[str] = set()
    for verb, n in as_state.items():
        if verb not in verbs:
            continue
        uses = sum(
            1
            for w in re.findall(r"[A-Za-z]+", text)
            if w.lower().startswith(verb) and stem(w.lower()) == verb
        )
        if uses <= n:
            out.add(verb)
    return frozenset(out)


_HYPHENED = re.compile(r"(?<![\w@.-])[A-Za-z]+(?:-[A-Za-z]+)+(?![\w@-])")


def hyphen_parts(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(stems of the words ``text`` holds inside hyphenated names, stems of the words it
    holds outside them): ``add ana@… to finance-readers`` holds ``financ`` and ``reader``
    only inside a name (a group's), which says nothing of ``as a finance reader``.

    Example:
        >>> inside, outside = hyphen_parts("Add ana to sre-admins, the admin group")
        >>> sorted(inside), sorted(outside)
        (['admin', 'sre'], ['add', 'admin', 'ana', 'group', 'the', 'to'])
    """
    inside = {stem(w.lower()) for m in _HYPHENED.finditer(text) for w in m.group(0).split("-")}
    rest = _HYPHENED.sub(" ", text)
    outside = {stem(w.lower()) for w in re.findall(r"[A-Za-z]+", rest)}
    return frozenset(inside), frozenset(outside)


_YES_OR_NO = re.compile(
    r"(?<![\w/.-])(?:y|yes)\s*(?:/|\bor\b)\s*(?:n|no)(?![\w/-]|\.\w)|\(\s*\?+\s*\)",
    re.IGNORECASE,
)


def asks_yes_or_no(text: str) -> bool:
    """Whether ``text`` asks to be answered yes or no (``Cancel my meeting on … ? Y/N``,
    ``… (y/n)``, ``… y or n``, ``… (?)``): a question put to someone, not the job asked for.

    Example:
        >>> asks_yes_or_no("Cancel my meeting on 2027-01-04? (y/n)"), asks_yes_or_no("yes, cancel it")
        (True, False)
    """
    return _YES_OR_NO.search(text) is not None


NOT_A_SUBJECT = frozenset(
    """test tests testing draft preview simulation simulate simulated dry ignore wait waiting
    await awaiting hold pending confirm confirmation approval approve ok okay maybe perhaps
    possibly probably half double twice thrice triple wrong mistake fake dummy undo tomorrow
    later tonight soon monthly weekly daily yearly annually every each per recurring until till
    only instead if unless whether nicht nein kein keine ne pas non niet nee nie nur erst
    morgen demain mañana manana domani später spater après apres jeden jede chaque cada ogni
    monatlich mensuel mensual mensile wöchentlich täglich entwurf brouillon borrador bozza
    prueba probe essai teste solo seulement abort aborted halt stop standby stand call ask
    sign-off signoff unapproved unconfirmed unverified tentative provisional conditional tbc
    tbd decided storno annuler abbrechen stornieren warten attendre retract retracted withdrawn
    withdraw rollback duplicate error incorrect demo sandbox rehearsal mock trial placeholder
    todo estimate ballpark guess postdated future request requested owe owes owed collection
    collect password reversal chargeback escrow eom monday tuesday wednesday thursday friday
    saturday sunday me us require requires required authorisation authorization authorise
    authorize authorised authorized co-sign co-signing cosign cosigning countersign signature
    signatures signing sign review reviewing verification verify verified practice practise
    demonstration standing scheduled schedule repeat repeating instalment installment usd gbp
    jpy chf btc dollar dollars pound pounds sterling yen franc francs bitcoin crypto mr mrs ms
    dr prof""".split()
)
"""Words that in a payment's subject, quoted or not, say more than its text: a test or a draft
(``'test - please ignore'``, ``'dry run'``, ``'TBC'``), a hold or a stop (``'wait for my
ok'``, ``'abort'``, ``'call me first'``, ``'storno'``), a time or a repeat (``'Rent
monatlich'``, ``'Loyer demain'``, ``'Friday'``), a part (``'half now'``), the direction
turned (``'Payment request'``, ``'You owe me'``), a negation in the languages a subject is
often written in (``'Nicht senden'``, ``'ne pas envoyer'``)."""
