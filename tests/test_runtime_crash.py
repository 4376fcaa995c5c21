"""Crash safety of the flow runtime, with real processes and a real store (a SQLite file, and
PostgreSQL when the tests have a server): a process
running a 10-step flow with side effects is SIGKILLed at random points over many trials; a
new process resumes each run to completion; no completed step runs twice, nothing recorded
is lost.

The tools and the fork server are in ``flowrun_fixtures`` (see its docstring for the
side-effect log and why a fork server).
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flowrun_fixtures import (
    CRASH_DAG,
    CRASH_FLOW,
    LOG_ENV,
    SEED_ENV,
    SLEEP_ENV,
    crash_flow_output,
    log_lines,
    replay_history,
    soloflow_argv,
    subprocess_env,
)

from soloflow_core.models import FlowDefinition
from soloflow_core.store import Store
from soloflow_core.store.flowruns import FlowRunRecord
from soloflow_core.store.step_journal import RECOVERED

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash test forks and SIGKILLs")

NS = {"user_id": "default", "agent_id": "default"}
TRIALS = 32
"""Kill-and-resume trials on the fork server (each ~1 s on a 2-core machine)."""
EARLY = 3
"""Of those, the first ones are killed before the run's first checkpoint."""
DOUBLE = 6
"""Every DOUBLE-th random trial also kills its first resume, then resumes again."""
STEP_SLEEP = "0.02,0.05"
MASTER_SEED = 20_240_611


class ForkServer:
    """``python -m flowrun_fixtures serve``: forks a fresh child per run or resume."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flowrun_fixtures", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )

    def request(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the fork server died (exit {self.proc.poll()})"
        return json.loads(line)

    def start(self, **cmd: Any) -> int:
        return int(self.request(**cmd)["pid"])

    def wait(self, pid: int) -> dict[str, Any]:
        return self.request(op="wait", pid=pid)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def server() -> Iterator[ForkServer]:
    s = ForkServer()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def crash_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """The store the children share: a SQLite file (checkpoints in the file next to it), or a
    fresh PostgreSQL schema (checkpoints in PostgreSQL, the journal on its own pool)."""
    url = (
        f"sqlite:///{tmp_path / 'crash.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    store = Store.open(url)
    store.register_flow(FlowDefinition.model_validate(CRASH_FLOW), source="user", **NS)
    try:
        yield url, store
    finally:
        store.close()


def first_line(path: Path, timeout: float = 30.0) -> str:
    """The first line a child wrote to ``path`` (its run id)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            text = path.read_text(encoding="utf-8")
            if "\n" in text:
                return text.split("\n", 1)[0].strip()
        time.sleep(0.002)
    raise AssertionError(
        f"no run id in {path} after {timeout}s: {path.read_text() if path.exists() else ''}"
    )


def checkpoints_of(url: str, run_id: str) -> int:
    """How many LangGraph checkpoints the run has (the file next to the store, or the
    PostgreSQL schema of the store)."""
    if not url.startswith("sqlite:///"):
        import psycopg

        with psycopg.connect(url) as pg:
            row = pg.execute("SELECT to_regclass('checkpoints')").fetchone()
            if row is None or row[0] is None:
                return 0
            found = pg.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = %s", (run_id,)
            ).fetchone()
            return int(found[0]) if found else 0
    db = Path(url.removeprefix("sqlite:///"))
    ckpt = db.with_name(f"{db.stem}-checkpoints{db.suffix}")
    if not ckpt.exists():
        return 0
    with sqlite3.connect(ckpt) as conn:
        try:
            return int(
                conn.execute(
                    "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (run_id,)
                ).fetchone()[0]
            )
        except sqlite3.OperationalError:  # no table yet
            return 0


def mark(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(text + "\n")


@dataclass
class Kill:
    """What the store held right after one SIGKILL."""

    marker: str
    record: FlowRunRecord
    history: list[Any]
    checkpoints: int

    @property
    def completed(self) -> set[str]:
        return {s.step_key for s in self.record.steps if s.state == "completed"}

    @property
    def running(self) -> set[str]:
        return {s.step_key for s in self.record.steps if s.state == "running"}


@dataclass
class Stats:
    crashed: int = 0
    finished_before_kill: int = 0
    completed_at_kill: Counter[int] = field(default_factory=Counter)
    running_at_kill: int = 0
    no_checkpoint_at_kill: int = 0
    replayed_by_key: int = 0
    """Steps whose side effect was done but not recorded when killed: called again, and the
    tool's idempotency key answered from its record."""
    double_kills: int = 0
    recovered: int = 0
    """Steps running at a kill whose call had returned: completed on resume from the
    checkpoint's copy of their output, not called again."""


def settle(url: str, timeout: float = 10.0) -> None:
    """Wait until PostgreSQL has finished what the killed child had already sent: a statement
    that reached the server before the kill still runs (and, in autocommit, commits) after
    its client is gone, just as a commit sent just before a crash would. Only then is the
    store's state the state at the kill."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as pg:
        while time.monotonic() < deadline:
            row = pg.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.005)


def kill_now(
    server: ForkServer, pid: int, store: Store, url: str, log: Path, run_id: str, n: int
) -> Kill | None:
    """SIGKILL the child, reap it, read what the store holds; None if it had already ended."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # pragma: no cover - reaped already: cannot be (the server reaps)
        pass
    status = server.wait(pid)
    if status["signal"] is None:
        return None
    assert status["signal"] == signal.SIGKILL
    if not url.startswith("sqlite:///"):
        settle(url)
    marker = f"kill {run_id} {n}"
    mark(log, marker)
    return Kill(
        marker,
        store.get_flow_run(run_id, **NS),
        store.flow_run_history(run_id, **NS),
        checkpoints_of(url, run_id),
    )


def check_resumed_run(
    store: Store, log: Path, run_id: str, kills: list[Kill], expected_output: str, stats: Stats
) -> None:
    """The assertions of one trial, after the last resume."""
    rec = store.get_flow_run(run_id, **NS)
    history = store.flow_run_history(run_id, **NS)
    where = f"run {run_id} ({len(kills)} kill(s))"
    assert rec.state == "completed" and rec.outcome == "completed", (where, rec.state, rec.error)
    assert rec.outputs["output"] == expected_output, where

    # Every transition is legal, in order, and the run and every step ended completed.
    run_state, step_states = replay_history(run_id, history)
    assert run_state == "completed", where
    assert step_states == dict.fromkeys(CRASH_DAG, "completed"), where
    assert [(m.from_state, m.to_state) for m in history if m.step_key is None] == [
        (None, "draft"),
        ("draft", "active"),
        ("active", "running"),
        ("running", "completed"),
    ], where

    lines = [ln for ln in log_lines(log) if f" {run_id}" in ln]
    keys = {s: f"{run_id}:{s}" for s in CRASH_DAG}

    # Each step's side effect happened exactly once, under its one idempotency key.
    done = Counter(ln.split()[1] for ln in lines if ln.startswith("done "))
    assert done == Counter(keys.values()), (where, done)
    # ... and the store holds that side effect's result as the step's output.
    results = {ln.split()[1]: ln.split()[2] for ln in lines if ln.startswith("done ")}
    steps = {s.step_key: s for s in rec.steps}
    for sid, key in keys.items():
        assert steps[sid].idempotency_key == key
        assert steps[sid].output == results[key], (where, sid)

    for kill in kills:
        after = lines[lines.index(kill.marker) + 1 :]
        called_after = {ln.split()[1] for ln in after if ln.startswith(("call ", "start "))}
        # A step recorded completed before the kill was never called again.
        again = {sid for sid in kill.completed if keys[sid] in called_after}
        assert not again, (
            f"{where}: completed before {kill.marker!r} but called again: {sorted(again)}"
        )
        # Nothing recorded is lost: the outputs, and the transitions as a prefix.
        for s in kill.record.steps:
            if s.state == "completed":
                assert steps[s.step_key].output == s.output, (where, s.step_key)
        assert history[: len(kill.history)] == kill.history, (
            f"{where}: transitions lost or rewritten"
        )

    # An attempt running at a kill (a second kill may find the same one, if the resume died
    # before reaching the step) was either recorded failed and the step ran again, or — its
    # call had returned and the checkpoint held its output (the journal holds a completion
    # back until the run's next write) — recorded completed on resume without a call; others
    # ran once.
    recovered = {
        m.step_key
        for m in history
        if (m.from_state, m.to_state) == ("running", "completed") and m.detail == RECOVERED
    }
    for sid in CRASH_DAG:
        interrupted = len(
            {
                s.attempts
                for kill in kills
                for s in kill.record.steps
                if s.step_key == sid and s.state == "running"
            }
        )
        again = interrupted - (sid in recovered)
        assert steps[sid].attempts == 1 + again, (where, sid, steps[sid].attempts)
        died = [
            m
            for m in history
            if m.step_key == sid and (m.from_state, m.to_state) == ("running", "failed")
        ]
        assert len(died) == again, (where, sid)
        if sid in recovered:
            # Only a call that had returned before the last kill is recovered.
            before_last = lines[: lines.index(kills[-1].marker)]
            assert f"done {keys[sid]}" in {" ".join(ln.split()[:2]) for ln in before_last}, (
                where,
                sid,
            )
            stats.recovered += 1

    before_kill = lines[: lines.index(kills[0].marker)]
    done_unrecorded = {ln.split()[1] for ln in before_kill if ln.startswith("done ")} - {
        keys[s] for s in kills[0].completed
    }
    stats.replayed_by_key += len(done_unrecorded)


def test_sigkill_at_random_points_then_a_new_process_resumes_every_run(
    crash_store, server, tmp_path
):
    url, store = crash_store
    log = tmp_path / "effects.log"
    rng = random.Random(MASTER_SEED)

    def env(trial: int) -> dict[str, str]:
        return {LOG_ENV: str(log), SLEEP_ENV: STEP_SLEEP, SEED_ENV: str(trial)}

    # A run nobody kills: the expected output, and how long a run takes here.
    out = tmp_path / "baseline.out"
    t0 = time.monotonic()
    pid = server.start(
        op="run", db=url, flow="crash10", inputs={"seed": "s"}, out=str(out), env=env(-1)
    )
    first_line(out)
    t1 = time.monotonic()
    assert server.wait(pid) == {"pid": pid, "exit": 0, "signal": None}, out.read_text()
    run_seconds = time.monotonic() - t1
    baseline = json.loads(out.read_text().splitlines()[-1])
    assert baseline["status"] == "completed"
    expected = baseline["output"]
    assert expected == crash_flow_output("s") and t1 - t0 < 30

    stats = Stats()
    for trial in range(TRIALS):
        early = trial < EARLY
        out = tmp_path / f"t{trial}.out"
        pid = server.start(
            op="run",
            db=url,
            flow="crash10",
            inputs={"seed": "s"},
            out=str(out),
            env=env(trial),
            pause_after_start=early,
        )
        run_id = first_line(out)
        time.sleep(0 if early else rng.uniform(0, 0.9 * run_seconds))
        kill = kill_now(server, pid, store, url, log, run_id, 1)
        if kill is None or kill.record.terminal:
            # It ended before the kill came (runs are faster now: a busy machine?), or the kill
            # came after the run's end was recorded, while the process tidied up.
            stats.finished_before_kill += 1
            run_seconds *= 0.8
            assert store.get_flow_run(run_id, **NS).state == "completed"
            continue
        stats.crashed += 1
        stats.completed_at_kill[len(kill.completed)] += 1
        stats.running_at_kill += bool(kill.running)
        stats.no_checkpoint_at_kill += kill.checkpoints == 0
        if early:
            assert kill.checkpoints == 0 and kill.record.steps == [], (
                "the kill came after the first checkpoint"
            )
        kills = [kill]

        n = 1
        while True:  # resume in a new process (some trials: kill that one too)
            n += 1
            res = tmp_path / f"t{trial}-resume{n}.out"
            pid = server.start(op="resume", db=url, run_id=run_id, out=str(res), env=env(trial))
            if n == 2 and not early and trial % DOUBLE == 0:
                time.sleep(rng.uniform(0.05, 0.6) * run_seconds)
                again = kill_now(server, pid, store, url, log, run_id, n)
                if again is not None and not again.record.terminal:
                    stats.double_kills += 1
                    kills.append(again)
                    continue
            else:
                status = server.wait(pid)
                assert status == {"pid": pid, "exit": 0, "signal": None}, (
                    res.read_text(),
                    store.get_flow_run(run_id, **NS).error,
                )
                assert json.loads(res.read_text().splitlines()[-1])["output"] == expected
            break

        check_resumed_run(store, log, run_id, kills, expected, stats)

    print(f"\ncrash trials: {stats}")
    random_trials = TRIALS - EARLY
    assert stats.crashed >= EARLY + 0.75 * random_trials, stats
    # The kills were spread over the run: before any step completed, in the middle, late.
    mid = sum(v for k, v in stats.completed_at_kill.items() if 0 < k < len(CRASH_DAG))
    assert mid >= random_trials // 2, stats
    assert stats.completed_at_kill[0] >= EARLY and stats.running_at_kill >= random_trials // 3, (
        stats
    )
    assert stats.no_checkpoint_at_kill >= EARLY, stats


def test_sigkill_of_soloflow_flows_run_then_soloflow_flows_resume(crash_store, tmp_path):
    """The same with the CLI in fresh interpreters: ``flows run`` killed once its parallel
    branches ``b``, ``c`` and their fan-in ``e`` completed; ``flows resume`` in another one
    carries it on (its owner is dead: no ``--force`` needed)."""
    url, store = crash_store
    log = tmp_path / "effects.log"
    env = subprocess_env(**{LOG_ENV: str(log), SLEEP_ENV: STEP_SLEEP, SEED_ENV: "7"})
    tools = ["--tools", "flowrun_fixtures:TOOLS"]
    expected = crash_flow_output("s")
    wait_for = "e"
    proc = subprocess.Popen(
        soloflow_argv("--db", url, "flows", "run", "crash10", "--input", '{"seed": "s"}', *tools),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        run_id = _read_line(proc)
        assert run_id.startswith("frun_")
        # Kill once the store records step `wait_for` completed (mid-run, some steps done).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            steps = {s.step_key: s.state for s in store.get_flow_run(run_id, **NS).steps}
            if steps.get(wait_for) == "completed":
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    mark(log, f"kill {run_id} 1")
    kill = Kill(
        f"kill {run_id} 1",
        store.get_flow_run(run_id, **NS),
        store.flow_run_history(run_id, **NS),
        checkpoints_of(url, run_id),
    )
    assert kill.record.state == "running" and wait_for in kill.completed
    assert len(kill.completed) < len(CRASH_DAG)

    # Without --force it is refused only while the owner lives; it is dead: no --force needed.
    done = subprocess.run(
        soloflow_argv("--db", url, "flows", "resume", run_id, "--json", *tools),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["run_id"] == run_id
    assert result["output"] == expected
    check_resumed_run(store, log, run_id, [kill], expected, Stats())


def _read_line(proc: subprocess.Popen[str], timeout: float = 30.0) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"no line from {proc.args} in {timeout}s")
    return proc.stdout.readline().strip()
