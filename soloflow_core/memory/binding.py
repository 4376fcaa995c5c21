"""Binding a flow's required inputs from the request's own text (:func:`bind_inputs`).

Every required input must be bound from the request itself: one distinct value per input, of
the input's shape and type, plain ASCII, not inside a URL, not negated or set aside (``not``,
``used to be``, ``cc``), not introduced by a noun the job's requests never put before it
(``flight HAT170`` for a reservation code), inside the bounds learned from the input's
examples (no more digits, a real date: ``999`` bags, ``2024-02-30``), not of the narrower shape
of another kind of value the namespace knows (a flight number ``HAT170`` for a reservation
code), no value just after ``by``, ``from`` or ``as``, and no value of the request
left unused. A free text a label introduces (a phrase rule: ``subject 'Rent'``) is bound only
when it says nothing more than a subject (:func:`phrase_asks`). See ``docs/agents.md``
("Routing").
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soloflow_core.errors import PatternTimeoutError
from soloflow_core.flow import patterns
from soloflow_core.flow.phrases import QUOTES, cut_phrases
from soloflow_core.generalize.shapes import bound_problem, unit_after
from soloflow_core.memory.forms import NOT_A_SUBJECT
from soloflow_core.memory.reading import (
    ACTION_STEMS,
    FILLER,
    NEGATION,
    REQUEST_STEMS,
    RequestText,
    read_request,
    words_of,
)
from soloflow_core.memory.set_aside import MARKS, URL, set_aside
from soloflow_core.store.fulltext import stem

__all__ = ["Binding", "ValueKind", "bind_inputs", "phrase_asks", "phrase_words", "value_kinds"]


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


def _matches(rule: Mapping[str, Any], text: str, field: str) -> list[tuple[str, int, int]]:
    """Every value the extraction ``rule`` finds in ``text``: (value, start, end).

    Raises:
        PatternTimeoutError: its pattern ran past its time limit.
    """
    if not rule.get("pattern") and rule.get("shape") != "phrase":
        return []
    found = patterns.find_all(dict(rule), text, field=field)
    return [(m.group("v"), m.start("v"), m.end("v")) for m in found]


_SPLIT_NUMBER = re.compile(r"\d[.,]$")
_NUMBER_GOES_ON = re.compile(r"[.,]\d")


def _bounded(text: str, start: int, end: int, *, rule: Mapping[str, Any]) -> str | None:
    """Why the value at ``text[start:end]`` lies outside the bounds ``rule`` learned from the
    input's examples, or None: a count that is a piece of a longer number (``3.0``,
    ``1,000``), too many digits, a leading zero, no real date."""
    value = text[start:end]
    if "digits" in rule and (
        _SPLIT_NUMBER.search(text[max(0, start - 2) : start]) or _NUMBER_GOES_ON.match(text, end)
    ):
        return f"{value!r} is a piece of a longer number ({text[max(0, start - 2) : end + 2]!r})"
    return bound_problem(value, rule)


@dataclass(frozen=True, slots=True)
class ValueKind:
    """An input of a flow of the namespace, as a kind of value: what tells its values apart."""

    name: str
    pattern: str
    """The extraction rule's pattern (its learned shape)."""
    examples: tuple[str, ...]
    """The input's examples (``input_schema``), as text."""

    @property
    def prefix(self) -> str:
        """The letters every example opens with, when there are two or more (``HAT`` of
        ``HAT066``, ``HAT170``): with the shape, the kind's own narrower pattern."""
        common = re.match(r"[^\W\d_]*", os.path.commonprefix(list(self.examples)))
        letters = common.group() if common else ""
        return letters if len(letters) >= 2 and len(self.examples) >= 2 else ""


def value_kinds(
    flows: Iterable[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]],
) -> list[ValueKind]:
    """The kinds of value that the flows' inputs are, from each flow's ``(input_schema,
    extraction)``: an input with a pattern and examples, once per name and pattern."""
    out: dict[tuple[str, str], ValueKind] = {}
    for schema, extraction in flows:
        props = (schema or {}).get("properties") or {}
        for name, rule in (extraction or {}).items():
            spec = props.get(name)
            pattern = rule.get("pattern") if isinstance(rule, Mapping) else None
            examples = spec.get("examples") if isinstance(spec, Mapping) else None
            if isinstance(pattern, str) and pattern and isinstance(examples, list) and examples:
                out.setdefault(
                    (name, pattern), ValueKind(name, pattern, tuple(str(e) for e in examples))
                )
    return list(out.values())


def _whole(pattern: str, value: str) -> bool:
    """Whether ``pattern`` takes ``value`` whole (matched with the patterns' time limit).

    Raises:
        PatternTimeoutError: the pattern ran past its time limit.
    """
    found = patterns.find_all({"pattern": pattern}, value, field="value kind")
    return any(m.start("v") == 0 and m.end("v") == len(value) for m in found)


def _other_kind(
    value: str, rule: Mapping[str, Any], *, examples: Sequence[str], kinds: Sequence[ValueKind]
) -> str | None:
    """Why ``value`` is another kind of value than the input's, or None: the namespace knows
    a narrower kind (each of its examples has the input's shape, none of the input's
    examples has its shape) and the value has that kind's shape and the letters all its
    examples open with, if any (a flight number ``HAT170`` bound as a reservation code;
    ``KYR131`` is a reservation code that merely has a flight number's shape), or opens with
    those letters when they are three or more and no example of the input does (``HAT1O1``:
    a flight number mistyped)."""
    own = str(rule.get("pattern") or "")
    if not own or not examples:
        return None
    for kind in kinds:
        if kind.pattern == own:
            continue
        opens_alike = len(kind.prefix) >= 3 and not any(e.startswith(kind.prefix) for e in examples)
        if (
            all(_whole(own, e) for e in kind.examples)
            and not any(_whole(kind.pattern, e) for e in examples)
            and value.startswith(kind.prefix)
            and (_whole(kind.pattern, value) or opens_alike)
        ):
            return (
                f"{value!r} has the shape of another kind of value, {kind.name!r} "
                f"({kind.prefix}…, {kind.pattern}), which no example of the input has"
            )
    return None


def _written(value: str, text: str) -> bool:
    """Whether ``value`` is written in ``text`` as it was bound: as a whole, not only inside
    a longer word (``２`` read as ``2`` is not the ``2`` of ``H7K2LM``)."""
    before = r"(?<![A-Za-z0-9])" if value[:1].isalnum() else ""
    after = r"(?![A-Za-z0-9])" if value[-1:].isalnum() else ""
    return re.search(before + re.escape(value) + after, text) is not None


_ALPHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_PLACEHOLDER_NAMES = frozenset(
    """test tester testing user username your-email youremail your.email your_email email
    name yourname your.name your-name firstname.lastname first.last noreply no-reply
    donotreply do-not-reply xxx foo bar foobar sample dummy placeholder example someone
    somebody nobody""".split()
)
"""Local parts of addresses written as placeholders (``your-email@…``, ``test@test.com``)."""


def _placeholder(value: str) -> str | None:
    """Why ``value`` is a placeholder, not a value, or None: an address whose local part is
    a placeholder word (:data:`_PLACEHOLDER_NAMES`), a value that is one letter over and over
    (``XXX@XXX.XXX``, ``AAAAAA``; ``111`` is a number) or whose three or more digits are
    all zeros (``E-0000``, ``EVT-0000``): a template or a test, not a request's own."""
    chars = [c.lower() for c in value if c.isalnum()]
    digits = [c for c in chars if c.isdigit()]
    local = value.rsplit("@", 1)[0].lower() if "@" in value else ""
    same = len(chars) >= 3 and len(set(chars)) == 1 and chars[0].isalpha()
    if local in _PLACEHOLDER_NAMES or same:
        return f"{value!r} is written as a placeholder, not a value: a template or a test?"
    if len(digits) >= 3 and set(digits) == {"0"}:
        return f"{value!r} has only zeros for digits: a placeholder, not a value?"
    return None


def _look_alike_domain(value: str, *, examples: Sequence[str]) -> str | None:
    """Why an address is at a look-alike of the one domain every example (two or more) is
    at, or None: a typo of it (``acrne.example`` for ``acme.example``), it with more after
    it (``acme.example.evil.com``), or its letters run together (``acme-example.com``). An
    address at another domain altogether is an address like any."""
    domains = {e.rpartition("@")[2].lower() for e in examples if "@" in e}
    if "@" not in value or len(domains) != 1 or len(set(examples)) < 2:
        return None
    own, domain = next(iter(domains)), value.rpartition("@")[2].lower()
    letters = "".join(ch for ch in domain if ch.isalnum())
    if domain == own:
        return None
    if (
        (len(own) >= 8 and _within_two(domain, own))
        or domain.startswith(own + ".")
        or letters.startswith("".join(ch for ch in own if ch.isalnum()))
    ):
        return f"{value!r} is at a look-alike of {own}, the domain of every example"
    return None


def _run_on_address(value: str) -> str | None:
    """Why an address's last part is the next sentence's first word run into it, or None:
    one letter (no top-level domain has one: ``alice@example.com.I remember…``) or a
    capitalised word after a domain written in lower case (``….com.Please``)."""
    domain = value.rpartition("@")[2]
    head, dot, last = domain.rpartition(".")
    if "@" not in value or not dot or not last.isalpha():
        return None
    capitalised = last[0].isupper() and last[1:].islower() and head == head.lower()
    if len(last) == 1 or capitalised:
        return (
            f"{value!r} runs into the next sentence ({'.' + last!r} after {head!r}): "
            "a space after the address tells them apart"
        )
    return None


def _within_two(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by at most two letters left out, added or changed
    (``acrne`` → ``acme``: ``rn`` for ``m``)."""
    if abs(len(a) - len(b)) > 2:
        return False
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1] <= 2


def _mask(value: str) -> str:
    """``value``'s shape: each letter ``A``, each digit ``9``, the rest as written."""
    return "".join("A" if c.isalpha() else "9" if c.isdigit() else c for c in value)


def _unlike_examples(
    value: str, name: str, rule: Mapping[str, Any], *, examples: Sequence[str]
) -> str | None:
    """Why ``value`` is not the input's kind of value though it has the rule's shape, or None.

    - ids (every example holds a letter and a digit) whose examples open with the same
      letters (``EVT`` of ``EVT-1234``, ``EVT-2045``; ``E`` of three or more ``E-1042``…)
      take no value opening with other letters (``F-48213``, ``EE-3141``, ``EVT-2101`` as
      an employee ``E-…``);
    - ids whose three or more examples have one shape letter for letter and digit for digit
      (``EVT-9999``, room ``A9-999``, flight ``AAA999``) take no value of another
      (``EVT-21``, ``A3-2150``, ``HAT1O1``).

    An address at a domain no example had is an address like any (a colleague at a sister
    company): the flow generalises the value, not its domain.
    """
    distinct = list(dict.fromkeys(examples))
    if len(distinct) < 2:
        return None
    if not all(re.search(r"\d", e) and re.search(r"[^\W\d_]", e) for e in distinct):
        return None
    leads = {e[: len(e) - len(e.lstrip(_ALPHA))] for e in distinct}
    lead = next(iter(leads))
    if len(leads) == 1 and (len(lead) >= 2 or (lead and len(distinct) >= 3)):
        if not value.startswith(lead) or value[len(lead) : len(lead) + 1].isalpha():
            return (
                f"{value!r} does not open with {lead!r} as every example of the input does "
                f"({', '.join(distinct[:3])}): another kind of id?"
            )
    masks = {_mask(e) for e in distinct}
    if len(distinct) >= 3 and len(masks) == 1 and _mask(value) not in masks:
        return (
            f"{value!r} is not of the shape {next(iter(masks))} every example of the input has "
            f"({', '.join(distinct[:3])}): another kind of id?"
        )
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
    *,
    kinds: Sequence[ValueKind] = (),
) -> Binding:
    """Bind every required input of a flow from the request's own text.

    An input is bound when its extraction rule finds exactly one usable distinct value in
    the request (plain ASCII, not inside a link, not set aside by a ``not``, ``used to be``
    or ``cc`` just before it), of the rule's shape and the input's JSON type. A required
    input with no rule (the caller must give it) cannot be bound. A value the request names
    that no input takes (another id, a second address, a link) is a problem too: the flow
    could not honour it. A value outside the bounds the rule learned from the input's
    examples (``digits``, ``date_format``) is set aside, and so is one of the shape of
    another of the namespace's ``kinds`` of value narrower than the input's
    (:func:`value_kinds`).

    Example:
        >>> from soloflow_core.memory.reading import read_request
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
    urls = [(m.start(), m.end()) for m in URL.finditer(text)]
    inputs: dict[str, Any] = {}
    problems: list[str] = []
    used: set[str] = set()
    phrased: set[str] = set()  # values inside a bound phrase: its own, however often
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
        # the words the job's requests put before the value: its labels, and the anchor a
        # rule always finds it after (`from` for a sender: its own role, not another one)
        said = [*(rule.get("labels") or ()), *str(rule.get("anchor") or "").split()]
        labels = frozenset(stem(w) for w in said if w)
        spec = props.get(name) if isinstance(props.get(name), Mapping) else {}
        examples = spec.get("examples") if isinstance(spec, Mapping) else None
        own = [str(e) for e in examples] if isinstance(examples, list) else []
        phrase = rule.get("shape") == "phrase"
        for value, start, end in matches:
            signs = "".join(c for c in rule.get("signs") or () if c in MARKS)
            preps = rule.get("preps")
            why = set_aside(
                text,
                start,
                end,
                urls=urls,
                labels=labels,
                signs=signs,
                preps=frozenset(preps) if isinstance(preps, list) else None,
            )
            if why is None and ("after" in rule or rule.get("shape") in ("integer", "number")):
                why = unit_after(text, end, rule)
            why = why or (
                phrase_asks(value, quoted=text[start - 1 : start] in QUOTES) if phrase else None
            )
            try:
                why = why or _bounded(text, start, end, rule=rule)
                why = why or _other_kind(value, rule, examples=own, kinds=kinds)
                why = why or _unlike_examples(value, name, rule, examples=own)
                why = why or _look_alike_domain(value, examples=own)
                why = why or _run_on_address(value)
                why = why or _placeholder(value)
            except PatternTimeoutError as exc:
                why = str(exc)
            if why is None and request.text and not _written(value, request.text):
                why = f"{value!r} is written in other forms in the request (full-width, look-alike)"
            if why is None and value in found:  # `250 and 250`, `to A and A`: once or twice?
                why = f"{value!r} is named more than once: once, or twice?"
            if why is not None:
                problems.append(f"input {name!r}: {why}")
            elif value not in found:
                found.append(value)
        cut = cut_phrases(dict(rule), text) if phrase and found else []
        if cut:  # `subject Rent, for the flat`: Rent, or the flat?
            problems.append(
                f"input {name!r}: {cut[0]!r} is cut short by a comma, and "
                f"{found[0]!r} is named too: which one?"
            )
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
        if phrase:  # the values a phrase holds are its own (`reference "Invoice 2022-118"`)
            phrased.update(v for v in request.values if v in found[0])
            used.update(phrased)
    if not problems:
        problems.extend(_one_value_twice(inputs, props))
    if not problems:
        # a value named again where no input takes it (`order 2 to 55 for 2 payments`)
        taken = Counter({v: 1 for v in used}) + Counter(v for v in request.values if v in phrased)
        named = Counter(v.lstrip("#") if v.lstrip("#") in used else v for v in request.values)
        spare = list((named - taken).elements())
        if spare:
            problems.append(
                "the request names "
                + ", ".join(repr(v) for v in spare[:4])
                + ", which no input of the flow takes"
            )
    return Binding(inputs=inputs, problems=tuple(problems))


_JOINING = frozenset({"and", "then", "also", "plus", "or", "but"})
_ASIDES = frozenset("please pls plz thanks thank thx now today tomorrow asap".split())
"""Words an unquoted phrase ends on that are said to the listener, not of the subject."""


def phrase_words(
    input_schema: Mapping[str, Any] | None,
    extraction: Mapping[str, Mapping[str, Any]],
    request: RequestText,
) -> frozenset[str]:
    """The stems of the words of each required input's phrase (:mod:`~soloflow_core.flow.
    phrases`) the request holds once: a subject's words are its data, not words of the job."""
    required = (input_schema or {}).get("required") or []
    text = request.normalized or request.text
    out: set[str] = set()
    for name in required:
        rule = extraction.get(name) if isinstance(name, str) else None
        if not isinstance(rule, Mapping) or rule.get("shape") != "phrase":
            continue
        found = {m.group("v") for m in patterns.find_all(dict(rule), text, field=name)}
        if len(found) == 1:
            out.update(read_request(found.pop()).terms)
    return frozenset(out)


def phrase_asks(value: str, *, quoted: bool) -> str | None:
    """Why a phrase's free text may not be bound without the model, or None: it holds a verb
    of action or of request, a negation, another person; quoted, a question mark or an
    object pronoun (``'Rent (double it)'``); unquoted, any word but its content words after
    a determiner — no word that joins a second request (``subject: rent and cancel my card``),
    qualifies when, whether or how much (``Rent later``, ``Rent if possible``, ``Rent in
    dollars``, ``Rent x2``) or asks (``subject: what is my balance``), since an unquoted
    subject runs to the end of its sentence and would take them in."""
    read = read_request(value)
    words = [w.lower() for w in words_of(value)]
    said = (
        {t for t in read.terms if t in ACTION_STEMS | REQUEST_STEMS}
        | {w for w in words if NEGATION.fullmatch(w)}
        | set(read.parties)
    )
    said |= {w for w in words if w in NOT_A_SUBJECT} | set(_TIMES.findall(value))
    if quoted:
        said |= {w for w in words if w in _OBJECTS} | ({"?"} if "?" in value else set())
    else:
        rest = words[1:] if words and words[0] in _DETERMINERS else words
        said |= {w for w in rest if w in _JOINING | _ASIDES | _QUALIFIERS | FILLER}
    if said:
        return (
            f"its text {value!r} says {', '.join(sorted(said))}: more than a subject; "
            "the model decides"
        )
    return None


_DETERMINERS = frozenset({"the", "a", "an", "my", "our", "your"})
_OBJECTS = frozenset({"it", "them", "everything", "anything"})
_QUALIFIERS = frozenset(
    """later tonight tomorrow today yesterday soon next last first after before until till
    during when whenever if unless whether maybe perhaps possibly probably hypothetically only
    minus per times plus instead either what which who whom whose why how where is are was
    were do does did has have had should shall might must""".split()
)
"""Words that, in an unquoted subject, say when, whether, how much or ask: not its text."""
_TIMES = re.compile(r"\b(?:x\d+|\d+x|\d+(?:st|nd|rd|th))\b", re.IGNORECASE)


def _one_value_twice(inputs: Mapping[str, Any], props: Mapping[str, Any]) -> list[str]:
    """Two inputs bound to one value (``forward the e-mail from tom@… to tom@…``) where the
    job's examples never gave them one: the request likely names the wrong one."""
    names = sorted(inputs)
    out: list[str] = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if inputs[a] != inputs[b]:
                continue
            ea, eb = (_examples(props.get(n)) for n in (a, b))
            pairs = list(zip(ea, eb, strict=False))
            if len(pairs) >= 2 and all(x != y for x, y in pairs):
                out.append(
                    f"inputs {a!r} and {b!r} are both {inputs[a]!r}, where the job's "
                    "requests always gave them different values"
                )
    return out


def _examples(spec: Any) -> list[Any]:
    got = spec.get("examples") if isinstance(spec, Mapping) else None
    return list(got) if isinstance(got, list) else []
