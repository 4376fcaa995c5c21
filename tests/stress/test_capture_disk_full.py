"""A capture into a SQLite file whose disk fills (issue 25, faults). 0 silently lost: a run is
stored, or spilled, or — when the spill file cannot be written either — counted as dropped in
``health()``, logged, and kept in memory, never claimed written. Once space is freed, all are
stored.

Two ways to fill a disk: a real 2 MiB ``tmpfs`` mounted for the test (needs root and the
capability to mount, as in this container; skipped with the reason where mounting is refused),
and, everywhere, a file-size limit (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored) on the capturing
process, under which a write past the limit fails with ``EFBIG`` as SQLite's ``SQLITE_FULL``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soloflow_core.ledger.spill import append_spill
from soloflow_core.models import TaskRun
from soloflow_core.store import Store

pytestmark = pytest.mark.stress

RUNS = 40
AFTER = 5
"""Runs captured once space is freed."""
PAYLOAD = 8192
"""Bytes of each run's tool output: the disk fills after a few runs."""

CAPTURER = textwrap.dedent("""
    import json, os, resource, signal, sys
    db, spill, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from langchain_core.tools import tool
    from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

    @tool
    def fetch(key: str) -> str:
        \"\"\"A big answer.\"\"\"
        return key + ":" + os.urandom(PAYLOAD // 2).hex()

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = SoloFlowCallbackHandler(database_url=db, spill_path=spill, write_timeout=10,
                                      user_id="u", agent_id="a")
    written = []
    for line in sys.stdin:
        command, *args = line.split()
        if command == "limit":  # the disk is as full as the store file is now, plus args[0]
            resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(db) + int(args[0]), hard))
        elif command == "unlimit":
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        elif command == "capture":
            for i in range(int(args[0]), int(args[1])):
                before = handler.runs_written
                fetch.invoke({"key": f"run {i}"}, config={"callbacks": [handler]})
                if handler.runs_written > before:
                    written.append(handler.last_run.run_id)
        elif command == "flush":
            handler.flush()
        h = handler.health()
        print(json.dumps({"ok": h.ok, "problem": h.problem, "written": h.runs_written,
                          "spilled": h.runs_spilled, "dropped": h.runs_dropped,
                          "claimed": written}), flush=True)
    handler.close()
""").replace("PAYLOAD", str(PAYLOAD))


class Capturer:
    """The capturing process, driven line by line; each command answers its ``health()``."""

    def __init__(self, tmp_path: Path, db: Path, spill: Path) -> None:
        script = tmp_path / "capture.py"
        script.write_text(CAPTURER)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(db), str(spill), "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def __call__(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(self.stderr())
        return json.loads(line)  # type: ignore[no-any-return]

    def stderr(self) -> str:
        """End the process; what it logged."""
        _, errors = self.proc.communicate(timeout=60)
        return errors


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    tried = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", f"sf_probe_{uuid.uuid4().hex[:8]}", str(mount)],
        capture_output=True,
        text=True,
    )
    if tried.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({tried.stderr.strip()}); the rlimit probe runs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def _fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` with a ballast file but ``leave`` bytes; return the ballast."""
    ballast = disk / "ballast"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return ballast


def _stored(db: Path) -> set[str]:
    with Store.open(str(db)) as store:
        return {r.run_id for r in store.list_runs(limit=10_000, user_id="u", agent_id="a")}


def _check_accounting(full: dict[str, Any], done: dict[str, Any], stored: set[str]) -> None:
    """While full, each run was written, spilled or dropped (kept in memory only); once space
    is freed all are stored (``runs_written`` counts them), the next runs too."""
    assert full["written"] + full["spilled"] + full["dropped"] == RUNS
    assert set(full["claimed"]) <= stored  # a run said written is stored
    assert done["ok"], done
    assert done["written"] == len(stored) == RUNS + AFTER


@pytest.mark.parametrize("spill_on", ["another disk", "the full disk"])
def test_a_full_tmpfs_spills_and_writes_back_once_space_is_freed(
    small_disk: Path, tmp_path: Path, spill_on: str
) -> None:
    db = small_disk / "runs.db"
    Store.open(str(db)).close()
    spill = (small_disk if spill_on == "the full disk" else tmp_path) / "runs.db.spill.jsonl"
    capture = Capturer(tmp_path, db, spill)
    capture("health")  # imported and connected before the disk fills
    ballast = _fill(small_disk, leave=64 << 10)
    full = capture(f"capture 0 {RUNS}")
    assert full["spilled"] + full["dropped"] > 0, full  # the disk did fill
    assert not full["ok"] and "full" in (full["problem"] or "")
    if spill_on == "another disk":
        assert full["dropped"] == 0
    else:
        assert full["dropped"] > 0  # the spill file could not take them: said, counted, kept
    ballast.unlink()  # space freed: the next run stored writes the others back
    done = capture(f"capture {RUNS} {RUNS + AFTER}")
    stderr = capture.stderr()
    assert stderr.count("LOST if the process ends") == full["dropped"]
    _check_accounting(full, done, _stored(db))
    assert not spill.exists() or spill.stat().st_size == 0
    counts = {k: full[k] for k in ("written", "spilled", "dropped")}
    print(f"\ntmpfs full, spill on {spill_on}: {counts}; then {len(_stored(db))} stored")


def test_a_file_size_limit_spills_and_writes_back_once_lifted(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    Store.open(str(db)).close()
    spill = tmp_path / "spill" / "runs.db.spill.jsonl"
    capture = Capturer(tmp_path, db, spill)
    capture("limit 65536")
    full = capture(f"capture 0 {RUNS}")
    assert full["spilled"] > 0 and full["dropped"] == 0, full
    assert not full["ok"] and "disk I/O error" in (full["problem"] or "")  # EFBIG, not ENOSPC
    capture("unlimit")
    capture("flush")
    done = capture(f"capture {RUNS} {RUNS + AFTER}")
    capture.stderr()
    _check_accounting(full, done, _stored(db))


def test_a_spill_write_cut_short_leaves_no_torn_line(tmp_path: Path) -> None:
    """A spill append that fails part-way (disk full) leaves the file as it was."""
    disk = tmp_path / "disk"
    spill = disk / "spill.jsonl"
    runs = [TaskRun(run_id=f"r{i}", task="x" * 2000, user_id="u", agent_id="a") for i in range(3)]
    code = textwrap.dedent(f"""
        import resource, signal, sys
        from soloflow_core.ledger.spill import append_spill
        from soloflow_core.models import TaskRun
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, resource.RLIM_INFINITY))
        run = TaskRun(run_id="big", task="y" * 5000, user_id="u", agent_id="a")
        try:
            append_spill({str(spill)!r}, [run], limit_bytes=1 << 20)
        except OSError as exc:
            print("refused", exc.errno)
    """)
    disk.mkdir()
    append_spill(spill, runs[:1], limit_bytes=1 << 20)
    size = spill.stat().st_size
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.startswith("refused"), out.stderr
    assert spill.stat().st_size == size  # no torn line
    append_spill(spill, runs[1:], limit_bytes=1 << 20)
    assert [json.loads(line)["run_id"] for line in spill.read_text().splitlines()] == [
        "r0",
        "r1",
        "r2",
    ]
