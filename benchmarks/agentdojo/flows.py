"""An AgentDojo task's reference solution as a flow a user could have written.

The ground-truth calls are run once against a fresh default environment (AgentDojo's real
tools), and every argument gets one source, in this order:

1. ``upstream`` — equal to a field of an earlier step's structured output (nearest step,
   shortest path) → ``{{step_N.path}}``; a list argument may take some items this way;
2. ``task`` — a string that the task prompt contains and that an extraction rule gives
   back from it (a value shape, or the first quoted phrase) → ``{{_trigger.<name>}}``;
3. ``constant`` — anything else (values the reference solution computed, dates the prompt
   spells in words) → a literal.

Consecutive calls of one read-only tool whose only changing argument walks a whole list of
an earlier output become one map step. ``depends_on`` comes from data flow
(:func:`soloflow_core.generalize.dataflow.dataflow_depends_on`); only read-only tools may
run side by side, everything else keeps the reference order. Steps are not retried: the
tools are deterministic and many have side effects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.agentdojo.environment import (
    BENCHMARK_VERSION,
    AgentDojoTask,
    ground_truth_calls,
    load_task,
    tool_output_data,
)
from soloflow_core.flow.templates import TRIGGER
from soloflow_core.generalize.arguments import extract_value, learn_extraction
from soloflow_core.generalize.dataflow import dataflow_depends_on
from soloflow_core.generalize.propose import title_case
from soloflow_core.models import FlowDefinition, FlowStep

__all__ = [
    "flow_file_path",
    "flow_name",
    "flow_to_yaml",
    "ground_truth_flow",
    "is_read_only",
    "write_flow_file",
]

_READ_PREFIXES = ("get_", "search_", "list_", "read_", "check_")
_WRITES_DESPITE_NAME = frozenset({"get_webpage", "get_unread_emails"})
"""``get_webpage`` records the visit (slack checks it); ``get_unread_emails`` marks mail read."""
_SEGMENT = re.compile(r"^[^.\s{}]+$")
_CODE = r"[^\W_][\w\-]*"
"""A word or code without the sentence's full stop (``US122000000121212121212.``)."""
_QUOTED = r"(?<=['\"])[^'\"]+(?=['\"])"
_MAX_LEAVES = 5000
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def is_read_only(tool: str) -> bool:
    """Whether an AgentDojo tool leaves the environment as it found it (by its name)."""
    return tool.startswith(_READ_PREFIXES) and tool not in _WRITES_DESPITE_NAME


def flow_name(suite: str, task_id: str) -> str:
    return f"agentdojo-{suite}-{task_id}"


def flow_file_path(root: str | Path, suite: str, task_id: str) -> Path:
    """``<root>/<suite>/<task_id>.yaml``."""
    return Path(root) / suite / f"{task_id}.yaml"


@dataclass(slots=True)
class _Unit:
    """One step to be: a single call, or a run of calls that becomes a map step."""

    tool: str
    args: list[dict[str, Any]]
    output: Any
    """A single call's output, or the list of a map step's outputs."""
    walk: tuple[str, str, str] | None = None
    """For a map step: (argument, ``map_over`` template, item template)."""


def _leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            if _SEGMENT.match(k):
                yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, str(i)))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _meaningful(key: str, value: Any) -> bool:
    """Worth looking for upstream: not a flag, not empty, not a one-character word unless
    the argument is an id (``file_id: '3'``)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return len(value.strip()) >= (1 if key.lower().endswith("id") else 2)
    if isinstance(value, list):
        return bool(value)
    return isinstance(value, int | float)


def _candidates(
    key: str, value: Any, outputs: Sequence[Any]
) -> tuple[int, list[tuple[str, ...]]] | None:
    """The nearest earlier output holding ``value``, and every path where it does.

    A date is taken only as a whole output (``get_current_day``): a date that equals a field
    of some listed record is, in these solutions, the author's constant more often than not.
    """
    if not _meaningful(key, value):
        return None
    whole_only = isinstance(value, str) and _DATE.match(value) is not None
    for j in range(len(outputs) - 1, -1, -1):
        hits = [
            p
            for n, (p, leaf) in enumerate(_leaves(outputs[j]))
            if n < _MAX_LEAVES and _same(leaf, value) and not (whole_only and p)
        ]
        if hits:
            return j, hits
    return None


def _shared_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _pick(
    key: str,
    j: int,
    hits: list[tuple[str, ...]],
    others: Sequence[tuple[int, list[tuple[str, ...]]]],
) -> str:
    """The template of the best path: in the same record as the step's other upstream
    arguments, then under a field named like the argument, then the shortest."""

    def score(path: tuple[str, ...]) -> tuple[int, int, int]:
        coherent = max(
            (_shared_prefix(path, q) for k, qs in others if k == j for q in qs), default=0
        )
        field = path[-1].strip("_").lower() if path else ""
        named = 2 if field == key else int(bool(field) and field in key.lower())
        return (coherent, named, -len(path))

    best = max(hits, key=score)  # max keeps the first of equals: the earliest record
    return "{{" + ".".join((f"step_{j + 1}", *best)) + "}}"


def _extraction_rule(value: str, prompt: str) -> dict[str, Any] | None:
    """A rule that gives ``value`` back from ``prompt``: a learned shape, else the first quote."""
    if len(value) < 3 or value not in prompt:
        return None
    rule = learn_extraction([value], [prompt])
    if rule is None:
        words = re.findall(r"[\w-]+$", prompt[: prompt.find(value)].rstrip(" :=#'\"("))
        tries = [
            {"shape": "code", "pattern": _CODE, "anchor": a}
            for a in ([words[0].lower()] if words else []) + [""]
        ]
        tries += (
            [{"shape": "quoted", "pattern": r"[^'\"]+", "anchor": words[0].lower()}]
            if words
            else []
        )
        tries.append({"shape": "quoted", "pattern": _QUOTED, "anchor": ""})
        rule = next((r for r in tries if extract_value(r, prompt) == value), None)
    if rule is not None:
        rule["type"] = "string"
    return rule


class _Inference:
    """Argument sources for one task: the prompt, then upstream outputs, then constants.

    The prompt comes first: with a single reference run there is no second occurrence to
    tell a data dependency from a coincidence, and a value the user typed is what a person
    writing this flow would make an input (``channel: general`` rather than "the fourth
    channel listed").
    """

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self.properties: dict[str, Any] = {}
        self.extraction: dict[str, dict[str, Any]] = {}
        self.by_value: dict[str, str] = {}

    def _trigger(self, key: str, value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        if value in self.by_value:
            return "{{" + f"{TRIGGER}.{self.by_value[value]}" + "}}"
        rule = _extraction_rule(value, self.prompt)
        if rule is None:
            return None
        name = key if key not in self.properties else f"{key}_{len(self.properties) + 1}"
        shape = {
            "quoted": "a quoted phrase",
            "email": "an email address",
            "integer": "an integer",
            "number": "a number",
        }.get(rule["shape"], f"a {rule['shape']}")
        how = shape + (f" after {rule['anchor']!r}" if rule["anchor"] else " (the first)")
        self.properties[name] = {
            "type": "string",
            "description": f"from the task text: {how}",
            "examples": [value],
        }
        self.extraction[name] = rule
        self.by_value[value] = name
        return "{{" + f"{TRIGGER}.{name}" + "}}"

    def _one(
        self,
        key: str,
        value: Any,
        outputs: Sequence[Any],
        others: Sequence[tuple[int, list[tuple[str, ...]]]],
    ) -> Any:
        found = self._trigger(key, value)
        if found is not None:
            return found
        cands = _candidates(key, value, outputs)
        return _pick(key, *cands, others) if cands is not None else value

    def arguments(self, args: dict[str, Any], outputs: Sequence[Any]) -> dict[str, Any]:
        """One call's ``input_map``."""
        cands = {k: _candidates(k, v, outputs) for k, v in args.items()}
        out: dict[str, Any] = {}
        for key, value in args.items():
            others = [c for k, c in cands.items() if k != key and c is not None]
            if isinstance(value, list) and value and cands[key] is None:
                out[key] = [self._one(key, v, outputs, others) for v in value]
            else:
                out[key] = self._one(key, value, outputs, others)
        return out


def _find_walk(values: list[Any], outputs: Sequence[Any]) -> tuple[str, str] | None:
    """(``map_over``, item template) when ``values`` are, in order, a whole list of an
    earlier output or one field of each of its items."""
    for j in range(len(outputs) - 1, -1, -1):
        for path, leaf in _leaves(outputs[j]):
            if not isinstance(leaf, list) or len(leaf) != len(values):
                continue
            over = "{{" + ".".join((f"step_{j + 1}", *path)) + "}}"
            if all(_same(a, b) for a, b in zip(leaf, values, strict=True)):
                return over, "{{_item}}"
            if leaf and all(isinstance(x, dict) for x in leaf):
                for k in leaf[0]:
                    if _SEGMENT.match(k) and all(
                        _same(x.get(k), v) for x, v in zip(leaf, values, strict=True)
                    ):
                        return over, "{{_item." + k + "}}"
    return None


def _units(calls: Sequence[tuple[str, dict[str, Any]]], outputs: Sequence[Any]) -> list[_Unit]:
    units: list[_Unit] = []
    i = 0
    while i < len(calls):
        tool, args = calls[i]
        end = i + 1
        while end < len(calls) and calls[end][0] == tool and set(calls[end][1]) == set(args):
            end += 1
        if end - i >= 2 and is_read_only(tool):
            varying = [k for k in args if any(c[1][k] != args[k] for c in calls[i:end])]
            walk = (
                _find_walk([c[1][varying[0]] for c in calls[i:end]], [u.output for u in units])
                if len(varying) == 1
                else None
            )
            if walk is not None:
                units.append(
                    _Unit(
                        tool,
                        [c[1] for c in calls[i:end]],
                        list(outputs[i:end]),
                        (varying[0], *walk),
                    )
                )
                i = end
                continue
        units.append(_Unit(tool, [args], outputs[i]))
        i += 1
    return units


def ground_truth_flow(
    suite: str, task_id: str, *, version: str = BENCHMARK_VERSION
) -> FlowDefinition:
    """The flow of a task's reference solution, with templates for the data it passes.

    The reference calls are run once, on a fresh default environment, to see their outputs.

    Raises:
        ModuleNotFoundError: the ``agentdojo`` extra is not installed.
        KeyError: unknown suite or task.
    """
    task = load_task(suite, task_id, version=version)
    calls = ground_truth_calls(task)
    outputs = [tool_output_data(task.call(name, args)) for name, args in calls]
    return _flow_from_calls(task, calls, outputs)


def _flow_from_calls(
    task: AgentDojoTask, calls: Sequence[tuple[str, dict[str, Any]]], outputs: Sequence[Any]
) -> FlowDefinition:
    units = _units(calls, outputs)
    infer = _Inference(task.prompt)
    input_maps: list[dict[str, Any]] = []
    map_over: list[str | None] = []
    for n, unit in enumerate(units):
        earlier = [u.output for u in units[:n]]
        walked = unit.walk[0] if unit.walk else None
        imap = infer.arguments({k: v for k, v in unit.args[0].items() if k != walked}, earlier)
        if unit.walk is not None:
            imap = {unit.walk[0]: unit.walk[2], **imap}
        input_maps.append(imap)
        map_over.append(unit.walk[1] if unit.walk else None)
    tools = [u.tool for u in units]
    depends = dataflow_depends_on(
        tools, input_maps, map_over=map_over, side_effects={t: not is_read_only(t) for t in tools}
    )
    steps = [
        FlowStep(
            id=f"step_{n + 1}",
            name=title_case(unit.tool),
            skill_key=unit.tool,
            depends_on=depends[n],
            retry_max=0,
            input_map=input_maps[n],
            map_over=map_over[n],
        )
        for n, unit in enumerate(units)
    ]
    return FlowDefinition(
        name=flow_name(task.suite_name, task.task_id),
        description=(
            f"{task.prompt.strip()}\n\nThe reference solution of AgentDojo {task.version} "
            f"{task.suite_name}/{task.task_id}, as a flow."
        ),
        tags=["agentdojo", f"agentdojo-{task.suite_name}"],
        input_schema={
            "type": "object",
            "properties": infer.properties,
            "required": list(infer.properties),
        },
        extraction=infer.extraction,
        steps=steps,
    )


def flow_to_yaml(flow: FlowDefinition, *, header: str = "") -> str:
    """The flow as a readable YAML flow file (defaults left out; ``header`` as comments)."""
    data = flow.model_dump(mode="json", exclude_defaults=True)
    data["steps"] = data.pop("steps")  # last: the inputs read first, then what is done
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + text


def write_flow_file(root: str | Path, flow: FlowDefinition, suite: str, task_id: str) -> Path:
    """Write ``flow`` to ``<root>/<suite>/<task_id>.yaml``; returns the path."""
    path = flow_file_path(root, suite, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"AgentDojo {BENCHMARK_VERSION} {suite}/{task_id}: the reference solution as a flow.\n"
        "Generated by examples/agentdojo/regenerate.py; edit it like any flow file."
    )
    path.write_text(flow_to_yaml(flow, header=header), encoding="utf-8")
    return path
