"""Flow validation: a DAG by Kahn's algorithm, references, templates, executors.

Every problem is collected, then raised together in one ``FlowValidationError`` whose
message names the flow, the step and the field path of each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from soloflow_core.errors import ExecutorNotFoundError, FlowValidationError
from soloflow_core.flow.patterns import pattern_problem
from soloflow_core.flow.phrases import phrase_problem
from soloflow_core.flow.templates import Reference, TemplateError, iter_references
from soloflow_core.models import FlowDefinition, FlowStep

Problem = tuple[str | None, str | None, str]

ITEM = "_item"
"""The root of a map step's per-item templates: ``{{_item}}``, ``{{_item.<path>}}``."""
RESERVED_ROOTS = frozenset({"_trigger", ITEM})


@dataclass(frozen=True, slots=True)
class FlowPlan:
    """A validated flow's execution plan."""

    order: list[str]
    """Step ids in a topological order (ties kept in definition order)."""
    layers: list[list[str]]
    """Steps grouped so that each layer depends only on earlier ones (can run in parallel)."""
    ancestors: dict[str, set[str]]
    """Every step's transitive dependencies."""


def topological_layers(deps: dict[str, list[str]]) -> tuple[list[list[str]], list[str]]:
    """Kahn's algorithm. Returns (layers, ids left in a cycle)."""
    indeg = {n: 0 for n in deps}
    rank = {n: i for i, n in enumerate(deps)}
    children: dict[str, list[str]] = {n: [] for n in deps}
    for n, ds in deps.items():
        for d in ds:
            if d in deps:
                indeg[n] += 1
                children[d].append(n)
    layer = [n for n in deps if indeg[n] == 0]
    layers: list[list[str]] = []
    while layer:
        layers.append(layer)
        nxt: list[str] = []
        for n in layer:
            for c in children[n]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    nxt.append(c)
        layer = sorted(nxt, key=rank.__getitem__)
    placed = {n for lay in layers for n in lay}
    return layers, [n for n in deps if n not in placed]


def find_cycle(deps: dict[str, list[str]], among: list[str]) -> list[str]:
    """One cycle among ``among``, as a path that returns to its start."""
    rest = set(among)
    start = among[0]
    path: list[str] = [start]
    seen = {start: 0}
    node = start
    while True:
        nxt = next(d for d in deps[node] if d in rest)
        if nxt in seen:
            return path[seen[nxt] :] + [nxt]
        seen[nxt] = len(path)
        path.append(nxt)
        node = nxt


def _format(flow: str, problems: list[Problem]) -> str:
    lines = []
    for step, field, msg in problems:
        where = f"flow {flow!r}"
        if step:
            where += f", step {step!r}"
        if field:
            where += f", field {field!r}"
        lines.append(f"{where}: {msg}")
    head = "invalid flow" if len(lines) == 1 else f"invalid flow ({len(lines)} problems)"
    return head + ":\n  " + "\n  ".join(lines)


MAX_FLOW_STEPS = 1000
"""The most steps a flow may have."""


def _labelled_problem(rule: Mapping[str, Any]) -> tuple[str, str] | None:
    """What is wrong with a rule's ``labelled`` and the ``labels`` it needs, as (field, why)."""
    if not isinstance(rule.get("labelled"), bool):
        return "labelled", "labelled must be true or false (find the value by its labels)"
    labels = rule.get("labels")
    words = labels if isinstance(labels, list) else []
    if rule["labelled"] and not (words and all(isinstance(w, str) and w.strip() for w in words)):
        return (
            "labels",
            "a labelled rule needs 'labels': the words that introduce its value (e.g. to)",
        )
    return None


def _check_extraction(extraction: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """Each extraction rule's ``pattern`` is a regular expression that compiles, of bounded
    size and time (:func:`~soloflow_core.flow.patterns.pattern_problem`), and its ``anchor``
    is text: checked here rather than failing at run time."""
    problems: list[Problem] = []
    for name, rule in extraction.items():
        where = f"extraction.{name}"
        pattern, anchor = rule.get("pattern"), rule.get("anchor")
        if anchor is not None and not isinstance(anchor, str):
            problems.append(
                (None, f"{where}.anchor", "anchor must be text (the word before the value)")
            )
        if "labelled" in rule and (wrong := _labelled_problem(rule)) is not None:
            problems.append((None, f"{where}.{wrong[0]}", wrong[1]))
        preps = rule.get("preps", [])
        if not isinstance(preps, list) or not all(isinstance(w, str) for w in preps):
            problems.append(
                (
                    None,
                    f"{where}.preps",
                    "preps must be a list of words (those the job's requests put right "
                    "before the address, e.g. ['to'])",
                )
            )
        if "to_come" in rule and not isinstance(rule["to_come"], bool):
            problems.append(
                (
                    None,
                    f"{where}.to_come",
                    "to_come must be true or false (true: a day that has passed is set aside)",
                )
            )
        if rule.get("shape") == "phrase":  # labelled free text: no pattern, its own fields
            if (why := phrase_problem(dict(rule))) is not None:
                problems.append((None, where, why))
            continue
        if pattern is None:
            continue
        if not isinstance(pattern, str):
            problems.append(
                (None, f"{where}.pattern", "pattern must be a regular expression (text)")
            )
        elif (why := pattern_problem(pattern)) is not None:
            problems.append((None, f"{where}.pattern", why))
    return problems


def validate_flow(flow: FlowDefinition, *, executors: Collection[str] | None = None) -> FlowPlan:
    """Check ``flow`` and return its plan.

    Args:
        flow: the definition.
        executors: the registered ``skill_key``s; when given, each step's must be one.

    Raises:
        FlowValidationError: with every problem found (``ExecutorNotFoundError`` when the
            only problems are unknown ``skill_key``s).
    """
    if len(flow.steps) > MAX_FLOW_STEPS:
        raise FlowValidationError(
            f"flow {flow.name!r}: {len(flow.steps)} steps; a flow may have at most {MAX_FLOW_STEPS} "
            "(each step is a LangGraph node and a checkpoint). Split it into several flows, or "
            "turn repeated steps into one map step (map_over)",
            flow=flow.name,
            field="steps",
        )
    problems: list[Problem] = []
    ids = [s.id for s in flow.steps]
    counts = Counter(ids)
    for d in sorted(i for i, n in counts.items() if n > 1):
        problems.append(
            (d, "id", f"step id {d!r} is used {counts[d]} times; step ids must be unique")
        )
    for sid in ids:
        if sid in RESERVED_ROOTS:
            problems.append(
                (sid, "id", f"step id {sid!r} is reserved for templates; rename the step")
            )
    known = set(ids)
    deps: dict[str, list[str]] = {}
    for s in flow.steps:
        deps.setdefault(s.id, [])
        for i, d in enumerate(s.depends_on):
            if d == s.id:
                problems.append((s.id, f"depends_on[{i}]", "a step cannot depend on itself"))
            elif d not in known:
                problems.append(
                    (s.id, f"depends_on[{i}]", f"unknown step {d!r}; known steps: {', '.join(ids)}")
                )
            else:
                deps[s.id].append(d)
    layers, cyclic = topological_layers(deps)
    if cyclic:
        cycle = find_cycle(deps, cyclic)
        problems.append(
            (
                cycle[0],
                "depends_on",
                "dependency cycle: "
                + " → ".join(reversed(cycle))
                + "; remove one of these dependencies",
            )
        )
    ancestors: dict[str, set[str]] = {}
    for layer in layers:
        for n in layer:
            acc: set[str] = set()
            for d in deps[n]:
                acc.add(d)
                acc |= ancestors.get(d, set())
            ancestors[n] = acc
    declared_inputs: set[str] | None = None
    if flow.input_schema is not None:
        declared_inputs = set((flow.input_schema.get("properties") or {}).keys())
    for s in flow.steps:
        for field, ref in iter_references(s.input_map, "input_map"):
            if isinstance(ref, TemplateError):
                problems.append((s.id, field, str(ref)))
                continue
            if ref.root == ITEM:
                if s.map_over is None:
                    problems.append(
                        (
                            s.id,
                            field,
                            f"{ref.text} reads a map item, but the step has no "
                            "map_over; set map_over to the list to map over",
                        )
                    )
                continue
            problems.extend(
                _check_reference(
                    s.id,
                    field,
                    ref,
                    known=known,
                    ancestors=ancestors,
                    declared_inputs=declared_inputs,
                )
            )
        if s.map_over is not None:
            problems.extend(
                _check_map_over(
                    s.id, s.map_over, known, ancestors=ancestors, declared_inputs=declared_inputs
                )
            )
        if s.compensation is not None:
            problems.extend(
                _check_compensation(s, known, ancestors, declared_inputs=declared_inputs)
            )
    problems.extend(_check_extraction(flow.extraction))
    if flow.output_step is not None and flow.output_step not in known:
        problems.append((None, "output_step", f"unknown step {flow.output_step!r}"))
    if flow.reply_template is not None:
        problems.extend(_check_reply(flow.reply_template, known, declared_inputs))
    missing_exec: list[Problem] = []
    unknown_keys: list[str] = []
    if executors is not None:
        avail = ", ".join(sorted(executors)[:20]) or "none"
        for s in flow.steps:
            keys = [("skill_key", s.skill_key)]
            if s.compensation is not None:
                keys.append(("compensation.skill_key", s.compensation.skill_key))
            for field, key in keys:
                if key not in executors:
                    unknown_keys.append(key)
                    missing_exec.append(
                        (
                            s.id,
                            field,
                            f"no executor registered for skill_key {key!r} "
                            f"(registered: {avail}); pass the tool to the compiler (on the command "
                            "line: --tools module:ATTR) or register it in a plugin's "
                            "soloflow_register_executors",
                        )
                    )
    if problems or missing_exec:
        everything = problems + missing_exec
        first = everything[0]
        if problems:
            raise FlowValidationError(
                _format(flow.name, everything),
                flow=flow.name,
                step=first[0],
                field=first[1],
                problems=everything,
            )
        raise ExecutorNotFoundError(
            _format(flow.name, everything),
            flow=flow.name,
            step=first[0],
            field=first[1],
            problems=everything,
            skill_keys=list(dict.fromkeys(k for k in unknown_keys)),
            registered=sorted(executors or ()),
        )
    order = [n for layer in layers for n in layer]
    return FlowPlan(order=order, layers=layers, ancestors=ancestors)


def _check_map_over(
    step: str,
    map_over: str,
    known: set[str],
    *,
    ancestors: dict[str, set[str]],
    declared_inputs: set[str] | None,
) -> list[Problem]:
    refs = list(iter_references(map_over, "map_over"))
    whole = map_over.strip()
    if len(refs) != 1 or not (whole.startswith("{{") and whole.endswith("}}")):
        return [
            (
                step,
                "map_over",
                f"map_over must be exactly one template naming a list, like "
                f"{{{{step_1.items}}}}; got {map_over!r}",
            )
        ]
    ref = refs[0][1]
    if isinstance(ref, TemplateError):
        return [(step, "map_over", str(ref))]
    if ref.root == ITEM:
        return [
            (
                step,
                "map_over",
                "map_over cannot read {{_item}}: name an input or an earlier step's list",
            )
        ]
    return _check_reference(
        step, "map_over", ref, known=known, ancestors=ancestors, declared_inputs=declared_inputs
    )


def _check_compensation(
    s: FlowStep,
    known: set[str],
    ancestors: dict[str, set[str]],
    *,
    declared_inputs: set[str] | None,
) -> list[Problem]:
    """A compensation runs after its step completed: it may read the step's own output."""
    assert s.compensation is not None
    out: list[Problem] = []
    upstream = {**ancestors, s.id: ancestors.get(s.id, set()) | {s.id}}
    for field, ref in iter_references(s.compensation.input_map, "compensation.input_map"):
        if isinstance(ref, TemplateError):
            out.append((s.id, field, str(ref)))
        elif ref.root == ITEM:
            out.append((s.id, field, f"{ref.text}: a compensation cannot read a map item"))
        elif not ref.is_trigger and ref.root == s.id:
            continue
        else:
            out.extend(
                _check_reference(
                    s.id,
                    field,
                    ref,
                    known=known,
                    ancestors=upstream,
                    declared_inputs=declared_inputs,
                )
            )
    return out


def _check_reply(reply: str, known: set[str], declared_inputs: set[str] | None) -> list[Problem]:
    """A reply template reads inputs and any step (every step has run when it is written)."""
    problems: list[Problem] = []
    for field, ref in iter_references(reply, "reply_template"):
        if isinstance(ref, TemplateError):
            problems.append((None, field, str(ref)))
        elif ref.root == ITEM:
            problems.append((None, field, f"{ref.text}: a reply has no map item; name a step"))
        elif ref.is_trigger:
            if declared_inputs is not None and ref.path[0] not in declared_inputs:
                problems.append(
                    (None, field, f"{ref.text} names unknown flow input {ref.path[0]!r}")
                )
        elif ref.root not in known:
            problems.append(
                (
                    None,
                    field,
                    f"{ref.text} names unknown step {ref.root!r}; known "
                    f"steps: {', '.join(sorted(known))}",
                )
            )
    return problems


def _check_reference(
    step: str,
    field: str,
    ref: Reference,
    *,
    known: set[str],
    ancestors: dict[str, set[str]],
    declared_inputs: set[str] | None,
) -> list[Problem]:
    if ref.is_trigger:
        name = ref.path[0]
        if declared_inputs is not None and name not in declared_inputs:
            return [
                (
                    step,
                    field,
                    f"{ref.text} names unknown flow input {name!r}; declared inputs: "
                    f"{', '.join(sorted(declared_inputs)) or 'none'} (add it to input_schema.properties)",
                )
            ]
        return []
    if ref.root not in known:
        return [
            (
                step,
                field,
                f"{ref.text} names unknown step {ref.root!r}; known steps: "
                f"{', '.join(sorted(known))}",
            )
        ]
    if ref.root == step:
        return [(step, field, f"{ref.text}: a step cannot read its own output")]
    if step in ancestors and ref.root not in ancestors[step]:
        return [
            (
                step,
                field,
                f"{ref.text} reads step {ref.root!r}, which is not upstream of "
                f"{step!r}: add {ref.root!r} to depends_on",
            )
        ]
    return []


def layers(flow: FlowDefinition) -> list[list[str]]:
    """The flow's parallel layers (Kahn levels): each step's dependencies are in earlier layers.

    Unknown ``depends_on`` targets are ignored (``validate_flow`` reports them).

    Raises:
        FlowValidationError: when the dependencies form a cycle (the cycle is named).

    Example:
        >>> from soloflow_core.models import FlowDefinition, FlowStep
        >>> layers(FlowDefinition(name="f", steps=[
        ...     FlowStep(id="a", skill_key="x"), FlowStep(id="b", skill_key="x"),
        ...     FlowStep(id="c", skill_key="x", depends_on=["a", "b"])]))
        [['a', 'b'], ['c']]
    """
    known = {s.id for s in flow.steps}
    deps: dict[str, list[str]] = {}
    for s in flow.steps:
        deps.setdefault(s.id, []).extend(d for d in s.depends_on if d in known and d != s.id)
    result, cyclic = topological_layers(deps)
    if cyclic:
        cycle = find_cycle(deps, cyclic)
        message = (
            "dependency cycle: "
            + " → ".join(reversed(cycle))
            + "; remove one of these dependencies"
        )
        raise FlowValidationError(
            _format(flow.name, [(cycle[0], "depends_on", message)]),
            flow=flow.name,
            step=cycle[0],
            field="depends_on",
        )
    return result
