"""The traces of flow runs: invocation → steps → each call of a step's tool (attempts),
parallel steps side by side, the wait for approval between invocations; the flow-run hooks.
Real runtimes on real SQLite files and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from soloflow_core import hookimpl
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.tracing import Span, build_tree, trace_id_for
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "tr-user", "agent_id": "tr-agent"}


def _tools(fail: dict[str, int], parallel: bool = True) -> list[Any]:
    lock = threading.Lock()
    # The two parallel steps meet at a barrier: each call waits until the other is in
    # flight, so their spans overlap however slowly a busy machine starts the second
    # thread; a runtime that ran them one after the other would time out here and fail.
    both = threading.Barrier(2, timeout=30)

    def make(name: str, sleep: float = 0.0, meet: bool = False) -> Any:
        def fn(v: Any = None) -> Any:
            with lock:
                left = fail.get(name, 0)
                fail[name] = max(left - 1, 0)
            if meet and parallel:
                both.wait()
            time.sleep(sleep)
            if left:
                raise RuntimeError(f"{name} broke")
            return {"from": name}

        fn.__name__ = name
        return fn

    return [
        make("fetch"),
        make("left", 0.2, meet=True),
        make("right", 0.0, meet=True),
        make("join"),
    ]


def _step(sid: str, *deps: str, **kw: Any) -> FlowStep:
    return FlowStep(
        id=sid,
        skill_key=sid,
        depends_on=list(deps),
        input_map={"v": sid},
        retry_backoff=0.01,
        side_effects=False,
        **kw,
    )


FLOW = FlowDefinition(
    name="fan",
    version=1,
    steps=[
        _step("fetch", retry_max=2),
        _step("left", "fetch"),
        _step("right", "fetch"),
        _step("join", "left", "right"),
    ],
)


@pytest.fixture()
def runtime(store: Store) -> Iterator[FlowRuntime]:
    rt = FlowRuntime(store, tools=_tools({"fetch": 1}), **NS)
    try:
        yield rt
    finally:
        rt.close()


def test_flow_run_trace_has_steps_attempts_and_a_parallel_layer(
    store: Store, runtime: FlowRuntime
) -> None:
    result = runtime.run(FLOW, {})
    assert result.status == "completed" and result.run_id is not None
    spans = store.get_spans(result.run_id, **NS)
    (root,) = build_tree(spans)
    s = root.span
    assert (s.kind, s.name, s.parent, s.status) == ("invoke_flow", "invoke_flow fan", None, "ok")
    assert s.trace_id == trace_id_for(result.run_id) and all(
        x.trace_id == s.trace_id for x in spans
    )
    assert s.attributes == {
        "soloflow.flow.name": "fan",
        "soloflow.flow.version": 1,
        "soloflow.flow_run.id": result.run_id,
        "soloflow.namespace": "tr-user/tr-agent",
        "soloflow.flow_run.status": "completed",
    }
    steps = {c.span.attributes["soloflow.step.id"]: c for c in root.children}
    assert set(steps) == {"fetch", "left", "right", "join"}
    assert all(c.span.kind == "step" and c.span.status == "ok" for c in steps.values())
    # The retried step: two calls, the first failed, the second succeeded.
    calls = [c.span for c in steps["fetch"].children]
    assert [(c.kind, c.attributes["soloflow.attempt"], c.status) for c in calls] == [
        ("execute_tool", 1, "error"),
        ("execute_tool", 2, "ok"),
    ]
    assert (
        calls[0].error == "RuntimeError: fetch broke"
        and calls[1].attributes["gen_ai.tool.name"] == "fetch"
    )
    # The parallel layer overlaps in time; both start after fetch ended and end before join starts.
    left, right, join, fetch = (steps[k].span for k in ("left", "right", "join", "fetch"))
    assert left.end is not None and right.end is not None and fetch.end is not None
    assert max(left.start, right.start) < min(left.end, right.end)
    assert fetch.end <= min(left.start, right.start) and max(left.end, right.end) <= join.start
    # The critical path goes through the slower branch.
    assert [k for k in ("fetch", "left", "right", "join") if steps[k].critical] == [
        "fetch",
        "left",
        "join",
    ]
    assert [c.critical for c in steps["fetch"].children] == [True, True]
    assert root.critical and root.span.duration_ms is not None
    assert root.span.duration_ms >= sum(
        x.span.duration_ms or 0 for x in (steps["fetch"], steps["left"])
    )


def test_an_approval_wait_sits_between_the_invocations(store: Store) -> None:
    flow = FlowDefinition(
        name="refund",
        requires_approval=True,
        steps=[
            _step("fetch"),
            FlowStep(id="left", skill_key="left", depends_on=["fetch"], side_effects=True),
        ],
    )
    rt = FlowRuntime(store, tools=_tools({}, parallel=False), **NS)
    try:
        first = rt.run(flow, {})
        assert first.status == "waiting" and first.run_id is not None
        time.sleep(0.05)
        done = rt.approve(first.run_id)
        assert done.status == "completed"
    finally:
        rt.close()
    roots = build_tree(store.get_spans(first.run_id, **NS))
    assert [r.span.kind for r in roots] == ["invoke_flow", "approval_wait", "invoke_flow"]
    waited, wait, resumed = (r.span for r in roots)
    assert waited.attributes["soloflow.flow_run.status"] == "waiting" and waited.status == "unset"
    assert wait.duration_ms is not None and wait.duration_ms >= 50
    assert resumed.attributes["soloflow.flow_run.status"] == "completed"
    assert [c.span.attributes["soloflow.step.id"] for c in roots[2].children] == ["left"]


class _FlowRunWatcher:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    @hookimpl
    def soloflow_flow_run_started(self, run_id: str, flow: FlowDefinition) -> None:
        self.events.append(("started", run_id, flow.name))

    @hookimpl
    def soloflow_flow_run_finished(
        self, run_id: str, flow: FlowDefinition, status: str, spans: list[Span]
    ) -> None:
        self.events.append(("finished", run_id, flow.name, status, [s.kind for s in spans]))


def test_soloflow_flow_run_started(store: Store, pm: Any) -> None:
    watcher = _FlowRunWatcher()
    pm.register(watcher)
    rt = FlowRuntime(store, tools=_tools({}), plugin_manager=pm, **NS)
    try:
        result = rt.run(FLOW, {})
    finally:
        rt.close()
    assert watcher.events[0] == ("started", result.run_id, "fan")


def test_soloflow_flow_run_finished(store: Store, pm: Any) -> None:
    watcher = _FlowRunWatcher()
    pm.register(watcher)
    rt = FlowRuntime(store, tools=_tools({"fetch": 5}), plugin_manager=pm, **NS)
    try:
        result = rt.run(FLOW, {})
    finally:
        rt.close()
    assert result.status == "failed"
    (_, run_id, name, status, kinds) = watcher.events[-1]
    assert (run_id, name, status) == (result.run_id, "fan", "failed")
    assert kinds == ["invoke_flow", "step", "execute_tool", "execute_tool", "execute_tool"]
    stored = store.get_spans(result.run_id, **NS)
    assert stored[0].status == "error" and "fetch broke" in (stored[0].error or "")
    assert stored[1].status == "error"


def test_a_call_that_ran_past_its_limit_is_a_failed_attempt(store: Store) -> None:
    calls: list[int] = []

    def slow(v: Any = None) -> Any:
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.6)  # abandoned at its limit; the run goes on without it
        return {"ok": True}

    flow = FlowDefinition(
        name="slow",
        steps=[
            FlowStep(
                id="slow",
                skill_key="slow",
                input_map={"v": "x"},
                timeout_seconds=0.2,
                retry_max=1,
                retry_backoff=0.01,
            )
        ],
    )
    rt = FlowRuntime(store, tools=[slow], **NS)
    try:
        result = rt.run(flow, {})
    finally:
        rt.close()
    assert result.status == "completed" and result.run_id is not None
    (root,) = build_tree(store.get_spans(result.run_id, **NS))
    (step,) = root.children
    assert step.span.status == "ok"
    first, second = (c.span for c in step.children)
    assert (first.attributes["soloflow.attempt"], first.status) == (1, "error")
    assert first.error is not None and first.error.startswith("StepTimeoutError:")
    assert first.duration_ms is not None and 200 <= first.duration_ms < 600
    assert (second.attributes["soloflow.attempt"], second.status) == (2, "ok")
    assert first.end is not None and first.end <= second.start
