"""The nodes of a compiled flow: steps, map fan-out and collection, the approval gate, and
the final node that runs compensations.

Every node reads its run's :class:`FlowContext` (LangGraph's run-scoped ``context``): the
step journal that makes the run durable, and an ``on_step`` callback. Without one (a bare
``graph.invoke``) a journal that records nothing is used. The state they read and write is
:mod:`soloflow_langgraph.compile.state`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from langgraph.types import Send, interrupt

from soloflow_core.errors import StepFailedError, StepInputError
from soloflow_core.flow.journal import StepBegin, StepJournal, idempotency_key
from soloflow_core.flow.templates import TemplateError, render
from soloflow_core.flow.validate import ITEM
from soloflow_core.models import FlowDefinition, FlowStep, ToolCall
from soloflow_core.store.flowruns import APPROVAL_STEP
from soloflow_langgraph.compile.run_watch import RunWatch, WatchedCall
from soloflow_langgraph.compile.state import FlowState, state_value
from soloflow_langgraph.compile.step_call import ExecutorInfo, call_with_limit, timed_out

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

log = logging.getLogger(__name__)

FANOUT_SUFFIX = "__fanout"
ITEM_SUFFIX = "__item"
"""A map step ``s`` is three nodes: ``s__fanout`` (waits for the dependencies, then sends
one ``s__item`` task per item), ``s__item`` (one call) and ``s`` (collects the list)."""
GATE_NODE = APPROVAL_STEP
FINAL_NODE = "__finalize__"
COMPENSATE_SUFFIX = "~compensate"

SKIP_PROPAGATING = frozenset({"skip_dependents"})


_REPORTED = frozenset({"name", "args", "output", "error", "duration_ms"})
"""The fields a step's ``ToolCall`` sets (``meta`` stays at its default); each call gets its own
copy, as pydantic keeps the set it is given."""


class NullJournal(StepJournal):
    """Records nothing: a run without durability."""

    run_id = ""

    def begin(self, step_key: str, step_id: str) -> StepBegin:
        return StepBegin.start(idempotency_key("", step_key), attempt=1)

    def succeeded(self, step_key: str, output: Any) -> None:
        return None

    def failed(self, step_key: str, error: str, *, retry: bool) -> None:
        return None

    def skipped(self, step_key: str, step_id: str, reason: str) -> None:
        return None

    def compensated(self, step_key: str, detail: str) -> None:
        return None

    def state_of(self, step_key: str) -> str | None:
        return None

    def completed_order(self) -> list[tuple[str, str, Any]]:
        return []


class CallTracer(Protocol):
    """Traces each call of a step's executor (the runtime's flow trace is one)."""

    def call(self, step: FlowStep, index: int, key: str) -> AbstractContextManager[Any]:
        """Entered around one call of the step's executor, in the thread that makes it (its
        context is the one the executor runs in); an exception raised by the call passes
        through it."""
        ...

    def timed_out(self, step: FlowStep, key: str, error: str) -> None:
        """The call of ``key`` that the previous invocation left running past its limit
        failed with ``error``."""
        ...


@dataclass(slots=True)
class FlowContext:
    """What a run hands its nodes (LangGraph ``context``)."""

    journal: StepJournal = field(default_factory=NullJournal)
    on_step: Callable[[FlowStep, ToolCall, int], None] | None = None
    run_id: str | None = None
    watch: RunWatch | None = None
    """Set when the runtime runs this invocation on a watched thread (``run_watch``): sync
    steps on that thread call their executor in line."""
    timed_out: dict[str, WatchedCall] = field(default_factory=dict)
    """Calls of the previous invocation that ran past their limit, by step key: their
    attempt is failed with ``StepTimeoutError`` when the step's node runs again."""
    tracer: CallTracer | None = None


_NULL_CONTEXT = FlowContext()


def _ctx(runtime: Runtime[FlowContext] | None) -> FlowContext:
    ctx = getattr(runtime, "context", None)
    return ctx if isinstance(ctx, FlowContext) else _NULL_CONTEXT


def stop_if_fenced(ctx: FlowContext) -> None:
    """Raise ``RunAbandoned`` when the runtime has stopped waiting for this invocation (its
    caller was interrupted), after writing the completions the journal holds back."""
    watch = ctx.watch
    if watch is not None and watch.fenced:
        ctx.journal.flush()
        watch.check()


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class FailedBefore(Exception):  # noqa: N818 - it is the recorded failure, not a new kind
    """A step's failure recorded in an earlier invocation of its run (the journal's error
    text, ``StepTimeoutError: …``): the step is not called again, it fails with this."""


@dataclass(slots=True)
class StepSpec:
    """One step, ready to run: its definition, executor and position."""

    flow: FlowDefinition
    step: FlowStep
    executor: Any
    info: ExecutorInfo
    index: int
    on_step: Callable[[FlowStep, ToolCall, int], None] | None = None
    comp_executor: Any = None
    comp_info: ExecutorInfo | None = None


def skip_reason(step: FlowStep, state: Mapping[str, Any]) -> str | None:
    """Why ``step`` must not start, or None."""
    halt = state.get("halt")
    if halt:
        return (
            f"the run stopped starting steps ({halt.get('kind')} after step {halt.get('step')!r})"
        )
    skipped = state.get("skipped") or {}
    failed = state.get("failed_skip") or {}
    for d in step.depends_on:
        if d in failed:
            return f"step {d!r} failed (on_failure=skip_dependents)"
        if d in skipped:
            return f"step {d!r} was skipped"
    return None


class StepNode:
    """The node of one step (or of one item of a map step)."""

    def __init__(self, spec: StepSpec) -> None:
        self.spec = spec
        self.__name__ = spec.step.id

    def _render(self, state: Mapping[str, Any]) -> dict[str, Any]:
        step, flow = self.spec.step, self.spec.flow
        results = state.get("results") or {}
        if "map_index" in state:
            results = {**results, ITEM: state.get("map_item")}
        try:
            kwargs = render(step.input_map, inputs=state.get("inputs") or {}, results=results)
        except TemplateError as exc:
            raise StepInputError(
                f"flow {flow.name!r}, step {step.id!r}: cannot render input_map: {exc}",
                flow=flow.name,
                step=step.id,
                cause=exc,
            ) from exc
        if not isinstance(kwargs, dict):
            raise StepInputError(
                f"flow {flow.name!r}, step {step.id!r}: input_map must render to an object",
                flow=flow.name,
                step=step.id,
            )
        return kwargs

    def _key(self, state: Mapping[str, Any]) -> str:
        sid = self.spec.step.id
        return f"{sid}[{state['map_index']}]" if "map_index" in state else sid

    def _done(self, state: Mapping[str, Any], out: Any) -> dict[str, Any]:
        sid = self.spec.step.id
        if "map_index" in state:
            return {"map_parts": {sid: {int(state["map_index"]): out}}}
        return {"results": {sid: out}}

    def _report(
        self, ctx: FlowContext, kwargs: dict[str, Any], *, out: Any, error: bool, start: float
    ) -> None:
        callbacks = [cb for cb in (self.spec.on_step, ctx.on_step) if cb is not None]
        if not callbacks:
            return
        # Every field is already of its type (a validated flow's skill key, the rendered
        # arguments dict, a bool, a float): no validation pass at every step. ``meta`` is
        # given too: for a field left to its ``default_factory`` pydantic inspects the
        # factory's signature on every construct.
        call = ToolCall.model_construct(
            set(_REPORTED),
            name=self.spec.step.skill_key,
            args=dict(kwargs),
            output=out,
            error=error,
            duration_ms=(time.perf_counter() - start) * 1000,
            meta={},
        )
        for cb in callbacks:
            cb(self.spec.step, call, self.spec.index)

    def __call__(self, state: FlowState, runtime: Runtime[FlowContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        step, key = self.spec.step, self._key(state)
        reason = skip_reason(step, state)
        if reason is not None:
            ctx.journal.skipped(key, step.id, reason)
            return (
                {"skipped": {key: reason}}
                if "map_index" in state
                else {"skipped": {step.id: reason}}
            )
        try:
            kwargs = self._render(state)
        except StepInputError as exc:
            begun = ctx.journal.begin(key, step.id)
            if begun.done:
                return self._done(state, begun.output)
            if begun.cancelled:
                return self._cancelled(ctx, key)
            if begun.failed is None:
                ctx.journal.failed(key, str(exc), retry=False)
            return self._give_up(state, key, exc)
        stop_if_fenced(ctx)
        watch = ctx.watch
        timed = ctx.timed_out.pop(key, None) if ctx.timed_out else None
        failure: Exception | None = None
        if timed is not None:  # the previous invocation's call ran over: that attempt failed
            attempt, idem = timed.attempt, timed.idempotency_key
            failure = timed_out(timed.where, timed.timeout, cancelled=False)
            start = time.perf_counter() - (time.monotonic() - timed.started)
            if ctx.tracer is not None:
                ctx.tracer.timed_out(step, key, _error_text(failure))
        else:
            begun = ctx.journal.begin(key, step.id)
            if begun.done:
                return self._done(state, begun.output)
            if begun.failed is not None:  # it failed for good before: it fails as it did
                return self._give_up(state, key, FailedBefore(begun.failed))
            if begun.cancelled:
                return self._cancelled(ctx, key)
            attempt, idem = begun.attempt, begun.idempotency_key
        delay = step.retry_backoff
        where = f"flow {self.spec.flow.name!r}, step {key!r}"
        inline = watch is not None and not self.spec.info.is_async and watch.owns_thread()
        while True:
            if failure is None:
                start = time.perf_counter()
                try:
                    with (
                        ctx.tracer.call(step, self.spec.index, key)
                        if ctx.tracer is not None
                        else nullcontext()
                    ):
                        if inline:
                            assert watch is not None
                            out = watch.call(
                                self.spec.executor,
                                self.spec.info,
                                kwargs,
                                timeout=step.timeout_seconds,
                                key=idem,
                                step_key=key,
                                attempt=attempt,
                                where=where,
                            )
                        else:
                            out = call_with_limit(
                                self.spec.executor,
                                self.spec.info,
                                kwargs,
                                timeout=step.timeout_seconds,
                                key=idem,
                                where=where,
                            )
                except Exception as exc:
                    failure = exc
            if failure is not None:
                err, failure = failure, None
                self._report(ctx, kwargs, out=_error_text(err), error=True, start=start)
                retry = attempt <= step.retry_max
                ctx.journal.failed(key, _error_text(err), retry=retry)
                if not retry:
                    return self._give_up(state, key, err)
                log.info(
                    "flow %r step %r attempt %d failed, retrying in %.2fs: %s",
                    self.spec.flow.name,
                    key,
                    attempt,
                    delay,
                    err,
                )
                time.sleep(delay)
                delay *= 2
                stop_if_fenced(ctx)
                again = ctx.journal.begin(key, step.id)
                if again.cancelled:
                    ctx.journal.skipped(key, step.id, "the run was cancelled")
                    return {"halt": {"kind": "cancelled", "step": step.id, "error": "cancelled"}}
                attempt = max(attempt + 1, again.attempt)
                idem = again.idempotency_key
                continue
            self._report(ctx, kwargs, out=out, error=False, start=start)
            out = state_value(out)
            ctx.journal.succeeded(key, out)
            return self._done(state, out)

    def _cancelled(self, ctx: FlowContext, key: str) -> dict[str, Any]:
        """The step does not start: its run was cancelled."""
        sid = self.spec.step.id
        ctx.journal.skipped(key, sid, "the run was cancelled")
        return {
            "halt": {"kind": "cancelled", "step": sid, "error": "cancelled"},
            "skipped": {sid: "the run was cancelled"},
        }

    def _give_up(self, state: Mapping[str, Any], key: str, exc: BaseException) -> dict[str, Any]:
        step, flow = self.spec.step, self.spec.flow
        text = str(exc) if isinstance(exc, FailedBefore) else _error_text(exc)
        policy = step.on_failure
        if policy == "stop":
            raise StepFailedError(
                f"flow {flow.name!r}, step {key!r} failed: {text}",
                flow=flow.name,
                step=step.id,
                cause=exc,
            ) from exc
        log.warning("flow %r step %r failed (%s): %s", flow.name, key, policy, text)
        update: dict[str, Any] = {"errors": {key: text}}
        if policy == "skip_dependents":
            update["failed_skip"] = {step.id: text}
        elif policy in ("fallback", "compensate"):
            update["halt"] = {"kind": policy, "step": step.id, "error": text}
        return update


class MapFanOut:
    """The conditional edge of a map step: one ``Send`` per item of ``map_over``."""

    def __init__(self, flow: FlowDefinition, step: FlowStep) -> None:
        self.flow, self.step = flow, step
        self.__name__ = f"{step.id}{FANOUT_SUFFIX}"

    def __call__(self, state: Mapping[str, Any]) -> list[Send | str]:
        assert self.step.map_over is not None
        if skip_reason(self.step, state) is not None:
            return [self.step.id]
        try:
            items = render(
                self.step.map_over,
                inputs=state.get("inputs") or {},
                results=state.get("results") or {},
            )
        except TemplateError as exc:
            raise StepInputError(
                f"flow {self.flow.name!r}, step {self.step.id!r}, field 'map_over': {exc}",
                flow=self.flow.name,
                step=self.step.id,
                cause=exc,
            ) from exc
        if not isinstance(items, list | tuple):
            raise StepInputError(
                f"flow {self.flow.name!r}, step {self.step.id!r}, field 'map_over': "
                f"{self.step.map_over} is a {type(items).__name__}, not a list; point it at a list",
                flow=self.flow.name,
                step=self.step.id,
            )
        if not items:
            return [self.step.id]
        base = {
            k: state[k]
            for k in ("inputs", "results", "skipped", "failed_skip", "halt")
            if k in state
        }
        return [
            Send(self.step.id + ITEM_SUFFIX, {**base, "map_item": x, "map_index": k})
            for k, x in enumerate(items)
        ]


class Collect:
    """A map step's last node: the items' outputs, in item order, as the step's output."""

    def __init__(self, step: FlowStep) -> None:
        self.step = step
        self.__name__ = step.id

    def __call__(self, state: FlowState, runtime: Runtime[FlowContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        stop_if_fenced(ctx)
        parts = (state.get("map_parts") or {}).get(self.step.id, {})
        n = self._items(state, parts)
        reason = skip_reason(self.step, state)
        # A run halted meanwhile (another step failed in the same superstep) still collects
        # a map step all of whose calls completed: they happened, so a compensation covers it.
        if reason is not None and not (n and all(k in parts for k in range(n))):
            ctx.journal.skipped(self.step.id, self.step.id, reason)
            return {"skipped": {self.step.id: reason}}
        out = [parts.get(k) for k in range(n)]  # an item that failed (on_failure: continue) is None
        begun = ctx.journal.begin(self.step.id, self.step.id)
        if not begun.done:
            ctx.journal.succeeded(self.step.id, out)
        return {"results": {self.step.id: out}}

    def _items(self, state: Mapping[str, Any], parts: Mapping[int, Any]) -> int:
        """How many items the step fanned out (its ``map_over`` rendered again, as the fan-out
        did); the highest item seen if it cannot be."""
        assert self.step.map_over is not None
        try:
            items = render(
                self.step.map_over,
                inputs=state.get("inputs") or {},
                results=state.get("results") or {},
            )
        except TemplateError:
            items = None
        return len(items) if isinstance(items, list) else max(parts, default=-1) + 1


HALTED = "__soloflow_halted__"
"""The runtime's answer to a gate whose run halted in the superstep in which it asked: no
person is asked; the gate records itself skipped and the run ends by the halt."""


class ApprovalGate:
    """Pauses the run (``interrupt``) before its first side-effecting step."""

    __name__ = GATE_NODE

    def __init__(self, flow: FlowDefinition, guarded: list[str]) -> None:
        self.flow, self.guarded = flow, guarded

    def __call__(self, state: FlowState, runtime: Runtime[FlowContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        stop_if_fenced(ctx)
        if state.get("halt"):
            ctx.journal.skipped(GATE_NODE, GATE_NODE, "the run stopped before its approval")
            return {}
        recorded = ctx.journal.state_of(GATE_NODE)
        if recorded == "completed":
            # Approved in an earlier invocation whose later checkpoints were not saved (a run
            # checkpointed only when an invocation ends, carried on after a crash): not asked
            # again.
            given = ctx.journal.begin(GATE_NODE, GATE_NODE).output
            return {"approval": given if isinstance(given, dict) else {"approved": True}}
        if recorded is None:
            begun = ctx.journal.begin(GATE_NODE, GATE_NODE)
            if begun.cancelled:
                return {"halt": {"kind": "cancelled", "step": GATE_NODE, "error": "cancelled"}}
        decision = interrupt(
            {
                "flow": self.flow.name,
                "run_id": ctx.run_id,
                "question": f"Run the side-effecting steps {', '.join(self.guarded)} of flow {self.flow.name!r}?",
                "next_steps": self.guarded,
                "results_so_far": dict(state.get("results") or {}),
            }
        )
        if isinstance(decision, dict) and decision.get(HALTED):  # see FlowRuntime._invoke
            ctx.journal.skipped(GATE_NODE, GATE_NODE, "the run stopped before its approval")
            return {}
        approved = bool(decision.get("approved")) if isinstance(decision, dict) else bool(decision)
        note = decision.get("comment") if isinstance(decision, dict) else None
        if approved:
            if ctx.journal.state_of(GATE_NODE) != "completed":
                ctx.journal.succeeded(GATE_NODE, {"approved": True, "comment": note})
            return {"approval": {"approved": True, "comment": note}}
        reason = "rejected" + (f": {note}" if note else "")
        if ctx.journal.state_of(GATE_NODE) == "running":
            ctx.journal.failed(GATE_NODE, reason, retry=False)
        return {
            "approval": {"approved": False, "comment": note},
            "halt": {"kind": "rejected", "step": GATE_NODE, "error": reason},
        }


class Finalize:
    """The last node: after a ``compensate`` failure, undoes the completed steps in
    reverse completion order, each at most once (its own journal entry)."""

    __name__ = FINAL_NODE

    def __init__(self, flow: FlowDefinition, specs: dict[str, StepSpec]) -> None:
        self.flow, self.specs = flow, specs

    def __call__(self, state: FlowState, runtime: Runtime[FlowContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        stop_if_fenced(ctx)
        halt = state.get("halt") or {}
        if halt.get("kind") != "compensate":
            return {}
        results = dict(state.get("results") or {})
        # The journal knows the completion order; without one, the flow's step order.
        order = [sid for _, sid, _ in ctx.journal.completed_order()] or [
            s.id for s in self.flow.steps if s.id in results
        ]
        errors: dict[str, str] = {}
        for sid in reversed(list(dict.fromkeys(order))):
            spec = self.specs.get(sid)
            if spec is None or spec.step.compensation is None or sid not in results:
                continue
            err = self._undo(ctx, spec, state=state, results=results)
            if err is not None:
                errors[sid] = err
        return {"compensation_errors": errors} if errors else {}

    def _undo(
        self, ctx: FlowContext, spec: StepSpec, *, state: Mapping[str, Any], results: dict[str, Any]
    ) -> str | None:
        comp = spec.step.compensation
        assert comp is not None and spec.comp_info is not None
        key = spec.step.id + COMPENSATE_SUFFIX
        where = f"flow {self.flow.name!r}, compensation of step {spec.step.id!r}"
        try:
            kwargs = render(comp.input_map, inputs=state.get("inputs") or {}, results=results)
        except TemplateError as exc:
            return f"{where}: cannot render input_map: {exc}"
        begun = ctx.journal.begin(key, spec.step.id)
        if begun.done:
            ctx.journal.compensated(spec.step.id, "compensated")
            return None
        if begun.failed is not None:  # it failed for good in an earlier invocation
            return f"{where}: {begun.failed}"
        delay = spec.step.retry_backoff
        attempt = begun.attempt
        while True:
            try:
                out = call_with_limit(
                    spec.comp_executor,
                    spec.comp_info,
                    dict(kwargs),
                    timeout=spec.step.timeout_seconds,
                    key=begun.idempotency_key,
                    where=where,
                )
            except Exception as exc:
                retry = attempt <= spec.step.retry_max
                ctx.journal.failed(key, _error_text(exc), retry=retry)
                if not retry:
                    log.error("%s failed: %s", where, exc)
                    return f"{where}: {_error_text(exc)}"
                time.sleep(delay)
                delay *= 2
                attempt = max(attempt + 1, ctx.journal.begin(key, spec.step.id).attempt)
                continue
            ctx.journal.succeeded(key, state_value(out))
            ctx.journal.compensated(spec.step.id, f"undone by {comp.skill_key}")
            return None
