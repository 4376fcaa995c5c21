"""Flow runs driven on threads of their own, so that a caller waits for one at most a while.

:class:`RunDriver` runs each flow run on a thread; the caller gets its result if it ends (or
waits for approval) within ``wait`` seconds, else its id and status ``running`` while it goes
on (follow it with its status). :meth:`RunDriver.join` waits a while for the runs still going.
:class:`StopRunsAtShutdown` stops the runs still going when an ASGI server stops
(``SoloFlowService.stop_runs``), for an app whose lifespan is another library's (MCP's).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from soloflow_langgraph.server.views import RunOutcomeView

if TYPE_CHECKING:
    from soloflow_langgraph.runtime.results import FlowRunResult

__all__ = ["DEFAULT_WAIT", "MAX_WAIT", "STOP_GRACE", "RunDriver", "StopRunsAtShutdown"]

log = logging.getLogger(__name__)

DEFAULT_WAIT = 30.0
"""Seconds a caller waits for a run by default before it gets the run id instead."""
MAX_WAIT = 300.0
STOP_GRACE = 10.0
"""Seconds :meth:`RunDriver.join` waits for runs still going on its threads (they are
durable: one that did not finish is resumed with ``soloflow flows resume``)."""


class RunDriver:
    """Runs flow runs on threads of their own and remembers the threads still going."""

    def __init__(self) -> None:
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def join(self, grace: float = STOP_GRACE) -> None:
        """Wait at most ``grace`` seconds in all for the runs still going."""
        deadline = time.monotonic() + grace
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def drive(
        self,
        flow: str,
        run: Callable[[Callable[[str], None]], FlowRunResult],
        wait: float,
        known_id: str | None = None,
    ) -> RunOutcomeView:
        """Run ``run`` on a thread of its own; its result if it ends (or waits for approval)
        within ``wait`` seconds (at most :data:`MAX_WAIT`), else its id and status
        ``running``. ``run`` is given a callback it calls with the run's id once recorded."""
        started, done = threading.Event(), threading.Event()
        box: dict[str, Any] = {"id": known_id}
        if known_id is not None:
            started.set()

        def on_started(run_id: str) -> None:
            box["id"] = run_id
            started.set()

        def work() -> None:
            try:
                box["result"] = run(on_started)
            except BaseException as exc:  # handed to the caller, or logged once it stopped waiting
                box["error"] = exc
                stopped = not isinstance(exc, Exception)  # with the server: stop_runs logs it
                if started.is_set() and not waiting.is_set() and not stopped:
                    log.error(
                        "flow run %s of %r failed after its caller stopped waiting: %s",
                        box["id"],
                        flow,
                        exc,
                    )
            finally:
                done.set()
                with self._lock:
                    self._threads.discard(thread)

        waiting = threading.Event()
        waiting.set()
        thread = threading.Thread(target=work, name=f"soloflow-run-{flow}"[:60], daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()
        if not done.wait(max(0.0, min(wait, MAX_WAIT))):
            # Still going: its id once it is recorded (before its first step), unless it ends first.
            while not started.wait(0.05) and not done.is_set():
                pass
            if not done.is_set():
                waiting.clear()
                return RunOutcomeView(run_id=box["id"], flow=flow, status="running")
        if "error" in box:
            raise box["error"]
        return RunOutcomeView.of(box["result"])


class StopRunsAtShutdown:
    """The ASGI app ``app``, which calls ``stop`` (on a worker thread) once its lifespan has
    shut down: ``soloflow mcp --http`` wraps the MCP SDK's app so, with
    ``SoloFlowService.stop_runs``."""

    def __init__(self, app: Any, stop: Callable[[], object]) -> None:
        self.app, self.stop = app, stop

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        import anyio  # the api extra's, as is every ASGI server

        async def on_send(message: Any) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await anyio.to_thread.run_sync(self.stop)
            await send(message)

        await self.app(scope, receive, on_send)
