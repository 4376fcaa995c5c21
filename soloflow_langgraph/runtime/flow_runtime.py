"""The flow runtime: durable runs of compiled flows that survive crashes, wait for
approval, and can be resumed, inspected or cancelled from any process.

A run is a LangGraph thread (its id is the run id) checkpointed when an invocation ends —
in a SQLite file next to a SQLite store, in the PostgreSQL database of a PostgreSQL store, in
memory for an in-memory store — plus the store's record of the run: its state, every step's
state and every transition. A step recorded ``completed`` (or failed for good) is never
called again: a run carried on after a crash runs its graph again from its last checkpoint
or its inputs, each step the journal holds answered from it; a step that was running when
its process died runs again with the same idempotency key.

When a run ends its checkpoints are deleted, or kept until :meth:`FlowRuntime.prune`
(:mod:`~soloflow_langgraph.runtime.retention`); the store keeps the run's steps, outputs and
transitions. Invoking a run's graph: :mod:`~soloflow_langgraph.runtime.invocation`; reading
how it ended: :mod:`~soloflow_langgraph.runtime.ending`.

Example::

    runtime = FlowRuntime(store, tools=[search, fetch])
    result = runtime.run("research", {"query": "langgraph"})
    runtime.status(result.run_id).state     # 'completed'
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from langgraph.types import Command

from soloflow_core.errors import (
    FlowValidationError,
    InvalidTransitionError,
    NotFoundError,
    SoloFlowError,
)
from soloflow_core.flow.executors import ExecutorRegistry, build_executor_registry
from soloflow_core.flow.fsm import RunState
from soloflow_core.flow.journal import InMemoryStepJournal, StepJournal
from soloflow_core.learning.config import LearningConfig
from soloflow_core.models import FlowDefinition, ToolCall
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store.flowruns import APPROVAL_STEP
from soloflow_core.store.json_values import json_text
from soloflow_langgraph.compile.graph import compile_flow
from soloflow_langgraph.compile.nodes import HALTED, FlowContext
from soloflow_langgraph.runtime.ending import failed_result, record_outcome, state_result
from soloflow_langgraph.runtime.fenced_saver import fenced
from soloflow_langgraph.runtime.flow_trace import FlowTrace
from soloflow_langgraph.runtime.inputs import run_inputs
from soloflow_langgraph.runtime.invocation import (
    CALLER_CONFIG,
    Invoker,
    graph_config,
    step_listener,
)
from soloflow_langgraph.runtime.results import FlowRunResult
from soloflow_langgraph.runtime.retention import CheckpointRetention, Retention
from soloflow_langgraph.runtime.support import (
    OwnedCheckpointer,
    delete_checkpoints,
    open_checkpointer,
    owner_alive,
    process_owner,
    recover_completions,
    skip_rest,
)

if TYPE_CHECKING:
    import pluggy
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph.state import CompiledStateGraph

    from soloflow_core.store import Store
    from soloflow_core.store.flowruns import FlowRunRecord, Transition

log = logging.getLogger(__name__)


class FlowRuntime:
    """Runs flows durably for one (user, agent) namespace.

    Args:
        store: where flows are found and runs recorded; None runs in memory only.
        tools: LangChain tools or callables the steps may name (see ``compile_flow``).
        plugin_manager: executors and the ``soloflow_step_finished`` hook. Given neither this
            nor ``registry``, a fresh ``get_plugin_manager()``.
        registry: a ready executor registry instead of ``tools``/``plugin_manager``; with a
            registry and no plugin manager, no hook is called.
        checkpointer: a LangGraph checkpointer; by default one on the store's database.
        durability: ``"exit"`` (default): checkpoints saved as an invocation ends, the journal
            keeping steps exactly-once; ``"sync"``: also each superstep's (docs/flows.md).
        retention: what happens to a run's checkpoints when it ends.
        on_finished: called with the result of every run that ends (not one that waits for
            approval). Its errors are logged, never raised into the run.
        learning_config: the outcome rules (``min_success_rate``) applied when a run of a
            registered flow ends: the runtime records every such run's outcome in the store
            (:func:`~soloflow_core.learning.records.record_flow_outcome`); default
            ``LearningConfig()``.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        tools: Sequence[Any] = (),
        plugin_manager: pluggy.PluginManager | None = None,
        registry: ExecutorRegistry | None = None,
        user_id: str = "default",
        agent_id: str = "default",
        checkpointer: Any = None,
        durability: Literal["sync", "async", "exit"] = "exit",
        retention: Retention = "delete_on_finish",
        on_finished: Callable[[FlowRunResult], None] | None = None,
        learning_config: LearningConfig | None = None,
    ) -> None:
        self.store, self.user_id, self.agent_id = store, user_id, agent_id
        if registry is None:
            plugin_manager = plugin_manager if plugin_manager is not None else get_plugin_manager()
            registry = build_executor_registry(plugin_manager, tools=tools)
        self.pm = plugin_manager
        self.registry = registry
        self._owned: OwnedCheckpointer | None = (
            open_checkpointer(store) if checkpointer is None else None
        )
        self.checkpointer = checkpointer if self._owned is None else self._owned.saver
        self.durability, self.retention = durability, retention
        self._retention = CheckpointRetention(
            store, self.checkpointer, owned=self._owned, retention=retention
        )
        self._invoker = Invoker(self.checkpointer, durability)
        self._graph_saver = fenced(self.checkpointer, durability)
        self.owner = process_owner()
        self.on_finished = on_finished
        self.learning_config = learning_config or LearningConfig()
        self._graphs: dict[tuple[str, int], tuple[FlowDefinition, CompiledStateGraph]] = {}
        self._definitions: dict[tuple[str, int], FlowDefinition] = {}
        self._def_json: dict[tuple[str, int], tuple[FlowDefinition, str]] = {}
        self._latest: dict[str, FlowDefinition] = {}
        self._lock = threading.Lock()
        self._traces: dict[str, FlowTrace] = {}  # each invocation's going on, by run id

    def close(self) -> None:
        """Close the checkpointer this runtime opened, queued deletions first (not the store)."""
        self._retention.close()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> FlowRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ lookup

    def flow(self, name: str, version: int | None = None) -> FlowDefinition:
        """The registered flow ``name`` (latest version unless given; one indexed read),
        cached by version. :meth:`run` by name reads no version: it starts the newest version
        it knows of only if the statement that records the run finds it still the newest."""
        if self.store is None:
            raise NotFoundError(
                f"no flow {name!r}: this runtime has no store; pass the FlowDefinition"
            )
        user, agent = self.user_id, self.agent_id
        latest_asked = version is None
        if version is None:
            version = self.store.latest_flow_version(name, user_id=user, agent_id=agent)
            if version is None:
                return self.store.get_flow(name, user_id=user, agent_id=agent).flow  # NotFoundError
        hit = self._definitions.get((name, version))
        if hit is None:
            hit = self.store.get_flow(name, version=version, user_id=user, agent_id=agent).flow
            self._definitions[(name, version)] = hit
        if latest_asked:
            self._latest[name] = hit
        return hit

    def graph(self, flow: FlowDefinition) -> CompiledStateGraph:
        """``flow`` compiled with this runtime's executors and checkpointer (cached)."""
        key = (flow.name, flow.version)
        with self._lock:
            hit = self._graphs.get(key)
            if hit is not None and (hit[0] is flow or hit[0] == flow):
                return hit[1]
        graph = compile_flow(flow, registry=self.registry, checkpointer=self._graph_saver)
        with self._lock:
            self._graphs[key] = (flow, graph)
        return graph

    def _definition_json(self, flow: FlowDefinition) -> str:
        """``flow`` as the JSON a run records (cached with its graph)."""
        key = (flow.name, flow.version)
        hit = self._def_json.get(key)
        if hit is not None and (hit[0] is flow or hit[0] == flow):
            return hit[1]
        text = json_text(flow.model_dump(mode="json"))
        self._def_json[key] = (flow, text)
        return text

    # ------------------------------------------------------------------ running

    def run(
        self,
        flow: FlowDefinition | str,
        inputs: dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
        on_started: Callable[[str], None] | None = None,
        config: RunnableConfig | None = None,
    ) -> FlowRunResult:
        """Start a run and drive it until it ends or waits for approval. ``on_started``
        gets the run id once the run is recorded, before its first step. ``config``: the
        caller's ``RunnableConfig``; its ``callbacks``, ``tags``, ``metadata`` and
        ``run_name`` follow the run's graph, down to every step's tool (the thread id stays
        the run's own).

        Raises:
            FlowValidationError: the flow or the inputs are invalid (nothing is recorded).
            NotFoundError: no such registered flow.
        """
        if config is not None:
            token = CALLER_CONFIG.set(config)
            try:
                return self.run(flow, inputs, run_id=run_id, on_started=on_started)
            finally:
                CALLER_CONFIG.reset(token)
        given = dict(inputs or {})
        if isinstance(flow, str):
            return self._run_by_name(flow, given, run_id=run_id, on_started=on_started)
        inputs = run_inputs(flow, given, as_stored=self.durability == "exit")
        graph = self.graph(flow)
        if self.store is not None:
            run_id = self.store.start_flow_run(
                flow, inputs, definition_json=self._definition_json(flow), **self._start_kw(run_id)
            )
            journal: StepJournal = self._journal(run_id)
        else:
            run_id = run_id or "frun_" + uuid.uuid4().hex
            journal = InMemoryStepJournal(run_id)
        if on_started is not None:
            on_started(run_id)
        return self._drive(flow, graph, run_id=run_id, journal=journal, payload={"inputs": inputs})

    async def arun(
        self,
        flow: FlowDefinition | str,
        inputs: dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
        on_started: Callable[[str], None] | None = None,
        config: RunnableConfig | None = None,
    ) -> FlowRunResult:
        """:meth:`run` from async code: the run goes on a worker thread (its steps' tools
        are called as in :meth:`run`), the event loop stays free."""
        return await asyncio.to_thread(
            self.run, flow, inputs, run_id=run_id, on_started=on_started, config=config
        )

    def _journal(self, run_id: str) -> StepJournal:
        """The run's journal as the runtime drives it: each step's completion deferred to the
        run's next journal write (see ``Store.step_journal``)."""
        return self._need_store().step_journal(run_id, defer_completions=True)

    @property
    def _ns(self) -> dict[str, str]:
        return {"user_id": self.user_id, "agent_id": self.agent_id}

    def _start_kw(self, run_id: str | None) -> dict[str, Any]:
        return {**self._ns, "run_id": run_id, "owner": self.owner}

    def _run_by_name(
        self,
        name: str,
        given: dict[str, Any],
        *,
        run_id: str | None,
        on_started: Callable[[str], None] | None,
    ) -> FlowRunResult:
        """Run the newest version of ``name``. The runtime starts the newest version it knows
        of, and the statement that records the run checks it still is (no version read per
        run); when a newer one was registered meanwhile, or the caller's inputs do not fit the
        cached one, the newest is read and the run starts again from the caller's inputs."""
        if self.store is None:
            return self.run(self.flow(name), given, run_id=run_id, on_started=on_started)
        for _ in range(3):
            cached = self._latest.get(name)
            flow = cached or self.flow(name)
            try:
                inputs = run_inputs(flow, dict(given), as_stored=self.durability == "exit")
            except FlowValidationError:
                if cached is None:
                    raise
                self._latest.pop(name, None)  # maybe written for a newer version: look
                continue
            graph = self.graph(flow)
            started = self.store.start_latest_flow_run(
                flow, inputs, definition_json=self._definition_json(flow), **self._start_kw(run_id)
            )
            if started is None:  # a newer version was registered
                self._latest.pop(name, None)
                continue
            if on_started is not None:
                on_started(started)
            return self._drive(
                flow,
                graph,
                run_id=started,
                journal=self._journal(started),
                payload={"inputs": inputs},
            )
        # Versions kept coming: run the one the store names now.
        return self.run(self.flow(name), given, run_id=run_id, on_started=on_started)

    def resume(self, run_id: str, *, force: bool = False) -> FlowRunResult:
        """Carry on a run that was interrupted (``interrupted``) or whose process ended (a
        crash, a kill, a restart: ``running`` with its owner gone).

        Raises:
            NotFoundError: no such run in this namespace.
            InvalidTransitionError: the run has ended, waits for approval, or (without
                ``force``) its process still runs.
        """
        rec = self._record(run_id)
        if rec.terminal:
            raise InvalidTransitionError(
                f"flow run {run_id!r} has ended ({rec.state}); nothing to resume", run_id=run_id
            )
        if rec.waiting_for_approval:
            raise InvalidTransitionError(
                f"flow run {run_id!r} waits for approval: `soloflow flows runs approve {run_id}` or "
                f"`soloflow flows runs reject {run_id}`",
                run_id=run_id,
            )
        alive = rec.state == RunState.RUNNING and owner_alive(rec.owner)
        if alive and rec.owner != self.owner and not force:
            raise InvalidTransitionError(
                f"flow run {run_id!r} is being run by process {rec.owner}; stop it first, or pass "
                "--force if it is stuck",
                run_id=run_id,
            )
        return self._continue(rec, None)

    def approve(
        self, run_id: str, *, approved: bool = True, comment: str | None = None
    ) -> FlowRunResult:
        """Answer a run's approval: it goes on (``approved``) or is cancelled.

        Raises:
            InvalidTransitionError: the run does not wait for approval.
        """
        rec = self._record(run_id)
        if not rec.waiting_for_approval:
            raise InvalidTransitionError(
                f"flow run {run_id!r} does not wait for approval (state {rec.state})", run_id=run_id
            )
        if not approved:
            return self._reject(rec, comment)
        return self._continue(rec, Command(resume={"approved": True, "comment": comment}))

    def _reject(self, rec: FlowRunRecord, comment: str | None) -> FlowRunResult:
        """End a waiting run as rejected without running its graph (no executor needed)."""
        store = self._need_store()
        reason = "rejected" + (f": {comment}" if comment else "")
        store.claim_flow_run(rec.id, **self._ns, owner=self.owner, seen=rec)
        journal = store.step_journal(rec.id)
        journal.failed(APPROVAL_STEP, reason, retry=False)
        skip_rest(rec, journal, "the run's approval was rejected", exclude=APPROVAL_STEP)
        store.finish_flow_run(rec.id, status=RunState.CANCELLED, outcome="rejected", error=reason)
        self._retention.cleanup(rec.id)
        results = {s.step_id: s.output for s in rec.steps if s.state == "completed"}
        return FlowRunResult(
            run_id=rec.id,
            flow=rec.flow_name,
            status="cancelled",
            outcome="rejected",
            results=results,
            error=reason,
        )

    def reject(self, run_id: str, *, comment: str | None = None) -> FlowRunResult:
        return self.approve(run_id, approved=False, comment=comment)

    def cancel(self, run_id: str) -> FlowRunRecord:
        """Cancel a run. A run that a live process drives stops before its next step (the
        step in flight finishes); any other run is cancelled at once.

        Raises:
            InvalidTransitionError: the run has ended.
        """
        store = self._need_store()
        rec = self._record(run_id)
        if rec.terminal:
            raise InvalidTransitionError(
                f"flow run {run_id!r} has ended ({rec.state})", run_id=run_id
            )
        idle = (
            rec.waiting_for_approval
            or rec.state == RunState.INTERRUPTED
            or owner_alive(rec.owner) is False
        )
        if idle:
            try:  # no process drives it: end it here, unless one claimed it since (an approval)
                store.claim_flow_run(run_id, **self._ns, owner=self.owner, seen=rec)
            except InvalidTransitionError:  # that process stops before its next step
                idle = False
        store.request_cancel(run_id, **self._ns)
        if idle:
            skip_rest(rec, store.step_journal(run_id), "the run was cancelled")
            store.finish_flow_run(
                run_id,
                status=RunState.CANCELLED,
                outcome="cancelled",
                detail="cancelled while no process ran it",
            )
            self._retention.cleanup(run_id)
        return self._record(run_id)

    def status(self, run_id: str) -> FlowRunRecord:
        return self._record(run_id)

    def history(self, run_id: str) -> list[Transition]:
        return self._need_store().flow_run_history(run_id, **self._ns)

    def prune(self, *, older_than: datetime) -> int:
        """Delete the checkpoints of runs that ended before ``older_than``; how many runs."""
        ids = self._need_store().stale_flow_runs(older_than=older_than, terminal=True)
        if getattr(self.checkpointer, "delete_thread", None) is not None:
            delete_checkpoints(self.checkpointer, list(ids))  # errors reach the caller
        return len(ids)

    # ------------------------------------------------------------------ internals

    def _need_store(self) -> Store:
        if self.store is None:
            raise SoloFlowError("this FlowRuntime has no store: runs are not recorded")
        return self.store

    def _record(self, run_id: str) -> FlowRunRecord:
        return self._need_store().get_flow_run(run_id, **self._ns)

    def _continue(self, rec: FlowRunRecord, command: Command | None) -> FlowRunResult:
        store = self._need_store()
        self._invoker.await_stopped(rec.id)
        flow = (
            FlowDefinition.model_validate(rec.definition)
            if rec.definition
            else self.flow(rec.flow_name, rec.flow_version)
        )
        graph = self.graph(flow)
        # Only if nobody else claimed it since it was read: of two approvals (or resumes) at
        # once, one runs it; the other raises before touching the graph.
        store.claim_flow_run(rec.id, **self._ns, owner=self.owner, seen=rec)
        cfg = {"configurable": {"thread_id": rec.id}}
        payload: Any = command
        journal = self._journal(rec.id)
        if command is None:
            snapshot = graph.get_state(cfg)  # type: ignore[arg-type]
            # No checkpoint saved before the process died: from the inputs, the journal answering.
            payload = None if snapshot.next or snapshot.values else {"inputs": rec.inputs or {}}
            recover_completions(rec, snapshot, journal)
        return self._drive(flow, graph, run_id=rec.id, journal=journal, payload=payload)

    def _drive(
        self,
        flow: FlowDefinition,
        graph: CompiledStateGraph,
        *,
        run_id: str,
        journal: StepJournal,
        payload: Any,
    ) -> FlowRunResult:
        resumed = not (isinstance(payload, dict) and "inputs" in payload)
        trace = FlowTrace(
            flow,
            run_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            store=self.store,
            plugin_manager=self.pm,
            resumed=resumed,
        )
        self._traces[run_id] = trace
        try:
            with trace.current():
                result = self._invoke(flow, graph, run_id=run_id, journal=journal, payload=payload)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # Ctrl-C, SIGTERM: the caller is stopping
                self.record_interrupted(run_id)
            trace.finish(None, error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._traces.pop(run_id, None)
        trace.finish(result)
        record_outcome(self.store, result, ns=self._ns, config=self.learning_config)
        if self.on_finished is not None and result.status != "waiting":
            try:
                self.on_finished(result)
            except Exception:
                log.exception("on_finished failed for flow run %r", run_id)
        return result

    def _invoke(
        self,
        flow: FlowDefinition,
        graph: CompiledStateGraph,
        *,
        run_id: str,
        journal: StepJournal,
        payload: Any,
    ) -> FlowRunResult:
        steps: list[ToolCall] = []
        ctx = FlowContext(
            journal=journal,
            on_step=step_listener(self.pm, steps, run_id=run_id, ns=self._ns),
            run_id=run_id,
            tracer=self._traces.get(run_id),
        )
        cfg: Any = graph_config(run_id)
        invoke: Any = graph.invoke  # LangGraph's overloads type context as None
        start = time.perf_counter()

        def finish(state: RunState, **kw: Any) -> None:
            self._finish(run_id, state, journal, **kw)

        def common() -> dict[str, Any]:
            ms = (time.perf_counter() - start) * 1000
            return {"run_id": run_id, "flow": flow.name, "steps": steps, "duration_ms": ms}

        try:
            state = self._invoker.invoke(flow, invoke, payload=payload, cfg=cfg, ctx=ctx)
            if "__interrupt__" in state and state.get("halt"):
                # A step halted the run in the superstep in which the approval gate asked:
                # nothing is left to approve. No person is asked; the gate records itself
                # skipped and the run ends by the halt (fallback, compensation, cancel).
                halted: Any = Command(resume={HALTED: True})
                state = self._invoker.invoke(flow, invoke, payload=halted, cfg=cfg, ctx=ctx)
        except Exception as exc:
            return failed_result(flow, exc, common=common(), journal=journal, finish=finish)
        return state_result(flow, state, common=common(), journal=journal, finish=finish)

    def interrupted_call(self, run_id: str) -> str | None:
        """The call in progress when an invocation of ``run_id`` here was interrupted, e.g.
        ``step 'fetch' (attempt 1) calling pkg.tools:slow``, which is abandoned (the run
        resumes from its last checkpoint); None when none was (or none was interrupted)."""
        return self._invoker.interrupted_call(run_id)

    def interrupt_running(self) -> list[str]:
        """For a process shutting down: stop the runs this runtime drives on other threads as
        Ctrl-C would, record each ``interrupted``; start none from now on. The ids recorded."""
        self._invoker.stop_all()
        return [run_id for run_id in list(self._traces) if self.record_interrupted(run_id)]

    def record_interrupted(self, run_id: str) -> bool:
        """Record ``run_id``, driven here, as ``interrupted`` (Ctrl-C, SIGTERM,
        :meth:`interrupt_running`), naming the call left running; ``soloflow flows resume``
        carries it on. Again does nothing. False when nothing was recorded (no store, the
        run is not running here, or the store could not be written)."""
        if self.store is None:
            return False
        left = self.interrupted_call(run_id)
        detail = "stopped by its caller (Ctrl-C, SIGTERM)" + (
            f"; {left} was abandoned" if left else ""
        )
        try:
            return self.store.interrupt_flow_run(
                run_id, owner=self.owner, detail=detail, **self._ns
            )
        except Exception:  # the run stays `running` with its owner gone: still resumable
            log.exception("could not record flow run %r as interrupted", run_id)
            return False

    def _finish(self, run_id: str, state: RunState, journal: StepJournal, **kw: Any) -> None:
        """Record the run's end (with the completions its journal deferred) and let its
        checkpoints go."""
        if self.store is None:
            journal.flush()
        else:
            try:
                # With a checkpointer of the caller's (maybe another database) the end commits
                # synchronously: see FlowRunRepository.finish_flow_run.
                self.store.finish_flow_run(
                    run_id, status=state, synchronous=self._owned is None, journal=journal, **kw
                )
            except InvalidTransitionError:
                log.warning("flow run %r had already ended", run_id)
                journal.flush()
        self._retention.cleanup(run_id)


__all__ = ["FlowRuntime"]
