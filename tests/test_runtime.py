"""The flow runtime: state machine, retries, timeouts, failure policies, compensation,
approval, cancel, parallelism, durability records — on real SQLite files and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tools import tool

from soloflow_core.errors import FlowValidationError, InvalidTransitionError, NotFoundError
from soloflow_core.flow.fsm import check_run_transition, check_step_transition
from soloflow_core.flow.journal import RERUN
from soloflow_core.models import Compensation, FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_langgraph.compile.graph import compile_flow
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime as _FlowRuntime

NS = {"user_id": "rt-user", "agent_id": "rt-agent"}


class Recorder:
    """Tools that record their calls; ``fail`` maps a tool to how many times it fails first."""

    def __init__(self, fail: dict[str, int] | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail = dict(fail or {})
        self.lock = threading.Lock()

    def make(self, name: str, *, result: Any = None, sleep: float = 0.0):  # noqa: ANN201
        def fn(v: Any = None) -> Any:
            with self.lock:
                self.calls.append((name, v))
                left = self.fail.get(name, 0)
                if left:
                    self.fail[name] = left - 1 if left > 0 else left
            if sleep:
                time.sleep(sleep)
            if left:
                raise RuntimeError(f"{name} broke")
            return {"from": name, "v": v} if result is None else result

        fn.__name__ = name
        return fn

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]


def _step(sid: str, *deps: str, **kw: Any) -> FlowStep:
    kw.setdefault("retry_backoff", 0.01)
    kw.setdefault("retry_max", 0)
    kw.setdefault("input_map", {"v": sid})
    return FlowStep(id=sid, skill_key=kw.pop("skill_key", sid), depends_on=list(deps), **kw)


_OPEN: list[FlowRuntime] = []


class FlowRuntime(_FlowRuntime):
    """Closed at the end of each test (its checkpointer connection)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        _OPEN.append(self)


@pytest.fixture()
def rt_store(store: Store) -> Iterator[Store]:
    try:
        yield store
    finally:
        while _OPEN:
            _OPEN.pop().close()


def _legal(history: list[Any]) -> None:
    """Every recorded transition is one the state machines allow, in order."""
    run_state: str | None = None
    steps: dict[str, str | None] = {}
    for m in history:
        if m.step_key is None:
            if m.from_state is not None:
                assert m.from_state == run_state
            check_run_transition("r", run_state, m.to_state)
            run_state = m.to_state
        else:
            if m.from_state is None:
                assert m.to_state == "pending" and m.step_key not in steps
                steps[m.step_key] = "pending"
                continue
            assert m.from_state == steps.get(m.step_key), m
            check_step_transition("r", m.step_key, steps[m.step_key], m.to_state)
            steps[m.step_key] = m.to_state


# ---------------------------------------------------------------- state machine


def test_state_machine_refuses_illegal_moves_and_leaving_terminal_states():
    check_run_transition("r", None, "draft")
    with pytest.raises(InvalidTransitionError, match="must start as 'draft'"):
        check_run_transition("r", None, "running")
    with pytest.raises(InvalidTransitionError, match="it has ended"):
        check_run_transition("r", "completed", "running")
    with pytest.raises(InvalidTransitionError, match="from 'draft' to 'completed'"):
        check_run_transition("r", "draft", "completed")
    check_step_transition("r", "s", "failed", "ready")  # a retry
    with pytest.raises(InvalidTransitionError, match="'skipped' to 'running'"):
        check_step_transition("r", "s", "skipped", "running")
    with pytest.raises(InvalidTransitionError, match="unknown state 'done'"):
        check_step_transition("r", "s", "running", "done")


def test_a_completed_run_records_every_transition_and_cannot_be_resumed(rt_store):
    rec = Recorder()
    flow = FlowDefinition(name="chain", steps=[_step("a"), _step("b", "a")])
    rt = FlowRuntime(rt_store, tools=[rec.make("a"), rec.make("b")], **NS)
    result = rt.run(flow, {})
    assert result.status == "completed" and result.outcome == "completed"
    history = rt.history(result.run_id)
    _legal(history)
    run_moves = [(m.from_state, m.to_state) for m in history if m.step_key is None]
    assert run_moves == [
        (None, "draft"),
        ("draft", "active"),
        ("active", "running"),
        ("running", "completed"),
    ]
    assert [m.to_state for m in history if m.step_key == "a"] == [
        "pending",
        "ready",
        "running",
        "completed",
    ]
    status = rt.status(result.run_id)
    assert [(s.step_key, s.state, s.attempts) for s in status.steps] == [
        ("a", "completed", 1),
        ("b", "completed", 1),
    ]
    assert status.steps[0].idempotency_key == f"{result.run_id}:a"
    with pytest.raises(InvalidTransitionError, match="has ended"):
        rt.resume(result.run_id)
    with pytest.raises(InvalidTransitionError, match="has ended"):
        rt.cancel(result.run_id)


def test_a_runs_step_records_are_whole_tool_calls_each_with_its_own_meta(rt_store):
    """The runtime builds a step's ToolCall without validation (``model_construct``): each is
    still a whole record — its own ``meta`` dict, only the fields it set marked set, and a
    dump that validates back to the same call."""
    rec = Recorder()
    flow = FlowDefinition(
        name="calls", steps=[_step("a"), _step("b", "a", input_map={"v": "{{a}}"})]
    )
    result = FlowRuntime(rt_store, tools=[rec.make("a"), rec.make("b")], **NS).run(flow, {})
    assert result.status == "completed"
    a, b = result.steps
    assert (a.name, a.args, a.output, a.error) == ("a", {"v": "a"}, {"from": "a", "v": "a"}, False)
    assert b.args == {"v": {"from": "a", "v": "a"}} and b.duration_ms >= 0
    assert a.meta == {} and a.meta is not b.meta
    a.meta["note"] = 1
    assert b.meta == {}
    assert (
        a.model_fields_set
        == b.model_fields_set
        == {"name", "args", "output", "error", "duration_ms"}
    )
    assert a.model_fields_set is not b.model_fields_set
    assert type(b).model_validate(b.model_dump()) == b


def test_when_the_last_checkpoint_save_fails_the_result_says_what_the_store_recorded(
    rt_store, monkeypatch
):
    """The final checkpoint save (after the last step) fails. Every step is recorded
    completed, nothing recorded the run's end yet: the run fails, in the result and in the
    store alike, on both databases."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    def failing_last(real):  # noqa: ANN001, ANN202
        def put(self, config, checkpoint, metadata, new_versions):  # noqa: ANN001, ANN202
            if (metadata or {}).get(
                "step"
            ) == 2:  # after the last step (input -1, start 0, a 1, b 2)
                raise RuntimeError("checkpoint save failed (injected)")
            return real(self, config, checkpoint, metadata, new_versions)

        return put

    monkeypatch.setattr(PostgresSaver, "put", failing_last(PostgresSaver.put))
    monkeypatch.setattr(SqliteSaver, "put", failing_last(SqliteSaver.put))
    rec = Recorder()
    flow = FlowDefinition(
        name="last-save", steps=[_step("a"), _step("b", "a", input_map={"v": "{{a}}"})]
    )
    finished: list[Any] = []
    rt = FlowRuntime(
        rt_store, tools=[rec.make("a"), rec.make("b")], on_finished=finished.append, **NS
    )
    result = rt.run(flow, {})
    recorded = rt.status(result.run_id)
    assert rec.names() == ["a", "b"]
    assert [s.state for s in recorded.steps] == ["completed", "completed"]
    assert (result.status, recorded.state) == ("failed", "failed")
    assert "injected" in (result.error or "")
    assert [r.status for r in finished] == [result.status]


def test_two_approvals_at_once_run_the_guarded_step_once(rt_store, monkeypatch):
    """Two processes (two runtimes on two store connections) approve the same waiting run at
    the same moment: both have read it as waiting before either claims it. One runs it; the
    other is refused before touching the graph — the side-effecting step is called once."""
    rec = Recorder()
    flow = FlowDefinition(
        name="wire",
        requires_approval=True,
        steps=[_step("send", side_effects=True), _step("log", "send")],
    )
    tools = [rec.make("send", sleep=0.3), rec.make("log")]
    run_id = FlowRuntime(rt_store, tools=tools, **NS).run(flow, {}).run_id
    other = Store.open(str(rt_store.engine.url.render_as_string(hide_password=False)))
    try:
        first, second = (
            FlowRuntime(rt_store, tools=tools, **NS),
            FlowRuntime(other, tools=tools, **NS),
        )
        read, answers = threading.Event(), {}

        def second_approves() -> None:
            try:
                answers["second"] = second.approve(run_id)
            except InvalidTransitionError as exc:
                answers["second"] = exc

        def second_has_read(_run_id: str, *_: Any) -> None:  # after its read, before its claim
            read.set()
            time.sleep(0.3)

        def first_waits_for_second(_run_id: str, *_: Any) -> None:
            threading.Thread(target=second_approves).start()
            read.wait(10)

        monkeypatch.setattr(
            second._invoker, "await_stopped", second_has_read
        )  # the race window, widened
        monkeypatch.setattr(first._invoker, "await_stopped", first_waits_for_second)
        result = first.approve(run_id)
        deadline = time.monotonic() + 20
        while "second" not in answers and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        other.close()
    assert result.status == "completed"
    assert isinstance(answers["second"], InvalidTransitionError)
    assert "another process" in str(answers["second"])
    assert rec.names() == ["send", "log"]
    assert [
        (s.step_key, s.attempts) for s in first.status(run_id).steps if s.step_key == "send"
    ] == [("send", 1)]


def test_a_claim_on_a_stale_read_is_refused(rt_store):
    """``claim_flow_run(seen=...)``: what approve, resume, reject and cancel use — a record
    read before another process claimed the run cannot claim it."""
    flow = FlowDefinition(name="stale", steps=[_step("a")])
    run_id = rt_store.start_flow_run(flow, {}, owner="host:1", **NS)
    seen = rt_store.get_flow_run(run_id, **NS)
    rt_store.claim_flow_run(run_id, owner="host:2", seen=seen, **NS)
    assert rt_store.get_flow_run(run_id, **NS).owner == "host:2"
    with pytest.raises(InvalidTransitionError, match="changed since it was read"):
        rt_store.claim_flow_run(run_id, owner="host:3", seen=seen, **NS)
    rt_store.claim_flow_run(run_id, owner="host:3", seen=rt_store.get_flow_run(run_id, **NS), **NS)
    assert rt_store.get_flow_run(run_id, **NS).owner == "host:3"


def _picky(name: str, calls: list[Any], bad: set[str]):  # noqa: ANN202 - a tool that fails on some values
    def fn(v: Any = None) -> Any:
        calls.append((name, v))
        if v in bad:
            raise RuntimeError(f"{name} broke on {v!r}")
        return {"from": name, "v": v}

    fn.__name__ = name
    return fn


@pytest.mark.parametrize("bad", ["c", "b"])
def test_a_map_steps_output_keeps_item_positions_when_an_item_fails_and_goes_on(rt_store, bad):
    """``on_failure: continue`` on a map step: a failed item is ``None`` at its own position,
    so outputs still line up with the items (a failed last item used to vanish)."""
    calls: list[Any] = []
    flow = FlowDefinition(
        name="map-continue",
        steps=[
            _step(
                "m", input_map={"v": "{{_item}}"}, map_over="{{_trigger.xs}}", on_failure="continue"
            )
        ],
    )
    result = FlowRuntime(rt_store, tools=[_picky("m", calls, {bad})], **NS).run(
        flow, {"xs": ["a", "b", "c"]}
    )
    assert result.status == "completed"
    assert result.output == [None if x == bad else {"from": "m", "v": x} for x in ("a", "b", "c")]
    assert sorted(v for _, v in calls) == ["a", "b", "c"]


def test_a_map_step_whose_calls_all_completed_is_compensated_when_another_step_fails(rt_store):
    """A map step's items all complete in the superstep in which another step fails with
    ``compensate``: the map step is collected (its calls happened) and undone with the rest,
    in reverse completion order — it used to be recorded skipped and never undone."""
    calls: list[Any] = []

    def undo(sid: str) -> Compensation:
        return Compensation(skill_key="undo", input_map={"v": sid})

    flow = FlowDefinition(
        name="map-compensate",
        steps=[
            _step("x", compensation=undo("x")),
            _step(
                "m",
                input_map={"v": "{{_item}}"},
                map_over="{{_trigger.xs}}",
                compensation=undo("m"),
            ),
            _step("b", "x", on_failure="compensate"),
        ],
    )
    tools = [
        _picky("x", calls, set()),
        _picky("m", calls, set()),
        _picky("b", calls, {"b"}),
        _picky("undo", calls, set()),
    ]
    rt = FlowRuntime(rt_store, tools=tools, **NS)
    result = rt.run(flow, {"xs": ["a", "b"]})
    assert (result.status, result.outcome) == ("failed", "compensated")
    assert [c for c in calls if c[0] == "undo"] == [("undo", "m"), ("undo", "x")]
    states = {s.step_key: s.state for s in rt.status(result.run_id).steps}
    assert states["m"] == "compensated" and states["x"] == "compensated" and states["b"] == "failed"


def test_a_run_that_halts_beside_its_approval_gate_ends_by_the_halt_without_asking(rt_store):
    """A read-only step fails with ``fallback`` in the superstep in which the approval gate
    asks: nothing is left to approve, so the run does not wait — it ends ``fallback`` with its
    hand-off, the gate recorded skipped, the side-effecting step never called."""
    calls: list[Any] = []
    flow = FlowDefinition(
        name="gate-halt",
        requires_approval=True,
        steps=[
            _step("r2", side_effects=False),
            _step("r1", "r2", side_effects=False, on_failure="fallback"),
            _step("send", "r2", side_effects=True),
        ],
    )
    tools = [_picky("r2", calls, set()), _picky("r1", calls, {"r1"}), _picky("send", calls, set())]
    rt = FlowRuntime(rt_store, tools=tools, **NS)
    result = rt.run(flow, {})
    assert (result.status, result.outcome) == ("fallback", "fallback") and result.handoff
    assert [name for name, _ in calls] == ["r2", "r1"]
    record = rt.status(result.run_id)
    assert (record.state, record.outcome) == ("failed", "fallback")
    assert {s.step_key: s.state for s in record.steps} == {
        "r2": "completed",
        "r1": "failed",
        "send": "skipped",
        "__approval__": "skipped",
    }


def test_another_namespace_cannot_see_or_touch_a_run(rt_store):
    flow = FlowDefinition(name="mine", steps=[_step("a")])
    result = FlowRuntime(rt_store, tools=[Recorder().make("a")], **NS).run(flow, {})
    other = FlowRuntime(
        rt_store, tools=[Recorder().make("a")], user_id="intruder", agent_id=NS["agent_id"]
    )
    for call in (other.status, other.history, other.cancel, other.resume):
        with pytest.raises(NotFoundError, match="no flow run"):
            call(result.run_id)
    assert rt_store.list_flow_runs(user_id="intruder", agent_id=NS["agent_id"]) == []


# ---------------------------------------------------------------- retries and timeouts


def test_retries_any_exception_with_backoff_and_records_each_attempt(rt_store):
    rec = Recorder(fail={"a": 2})
    flow = FlowDefinition(name="retry", steps=[_step("a", retry_max=2, retry_backoff=0.05)])
    rt = FlowRuntime(rt_store, tools=[rec.make("a")], **NS)
    t0 = time.perf_counter()
    result = rt.run(flow, {})
    assert result.status == "completed" and rec.names() == ["a", "a", "a"]
    assert time.perf_counter() - t0 >= 0.05 + 0.1  # 0.05 s, then doubled
    moves = [m.to_state for m in rt.history(result.run_id) if m.step_key == "a"]
    assert moves == [
        "pending",
        "ready",
        "running",
        "failed",
        "ready",
        "running",
        "failed",
        "ready",
        "running",
        "completed",
    ]
    assert rt.status(result.run_id).steps[0].attempts == 3


def test_out_of_retries_with_stop_fails_the_run_naming_the_step(rt_store):
    rec = Recorder(fail={"b": -1})
    flow = FlowDefinition(
        name="stop", steps=[_step("a"), _step("b", "a", retry_max=1), _step("c", "b")]
    )
    rt = FlowRuntime(rt_store, tools=[rec.make(n) for n in "abc"], **NS)
    result = rt.run(flow, {})
    assert result.status == "failed" and result.failed_step == "b"
    assert "RuntimeError: b broke" in result.error and "step 'b'" in result.error
    assert rec.names() == ["a", "b", "b"]
    assert rt.status(result.run_id).state == "failed"
    assert result.results == {"a": {"from": "a", "v": "a"}}  # what completed, as the store has it


def test_a_sync_tool_that_hangs_times_out_and_the_run_goes_on_by_policy(rt_store):
    release = threading.Event()

    def hang(v: Any = None) -> str:
        release.wait(10)
        return "late"

    rec = Recorder()
    flow = FlowDefinition(
        name="hang",
        steps=[
            _step("h", skill_key="hang", timeout_seconds=0.2, retry_max=1, on_failure="continue"),
            _step("b"),
        ],
    )
    rt = FlowRuntime(rt_store, tools=[hang, rec.make("b")], **NS)
    t0 = time.perf_counter()
    result = rt.run(flow, {})
    elapsed = time.perf_counter() - t0
    release.set()
    assert result.status == "completed" and 0.4 <= elapsed < 2.0
    assert "StepTimeoutError" in result.errors["h"] and "0.2 s" in result.errors["h"]
    assert "runs on in the background" in result.errors["h"]
    assert {s.step_key: s.attempts for s in rt.status(result.run_id).steps}["h"] == 2


def test_an_async_tool_that_hangs_is_cancelled_at_its_timeout(rt_store):
    state = {"cancelled": False}

    @tool
    async def slow_fetch(v: str) -> str:
        """Fetch slowly."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return "never"

    flow = FlowDefinition(
        name="async-hang",
        steps=[_step("s", skill_key="slow_fetch", timeout_seconds=0.2, on_failure="fallback")],
    )
    rt = FlowRuntime(rt_store, tools=[slow_fetch], **NS)
    t0 = time.perf_counter()
    result = rt.run(flow, {})
    assert time.perf_counter() - t0 < 2.0
    assert (
        result.status == "fallback"
        and "StepTimeoutError" in result.error
        and "cancelled" in result.error
    )
    assert state["cancelled"] is True


def test_async_tools_run_and_return(rt_store):
    @tool
    async def double(v: str) -> str:
        """Double it."""
        await asyncio.sleep(0.01)
        return v * 2

    flow = FlowDefinition(
        name="async-ok", steps=[_step("d", skill_key="double", input_map={"v": "ab"})]
    )
    assert FlowRuntime(rt_store, tools=[double], **NS).run(flow, {}).output == "abab"


# ---------------------------------------------------------------- on_failure policies


def test_continue_records_the_error_and_runs_everything_else(rt_store):
    rec = Recorder(fail={"b": -1})
    flow = FlowDefinition(
        name="cont", steps=[_step("a"), _step("b", "a", on_failure="continue"), _step("c", "a")]
    )
    result = FlowRuntime(rt_store, tools=[rec.make(n) for n in "abc"], **NS).run(flow, {})
    assert result.status == "completed" and set(result.results) == {"a", "c"}
    assert "b broke" in result.errors["b"]


def test_skip_dependents_skips_the_downstream_steps_and_runs_the_independent_ones(rt_store):
    rec = Recorder(fail={"b": -1})
    flow = FlowDefinition(
        name="skip",
        steps=[
            _step("a"),
            _step("b", "a", on_failure="skip_dependents"),
            _step("c", "b"),
            _step("d", "c"),
            _step("e", "a"),
            _step("f", "e", "d"),
        ],
        output_step="e",
    )
    rt = FlowRuntime(rt_store, tools=[rec.make(n) for n in "abcdef"], **NS)
    result = rt.run(flow, {})
    assert result.status == "completed"
    assert sorted(rec.names()) == ["a", "b", "e"]
    assert set(result.skipped) == {"c", "d", "f"}
    assert "failed (on_failure=skip_dependents)" in result.skipped["c"]
    states = {s.step_key: s.state for s in rt.status(result.run_id).steps}
    assert states == {
        "a": "completed",
        "b": "failed",
        "c": "skipped",
        "d": "skipped",
        "e": "completed",
        "f": "skipped",
    }
    _legal(rt.history(result.run_id))


def test_fallback_hands_the_task_back_with_the_partial_results(rt_store):
    rec = Recorder(fail={"c": -1})
    flow = FlowDefinition(
        name="fb",
        steps=[
            _step("a"),
            _step("b", "a"),
            _step("c", "b", on_failure="fallback"),
            _step("d", "c"),
        ],
    )
    rt = FlowRuntime(rt_store, tools=[rec.make(n) for n in "abcd"], **NS)
    result = rt.run(flow, {})
    assert result.status == "fallback" and result.outcome == "fallback"
    assert rec.names() == ["a", "b", "c"]
    assert "step 'c' failed" in result.handoff and "Completed steps: a, b" in result.handoff
    assert "Not run: d" in result.handoff and '"from": "b"' in result.handoff
    assert "Carry on with the task" in result.handoff
    assert rt.status(result.run_id).outputs["handoff"] == result.handoff


def test_compensate_undoes_completed_steps_in_reverse_completion_order(rt_store):
    rec = Recorder(fail={"pay": -1})
    undo = [rec.make(f"undo_{n}", result="undone") for n in ("hold", "seat", "meal")]

    def comp(sid: str) -> Compensation:
        return Compensation(skill_key=f"undo_{sid}", input_map={"v": f"{{{{{sid}.from}}}}"})

    flow = FlowDefinition(
        name="book",
        steps=[
            _step("hold", compensation=comp("hold")),
            _step("seat", "hold", compensation=comp("seat")),
            _step("meal", "seat", compensation=comp("meal")),
            _step("pay", "meal", on_failure="compensate", retry_max=1),
            _step("mail", "pay"),
        ],
    )
    rt = FlowRuntime(
        rt_store, tools=[rec.make(n) for n in ("hold", "seat", "meal", "pay", "mail")] + undo, **NS
    )
    result = rt.run(flow, {})
    assert result.status == "failed" and result.outcome == "compensated"
    assert rec.names() == [
        "hold",
        "seat",
        "meal",
        "pay",
        "pay",
        "undo_meal",
        "undo_seat",
        "undo_hold",
    ]
    assert [v for n, v in rec.calls if n.startswith("undo_")] == ["meal", "seat", "hold"]
    states = {s.step_key: s.state for s in rt.status(result.run_id).steps}
    assert states["hold"] == states["seat"] == states["meal"] == "compensated"
    assert states["pay"] == "failed" and states["mail"] == "skipped"
    assert states["meal~compensate"] == "completed"
    _legal(rt.history(result.run_id))


def test_a_failing_compensation_is_reported_and_the_others_still_run(rt_store):
    rec = Recorder(fail={"b": -1, "undo_a2": -1})
    flow = FlowDefinition(
        name="comp-fail",
        steps=[
            _step("a1", compensation=Compensation(skill_key="undo_a1", input_map={"v": "x"})),
            _step("a2", "a1", compensation=Compensation(skill_key="undo_a2", input_map={"v": "y"})),
            _step("b", "a2", on_failure="compensate"),
        ],
    )
    tools = [rec.make(n) for n in ("a1", "a2", "b", "undo_a1", "undo_a2")]
    result = FlowRuntime(rt_store, tools=tools, **NS).run(flow, {})
    assert result.outcome == "compensation_failed" and "undo_a2 broke" in result.error
    assert rec.names()[-2:] == ["undo_a2", "undo_a1"]


def test_an_unknown_compensation_tool_is_a_validation_error_naming_the_field():
    flow = FlowDefinition(
        name="bad-comp", steps=[_step("a", compensation=Compensation(skill_key="no_such_tool"))]
    )
    with pytest.raises(FlowValidationError, match="compensation.skill_key") as info:
        compile_flow(flow, tools=[Recorder().make("a")])
    assert info.value.step == "a"


# ---------------------------------------------------------------- parallelism, cancel, approval


def test_two_independent_read_only_steps_run_in_parallel(rt_store):
    both = threading.Barrier(2, timeout=30)  # each call waits until the other is in flight
    met: list[str] = []

    def meet(name: str) -> Any:
        def fn(v: Any = None) -> Any:
            both.wait()  # one after the other would time out here (BrokenBarrierError)
            met.append(name)
            return {"from": name}

        fn.__name__ = name
        return fn

    flow = FlowDefinition(
        name="par",
        steps=[
            _step("x", skill_key="slow1", side_effects=False),
            _step("y", skill_key="slow2", side_effects=False),
            _step("z", "x", "y"),
        ],
    )
    rt = FlowRuntime(rt_store, tools=[meet("slow1"), meet("slow2"), Recorder().make("z")], **NS)
    result = rt.run(flow, {})
    assert result.status == "completed", result
    assert sorted(met) == ["slow1", "slow2"]


def test_cancel_stops_a_running_flow_before_its_next_step(rt_store):
    rec = Recorder()
    flow = FlowDefinition(
        name="slow",
        steps=[
            _step("a", skill_key="s1"),
            _step("b", "a", skill_key="s2"),
            _step("c", "b", skill_key="s3"),
        ],
    )
    tools = [rec.make("s1", sleep=0.3), rec.make("s2", sleep=0.3), rec.make("s3")]
    rt = FlowRuntime(rt_store, tools=tools, **NS)
    started: list[str] = []
    box: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: box.update(r=rt.run(flow, {}, on_started=started.append))
    )
    worker.start()
    while not started:
        time.sleep(0.01)
    time.sleep(0.1)
    other = FlowRuntime(rt_store, tools=tools, **NS)  # as another process would
    assert other.cancel(started[0]).cancel_requested
    worker.join(5)
    result = box["r"]
    assert result.status == "cancelled" and rec.names() == ["s1"]
    states = {s.step_key: s.state for s in rt.status(result.run_id).steps}
    assert states == {"a": "completed", "b": "skipped", "c": "skipped"}
    assert rt.status(result.run_id).state == "cancelled"


def test_approval_pauses_before_the_first_side_effect_and_resumes_on_approve(rt_store):
    rec = Recorder()
    flow = FlowDefinition(
        name="refund",
        requires_approval=True,
        steps=[_step("look", side_effects=False), _step("refund", "look"), _step("mail", "refund")],
    )
    tools = [rec.make(n) for n in ("look", "refund", "mail")]
    rt = FlowRuntime(rt_store, tools=tools, **NS)
    result = rt.run(flow, {})
    assert result.status == "waiting" and rec.names() == ["look"]
    assert (
        result.interrupt["next_steps"] == ["refund"]
        and "look" in result.interrupt["results_so_far"]
    )
    assert rt.status(result.run_id).waiting_for_approval
    with pytest.raises(InvalidTransitionError, match="waits for approval"):
        rt.resume(result.run_id)
    done = FlowRuntime(rt_store, tools=tools, **NS).approve(result.run_id, comment="ok")
    assert done.status == "completed" and rec.names() == ["look", "refund", "mail"]
    gate = [m for m in rt.history(result.run_id) if m.step_key == "__approval__"]
    assert [m.to_state for m in gate] == ["pending", "ready", "running", "completed"]


def test_a_rejected_approval_cancels_the_run_with_no_side_effect(rt_store):
    rec = Recorder()
    flow = FlowDefinition(
        name="wire", requires_approval=True, steps=[_step("send"), _step("log", "send")]
    )
    rt = FlowRuntime(rt_store, tools=[rec.make("send"), rec.make("log")], **NS)
    result = rt.run(flow, {})
    assert result.status == "waiting" and rec.names() == []
    out = rt.reject(result.run_id, comment="too large")
    assert out.status == "cancelled" and out.outcome == "rejected" and rec.names() == []
    status = rt.status(result.run_id)
    assert status.state == "cancelled" and "too large" in status.error


def test_cancel_of_a_run_waiting_for_approval_ends_it_at_once(rt_store):
    flow = FlowDefinition(name="wait-cancel", requires_approval=True, steps=[_step("send")])
    rt = FlowRuntime(rt_store, tools=[Recorder().make("send")], **NS)
    result = rt.run(flow, {})
    assert rt.cancel(result.run_id).state == "cancelled"
    _legal(rt.history(result.run_id))


# ---------------------------------------------------------------- idempotency and bad input


def test_executors_that_take_an_idempotency_key_get_the_same_key_on_every_attempt(rt_store):
    seen: list[str] = []

    def charge(amount: int, idempotency_key: str) -> str:
        seen.append(idempotency_key)
        if len(seen) < 2:
            raise ConnectionError("gateway timeout")
        return "charged"

    flow = FlowDefinition(
        name="charge",
        steps=[FlowStep(id="c", skill_key="charge", input_map={"amount": 5}, retry_backoff=0.01)],
    )
    result = FlowRuntime(rt_store, tools=[charge], **NS).run(flow, {})
    assert result.output == "charged" and seen == [f"{result.run_id}:c"] * 2


def test_odd_outputs_are_stored_and_a_10_mb_output_does_not_break_the_run(rt_store):
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    def weird(v: Any = None) -> Any:
        return {"obj": Opaque(), "nan": float("nan"), "bytes": b"\x00\xff"}

    def big(v: Any = None) -> str:
        return "x" * (10 * 1024 * 1024)

    flow = FlowDefinition(
        name="odd", steps=[_step("w", skill_key="weird"), _step("b", "w", skill_key="big")]
    )
    rt = FlowRuntime(rt_store, tools=[weird, big], **NS)
    result = rt.run(flow, {})
    assert result.status == "completed" and len(result.output) == 10 * 1024 * 1024
    stored = {s.step_key: s.output for s in rt.status(result.run_id).steps}
    assert json.dumps(stored["w"])  # stored as JSON, whatever the tool returned
    assert isinstance(stored["b"], str) and len(stored["b"]) >= 1000


def test_a_flow_of_10k_steps_is_refused_with_a_clear_error():
    steps = [_step(f"s{i}", *([f"s{i - 1}"] if i else [])) for i in range(10_000)]
    flow = FlowDefinition(name="huge", steps=steps)
    t0 = time.perf_counter()
    with pytest.raises(
        FlowValidationError, match="10000 steps; a flow may have at most 1000"
    ) as info:
        compile_flow(flow, tools=[Recorder().make("s0")])
    # Refused before any work that grows with the steps: no hang (issue 25's 5 s), not a speed target.
    assert "map_over" in str(info.value) and time.perf_counter() - t0 < 5.0


def test_a_long_chain_runs_past_langgraphs_default_recursion_limit(rt_store):
    rec = Recorder()
    steps = [_step(f"s{i}", *([f"s{i - 1}"] if i else []), skill_key="t") for i in range(40)]
    flow = FlowDefinition(name="long", steps=steps)
    result = FlowRuntime(rt_store, tools=[rec.make("t")], **NS).run(flow, {})
    assert result.status == "completed" and len(rec.calls) == 40


def test_inputs_take_their_schema_defaults(rt_store):
    rec = Recorder()
    flow = FlowDefinition(
        name="defaults",
        steps=[_step("a", input_map={"v": "{{_trigger.limit}}"})],
        input_schema={"type": "object", "properties": {"limit": {"type": "integer", "default": 3}}},
    )
    assert FlowRuntime(rt_store, tools=[rec.make("a")], **NS).run(flow, {}).output == {
        "from": "a",
        "v": 3,
    }


# ---------------------------------------------------------------- the journals agree


@pytest.mark.parametrize("kind", ["memory", "sqlalchemy", "driver"])
def test_every_step_journal_records_the_same_states_and_transitions(rt_store, kind):
    from soloflow_core.flow.journal import InMemoryStepJournal
    from soloflow_core.store.driver_journal import DriverStepJournal
    from soloflow_core.store.step_journal import StoreStepJournal

    flow = FlowDefinition(name="j", steps=[_step("a")])
    run_id = rt_store.start_flow_run(flow, {}, **NS)
    db = rt_store.db
    journal = {
        "memory": lambda: InMemoryStepJournal(run_id),
        "sqlalchemy": lambda: StoreStepJournal(db, run_id),
        "driver": lambda: DriverStepJournal(db, run_id),
    }[kind]()
    first = journal.begin("a", "a")
    assert (first.done, first.attempt, first.idempotency_key) == (False, 1, f"{run_id}:a")
    journal.failed("a", "boom", retry=True)
    assert journal.begin("a", "a").attempt == 2
    journal.succeeded("a", {"x": [1, 2]})
    again = journal.begin("a", "a")
    assert again.done and again.output == {"x": [1, 2]}
    journal.begin("b", "b")  # running when "the process died"
    crashed = journal.begin("b", "b")
    assert crashed.attempt == 2 and not crashed.done
    journal.succeeded("b", "ok")
    journal.skipped("c", "c", "upstream failed")
    journal.compensated("a", "undone")
    with pytest.raises(InvalidTransitionError, match="'skipped' to 'running'"):
        journal.begin("c", "c")
    assert journal.state_of("a") == "compensated" and journal.state_of("c") == "skipped"
    assert [(k, out) for k, _, out in journal.completed_order()] == [
        ("a", {"x": [1, 2]}),
        ("b", "ok"),
    ]
    if kind != "memory":
        moves = [
            (m.step_key, m.from_state, m.to_state)
            for m in rt_store.flow_run_history(run_id, **NS)
            if m.step_key is not None
        ]
        assert moves == [
            ("a", None, "pending"),
            ("a", "pending", "ready"),
            ("a", "ready", "running"),
            ("a", "running", "failed"),
            ("a", "failed", "ready"),
            ("a", "ready", "running"),
            ("a", "running", "completed"),
            ("b", None, "pending"),
            ("b", "pending", "ready"),
            ("b", "ready", "running"),
            ("b", "running", "failed"),
            ("b", "failed", "ready"),
            ("b", "ready", "running"),
            ("b", "running", "completed"),
            ("c", None, "pending"),
            ("c", "pending", "skipped"),
            ("a", "completed", "compensated"),
        ]
    details = (
        [d for _, k, a, b, d in journal.transitions if (k, a, b) == ("b", "running", "failed")]
        if kind == "memory"
        else [
            m.detail
            for m in rt_store.flow_run_history(run_id, **NS)
            if (m.step_key, m.from_state, m.to_state) == ("b", "running", "failed")
        ]
    )
    assert details == [RERUN]


def _checkpoint_count(rt: _FlowRuntime, run_id: str) -> int:
    return sum(1 for _ in rt.checkpointer.list({"configurable": {"thread_id": run_id}}))


def test_retention_deletes_an_ended_runs_checkpoints_and_keep_leaves_them_for_prune(rt_store):
    from datetime import UTC, datetime, timedelta

    flow = FlowDefinition(name="keep", steps=[_step("a"), _step("b", "a")])
    rt = FlowRuntime(rt_store, tools=[Recorder().make("a"), Recorder().make("b")], **NS)
    gone = rt.run(flow, {})
    keeper = FlowRuntime(
        rt_store, tools=[Recorder().make("a"), Recorder().make("b")], retention="keep", **NS
    )
    kept = keeper.run(flow, {})
    rt.close()  # waits for the background deletions
    assert _checkpoint_count(keeper, gone.run_id) == 0
    assert _checkpoint_count(keeper, kept.run_id) > 0
    assert rt.status(gone.run_id).state == "completed"  # the store keeps the history
    assert keeper.prune(older_than=datetime.now(UTC) - timedelta(days=1)) == 0
    assert keeper.prune(older_than=datetime.now(UTC) + timedelta(seconds=1)) >= 1
    assert _checkpoint_count(keeper, kept.run_id) == 0
    assert len(rt.history(kept.run_id)) > 4


def test_parallel_completions_of_one_run_get_distinct_sequence_numbers(rt_store):
    """Steps completing at the same moment (threads racing on one run) are ordered without
    ties, and the one-statement paths leave the same records as the checked ones."""
    import sqlalchemy as sa

    from soloflow_core.store import schema as t

    flow = FlowDefinition(name="race", steps=[_step(f"p{i}") for i in range(8)])
    run_id = rt_store.start_flow_run(flow, {}, owner="test", **NS)
    journal = rt_store.step_journal(run_id)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def step(i: int) -> None:
        try:
            assert not journal.begin(f"p{i}", f"p{i}").done
            barrier.wait()
            journal.succeeded(f"p{i}", {"i": i} if i % 2 else f"out-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=step, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    s = t.flow_step_runs.c
    with rt_store.engine.connect() as conn:
        seqs = sorted(conn.execute(sa.select(s.completed_seq).where(s.run_id == run_id)).scalars())
    assert (
        len(set(seqs)) == 8 and None not in seqs
    )  # no ties (SQLite: 1..8; PostgreSQL: a sequence)
    assert [k for k, _, _ in journal.completed_order()] != []
    again = journal.begin("p3", "p3")  # completed: never called again, its output kept
    assert again.done and again.output == {"i": 3}
    # A string output comes back as that string (PostgreSQL's driver decodes jsonb itself).
    assert journal.begin("p2", "p2").output == "out-2"
    history = rt_store.flow_run_history(run_id, **NS)
    _legal(history)
    assert sum(1 for m in history if m.to_state == "completed") == 8
    rt_store.request_cancel(run_id, **NS)
    late = journal.begin("p9", "p9")  # a cancelled run starts no new step
    assert late.cancelled and not late.done
    rt_store.finish_flow_run(run_id, status="cancelled", outcome="cancelled")
    assert rt_store.get_flow_run(run_id, **NS).state == "cancelled"
    with pytest.raises(InvalidTransitionError):
        rt_store.finish_flow_run(run_id, status="completed")


def test_retention_deletes_in_batches_and_leaves_other_runs_alone(rt_store):
    """Runs ending close together are deleted in one batch when the runtime closes; a
    checkpointer passed in deletes at once; runs of a `keep` runtime are untouched."""
    from soloflow_langgraph.runtime.support import delete_checkpoints

    flow = FlowDefinition(name="batch", steps=[_step("a"), _step("b", "a")])
    tools = [Recorder().make("a"), Recorder().make("b")]
    keeper = FlowRuntime(rt_store, tools=tools, retention="keep", **NS)
    kept = [keeper.run(flow, {}).run_id for _ in range(2)]
    rt = FlowRuntime(rt_store, tools=tools, **NS)
    gone = [rt.run(flow, {}).run_id for _ in range(5)]
    rt.close()
    assert [_checkpoint_count(keeper, r) for r in gone] == [0] * 5
    assert all(_checkpoint_count(keeper, r) > 0 for r in kept)
    delete_checkpoints(keeper.checkpointer, [kept[0], "frun_nobody"])  # unknown ids are no error
    assert _checkpoint_count(keeper, kept[0]) == 0 and _checkpoint_count(keeper, kept[1]) > 0
    assert all(rt.status(r).state == "completed" for r in gone)


def test_a_run_by_name_picks_up_a_newly_registered_version_at_once(rt_store):
    """The runtime caches the newest definition it knows; a version registered by anyone
    after that is the one the next run uses, and a run of an explicit older definition still
    works."""
    tools = [Recorder().make("a"), Recorder().make("b")]
    v1 = FlowDefinition(name="versioned", steps=[_step("a")])
    rt_store.register_flow(v1, source="user-submitted", **NS)
    rt = FlowRuntime(rt_store, tools=tools, **NS)
    first = rt.run("versioned", {})
    assert first.status == "completed" and set(first.results) == {"a"}
    assert rt.status(first.run_id).flow_version == 1
    other = Store.open(str(rt_store.engine.url.render_as_string(hide_password=False)))
    try:
        other.register_flow(
            FlowDefinition(name="versioned", steps=[_step("a"), _step("b", "a")]),
            source="user-submitted",
            **NS,
        )
    finally:
        other.close()
    second = rt.run("versioned", {})
    assert set(second.results) == {"a", "b"} and rt.status(second.run_id).flow_version == 2
    old = rt.run(rt.flow("versioned", 1), {})
    assert set(old.results) == {"a"}
    assert rt.run("versioned", {}).results.keys() == {"a", "b"}
    with pytest.raises(NotFoundError):
        rt.run("no-such-flow", {})


def test_journal_commits_leave_wal_checkpoints_to_a_thread_of_their_own(tmp_path):
    """The journal's SQLite writer never checkpoints inside a step's commit; a background
    thread does, so the WAL does not grow without bound; the connection goes back to the pool
    with SQLite's automatic checkpoints on."""
    from soloflow_core.store import journal_io as sj

    db = tmp_path / "wal.db"
    store = Store.open(f"sqlite:///{db}")
    try:
        flow = FlowDefinition(name="wal", steps=[_step("a")])
        run_id = store.start_flow_run(flow, {}, owner="test", **NS)
        journal = store.step_journal(run_id)
        pairs = 5 * sj.CHECKPOINT_EVERY
        biggest = 0
        for i in range(pairs):
            journal.begin(f"s{i}", "s")
            journal.succeeded(f"s{i}", "x" * 3000)  # ~1 page of output per step
            if i % 50 == 0:
                time.sleep(0.01)  # let the checkpoint thread run
                biggest = max(biggest, db.with_name("wal.db-wal").stat().st_size)
        writer = sj._SQLITE_WRITERS[store.engine]
        assert writer.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert writer.checkpoints.thread is not None and writer.checkpoints.thread.is_alive()
        # Without checkpoints the WAL holds every frame written: ~44 MB here; with them it
        # restarts after each background checkpoint and stays near 200 commits' worth.
        assert biggest < 16_000_000, biggest
        raw = writer.raw
    finally:
        store.close()
    assert writer.checkpoints.thread is not None and not writer.checkpoints.thread.is_alive()
    assert raw.driver_connection is None  # given back and closed with the pool


def test_a_run_by_name_validates_the_callers_inputs_against_the_newest_version(rt_store):
    """The cached definition is only a guess: inputs that fit a version registered since (by
    another process) run that version, and the caller's own inputs — not the old version's
    defaults — are what it gets."""
    schema_v1 = {"type": "object", "properties": {"mode": {"type": "string", "default": "fast"}}}
    v1 = FlowDefinition(
        name="evolving",
        steps=[_step("a", input_map={"v": "{{_trigger.mode}}"})],
        input_schema=schema_v1,
    )
    rt_store.register_flow(v1, source="user-submitted", **NS)
    rt = FlowRuntime(rt_store, tools=[Recorder().make("a")], **NS)
    assert rt.run("evolving", {}).output == {"from": "a", "v": "fast"}
    schema_v2 = {"type": "object", "properties": {"lang": {"type": "string", "default": "en"}}}
    v2 = FlowDefinition(
        name="evolving",
        steps=[_step("a", input_map={"v": "{{_trigger.lang}}"})],
        input_schema=schema_v2,
    )
    other = Store.open(str(rt_store.engine.url.render_as_string(hide_password=False)))
    try:
        other.register_flow(v2, source="user-submitted", **NS)
    finally:
        other.close()
    started: list[str] = []
    fits_v2 = rt.run("evolving", {"lang": "fr"}, on_started=started.append)  # unknown to v1
    assert fits_v2.status == "completed" and fits_v2.output == {"from": "a", "v": "fr"}
    assert started == [fits_v2.run_id] and rt.status(fits_v2.run_id).flow_version == 2
    # v1 cached again by an explicit lookup does not become "the newest".
    rt.flow("evolving", 1)
    plain = rt.run("evolving", {})
    assert plain.output == {"from": "a", "v": "en"} and rt.status(plain.run_id).flow_version == 2
    with pytest.raises(FlowValidationError, match="unknown input 'mode'"):
        rt.run("evolving", {"mode": "slow"})  # fits no version that is the newest


# ---------------------------------------------------------------- the journal's order


def test_a_step_is_recorded_running_before_its_call_and_its_history_is_in_order(rt_store):
    """b waits for a alone: a's deferred completion and b's begin are written before b is
    called — b finds itself recorded running with its key and is called once."""
    rec = Recorder()
    seen: dict[str, Any] = {}

    def b(v: Any = None) -> Any:
        seen["b"] = [(s.step_key, s.state) for s in rt_store.get_flow_run(seen["run"], **NS).steps]
        return rec.make("b")(v)

    b.__name__ = "b"
    flow = FlowDefinition(name="in-order", steps=[_step("a"), _step("b", "a"), _step("c", "b")])
    rt = FlowRuntime(rt_store, tools=[rec.make("a"), b, rec.make("c")], **NS)
    result = rt.run(flow, {}, on_started=lambda rid: seen.update(run=rid))
    assert result.status == "completed" and rec.names() == ["a", "b", "c"]
    # Recorded before the call: running, after a's completion.
    assert seen["b"] == [("a", "completed"), ("b", "running")]
    history = rt.history(result.run_id)
    _legal(history)
    moves = [(m.step_key, m.to_state) for m in history if m.to_state in ("running", "completed")]
    assert moves == [
        (None, "running"),
        ("a", "running"),
        ("a", "completed"),
        ("b", "running"),
        ("b", "completed"),
        ("c", "running"),
        ("c", "completed"),
        (None, "completed"),
    ]
    status = rt.status(result.run_id)
    assert [(s.step_key, s.attempts, s.idempotency_key) for s in status.steps] == [
        (k, 1, f"{result.run_id}:{k}") for k in "abc"
    ]


def test_the_runtime_checkpointer_is_langgraphs_own_and_closes_with_the_runtime(rt_store):
    """The runtime opens LangGraph's own saver class for the store's database (no subclass,
    nothing set on it), runs a diamond on it, and closes its connection on ``close()``."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    rec = Recorder()
    flow = FlowDefinition(
        name="diamond", steps=[_step("a"), _step("b", "a"), _step("c", "a"), _step("d", "b", "c")]
    )
    rt = FlowRuntime(rt_store, tools=[rec.make(k) for k in "abcd"], **NS)
    saver = rt.checkpointer
    backend = rt_store.engine.dialect.name
    expected = {"postgresql": PostgresSaver, "sqlite": SqliteSaver}[backend]
    if backend == "sqlite" and rt_store.engine.url.database in (None, "", ":memory:"):
        expected = InMemorySaver
    assert type(saver) is expected
    assert not [k for k in vars(saver) if k.startswith("soloflow")]
    result = rt.run(flow, {})
    assert result.status == "completed" and sorted(rec.names()) == ["a", "b", "c", "d"]
    history = rt.history(result.run_id)
    _legal(history)
    order = [(m.step_key, m.to_state) for m in history if m.to_state in ("running", "completed")]
    assert order.index(("d", "running")) > max(
        order.index(("b", "completed")), order.index(("c", "completed"))
    )
    rt.close()
    if expected is PostgresSaver:
        assert saver.conn.closed
    elif expected is SqliteSaver:
        with pytest.raises(sqlite3.ProgrammingError):
            saver.conn.execute("SELECT 1")


def test_a_start_and_each_begin_are_stored_as_one_row_and_listed_as_every_transition(rt_store):
    """The store keeps a run's start (draft → active → running) as one row, and a step's usual
    begin (pending → ready → running) and completion in the step's own row (migration 0005); the
    history lists every transition they stand for, with its time."""
    import sqlalchemy as sa

    from soloflow_core.store import schema as t

    rec = Recorder()
    flow = FlowDefinition(name="compact", steps=[_step("a"), _step("b", "a")])
    rt = FlowRuntime(rt_store, tools=[rec.make("a"), rec.make("b")], **NS)
    result = rt.run(flow, {})
    assert result.status == "completed"
    with rt_store.engine.connect() as conn:
        stored = conn.execute(
            sa.select(sa.func.count())
            .select_from(t.flow_transitions)
            .where(t.flow_transitions.c.run_id == result.run_id)
        ).scalar()
        s = t.flow_step_runs.c
        kept = conn.execute(
            sa.select(s.step_key)
            .where(s.run_id == result.run_id, s.begun_at.is_not(None), s.done_at.is_not(None))
            .order_by(s.step_key)
        ).scalars()
        assert list(kept) == ["a", "b"]
    assert stored == 1 + 1  # the start and the end; each step's begin and completion are in its row
    history = rt.history(result.run_id)
    _legal(history)
    assert [(m.step_key, m.from_state, m.to_state, m.detail) for m in history[:3]] == [
        (None, None, "draft", None),
        (None, "draft", "active", "inputs checked"),
        (None, "active", "running", rt.owner),
    ]
    assert [m.to_state for m in history if m.step_key == "b"] == [
        "pending",
        "ready",
        "running",
        "completed",
    ]
    assert len({m.at for m in history if m.step_key == "b" and m.to_state != "completed"}) == 1
