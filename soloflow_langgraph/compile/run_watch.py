"""A run on its own thread, watched: sync steps called in line, their time limits kept by the
caller.

:func:`~soloflow_langgraph.compile.step_call.call_with_limit` hands every sync call to a daemon
thread so that the step stops waiting at ``timeout_seconds``; each hand-off costs two thread
wake-ups, most of a trivial step's overhead. The
runtime instead runs the whole invocation of a run (``graph.invoke``) on one daemon thread —
one hand-off per run — and the steps that LangGraph runs on that thread (every step of a
superstep with one task) call their executor in line. The caller waits for the invocation
and watches the call in progress (:class:`RunWatch`): each call publishes its deadline before
it starts, which costs no wake-up; the caller wakes at that deadline, or at least every
``poll`` seconds to see the next call's.

When a call overruns, the caller does what the thread hand-off did — stops waiting for it —
for the whole invocation: the call is *abandoned* (when it returns, its thread raises
:class:`RunAbandoned` before anything else happens: no journal write, no state update, no
checkpoint), the invocation is *fenced* (it starts no other call), and the runtime continues
the run from its last checkpoint on a new thread, where the step's node takes the timed-out
attempt as failed with :class:`~soloflow_core.errors.StepTimeoutError` and applies its
``retry_max`` and ``on_failure`` as for any failure. The abandoned call runs on in the
background and its result is thrown away — exactly what happens to an overrunning sync call
under ``call_with_limit``. Nothing the abandoned thread could still write exists: with
``durability="sync"`` LangGraph saves a superstep's checkpoint before its tasks run and a
task's writes only after its node returns, which an abandoned node never does.

Steps of a superstep with several tasks run on LangGraph's own worker threads and keep
``call_with_limit``; so do async executors (cancelled at their limit by ``asyncio.wait_for``)
and runs without ``durability="sync"``.
"""

from __future__ import annotations

import _thread
import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from soloflow_langgraph.compile.step_call import (
    CALL_POOL,
    IDEMPOTENCY_ARG,
    ExecutorInfo,
    call_executor,
    unwrap_output,
)

T = TypeVar("T")

MIN_POLL = 0.005
MAX_POLL = 5.0


class RunAbandoned(BaseException):  # noqa: N818 - a control-flow signal, like GeneratorExit
    """Raised in an invocation's thread once the runtime has stopped waiting for it (a call
    ran past its limit, or the caller was interrupted): the invocation unwinds without
    writing anything more. A ``BaseException`` so that no ``except Exception`` (LangGraph's
    retry and error handling included) turns it into a step failure that would be saved."""


@dataclass(slots=True)
class WatchedCall:
    """One executor call in progress on the watched thread."""

    step_key: str
    attempt: int
    idempotency_key: str | None
    where: str
    timeout: float
    started: float
    """``time.monotonic()`` when the call started."""
    deadline: float
    abandoned: bool = False


class RunStopped(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised in the caller of a watched invocation that another thread of the process stopped
    (:meth:`RunWatch.interrupt`, e.g. a server shutting down): the same as the caller's own
    ``KeyboardInterrupt``."""


class CallTimedOut(Exception):  # noqa: N818 - it reports the call, not an error of the caller
    """The watched invocation's call ran past its limit (raised in the caller)."""

    def __init__(self, call: WatchedCall) -> None:
        super().__init__(f"{call.where}: no result after {call.timeout:g} s")
        self.call = call


class RunWatch:
    """What the caller of one watched invocation sees of it: the call in progress and its
    deadline (see the module docstring)."""

    __slots__ = ("current", "fenced", "interrupted", "lock", "poll", "quiet", "thread_id")

    def __init__(self, poll: float) -> None:
        self.lock = threading.Lock()
        self.current: WatchedCall | None = None
        self.fenced = False
        self.interrupted = False
        self.thread_id: int | None = None
        self.poll = min(MAX_POLL, max(MIN_POLL, poll))
        self.quiet = threading.Event()
        """Set once the invocation can write nothing more: its thread has ended, or it is
        inside an abandoned call (which can only raise :class:`RunAbandoned`)."""

    def stop(self) -> None:
        """Fence the invocation and abandon the call in progress, if any: the caller has
        stopped waiting (an interrupt). Without a call in progress the thread stops at its
        next step (see :meth:`check`)."""
        with self.lock:
            self.fenced = True
            if self.current is not None:
                self.current.abandoned = True
                self.quiet.set()

    def interrupt(self) -> None:
        """From another thread: stop the invocation as an interrupt of its caller would
        (:meth:`stop`), and make the caller raise :class:`RunStopped` when it next wakes (at
        most ``poll`` seconds later)."""
        with self.lock:
            self.interrupted = True
        self.stop()

    def owns_thread(self) -> bool:
        """Whether the current thread is the invocation's own (calls may go in line)."""
        return threading.get_ident() == self.thread_id

    def check(self) -> None:
        """Raise :class:`RunAbandoned` if the caller has stopped waiting for this invocation."""
        if self.fenced:
            raise RunAbandoned

    def call(
        self,
        executor: Any,
        info: ExecutorInfo,
        kwargs: dict[str, Any],
        *,
        timeout: float,
        key: str | None,
        step_key: str,
        attempt: int,
        where: str,
    ) -> Any:
        """Call a sync ``executor`` in line, its deadline published for the caller.

        Raises:
            RunAbandoned: the caller stopped waiting (before the call, or during it).
            Exception: whatever the executor raised.
        """
        if key is not None and info.takes_key:
            kwargs = {**kwargs, IDEMPOTENCY_ARG: key}
        start = time.monotonic()
        call = WatchedCall(
            step_key=step_key,
            attempt=attempt,
            idempotency_key=key,
            where=where,
            timeout=timeout,
            started=start,
            deadline=start + timeout,
        )
        with self.lock:
            if self.fenced:
                raise RunAbandoned
            self.current = call
        try:
            out = call_executor(executor, info, kwargs)
        except BaseException:
            self._ended(call)
            raise
        self._ended(call)
        return unwrap_output(out)

    def _ended(self, call: WatchedCall) -> None:
        with self.lock:
            if call.abandoned:
                raise RunAbandoned from None
            self.current = None


def poll_for(timeouts: list[float]) -> float:
    """How often the caller looks at the call in progress: a quarter of the shortest step
    limit of the flow, so every call is seen well before its deadline."""
    return min(timeouts, default=MAX_POLL * 4) / 4


def run_watched(target: Callable[[], T], watch: RunWatch) -> T:
    """``target()`` on a daemon thread (the caller's context variables copied), waited for
    while its in-line calls keep their deadlines.

    Raises:
        CallTimedOut: a call ran past its limit; the invocation is fenced and the call
            abandoned (see the module docstring).
        RunStopped: another thread stopped the invocation (:meth:`RunWatch.interrupt`).
        BaseException: whatever ``target`` raised; an interrupt of the caller (its
            ``KeyboardInterrupt``) abandons the call in progress and fences the invocation
            (:meth:`RunWatch.stop`), and is raised again.
    """
    box: dict[str, Any] = {}
    done = _thread.allocate_lock()
    done.acquire()
    ctx = contextvars.copy_context()

    def main() -> None:
        watch.thread_id = threading.get_ident()
        try:
            box["out"] = ctx.run(target)
        except BaseException as exc:  # handed to the caller
            box["exc"] = exc
        finally:
            watch.quiet.set()
            done.release()

    wait = watch.poll
    try:
        CALL_POOL.submit(main)  # inside the try: an interrupt from here on fences the invocation
        while not done.acquire(True, wait):
            with watch.lock:
                if watch.interrupted:
                    raise RunStopped("stopped by its process (a server shutting down)")
                call, now = watch.current, time.monotonic()
                if call is not None and now >= call.deadline:
                    call.abandoned = True
                    watch.fenced = True
                    watch.quiet.set()
                    raise CallTimedOut(call)
                wait = (
                    watch.poll if call is None else max(0.0, min(watch.poll, call.deadline - now))
                )
    except CallTimedOut:
        raise
    except BaseException:  # the caller was interrupted: the call in progress is abandoned
        watch.stop()
        raise
    if "exc" in box:
        raise box["exc"]
    return box["out"]  # type: ignore[no-any-return]


__all__ = [
    "CallTimedOut",
    "RunAbandoned",
    "RunStopped",
    "RunWatch",
    "WatchedCall",
    "poll_for",
    "run_watched",
]
