"""Capture: LangChain callback events → one ``TaskRun`` per top-level invocation.

Attach :class:`SoloFlowCallbackHandler` to any runnable (``config={"callbacks": [handler]}``).
Each root run (``parent_run_id is None``) becomes one task run: its task text, every tool
call, every model call's token usage. Everything stays in memory while the run goes on; when
the root ends, the run is written with one ``Store.add_run`` call before ``invoke`` /
``ainvoke`` returns, so a process that exits right after still has it.

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

import ast
import functools
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from soloflow_core.ledger.spill import (
    SPILL_LIMIT_BYTES,
    append_spill,
    write_back_spill,
)
from soloflow_core.mining.watch import DetectionWatcher
from soloflow_core.models import DetectorConfig, ModelCall, StepRecord, TaskRun, ToolCall
from soloflow_core.plugins import call_hook, get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.store.writer import MAX_JSON_DEPTH, cut_value
from soloflow_core.tracing import PriceTable, Span
from soloflow_langgraph._ledger_link import LedgerLink
from soloflow_langgraph._messages import content_text
from soloflow_langgraph.agent_trace import AgentTrace

if TYPE_CHECKING:
    import pluggy
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import LLMResult

    from soloflow_core.models import ModelPrice

__all__ = ["CaptureHealth", "SoloFlowCallbackHandler"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_NO_POSITION = 1 << 30
"""Sort position of a tool call no model asked for: after the calls a model asked for."""
WRITE_TIMEOUT_S = 2.0
"""How long the agent waits, at most, for its run to be stored before it is spilled."""
MAX_UNSAVED = 1000
"""How many unstored runs ``handler.unsaved`` keeps in memory (all are in the spill file)."""


@dataclass(frozen=True, slots=True)
class CaptureHealth:
    """How a :class:`SoloFlowCallbackHandler` is doing: ``handler.health()``."""

    ok: bool
    """True when the last write reached the store and nothing is waiting to be written back."""
    problem: str | None
    """What is wrong (the last problem seen), None when ``ok``."""
    runs_written: int
    """Runs this handler stored (its spilled runs once written back included)."""
    runs_spilled: int
    """Runs this handler could not store in time and appended to the spill file."""
    runs_dropped: int
    """Runs the spill file could not take (full, or not writable; each logged as an error):
    kept in ``handler.unsaved`` only, lost if the process ends before they are stored."""
    spill_path: str | None
    """The spill file (JSON lines, the ledger format), None for an in-memory store."""


# --------------------------------------------------------------------------- in-memory records


@dataclass(slots=True)
class _Call:
    name: str
    args: dict[str, Any]
    key: tuple[int, int, int]
    """(model turn, position among that turn's tool calls, start order): the stored order."""
    index: int
    started: float
    tool_call_id: str | None
    output: Any = None
    error: bool | None = None
    duration_ms: float | None = None
    meta: dict[str, Any] | None = None
    """What the tool's metadata says about its side effects (``side_effects`` /
    ``read_only``) and the flow it runs (``soloflow_flow``), when it says anything."""


@dataclass(slots=True)
class _Capture:
    """Everything known so far about one root run."""

    root_id: UUID
    name: str | None
    task: str | None
    started_at: datetime
    members: list[int]
    """Every run id mapped to this root, removed from the map when the root ends."""
    answer: str | None = None
    """The text of the root's last AI message without tool calls (its final answer)."""
    calls: list[_Call] = field(default_factory=list)
    open_calls: dict[int, _Call] = field(default_factory=dict)
    open_models: dict[int, tuple[float, str | None]] = field(default_factory=dict)
    models: list[tuple[str | None, dict[str, Any] | None, float, int]] = field(default_factory=list)
    """(model name, usage, duration ms, tool calls requested) per finished model call."""
    requested: dict[str, tuple[int, int]] = field(default_factory=dict)
    """tool_call_id → (model turn, position) of each tool call a model asked for."""
    turn_base: list[int] = field(default_factory=lambda: [0])
    """turn_base[t]: how many tool calls had started when model turn t ended."""
    namespace: tuple[str | None, str | None] = (None, None)
    """(user, agent) named by the invocation's ``metadata``; None: the handler's own."""
    trace: AgentTrace | None = None
    """The run's spans (``soloflow runs trace``), stored with it."""


# --------------------------------------------------------------------------- payloads


def _text(content: Any) -> str | None:
    return content_text(content) or None


def _human_text(message: Any) -> str | None:
    """The text of ``message`` if it is a human message in any of LangChain's input forms."""
    if isinstance(message, str):
        return message or None
    if isinstance(message, dict):
        if message.get("role") in ("user", "human") or message.get("type") == "human":
            return _text(message.get("content"))
        return None
    if isinstance(message, tuple | list) and len(message) == 2:
        return _text(message[1]) if message[0] in ("user", "human") else None
    if getattr(message, "type", None) == "human":
        return _text(getattr(message, "content", None))
    return None


def _first_human(messages: Any) -> str | None:
    if isinstance(messages, str) or not isinstance(messages, list | tuple):
        return _human_text(messages)
    for m in messages:
        text = _human_text(m)
        if text is not None:
            return text
    return None


def _answer_from_outputs(outputs: Any) -> str | None:
    """The final answer of a root's output: its last message, when it is an AI message that
    asks for no tool (a messages state; a bare string output too)."""
    if isinstance(outputs, str):
        return outputs or None
    messages = outputs.get("messages") if isinstance(outputs, dict) else None
    if not isinstance(messages, list | tuple) or not messages:
        return None
    last = messages[-1]
    if getattr(last, "type", None) != "ai" or getattr(last, "tool_calls", None):
        return None
    return _text(getattr(last, "content", None))


def _task_from_inputs(inputs: Any) -> str | None:
    """The first human message of a root's input (a messages state, a string, ``{"input"}``)."""
    if isinstance(inputs, dict):
        if "messages" in inputs:
            return _first_human(inputs["messages"])
        value = inputs.get("input")
        return value if isinstance(value, str) and value else None
    if isinstance(inputs, str | list | tuple):
        return _first_human(inputs)
    return None


def _args_from(input_str: str, inputs: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's arguments: ``inputs`` when given (``input_str`` is only ``str(dict)``)."""
    if isinstance(inputs, dict):
        return dict(inputs)
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(input_str)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        break
    return {"input": input_str}


def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON-able copy of ``value``: anything JSON cannot hold becomes its ``str``; arrays
    and objects nested deeper than the store keeps are cut (``docs/ledger.md``, Limits)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict | list | tuple) and depth >= MAX_JSON_DEPTH:
        return cut_value(value)
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return str(value)


def _tool_output(output: Any) -> tuple[Any, bool, str | None]:
    """(output, error reported, tool_call_id): inside agents ``output`` is a ToolMessage."""
    if getattr(output, "type", None) == "tool" and hasattr(output, "tool_call_id"):
        return output.content, getattr(output, "status", None) == "error", output.tool_call_id
    return output, False, None


def _model_result(response: LLMResult) -> tuple[dict[str, Any] | None, list[str | None]]:
    """(token usage, ids of the tool calls requested) of a model response."""
    gens = response.generations[0] if response.generations else []
    message = getattr(gens[0], "message", None) if gens else None
    usage = getattr(message, "usage_metadata", None)
    calls = [c.get("id") for c in getattr(message, "tool_calls", None) or ()]
    if usage is None and isinstance(response.llm_output, dict):  # completion-style LLMs
        legacy = response.llm_output.get("token_usage") or response.llm_output.get("usage")
        if isinstance(legacy, dict):
            inp = int(legacy.get("prompt_tokens") or legacy.get("input_tokens") or 0)
            out = int(legacy.get("completion_tokens") or legacy.get("output_tokens") or 0)
            total = int(legacy.get("total_tokens") or inp + out)
            usage = {"input_tokens": inp, "output_tokens": out, "total_tokens": total}
    return usage, calls


def _response_model(response: LLMResult) -> str | None:
    """The model that answered, as the provider names it (``response_metadata``)."""
    gens = response.generations[0] if response.generations else []
    meta = getattr(getattr(gens[0], "message", None), "response_metadata", None) if gens else None
    if not isinstance(meta, dict):
        return None
    name = meta.get("model_name") or meta.get("model")
    return name if isinstance(name, str) and name else None


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _never_raises(
    method: Callable[Concatenate[SoloFlowCallbackHandler, _P], None],
) -> Callable[Concatenate[SoloFlowCallbackHandler, _P], None]:
    """Log any error of a callback and return: capture must never break the agent."""

    @functools.wraps(method)
    def guarded(self: SoloFlowCallbackHandler, *args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception:
            logger.exception("SoloFlow capture: %s failed; the agent goes on", method.__name__)

    return guarded


# --------------------------------------------------------------------------- the handler


class SoloFlowCallbackHandler(BaseCallbackHandler):
    """Record each top-level invocation as one ``TaskRun`` in the SoloFlow store.

    A root chain (an agent's ``invoke``/``ainvoke``/``stream``) or a tool called directly is
    a run; a chat model called on its own is not. Tool calls are stored in call order, except
    that parallel calls of one model turn keep the order the model asked for them in. Under
    ``ainvoke`` the callbacks run inline on the event loop (``run_inline``), so the run's
    write at the end (one transaction, about a millisecond or two on SQLite) does too.

    Args:
        database_url: where to store runs (see ``resolve_database_url``); ignored when
            ``store`` is given. With neither, the embedded default database.
        store: an open :class:`~soloflow_core.store.Store` to write to.
        user_id: namespace of the runs, unless an invocation's ``metadata`` names another
            (``config={"metadata": {"soloflow_user_id": ..., "soloflow_agent_id": ...}}``):
            one handler can serve a multi-tenant app.
        agent_id: namespace of the runs (the same ``metadata`` override).
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
        self.write_timeout = write_timeout
        self.spill_limit_bytes = spill_limit_bytes
        self._lock = threading.Lock()
        # Run ids as ints: a UUID hashes in Python code, its int in C.
        self._root_of: dict[int, _Capture] = {}
        """Every run id of a root being captured → that root's capture."""
        self._runs: dict[int, _Capture] = {}
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
        problem = self._ledger.problem
        return CaptureHealth(
            ok=problem is None and not self.unsaved,
            problem=problem
            or (f"{len(self.unsaved)} runs wait in the spill file" if self.unsaved else None),
            runs_written=self.runs_written,
            runs_spilled=self._runs_spilled,
            runs_dropped=self._runs_dropped,
            spill_path=str(self.spill_path) if self.spill_path is not None else None,
        )

    def flush(self) -> int:
        """Store the runs in ``unsaved`` now, then write back the whole spill file (runs of
        earlier processes too); return how many of ``unsaved`` are now stored."""
        stored = self._store_unsaved(
            lambda run: self._ledger.call(
                functools.partial(self._ledger.store_run, run), self.write_timeout
            )
        )
        if not self.unsaved and self.spill_path is not None:
            try:
                self._ledger.call(self._write_back, self.write_timeout)
            except Exception as exc:
                self._ledger.report("write-back", f"writing back the spill file failed: {exc}")
        return stored

    def _store_unsaved(self, store_run: Callable[[TaskRun], bool]) -> int:
        """Store the runs of ``unsaved`` with ``store_run``; return how many now are."""
        with self._lock:
            pending = list(self.unsaved)
        stored = 0
        for run in pending:
            try:
                store_run(run)  # False: a write that timed out went through after all
            except Exception as exc:
                self._ledger.report("flush", f"storing run {run.run_id} failed: {_error_text(exc)}")
                continue
            with self._lock:  # flush and a write-back may both have stored it: count it once
                mine = any(r is run for r in self.unsaved)
                self.unsaved = [r for r in self.unsaved if r is not run]
            if mine:
                self._written(run, True)
            stored += 1
        return stored

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
        if self.spill_path is not None and (self.unsaved or _has_content(self.spill_path)):
            self._ledger.submit(self._write_back)

    def _write_back(self) -> int:
        """On the writer thread: store ``unsaved``, then write back the spill file."""
        store = self._ledger.connect()
        assert self.spill_path is not None
        self._store_unsaved(self._ledger.store_run)
        if self.unsaved:
            return 0
        report = write_back_spill(store, self.spill_path)
        if report.runs_written or report.errors:
            logger.warning(
                "SoloFlow capture: wrote back %d runs from the spill file %s (%d already stored, "
                "%d bad lines%s)",
                report.runs_written,
                self.spill_path,
                report.runs_skipped_existing,
                len(report.errors),
                "".join(f"; {e}" for e in report.errors[:5]),
            )
        return report.runs_written

    @property
    def in_flight(self) -> int:
        """How many root runs are being captured right now."""
        return len(self._runs)

    # ------------------------------------------------------------------ the run tree
    # Both must be called under ``self._lock``.

    def _join(self, run_id: UUID, parent_run_id: UUID | None) -> _Capture | None:
        """Map ``run_id`` to its parent's root; None when that root is not being captured."""
        state = self._root_of.get(parent_run_id.int) if parent_run_id is not None else None
        if state is not None:
            self._root_of[run_id.int] = state
            state.members.append(run_id.int)
        return state

    def _open_root(
        self, run_id: UUID, *, name: str | None, task: str | None, metadata: Any = None
    ) -> _Capture:
        now = datetime.now(UTC)
        key = run_id.int
        state = _Capture(
            root_id=run_id,
            name=name,
            task=task,
            started_at=now,
            members=[key],
            namespace=_namespace_of(metadata),
        )
        if self.trace:
            state.trace = AgentTrace(run_id, name, prices=self.prices, plugin_manager=self.pm)
        self._root_of[key] = state
        self._runs[key] = state
        return state

    # ------------------------------------------------------------------ chains

    @_never_raises
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
            task = _task_from_inputs(inputs)
            with self._lock:
                self._open_root(run_id, name=name, task=task, metadata=kwargs.get("metadata"))
        else:
            with self._lock:
                self._join(run_id, parent_run_id)

    @_never_raises
    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if parent_run_id is None:
            self._finish_root(run_id, error=None, answer=_answer_from_outputs(outputs))

    @_never_raises
    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            self._finish_root(run_id, error=_error_text(error))

    @_never_raises
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

    @_never_raises
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
            task = _first_human(list(messages[0]))
            with self._lock:
                state.task = state.task or task

    @_never_raises
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
    ) -> _Capture | None:
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

    @_never_raises
    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        ended = time.perf_counter()
        usage, call_ids = _model_result(response)
        with self._lock:
            state = self._root_of.get(run_id.int)
            if state is None:
                return
            started, model = state.open_models.pop(run_id.int, (ended, None))
            if state.trace is not None:
                state.trace.model_ended(run_id, usage, _response_model(response))
            state.models.append((model, usage, (ended - started) * 1000, len(call_ids)))
            turn = len(state.turn_base)
            state.turn_base.append(len(state.calls))
            for pos, call_id in enumerate(call_ids):
                if call_id:
                    state.requested[call_id] = (turn, pos)

    @_never_raises
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
                    state.trace.model_ended(run_id, None, None, error=_error_text(error))

    # ------------------------------------------------------------------ tools

    @_never_raises
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
        args = _args_from(input_str, inputs)
        call_id = kwargs.get("tool_call_id")
        with self._lock:
            if parent_run_id is None:  # a tool called directly: a one-call run
                state: _Capture | None = self._open_root(
                    run_id, name=name, task=None, metadata=kwargs.get("metadata")
                )
            else:
                state = self._join(run_id, parent_run_id)
            if state is None:
                return
            seq = len(state.calls)
            # Parallel calls start in any order on worker threads; store them in the order
            # the model asked for them, so that the same behaviour gives the same sequence.
            placed = state.requested.get(call_id) if call_id else None
            if placed is None:
                key, index = (len(state.turn_base) - 1, _NO_POSITION, seq), seq
            else:
                key, index = (*placed, seq), state.turn_base[placed[0]] + placed[1]
            call = _Call(
                name=name,
                args=args,
                key=key,
                index=index,
                started=started,
                tool_call_id=call_id,
                meta=_effects(kwargs.get("metadata")),
            )
            state.calls.append(call)
            state.open_calls[run_id.int] = call
            if state.trace is not None:
                state.trace.tool_started(run_id, parent_run_id, name, call_id)

    @_never_raises
    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        value, failed, call_id = _tool_output(output)
        self._tool_done(run_id, value, failed=failed, call_id=call_id, error=None)

    @_never_raises
    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        text = _error_text(error)
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
            call.output = output
            call.error = failed
            call.duration_ms = (ended - call.started) * 1000
            call.tool_call_id = call.tool_call_id or call_id
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
                call=_tool_call(call),
            )
            try:
                call_hook(self.pm, "soloflow_step_finished", step=step)
            except Exception:
                logger.exception("SoloFlow capture: a soloflow_step_finished plugin failed")
        if run_id == state.root_id:
            self._finish_root(run_id, error=error)

    # ------------------------------------------------------------------ the end of a root

    def _finish_root(self, root: UUID, *, error: str | None, answer: str | None = None) -> None:
        with self._lock:
            state = self._runs.pop(root.int, None)
            if state is None:
                return
            state.answer = answer
            for member in state.members:
                self._root_of.pop(member, None)
        run = self._build_run(state, error)
        spans = state.trace.finish(error) if state.trace is not None else []
        if state.trace is not None:
            run.cost = state.trace.run_cost
        if run.task:
            run.classification = self._classify(run.task)
        self._write(run, spans=spans)

    def _build_run(self, state: _Capture, error: str | None) -> TaskRun:
        models: list[ModelCall] = []
        tokens: int | None = None
        for name, usage, ms, requested in state.models:
            u = usage or {}
            total = int(u.get("total_tokens") or 0)
            if usage:
                tokens = (tokens or 0) + total
            models.append(
                ModelCall(
                    model=name,
                    input_tokens=int(u.get("input_tokens") or 0),
                    output_tokens=int(u.get("output_tokens") or 0),
                    total_tokens=total,
                    duration_ms=ms,
                    tool_calls_requested=requested,
                )
            )
        meta: dict[str, Any] = {"agent_name": state.name}
        if error is not None:
            meta["error"] = error
        user_id, agent_id = state.namespace
        return TaskRun(
            run_id=str(state.root_id),
            user_id=user_id or self.user_id,
            agent_id=agent_id or self.agent_id,
            task=state.task,
            answer=state.answer,
            success=error is None,
            tokens=tokens,
            tool_calls=[_tool_call(c) for c in sorted(state.calls, key=lambda c: c.key)],
            model_calls=models,
            started_at=state.started_at,
            ended_at=datetime.now(UTC),
            meta=meta,
        )

    def _classify(self, task: str) -> str | None:
        hook = self.pm.hook.soloflow_classify_task
        if not hook.get_hookimpls():
            return None
        try:
            label = call_hook(self.pm, "soloflow_classify_task", task=task)
        except Exception:
            logger.exception("SoloFlow capture: a soloflow_classify_task plugin failed")
            return None
        return label if isinstance(label, str) else None

    def _write(self, run: TaskRun, *, spans: Sequence[Span] = ()) -> bool:
        """Store ``run`` and then its ``spans`` in one job of the writer thread, waiting at most
        ``write_timeout``; a run not stored by then is spilled (a write still under way may
        finish later: writing back skips a run already stored). A trace that cannot be
        stored is logged, never spilled, and never fails the run's write."""

        def job() -> bool:
            fresh = self._ledger.store_run(run)
            if spans:
                try:
                    self._ledger.connect().add_spans(
                        run.run_id, spans, user_id=run.user_id, agent_id=run.agent_id
                    )
                except Exception:
                    logger.exception(
                        "SoloFlow capture: storing the trace of run %s failed", run.run_id
                    )
            return fresh

        try:
            fresh = self._ledger.call(job, self.write_timeout)
        except FutureTimeout:
            self._spill(run, f"the store did not answer within {self.write_timeout:g} s")
            return False
        except Exception as exc:
            self._spill(run, _error_text(exc))
            return False
        self._written(run, fresh)
        return True

    def _spill(self, run: TaskRun, why: str) -> None:
        where = self.spill_path
        kept = 0
        if where is not None:
            try:
                kept = append_spill(where, [run], limit_bytes=self.spill_limit_bytes)
            except OSError as exc:
                why += f"; the spill file {where} cannot be written ({exc.strerror})"
            else:
                if not kept:
                    why += f"; the spill file {where} is full ({self.spill_limit_bytes:,} bytes)"
        with self._lock:  # in memory either way: stored as soon as the store answers again
            self.unsaved = [*self.unsaved[-(MAX_UNSAVED - 1) :], run]
            if kept:
                self._runs_spilled += 1
            else:
                self._runs_dropped += 1
        if kept:
            self._ledger.report(
                "spill",
                f"storing run {run.run_id} failed: {why}; kept in the "
                f"spill file {where} and handler.unsaved (handler.flush(), or "
                f"`soloflow ingest --spill {where}`, writes it back)",
            )
        else:
            logger.error(
                "SoloFlow capture: run %s is only in memory (handler.unsaved), LOST if the "
                "process ends before the store answers: %s",
                run.run_id,
                why,
            )

    def _written(self, run: TaskRun, fresh: bool) -> None:
        if not fresh:
            logger.warning("SoloFlow capture: run %s was already stored", run.run_id)
        with self._lock:
            self.last_run = run
            self.runs_written += int(fresh)
        if self.watcher is not None:
            try:
                self.watcher.observe(run)
            except Exception:
                logger.exception("SoloFlow capture: incremental detection failed")
        hook = self.pm.hook.soloflow_run_finished
        if hook.get_hookimpls():
            try:
                call_hook(self.pm, "soloflow_run_finished", run=run)
            except Exception:
                logger.exception("SoloFlow capture: a soloflow_run_finished plugin failed")


def _has_content(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


_EFFECT_KEYS = ("side_effects", "read_only")
USER_KEY, AGENT_KEY = "soloflow_user_id", "soloflow_agent_id"
"""The keys of an invocation's ``metadata`` naming its namespace (one handler, many users)."""


def _namespace_of(metadata: Any) -> tuple[str | None, str | None]:
    """(user, agent) from an invocation's ``config["metadata"]``; None where it names none."""
    if not isinstance(metadata, dict):
        return None, None
    user, agent = metadata.get(USER_KEY), metadata.get(AGENT_KEY)
    return (
        user if isinstance(user, str) and user else None,
        agent if isinstance(agent, str) and agent else None,
    )


def _effects(metadata: Any) -> dict[str, Any] | None:
    """What a tool's ``metadata`` says that SoloFlow keeps (LangChain hands it to
    ``on_tool_start``): its side-effect flags (e.g. ``StructuredTool(...,
    metadata={"read_only": True})``; the generaliser runs steps of read-only tools in
    parallel), and the flow a flow tool runs (``soloflow_flow``)."""
    if not isinstance(metadata, dict):
        return None
    found: dict[str, Any] = {
        k: metadata[k] for k in _EFFECT_KEYS if isinstance(metadata.get(k), bool)
    }
    if isinstance(metadata.get("soloflow_flow"), str):
        found["soloflow_flow"] = metadata["soloflow_flow"]
    return found or None


def _tool_call(call: _Call) -> ToolCall:
    return ToolCall(
        name=call.name,
        args=_plain(call.args),
        output=_plain(call.output),
        error=call.error,
        duration_ms=call.duration_ms,
        tool_call_id=call.tool_call_id,
        meta=call.meta or {},
    )
