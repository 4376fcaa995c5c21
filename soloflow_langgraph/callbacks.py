"""Capture: LangChain callback events → one ``TaskRun`` per top-level invocation.

Attach :class:`SoloFlowCallbackHandler` to any runnable (``config={"callbacks": [handler]}``).
Each root run (``parent_run_id is None``) becomes one task run: its task text, every tool
call, every model call's token usage, its trace. Everything stays in memory while the run goes
on; when the root ends, the run and its trace are written in one transaction before ``invoke``
/ ``ainvoke`` returns, so a process that exits right after still has it.

The handler never breaks the agent nor holds it up: every callback catches and logs its own
errors; the write runs on the handler's writer thread and the agent waits for it at most
``write_timeout`` seconds (:data:`WRITE_TIMEOUT_S`); a run that is not stored by then (store
unreachable, locked, its file deleted...) is appended to the spill file next to the store, which
the next handler (or ``soloflow ingest --spill PATH``) writes back. ``handler.health()`` says
how the capture is doing (see ``docs/ledger.md``, "When the store is unavailable").

Example:
    >>> handler = SoloFlowCallbackHandler(database_url="sqlite:///runs.db")  # doctest: +SKIP
    >>> agent.invoke({"messages": [("user", "Where is my order?")]},
    ...              config={"callbacks": [handler]})  # doctest: +SKIP
    >>> handler.last_run.tool_names  # doctest: +SKIP
    ['find_customer', 'list_orders', 'track_shipment']
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from soloflow_core.ledger.spill import SPILL_LIMIT_BYTES
from soloflow_core.mining.watch import DetectionWatcher
from soloflow_core.models import DetectorConfig, StepRecord, TaskRun, check_namespace
from soloflow_core.plugins import call_hook, get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.tracing import PriceTable, Span
from soloflow_langgraph._callback_events import (
    after_written,
    answer_from_outputs,
    args_from,
    classify,
    effects,
    error_text,
    first_human,
    model_result,
    namespace_of,
    never_raises,
    response_model,
    routed_flow,
    task_from_inputs,
    tool_call,
    tool_output,
)
from soloflow_langgraph._capture_state import (
    CaptureHealth,
    RunCapture,
    ToolCallCapture,
    build_task_run,
    finished_trace,
)
from soloflow_langgraph._ledger_link import (
    LedgerLink,
    has_content,
    report_let_go,
    report_spilled,
    spill_one,
)
from soloflow_langgraph.agent_trace import start_agent_trace

if TYPE_CHECKING:
    import pluggy
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import LLMResult

    from soloflow_core.models import ModelPrice

__all__ = ["CaptureHealth", "SoloFlowCallbackHandler"]

logger = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 2.0
"""How long the agent waits, at most, for its run to be stored before it is spilled."""
MAX_UNSAVED = 1000
"""Unstored runs ``handler.unsaved`` keeps; an older one is let go, logged (an error if lost)."""


# --------------------------------------------------------------------------- the handler


class SoloFlowCallbackHandler(BaseCallbackHandler):
    """Record each top-level invocation as one ``TaskRun`` in the SoloFlow store.

    A root chain (an agent's ``invoke``/``ainvoke``/``stream``) or a tool called directly is
    a run; a chat model called on its own is not. Tool calls are stored in call order (a model
    turn's parallel calls in the order it asked for them). Under ``ainvoke`` the callbacks run
    inline on the event loop (``run_inline``), and so does the run's write at the end.

    Args:
        database_url: where to store runs (``resolve_database_url``), unless ``store`` is
            given; with neither, the embedded default database.
        store: an open :class:`~soloflow_core.store.Store` to write to.
        user_id: namespace of the runs, unless an invocation's ``metadata`` names another
            (``config={"metadata": {"soloflow_user_id": ..., "soloflow_agent_id": ...}}``):
            one handler serves a multi-tenant app. No control character (InvalidNameError).
        agent_id: likewise (a ``metadata`` id with a control character is stored escaped).
        plugin_manager: where ``soloflow_classify_task``, ``soloflow_step_finished`` and
            ``soloflow_run_finished`` are called; defaults to ``get_plugin_manager()``.
        detect: watch for repeated sequences as runs arrive (True, or a ``DetectorConfig``):
            an O(run length) check after each run, and a full detection on a background
            thread when a new candidate may exist; candidates are stored pending and listed
            in ``handler.watcher.proposed``.
        write_timeout: how long the agent waits, at most, for its run's write (seconds).
        spill_path: where runs that could not be stored go; defaults to next to a SQLite
            file (``<file>.spill.jsonl``), else in the SoloFlow data directory.
        spill_limit_bytes: the spill file's bound; a run past it is dropped and logged.
        prices: model name → the user's own price (``ModelPrice``), over ``genai-prices``,
            for the cost of each model call and the run's ``cost``.
        trace: record each run's spans (``soloflow runs trace``, OpenTelemetry export when
            configured) and price its model calls; False records the run alone.

    Attributes:
        last_run: the last task run written to the store.
        runs_written: how many task runs this handler has written.
        unsaved: runs this handler spilled and has not stored since (the latest
            :data:`MAX_UNSAVED`), for :meth:`flush`.
    """

    raise_error = False
    # Inline under ainvoke too: no executor hop per event, and events keep their order.
    run_inline = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(
        self,
        *,
        database_url: str | None = None,
        store: Store | None = None,
        user_id: str = "default",
        agent_id: str = "default",
        plugin_manager: pluggy.PluginManager | None = None,
        detect: bool | DetectorConfig = False,
        write_timeout: float = WRITE_TIMEOUT_S,
        spill_path: str | os.PathLike[str] | None = None,
        spill_limit_bytes: int = SPILL_LIMIT_BYTES,
        prices: dict[str, ModelPrice] | None = None,
        trace: bool = True,
    ) -> None:
        check_namespace(user_id, agent_id)
        self.user_id = user_id
        self.agent_id = agent_id
        self.pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
        self._detect = detect
        self.prices = PriceTable(prices)
        self.trace = trace
        self.watcher: DetectionWatcher | None = None
        self.last_run: TaskRun | None = None
        self.runs_written = 0
        self.unsaved: list[TaskRun] = []
        self._memory_only: set[int] = set()  # id() of the runs of unsaved not in the spill file
        self.write_timeout = write_timeout
        self.spill_limit_bytes = spill_limit_bytes
        self._lock = threading.Lock()
        # Run ids as ints: a UUID hashes in Python code, its int in C.
        self._root_of: dict[int, RunCapture] = {}
        """Every run id of a root being captured → that root's capture."""
        self._runs: dict[int, RunCapture] = {}
        """Root run id → its capture."""
        self._ledger = LedgerLink(store, database_url, self._connected)
        self.store: Store | None = self._ledger.store
        self.spill_path: Path | None = (
            Path(spill_path) if spill_path is not None else self._ledger.default_spill_path()
        )
        self._runs_spilled = 0
        self._runs_dropped = 0
        if self.store is not None:
            self._connected(self.store)

    def health(self) -> CaptureHealth:
        """How the capture is doing; cheap, no database round trip."""
        problem, waiting = self._ledger.problem, len(self.unsaved)
        if problem is None and waiting:
            problem = f"{waiting} runs wait to be stored ({len(self._memory_only)} only in memory)"
        return CaptureHealth(
            ok=problem is None,
            problem=problem,
            runs_written=self.runs_written,
            runs_spilled=self._runs_spilled,
            runs_dropped=self._runs_dropped,
            spill_path=str(self.spill_path) if self.spill_path is not None else None,
        )

    def flush(self) -> int:
        """Store the runs in ``unsaved`` now, then write back the whole spill file (runs of
        earlier processes too); return how many of ``unsaved`` are now stored."""
        timeout = self.write_timeout
        stored, mine = self._store_unsaved(
            lambda run: self._ledger.call(functools.partial(self._ledger.store_run, run), timeout)
        )
        self._written_all(mine)
        if not self.unsaved and self.spill_path is not None:
            try:
                self._ledger.call(self._write_back, self.write_timeout)
            except Exception as exc:
                self._ledger.report("write-back", f"writing back the spill file failed: {exc}")
        return stored

    def _store_unsaved(self, store_run: Callable[[TaskRun], bool]) -> tuple[int, list[TaskRun]]:
        """Store ``unsaved`` with ``store_run``: how many now are, and those this call took out
        of ``unsaved`` (a run a flush and a write-back both stored is counted once)."""
        with self._lock:
            pending = list(self.unsaved)
        stored, mine = 0, []
        for run in pending:
            try:
                store_run(run)  # False: a write that timed out went through after all
            except Exception as exc:
                self._ledger.report("flush", f"storing run {run.run_id} failed: {error_text(exc)}")
                continue
            with self._lock:
                if any(r is run for r in self.unsaved):
                    mine.append(run)
                self.unsaved = [r for r in self.unsaved if r is not run]
                self._memory_only.discard(id(run))
            stored += 1
        return stored, mine

    def close(self) -> None:
        """Stop the writer thread; close the store if this handler opened it."""
        self._ledger.close()

    def _connected(self, store: Store) -> None:
        """The store answers (opened, or back after a fault): set up what needs it, write back
        what this handler or an earlier process spilled."""
        self.store = store
        if self._detect and (self.watcher is None or self.watcher.store is not store):
            config = self._detect if isinstance(self._detect, DetectorConfig) else None
            self.watcher = DetectionWatcher(store, config)
        if self.unsaved or (self.spill_path is not None and has_content(self.spill_path)):
            self._ledger.submit(self._write_back)

    def _write_back(self) -> int:
        """On the writer thread: store ``unsaved`` (their hooks run on a thread of their own,
        so the agent's writes never wait behind them), then write back the spill file."""
        _, mine = self._store_unsaved(self._ledger.store_run)
        if mine:
            threading.Thread(target=self._written_all, args=(mine,), daemon=True).start()
        if self.unsaved or self.spill_path is None:
            return 0
        return self._ledger.write_back(self.spill_path)

    @property
    def in_flight(self) -> int:
        """How many root runs are being captured right now."""
        return len(self._runs)

    # ------------------------------------------------------------------ the run tree
    # Both must be called under ``self._lock``.

    def _join(self, run_id: UUID, parent_run_id: UUID | None) -> RunCapture | None:
        """Map ``run_id`` to its parent's root; None when that root is not being captured."""
        state = self._root_of.get(parent_run_id.int) if parent_run_id is not None else None
        if state is not None:
            self._root_of[run_id.int] = state
            state.members.append(run_id.int)
        return state

    def _open_root(
        self, run_id: UUID, *, name: str | None, task: str | None, metadata: Any = None
    ) -> RunCapture:
        now = datetime.now(UTC)
        key = run_id.int
        state = RunCapture(
            root_id=run_id,
            name=name,
            task=task,
            started_at=now,
            members=[key],
            namespace=namespace_of(metadata),
        )
        if self.trace:
            state.trace = start_agent_trace(
                run_id, name, prices=self.prices, plugin_manager=self.pm
            )
        self._root_of[key] = state
        self._runs[key] = state
        return state

    # ------------------------------------------------------------------ chains

    @never_raises
    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            name = kwargs.get("name") or (serialized or {}).get("name")
            task = task_from_inputs(inputs)
            with self._lock:
                self._open_root(run_id, name=name, task=task, metadata=kwargs.get("metadata"))
        else:
            with self._lock:
                self._join(run_id, parent_run_id)

    @never_raises
    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if parent_run_id is None:
            self._finish_root(run_id, error=None, outputs=outputs)

    @never_raises
    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            self._finish_root(run_id, error=error_text(error))

    @never_raises
    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        # Only to keep the run tree whole: a retriever may call a model.
        with self._lock:
            self._join(run_id, parent_run_id)

    # ------------------------------------------------------------------ models

    @never_raises
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        state = self._model_start(
            serialized, run_id, parent_run_id=parent_run_id, metadata=metadata, kwargs=kwargs
        )
        if state is not None and state.task is None and messages:
            # No task in the root's input (not a messages state): the model's first human turn.
            task = first_human(list(messages[0]))
            with self._lock:
                state.task = state.task or task

    @never_raises
    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model_start(
            serialized, run_id, parent_run_id=parent_run_id, metadata=metadata, kwargs=kwargs
        )

    def _model_start(
        self,
        serialized: dict[str, Any] | None,
        run_id: UUID,
        *,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> RunCapture | None:
        started = time.perf_counter()
        model = (metadata or {}).get("ls_model_name") or (serialized or {}).get("name")
        model = model or kwargs.get("name")
        with self._lock:
            state = self._join(run_id, parent_run_id)
            if state is not None:
                state.open_models[run_id.int] = (started, model if isinstance(model, str) else None)
                if state.trace is not None:
                    state.trace.model_started(
                        run_id, parent_run_id, model if isinstance(model, str) else None
                    )
        return state

    @never_raises
    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        ended = time.perf_counter()
        usage, call_ids = model_result(response)
        with self._lock:
            state = self._root_of.get(run_id.int)
            if state is None:
                return
            started, model = state.open_models.pop(run_id.int, (ended, None))
            if state.trace is not None:
                state.trace.model_ended(run_id, usage, response_model(response))
            state.model_ended(model, usage, duration_ms=(ended - started) * 1000, call_ids=call_ids)

    @never_raises
    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            state = self._root_of.get(run_id.int)
            if state is not None:
                state.open_models.pop(run_id.int, None)
                if state.trace is not None:
                    state.trace.model_ended(run_id, None, None, error=error_text(error))

    # ------------------------------------------------------------------ tools

    @never_raises
    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        started = time.perf_counter()
        name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
        args = args_from(input_str, inputs)
        call_id = kwargs.get("tool_call_id")
        with self._lock:
            if parent_run_id is None:  # a tool called directly: a one-call run
                state: RunCapture | None = self._open_root(
                    run_id, name=name, task=None, metadata=kwargs.get("metadata")
                )
            else:
                state = self._join(run_id, parent_run_id)
            if state is None:
                return
            state.tool_started(
                run_id.int,
                ToolCallCapture(
                    name=name,
                    args=args,
                    key=(0, 0, 0),
                    index=0,
                    started=started,
                    tool_call_id=call_id,
                    meta=effects(kwargs.get("metadata")),
                ),
            )
            if state.trace is not None:
                state.trace.tool_started(run_id, parent_run_id, name, call_id)

    @never_raises
    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        value, failed, call_id = tool_output(output)
        self._tool_done(run_id, value, failed=failed, call_id=call_id, error=None)

    @never_raises
    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        text = error_text(error)
        self._tool_done(run_id, text, failed=True, call_id=kwargs.get("tool_call_id"), error=text)

    def _tool_done(
        self, run_id: UUID, output: Any, *, failed: bool, call_id: str | None, error: str | None
    ) -> None:
        ended = time.perf_counter()
        with self._lock:
            state = self._root_of.get(run_id.int)
            call = state.open_calls.pop(run_id.int, None) if state is not None else None
            if state is None or call is None:
                return
            call.ended(output, failed=failed, ended=ended, call_id=call_id)
            if state.trace is not None:
                state.trace.tool_ended(
                    run_id, error if error is not None or not failed else str(output)
                )
        hook = self.pm.hook.soloflow_step_finished
        if hook.get_hookimpls():
            step = StepRecord(
                run_id=str(state.root_id),
                user_id=self.user_id,
                agent_id=self.agent_id,
                index=call.index,
                call=tool_call(call),
            )
            try:
                call_hook(self.pm, "soloflow_step_finished", step=step)
            except Exception:
                logger.exception("SoloFlow capture: a soloflow_step_finished plugin failed")
        if run_id == state.root_id:
            self._finish_root(run_id, error=error)

    # ------------------------------------------------------------------ the end of a root

    def _finish_root(self, root: UUID, *, error: str | None, outputs: Any = None) -> None:
        """Store the run of a root that ended: failed (``error``) or with its ``outputs``."""
        with self._lock:
            state = self._runs.pop(root.int, None)
            if state is None:
                return
            state.answer = answer_from_outputs(outputs)
            for member in state.members:
                self._root_of.pop(member, None)
        run = build_task_run(
            state, error, user_id=self.user_id, agent_id=self.agent_id, routed=routed_flow(outputs)
        )
        spans = finished_trace(state, run, error)
        if run.task:
            run.classification = classify(self.pm, run.task)
        self._write(run, spans=spans)

    def _write(self, run: TaskRun, *, spans: Sequence[Span] = ()) -> bool:
        """Store ``run`` with its ``spans`` (one transaction) on the writer thread, waiting at
        most ``write_timeout``; a run not stored by then is spilled (a write still under way may
        finish later: writing back skips a run already stored). A trace the store refuses is
        logged, never spilled, and never fails the run's write."""
        job = functools.partial(self._ledger.store_run, run, spans)
        try:
            fresh = self._ledger.call(job, self.write_timeout)
        except FutureTimeout:
            self._spill(run, f"the store did not answer within {self.write_timeout:g} s")
            return False
        except Exception as exc:
            self._spill(run, error_text(exc))
            return False
        self._written(run, fresh)
        return True

    def _spill(self, run: TaskRun, why: str) -> None:
        where = self.spill_path
        refused = (
            "no spill file" if where is None else spill_one(where, run, self.spill_limit_bytes)
        )
        with self._lock:  # in memory either way: stored as soon as the store answers again
            let_go = self.unsaved[: max(0, len(self.unsaved) - (MAX_UNSAVED - 1))]
            self.unsaved = [*self.unsaved[len(let_go) :], run]
            lost = [r for r in let_go if id(r) in self._memory_only]
            self._memory_only -= {id(r) for r in let_go}
            if refused is not None:
                self._memory_only.add(id(run))
            self._runs_spilled += refused is None
            self._runs_dropped += refused is not None
        report_spilled(run, why=why, refused=refused, where=where, report=self._ledger.report)
        report_let_go(let_go, lost=lost, limit=MAX_UNSAVED)

    def _written_all(self, runs: list[TaskRun]) -> None:
        for run in runs:
            self._written(run, True)

    def _written(self, run: TaskRun, fresh: bool) -> None:
        if not fresh:
            logger.warning("SoloFlow capture: run %s was already stored", run.run_id)
        with self._lock:
            self.last_run = run
            self.runs_written += int(fresh)
        after_written(self.pm, self.watcher, run)
