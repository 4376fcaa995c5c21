"""How fast ``soloflow ingest`` writes a ledger into SQLite, side by side with a naive path.

On the same file, each into a fresh SQLite file (WAL, as ``Store.open`` makes it):

(a) naive: ``json.loads`` + :func:`~soloflow_core.ledger.parse_record` per line, then per
    batch of 5000 runs one transaction of SQLAlchemy Core ``executemany`` inserts
    (``INSERT ... RETURNING`` for the runs, then their calls): the straightforward path;
(b) SoloFlow: :func:`~soloflow_core.ledger.ingest`, exactly what ``soloflow ingest`` runs;
(c) the write alone: the file's rows built beforehand by ingest's fast lane (not timed), then
    written as ingest writes them (``insert_sqlite_bulk``, ``BATCH_RUNS`` runs per transaction,
    on the driver's connection, WAL checkpoints on :class:`WalCheckpoints`' thread): the floor
    under (b), which reads in the same process.

The variants run round-robin (one rep of each, then the next rep); the median of the reps is
reported, in calls/s and in MB/s of ledger read. Without a file, the τ-bench file of
``tests/data`` is replicated with fresh run ids to ``--runs`` runs (real records).

Usage::

    python benchmarks/bench_ingest.py [FILE ...] [--runs N] [--reps N] [--no-write-alone]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from soloflow_core.ledger import ingest, parse_record
from soloflow_core.ledger._rows import read_chunks
from soloflow_core.ledger._sqlite import BATCH_RUNS, WalCheckpoints
from soloflow_core.store import Store
from soloflow_core.store.writer import insert_returning, insert_sqlite_bulk, now, sqlite_stamp

TARGET = 100_000
ROOT = Path(__file__).resolve().parent.parent
TAU = ROOT / "tests" / "data" / "tau_bench_gpt-4o_airline_trials0-2.jsonl.gz"
BATCH = 5000
"""Runs per transaction of the naive path."""
NS = {"default_user": "bench", "default_agent": "bench"}


def replicate_tau(path: Path, runs: int) -> None:
    """The τ-bench file's 150 runs, copied with fresh run ids until ``runs`` lines."""
    lines = [json.loads(x) for x in gzip.open(TAU).read().splitlines()]
    with path.open("w") as out:
        for i in range(runs):
            record = dict(lines[i % len(lines)])
            record["run_id"] = f"{record['run_id']}/copy{i // len(lines)}"
            out.write(json.dumps(record) + "\n")


def naive(store: Store, path: Path) -> int:
    """(a): json.loads + parse_record, SQLAlchemy Core executemany per batch."""
    calls = 0
    batch = []
    with path.open("rb") as f:
        for line in f:
            run = parse_record(json.loads(line), **NS)
            run = run.model_copy(update={"user_id": "bench", "agent_id": "bench"})
            calls += len(run.tool_calls)
            batch.append(run)
            if len(batch) == BATCH:
                with store.engine.begin() as conn:
                    insert_returning(conn, batch, now())
                batch = []
    if batch:
        with store.engine.begin() as conn:
            insert_returning(conn, batch, now())
    return calls


def soloflow(store: Store, path: Path) -> int:
    """(b): what `soloflow ingest` runs."""
    report = ingest(store, [path], **NS)
    assert not report.errors and report.runs_written == report.lines, report
    return -1  # counted from the store below


Rows = list[tuple[list[tuple], list[tuple], list[tuple]]]


def parsed(path: Path) -> Rows:
    """The file's rows in batches of ``BATCH_RUNS`` runs, as ingest's fast lane builds them."""
    batches: Rows = [([], [], [])]
    for chunk in read_chunks([str(path)], "bench", "bench", keep_namespaces=False):
        assert chunk[0] == "rows" and not chunk[8], "a line left the fast lane"
        runs, calls, models = batches[-1]
        runs += chunk[4]
        calls += chunk[5]
        models += chunk[6]
        if len(runs) >= BATCH_RUNS:
            batches.append(([], [], []))
    return batches


def write_rows(store: Store, batches: Rows) -> int:
    """(c): the rows written as ingest writes them."""
    stamp = sqlite_stamp(store.engine.dialect)
    raw = store.engine.raw_connection()
    try:
        driver = raw.driver_connection
        driver.execute("PRAGMA foreign_keys = OFF")
        checkpoints = WalCheckpoints(store, driver)
        try:
            write = checkpoints.around(insert_sqlite_bulk)
            for runs, calls, models in batches:
                if runs:
                    write(driver, runs, calls, models=models, created=stamp(now()))
        finally:
            checkpoints.close()
        driver.execute("PRAGMA foreign_keys = ON")
    finally:
        raw.close()
    return -1


def run_variant(fn: Callable[[Store], int], tmp: Path) -> tuple[float, int]:
    db = tmp / "bench.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store = Store.open(f"sqlite:///{db}")
    gc.collect()
    started = time.perf_counter()
    fn(store)
    elapsed = time.perf_counter() - started
    calls = len(store.read_tool_names(user_id="bench", agent_id="bench").codes)
    store.close()
    return elapsed, calls


def bench_file(path: Path, reps: int, tmp: Path, write_alone: bool) -> None:
    size = path.stat().st_size / 1e6
    rows = parsed(path) if write_alone else []
    variants: dict[str, Callable[[Store], int]] = {
        "(a) naive: json.loads + parse_record + Core executemany": lambda s: naive(s, path),
        "(b) SoloFlow ingest": lambda s: soloflow(s, path),
    }
    if write_alone:
        variants["(c) the write alone (rows built beforehand)"] = lambda s: write_rows(s, rows)
    times: dict[str, list[float]] = {k: [] for k in variants}
    calls = 0
    for _ in range(reps):
        for label, fn in variants.items():
            elapsed, calls = run_variant(fn, tmp)
            times[label].append(elapsed)
    runs = sum(1 for _ in path.open("rb"))
    print(
        f"\n{path.name}: {runs} runs, {calls} tool calls, {size:.0f} MB "
        f"({size * 1e6 / calls:.0f} bytes per call); median of {reps} reps"
    )
    print(f"  {'':58} {'seconds':>8} {'calls/s':>10} {'MB/s':>7}")
    for label, ts in times.items():
        m = statistics.median(ts)
        print(f"  {label:58} {m:8.2f} {calls / m:10.0f} {size / m:7.1f}")
    a, b = (statistics.median(ts) for ts in list(times.values())[:2])
    verdict = "met" if calls / b >= TARGET else "NOT met"
    print(f"  SoloFlow / naive: {a / b:.2f}x faster; target {TARGET} calls/s: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="JSONL ledgers (default: τ-bench)")
    parser.add_argument("--runs", type=int, default=20_000, help="runs of the τ-bench copy")
    parser.add_argument("--reps", type=int, default=3, help="reps per variant (at least 3)")
    parser.add_argument("--no-write-alone", action="store_true", help="skip variant (c)")
    opts = parser.parse_args(argv)
    reps = max(3, opts.reps)
    with tempfile.TemporaryDirectory(prefix="soloflow-bench-") as name:
        tmp = Path(name)
        files = opts.files
        if not files:
            files = [tmp / f"tau_bench_x{opts.runs}.jsonl"]
            replicate_tau(files[0], opts.runs)
        print(
            f"bench_ingest: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}, SQLite files under {tmp}"
        )
        for path in files:
            bench_file(path, reps, tmp, not opts.no_write_alone)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
