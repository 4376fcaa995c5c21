"""Calling one step's executor: time limit, idempotency key, LangChain config.

Here: a call handed to a daemon thread that the step waits for at most ``timeout_seconds``
(the steps of a parallel layer, a bare ``invoke`` of a compiled flow, async executors). The
runtime's one-task supersteps call sync executors in line on the run's own watched thread
instead (:mod:`soloflow_langgraph.compile.run_watch`), which saves this hand-off.

A sync executor runs on a daemon thread that the step waits for at most
``timeout_seconds``. Python cannot stop a thread: when the limit passes the attempt fails
with :class:`StepTimeoutError` and the call runs on in the background, its result thrown
away (daemon threads don't keep the process alive). An async executor (a coroutine
function, or a LangChain tool with only a coroutine) runs in its own event loop on that
thread under ``asyncio.wait_for``, so it is cancelled at the limit.

The hand-off costs two thread wake-ups per step (figures: ``benchmarks/bench_runtime.py``).
No ``SIGALRM`` timer: a signal can land in a nested flow's bookkeeping or in LangChain's
callbacks, C code that retries on ``EINTR`` ignores it, and a bare ``except:`` swallows it —
only a thread keeps the step's time bounded.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage

from soloflow_core.errors import StepTimeoutError
from soloflow_core.flow.effects import side_effects_of

IDEMPOTENCY_ARG = "idempotency_key"
"""An executor that takes a parameter of this name receives the step's idempotency key."""


@dataclass(frozen=True, slots=True)
class ExecutorInfo:
    """How to call one executor, found once when the flow is compiled."""

    is_tool: bool
    is_async: bool
    takes_key: bool
    read_only: bool | None
    """From a tool's ``metadata`` (:func:`~soloflow_core.flow.effects.side_effects_of`); None
    when unknown."""


def inspect_executor(executor: Any) -> ExecutorInfo:
    is_tool = hasattr(executor, "invoke") and not isinstance(executor, type)
    if is_tool:
        func = getattr(executor, "func", None)
        coro = getattr(executor, "coroutine", None)
        is_async = func is None and coro is not None
        takes_key = IDEMPOTENCY_ARG in _tool_params(executor)
        effects = side_effects_of(getattr(executor, "metadata", None))
        return ExecutorInfo(
            is_tool=True,
            is_async=is_async,
            takes_key=takes_key,
            read_only=None if effects is None else not effects,
        )
    target = executor if inspect.isroutine(executor) else type(executor).__call__
    try:
        params = inspect.signature(executor).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    # Only a parameter of that name: a generic ``**kwargs`` forwarder must not get it.
    return ExecutorInfo(
        is_tool=False,
        is_async=inspect.iscoroutinefunction(target),
        takes_key=IDEMPOTENCY_ARG in params,
        read_only=None,
    )


def _tool_params(tool: Any) -> set[str]:
    names: set[str] = set()
    for attr in ("func", "coroutine"):
        fn = getattr(tool, attr, None)
        if fn is not None:
            try:
                names |= set(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                pass
    try:
        names |= set(getattr(tool, "args", {}) or {})
    except Exception:  # a tool whose schema cannot be built: no key
        pass
    return names


def unwrap_output(out: Any) -> Any:
    """A tool's ``ToolMessage`` (a tool called with a tool call) as its content; else ``out``."""
    if isinstance(out, ToolMessage):
        return out.content
    return out


def call_executor(executor: Any, info: ExecutorInfo, kwargs: dict[str, Any]) -> Any:
    if info.is_tool:
        if info.is_async:
            return executor.ainvoke(kwargs)
        return executor.invoke(kwargs)
    return executor(**kwargs)


def timed_out(where: str, timeout: float, *, cancelled: bool) -> StepTimeoutError:
    """The error of a call that ran past ``timeout`` seconds: ``cancelled`` (async) or left
    running in the background (sync)."""
    return StepTimeoutError(
        f"{where}: no result after {timeout:g} s (timeout_seconds); "
        + (
            "the call was cancelled"
            if cancelled
            else "the call's thread runs on in the background and its result will be ignored"
        )
    )


def call_with_limit(
    executor: Any,
    info: ExecutorInfo,
    kwargs: dict[str, Any],
    *,
    timeout: float,
    key: str | None,
    where: str,
) -> Any:
    """Call ``executor`` with ``kwargs`` (plus the idempotency key when it takes one), at
    most ``timeout`` seconds.

    Raises:
        StepTimeoutError: the call ran over.
        Exception: whatever the executor raised.
    """
    if key is not None and info.takes_key:
        kwargs = {**kwargs, IDEMPOTENCY_ARG: key}
    box: dict[str, Any] = {}
    done = threading.Event()
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            if info.is_async:
                box["out"] = asyncio.run(
                    asyncio.wait_for(_awaitable(executor, info, kwargs), timeout)
                )
            else:
                box["out"] = call_executor(executor, info, kwargs)
        except BaseException as exc:  # handed to the waiting step
            box["exc"] = exc
        finally:
            done.set()

    CALL_POOL.submit(lambda: ctx.run(work))
    # An async call is cancelled by its own wait_for; the grace lets that finish first.
    if not done.wait(timeout + (1.0 if info.is_async else 0.0)):
        raise timed_out(where, timeout, cancelled=info.is_async)
    if "exc" in box:
        exc = box["exc"]
        if isinstance(exc, TimeoutError) and info.is_async:
            raise timed_out(where, timeout, cancelled=True) from exc
        raise exc
    return unwrap_output(box.get("out"))


class _Worker:
    """A daemon thread that runs one call at a time, then offers itself back to the pool."""

    def __init__(self, pool: _DaemonPool) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.pool = pool
        threading.Thread(target=self._loop, name="soloflow-step", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.jobs.get()()
            if not self.pool.release(self):
                return


class _DaemonPool:
    """Daemon worker threads for step calls. Not ``ThreadPoolExecutor``: its threads are
    joined at interpreter exit, so one hung tool would keep the process alive; and a
    thread per call costs more than the step's bookkeeping. A worker stuck in a call that
    timed out is simply not reused; idle workers beyond ``max_idle`` end."""

    def __init__(self, max_idle: int = 32) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        (worker or _Worker(self)).jobs.put(job)

    def release(self, worker: _Worker) -> bool:
        with self._lock:
            if len(self._idle) >= self._max_idle:
                return False
            self._idle.append(worker)
            return True


CALL_POOL = _DaemonPool()


async def _awaitable(executor: Any, info: ExecutorInfo, kwargs: dict[str, Any]) -> Any:
    out = call_executor(executor, info, kwargs)
    if inspect.isawaitable(out):
        out = await out
    return out
