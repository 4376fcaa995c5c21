"""Held-back completions: the runtime's journal writes a step's completion with the run's
next journal write (the next step's begin, one transaction), and a resumed run completes a
step whose output the checkpoint holds instead of calling it again — on real SQLite files
and PostgreSQL, the process ending in a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.store.step_journal import RECOVERED
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "deferred-user", "agent_id": "deferred-agent"}


def _chain(name: str, *ids: str) -> FlowDefinition:
    steps = [
        FlowStep(id=sid, skill_key=sid, depends_on=[ids[i - 1]] if i else [], input_map={"v": sid})
        for i, sid in enumerate(ids)
    ]
    return FlowDefinition(name=name, steps=steps)


def _states(store: Store, run_id: str) -> dict[str, str]:
    return {s.step_key: s.state for s in store.get_flow_run(run_id, **NS).steps}


def test_a_deferred_completion_is_written_with_the_next_begin_in_order(store: Store) -> None:
    flow = _chain("held", "a", "b")
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    assert not journal.begin("a", "a").done
    journal.succeeded("a", {"out": "a"})
    # Held: the store still has the step running ...
    assert _states(store, run_id) == {"a": "running"}
    assert not journal.begin("b", "b").done
    # ... until the next write, which records it first.
    assert _states(store, run_id) == {"a": "completed", "b": "running"}
    moves = [
        (m.step_key, m.from_state, m.to_state)
        for m in store.flow_run_history(run_id, **NS)
        if m.step_key is not None
    ]
    assert moves == [
        ("a", None, "pending"),
        ("a", "pending", "ready"),
        ("a", "ready", "running"),
        ("a", "running", "completed"),
        ("b", None, "pending"),
        ("b", "pending", "ready"),
        ("b", "ready", "running"),
    ]
    journal.succeeded("b", "text out")
    # A read sees what is deferred: it flushes first.
    assert journal.state_of("b") == "completed"
    steps = {s.step_key: s for s in store.get_flow_run(run_id, **NS).steps}
    assert steps["a"].output == {"out": "a"} and steps["b"].output == "text out"
    assert [k for k, _, _ in journal.completed_order()] == ["a", "b"]


def test_deferred_parallel_completions_keep_their_order_and_flush_writes_them(store: Store) -> None:
    flow = FlowDefinition(
        name="fan",
        steps=[
            FlowStep(id="p0", skill_key="p0"),
            FlowStep(id="p1", skill_key="p1"),
            FlowStep(id="p2", skill_key="p2"),
            FlowStep(id="d", skill_key="d", depends_on=["p0", "p1", "p2"]),
        ],
    )
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    for sid in ("p0", "p1", "p2"):
        journal.begin(sid, sid)
    barrier = threading.Barrier(3)

    def finish(sid: str) -> None:
        barrier.wait()
        journal.succeeded(sid, sid.upper())

    threads = [threading.Thread(target=finish, args=(sid,)) for sid in ("p2", "p0", "p1")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert set(_states(store, run_id).values()) == {"running"}
    journal.begin("d", "d")  # records the three deferred completions first
    assert _states(store, run_id) == {
        "p0": "completed",
        "p1": "completed",
        "p2": "completed",
        "d": "running",
    }
    journal.succeeded("d", None)
    journal.flush()
    assert _states(store, run_id)["d"] == "completed"
    order = [k for k, _, _ in journal.completed_order()]
    assert sorted(order[:3]) == ["p0", "p1", "p2"] and order[3] == "d"
    outputs = {s.step_key: s.output for s in store.get_flow_run(run_id, **NS).steps}
    assert outputs == {"p0": "P0", "p1": "P1", "p2": "P2", "d": None}


def _completions(store: Store, run_id: str) -> list[str]:
    return [
        m.step_key
        for m in store.flow_run_history(run_id, **NS)
        if (m.from_state, m.to_state) == ("running", "completed")
    ]


def test_deferred_parallel_completions_survive_a_failed_write_of_the_next_begin(
    store: Store, monkeypatch
) -> None:
    """Two parallel completions are deferred; the write that should record them with the next
    step's begin fails (a dropped connection, say). Both stay deferred, in their order, and the
    next write records each once; the step whose begin failed was not begun."""
    import soloflow_core.store.driver_journal as dj
    from soloflow_core.errors import StoreError

    flow = FlowDefinition(
        name="fan-fail",
        steps=[
            FlowStep(id="x", skill_key="x"),
            FlowStep(id="y", skill_key="y"),
            FlowStep(id="z", skill_key="z", depends_on=["x", "y"]),
        ],
    )
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    journal.begin("x", "x")
    journal.begin("y", "y")
    journal.succeeded("x", {"o": 1})
    journal.succeeded("y", {"o": 2})
    failures = {"left": 1}

    def failing(real):  # noqa: ANN001, ANN202 - wraps the driver call the journal makes
        def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if failures["left"]:
                failures["left"] -= 1
                raise StoreError("flow-run store write failed: connection reset (injected)")
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(dj, "driver_statement", failing(dj.driver_statement))
    monkeypatch.setattr(dj, "driver_transaction", failing(dj.driver_transaction))
    with pytest.raises(StoreError, match="injected"):
        journal.begin("z", "z")
    assert [k for k, _, _ in journal._deferred] == ["x", "y"]  # noqa: SLF001 - what is deferred is the point
    assert _states(store, run_id) == {"x": "running", "y": "running"}
    journal.flush()
    assert _states(store, run_id) == {"x": "completed", "y": "completed"}
    assert _completions(store, run_id) == ["x", "y"]
    assert [k for k, _, _ in journal.completed_order()] == ["x", "y"]


def test_a_deferred_completion_whose_commit_fails_is_given_back_and_written_once(
    store: Store, monkeypatch
) -> None:
    """The transaction that carries a deferred completion fails after its statements ran — at
    the commit, as far as the journal can tell (here: the transaction committed and then the
    call raised, the case of a commit whose outcome is unknown). The completion is given
    back, and writing it again finds the step completed: one completion, no second row."""
    import soloflow_core.store.driver_journal as dj
    from soloflow_core.errors import StoreError

    flow = _chain("commit-fail", "a", "b")
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    journal.begin("a", "a")
    journal.succeeded("a", {"out": 1})
    real = dj.driver_transaction
    failures = {"left": 1}

    def commit_then_fail(engine, sql, work):  # noqa: ANN001, ANN202
        out = real(engine, sql, work)
        if failures["left"]:
            failures["left"] -= 1
            raise StoreError("flow-run store write failed: connection lost at commit (injected)")
        return out

    monkeypatch.setattr(dj, "driver_transaction", commit_then_fail)
    with pytest.raises(StoreError, match="injected"):
        journal.skipped("b", "b", "not needed")  # a write that carries the deferred completion
    assert [k for k, _, _ in journal._deferred] == ["a"]  # noqa: SLF001
    monkeypatch.setattr(dj, "driver_transaction", real)
    journal.flush()
    assert _states(store, run_id) == {"a": "completed", "b": "skipped"}
    assert _completions(store, run_id) == ["a"]
    steps = {s.step_key: s for s in store.get_flow_run(run_id, **NS).steps}
    assert steps["a"].output == {"out": 1}


def test_a_deferred_completion_of_a_step_cancelled_meanwhile_takes_the_checked_path(
    store: Store,
) -> None:
    flow = _chain("cancel", "a", "b")
    run_id = store.start_flow_run(flow, {}, owner="test", **NS)
    journal = store.step_journal(run_id, defer_completions=True)
    journal.begin("a", "a")
    journal.succeeded("a", 1)
    store.request_cancel(run_id, **NS)
    begun = journal.begin("b", "b")
    assert begun.cancelled and _states(store, run_id) == {"a": "completed"}


def test_the_runtime_writes_one_journal_transaction_per_step(store: Store) -> None:
    calls: list[str] = []

    def make(sid: str):  # noqa: ANN202
        def fn(v: str) -> str:
            calls.append(v)
            return v.upper()

        fn.__name__ = sid
        return fn

    flow = _chain("one-write", "a", "b", "c")
    store.register_flow(flow, source="user", **NS)
    rt = FlowRuntime(store, tools=[make(s) for s in "abc"], **NS)
    try:
        res = rt.run("one-write", {})
    finally:
        rt.close()
    assert res.status == "completed" and res.output == "C" and calls == ["a", "b", "c"]
    rec = store.get_flow_run(res.run_id, **NS)
    assert {s.step_key: s.output for s in rec.steps} == {"a": "A", "b": "B", "c": "C"}
    assert all(s.state == "completed" for s in rec.steps)
    history = store.flow_run_history(res.run_id, **NS)
    # Every step completes before the next begins, and the run's end comes last.
    keys = [(m.step_key, m.to_state) for m in history if m.to_state in ("running", "completed")]
    assert keys == [
        (None, "running"),
        ("a", "running"),
        ("a", "completed"),
        ("b", "running"),
        ("b", "completed"),
        ("c", "running"),
        ("c", "completed"),
        (None, "completed"),
    ]


_CHILD = textwrap.dedent("""
    import os, sys
    from soloflow_core.store import Store
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    log = sys.argv[2]

    def make(sid):
        def fn(v):
            with open(log, "a") as f:
                f.write(sid + "\\n")
            return v.upper()
        fn.__name__ = sid
        return fn

    store = Store.open(sys.argv[1])
    durability = sys.argv[5] if len(sys.argv) > 5 else "exit"
    rt = FlowRuntime(
        store, tools=[make(s) for s in "abc"], user_id="deferred-user", agent_id="deferred-agent",
        durability=durability,
    )
    if sys.argv[3] == "kill":
        inner = rt.checkpointer.put
        last = sys.argv[4]

        def put(config, checkpoint, metadata, new_versions):
            out = inner(config, checkpoint, metadata, new_versions)
            if last in (checkpoint["channel_values"].get("results") or {}):
                os._exit(17)  # the step's output is saved in the checkpoint
            return out

        rt.checkpointer.put = put
        rt.run("resume-me", {}, on_started=lambda rid: print(rid, flush=True))
    else:
        print(rt.resume(sys.argv[4]).output, flush=True)
        rt.close()
""")


def test_a_process_ending_after_a_call_returned_leaves_it_to_be_recovered_not_called_again(
    db_url: str, tmp_path: Path
) -> None:
    """``durability="sync"``: the process ends once the last step's output is in a checkpoint
    (its completion still deferred); resume recovers it from there."""
    store = Store.open(db_url)
    try:
        store.register_flow(_chain("resume-me", "a", "b", "c"), source="user", **NS)
        log = tmp_path / "calls.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        # The last step's completion is deferred to the run's end (no step waits for it): the
        # process ends once its output is checkpointed.
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, db_url, str(log), "kill", "c", "sync"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert child.returncode == 17, child.stderr
        run_id = child.stdout.split()[0]
        assert log.read_text().split() == ["a", "b", "c"]
        assert _states(store, run_id) == {"a": "completed", "b": "completed", "c": "running"}

        resumed = subprocess.run(
            [sys.executable, "-c", _CHILD, db_url, str(log), "resume", run_id, "sync"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.split()[-1] == "C"
        assert log.read_text().split() == ["a", "b", "c"]  # c was not called again
        rec = store.get_flow_run(run_id, **NS)
        assert rec.state == "completed"
        steps = {s.step_key: s for s in rec.steps}
        assert steps["c"].output == "C" and steps["c"].attempts == 1
        recovered = [
            m
            for m in store.flow_run_history(run_id, **NS)
            if m.step_key == "c" and m.to_state == "completed"
        ]
        assert [m.detail for m in recovered] == [RECOVERED]
    finally:
        store.close()


def test_a_step_never_called_runs_once_after_the_process_ends(db_url: str, tmp_path: Path) -> None:
    """``durability="sync"``: the process ends once a's output is checkpointed, before b is
    called (a's completion still deferred). The resumed run recovers a from the checkpoint,
    calls b once, with its idempotency key, and never calls a again."""
    store = Store.open(db_url)
    try:
        store.register_flow(_chain("resume-me", "a", "b", "c"), source="user", **NS)
        log = tmp_path / "calls.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, db_url, str(log), "kill", "a", "sync"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert child.returncode == 17, child.stderr
        run_id = child.stdout.split()[0]
        assert log.read_text().split() == ["a"]
        # a's completion was deferred to b's begin, which never came: a is still running
        # (recovered from the checkpoint on resume).
        assert _states(store, run_id) == {"a": "running"}

        resumed = subprocess.run(
            [sys.executable, "-c", _CHILD, db_url, str(log), "resume", run_id, "sync"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.split()[-1] == "C"
        assert log.read_text().split() == ["a", "b", "c"]
        rec = store.get_flow_run(run_id, **NS)
        assert rec.state == "completed" and all(s.state == "completed" for s in rec.steps)
        steps = {s.step_key: s for s in rec.steps}
        assert steps["a"].attempts == 1 and steps["b"].idempotency_key == f"{run_id}:b"
    finally:
        store.close()
