"""Ingest into SQLite: the msgspec fast lane and the bulk write."""

from __future__ import annotations

import gzip
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import AGENTDOJO, TAU_BENCH
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_ledger import DEFAULTS, records, task_runs, write_lines

from soloflow_core.errors import LedgerError
from soloflow_core.ledger import _fields as ledger_fields
from soloflow_core.ledger import _rows as ledger_rows
from soloflow_core.ledger import _sqlite as ledger_sqlite
from soloflow_core.ledger import dump_run, ingest, reader
from soloflow_core.models import TaskRun
from soloflow_core.store import Store
from soloflow_core.store.writer import bulk_rows, sqlite_stamp

DIALECT = Store.open("sqlite://").engine.dialect
STAMP = sqlite_stamp(DIALECT)


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Store:
    store = Store.open(f"sqlite:///{tmp_path / 'ingest.db'}")
    yield store
    store.close()


def _normal(rows: tuple[list[Any], list[Any], list[Any]]) -> str:
    """The rows with their JSON text decoded (the fast lane keeps the file's spacing)."""
    runs, calls, models = rows
    # Unknown top-level fields may come into meta in another order (not a JSON difference).
    runs = [(*r[:13], json.dumps(json.loads(r[13]), sort_keys=True)) for r in runs]
    calls = [
        (*c[:5], json.loads(c[5]), json.loads(c[6]), *c[7:10], json.loads(c[10])) for c in calls
    ]
    return repr((runs, calls, models))  # repr: NaN is not equal to itself


def fast_rows(line: bytes, keep: bool = False) -> tuple[list[Any], list[Any], list[Any]] | None:
    rows = ledger_rows.Rows()
    if not ledger_rows.add_line(
        rows,
        1,
        line,
        user=DEFAULTS["default_user"],
        agent=DEFAULTS["default_agent"],
        keep_namespaces=keep,
    ):
        assert (rows.runs, rows.calls, rows.models) == ([], [], [])
        return None
    return rows.runs, rows.calls, rows.models


def checked_rows(line: bytes, keep: bool = False) -> tuple[list[Any], list[Any], list[Any]] | str:
    """The checked path's rows: what ingest writes for a line the fast lane defers."""
    try:
        item = reader.parse_line(line, **DEFAULTS)
    except LedgerError as exc:
        return exc.reason
    if not keep:
        item = reader.claim(item, DEFAULTS["default_user"], DEFAULTS["default_agent"])
    run, calls, models = bulk_rows(1, item, STAMP)
    return [run], calls, models


@settings(max_examples=200, deadline=None)
@given(records | task_runs.map(dump_run), st.booleans())
def test_the_fast_lane_writes_the_rows_of_the_checked_path_or_defers_the_line(record, keep):
    line = json.dumps(record).encode()
    fast = fast_rows(line, keep)
    if fast is not None:
        expected = checked_rows(line, keep)
        assert not isinstance(expected, str), expected
        assert _normal(fast) == _normal(expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(task_runs)
def test_the_fast_lane_takes_every_ordinary_record(run: TaskRun):
    """Ordinary: no NUL and no lone UTF-16 surrogate, which the fast lane defers."""
    text = json.dumps(dump_run(run), ensure_ascii=False)
    assume("\\u0000" not in text and not any("\ud800" <= ch <= "\udfff" for ch in text))
    assert fast_rows(text.encode()) is not None


def test_the_real_files_take_the_fast_lane():
    for path in (TAU_BENCH, AGENTDOJO):
        for line in gzip.open(path).read().splitlines():
            fast = fast_rows(line)
            assert fast is not None
            assert _normal(fast) == _normal(checked_rows(line))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "line",
    [
        b'{"run_id": "r", "tool_calls": [{"name": "a", "args": {"k": "x\\u0000"}}]}',
        b'{"run_id": "r", "task": "\\ud800"}',
        b'{"run_id": "r", "tool_calls": [{"name": "a", "output": "\xff"}]}',
        b'{"run_id": "r", "tokens": 12.0}',
        b'{"run_id": "r", "tool_calls": [{"name": "a", "args": "{}"}]}',
        b'{"run_id": "r", "tool_calls": [{"name": "a", "zz": 1}]}',
        b'{"run_id": "r", "cost": NaN}',
        b'{"run_id": ""}',
        b"[1]",
    ],
)
def test_unusual_lines_are_left_to_the_checked_path(line):
    assert fast_rows(line) is None


def test_args_and_output_are_stored_as_written(sqlite_file, tmp_path):
    line = '{"run_id": "r", "tool_calls": [{"name": "a", "args": {"k": [1, 2.5]}, "output": "x"}]}'
    ingest(sqlite_file, [write_lines(tmp_path / "a.jsonl", [line])], **DEFAULTS)
    with sqlite_file.engine.connect() as conn:
        args, output, meta = conn.execute(
            sa.text("SELECT args, output, meta FROM sf_tool_calls")
        ).one()
    assert (args, output, meta) == ('{"k": [1, 2.5]}', '"x"', "null")
    run = sqlite_file.get_run("r", user_id="me", agent_id="my-agent")
    assert (run.tool_calls[0].args, run.tool_calls[0].output) == ({"k": [1, 2.5]}, "x")


@pytest.mark.parametrize(
    "value",
    [
        datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        datetime(2024, 5, 1, 12, 30, 0, 5, tzinfo=timezone(timedelta(hours=2))),
        datetime(1, 1, 1, 0, 0),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_timestamps_are_written_as_the_store_writes_them(value):
    expected = STAMP(value if value.tzinfo else value.replace(tzinfo=UTC))
    assert ledger_rows._stamp(value.isoformat()) == expected


def test_the_fast_lane_knows_the_fields_of_a_run():
    assert ledger_rows.RUN_KEYS == ledger_fields.RUN_FIELDS


# ---------------------------------------------------------------------- the write


def test_batches_across_deferred_and_bad_lines_write_every_good_run(tmp_path, monkeypatch):
    bad = [b'{"run_id": "x", "success": "yes"}', b"not json", b'{"run_id": "y", "tokens": 12.0}']
    lines = (
        gzip.open(TAU_BENCH).read().splitlines() + bad + gzip.open(AGENTDOJO).read().splitlines()
    )
    path = write_lines(tmp_path / "mixed.jsonl", lines)
    monkeypatch.setattr(ledger_sqlite, "BATCH_RUNS", 70)  # batches across the deferred lines
    store = Store.open(f"sqlite:///{tmp_path / 'mixed.db'}")
    try:
        progress: list[tuple[int, int, int]] = []
        report = ingest(store, [path], **DEFAULTS, on_progress=lambda *a: progress.append(a))
        assert [e.line for e in report.errors] == [151, 152]
        assert (report.lines, report.runs_written) == (len(lines), len(lines) - 2)
        assert progress[-1] == (len(lines), path.stat().st_size, path.stat().st_size)
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("PRAGMA foreign_key_check")).all() == []
            assert conn.execute(sa.text("PRAGMA foreign_keys")).scalar_one() == 1
    finally:
        store.close()


def test_a_model_calls_total_defaults_to_its_sum(sqlite_file, tmp_path):
    line = '{"run_id": "r", "cost": 1.5, "model_calls": [{"input_tokens": 3}]}'
    ingest(sqlite_file, [write_lines(tmp_path / "a.jsonl", [line])], **DEFAULTS)
    run = sqlite_file.get_run("r", user_id="me", agent_id="my-agent")
    assert run.cost == 1.5 and run.model_calls[0].total_tokens == 3
    assert not math.isnan(run.cost)


def _checkpoint_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "soloflow-ingest-checkpoint"]


def test_the_wal_is_checkpointed_in_the_background_and_left_as_it_was(tmp_path, monkeypatch):
    """Batches are checkpointed by a thread of the ingest (its connection does not
    checkpoint at its commits); when ingest returns, every frame of the WAL is in the
    database, the thread is gone and the pooled connections checkpoint automatically again."""
    lines = [
        line.replace(b'"run_id": "', f'"run_id": "c{i}/'.encode(), 1)
        for i in range(4)
        for line in gzip.open(TAU_BENCH).read().splitlines()
    ]
    path = write_lines(tmp_path / "four.jsonl", lines)
    monkeypatch.setattr(ledger_sqlite, "BATCH_RUNS", 100)
    started: list[str] = []
    write_bulk = ledger_sqlite._write_bulk

    def spying_write(*args: Any) -> Any:
        started.extend(_checkpoint_threads())
        assert args[0].execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        return write_bulk(*args)

    monkeypatch.setattr(ledger_sqlite, "_write_bulk", spying_write)
    db = tmp_path / "wal.db"
    store = Store.open(f"sqlite:///{db}")
    try:
        report = ingest(store, [path], **DEFAULTS)
        assert report.runs_written == len(lines) and not report.errors
        assert started and not _checkpoint_threads()
        pooled = [store.engine.raw_connection() for _ in range(store.engine.pool.checkedin())]
        try:
            for raw in pooled:
                assert (
                    raw.driver_connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
                )
        finally:
            for raw in pooled:
                raw.close()
        # A checkpoint now finds nothing left to copy: ingest checkpointed its last batch.
        probe = sqlite3.connect(db)
        try:
            busy, frames, copied = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            probe.close()
        assert busy == 0 and frames == copied
        assert store.count_runs(user_id="me", agent_id="my-agent") == len(lines)
    finally:
        store.close()


def test_an_in_memory_store_ingests_without_a_checkpoint_thread(tmp_path, monkeypatch):
    seen: list[str] = []
    write_bulk = ledger_sqlite._write_bulk
    monkeypatch.setattr(
        ledger_sqlite,
        "_write_bulk",
        lambda *a: seen.extend(_checkpoint_threads()) or write_bulk(*a),
    )
    store = Store.open("sqlite://")
    try:
        report = ingest(store, [TAU_BENCH], **DEFAULTS)
        assert report.runs_written == 150 and seen == []
        assert store.count_runs(user_id="me", agent_id="my-agent") == 150
    finally:
        store.close()


CRASHING_INGEST = """
import sys, time
from soloflow_core import ledger
from soloflow_core.ledger import _fields as ledger_fields
from soloflow_core.ledger import _rows as ledger_rows
from soloflow_core.ledger import _sqlite as ledger_sqlite
from soloflow_core.store import Store
ledger_rows.CHUNK_LINES = 100
ledger_sqlite.BATCH_RUNS = 200
store = Store.open(sys.argv[1])
ledger.ingest(store, [sys.argv[2]], default_user="me", default_agent="my-agent",
              on_progress=lambda *a: time.sleep(0.2))
"""


def test_a_kill_mid_ingest_loses_at_most_the_batch_being_written(tmp_path):
    """The ingesting process is killed (SIGKILL) after some batches, before the last (a
    batch of 200 runs every two chunks of 100 lines, 0.2 s of progress after each chunk):
    every stored run is whole, and ingesting again writes the rest."""
    lines = gzip.open(TAU_BENCH).read().splitlines()
    copies = [
        line.replace(b'"run_id": "', f'"run_id": "c{i}/'.encode(), 1)
        for i in range(12)
        for line in lines
    ]
    path = write_lines(tmp_path / "big.jsonl", copies)
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_INGEST, url, str(path)])
    store = Store.open(url)
    try:
        ns = {"user_id": "me", "agent_id": "my-agent"}
        deadline = time.monotonic() + 120
        while store.count_runs(**ns) < 400 and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert proc.poll() is None, "the ingest ended before it was killed"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
        stored = store.count_runs(**ns)
        assert 400 <= stored < len(copies) and stored % 200 == 0
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("PRAGMA integrity_check")).scalar_one() == "ok"
            assert conn.execute(sa.text("PRAGMA foreign_key_check")).all() == []
            partial = conn.execute(
                sa.text(
                    "SELECT count(*) FROM sf_task_runs r WHERE r.tool_count != "
                    "(SELECT count(*) FROM sf_tool_calls c WHERE c.run_pk = r.id)"
                )
            ).scalar_one()
        assert partial == 0
        report = ingest(store, [path], **DEFAULTS)
        assert (report.runs_written, report.runs_skipped_existing) == (len(copies) - stored, stored)
        assert store.count_runs(**ns) == len(copies)
    finally:
        if proc.poll() is None:
            proc.kill()
        store.close()
