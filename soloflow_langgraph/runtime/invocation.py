"""Invoking a flow run's graph: with ``durability="exit"`` or ``"sync"`` on a watched thread (each call's
time limit kept by the caller, a call that overruns abandoned: see
:mod:`~soloflow_langgraph.compile.run_watch`), and what is left of an invocation whose caller
was interrupted, until its run goes on. Also the config a run's graph is invoked with and the
listener that reports each finished step to the ``soloflow_step_finished`` hook.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import InvalidTransitionError, PluginError
from soloflow_core.models import FlowDefinition, FlowStep, StepRecord, ToolCall
from soloflow_core.plugins import call_hook
from soloflow_langgraph.compile.nodes import FlowContext
from soloflow_langgraph.compile.run_watch import (
    CallTimedOut,
    RunStopped,
    RunWatch,
    poll_for,
    run_watched,
)
from soloflow_langgraph.runtime.fenced_saver import WATCH_KEY

if TYPE_CHECKING:
    import pluggy
    from langchain_core.runnables import RunnableConfig

__all__ = ["CALLER_CONFIG", "STOPPING_WAIT", "Invoker", "graph_config", "step_listener"]

log = logging.getLogger(__name__)

STOPPING_WAIT = 30.0
"""Seconds ``resume``/``approve`` wait for an invocation of the same run that was
interrupted in this process to stop writing (:meth:`Invoker.await_stopped`)."""

CALLER_CONFIG: ContextVar[RunnableConfig | None] = ContextVar(
    "soloflow_caller_config", default=None
)
"""The ``config`` given to ``FlowRuntime.run``, while that run is driven."""
_PASSED_ON = ("callbacks", "tags", "metadata", "run_name")


def graph_config(run_id: str) -> dict[str, Any]:
    """The config a run's graph is invoked with: its thread, and what the caller's
    ``RunnableConfig`` says about callbacks, tags, metadata and the run's name."""
    caller = CALLER_CONFIG.get() or {}
    cfg: dict[str, Any] = {k: caller[k] for k in _PASSED_ON if caller.get(k) is not None}  # type: ignore[literal-required]
    cfg["configurable"] = {"thread_id": run_id}
    return cfg


def step_listener(
    pm: pluggy.PluginManager | None, steps: list[ToolCall], *, run_id: str, ns: dict[str, str]
) -> Callable[[FlowStep, ToolCall, int], None]:
    """A run's ``on_step``: appends each finished call to ``steps`` and reports it to the
    ``soloflow_step_finished`` hook (``ns``: its ``user_id`` and ``agent_id``). A plugin's
    error is logged, unless the plugin manager makes plugin errors fatal."""

    def on_step(step: FlowStep, call: ToolCall, index: int) -> None:
        steps.append(call)
        if pm is not None and pm.hook.soloflow_step_finished.get_hookimpls():
            try:
                call_hook(
                    pm,
                    "soloflow_step_finished",
                    step=StepRecord(run_id=run_id, index=index, call=call, source="flow", **ns),
                )
            except PluginError:  # strict mode: a plugin's failure is fatal
                raise
            except Exception:
                log.exception("a soloflow_step_finished plugin failed")

    return on_step


class Invoker:
    """Invokes run graphs for one runtime, and remembers the invocations whose caller was
    interrupted (``KeyboardInterrupt``, or :meth:`stop_all`) until their runs go on in this
    process."""

    def __init__(self, checkpointer: Any, durability: str) -> None:
        self.checkpointer, self.durability = checkpointer, durability
        self._lock = threading.Lock()
        self._stopping: dict[str, RunWatch] = {}
        self._watching: dict[str, RunWatch] = {}
        """The watched invocation going on, by run id."""
        self._stopped = False

    def invoke(
        self, flow: FlowDefinition, invoke: Any, *, payload: Any, cfg: Any, ctx: FlowContext
    ) -> Any:
        """``invoke(payload, cfg, ...)`` as the runtime's durability asks: watched with
        ``"exit"`` or ``"sync"`` and a checkpointer, else directly."""
        if self.checkpointer and self.durability in ("exit", "sync"):
            return self._watched(flow, invoke, payload=payload, cfg=cfg, ctx=ctx)
        if self.checkpointer:
            return invoke(payload, cfg, context=ctx, durability=self.durability)
        return invoke(payload, cfg, context=ctx)  # LangGraph warns about durability without one

    def _watched(
        self, flow: FlowDefinition, invoke: Any, *, payload: Any, cfg: Any, ctx: FlowContext
    ) -> Any:
        """``invoke`` on a watched thread, sync steps in line (``run_watch``); after a call
        that ran past its limit, the run goes on from its last checkpoint in a new
        invocation, whose node of that step takes the attempt as timed out.

        With ``"sync"`` the last checkpoint is the abandoned invocation's last superstep's
        (the new invocation continues it: payload None). With ``"exit"`` the abandoned
        invocation saves nothing (its config carries its watch, and the runtime's
        :class:`~soloflow_langgraph.runtime.fenced_saver.FencedSaver` drops a fenced
        invocation's writes), so the thread is as it was before it: the new invocation is
        given the same payload, and the steps the journal holds as completed are not called
        again."""
        poll = poll_for([s.timeout_seconds for s in flow.steps])
        run_id = str(ctx.run_id)
        first = payload
        at_exit = self.durability == "exit"
        while True:
            watch = ctx.watch = RunWatch(poll)
            with self._lock:
                if self._stopped:
                    raise RunStopped("stopped by its process (a server shutting down)")
                self._watching[run_id] = watch
            run_cfg = cfg
            if at_exit:
                run_cfg = {**cfg, "configurable": {**cfg["configurable"], WATCH_KEY: watch}}
            try:
                return run_watched(
                    functools.partial(
                        invoke, payload, run_cfg, context=ctx, durability=self.durability
                    ),
                    watch,
                )
            except CallTimedOut as over:
                log.info("flow run %r: %s; the run goes on without it", ctx.run_id, over)
                ctx = FlowContext(
                    journal=ctx.journal,
                    on_step=ctx.on_step,
                    run_id=ctx.run_id,
                    timed_out={over.call.step_key: over.call},
                    tracer=ctx.tracer,
                )
                payload = first if at_exit else None
            except BaseException as exc:
                if not isinstance(exc, Exception):  # the caller was interrupted: it is stopping
                    with self._lock:
                        self._stopping[run_id] = watch
                raise  # else the invocation's own failure: its thread has ended
            finally:
                with self._lock:
                    if self._watching.get(run_id) is watch:
                        del self._watching[run_id]

    def stop_all(self) -> None:
        """From another thread, for a process that is shutting down: stop every watched
        invocation going on as an interrupt of its caller would (the call in progress is
        abandoned, nothing more is written; the caller raises ``RunStopped``), and refuse
        any invocation from now on."""
        with self._lock:
            self._stopped = True
            watches = dict(self._watching)
            self._stopping.update(watches)
        for watch in watches.values():
            watch.interrupt()

    def interrupted_call(self, run_id: str) -> str | None:
        """The call in progress when an invocation of ``run_id`` was interrupted, e.g.
        ``step 'fetch' (attempt 1) calling pkg.tools:slow``; None when none was."""
        with self._lock:
            watch = self._stopping.get(run_id)
        if watch is None:
            return None
        with watch.lock:
            call = watch.current
        if call is None:
            return None
        return f"step {call.step_key!r} (attempt {call.attempt}) calling {call.where}"

    def await_stopped(self, run_id: str, wait: float = STOPPING_WAIT) -> None:
        """Before a run goes on in this process: wait until an invocation of it that was
        interrupted here can write nothing more (``RunWatch.quiet``).

        Raises:
            InvalidTransitionError: it has not stopped within ``wait`` seconds.
        """
        with self._lock:
            watch = self._stopping.get(run_id)
        if watch is None:
            return
        if not watch.quiet.wait(wait):
            raise InvalidTransitionError(
                f"flow run {run_id!r}: its interrupted invocation in this process has not stopped after "
                f"{wait:g} s (a step between calls, or a compensation, is still running); try again",
                run_id=run_id,
            )
        with self._lock:
            self._stopping.pop(run_id, None)
