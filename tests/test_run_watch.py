"""A run on its own watched thread (``soloflow_langgraph.compile.run_watch``): sync steps called in
line, their time limits kept by the caller, an overrunning call abandoned without a trace —
on real SQLite files and PostgreSQL, with real runtimes and checkpointers."""

from __future__ import annotations

import contextvars
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from soloflow_core.models import Compensation, FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_langgraph.compile.run_watch import (
    RunAbandoned,
    RunStopped,
    RunWatch,
    poll_for,
    run_watched,
)
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "watch-user", "agent_id": "watch-agent"}


@pytest.fixture()
def runtimes(store: Store) -> Iterator[list[FlowRuntime]]:
    opened: list[FlowRuntime] = []
    try:
        yield opened
    finally:
        for rt in opened:
            rt.close()


def _rt(opened: list[FlowRuntime], store: Store, tools: list[Any], **kw: Any) -> FlowRuntime:
    rt = FlowRuntime(store, tools=tools, **NS, **kw)
    opened.append(rt)
    return rt


def _step(sid: str, *deps: str, **kw: Any) -> FlowStep:
    kw.setdefault("retry_backoff", 0.01)
    kw.setdefault("retry_max", 0)
    kw.setdefault("input_map", {"v": sid})
    return FlowStep(id=sid, skill_key=kw.pop("skill_key", sid), depends_on=list(deps), **kw)


class Calls:
    """Tools that record (name, thread) for each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def make(self, name: str, *, sleep: float = 0.0, then: Any = None):  # noqa: ANN201
        def fn(v: Any = None) -> Any:
            with self.lock:
                self.calls.append((name, threading.get_ident()))
            if then is not None:
                then()
            if sleep:
                time.sleep(sleep)
            return {"from": name}

        fn.__name__ = name
        return fn

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]


def test_the_steps_of_a_chain_run_in_line_on_one_thread_that_is_not_the_callers(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="chain", steps=[_step("a"), _step("b", "a"), _step("c", "b"), _step("d", "c")]
    )
    rt = _rt(runtimes, store, [calls.make(n) for n in "abcd"])
    result = rt.run(flow, {})
    assert result.status == "completed" and calls.names() == ["a", "b", "c", "d"]
    threads = {t for _, t in calls.calls}
    assert len(threads) == 1, "one hand-off per run: every step on the run's thread"
    assert threads != {threading.get_ident()}


def test_an_overrunning_call_that_returns_late_leaves_no_trace(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="late",
        steps=[
            _step("a"),
            _step("h", "a", timeout_seconds=0.2, on_failure="continue"),
            _step("b", "h"),
        ],
    )
    release, returned = threading.Event(), threading.Event()

    def hold() -> None:  # h stays in its call until the test lets it go, long after its limit
        release.wait(30)
        returned.set()

    rt = _rt(runtimes, store, [calls.make("a"), calls.make("h", then=hold), calls.make("b")])
    t0 = time.perf_counter()
    result = rt.run(flow, {})
    elapsed = time.perf_counter() - t0
    assert result.status == "completed" and elapsed < 10, elapsed  # waiting for h: 30 s
    assert "StepTimeoutError" in result.errors["h"] and "0.2 s" in result.errors["h"]
    before = (
        [(s.step_key, s.state, s.attempts) for s in rt.status(result.run_id).steps],
        [(m.step_key, m.from_state, m.to_state) for m in rt.history(result.run_id)],
    )
    release.set()  # the abandoned call returns now, on its own thread
    assert returned.wait(10)
    time.sleep(0.5)  # and whatever would follow its return has had time to happen
    after = (
        [(s.step_key, s.state, s.attempts) for s in rt.status(result.run_id).steps],
        [(m.step_key, m.from_state, m.to_state) for m in rt.history(result.run_id)],
    )
    assert after == before
    assert dict((k, st) for k, st, _ in after[0]) == {
        "a": "completed",
        "h": "failed",
        "b": "completed",
    }
    assert not any(k == "h" and to == "completed" for k, _, to in after[1])
    assert calls.names() == ["a", "h", "b"]  # nothing called twice, and b after h's limit


def test_a_timeout_is_retried_then_compensated_in_reverse_order(store, runtimes):
    calls = Calls()
    undo: list[str] = []

    def undo_a(v: Any = None) -> str:
        undo.append("a")
        return "undone"

    def undo_b(v: Any = None) -> str:
        undo.append("b")
        return "undone"

    flow = FlowDefinition(
        name="comp-timeout",
        steps=[
            _step("a", compensation=Compensation(skill_key="undo_a")),
            _step("b", "a", compensation=Compensation(skill_key="undo_b")),
            _step("h", "b", timeout_seconds=0.2, retry_max=1, on_failure="compensate"),
            _step("z", "h"),
        ],
    )
    rt = _rt(
        runtimes,
        store,
        [
            calls.make("a"),
            calls.make("b"),
            calls.make("h", sleep=1.0),
            calls.make("z"),
            undo_a,
            undo_b,
        ],
    )
    result = rt.run(flow, {})
    assert result.status == "failed" and result.outcome == "compensated", result
    assert result.failed_step == "h" and "StepTimeoutError" in result.error
    assert undo == ["b", "a"]
    assert calls.names() == ["a", "b", "h", "h"]  # one retry, then the policy; z never starts
    assert {s.step_key: s.attempts for s in rt.status(result.run_id).steps}["h"] == 2


def test_a_timeout_with_stop_fails_the_run_naming_the_step(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="stop-timeout",
        steps=[_step("a"), _step("h", "a", timeout_seconds=0.2), _step("z", "h")],
    )
    rt = _rt(runtimes, store, [calls.make("a"), calls.make("h", sleep=1.0), calls.make("z")])
    result = rt.run(flow, {})
    assert result.status == "failed" and result.failed_step == "h"
    assert "StepTimeoutError" in result.error and "step 'h'" in result.error
    assert calls.names() == ["a", "h"]
    assert rt.status(result.run_id).state == "failed"


def test_a_short_limit_after_a_long_one_is_kept(store, runtimes):
    """The caller looks at the call in progress at least every quarter of the shortest limit,
    so a step's overrun is seen on time even after a step with a long limit."""
    calls = Calls()
    flow = FlowDefinition(
        name="mixed-limits",
        steps=[
            _step("slow_ok", timeout_seconds=60, skill_key="a"),
            _step("h", "slow_ok", timeout_seconds=0.3, on_failure="continue"),
        ],
    )
    rt = _rt(runtimes, store, [calls.make("a", sleep=0.25), calls.make("h", sleep=6.0)])
    t0 = time.perf_counter()
    result = rt.run(flow, {})
    assert result.status == "completed" and "StepTimeoutError" in result.errors["h"]
    # ~0.6 s when the overrun is seen on time; 6 s (h's own end) when it is not
    assert time.perf_counter() - t0 < 3.0


def test_a_timeout_in_a_parallel_layer_is_kept_by_the_steps_own_thread(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="par-timeout",
        steps=[
            _step("a"),
            _step("p1", "a", timeout_seconds=0.2, on_failure="continue", side_effects=False),
            _step("p2", "a", side_effects=False),
            _step("d", "p1", "p2"),
        ],
    )
    rt = _rt(
        runtimes,
        store,
        [calls.make("a"), calls.make("p1", sleep=3.0), calls.make("p2"), calls.make("d")],
    )
    t0 = time.perf_counter()
    result = rt.run(flow, {})
    assert time.perf_counter() - t0 < 2.0  # 3 s and more when p1's limit is not kept
    assert result.status == "completed" and "StepTimeoutError" in result.errors["p1"]
    assert sorted(calls.names()) == ["a", "d", "p1", "p2"]


def test_an_interrupted_caller_abandons_the_call_and_resume_runs_it_again(store, runtimes):
    """Ctrl-C while a step runs: the call's result is thrown away, as if the process had
    died during it; resumed at once in the same process, the step runs again (same
    idempotency key) and the interrupted invocation writes nothing more."""
    calls = Calls()
    main = threading.main_thread().ident
    assert main is not None
    fired: list[int] = []
    release, returned = threading.Event(), threading.Event()

    def interrupt() -> None:  # the first b: Ctrl-C, then stay in the call until let go
        if not fired:
            fired.append(1)
            signal.pthread_kill(main, signal.SIGINT)
            release.wait(30)
            returned.set()

    flow = FlowDefinition(name="ctrl-c", steps=[_step("a"), _step("b", "a"), _step("c", "b")])
    rt = _rt(runtimes, store, [calls.make("a"), calls.make("b", then=interrupt), calls.make("c")])
    started: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        rt.run(flow, {}, on_started=started.append)
    assert {s.step_key: s.state for s in rt.status(started[0]).steps}["b"] == "running"
    result = rt.resume(started[0])  # at once: the first b is still in its call
    assert result.status == "completed"
    release.set()  # the abandoned b returns now: nothing of it is written
    assert returned.wait(10)
    time.sleep(0.5)
    assert calls.names() == ["a", "b", "b", "c"]
    steps = {s.step_key: (s.state, s.attempts) for s in rt.status(started[0]).steps}
    assert steps == {"a": ("completed", 1), "b": ("completed", 2), "c": ("completed", 1)}
    assert [m.to_state for m in rt.history(started[0]) if m.step_key is None][-1] == "completed"


def test_interrupt_running_stops_a_run_driven_on_another_thread(store, runtimes):
    """A server shutting down (``FlowRuntime.interrupt_running`` from another thread): the run
    is recorded interrupted at once, naming the call left running; its thread unwinds with
    ``RunStopped`` and writes nothing more when the abandoned call returns; the runtime starts
    no run afterwards; another runtime resumes the run, the step runs again."""
    calls = Calls()
    in_b, release = threading.Event(), threading.Event()
    flow = FlowDefinition(
        name="stopped", steps=[_step("a"), _step("b", "a", timeout_seconds=2), _step("c", "b")]
    )
    tools = [
        calls.make("a"),
        calls.make("b", then=lambda: (in_b.set(), release.wait(10))),
        calls.make("c"),
    ]
    rt = _rt(runtimes, store, tools)
    started: list[str] = []
    ended: list[BaseException] = []

    def drive() -> None:
        try:
            rt.run(flow, {}, on_started=started.append)
        except BaseException as exc:
            ended.append(exc)

    thread = threading.Thread(target=drive)
    thread.start()
    assert in_b.wait(10)
    assert rt.interrupt_running() == started
    rec = rt.status(started[0])
    assert rec.state == "interrupted"
    detail = [m.detail for m in rt.history(started[0]) if m.step_key is None][-1] or ""
    assert "step 'b' (attempt 1)" in detail
    thread.join(10)
    assert not thread.is_alive() and [type(e) for e in ended] == [RunStopped]
    assert rt.interrupt_running() == []  # again: nothing more to stop
    with pytest.raises(RunStopped):  # the stopped runtime starts no run
        rt.run(flow, {})
    release.set()
    time.sleep(0.3)  # the abandoned b returns: nothing of it is written
    assert {s.step_key: s.state for s in rt.status(started[0]).steps}["b"] == "running"
    result = _rt(runtimes, store, tools).resume(started[0])
    assert result.status == "completed"
    assert calls.names() == ["a", "b", "b", "c"]


def test_a_first_step_that_overruns_goes_on_from_the_first_checkpoint(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="first-over",
        steps=[_step("h", timeout_seconds=0.15, on_failure="continue"), _step("b", "h")],
    )
    rt = _rt(runtimes, store, [calls.make("h", sleep=0.8), calls.make("b")])
    result = rt.run(flow, {})
    assert result.status == "completed" and "StepTimeoutError" in result.errors["h"]
    assert calls.names() == ["h", "b"]


def test_a_single_map_item_that_overruns_is_retried_then_continues(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="map-over",
        input_schema={"type": "object", "properties": {"items": {"type": "array"}}},
        steps=[
            _step("a"),
            FlowStep(
                id="m",
                skill_key="h",
                depends_on=["a"],
                map_over="{{_trigger.items}}",
                input_map={"v": "{{_item}}"},
                timeout_seconds=0.15,
                retry_max=1,
                retry_backoff=0.01,
                on_failure="continue",
            ),
            _step("b", "m"),
        ],
    )
    rt = _rt(runtimes, store, [calls.make("a"), calls.make("h", sleep=0.6), calls.make("b")])
    result = rt.run(flow, {"items": [1]})
    assert result.status == "completed" and "StepTimeoutError" in str(result.errors)
    assert calls.names() == ["a", "h", "h", "b"]


def test_a_step_that_overruns_after_an_approval_goes_on_by_policy(store, runtimes):
    calls = Calls()
    flow = FlowDefinition(
        name="approve-over",
        requires_approval=True,
        steps=[
            _step("a", side_effects=False),
            _step("h", "a", timeout_seconds=0.15, on_failure="continue"),
            _step("b", "h"),
        ],
    )
    rt = _rt(runtimes, store, [calls.make("a"), calls.make("h", sleep=0.6), calls.make("b")])
    waiting = rt.run(flow, {})
    assert waiting.status == "waiting"
    result = rt.approve(waiting.run_id)
    assert result.status == "completed" and "StepTimeoutError" in result.errors["h"]
    assert calls.names() == ["a", "h", "b"]


VAR: contextvars.ContextVar[str | None] = contextvars.ContextVar("VAR", default=None)


def test_the_callers_context_variables_reach_the_tools(store, runtimes):
    seen: list[str | None] = []

    def t(v: Any = None) -> int:
        seen.append(VAR.get())
        return 1

    rt = _rt(runtimes, store, [t])
    token = VAR.set("from the caller")
    try:
        rt.run(FlowDefinition(name="ctxvar", steps=[_step("t")]), {})
    finally:
        VAR.reset(token)
    assert seen == ["from the caller"]


def test_run_watched_returns_raises_and_reports_an_overrun():
    watch = RunWatch(poll_for([1.0]))
    assert run_watched(lambda: 41 + 1, watch) == 42

    def boom() -> None:
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        run_watched(boom, RunWatch(0.25))

    from soloflow_langgraph.compile.run_watch import CallTimedOut
    from soloflow_langgraph.compile.step_call import inspect_executor

    late: list[BaseException] = []
    returned = threading.Event()

    def slow(v: int) -> int:
        time.sleep(0.4)
        return v

    w = RunWatch(0.05)

    def target() -> int:
        try:
            return w.call(
                slow,
                inspect_executor(slow),
                {"v": 1},
                timeout=0.1,
                key=None,
                step_key="s",
                attempt=1,
                where="flow 'f', step 's'",
            )
        except BaseException as exc:
            late.append(exc)
            raise
        finally:
            returned.set()

    t0 = time.perf_counter()
    with pytest.raises(CallTimedOut) as over:
        run_watched(target, w)
    assert 0.08 <= time.perf_counter() - t0 < 0.35
    assert over.value.call.step_key == "s" and over.value.call.abandoned and w.fenced
    assert returned.wait(2.0)
    assert len(late) == 1 and isinstance(late[0], RunAbandoned)
    with pytest.raises(RunAbandoned):  # a fenced invocation starts no call
        w.call(
            slow,
            inspect_executor(slow),
            {"v": 1},
            timeout=1,
            key=None,
            step_key="t",
            attempt=1,
            where="x",
        )
