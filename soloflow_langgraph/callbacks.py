"""Capture: LangChain callback events → one ``TaskRun`` per top-level invocation.

Attach :class:`SoloFlowCallbackHandler` to any runnable (``config={"callbacks": [handler]}``).
Each root run (``parent_run_id is None``) becomes one task run: its task text, every tool
call, every model call's token usage. Everything stays in memory while the run goes on; when
the root ends, the run is written with one ``Store.add_run`` call before ``invoke`` /
``ainvoke`` returns, so a process that exits right after still has it.

The handler never breaks the agent: every callback catches and logs its own errors, and a
failed write keeps the run in ``handler.unsaved`` for :meth:`SoloFlowCallbackHandler.flush`.

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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from soloflow_core.mining.watch import DetectionWatcher
from soloflow_core.models import DetectorConfig, ModelCall, StepRecord, TaskRun, ToolCall
from soloflow_core.plugins import call_hook, get_plugin_manager
from soloflow_core.store import Store

if TYPE_CHECKING:
    import pluggy
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import LLMResult

__all__ = ["SoloFlowCallbackHandler"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_NO_POSITION = 1 << 30
"""Sort position of a tool call no model asked for: after the calls a model asked for."""


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


# --------------------------------------------------------------------------- payloads


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content or None
    if isinstance(content, list):
        parts = [
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        ]
        return "".join(parts) or None
    return None


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


def _plain(value: Any) -> Any:
    """A JSON-able copy of ``value``: anything JSON cannot hold becomes its ``str``."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
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
        user_id: namespace of the runs.
        agent_id: namespace of the runs.
        plugin_manager: where ``soloflow_classify_task``, ``soloflow_step_finished`` and
            ``soloflow_run_finished`` are called; defaults to ``get_plugin_manager()``.
        detect: watch for repeated sequences as runs arrive (True, or a ``DetectorConfig``):
            an O(run length) check after each run, and a full detection on a background
            thread when a new candidate may exist; candidates are stored pending and listed
            in ``handler.watcher.proposed``.

    Attributes:
        last_run: the last task run written to the store.
        runs_written: how many task runs this handler has written.
        unsaved: runs whose write failed, kept for :meth:`flush`.
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
    ) -> None:
        self._owns_store = store is None
        self.store = store if store is not None else Store.open(database_url)
        self.user_id = user_id
        self.agent_id = agent_id
        self.pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
        self.watcher: DetectionWatcher | None = None
        if detect:
            config = detect if isinstance(detect, DetectorConfig) else None
            self.watcher = DetectionWatcher(self.store, config)
        self.last_run: TaskRun | None = None
        self.runs_written = 0
        self.unsaved: list[TaskRun] = []
        self._lock = threading.Lock()
        # Run ids as ints: a UUID hashes in Python code, its int in C (a few µs per tool call).
        self._root_of: dict[int, _Capture] = {}
        """Every run id of a root being captured → that root's capture."""
        self._runs: dict[int, _Capture] = {}
        """Root run id → its capture."""

    def flush(self) -> int:
        """Retry writing the runs in ``unsaved``; return how many are now stored."""
        with self._lock:
            pending, self.unsaved = self.unsaved, []
        return sum(1 for run in pending if self._write(run))

    def close(self) -> None:
        """Close the store if this handler opened it (from ``database_url``)."""
        if self._owns_store:
            self.store.close()

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

    def _open_root(self, run_id: UUID, name: str | None, task: str | None) -> _Capture:
        now = datetime.now(UTC)
        key = run_id.int
        state = _Capture(root_id=run_id, name=name, task=task, started_at=now, members=[key])
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
                self._open_root(run_id, name, task)
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
        state = self._model_start(serialized, run_id, parent_run_id, metadata, kwargs)
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
        self._model_start(serialized, run_id, parent_run_id, metadata, kwargs)

    def _model_start(
        self,
        serialized: dict[str, Any] | None,
        run_id: UUID,
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
                state: _Capture | None = self._open_root(run_id, name, None)
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
            call = _Call(name, args, key, index, started, call_id, meta=_effects(kwargs.get("metadata")))
            state.calls.append(call)
            state.open_calls[run_id.int] = call

    @_never_raises
    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        value, failed, call_id = _tool_output(output)
        self._tool_done(run_id, value, failed, call_id, None)

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
        self._tool_done(run_id, text, True, kwargs.get("tool_call_id"), text)

    def _tool_done(
        self, run_id: UUID, output: Any, failed: bool, call_id: str | None, error: str | None
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
        if run.task:
            run.classification = self._classify(run.task)
        self._write(run)

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
        return TaskRun(
            run_id=str(state.root_id),
            user_id=self.user_id,
            agent_id=self.agent_id,
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

    def _write(self, run: TaskRun) -> bool:
        """Store ``run`` in one transaction; on failure keep it in ``unsaved``."""
        try:
            fresh = self.store.add_run(run)
        except Exception:
            logger.exception(
                "SoloFlow capture: storing run %s failed; kept in handler.unsaved "
                "(retry with handler.flush())",
                run.run_id,
            )
            with self._lock:
                self.unsaved.append(run)
            return False
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
        return True


_EFFECT_KEYS = ("side_effects", "read_only")


def _effects(metadata: Any) -> dict[str, Any] | None:
    """What a tool's ``metadata`` says that SoloFlow keeps (LangChain hands it to
    ``on_tool_start``): its side-effect flags (e.g. ``StructuredTool(...,
    metadata={"read_only": True})``; the generaliser runs steps of read-only tools in
    parallel), and the flow a flow tool runs (``soloflow_flow``)."""
    if not isinstance(metadata, dict):
        return None
    found: dict[str, Any] = {k: metadata[k] for k in _EFFECT_KEYS if isinstance(metadata.get(k), bool)}
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
