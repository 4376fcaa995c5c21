"""The journal's compact rows: a step's usual begin and completion kept in the step's own row,
each with its place in the run's history, not as transition rows — on real SQLite files and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from soloflow_core.flow.fsm import check_run_transition, check_step_transition
from soloflow_core.models import Compensation, FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.store import schema as t
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

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


def _run_ids(store: Store) -> set[str]:
    with store.engine.connect() as conn:
        return set(
            conn.execute(
                sa.select(t.flow_runs.c.id).where(t.flow_runs.c.user_id == NS["user_id"])
            ).scalars()
        )


# ---------------------------------------------------------------- the run's start


class _Unsaveable:
    """An input value the store keeps as its text but LangGraph's serde refuses to save."""


def test_a_first_save_that_fails_before_sending_anything_leaves_a_failed_run_and_no_running_step(
    store, runtimes
):
    """``durability="sync"``: LangGraph's first save of a run raises on the client side (an
    input it cannot serialise): the run ends recorded ``failed``, its first step never called
    nor left ``running``. (With the default ``"exit"`` a run's inputs are what its record
    keeps — the value's text — see tests/test_runtime_exit.py.)"""
    calls: list[str] = []
    flow = FlowDefinition(name="odd", steps=[_step("a")])
    store.register_flow(flow, source="user-submitted", **NS)
    rt = _runtime(store, runtimes, [_tool("a", calls)], retention="keep", durability="sync")
    result = rt.run("odd", {"x": _Unsaveable()})
    assert result.status == "failed" and calls == []
    rec = rt.status(result.run_id)
    assert rec.state == "failed" and [(s.step_key, s.state) for s in rec.steps] in (
        [],
        [("a", "skipped")],
    )
    assert _run_ids(store) == {result.run_id}
    _legal(rt.history(result.run_id))


# ---------------------------------------------------------------- moves kept in the step's row


def _kept(store: Store, run_id: str) -> dict[str, tuple[bool, bool]]:
    """Per step: whether its row keeps its begin, and its completion."""
    s = t.flow_step_runs.c
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(s.step_key, s.begun_at, s.done_at).where(s.run_id == run_id)
        ).all()
    return {k: (b is not None, d is not None) for k, b, d in rows}


def _stored(store: Store, run_id: str) -> list[tuple[str | None, str | None, str]]:
    c = t.flow_transitions.c
    with store.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.select(c.step_key, c.from_state, c.to_state)
                .where(c.run_id == run_id)
                .order_by(c.id)
            ).all()
        ]


def test_a_retried_step_keeps_its_first_begin_and_its_completion_in_its_row(store, runtimes):
    """b's first attempt is begun (kept in its row), fails, and is retried (stored
    rows), then completes (kept in its row): the history lists every move in order, the first
    attempt's start with its own time although the retry rewrote the row's ``started_at``."""
    calls: list[str] = []
    flow = FlowDefinition(name="retry", steps=[_step("a"), _step("b", "a", retry_max=1)])
    rt = _runtime(store, runtimes, [_tool("a", calls), _tool("b", calls, fail={"b": 1})])
    result = rt.run(flow, {})
    assert result.status == "completed" and calls == ["a", "b", "b"]
    assert _kept(store, result.run_id) == {"a": (True, True), "b": (True, True)}
    assert [r for r in _stored(store, result.run_id) if r[0] == "b"] == [
        ("b", "running", "failed"),
        ("b", "failed", "ready"),
        ("b", "ready", "running"),
    ]
    history = rt.history(result.run_id)
    _legal(history)
    b = [m for m in history if m.step_key == "b"]
    assert [m.to_state for m in b] == [
        "pending",
        "ready",
        "running",
        "failed",
        "ready",
        "running",
        "completed",
    ]
    assert b[2].at < b[5].at <= b[6].at  # the first attempt's start kept its own time
    assert rt.status(result.run_id).steps[1].started_at == b[5].at  # the row's own, rewritten


def test_a_compensated_step_keeps_its_completion_in_its_row(store, runtimes):
    """a completes (both moves kept in its row); c fails with compensate: a's compensation is
    stored, rewrites the row's ``finished_at``, and the history reads begin, completion (with
    its own time), compensation."""
    calls: list[str] = []
    flow = FlowDefinition(
        name="undo",
        steps=[
            _step("a", compensation=Compensation(skill_key="undo_a", input_map={"v": "a"})),
            _step("c", "a", on_failure="compensate"),
        ],
    )
    tools = [_tool("a", calls), _tool("undo_a", calls), _tool("c", calls, fail={"c": 1})]
    rt = _runtime(store, runtimes, tools)
    result = rt.run(flow, {})
    assert result.status == "failed" and result.outcome == "compensated"
    assert calls == ["a", "c", "undo_a"]
    assert _kept(store, result.run_id)["a"] == (True, True)
    assert [r for r in _stored(store, result.run_id) if r[0] == "a"] == [
        ("a", "completed", "compensated")
    ]
    history = rt.history(result.run_id)
    _legal(history)
    a = [m for m in history if m.step_key == "a"]
    assert [m.to_state for m in a] == ["pending", "ready", "running", "completed", "compensated"]
    assert a[2].at <= a[3].at < a[4].at
    assert rt.status(result.run_id).steps[0].finished_at == a[4].at


def test_a_history_is_in_the_order_moves_were_written_whatever_the_clocks_say(store, monkeypatch):
    """A run's history only grows at its end, in the order its moves were written — not by
    their times: a process whose clock is behind (another host, a clock stepped back) that
    carries the run on lists its moves after the earlier ones."""
    from soloflow_core.store import driver_journal, writer

    flow = FlowDefinition(name="clocks", steps=[_step("b"), _step("c"), _step("d")])
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    for k in "bcd":
        assert journal.begin(k, k).attempt == 1
    journal.succeeded("b", 1)
    journal.flush()
    before = store.flow_run_history(run_id, **NS)
    _legal(before)
    assert [m.step_key for m in before if m.to_state == "running" and m.step_key] == ["b", "c", "d"]

    real = writer.now
    monkeypatch.setattr(driver_journal, "now", lambda: real() - timedelta(seconds=30))
    later = store.step_journal(run_id, defer_completions=True)  # "another process", 30 s behind
    later.failed("c", "RuntimeError: c broke", retry=True)
    assert later.begin("c", "c").attempt == 2
    later.succeeded("c", 2)
    later.succeeded("d", 3)
    later.flush()
    after = store.flow_run_history(run_id, **NS)
    _legal(after)
    assert after[: len(before)] == before
    assert [(m.step_key, m.to_state) for m in after[len(before) :]] == [
        ("c", "failed"),
        ("c", "ready"),
        ("c", "running"),
        ("c", "completed"),
        ("d", "completed"),
    ]
    assert after[len(before)].at < before[-1].at  # written later, stamped earlier


def _as_listed_by_0004(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Stored rows, in id order, as the reader of schema 0004 listed them: a row from nothing
    to ``running`` stands for the three moves of a start or a begin."""
    out: list[tuple[Any, ...]] = []
    for at, key, old, new, detail in rows:
        if old is None and new == "running":
            first = ("draft", "active") if key is None else ("pending", "ready")
            out += [
                (at, key, None, first[0], None),
                (at, key, first[0], first[1], "inputs checked" if key is None else None),
                (at, key, first[1], new, detail),
            ]
        else:
            out.append((at, key, old, new, detail))
    return out


def test_downgrading_the_schema_writes_the_kept_moves_out_in_history_order(db_url):
    """Migration 0005's downgrade writes the moves kept in step rows out as transition rows,
    numbered so that the schema before it — which lists a history by row id — lists every
    run's history as it was, for runs whose moves were interleaved and partly stored."""
    from alembic import command
    from alembic.config import Config

    from soloflow_core.store.database import _MIGRATIONS

    store = Store.open(db_url)
    try:
        flow = FlowDefinition(name="down", steps=[_step("a"), _step("b", "a"), _step("c", "a")])
        runs = []
        for _ in range(2):
            run_id = store.start_flow_run(flow, {}, owner="test", **NS)
            runs.append((run_id, store.step_journal(run_id, defer_completions=True)))
        for key in "abc":  # the two runs' moves interleaved; b of the first run fails once
            for n, (_, journal) in enumerate(runs):
                assert not journal.begin(key, key).done
                if key == "b" and n == 0:
                    journal.failed("b", "RuntimeError: b broke", retry=True)
                    assert journal.begin("b", "b").attempt == 2
                journal.succeeded(key, n)
                journal.flush()
        for run_id, _ in runs:
            store.finish_flow_run(run_id, status="completed", outputs={}, outcome="completed")
        before = {
            run_id: [
                (m.at, m.step_key, m.from_state, m.to_state, m.detail)
                for m in store.flow_run_history(run_id, **NS)
            ]
            for run_id, _ in runs
        }
        assert len(before[runs[0][0]]) == 3 + 3 * 4 + 3 + 1  # start, steps (b's retry), end
        cfg = Config()
        cfg.set_main_option("script_location", str(_MIGRATIONS))
        with store.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0004")
        with store.engine.connect() as conn:
            for run_id, _ in runs:
                c = t.flow_transitions.c  # a table 0005 did not change
                rows = conn.execute(
                    sa.select(c.at, c.step_key, c.from_state, c.to_state, c.detail)
                    .where(c.run_id == run_id)
                    .order_by(c.id)
                ).all()
                assert _as_listed_by_0004(rows) == before[run_id]
            assert "begun_at" not in {
                col["name"] for col in sa.inspect(conn).get_columns("sf_flow_step_runs")
            }
    finally:
        store.close()
