"""Verification before promotion: replay a compiled flow against recorded occurrences.

The flow is compiled into its real LangGraph graph with one *replay executor* per tool: a
call is answered with the recorded output of a recorded call of the same tool with the
same arguments, and fails (a divergence) otherwise. An occurrence is reproduced when every
call the flow makes matches a recorded one and every recorded call was made — except the
repeats of a *read-only* step the flow calls once (not a map step) that comes before a step
with side effects: an agent that looked up five reservations before cancelling one explored
on the way to the effect; the flow must make one of those lookups, the others are counted
(``repeats_not_made``), not divergences. Side-effecting repeats (two cancellations) and the
repeats of read-only steps after the last side effect (what a read-only flow returns) are
all required. Fidelity is the share of held-out occurrences reproduced.

Flow inputs come from the task text through the learned extraction rules; *free* inputs
(neither constant, upstream nor in the task) are given from the recording — from the call
the generaliser learned the step from (the last of a repeated step's calls) — as a caller
would give them — the report lists them and counts the arguments they feed
(``arguments_from_recording``) against the arguments the flow derived itself (constants,
upstream outputs, the task text: ``arguments_derived``). Held-out occurrences whose task
text is also a training occurrence's (the same task replayed) are not counted as held out.

Example:
    >>> report = verify_occurrences(["get_user", "get_order"], occurrences)   # doctest: +SKIP
    >>> report.fidelity
    1.0
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import PatternTimeoutError, ReplayMiss, SoloFlowError
from soloflow_core.flow.executors import ExecutorRegistry
from soloflow_core.flow.templates import Reference, iter_references
from soloflow_core.generalize.align import TOLERATED_GAP, find_occurrences
from soloflow_core.generalize.arguments import Occurrence, extract_value
from soloflow_core.generalize.dataflow import side_effects_from_calls
from soloflow_core.generalize.flow_calls import (
    explored_steps,
    flow_occurrence,
    known_side_effects,
    split_by_task,
    step_calls,
)
from soloflow_core.generalize.propose import propose
from soloflow_core.learning.outcomes import DEFAULT_PROMOTION_THRESHOLD
from soloflow_core.models import FlowCandidate, FlowDefinition
from soloflow_langgraph.compile.graph import compile_flow

if TYPE_CHECKING:
    from collections.abc import Callable

    from soloflow_core.store import Store

__all__ = [
    "Divergence",
    "ReplayExecutor",
    "ReplayOutcome",
    "VerificationReport",
    "replay_occurrence",
    "verify_candidate",
    "verify_flow",
    "verify_occurrences",
]

_MAX_SHOWN = 50


def _canon(v: Any) -> str:
    try:
        return json.dumps(v, sort_keys=True, default=str)
    except ValueError:
        return repr(v)


def args_match(made: Any, recorded: Any) -> bool:
    """Same arguments: equal JSON, where a scalar also equals its text (``7`` == ``"7"``)."""
    if isinstance(made, Mapping) and isinstance(recorded, Mapping):
        return made.keys() == recorded.keys() and all(
            args_match(made[k], recorded[k]) for k in made
        )
    if isinstance(made, list | tuple) and isinstance(recorded, list | tuple):
        return len(made) == len(recorded) and all(
            args_match(a, b) for a, b in zip(made, recorded, strict=True)
        )
    if isinstance(made, bool) or isinstance(recorded, bool) or made is None or recorded is None:
        return made is recorded or made == recorded
    if isinstance(made, Mapping | list | tuple) or isinstance(recorded, Mapping | list | tuple):
        return False
    return made == recorded or str(made) == str(recorded)


@dataclass(slots=True)
class Divergence:
    """One call that did not match the recording."""

    occurrence: str
    step: str | None
    tool: str | None
    kind: str
    """``unexpected`` (made, not recorded), ``missing`` (recorded, not made) or ``input``
    (an input or template could not be given)."""
    made: Any = None
    expected: Any = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "occurrence": self.occurrence,
            "step": self.step,
            "tool": self.tool,
            "kind": self.kind,
            "made": self.made,
            "expected": self.expected,
            "message": self.message,
        }


class ReplayExecutor:
    """Answers calls from one occurrence's recorded calls (same tool, same arguments)."""

    def __init__(
        self,
        recorded: Sequence[tuple[str, str, dict[str, Any], Any]],
        label: str = "",
        *,
        one_of: Collection[str] = (),
    ) -> None:
        self.recorded = list(recorded)  # (step id, tool, args, output)
        self.used = [False] * len(self.recorded)
        self.label = label
        self.one_of = frozenset(one_of)
        """Steps whose recorded calls are alternatives: making one of them is enough."""
        self.divergences: list[Divergence] = []

    def answer(self, tool: str, kwargs: dict[str, Any]) -> Any:
        matches = [
            k for k, (_, t, a, _) in enumerate(self.recorded) if t == tool and args_match(kwargs, a)
        ]
        if matches:
            k = next((m for m in matches if not self.used[m]), matches[0])
            self.used[k] = True
            return self.recorded[k][3]
        expected = [a for _, t, a, _ in self.recorded if t == tool]
        step = next((s for s, t, _, _ in self.recorded if t == tool), None)
        self.divergences.append(
            Divergence(
                occurrence=self.label,
                step=step,
                tool=tool,
                kind="unexpected",
                made=kwargs,
                expected=expected,
                message="no recorded call of this tool has these arguments",
            )
        )
        raise ReplayMiss(
            f"replay of {self.label!r}: {tool}({_canon(kwargs)[:200]}) was not recorded"
        )

    def registry(self) -> ExecutorRegistry:
        reg = ExecutorRegistry()
        for _, tool, _, _ in self.recorded:
            if tool not in reg:
                reg.register(tool, _Bound(self, tool))
        return reg

    def missing(self) -> list[Divergence]:
        """The recorded calls not made, but those of a ``one_of`` step that made one."""
        done = {s for (s, _, _, _), used in zip(self.recorded, self.used, strict=True) if used}
        return [
            Divergence(
                occurrence=self.label,
                step=s,
                tool=t,
                kind="missing",
                expected=a,
                message="recorded call the flow did not make",
            )
            for (s, t, a, _), used in zip(self.recorded, self.used, strict=True)
            if not used and not (s in self.one_of and s in done)
        ]

    def not_required(self) -> int:
        """Recorded calls of ``one_of`` steps left unmade once the step made one."""
        done = {s for (s, _, _, _), used in zip(self.recorded, self.used, strict=True) if used}
        return sum(
            1
            for (s, _, _, _), used in zip(self.recorded, self.used, strict=True)
            if not used and s in self.one_of and s in done
        )


class _Bound:
    def __init__(self, replay: ReplayExecutor, tool: str) -> None:
        self.replay, self.tool = replay, tool

    def __call__(self, **kwargs: Any) -> Any:
        return self.replay.answer(self.tool, kwargs)


@dataclass(slots=True)
class ReplayOutcome:
    occurrence: str
    reproduced: bool
    divergences: list[Divergence]
    inputs: dict[str, Any]
    inputs_from_recording: list[str]
    repeats_not_made: int = 0
    """Recorded repeats of read-only steps the flow called once (explored, not required)."""


@dataclass(slots=True)
class VerificationReport:
    """What replay showed about a flow."""

    flow: FlowDefinition | None
    fidelity: float | None
    outcomes: list[ReplayOutcome] = field(default_factory=list)
    trained_on: int = 0
    confidence: float | None = None
    free_inputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def held_out(self) -> int:
        return len(self.outcomes)

    @property
    def arguments_from_recording(self) -> int:
        """Arguments, over every replayed call, whose value a free input gave from the
        recording (as a caller would give it)."""
        return sum(_argument_sources(self.flow, o)[0] for o in self.outcomes)

    @property
    def arguments_derived(self) -> int:
        """Arguments, over every replayed call, the flow derived itself: constants, upstream
        outputs, inputs extracted from the task text."""
        return sum(_argument_sources(self.flow, o)[1] for o in self.outcomes)

    @property
    def divergences(self) -> list[Divergence]:
        return [d for o in self.outcomes for d in o.divergences]

    @property
    def repeats_not_made(self) -> int:
        """Recorded repeats of read-only steps the flow called once, over every replay."""
        return sum(o.repeats_not_made for o in self.outcomes)

    def note(self) -> str:
        if self.fidelity is None:
            return "; ".join(self.notes) or "not verified"
        head = (
            f"generalised from {self.trained_on} occurrence(s), replayed {self.held_out} held out: "
            f"{sum(o.reproduced for o in self.outcomes)} reproduced; arguments derived "
            f"{self.arguments_derived}, taken from the recording {self.arguments_from_recording}"
        )
        if self.repeats_not_made:
            head += (
                f"; {self.repeats_not_made} repeated read-only call(s) of the recording "
                "not made (the flow calls those steps once)"
            )
        return "; ".join([head, *self.notes])

    def passes(self, threshold: float = DEFAULT_PROMOTION_THRESHOLD) -> bool:
        return self.fidelity is not None and self.fidelity >= threshold


def _argument_sources(flow: FlowDefinition | None, outcome: ReplayOutcome) -> tuple[int, int]:
    """(arguments given from the recording, arguments derived) of one replayed occurrence:
    an argument reading a free input (given from the recording) is the former, every other
    one (a constant, an upstream output, an input extracted from the task) the latter."""
    if flow is None:
        return 0, 0
    free = set(outcome.inputs_from_recording)
    given = derived = 0
    for step in flow.steps:
        for value in step.input_map.values():
            refs = [r for _, r in iter_references(value) if isinstance(r, Reference)]
            if any(r.is_trigger and r.path[0] in free for r in refs):
                given += 1
            else:
                derived += 1
    return given, derived


def _whole_trigger(value: Any) -> str | None:
    refs = list(iter_references(value)) if isinstance(value, str) else []
    if (
        len(refs) == 1
        and isinstance(refs[0][1], Reference)
        and refs[0][1].is_trigger
        and value.strip() == refs[0][1].text
    ):
        return refs[0][1].path[0]
    return None


def _inputs(flow: FlowDefinition, occ: Occurrence) -> tuple[dict[str, Any], list[str], list[str]]:
    """(inputs, those given from the recording, problems) for replaying ``occ``."""
    recorded: dict[str, Any] = {}
    for i, step in enumerate(flow.steps):
        if i >= len(occ.args):
            break
        # The call the step was learned from: a map step's first, else its last (occ.args).
        first_args = step_calls(step, occ, i)[0][0] if step.map_over else dict(occ.args[i])
        for key, tmpl in step.input_map.items():
            name = _whole_trigger(tmpl)
            if name is not None and name not in recorded and key in first_args:
                recorded[name] = first_args[key]
    inputs: dict[str, Any] = {}
    given: list[str] = []
    problems: list[str] = []
    props = (flow.input_schema or {}).get("properties") or {}
    for name in props:
        rule = flow.extraction.get(name)
        if rule is not None:
            try:
                value = extract_value(
                    rule, occ.task or "", field=f"extraction.{name}.pattern", flow=flow.name
                )
            except PatternTimeoutError as exc:
                problems.append(f"input {name!r}: {exc}")
                continue
            if value is not None:
                jtype = rule.get("type")
                try:
                    inputs[name] = (
                        int(value)
                        if jtype == "integer"
                        else float(value)
                        if jtype == "number"
                        else value
                    )
                except ValueError:
                    inputs[name] = value
                continue
            problems.append(f"input {name!r}: the extraction rule found nothing in the task text")
        if name in recorded:
            inputs[name] = recorded[name]
            given.append(name)
    return inputs, given, problems


def replay_occurrence(
    flow: FlowDefinition,
    occ: Occurrence,
    *,
    label: str = "",
    side_effects: Mapping[str, bool | None] | None = None,
) -> ReplayOutcome:
    """Run ``flow``'s compiled graph against one recorded occurrence.

    ``side_effects`` (tool → False when read-only) tells which repeated steps the flow may
    call once (see the module's docstring); unknown tools are taken as side-effecting.
    """
    recorded = [
        (step.id, step.skill_key, args, out)
        for i, step in enumerate(flow.steps)
        if i < len(occ.args)
        for args, out in step_calls(step, occ, i)
    ]
    replay = ReplayExecutor(recorded, label, one_of=explored_steps(flow, occ, side_effects or {}))
    inputs, given, problems = _inputs(flow, occ)
    divergences = [
        Divergence(occurrence=label, step=None, tool=None, kind="input", message=p)
        for p in problems
    ]
    # Retries would only repeat a miss: a replayed flow makes each call once.
    strict = flow.model_copy(
        update={
            "steps": [
                s.model_copy(update={"retry_max": 0, "on_failure": "stop"}) for s in flow.steps
            ]
        }
    )
    try:
        graph = compile_flow(strict, registry=replay.registry())
        graph.invoke({"inputs": inputs, "results": {}, "errors": {}, "map_parts": {}})
    except ReplayMiss:
        pass  # recorded in replay.divergences
    except SoloFlowError as exc:
        if isinstance(getattr(exc, "cause", None), ReplayMiss):
            pass  # the step failed on a miss: recorded in replay.divergences
        else:
            divergences.append(
                Divergence(
                    occurrence=label,
                    step=getattr(exc, "step", None),
                    tool=None,
                    kind="input",
                    message=str(exc),
                )
            )
    except Exception as exc:  # a template or executor problem in this occurrence
        divergences.append(
            Divergence(
                occurrence=label,
                step=None,
                tool=None,
                kind="input",
                message=f"{type(exc).__name__}: {exc}",
            )
        )
    divergences += replay.divergences + replay.missing()
    return ReplayOutcome(
        occurrence=label,
        reproduced=not divergences,
        divergences=divergences,
        inputs=inputs,
        inputs_from_recording=given,
        repeats_not_made=replay.not_required(),
    )


def verify_flow(
    flow: FlowDefinition,
    held_out: Sequence[tuple[str, Occurrence]],
    *,
    trained_on: int = 0,
    side_effects: Mapping[str, bool | None] | None = None,
) -> VerificationReport:
    """Replay ``flow`` against each (label, occurrence); fidelity = share reproduced.
    ``side_effects``: as for :func:`replay_occurrence`.

    An occurrence whose calls at some step take none of that step's arguments is the flow's
    tools met by chance (called for something else), not the flow: it is not replayed, and a
    note counts it."""
    # The flow's occurrences, each step's unrelated calls of its tool left out
    # (soloflow_core.generalize.flow_calls: the alignment promotion and export read too).
    replayed = [
        (label, mine) for label, occ in held_out if (mine := flow_occurrence(flow, occ)) is not None
    ]
    outcomes = [
        replay_occurrence(flow, occ, label=label, side_effects=side_effects)
        for label, occ in replayed
    ]
    fidelity = sum(o.reproduced for o in outcomes) / len(outcomes) if outcomes else None
    notes = [] if outcomes else ["no held-out occurrence to replay"]
    if len(replayed) < len(held_out):
        notes.append(
            f"{len(held_out) - len(replayed)} occurrence(s) not replayed: at some step the calls "
            "take none of the step's arguments (the tools called for something else)"
        )
    return VerificationReport(
        flow=flow, fidelity=fidelity, outcomes=outcomes, trained_on=trained_on, notes=notes
    )


def split_holdout(n: int, every: int = 3) -> tuple[list[int], list[int]]:
    """(train, held out) indices: every ``every``-th occurrence is held out."""
    held = [k for k in range(n) if k % every == every - 1]
    return [k for k in range(n) if k not in held], held


def verify_occurrences(
    tool_sequence: Sequence[str],
    occurrences: Sequence[tuple[str, Occurrence]],
    *,
    repeated_steps: Collection[int] = (),
    side_effects: Mapping[str, bool | None] | None = None,
    holdout_every: int = 3,
) -> VerificationReport:
    """Generalise from some occurrences, replay the flow against the others."""
    if len(occurrences) < 3:
        return VerificationReport(
            flow=None,
            fidelity=None,
            notes=[
                f"cannot verify: {len(occurrences)} complete occurrence(s) found, at least 3 are "
                "needed (2 to generalise from, 1 to replay); ingest more runs with arguments and outputs"
            ],
        )
    # A tool's calls may state its side effects in some runs only: what any occurrence's
    # calls say counts for all of them (below what the caller gives).
    recorded = side_effects_from_calls(
        [c for _, o in occurrences for calls in o.step_calls for c in calls]
    )
    effects = {**recorded, **{k: v for k, v in (side_effects or {}).items() if v is not None}}
    # Split by task: a held-out occurrence never replays a training one's task (values).
    train, replays, set_aside = split_by_task([o.task for _, o in occurrences], every=holdout_every)
    if len(train) < 2 or not replays:
        tasks = len({o.task or k for k, (_, o) in enumerate(occurrences)})
        why = f"cannot verify: the {len(occurrences)} occurrence(s) are of {tasks} task(s) (one"
        why += " task text, one task); 2 to generalise from and 1 other to replay are needed"
        return VerificationReport(flow=None, fidelity=None, notes=[why])
    try:
        proposal = propose(
            tool_sequence,
            [occurrences[k][1] for k in train],
            observed=len(train),
            repeated_steps=repeated_steps,
            side_effects=side_effects,
        )
    except SoloFlowError as exc:
        return VerificationReport(flow=None, fidelity=None, notes=[f"cannot generalise: {exc}"])
    report = verify_flow(
        proposal.flow,
        [occurrences[k] for k in replays],
        trained_on=len(train),
        side_effects=effects,
    )
    if set_aside:
        report.notes.append(
            f"{set_aside} held-out occurrence(s) replay the task of another held-out one: "
            "not counted"
        )
    report.confidence = proposal.overall_confidence
    report.free_inputs = proposal.free_inputs
    report.notes += proposal.notes
    return report


def verify_candidate(
    store: Store,
    candidate_id: str,
    *,
    user_id: str,
    agent_id: str,
    save: bool = True,
    side_effects: Mapping[str, bool | None] | None = None,
) -> tuple[FlowCandidate, VerificationReport]:
    """Verify a stored candidate on its runs and store fidelity, confidence, divergences.

    A tool's side effects (which repeated read-only steps the flow may call once) are the
    candidate's proposed step's own flag, else ``side_effects`` (tool → bool: the tools'
    metadata, configuration), else what any recorded call of the candidate's runs says,
    else assumed."""
    cand = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
    runs = store.load_runs(cand.run_ids, user_id=user_id, agent_id=agent_id)
    # Every step takes its run of calls of its tool, whether or not the miner saw it repeat:
    # aligned strictly, the agent's own call of that tool beside the step could be taken for
    # it. Calls that take none of the step's arguments are then left out (step_calls).
    # One stray call between two steps is tolerated, as the miner tolerated it (noisy runs).
    occs = find_occurrences(runs, cand.tool_sequence, repeated_steps="any", max_gap=TOLERATED_GAP)
    # The same side effects whoever asks (in process, `soloflow flows verify`, the REST API):
    # the candidate's steps' own flags, else ``side_effects``, else any of its runs' calls.
    effects = known_side_effects(
        cand.proposed_flow,
        given=side_effects,
        recorded=side_effects_from_calls([c for r in runs for c in r.tool_calls]),
    )
    report = verify_occurrences(
        cand.tool_sequence, occs, repeated_steps=cand.repeated_steps, side_effects=effects
    )
    vals = [v for step in cand.argument_confidence.values() for v in step.values()]
    updated = cand.model_copy(
        update={
            "fidelity": None if report.fidelity is None else round(report.fidelity, 4),
            "confidence": report.confidence
            if report.confidence is not None
            else (round(sum(vals) / len(vals), 3) if vals else None),
            "divergences": [d.to_dict() for d in report.divergences[:_MAX_SHOWN]],
            "verified_at": datetime.now(UTC),
            "held_out": report.held_out if report.fidelity is not None else 0,
            "arguments_from_recording": report.arguments_from_recording,
            "arguments_derived": report.arguments_derived,
            "verification_note": report.note(),
        }
    )
    if save and cand.status == "pending":
        store.save_candidates([updated])
    return updated, report


__all__ += ["args_match", "split_holdout"]


def replay_verifier(
    store: Store, side_effects: dict[str, bool]
) -> Callable[[FlowCandidate], FlowCandidate]:
    """A ``verify`` callable for :class:`~soloflow_core.learning.service.LearningService`:
    :func:`verify_candidate` of a candidate in its own namespace, with the tools'
    ``side_effects`` (tool name → bool)."""

    def verify(cand: FlowCandidate) -> FlowCandidate:
        updated, _ = verify_candidate(
            store,
            cand.id,
            user_id=cand.user_id,
            agent_id=cand.agent_id,
            side_effects=side_effects or None,
        )
        return updated

    return verify


__all__ += ["replay_verifier"]
