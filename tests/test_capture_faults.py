"""Capture under faults (issue 25, points 3 and 4): the agent never fails or stalls because of
the ledger, and no run is silently lost — each is stored, or spilled and written back."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from soloflow_core import hookimpl
from soloflow_core.ledger.spill import append_spill, write_back_spill
from soloflow_core.models import TaskRun
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.store.json_values import CUT_MARKER, MAX_JSON_DEPTH
from soloflow_langgraph.callbacks import CaptureHealth, SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

NS = {"user_id": "u", "agent_id": "a"}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def deep_report(key: str) -> Any:
    """A report nested 600 levels deep."""
    value: Any = key
    for _ in range(600):
        value = [value]
    return value


def _agent(tool_=lookup) -> Any:
    call = {"name": tool_.name, "args": {"key": "k"}, "id": "c1", "type": "tool_call"}
    return create_agent(
        ScriptedChatModel(
            responses=[AIMessage(content="", tool_calls=[call]), AIMessage(content="done")]
        ),
        tools=[tool_],
    )


def _invoke(handler: SoloFlowCallbackHandler, task: str, tool_=lookup) -> Any:
    return _agent(tool_).invoke({"messages": [("user", task)]}, config={"callbacks": [handler]})


def _tasks(store: Store) -> set[str | None]:
    return {r.task for r in store.list_runs(limit=1000, **NS)}


def _delete_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_a_deleted_file_under_a_running_agent_is_recreated_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    handler = SoloFlowCallbackHandler(database_url=str(db), **NS)
    try:
        _invoke(handler, "before")
        _delete_sqlite(db)
        with caplog.at_level(logging.WARNING, logger="soloflow_langgraph.callbacks"):
            for i in range(10):
                assert _invoke(handler, f"after {i}")["messages"][-1].content == "done"
        loud = [r for r in caplog.records if "deleted or replaced" in r.getMessage()]
        assert len(loud) == 1 and loud[0].levelno == logging.ERROR
        assert handler.runs_written == 11 and handler.health().ok
    finally:
        handler.close()
    with Store.open(str(db)) as store:  # the re-created file holds every run since
        assert _tasks(store) == {f"after {i}" for i in range(10)}


def test_a_deleted_file_of_a_passed_in_store_spills_and_a_new_handler_writes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    store = Store.open(str(db))
    handler = SoloFlowCallbackHandler(store=store, **NS)
    _invoke(handler, "kept")
    _delete_sqlite(db)
    for i in range(3):
        _invoke(handler, f"spilled {i}")
    health = handler.health()
    assert isinstance(health, CaptureHealth) and not health.ok
    assert health.runs_spilled == 3 and health.runs_dropped == 0 and "deleted" in health.problem
    assert health.spill_path == f"{db}.spill.jsonl" and len(handler.unsaved) == 3
    handler.close()
    store.close()

    fresh = SoloFlowCallbackHandler(database_url=str(db), **NS)  # the next process
    try:
        deadline = time.monotonic() + 30
        while Path(f"{db}.spill.jsonl").stat().st_size and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fresh.store is not None
        assert _tasks(fresh.store) == {f"spilled {i}" for i in range(3)}
        assert Path(f"{db}.spill.jsonl").stat().st_size == 0
        assert "wrote back 3 runs" in caplog.text
    finally:
        fresh.close()


def test_an_unreachable_database_at_construction_does_not_raise(
    tmp_path: Path, pg_url: str
) -> None:
    spill = tmp_path / "spill.jsonl"
    handler = SoloFlowCallbackHandler(
        database_url="postgresql://postgres@127.0.0.1:1/nowhere", spill_path=spill, **NS
    )
    try:
        assert handler.store is None and not handler.health().ok
        assert "cannot open the store" in (handler.health().problem or "")
        assert _invoke(handler, "while down")["messages"][-1].content == "done"
        assert handler.health().runs_spilled == 1
        record = json.loads(spill.read_text())
        assert record["task"] == "while down" and record["user_id"] == "u"
    finally:
        handler.close()
    later = SoloFlowCallbackHandler(database_url=pg_url, spill_path=spill, **NS)
    try:
        assert later.flush() == 0  # nothing of its own; the file is written back
        assert later.store is not None and _tasks(later.store) == {"while down"}
        assert spill.stat().st_size == 0
    finally:
        later.close()


HOLD_LOCK = textwrap.dedent("""
    import select, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    # held for argv[2] seconds, or (given argv[3] "stdin") until a line comes on stdin
    select.select([sys.stdin] if sys.argv[3:] == ["stdin"] else [], [], [], float(sys.argv[2]))
    conn.execute("ROLLBACK")
""")


def test_a_lock_held_by_another_process_holds_the_agent_only_the_bounded_time(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    handler = SoloFlowCallbackHandler(database_url=str(db), write_timeout=0.5, **NS)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), "8"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        assert _invoke(handler, "locked out")["messages"][-1].content == "done"
        assert time.monotonic() - started < 3.0  # not the 30 s busy timeout
        assert handler.health().runs_spilled == 1 and handler.runs_written == 0
    finally:
        holder.wait(timeout=30)
        holder.stdout.close()  # type: ignore[union-attr]
    # The write the agent stopped waiting for went on: stored once, however it is written back.
    handler.write_timeout = 30.0
    handler.flush()
    assert handler.unsaved == [] and handler.health().ok
    assert handler.store is not None and _tasks(handler.store) == {"locked out"}
    handler.close()


def test_an_emptied_postgresql_database_gets_its_schema_back(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    handler = SoloFlowCallbackHandler(database_url=pg_url, **NS)
    try:
        _invoke(handler, "first")
        assert handler.store is not None
        with handler.store.engine.begin() as conn:  # every SoloFlow table gone
            names = sa.inspect(conn).get_table_names()
            conn.execute(sa.text("DROP TABLE " + ", ".join(f'"{n}"' for n in names) + " CASCADE"))
        _invoke(handler, "second")
        assert "no SoloFlow tables any more" in caplog.text
        assert handler.runs_written == 2 and handler.health().ok
        assert _tasks(handler.store) == {"second"}
    finally:
        handler.close()


def test_a_tool_output_nested_600_deep_is_stored_cut(db_url: str) -> None:
    handler = SoloFlowCallbackHandler(database_url=db_url, **NS)
    try:
        _invoke(handler, "deep", deep_report)  # in an agent: the ToolMessage holds its text
        deep_report.invoke({"key": "k"}, config={"callbacks": [handler]})  # the value itself
        assert handler.runs_written == 2 and handler.unsaved == []
        assert handler.store is not None
        run = handler.store.get_run(handler.last_run.run_id, **NS)  # type: ignore[union-attr]
    finally:
        handler.close()
    level, value = 0, run.tool_calls[0].output
    while isinstance(value, list):
        level, value = level + 1, value[0]
    assert level == MAX_JSON_DEPTH and value.startswith(CUT_MARKER + "[[[")


def test_the_spill_file_is_bounded(tmp_path: Path) -> None:
    spill = tmp_path / "spill.jsonl"
    runs = [TaskRun(run_id=f"r{i}", task="x" * 300, **NS) for i in range(10)]
    kept = append_spill(spill, runs, limit_bytes=2000)
    assert 0 < kept < 10 and spill.stat().st_size <= 2000
    assert len(spill.read_text().splitlines()) == kept
    assert append_spill(spill, runs[kept:], limit_bytes=2000) == 0


def test_soloflow_ingest_spill_writes_back_and_empties_the_file(
    tmp_path: Path, db_url: str
) -> None:
    spill = tmp_path / "runs.db.spill.jsonl"
    append_spill(
        spill, [TaskRun(run_id=f"r{i}", task=f"t{i}", **NS) for i in range(3)], limit_bytes=1 << 20
    )
    soloflow = str(Path(sys.executable).with_name("soloflow"))  # the console script, as run
    result = subprocess.run(
        [soloflow, "--db", db_url, "ingest", "--spill", str(spill), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs_written"] == 3
    assert spill.stat().st_size == 0
    with Store.open(db_url) as store:
        assert _tasks(store) == {"t0", "t1", "t2"}
        assert write_back_spill(store, spill).runs_written == 0
    missing = subprocess.run(
        [soloflow, "--db", db_url, "ingest", "--spill", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1 and "no such spill file" in " ".join(missing.stderr.split())


def test_a_process_that_exits_keeps_its_runs(tmp_path: Path) -> None:
    """The store is locked for the whole life of an agent process: its runs are spilled,
    and the next handler writes them back."""
    db = tmp_path / "runs.db"
    Store.open(str(db)).close()
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_capture_faults import _invoke
        from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
        handler = SoloFlowCallbackHandler(database_url={str(db)!r}, write_timeout=0.3,
                                          user_id="u", agent_id="a")
        for i in range(3):
            _invoke(handler, f"exiting {{i}}")
        print(handler.health().runs_spilled, flush=True)
        os._exit(0)
    """)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), "20"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        agent = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
        assert agent.returncode == 0, agent.stderr
        assert agent.stdout.strip() == "3"
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]
    handler = SoloFlowCallbackHandler(database_url=str(db), **NS)
    try:
        handler.flush()
        assert handler.store is not None
        assert _tasks(handler.store) == {f"exiting {i}" for i in range(3)}
    finally:
        handler.close()


def test_runs_spilled_while_locked_out_are_written_back_once_the_store_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    handler = SoloFlowCallbackHandler(database_url=str(db), write_timeout=0.3, **NS)

    def spilled() -> None:
        assert handler.health().runs_spilled == 1 and not handler.health().ok

    _locked_out(db, handler, ["locked out"], while_locked=spilled)
    handler.write_timeout = 30.0
    with caplog.at_level(logging.WARNING, logger="soloflow_langgraph.callbacks"):
        _invoke(handler, "after")  # stored: the store answers again, the spill is written back
        handler.close()  # waits for the write-back queued behind it
    assert "takes runs again" in caplog.text
    assert handler.unsaved == [] and handler.health().ok and handler.runs_written == 2
    assert Path(f"{db}.spill.jsonl").stat().st_size == 0
    with Store.open(str(db)) as store:
        assert _tasks(store) == {"locked out", "after"}


def test_a_sqlite_file_whose_path_says_memory_gets_its_spill_file(tmp_path: Path) -> None:
    db = tmp_path / "agent-memory" / "runs.db"
    db.parent.mkdir()
    handler = SoloFlowCallbackHandler(database_url=f"sqlite:///{db}", **NS)
    try:
        assert handler.health().spill_path == f"{db}.spill.jsonl"
    finally:
        handler.close()
    memory = SoloFlowCallbackHandler(database_url="sqlite:///:memory:", **NS)
    try:
        assert memory.health().spill_path is None
    finally:
        memory.close()


def _locked_out(
    db: Path,
    handler: SoloFlowCallbackHandler,
    tasks: list[str],
    *,
    while_locked: Callable[[], None] | None = None,
) -> None:
    """Run ``tasks`` while another process holds the SQLite write lock (each is spilled),
    then ``while_locked`` (checks of what the handler holds: once the lock goes, the write
    the handler stopped waiting for goes through and the rest are written back at once)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), "120", "stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for task in tasks:
            _invoke(handler, task)
        if while_locked is not None:
            while_locked()
    finally:  # released once every task was tried, however long a loaded machine took
        holder.communicate("release\n", timeout=30)


def test_runs_kept_only_in_memory_are_stored_once_the_store_answers(tmp_path: Path) -> None:
    """No spill file (an in-memory default, no home directory): the runs wait in memory, the
    health says so, and they are stored when a write goes through again, with no flush()."""
    db = tmp_path / "runs.db"
    handler = SoloFlowCallbackHandler(database_url=str(db), write_timeout=0.3, **NS)
    handler.spill_path = None

    def only_in_memory() -> None:
        health = handler.health()
        assert health.runs_dropped == 1 and not health.ok
        assert "is only in memory" in (health.problem or "")

    _locked_out(db, handler, ["locked out"], while_locked=only_in_memory)
    handler.write_timeout = 30.0
    _invoke(handler, "after")
    handler.close()  # waits for the write-back queued behind the write
    assert handler.unsaved == [] and handler.health().ok and handler.runs_written == 2
    with Store.open(str(db)) as store:
        assert _tasks(store) == {"locked out", "after"}


SLOW_HOOK = 1.5
"""Seconds the slow plugin takes per run: the four written back take 6 s together, well past
the healthy write's ``write_timeout`` of 4 s, which leaves a loaded machine room."""


class _SlowListener:
    """A ``soloflow_run_finished`` plugin that takes its time."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.delay = SLOW_HOOK

    @hookimpl
    def soloflow_run_finished(self, run: TaskRun) -> None:
        time.sleep(self.delay)
        self.runs.append(run.task or "")


def test_writing_back_never_makes_the_agents_own_writes_wait(tmp_path: Path) -> None:
    """The hooks of runs written back after a fault run off the writer thread: a slow plugin
    never pushes a healthy write past ``write_timeout`` into the spill file."""
    db = tmp_path / "runs.db"
    slow = _SlowListener()
    pm = get_plugin_manager(load_entrypoints=False, plugins=[slow])
    handler = SoloFlowCallbackHandler(
        database_url=str(db), write_timeout=0.3, plugin_manager=pm, **NS
    )
    slow.delay = 0.0  # fast while locked out

    def four_unsaved() -> None:
        assert len(handler.unsaved) == 4
        slow.delay = SLOW_HOOK  # slow from now on: the hooks of the four written back

    _locked_out(db, handler, [f"locked out {i}" for i in range(4)], while_locked=four_unsaved)
    handler.write_timeout = 4.0  # the four hooks on the writer thread would take 6 s
    _invoke(handler, "first after")  # its hook: SLOW_HOOK on the caller's thread, as always
    _invoke(handler, "second after")  # queued behind the write-back of the four
    handler.close()
    assert handler.health().runs_spilled == 4  # the four; neither write after the fault
    deadline = time.monotonic() + 30
    while len(slow.runs) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(slow.runs) == sorted(
        ["first after", "second after", *(f"locked out {i}" for i in range(4))]
    )
    with Store.open(str(db)) as store:
        assert len(_tasks(store)) == 6


def test_a_run_let_go_past_the_bound_of_unsaved_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``handler.unsaved`` is bounded; a run it lets go that the spill file could not take is
    logged as LOST (never silently), one the spill file holds as left to it."""
    import soloflow_langgraph.callbacks as callbacks

    monkeypatch.setattr(callbacks, "MAX_UNSAVED", 2)
    db = tmp_path / "runs.db"
    handler = SoloFlowCallbackHandler(database_url=str(db), write_timeout=0.3, **NS)
    spill_ok = handler.spill_path
    with caplog.at_level(logging.WARNING, logger="soloflow_langgraph.callbacks"):
        handler.spill_path = None
        _locked_out(db, handler, ["only in memory", "second", "third"])
        handler.spill_path = spill_ok
    lost = [r for r in caplog.records if "is LOST" in r.getMessage()]
    assert len(lost) == 1 and lost[0].levelno == logging.ERROR
    assert handler.health().runs_dropped == 3
    handler.close()
