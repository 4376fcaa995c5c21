"""The runtime's default durability, ``"exit"``: LangGraph saves a run's checkpoint only when
an invocation ends, and the step journal alone keeps steps exactly-once — on real SQLite
files and PostgreSQL, the process killed in a real subprocess (``os._exit`` inside a tool
call, so nothing at exit runs).

What is checked: after a kill, a resumed run never calls a step the journal holds as
completed, nor one that failed for good; the step in flight runs again with its idempotency
key; a run approved before the kill is not asked again; an invocation abandoned at a step's
time limit saves no checkpoint of its own after the run went on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from soloflow_core.flow.journal import InMemoryStepJournal
from soloflow_core.models import Compensation, FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.store.step_journal import StoreStepJournal
from soloflow_langgraph.runtime.fenced_saver import FencedSaver
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "exit-user", "agent_id": "exit-agent"}

_CHILD = textwrap.dedent("""
    import os, sys
    from soloflow_core.store import Store
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    url, log, what, arg = sys.argv[1:5]
    kill_in = os.environ.get("KILL_IN", "")

    def make(sid):
        def fn(v: str, idempotency_key: str = "") -> str:
            with open(log, "a") as f:
                f.write(f"{sid} {idempotency_key}\\n")
            if sid == kill_in:
                os._exit(17)  # inside the call: no journal write, no checkpoint
            if sid in ("bad", "badc"):
                raise ValueError("bad input, for good")
            return v.upper()
        fn.__name__ = sid
        return fn

    store = Store.open(url)
    rt = FlowRuntime(
        store, tools=[make(s) for s in ("a", "bad", "b", "c", "badc", "undoa", "undob")],
        user_id="exit-user",
        agent_id="exit-agent",
    )
    if what == "run":
        res = rt.run(arg, {}, on_started=lambda rid: print(rid, flush=True))
    elif what == "approve":
        res = rt.approve(arg)
    else:
        res = rt.resume(arg)
    print(res.status, flush=True)
    rt.close()
""")


def _flow(name: str, *ids: str, **kw: Any) -> FlowDefinition:
    steps = [
        FlowStep(
            id=sid,
            skill_key=sid,
            depends_on=[ids[i - 1]] if i else [],
            input_map={"v": sid},
            retry_max=0,
            on_failure="continue" if sid == "bad" else "stop",
            side_effects=sid != "a",
        )
        for i, sid in enumerate(ids)
    ]
    return FlowDefinition(name=name, steps=steps, **kw)


def _child(db_url: str, log: Path, what: str, arg: str, kill_in: str = "") -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "KILL_IN": kill_in}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, db_url, str(log), what, arg],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == (17 if kill_in else 0), done.stderr
    return done.stdout.split()


def _calls(log: Path) -> list[tuple[str, str]]:
    """``(tool, idempotency key)`` of every call, in order."""
    return [
        (name, key)
        for name, _, key in (line.partition(" ") for line in log.read_text().splitlines())
    ]


def test_a_kill_mid_call_resumes_with_completed_steps_answered_from_the_journal(
    db_url: str, tmp_path: Path
) -> None:
    store = Store.open(db_url)
    try:
        store.register_flow(_flow("chain", "a", "b", "c"), source="user", **NS)
        log = tmp_path / "calls.log"
        run_id = _child(db_url, log, "run", "chain", kill_in="b")[0]
        # a completed (its completion went with b's begin); b was in its call
        states = {s.step_key: s.state for s in store.get_flow_run(run_id, **NS).steps}
        assert states == {"a": "completed", "b": "running"}
        assert _child(db_url, log, "resume", run_id)[-1] == "completed"
        assert _calls(log) == [
            ("a", f"{run_id}:a"),
            ("b", f"{run_id}:b"),
            ("b", f"{run_id}:b"),  # the call in flight, again, with the same key
            ("c", f"{run_id}:c"),
        ]
        rec = store.get_flow_run(run_id, **NS)
        assert rec.state == "completed"
        steps = {s.step_key: s for s in rec.steps}
        assert steps["a"].attempts == 1 and steps["b"].attempts == 2
    finally:
        store.close()


def test_a_step_that_failed_for_good_is_not_called_again_after_a_kill(
    db_url: str, tmp_path: Path
) -> None:
    """``bad`` fails (``on_failure: continue``, no retry) before the kill: the resumed run
    replays from the run's inputs and fails it as it did, without calling it."""
    store = Store.open(db_url)
    try:
        store.register_flow(_flow("flaky", "a", "bad", "b"), source="user", **NS)
        log = tmp_path / "calls.log"
        run_id = _child(db_url, log, "run", "flaky", kill_in="b")[0]
        assert _child(db_url, log, "resume", run_id)[-1] == "completed"
        assert [name for name, _ in _calls(log)] == ["a", "bad", "b", "b"]
        rec = store.get_flow_run(run_id, **NS)
        steps = {s.step_key: s for s in rec.steps}
        assert steps["bad"].state == "failed" and steps["bad"].attempts == 1
        assert "bad input, for good" in (steps["bad"].error or "")
    finally:
        store.close()


def test_an_approved_run_killed_after_its_approval_is_not_asked_again(
    db_url: str, tmp_path: Path
) -> None:
    store = Store.open(db_url)
    try:
        store.register_flow(
            _flow("gated", "a", "b", "c", requires_approval=True), source="user", **NS
        )
        log = tmp_path / "calls.log"
        run_id, status = _child(db_url, log, "run", "gated")
        assert status == "waiting" and [n for n, _ in _calls(log)] == ["a"]
        _child(db_url, log, "approve", run_id, kill_in="c")  # b ran, killed in c
        assert _child(db_url, log, "resume", run_id)[-1] == "completed"
        assert [n for n, _ in _calls(log)] == ["a", "b", "c", "c"]
        gate = [
            m.to_state for m in store.flow_run_history(run_id, **NS) if m.step_key == "__approval__"
        ]
        assert gate == ["pending", "ready", "running", "completed"]
    finally:
        store.close()


def test_a_kill_during_compensation_resumes_the_compensations_left(
    db_url: str, tmp_path: Path
) -> None:
    """``badc`` fails with ``on_failure: compensate``: b is undone, then the process dies in
    a's compensation. The resumed run replays from its inputs — b, recorded ``compensated``,
    is answered as the completed step it was — and undoes a (again, with its key), not b."""
    store = Store.open(db_url)
    try:
        steps = [
            FlowStep(
                id="a",
                skill_key="a",
                input_map={"v": "a"},
                compensation=Compensation(skill_key="undoa", input_map={"v": "{{a}}"}),
            ),
            FlowStep(
                id="b",
                skill_key="b",
                depends_on=["a"],
                input_map={"v": "b"},
                compensation=Compensation(skill_key="undob", input_map={"v": "{{b}}"}),
            ),
            FlowStep(
                id="badc",
                skill_key="badc",
                depends_on=["b"],
                input_map={"v": "x"},
                retry_max=0,
                on_failure="compensate",
            ),
        ]
        store.register_flow(FlowDefinition(name="undo", steps=steps), source="user", **NS)
        log = tmp_path / "calls.log"
        run_id = _child(db_url, log, "run", "undo", kill_in="undoa")[0]
        assert _child(db_url, log, "resume", run_id)[-1] == "failed"
        assert [n for n, _ in _calls(log)] == ["a", "b", "badc", "undob", "undoa", "undoa"]
        rec = store.get_flow_run(run_id, **NS)
        assert rec.outcome == "compensated"
        states = {s.step_key: s.state for s in rec.steps}
        assert states["a"] == states["b"] == "compensated" and states["badc"] == "failed"
    finally:
        store.close()


def test_a_runs_inputs_are_what_its_record_keeps_whether_resumed_or_not(store: Store) -> None:
    """A ``datetime`` input reaches the steps as the text the run's record keeps: a run
    carried on from its inputs after a crash reads the record, so an uninterrupted one does
    too (with ``durability="sync"`` the first checkpoint keeps the object itself)."""
    seen: list[object] = []

    def stamp(v: object) -> str:
        seen.append(v)
        return "ok"

    flow = FlowDefinition(
        name="when", steps=[FlowStep(id="s", skill_key="stamp", input_map={"v": "{{_trigger.at}}"})]
    )
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    modes: list[tuple[Literal["exit", "sync"], object]] = [("exit", str(at)), ("sync", at)]
    for durability, expected in modes:
        seen.clear()
        rt = FlowRuntime(store, tools=[stamp], durability=durability, **NS)
        try:
            result = rt.run(flow, {"at": at})
        finally:
            rt.close()
        assert result.status == "completed" and seen == [expected], durability
        assert store.get_flow_run(result.run_id, **NS).inputs == {"at": str(at)}


def test_an_invocation_abandoned_at_a_time_limit_saves_no_checkpoint_of_its_own(
    store: Store,
) -> None:
    """The first call of ``slow`` runs past its limit; the run goes on in a new invocation
    and completes. When the abandoned call returns, its invocation ends — with
    ``durability="exit"`` LangGraph would save its stale state then, maybe after the run's
    checkpoints were deleted; the runtime's saver drops it."""
    calls: list[int] = []
    returned = threading.Event()

    def slow(v: str) -> str:
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.8)
            returned.set()
        return v.upper()

    def tail(v: str) -> str:
        return v

    flow = FlowDefinition(
        name="limits",
        steps=[
            FlowStep(id="slow", skill_key="slow", input_map={"v": "x"}, timeout_seconds=0.3),
            FlowStep(id="tail", skill_key="tail", depends_on=["slow"], input_map={"v": "y"}),
        ],
    )
    rt = FlowRuntime(store, tools=[slow, tail], retention="keep", **NS)
    try:
        assert isinstance(rt.graph(flow).checkpointer, FencedSaver)
        result = rt.run(flow, {})
        assert result.status == "completed" and len(calls) == 2
        assert returned.wait(5)
        time.sleep(0.3)  # the abandoned invocation unwinds through LangGraph's exit
        cfg = {"configurable": {"thread_id": result.run_id}}
        # One checkpoint, the run's end: none of the abandoned invocation's (it would be an
        # orphan after the run's checkpoints are deleted at its end).
        saved = [t.checkpoint["channel_values"].get("results") for t in rt.checkpointer.list(cfg)]
        assert [sorted(r or {}) for r in saved] == [["slow", "tail"]]
        states = {s.step_key: (s.state, s.attempts) for s in rt.status(result.run_id).steps}
        assert states == {"slow": ("completed", 2), "tail": ("completed", 1)}
    finally:
        rt.close()


def test_a_run_saves_one_checkpoint_per_invocation(store: Store) -> None:
    """What ``"exit"`` buys: a 4-step run writes its checkpoint once, not once a superstep."""
    flow = _flow("four", "a", "b", "c", "d")
    tools = []
    for sid in "abcd":

        def fn(v: str, _s: str = sid) -> str:
            return v

        fn.__name__ = sid
        tools.append(fn)
    rt = FlowRuntime(store, tools=tools, retention="keep", **NS)
    rt_sync = FlowRuntime(store, tools=tools, retention="keep", durability="sync", **NS)
    try:
        runs = {name: r.run(flow, {}) for name, r in (("exit", rt), ("sync", rt_sync))}
        count = {
            name: len(list(r.checkpointer.list({"configurable": {"thread_id": runs[name].run_id}})))
            for name, r in (("exit", rt), ("sync", rt_sync))
        }
        assert all(res.status == "completed" for res in runs.values())
        assert count["exit"] == 1 and count["sync"] > 4
    finally:
        rt.close()
        rt_sync.close()


def test_every_journal_reports_a_step_that_failed_for_good_instead_of_starting_it(
    store: Store,
) -> None:
    """``begin`` of a step recorded ``failed`` with no retry left gives back its error (no new
    attempt); one failed with a retry left starts its next attempt — the in-memory journal,
    the driver journal and the SQLAlchemy one alike."""
    flow = _flow("j", "x", "y")
    journals = {
        "memory": InMemoryStepJournal("frun_mem"),
        "driver": store.step_journal(store.start_flow_run(flow, {}, owner="t", **NS)),
        "sqlalchemy": StoreStepJournal(store.db, store.start_flow_run(flow, {}, owner="t", **NS)),
    }
    for name, journal in journals.items():
        assert journal.begin("x", "x").attempt == 1, name
        journal.failed("x", "ValueError: no", retry=False)
        again = journal.begin("x", "x")
        assert (again.failed, again.done, again.attempt) == ("ValueError: no", False, 1), name
        assert journal.state_of("x") == "failed", name
        assert journal.begin("y", "y").attempt == 1, name
        journal.failed("y", "TimeoutError: slow", retry=True)
        retried = journal.begin("y", "y")
        assert (retried.failed, retried.attempt) == (None, 2), name


def test_a_cancel_reaching_a_step_whose_input_cannot_be_rendered_cancels_the_run(
    store: Store,
) -> None:
    """The run is cancelled while ``bad`` is in its call; ``bad`` then fails (``continue``)
    and ``c`` reads ``bad``'s missing output: ``c`` does not start and the run ends
    ``cancelled`` (it ended ``failed``, naming an illegal move of ``c``, before)."""
    started: list[str] = []

    def bad(v: str) -> str:
        rt.cancel(started[0])
        raise ValueError("bad")

    def c(v: str) -> str:
        return v

    flow = FlowDefinition(
        name="cu",
        steps=[
            FlowStep(
                id="bad", skill_key="bad", input_map={"v": "x"}, retry_max=0, on_failure="continue"
            ),
            FlowStep(id="c", skill_key="c", depends_on=["bad"], input_map={"v": "{{bad.x}}"}),
        ],
    )
    rt = FlowRuntime(store, tools=[bad, c], **NS)
    try:
        result = rt.run(flow, {}, on_started=started.append)
    finally:
        rt.close()
    assert result.status == "cancelled", result.error
    states = {s.step_key: s.state for s in store.get_flow_run(result.run_id, **NS).steps}
    assert states == {"bad": "failed", "c": "skipped"}


def test_a_failed_gated_run_reports_its_steps_results_not_the_gates_answer(store: Store) -> None:
    def a(v: str) -> str:
        return v.upper()

    def c(v: str) -> str:
        raise ValueError("c failed")

    flow = FlowDefinition(
        name="gated-fail",
        requires_approval=True,
        steps=[
            FlowStep(id="a", skill_key="a", input_map={"v": "a"}, side_effects=False),
            FlowStep(id="c", skill_key="c", depends_on=["a"], input_map={"v": "c"}, retry_max=0),
        ],
    )
    rt = FlowRuntime(store, tools=[a, c], **NS)
    try:
        waiting = rt.run(flow, {})
        assert waiting.status == "waiting"
        result = rt.approve(waiting.run_id)
    finally:
        rt.close()
    assert result.status == "failed" and result.results == {"a": "A"}
