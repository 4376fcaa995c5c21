"""Calling one step's executor: time limit, idempotency key, LangChain config.

A sync executor's time limit (``timeout_seconds``) is kept in one of two ways:

* **interrupted** (on the main thread, where a graph run by ``invoke`` runs its steps one at
  a time): the call runs in line under a ``SIGALRM`` timer whose handler raises in the
  call when the limit passes, so the call stops there — as an async call is cancelled. A
  call blocked in a system call (``sleep``, a socket, a lock) is interrupted at once; one
  busy inside C code that does not return to Python is interrupted when it does. The
  exception is a ``BaseException`` (like ``KeyboardInterrupt``), so a tool's ``except
  Exception`` does not swallow it.
* **on a daemon thread** (everywhere else: parallel steps, a graph run from another thread,
  a process whose ``SIGALRM`` or real-time timer is in use, a platform without ``setitimer``,
  and executors that opt out — see :data:`THREAD_TIMEOUT`): the step waits for the thread
  at most ``timeout_seconds``. Python cannot stop a thread: when the limit passes the
  attempt fails and the call runs on in the background, its result thrown away (daemon
  threads don't keep the process alive).

Either way the attempt fails with :class:`StepTimeoutError`. The in-line path costs a few
microseconds; handing a call to a thread and back costs ~75 µs on a 2-core VM (two
cross-CPU wake-ups), measured in ``benchmarks/bench_runtime.py``. An async executor (a
coroutine function, or a LangChain tool with only a coroutine) runs in its own event loop
on a thread under ``asyncio.wait_for``, so it is cancelled at the limit.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import queue
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from soloflow_core.errors import StepTimeoutError

IDEMPOTENCY_ARG = "idempotency_key"
"""An executor that takes a parameter of this name receives the step's idempotency key."""

THREAD_TIMEOUT = "soloflow_timeout_in_thread"
"""An executor that must never be interrupted in line (it may block inside C code that does
not return to Python, or must not see an exception raised mid-call) says so with this key
set true in a LangChain tool's ``metadata``, or this attribute set true on a callable: its
time limit is then always kept by waiting for it on a daemon thread."""


@dataclass(frozen=True, slots=True)
class ExecutorInfo:
    """How to call one executor, found once when the flow is compiled."""

    is_tool: bool
    is_async: bool
    takes_key: bool
    read_only: bool | None
    """From a tool's ``metadata`` (``read_only`` / ``side_effects``); None when unknown."""
    in_thread: bool = False
    """The executor opted out of the in-line interrupt (:data:`THREAD_TIMEOUT`)."""


def inspect_executor(executor: Any) -> ExecutorInfo:
    is_tool = hasattr(executor, "invoke") and not isinstance(executor, type)
    if is_tool:
        func = getattr(executor, "func", None)
        coro = getattr(executor, "coroutine", None)
        is_async = func is None and coro is not None
        takes_key = IDEMPOTENCY_ARG in _tool_params(executor)
        meta = getattr(executor, "metadata", None) or {}
        read_only: bool | None = None
        if isinstance(meta, dict):
            if meta.get("read_only") is not None:
                read_only = bool(meta["read_only"])
            elif meta.get("side_effects") is not None:
                read_only = not bool(meta["side_effects"])
        in_thread = bool(isinstance(meta, dict) and meta.get(THREAD_TIMEOUT))
        return ExecutorInfo(True, is_async, takes_key, read_only, in_thread)
    target = executor if inspect.isroutine(executor) else type(executor).__call__
    try:
        params = inspect.signature(executor).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    # Only a parameter of that name: a generic ``**kwargs`` forwarder must not get it.
    return ExecutorInfo(False, inspect.iscoroutinefunction(target), IDEMPOTENCY_ARG in params, None,
                        bool(getattr(executor, THREAD_TIMEOUT, False)))


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


def _unwrap(out: Any) -> Any:
    content = getattr(out, "content", None)
    if content is not None and type(out).__name__ == "ToolMessage":
        return content
    return out


def _call(executor: Any, info: ExecutorInfo, kwargs: dict[str, Any]) -> Any:
    if info.is_tool:
        if info.is_async:
            return executor.ainvoke(kwargs)
        return executor.invoke(kwargs)
    return executor(**kwargs)


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
    if not info.is_async and not info.in_thread and _can_interrupt():
        return _call_interrupted(executor, info, kwargs, timeout, where)
    box: dict[str, Any] = {}
    done = threading.Event()
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            if info.is_async:
                box["out"] = asyncio.run(asyncio.wait_for(_awaitable(executor, info, kwargs), timeout))
            else:
                box["out"] = _call(executor, info, kwargs)
        except BaseException as exc:  # handed to the waiting step
            box["exc"] = exc
        finally:
            done.set()

    _POOL.submit(lambda: ctx.run(work))
    # An async call is cancelled by its own wait_for; the grace lets that finish first.
    if not done.wait(timeout + (1.0 if info.is_async else 0.0)):
        raise StepTimeoutError(
            f"{where}: no result after {timeout:g} s (timeout_seconds); "
            + ("the call was cancelled" if info.is_async else
               "the call's thread runs on in the background and its result will be ignored")
        )
    if "exc" in box:
        exc = box["exc"]
        if isinstance(exc, TimeoutError) and info.is_async:
            raise StepTimeoutError(f"{where}: no result after {timeout:g} s (timeout_seconds); "
                                   "the call was cancelled") from exc
        raise exc
    return _unwrap(box.get("out"))


class _Overrun(BaseException):
    """Raised in a call by the ``SIGALRM`` handler at its limit. A ``BaseException``, so a
    tool's ``except Exception`` lets it through."""


_ALARM: list[bool] = [False]
"""Whether a call is under the timer now (the handler raises only then: an alarm that
arrives after the call returned, before the timer is cleared, is ignored)."""


def _on_alarm(signum: int, frame: Any) -> None:
    if _ALARM[0]:
        _ALARM[0] = False
        raise _Overrun()


_HAS_TIMER = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")


def _can_interrupt() -> bool:
    """On the main thread, with ``SIGALRM`` and the real-time timer free (nobody else's
    handler installed, no timer pending: ours is not nested in another flow's step)."""
    return (
        _HAS_TIMER
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0
    )


def _call_interrupted(executor: Any, info: ExecutorInfo, kwargs: dict[str, Any], timeout: float,
                      where: str) -> Any:
    """The call in line, interrupted at ``timeout`` seconds by ``SIGALRM``."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        try:
            _ALARM[0] = True
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                out = _call(executor, info, kwargs)
            finally:
                _ALARM[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0.0)
        finally:
            signal.signal(signal.SIGALRM, previous)
    except _Overrun:
        raise StepTimeoutError(
            f"{where}: no result after {timeout:g} s (timeout_seconds); the call was interrupted"
        ) from None
    return _unwrap(out)


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


_POOL = _DaemonPool()


async def _awaitable(executor: Any, info: ExecutorInfo, kwargs: dict[str, Any]) -> Any:
    out = _call(executor, info, kwargs)
    if inspect.isawaitable(out):
        out = await out
    return out
