"""The journal's compact writes: a run's start riding in its first checkpoint save
(PostgreSQL), and a step's usual begin and completion kept in the step's own row (``implied``)
and written out as transition rows before any other move of the step — on real SQLite files
and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from soloflow_core.errors import StoreError
from soloflow_core.flow.fsm import check_run_transition, check_step_transition
from soloflow_core.models import Compensation, FlowDefinition, FlowStep
from soloflow_core.store import Store, flowruns
from soloflow_core.store import schema as t
from soloflow_langgraph.runtime import FlowRuntime

NS = {"user_id": "carry-user", "agent_id": "carry-agent"}


def _step(sid: str, *deps: str, **kw: Any) -> FlowStep:
    kw.setdefault("retry_backoff", 0.01)
    kw.setdefault("retry_max", 0)
    kw.setdefault("input_map", {"v": sid})
    return FlowStep(id=sid, skill_key=kw.pop("skill_key", sid), depends_on=list(deps), **kw)


def _tool(name: str, calls: list[str], fail: dict[str, int] | None = None) -> Any:
    left = fail if fail is not None else {}

    def fn(v: Any = None) -> Any:
        calls.append(name)
        if left.get(name, 0):
            left[name] -= 1
            raise RuntimeError(f"{name} broke")
        return {"from": name}

    fn.__name__ = name
    return fn


@pytest.fixture()
def runtimes(store: Store) -> Iterator[list[FlowRuntime]]:
    made: list[FlowRuntime] = []
    try:
        yield made
    finally:
        for rt in made:
            rt.close()


def _runtime(store: Store, made: list[FlowRuntime], tools: list[Any], **kw: Any) -> FlowRuntime:
    rt = FlowRuntime(store, tools=tools, **NS, **kw)
    made.append(rt)
    return rt


def _spy_rides(rt: FlowRuntime) -> list[Any]:
    """The rides the runtime's checkpointer is handed (PostgreSQL), in order."""
    rides: list[Any] = []
    offer = rt.checkpointer.ride

    def ride(thread_id: str, statements: Any) -> Any:
        rides.append(offer(thread_id, statements))
        return rides[-1]

    rt.checkpointer.ride = ride
    return rides


def _spy_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Runs recorded by a write of their own (``start_flow_run`` / ``start_latest_flow_run``)."""
    own: list[str] = []
    for name in ("start_flow_run", "start_latest_flow_run"):
        real = getattr(Store, name)

        def spy(self: Any, *a: Any, _real: Any = real, **kw: Any) -> Any:
            out = _real(self, *a, **kw)
            own.append(out)
            return out

        monkeypatch.setattr(Store, name, spy)
    return own


def _legal(history: list[Any]) -> None:
    """Every transition is one the state machines allow, in the order listed."""
    run_state: str | None = None
    steps: dict[str, str | None] = {}
    for m in history:
        if m.step_key is None:
            assert m.from_state == run_state or m.from_state is None, m
            check_run_transition("r", run_state, m.to_state)
            run_state = m.to_state
        elif m.from_state is None:
            assert m.to_state == "pending" and m.step_key not in steps, m
            steps[m.step_key] = "pending"
        else:
            assert m.from_state == steps.get(m.step_key), m
            check_step_transition("r", m.step_key, m.from_state, m.to_state)
            steps[m.step_key] = m.to_state


def _threads(rt: FlowRuntime) -> set[str]:
    return {c.config["configurable"]["thread_id"] for c in rt.checkpointer.list(None)}


def _run_ids(store: Store) -> set[str]:
    with store.engine.connect() as conn:
        return set(conn.execute(sa.select(t.flow_runs.c.id).where(t.flow_runs.c.user_id == NS["user_id"]))
                   .scalars())


# ---------------------------------------------------------------- the run's start


def test_a_new_runs_start_rides_in_its_first_checkpoint_save(store, runtimes, monkeypatch):
    """On PostgreSQL a new run (no id or on_started from the caller) is recorded by its first
    checkpoint save, with its first step's begin, before that step is called; elsewhere, and
    with on_started, by a write of its own first. Either way the record is the same."""
    calls: list[str] = []
    flow = FlowDefinition(name="rides", steps=[_step("a"), _step("b", "a")])
    store.register_flow(flow, source="user-submitted", **NS)
    rt = _runtime(store, runtimes, [_tool("a", calls), _tool("b", calls)])
    carries = getattr(rt.checkpointer, "carries_journal", False)
    assert carries == (store.engine.dialect.name == "postgresql")
    rides = _spy_rides(rt) if carries else []
    own = _spy_starts(monkeypatch)

    result = rt.run("rides", {"x": 1})
    assert result.status == "completed" and calls == ["a", "b"]
    if carries:
        assert own == []
        first = rides[0]
        assert first.statements[0][0].startswith("WITH run AS (INSERT INTO sf_flow_runs")
        assert first.rows is not None and first.rows[0]  # it recorded the run, in the save
    else:
        assert own == [result.run_id]
    rec = rt.status(result.run_id)
    assert (rec.state, rec.flow_version, rec.inputs) == ("completed", 1, {"x": 1})
    history = rt.history(result.run_id)
    _legal(history)
    assert [(m.step_key, m.to_state) for m in history if m.to_state in ("running", "completed")] == [
        (None, "running"), ("a", "running"), ("a", "completed"), ("b", "running"), ("b", "completed"),
        (None, "completed")]

    seen: list[str] = []
    again = rt.run("rides", {}, on_started=seen.append)  # promised the id once recorded: its own write
    assert seen == [again.run_id] and again.run_id in own


def test_a_carried_start_that_finds_a_newer_version_leaves_nothing_and_runs_the_newest(store, runtimes):
    """The runtime starts the version it cached; when the start (in the first save on
    PostgreSQL) finds that a newer one was registered, nothing of the attempt is kept — no run
    row, no checkpoint, no step called — and the newest version runs."""
    calls: list[str] = []
    store.register_flow(FlowDefinition(name="moving", steps=[_step("a")]), source="user-submitted", **NS)
    rt = _runtime(store, runtimes, [_tool("a", calls), _tool("b", calls)], retention="keep")
    first = rt.run("moving", {})
    assert first.status == "completed" and calls == ["a"]
    other = Store.open(store.engine.url.render_as_string(hide_password=False))
    try:
        other.register_flow(FlowDefinition(name="moving", steps=[_step("b")]), source="user-submitted", **NS)
    finally:
        other.close()
    second = rt.run("moving", {})
    assert second.status == "completed" and calls == ["a", "b"]
    assert rt.status(second.run_id).flow_version == 2
    assert _run_ids(store) == {first.run_id, second.run_id}
    assert _threads(rt) == {first.run_id, second.run_id}


def test_a_carried_start_that_fails_raises_and_leaves_nothing(store, runtimes, monkeypatch):
    """A start that cannot be written raises StoreError to the caller — from its own write,
    or (PostgreSQL) from the first save and then the journal's own write — and leaves no run
    row, no checkpoint, and no step called."""
    calls: list[str] = []
    flow = FlowDefinition(name="broken-start", steps=[_step("a")])
    store.register_flow(flow, source="user-submitted", **NS)
    rt = _runtime(store, runtimes, [_tool("a", calls)], retention="keep")
    monkeypatch.setattr(flowruns, "_pg_start", lambda *a: ("INSERT INTO sf_no_such_table VALUES (%s)", (1,)))
    # The SQLite start's own statement takes 14 parameters.
    monkeypatch.setattr(flowruns, "_SQLITE_START_LATEST", f"INSERT INTO sf_no_such_table VALUES ({', '.join('?' * 14)})")
    with pytest.raises(StoreError, match="sf_no_such_table"):
        rt.run("broken-start", {})
    assert calls == [] and _run_ids(store) == set() and _threads(rt) == set()


# ---------------------------------------------------------------- implied transitions


def _implied(store: Store, run_id: str) -> dict[str, int]:
    s = t.flow_step_runs.c
    with store.engine.connect() as conn:
        return dict(conn.execute(sa.select(s.step_key, s.implied).where(s.run_id == run_id)).all())


def _stored(store: Store, run_id: str) -> list[tuple[str | None, str | None, str]]:
    c = t.flow_transitions.c
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(c.step_key, c.from_state, c.to_state)
                                               .where(c.run_id == run_id).order_by(c.id)).all()]


def test_a_retried_step_writes_its_implied_begin_out_before_its_failure(store, runtimes):
    """b's first attempt is begun ahead (implied in its row); when it fails, that begin is
    written out as a row first, so its retry's new start time rewrites nothing: the history
    keeps both attempts, in order, with their own times."""
    calls: list[str] = []
    flow = FlowDefinition(name="retry", steps=[_step("a"), _step("b", "a", retry_max=1)])
    rt = _runtime(store, runtimes, [_tool("a", calls), _tool("b", calls, fail={"b": 1})])
    result = rt.run(flow, {})
    assert result.status == "completed" and calls == ["a", "b", "b"]
    assert _implied(store, result.run_id) == {"a": 3, "b": 2}  # b's completion still implied
    assert [r for r in _stored(store, result.run_id) if r[0] == "b"] == [
        ("b", None, "running"), ("b", "running", "failed"), ("b", "failed", "ready"), ("b", "ready", "running")]
    history = rt.history(result.run_id)
    _legal(history)
    b = [m for m in history if m.step_key == "b"]
    assert [m.to_state for m in b] == ["pending", "ready", "running", "failed", "ready", "running", "completed"]
    assert b[2].at < b[5].at <= b[6].at  # the first attempt's start kept its own time
    assert [m.at for m in b] == sorted(m.at for m in b)


def test_a_compensated_step_writes_its_implied_completion_out_first(store, runtimes):
    """a completes (begin and completion implied in its row); c fails with compensate: a's
    compensation moves it on, after writing its two implied moves out as rows, so its
    completion time survives and the history reads begin, completion, compensation."""
    calls: list[str] = []
    flow = FlowDefinition(name="undo", steps=[
        _step("a", compensation=Compensation(skill_key="undo_a", input_map={"v": "a"})),
        _step("c", "a", on_failure="compensate")])
    tools = [_tool("a", calls), _tool("undo_a", calls), _tool("c", calls, fail={"c": 1})]
    rt = _runtime(store, runtimes, tools)
    result = rt.run(flow, {})
    assert result.status == "failed" and result.outcome == "compensated"
    assert calls == ["a", "c", "undo_a"]
    assert _implied(store, result.run_id)["a"] == 0
    assert [r for r in _stored(store, result.run_id) if r[0] == "a"] == [
        ("a", None, "running"), ("a", "running", "completed"), ("a", "completed", "compensated")]
    history = rt.history(result.run_id)
    _legal(history)
    a = [m for m in history if m.step_key == "a"]
    assert [m.to_state for m in a] == ["pending", "ready", "running", "completed", "compensated"]
    assert a[2].at <= a[3].at < a[4].at


def test_the_history_of_a_parallel_layer_keeps_its_order_when_moves_are_written_out(store, runtimes):
    """b, c and d are begun together (on SQLite in one write, at one instant: listed by step
    key); writing c's implied begin out as a row, when c fails, leaves every entry listed
    before where it was — the history only grows at its end."""
    flow = FlowDefinition(name="layer", steps=[_step("b"), _step("c"), _step("d")])
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    journal.begin_ahead([("b", "b"), ("c", "c"), ("d", "d")])  # SQLite: one write; else each begins below
    for k in "bcd":
        assert journal.begin(k, k).attempt == 1
    journal.succeeded("b", 1)
    journal.flush()
    before = store.flow_run_history(run_id, **NS)
    _legal(before)
    begins = [m for m in before if m.to_state == "running" and m.step_key]
    assert [m.step_key for m in begins] == ["b", "c", "d"]
    if store.engine.dialect.name == "sqlite":
        assert len({m.at for m in begins}) == 1
    assert _implied(store, run_id) == {"b": 3, "c": 1, "d": 1}
    journal.failed("c", "RuntimeError: c broke", retry=True)
    after = store.flow_run_history(run_id, **NS)
    _legal(after)
    assert after[:len(before)] == before
    assert [(m.step_key, m.to_state) for m in after[len(before):]] == [("c", "failed"), ("c", "ready")]
    assert _implied(store, run_id) == {"b": 3, "c": 0, "d": 1}
