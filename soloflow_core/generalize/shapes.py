"""The shape of a value learned from its examples (:func:`learn_shape`): what an extraction
rule looks for when the words before the value vary (``mia_li_3668``, ``ZFA04Y``, ``HAT170``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from stdnum import iban

from soloflow_core.flow.files import FILE_EXTENSIONS

__all__ = [
    "CURRENCY_SIGNS",
    "DATE_FORMATS",
    "IBAN_PATTERN",
    "MOD97",
    "bound_problem",
    "earliest_day",
    "learn_bounds",
    "learn_to_come",
    "learn_shape",
    "unit_after",
    "UNITS",
    "WORD_AFTER",
]

_CLASSES = (
    ("[a-z]+", re.compile(r"[a-z]+")),
    ("[A-Z][a-z]+", re.compile(r"[A-Z][a-z]+")),
    ("[A-Z]+", re.compile(r"[A-Z]+")),
    (r"\d+", re.compile(r"\d+")),
)
_CLASS_NAMES = frozenset(name for name, _ in _CLASSES)


def _shape_tokens(value: str) -> list[str] | None:
    """``value`` as a list of character-class runs and literal separators, e.g.
    ``mia_li_3668`` → ``["[a-z]+", "_", "[a-z]+", "_", "\\d+"]``; None for a value with
    spaces or other characters than letters, digits and ``_-./:#@``."""
    out: list[str] = []
    pos = 0
    while pos < len(value):
        ch = value[pos]
        if ch in "_-./:#@":
            out.append(re.escape(ch))
            pos += 1
            continue
        for token, rx in _CLASSES:
            m = rx.match(value, pos)
            if m:
                out.append(token)
                pos = m.end()
                break
        else:
            return None
    return out


def _collapse(tokens: list[str]) -> str:
    """The regex of ``tokens`` with each run of (class, separator) pairs written once, ``+``:
    ``[a-z]+ _ [a-z]+ _ \\d+`` → ``(?:[a-z]+_)+\\d+``."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        unit = tokens[i : i + 2]
        if len(unit) == 2 and unit[0] in _CLASS_NAMES and unit[1] not in _CLASS_NAMES:
            while tokens[i : i + 2] == unit:
                i += 2
            out.append("(?:" + "".join(unit) + ")+")
        else:
            out.append(tokens[i])
            i += 1
    return "".join(out)


def learn_shape(values: Sequence[str]) -> str | None:
    """A regex every value matches whole, from their character classes: the same run of
    letters, digits and separators (a repeated word-and-separator counted once, so
    ``mia_li_3668`` and ``aarav_ahmed_6699`` and ``ana_de_la_cruz_1`` share
    ``(?:[a-z]+_)+\\d+``); codes of one length mixing capitals and digits in any order
    (``ZFA04Y``, ``1N99U6``) share ``[A-Z0-9]{6}`` with a digit and a capital required; ids
    of fixed-length groups between the same separators (UUIDs, ``user_a63dcb756c15``: letters
    and digits alternating by chance are a code) share their groups. None
    when the values differ in shape otherwise, or the shape is a single class of characters
    (a plain word or number says nothing of where it stands).
    """
    shapes = set()
    for v in values:
        tokens = _shape_tokens(v)
        if tokens is None or len(tokens) < 3 or _mixed_run(tokens):
            return _code_shape(values) or _file_shape(values)
        shapes.add(_collapse(tokens))
        if len(shapes) > 1:
            return _code_shape(values) or _file_shape(values)
    return shapes.pop() if shapes else None


_FILE_NAME = re.compile(r"[^\W_][\w-]*\.([A-Za-z][A-Za-z0-9]{1,4})")


def _file_shape(values: Sequence[str]) -> str | None:
    """The shape of file names: a name of letters, digits, ``-`` and ``_`` and an extension
    (``Q3-report.xlsx``, ``roadmap.pdf``). When every example's extension is a common one
    (:data:`~soloflow_core.flow.files.FILE_EXTENSIONS`), any common one is taken
    (``notes.csv``); otherwise only the examples' own. ``example.com`` is no file name. None
    unless every value, two at least, is such a name."""
    found = [_FILE_NAME.fullmatch(v) for v in values]
    if len(values) < 2 or not all(found):
        return None
    extensions = sorted({m.group(1).lower() for m in found if m})
    if set(extensions) <= set(FILE_EXTENSIONS):
        extensions = sorted(FILE_EXTENSIONS)
    return r"[^\W_][\w-]*\.(?i:" + "|".join(re.escape(e) for e in extensions) + r")(?![\w-]|\.\w)"


def _mixed_run(tokens: list[str]) -> bool:
    """Whether letters and digits alternate twice or more with no separator between them
    (``a63dcb756c15``): a code whose runs are chance, not words and numbers."""
    streak = 0
    for t in tokens:
        streak = streak + 1 if t in _CLASS_NAMES else 0
        if streak >= 3:
            return True
    return False


_CODE_ALPHABETS = (("A-Z0-9", "A-Z"), ("a-z0-9", "a-z"))
_RUN = re.compile(r"(?P<upper>[A-Z]+)|(?P<lower>[a-z]+)|(?P<digit>\d+)|(?P<other>.)", re.DOTALL)
_RUN_CLASS = {"upper": "[A-Z]", "lower": "[a-z]", "digit": r"\d", "other": ""}


def _runs(value: str) -> list[tuple[str, re.Match[str]]]:
    return [(str(m.lastgroup), m) for m in _RUN.finditer(value)]


def _code_shape(values: Sequence[str]) -> str | None:
    """The shape of codes of one length: the same runs of capitals, small letters and digits
    of the same lengths (``HAT170``, ``HAT005``: ``[A-Z]{3}\\d{3}``), or capitals and digits
    (or small letters and digits) in any order (``ZFA04Y``, ``1N99U6``): each value holds a
    digit and a letter, so no plain word or number has it; codes of several lengths that
    open alike (IBANs) take :func:`_opened_shape`. None otherwise."""
    if len(values) < 2 or len(min(values, key=len)) < 4:
        return None
    if len({len(v) for v in values}) != 1:
        return _opened_shape(values)
    runs = {tuple((_RUN_CLASS[k], len(m.group())) for k, m in _runs(v)) for v in values}
    # A code mixes letters and digits (HAT170); a capitalised word of one length (Nairobi,
    # Tallinn) is a word, and the next one (Lisbon) has another length.
    # Letters and digits alternating (ZFA04Y) are runs of chance: any order, below.
    coded = all(re.search(r"\d", v) and re.search("[A-Za-z]", v) for v in values)
    coded = coded and not any(_mixed_run(_shape_tokens(v) or []) for v in values)
    if (
        coded
        and len(runs) == 1
        and len(next(iter(runs))) > 1
        and all(c for c, _ in next(iter(runs)))
    ):
        return "".join(f"{c}{{{n}}}" for c, n in next(iter(runs)))  # HAT170: [A-Z]{3}\d{3}
    for alphabet, letters in _CODE_ALPHABETS:
        if all(
            re.fullmatch(f"[{alphabet}]+", v)
            and re.search(r"\d", v)
            and re.search(f"[{letters}]", v)
            for v in values
        ):
            n = len(values[0])
            return rf"(?=[{alphabet}]*\d)(?=[{alphabet}]*[{letters}])[{alphabet}]{{{n}}}"
    return _grouped_shape(values)


_MIN_OPENED = 12
"""The fewest characters of a code of :func:`_opened_shape` (shorter codes of varying
length are too like words and numbers)."""


def _opened_shape(values: Sequence[str]) -> str | None:
    """The shape of codes of varying length over capitals and digits that open with the same
    runs (classes and lengths) before a tail of capitals and digits: IBANs
    (``DE89370400440532013000``, ``GB29NWBK60161331926819``, ``NL91ABNA0417164300``) share
    ``[A-Z]{2}\\d{2}`` and then 14 to 23 of ``[A-Z0-9]``. The tail is as long as the
    examples' tails, no longer and no shorter, and holds a digit when the opening does not;
    a value has :data:`_MIN_OPENED` characters at least: no word or number has the shape.
    None otherwise."""
    if len(min(values, key=len)) < _MIN_OPENED or not all(
        re.fullmatch("[A-Z0-9]+", v) for v in values
    ):
        return None
    opening: list[tuple[str, int]] = []  # the opening runs: the same class at each place
    for column in zip(*values, strict=False):
        kinds = {"\\d" if ch.isdigit() else "[A-Z]" for ch in column}
        if len(kinds) != 1:
            break
        kind = kinds.pop()
        if opening and opening[-1][0] == kind:
            opening[-1] = (kind, opening[-1][1] + 1)
        else:
            opening.append((kind, 1))
    if sum(n for _, n in opening) >= len(min(values, key=len)):
        opening.pop()  # the shortest value ends inside the last run: its length varies
    if not opening:
        return None
    head = sum(n for _, n in opening)
    tails = [len(v) - head for v in values]
    start = "".join(f"{c}{{{n}}}" for c, n in opening)
    digit = "" if any(c == r"\d" for c, _ in opening) else r"(?=[A-Z0-9]*\d)"
    return rf"{start}{digit}[A-Z0-9]{{{min(tails)},{max(tails)}}}"


_SEPARATOR = re.compile(r"([-_./:#])")
_GROUP_ALPHABETS = (r"\d", "[0-9a-f]", "[0-9A-F]", "[A-Z0-9]", "[a-z0-9]")


def _grouped_shape(values: Sequence[str]) -> str | None:
    """The shape of ids made of groups of one length each between the same separators, every
    group over one alphabet (``3f2b8c1e-9d4a-4c7e-b5a1-0e6f2d9c8b7a``: ``[0-9a-f]{8}-…``), the
    values holding a digit and a letter. None otherwise."""
    parts = [_SEPARATOR.split(v) for v in values]
    skeleton = {tuple(p if i % 2 else len(p) for i, p in enumerate(ps)) for ps in parts}
    if len(skeleton) != 1 or len(parts[0]) < 3:
        return None
    if not all(re.search(r"\d", v) and re.search(r"[^\W\d_]", v) for v in values):
        return None
    out: list[str] = []
    for i, group in enumerate(parts[0]):
        if i % 2:
            out.append(re.escape(group))
            continue
        column = "".join(ps[i] for ps in parts)
        alphabet = next((a for a in _GROUP_ALPHABETS if re.fullmatch(f"{a}+", column)), None)
        if alphabet is None or not group:
            return None
        out.append(f"{alphabet}{{{len(group)}}}")
    return "".join(out)


DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%d.%m.%Y", "%m/%d/%Y", "%d/%m/%Y")
"""The forms of a date :func:`learn_bounds` recognises, tried in this order."""
_INTEGER = re.compile(r"-?\d+")


def _is_date(value: str, fmt: str) -> bool:
    """Whether ``value`` is a real date written exactly in ``fmt`` (``2024-02-30`` is not;
    ``2024-5-3`` is not ``%Y-%m-%d``'s form)."""
    try:
        return datetime.strptime(value, fmt).strftime(fmt) == value
    except ValueError:
        return False


def earliest_day(at: datetime | None = None) -> date:
    """The earliest calendar day anywhere on Earth at the instant ``at`` (now, when None):
    the UTC day 12 hours before (UTC-12 is the westmost zone). A day before it has ended
    everywhere; ``at`` naive is taken as UTC."""
    at = datetime.now(UTC) if at is None else at
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return (at - timedelta(hours=12)).date()


def _day(value: str, fmt: str) -> date | None:
    try:
        return datetime.strptime(value, fmt).date()
    except ValueError:
        return None


def learn_to_come(values: Sequence[str], asked_at: Sequence[datetime | None], fmt: str) -> bool:
    """Whether every date of ``values`` (written in ``fmt``) was a day still to come, or
    that day, when its task was asked (``asked_at``, each run's start): from
    :data:`_MIN_CHECKED` examples, each with its time. A job that always acted on days to
    come (cancel a meeting, book a room) is not run unasked for a day that has passed."""
    if len(values) < _MIN_CHECKED or len(asked_at) != len(values):
        return False
    for value, at in zip(values, asked_at, strict=True):
        day = _day(value, fmt)
        if at is None or day is None or day < earliest_day(at):
            return False
    return True


def learn_bounds(values: Sequence[str]) -> dict[str, Any]:
    """What a value of the examples' kind may be beyond its shape, as extraction-rule keys:
    integers have at most as many digits as the longest example (``digits``; ``padded`` when
    an example was written with a leading zero); dates are real dates in the examples' form
    (``date_format``, one of :data:`DATE_FORMATS`); numbers have at most as many decimals
    as the most precise example (``decimals``: ``12.345`` is no amount of ``42.5``,
    ``89.99``), as many whole digits as the largest (``digits``) and are above zero when
    every example was (``positive``); codes that all carry the check digits
    of IBANs carry valid ones (``check_digits``: :data:`MOD97`). Empty for other values.

    Example:
        >>> learn_bounds(["1", "4", "2"]), learn_bounds(["2024-05-24", "2024-05-03"])
        ({'digits': 1}, {'date_format': '%Y-%m-%d'})
    """
    if not values:
        return {}
    if all(_INTEGER.fullmatch(v) for v in values):
        plain = [v.lstrip("-") for v in values]
        bounds: dict[str, Any] = {"digits": max(len(v) for v in plain)}
        if any(len(v) > 1 and v.startswith("0") for v in plain):
            bounds["padded"] = True
        return bounds
    if all(_DECIMAL.fullmatch(v) for v in values):  # amounts: 250, 42.5, 89.99
        whole = [v.lstrip("-").partition(".")[0] for v in values]
        bounds = {
            "decimals": max(len(v.partition(".")[2]) for v in values),
            "digits": max(len(w) for w in whole),
        }
        if all(float(v) > 0 for v in values):
            bounds["positive"] = True
        return bounds
    fmt = next((f for f in DATE_FORMATS if all(_is_date(v, f) for v in values)), None)
    if fmt:
        return {"date_format": fmt}
    if len(values) >= _MIN_CHECKED and all(_mod97_valid(v) for v in values):
        return {"check_digits": MOD97}
    return {}


CURRENCY_SIGNS = "$€£¥"
"""Signs a number may be written against (``€15``, ``35€``) when the job's requests did."""
_DECIMAL = re.compile(r"-?\d+(?:\.\d+)?")
IBAN_PATTERN = r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}"
"""Every IBAN's shape (15 to 34 characters): the pattern of a rule whose examples all carry
the check digits of IBANs, whatever lengths the examples had (a Belgian IBAN is 16, a
Maltese one 31); the check digits keep other codes out."""
MOD97 = "iso7064-mod97-10"
"""The check digits of IBANs (ISO 13616): two letters, two check digits, then the account;
moved to the end and read as a number (a letter as 10–35), the code leaves 1 modulo 97."""
_MIN_CHECKED = 3
"""The fewest examples that all carrying valid check digits makes them a bound: a code
passes by chance once in 97."""


def _mod97_valid(value: str) -> bool:
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{4,}", value):
        return False
    moved = value[4:] + value[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def bound_problem(value: str, rule: Mapping[str, Any], *, today: date | None = None) -> str | None:
    """Why ``value`` lies outside the bounds an extraction ``rule`` learned
    (:func:`learn_bounds`), or None: more digits than any example (``999`` bags where the
    examples were ``1``–``4``), a leading zero no example had (``007``), or no real date in
    the examples' form (``2024-13-45``, ``2024-02-30``), a day that has passed where every
    example was a day to come (``to_come``; ``today``: :func:`earliest_day` of now), or
    wrong check digits where every example's were right (an IBAN with a digit left out or
    changed)."""
    digits = rule.get("digits")
    if isinstance(digits, int) and not isinstance(digits, bool) and _INTEGER.fullmatch(value):
        plain = value.lstrip("-")
        if len(plain) > digits:
            return f"{value!r} has more digits than any example of the input ({digits})"
        if len(plain) > 1 and plain.startswith("0") and rule.get("padded") is not True:
            return f"{value!r} is written with a leading zero, as no example of the input was"
        if rule.get("positive") is True and int(value) <= 0:
            return f"{value!r} is not above zero, as every example of the input was"
    places = rule.get("decimals")
    if isinstance(places, int) and not isinstance(places, bool) and _DECIMAL.fullmatch(value):
        whole, _, fraction = value.lstrip("-").partition(".")
        if len(fraction) > places:
            return (
                f"{value!r} has more decimals than any example of the input ({places}): "
                "a thousands separator, or another number"
            )
        if isinstance(digits, int) and not isinstance(digits, bool) and len(whole) > digits:
            return f"{value!r} has more digits than any example of the input ({digits})"
        if rule.get("positive") is True and float(value) <= 0:
            return f"{value!r} is not above zero, as every example of the input was"
    fmt = rule.get("date_format")
    if isinstance(fmt, str) and fmt in DATE_FORMATS and not _is_date(value, fmt):
        return f"{value!r} is no real date in the form of the input's examples ({fmt})"
    if isinstance(fmt, str) and fmt in DATE_FORMATS and rule.get("to_come") is True:
        day = _day(value, fmt)
        if day is not None and day < (today or earliest_day()):
            return (
                f"{value!r} is a day that has passed, where every example of the input was a "
                "day to come when it was asked"
            )
    if rule.get("check_digits") == MOD97 and not _mod97_valid(value):
        return f"{value!r} fails the check digits every example of the input passed ({MOD97})"
    if rule.get("check_digits") == MOD97 and not iban.is_valid(value, check_country=False):
        return (
            f"{value!r} is no IBAN of its country's length and form, as every example of the "
            "input was (python-stdnum's IBAN registry)"
        )
    return None


WORD_AFTER = re.compile(r"[ \t]*([^\W\d_]+|[%\u2030/])")
"""The word (or ``%``, ``‰``, ``/``) right after a number."""
UNITS = frozenset(
    """% \u2030 / a b d h k m s t x am pm hr hrs min mins sec k bn mn mio million millions billion
    thousand thousands percent pct per times day days week weeks month months year years
    hour hours minute minutes""".split()
)
"""Words and signs after a number that make it another quantity (``50 %``, ``2.5 m``,
``9 am``, ``30 days``), set aside even by a rule that keeps no ``after`` words."""
_PARTICIPLES = frozenset("sent paid set put made done given taken kept".split())
"""Past participles not in ``-ed`` that go on the sentence (``I need 260 sent to …``)."""
_CURRENCY_WORDS = frozenset("eur euro euros usd dollar dollars gbp pound pounds chf".split())
_AFTER_FREE = frozenset(
    "to from with for and or on in at by as please pls plz thanks thank thx now asap then".split()
)
"""Words that may follow a number whatever the job's requests put after it: they start the
rest of the sentence (``send 250 to …``), they say nothing of the number."""


def unit_after(text: str, end: int, rule: Mapping[str, Any]) -> str | None:
    """Why the number ending at ``text[end]`` is not the value alone, or None: a unit or a
    count follows it (``50 %``, ``2.5 m``, ``9 am``, ``30 d``, ``55 / m``, ``3 payments``)
    that the job's requests never put after theirs (its ``after`` words: ``2 bags``). A rule
    learned before ``after`` was kept knows no such words: only a plain unit sets the number
    aside there (:data:`UNITS`: ``%``, ``m``, ``am``…), a count noun cannot be told."""
    after = {str(w).lower() for w in rule.get("after") or ()}
    for _ in range(2):  # `1100 EUR`, then what follows the currency: `1100 EUR m`
        m = WORD_AFTER.match(text, end)
        if m is None:
            return None
        word = m.group(1).lower()
        if "after" not in rule and word not in UNITS and word[:1].isalpha():
            return None
        if word in _AFTER_FREE or word in _PARTICIPLES or (word.endswith("ed") and len(word) > 4):
            return None  # the rest of the sentence: `to …`, `payment 9 changed to …`
        if word not in after and word.rstrip("s") not in {w.rstrip("s") for w in after}:
            break
        if word not in _CURRENCY_WORDS:
            return None
        end = m.end()
    else:
        return None
    return (
        f"{text[max(0, end - 12) : m.end()].strip()!r}: {word!r} follows the number, as the "
        "job's requests never wrote it (a unit, a count or a time)"
    )
