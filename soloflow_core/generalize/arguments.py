"""Where each argument of a repeated sequence comes from.

Given the aligned occurrences of a pattern (the task text and the calls of each), every
argument of every step gets one explanation, checked against every occurrence:

1. ``constant``  — the same value everywhere → a literal in ``input_map``;
2. ``upstream``  — equal to a field of an earlier step's output (dotted path; JSON or YAML
   text parsed; nested objects and list items too) → ``{{<step_id>.<path>}}``; the nearest
   earlier step and the shortest path win;
3. ``task``      — appears in the task text → ``{{_trigger.<name>}}`` with an extraction
   rule: the word before the value when it is always the same, else the value's own shape
   learned from its values (``aarav_ahmed_6699`` → lowercase words joined by ``_`` ending
   in digits) when that shape finds the value first in every task;
4. ``composed``  — a string made of such values and fixed text, the same in every
   occurrence (``"Your invoice: https://x/INV-31.pdf"``) → a string template
   (``"Your invoice: {{step_2.url}}"``, see :mod:`.composed`);
5. ``constant`` too when one value holds in at least :data:`NEAR_CONSTANT_SHARE` of the
   occurrences: the others are reported as outliers in the notes; unless an outlier's own
   task text names its value (``EUR`` nine times, ``USD`` once when the task said ``USD``):
   then the tasks choose it, and it is an input;
6. ``free``      — none of these → ``{{_trigger.<name>}}``, to be given by the caller.

Upstream is preferred over task when both hold: data that flows between steps stays
correct even when the task text is phrased differently; but not a list item the task names
(``cancel order O-61`` with the orders listed): its index in the recordings is chance.

A step that may have side effects gets no constant seen in one task only (occurrences that
replay the same task text): a reservation id from three replays of one task is that task's
value, not the flow's; it becomes an input instead. So does a value of such replays that
stands in the task text, whatever the step; and a value every task text names even when the
texts differ (one customer's two requests both naming reservation ``NQNU5R``), whatever the
step — a lookup's constant would feed the cancellation after it: the tasks say it, so the
next task says its own. A plain lowercase word every task names and every occurrence passes
(``category="laptop"`` for "order a replacement laptop") is the job's own word: a constant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from soloflow_core.errors import SoloFlowError
from soloflow_core.flow.templates import TRIGGER, escape_literal, maybe_json
from soloflow_core.generalize.composed import compose_template, leaf_texts
from soloflow_core.generalize.extraction import extract_inputs as extract_inputs
from soloflow_core.generalize.extraction import extract_value as extract_value
from soloflow_core.generalize.extraction import learn_extraction, names_number

_MAX_LEAVES = 2000
_MAX_DEPTH = 6
MAX_OUTPUT_CHARS = 1_000_000
"""Outputs longer than this (as text) are not searched for upstream values."""


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One place a pattern occurred: the run's task text and the pattern's calls in it."""

    task: str
    args: Sequence[dict[str, Any]]
    """Per step, the arguments of the call that represents it (its last attempt)."""
    outputs: Sequence[Any]
    step_calls: Sequence[Sequence[Any]] = ()
    """Per step, every successful call of its unit (several for a loop: the same tool
    called once per item), as ``ToolCall`` objects; empty when not known."""
    asked_at: datetime | None = None
    """When the run started (UTC), when recorded: a date input whose every example was a
    day to come when it was asked is learned so (``to_come``)."""


@dataclass(slots=True)
class ArgumentSource:
    kind: str  # constant | upstream | task | composed | free
    template: Any
    confidence: float
    input_name: str | None = None
    note: str = ""
    """Why this source and not another, when more than one held."""


@dataclass(slots=True)
class Generalization:
    input_maps: list[dict[str, Any]]
    input_schema: dict[str, Any]
    extraction: dict[str, dict[str, Any]]
    sources: list[dict[str, ArgumentSource]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What a person should know: choices between sources, arguments left out, types."""

    def confidence(self) -> dict[str, dict[str, float]]:
        return {
            f"step_{i + 1}": {k: round(s.confidence, 3) for k, s in srcs.items()}
            for i, srcs in enumerate(self.sources)
        }


_SCALARS: dict[type, Callable[[Any], str]] = {
    str: json.JSONEncoder().encode,  # what json.dumps writes for a str, without its option checks
    int: int.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda _v: "null",
}


_ID_KEY = re.compile(r"(?:^|_)(?:id|ID)$|[a-z]Id$")
"""A tool argument that names an identifier (``id``, ``order_id``, ``eventId``)."""


def canonical_json(v: Any) -> str:
    """``json.dumps(v, sort_keys=True, default=str)``, the same text; scalars (most argument
    values) without the encoder, a tenth of the cost."""
    write = _SCALARS.get(type(v))
    if write is not None:
        return write(v)
    try:
        return json.dumps(v, sort_keys=True, default=str)
    except ValueError:  # a reference cycle: compare by repr, which marks the cycle
        return repr(v)


def _leaves(
    value: Any, path: tuple[str, ...] = (), depth: int = 0
) -> Iterator[tuple[tuple[str, ...], Any]]:
    value = maybe_json(value)
    yield path, value
    if depth >= _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and k and "." not in k and " " not in k:
                yield from _leaves(v, (*path, k), depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value[:200]):
            yield from _leaves(v, (*path, str(i)), depth + 1)


def _at(value: Any, path: tuple[str, ...]) -> Any:
    cur = maybe_json(value)
    for seg in path:
        cur = maybe_json(cur)
        if isinstance(cur, dict) and seg in cur:
            cur = cur[seg]
        elif isinstance(cur, list) and seg.isdigit() and int(seg) < len(cur):
            cur = cur[int(seg)]
        else:
            raise KeyError(seg)
    return maybe_json(cur) if path else cur


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return type(a) is type(b) and canonical_json(a) == canonical_json(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b or str(a) == str(b)


def _upstream_path(values: list[Any], outputs: list[Any]) -> tuple[str, ...] | None:
    """The shortest path into every ``outputs[k]`` that yields ``values[k]``."""
    first = values[0]
    if first is None or first == "":
        return None  # an empty value "matches" too many fields to mean anything
    found: list[tuple[str, ...]] = []
    for n, (path, leaf) in enumerate(_leaves(outputs[0])):
        if n > _MAX_LEAVES:
            break
        if _same(leaf, first):
            found.append(path)
    found.sort(key=len)
    for path in found:
        try:
            if all(_same(_at(o, path), v) for o, v in zip(outputs, values, strict=True)):
                return path
        except KeyError:
            continue
    return None


def _json_type(values: list[Any]) -> str | None:
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add("boolean")
        elif isinstance(v, int):
            kinds.add("integer")
        elif isinstance(v, float):
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("string")
        elif isinstance(v, list):
            kinds.add("array")
        elif isinstance(v, dict):
            kinds.add("object")
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 else None


NEAR_CONSTANT_SHARE = 0.9
"""A value this share of the occurrences agree on is a constant (the rest are outliers)."""
NEAR_CONSTANT_MIN = 5
"""Occurrences needed before a value that is not the same everywhere can be a constant."""


def _parsed_outputs(occ: Occurrence, n_steps: int, loops: Mapping[int, str]) -> list[Any]:
    """Each step's output parsed once; a loop step's is the list of its calls' outputs;
    an output over ``MAX_OUTPUT_CHARS`` is not searched (None)."""
    out: list[Any] = []
    for i in range(n_steps):
        if i in loops and len(occ.step_calls) > i and occ.step_calls[i]:
            out.append([_bounded(getattr(c, "output", None)) for c in occ.step_calls[i]])
        else:
            out.append(_bounded(occ.outputs[i] if i < len(occ.outputs) else None))
    return out


def _bounded(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_OUTPUT_CHARS:
        return None
    return maybe_json(value)


def check_occurrences(occurrences: Sequence[Occurrence]) -> None:
    """Raise ``SoloFlowError`` saying why these occurrences cannot be generalised."""
    if not occurrences:
        raise SoloFlowError(
            "cannot generalise a candidate with no complete occurrence; "
            "ingest runs with arguments and outputs, then run `soloflow detect` again"
        )
    n = len(occurrences[0].args)
    for k, o in enumerate(occurrences):
        if len(o.args) != n or len(o.outputs) != n:
            raise SoloFlowError(
                f"occurrence {k} has {len(o.args)} argument sets and {len(o.outputs)} outputs "
                f"where occurrence 0 has {n}: occurrences of one candidate must align step by step"
            )
        for i, a in enumerate(o.args):
            if not isinstance(a, Mapping):
                raise SoloFlowError(
                    f"occurrence {k}, step_{i + 1}: arguments are a "
                    f"{type(a).__name__}, not an object; record tool arguments as a dict"
                )


def _told_in_every_task(value: Any, tasks: list[str]) -> bool:
    """Whether ``value`` (a string of 3+ characters) stands alone in every task text: the
    tasks name it, so it is theirs (a reservation code of one customer's tasks), not the
    flow's: an input, never a constant."""
    if not isinstance(value, str) or len(value.strip()) < 3:
        return False
    pattern = re.compile(rf"(?<![\w]){re.escape(value)}(?![\w])")
    return all(t and pattern.search(t) for t in tasks)


def _job_word(value: Any) -> bool:
    """Whether ``value`` is a plain lowercase word (``laptop``, ``economy``): when every task
    names it and every occurrence passes it, it is the job's own word (``order a replacement
    laptop``), a constant — not a code, an id, an address or a name, which the tasks choose."""
    return isinstance(value, str) and value.isascii() and value.isalpha() and value.islower()


def _one_task(tasks: list[str]) -> bool:
    """Whether every occurrence replays one task: the same, non-empty task text."""
    return len(tasks) > 1 and bool(tasks[0]) and len(set(tasks)) == 1


def _near_constant(canon: list[str]) -> tuple[int, list[int]] | None:
    """(index of an occurrence with the common value, the outliers' indices) when one value
    holds in at least :data:`NEAR_CONSTANT_SHARE` of at least :data:`NEAR_CONSTANT_MIN`
    occurrences."""
    if len(canon) < NEAR_CONSTANT_MIN:
        return None
    counts: dict[str, int] = {}
    for c in canon:
        counts[c] = counts.get(c, 0) + 1
    best = max(counts, key=lambda c: counts[c])
    if counts[best] < NEAR_CONSTANT_SHARE * len(canon):
        return None
    return canon.index(best), [k for k, c in enumerate(canon) if c != best]


def _picked_from_list(path: tuple[str, ...], strs: list[str], tasks: list[str]) -> bool:
    """Whether a value every task names is read through a list index (``orders.0.id``) and a
    rule finds it in the tasks: the task picked the item, and it stood at that index in the
    recordings by chance (the newest order first); the next task's item may stand elsewhere."""
    return any(seg.isdigit() for seg in path) and learn_extraction(strs, tasks) is not None


def _asked_for(strs: list[str], outliers: list[int], tasks: list[str]) -> int | None:
    """The first outlier whose value stands alone in its own task text: the task asked for
    it, so the common value is the usual request, not the flow's constant."""
    for k in outliers:
        if strs[k].strip() and re.search(rf"(?<![\w]){re.escape(strs[k])}(?![\w])", tasks[k]):
            return k
    return None


def _composed(
    values: list[Any], i: int, *, parsed: list[list[Any]], inputs: Mapping[str, list[Any]]
) -> str | None:
    """A string template writing every occurrence's value from earlier outputs and inputs."""
    if not all(isinstance(v, str) for v in values):
        return None
    sources: list[dict[str, str]] = []
    for k in range(len(values)):
        refs: dict[str, str] = {}
        for name, per_occ in inputs.items():
            for ref, text in leaf_texts(f"{TRIGGER}.{name}", per_occ[k]):
                refs.setdefault(ref, text)
        for j in range(i):
            for ref, text in leaf_texts(f"step_{j + 1}", parsed[k][j]):
                refs.setdefault(ref, text)
        sources.append(refs)
    return compose_template(values, sources)


def _typical(occurrences: Sequence[Occurrence]) -> tuple[list[Occurrence], list[str]]:
    """The occurrences without those whose arguments do not look like the others': where, at
    some step, at least :data:`NEAR_CONSTANT_SHARE` of at least :data:`NEAR_CONSTANT_MIN`
    occurrences pass one set of argument names and this one another (an unrelated call of the
    same tool taken for the step), or most pass one set and this one none of its names (the
    tools met by chance), with a note naming each one left out."""
    n = len(occurrences)
    if n < NEAR_CONSTANT_MIN:
        return list(occurrences), []
    odd: dict[int, str] = {}
    for i in range(len(occurrences[0].args)):
        names = [tuple(sorted(o.args[i])) for o in occurrences]
        counts: dict[tuple[str, ...], int] = {}
        for keys in names:
            counts[keys] = counts.get(keys, 0) + 1
        usual = max(counts, key=lambda k: counts[k])
        if counts[usual] == n or 2 * counts[usual] <= n:
            continue
        # Below the share, only a call that takes none of the usual arguments is odd (a
        # chance meeting of common tools); one that takes some may just omit an optional one.
        near = counts[usual] >= NEAR_CONSTANT_SHARE * n
        for k, keys in enumerate(names):
            if keys != usual and k not in odd and (near or (usual and not set(keys) & set(usual))):
                odd[k] = (
                    f"occurrence {k + 1} left out: step_{i + 1} takes ({', '.join(keys)}) "
                    f"where {counts[usual]} of {n} take ({', '.join(usual)})"
                )
    return [o for k, o in enumerate(occurrences) if k not in odd], [odd[k] for k in sorted(odd)]


def generalize(
    occurrences: Sequence[Occurrence],
    *,
    loops: Mapping[int, str] | None = None,
    side_effects: Sequence[bool | None] | None = None,
) -> Generalization:
    """Infer ``input_map``s, the flow's input schema and extraction rules.

    Args:
        occurrences: the aligned occurrences (at least one).
        loops: step index → the argument a map step takes from its item; that argument is
            left to the caller, and the step's output is the list of its calls' outputs.
        side_effects: per step, False when its tool is known to be read-only; True or None
            (unknown) otherwise. A step that may have side effects takes no constant from
            occurrences that all replay one task.

    Raises:
        SoloFlowError: the occurrences do not align (says which and why).
    """
    check_occurrences(occurrences)
    occurrences, notes = _typical(occurrences)
    loops = dict(loops or {})
    n_steps = len(occurrences[0].args)
    input_maps: list[dict[str, Any]] = []
    sources: list[dict[str, ArgumentSource]] = []
    props: dict[str, Any] = {}
    required: list[str] = []
    extraction: dict[str, dict[str, Any]] = {}
    used_names: dict[str, str] = {}  # canonical value list -> input name (one input, many uses)
    tasks = [o.task or "" for o in occurrences]
    parsed = [_parsed_outputs(o, n_steps, loops) for o in occurrences]
    one_task = _one_task(tasks)
    effects = list(side_effects or [])
    input_values: dict[str, list[Any]] = {}  # input name -> its value per occurrence
    for i in range(n_steps):
        keys = [k for k in occurrences[0].args[i] if all(k in o.args[i] for o in occurrences)]
        dropped = sorted({k for o in occurrences for k in o.args[i]} - set(keys))
        if dropped:
            notes.append(
                f"step_{i + 1}: argument(s) {', '.join(dropped)} left out: not given "
                "in every occurrence"
            )
        imap: dict[str, Any] = {}
        srcs: dict[str, ArgumentSource] = {}
        for key in keys:
            if loops.get(i) == key:
                continue
            values = [o.args[i][key] for o in occurrences]
            canon = [canonical_json(v) for v in values]
            writes = not (i < len(effects) and effects[i] is False)
            same = len(set(canon)) == 1
            told = same and _told_in_every_task(values[0], tasks) and not _job_word(values[0])
            if same and not one_task and not told:
                imap[key] = escape_literal(values[0])  # a recorded "{{" is text, not a template
                srcs[key] = ArgumentSource("constant", values[0], 1.0 if len(values) > 1 else 0.5)
                continue
            found = None
            for j in range(i - 1, -1, -1):
                path = _upstream_path(values, [p[j] for p in parsed])
                if path is not None:
                    found = (j, path)
                    break
            strs = [v if isinstance(v, str) else canonical_json(v) for v in values]
            in_task = all(
                s and (s in t or names_number(v, t))
                for s, v, t in zip(strs, values, tasks, strict=True)
            )
            if found is not None and in_task and _picked_from_list(found[1], strs, tasks):
                notes.append(
                    f"step_{i + 1}.{key}: named by every task and found at one place of a list "
                    f"(step_{found[0] + 1}.{'.'.join(found[1])}): the task's choice, read from "
                    "the task; the list's order is chance"
                )
                found = None
            if found is not None:
                j, path = found
                tmpl = "{{" + ".".join((f"step_{j + 1}", *path)) + "}}"
                imap[key] = tmpl
                note = ""
                if in_task:
                    note = (
                        f"also in the task text; {tmpl} chosen: a value passed between "
                        "steps stays right when the task is phrased differently"
                    )
                    notes.append(f"step_{i + 1}.{key}: {note}")
                srcs[key] = ArgumentSource("upstream", tmpl, 1.0, note=note)
                continue
            if same and not (in_task or writes):
                imap[key] = values[0]
                srcs[key] = ArgumentSource("constant", values[0], 0.5)
                continue
            if told and not one_task:
                notes.append(
                    f"step_{i + 1}.{key}: the same value in every occurrence, but every "
                    "task text names it: the tasks' value, an input, not a constant"
                )
            elif same:
                notes.append(
                    f"step_{i + 1}.{key}: the same value in every occurrence, but all "
                    "replay one task: an input, not a constant, as it "
                    + ("is in the task text" if in_task else "feeds a step with side effects")
                )
            if not in_task:
                composed = _composed(values, i, parsed=parsed, inputs=input_values)
                if composed is not None:
                    imap[key] = composed
                    srcs[key] = ArgumentSource("composed", composed, 0.9)
                    continue
            when = [o.asked_at for o in occurrences]
            rule = learn_extraction(strs, tasks, asked_at=when) if in_task else None
            if rule is not None and rule["shape"] == "integer" and _ID_KEY.search(key):
                if all(int(v) > 0 for v in strs):  # no id is 0 where none of them was
                    rule["positive"] = True
            near = None if rule is not None or one_task or told else _near_constant(canon)
            asked = _asked_for(strs, near[1], tasks) if near is not None else None
            if asked is not None:
                near = None
                notes.append(
                    f"step_{i + 1}.{key}: the same value in most occurrences, but occurrence "
                    f"{asked + 1}'s task asks for its own ({strs[asked]!r}): an input, not a constant"
                )
            if near is not None:
                k0, outliers = near
                imap[key] = values[k0]
                share = 1 - len(outliers) / len(values)
                outlying = ", ".join(f"{strs[k]!r} (occurrence {k + 1})" for k in outliers[:5])
                note = (
                    f"the same value in {len(values) - len(outliers)} of {len(values)} "
                    f"occurrences, a constant; outliers: {outlying}"
                )
                notes.append(f"step_{i + 1}.{key}: {note}")
                srcs[key] = ArgumentSource("constant", values[k0], round(share, 3), note=note)
                continue
            sig = "|".join(canon)
            name = used_names.get(sig)
            if name is None:
                name = key if key not in props else f"step_{i + 1}_{key}"
                used_names[sig] = name
                jtype = _json_type(values)
                props[name] = {"type": jtype} if jtype else {}
                if jtype is None:
                    notes.append(
                        f"step_{i + 1}.{key}: values differ in type between "
                        "occurrences; input {name!r} left untyped".replace("{name!r}", repr(name))
                    )
                props[name]["examples"] = values[:3]
                required.append(name)
                input_values[name] = values
                if rule is not None:
                    rule["type"] = jtype or "string"
                    extraction[name] = rule
                props[name]["description"] = (
                    f"from the task text ({rule['shape']}"
                    + (f" after {rule['anchor']!r}" if rule["anchor"] else "")
                    + ")"
                    if rule is not None
                    else "free: not in the task text nor an earlier output; the caller gives it"
                )
            tmpl = "{{_trigger." + name + "}}"
            imap[key] = tmpl
            kind = "task" if name in extraction else "free"
            srcs[key] = ArgumentSource(kind, tmpl, 0.9 if kind == "task" else 0.5, input_name=name)
        input_maps.append(imap)
        sources.append(srcs)
    schema = {"type": "object", "properties": props, "required": required}
    return Generalization(
        input_maps=input_maps,
        input_schema=schema,
        extraction=extraction,
        sources=sources,
        notes=notes,
    )
