"""PostgreSQL pulled from under a capturing agent (issue 25, faults): its connections killed
mid-capture, its database dropped and re-created as a whole. 0 silently lost: each run is
stored, or spilled, reported (``health()`` and an error log line) and written back.

Each probe works in its own scratch database ``sf_probe_<random>`` (killing connections or
dropping the shared test database would break other tests), dropped afterwards. SQLite has
no connection to kill; its faults (file deleted, lock held, disk full) have their own probes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import PG_URL, REQUIRE_PG, pg_problem
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from soloflow_core.store import Store
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

pytestmark = pytest.mark.stress

NS = {"user_id": "u", "agent_id": "a"}
LOGGER = "soloflow_langgraph.callbacks"


DURING_TOOL: list[Callable[[], None]] = []
"""What the next ``lookup`` call does first (a fault in the middle of a run)."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    while DURING_TOOL:
        DURING_TOOL.pop()()
    return f"value of {key}"


@tool
def track(key: str) -> str:
    """Track a key."""
    return f"tracked {key}"


def _script(messages: list[BaseMessage]) -> AIMessage:
    """Two tool turns, then the answer: one run is 3 model calls and 2 tool calls."""
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done >= 2:
        return AIMessage(content="done")
    name = ("lookup", "track")[done]
    call = {"name": name, "args": {"key": f"k{done}"}, "id": f"c{done}", "type": "tool_call"}
    return AIMessage(content="", tool_calls=[call])


def _agent() -> Any:
    return create_agent(ScriptedChatModel(script=_script), tools=[lookup, track])


def _admin() -> sa.Engine:
    driver_url = "postgresql+psycopg://" + PG_URL.split("://", 1)[1]
    return sa.create_engine(driver_url, isolation_level="AUTOCOMMIT")


@pytest.fixture
def scratch_db() -> Iterator[tuple[str, str]]:
    """(name, URL) of a fresh database of its own, dropped afterwards."""
    if pg_problem():
        if REQUIRE_PG:
            pytest.fail(
                f"PostgreSQL required (SOLOFLOW_REQUIRE_POSTGRES=1) but {PG_URL}: {pg_problem()}"
            )
        pytest.skip(f"no PostgreSQL server at {PG_URL}")
    name = "sf_probe_" + uuid.uuid4().hex[:10]
    admin = _admin()
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    base = PG_URL.split("?", 1)[0].rsplit("/", 1)[0]
    try:
        yield name, f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _kill_backends(admin: sa.Engine, name: str) -> int:
    with admin.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": name},
        ).all()
    return sum(1 for (killed,) in rows if killed)


def _stored(url: str) -> tuple[set[str], int, int]:
    """(tasks stored, tool call rows, task run rows) in the namespace."""
    with Store.open(url) as store, store.engine.connect() as conn:
        tasks = {r.task or "" for r in store.list_runs(limit=100_000, **NS)}
        calls = conn.execute(sa.text("SELECT count(*) FROM sf_tool_calls")).scalar_one()
        runs = conn.execute(sa.text("SELECT count(*) FROM sf_task_runs")).scalar_one()
    return tasks, int(calls), int(runs)


def _write_back(url: str, spill: Path) -> None:
    """The next process: a fresh handler writes the spill file back as it connects."""
    handler = SoloFlowCallbackHandler(database_url=url, spill_path=spill, **NS)
    try:
        handler.flush()
    finally:
        handler.close()
    assert not spill.exists() or spill.stat().st_size == 0


RUNS = 150
KILLS = 12
MAX_RUNS = 20_000
"""A bound on the runs made while waiting for the last round of kills."""


def test_connections_killed_mid_capture_lose_no_run(
    scratch_db: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name, url = scratch_db
    spill = tmp_path / "spill.jsonl"
    handler = SoloFlowCallbackHandler(database_url=url, spill_path=spill, **NS)
    agent = _agent()
    admin = _admin()
    done = threading.Event()
    killed: list[int] = []

    def killer() -> None:  # kills every backend of the database, KILLS times across the capture
        while len(killed) < KILLS and not done.is_set():
            time.sleep(0.15)
            killed.append(_kill_backends(admin, name))

    thread = threading.Thread(target=killer)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            thread.start()
            total = 0
            # At least RUNS runs, and on until every round of kills has come (a quiet
            # machine does 150 runs before the killer's 12 rounds of 0.15 s are over).
            while total < RUNS or (len(killed) < KILLS and total < MAX_RUNS):
                result = agent.invoke(
                    {"messages": [("user", f"task {total}")]}, config={"callbacks": [handler]}
                )
                assert result["messages"][-1].content == "done"  # the agent never fails
                total += 1
            done.set()
            thread.join()
        health, waiting = handler.health(), len(handler.unsaved)
    finally:
        done.set()
        handler.close()
        admin.dispose()
    assert len(killed) == KILLS and sum(killed) >= 1, killed  # the faults did happen
    assert health.runs_dropped == 0
    # Each run stored, or spilled and waiting (those spilled earlier were written back by the
    # handler once the store answered again: runs_written counts them).
    assert health.runs_written + waiting == total and waiting <= health.runs_spilled
    if health.runs_spilled:  # reported: an error line, then written back once the store answers
        assert any(r.levelno == logging.ERROR for r in caplog.records)
        assert "takes runs again" in caplog.text
    _write_back(url, spill)
    tasks, calls, runs = _stored(url)
    assert tasks == {f"task {i}" for i in range(total)}  # 0 lost
    assert (runs, calls) == (total, 2 * total)  # 0 twice
    print(
        f"\nconnections killed: {sum(killed)} backends in {KILLS} rounds; {total} runs: "
        f"{health.runs_spilled} spilled, all stored in the end"
    )


def _capture(handler: SoloFlowCallbackHandler, agent: Any, tasks: range) -> None:
    for i in tasks:
        result = agent.invoke(
            {"messages": [("user", f"task {i}")]}, config={"callbacks": [handler]}
        )
        assert result["messages"][-1].content == "done"


def test_database_dropped_and_recreated_mid_capture_gets_its_schema_back(
    scratch_db: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name, url = scratch_db
    spill = tmp_path / "spill.jsonl"
    handler = SoloFlowCallbackHandler(database_url=url, spill_path=spill, **NS)
    agent = _agent()
    admin = _admin()

    def drop(create: bool) -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            if create:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))

    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            _capture(handler, agent, range(0, 20))
            # Dropped and re-created in the middle of run 20: the handler finds it empty.
            DURING_TOOL.append(lambda: drop(create=True))
            _capture(handler, agent, range(20, 40))
            assert not DURING_TOOL
            assert handler.health().runs_spilled == 0 and handler.runs_written == 40
            assert _stored(url)[0] == {f"task {i}" for i in range(20, 40)}
            drop(create=False)  # gone for a while: runs are spilled
            _capture(handler, agent, range(40, 45))
            down = handler.health()
            with admin.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            _capture(handler, agent, range(45, 60))
            up = handler.health()
    finally:
        handler.close()
        admin.dispose()
    loud = [r for r in caplog.records if "no SoloFlow tables any more" in r.getMessage()]
    assert len(loud) == 2 and all(r.levelno == logging.ERROR for r in loud)
    assert not down.ok and down.runs_spilled == 5 and down.runs_dropped == 0
    assert "does not exist" in (down.problem or "")
    # The spilled runs were written back by this handler once the store answered again.
    assert up.ok and up.runs_written == 60 and up.runs_dropped == 0
    assert not spill.exists() or spill.stat().st_size == 0
    # Runs stored before a drop went with the database; every later run is there.
    tasks, calls, runs = _stored(url)
    assert tasks == {f"task {i}" for i in range(40, 60)}
    assert (runs, calls) == (20, 40)
