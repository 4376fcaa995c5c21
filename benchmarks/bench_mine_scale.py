"""Time mine_ranked by phase on a synthetic ledger given as store columns, with peak RSS.

    python benchmarks/bench_mine_scale.py --runs 100000 --workflows 50 --noise 0.2
    python benchmarks/bench_mine_scale.py --runs 1000000 --workflows 50 --noise 0.2

Each size runs in a fresh subprocess so that its peak RSS is its own (the generated
columns are part of it, as the store's columns are in a real detection). Prints seconds per
phase (units, mine, rank), precision and recall in the top ``workflows``, the process's
peak RSS (generation included), and the peak RSS while mining (``mining_peak_rss_mb``: VmHWM
reset just before; the resident columns, ``rss_before_mining_mb``, are part of it).

    python benchmarks/bench_mine_scale.py --from-store /tmp/sf_mine_1m.db --runs 1000000

``--from-store PATH`` measures what ``soloflow detect`` sees: a subprocess builds the SQLite
store at ``PATH`` once (reused while ``PATH.json``, the planted workflows, says it holds
the same ledger), then a fresh one reads the tool-name column out of it the plain way
(``SELECT name ... ORDER BY run_pk, seq`` through the sqlite3 driver), reads it again with
``Store.read_tool_names``, and mines those columns. Prints the seconds of each, the ratios
mine / read, and the process's peak RSS (the whole process, and while mining).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from _memory import peak_reset, status_mb


def _measure(
    runs: int, workflows: int, noise: float, seed: int, sample: str, trace: bool
) -> dict[str, object]:
    import numpy as np

    from soloflow_core.mining.pipeline import DEFAULT_SAMPLE_UNITS, mine_ranked
    from soloflow_core.store import ToolNameColumns
    from soloflow_core.testing.synthetic_ledger import generate_ledger, score_top_k

    led = generate_ledger(runs=runs, workflows=workflows, seed=seed, noise=noise, names_only=True)
    vocab: dict[str, int] = {}
    codes = np.fromiter(
        (vocab.setdefault(n, len(vocab)) for s in led.sequences for n in s.names), np.int64
    )
    lengths = np.fromiter((len(s.names) for s in led.sequences), np.int64, len(led.sequences))
    cols = ToolNameColumns(
        run_pks=np.arange(runs, dtype=np.int64),
        run_ids=[s.run_id for s in led.sequences],
        offsets=np.concatenate(([0], np.cumsum(lengths))),
        codes=codes,
        names=list(vocab),
        errors=np.fromiter((e for s in led.sequences for e in s.errors), bool, len(codes)),
        success=np.fromiter(
            (-1 if s.success is None else int(s.success) for s in led.sequences), np.int8
        ),
        cost=np.full(runs, np.nan),
        tokens=np.full(runs, np.nan),
    )
    workflows_truth, calls = led.workflows, len(codes)
    del led, codes
    phases: dict[str, float] = {}
    started: dict[str, float] = {}

    def progress(phase: str, done: float) -> None:
        now = time.perf_counter()
        if done == 0.0:
            started[phase] = now
        else:
            phases[phase] = round(now - started[phase], 3)

    if trace:  # numpy reports its buffers: the mining's own peak, columns excluded (slow)
        tracemalloc.start()
    gc.collect()
    before = status_mb("VmRSS")
    peak_reset()  # from here VmHWM is the mining's peak (the resident columns included)
    t = time.perf_counter()
    units = None if sample == "none" else int(sample) if sample else DEFAULT_SAMPLE_UNITS
    ranked = mine_ranked(cols, top_k=workflows, on_progress=progress, sample_units=units)
    total = time.perf_counter() - t
    mining_peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else None
    tracemalloc.stop()
    p, r = score_top_k([x.names for x in ranked], workflows_truth, k=workflows)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "runs": runs,
        "calls": calls,
        **phases,
        "total": round(total, 3),
        "precision": p,
        "recall": r,
        "peak_rss_mb": round(rss),
        "rss_before_mining_mb": round(before),
        "mining_peak_rss_mb": round(status_mb("VmHWM")),
        "mining_peak_alloc_mb": mining_peak and round(mining_peak),
    }


_USER, _AGENT = "bench", "miner"


def _build_store(path: str, runs: int, workflows: int, noise: float, seed: int) -> None:
    """Write the synthetic ledger's runs (names, errors, outcome) into a new store at
    ``path``, and its planted workflows to ``path + ".json"`` (written last: its presence
    says the store is complete)."""
    import os

    from soloflow_core.store import Store
    from soloflow_core.store.writer import RunRow, ToolCallRow
    from soloflow_core.testing.synthetic_ledger import generate_ledger

    for suffix in ("", "-wal", "-shm", ".json"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    led = generate_ledger(runs=runs, workflows=workflows, seed=seed, noise=noise, names_only=True)
    rows = (
        RunRow(
            run_id=s.run_id,
            user_id=_USER,
            agent_id=_AGENT,
            task=None,
            success=s.success,
            cost=s.cost,
            tokens=s.tokens,
            tool_calls=[
                ToolCallRow(
                    name=n,
                    args={},
                    output=None,
                    error=e,
                    duration_ms=None,
                    tool_call_id=None,
                    meta={},
                )
                for n, e in zip(s.names, s.errors, strict=True)
            ],
            model_calls=[],
            started_at=None,
            ended_at=None,
            classification=None,
        )
        for s in led.sequences
    )
    with Store.open(f"sqlite:///{path}") as store:
        written = store.add_runs(rows)
    spec = {
        "runs": runs,
        "workflows": workflows,
        "noise": noise,
        "seed": seed,
        "written": written,
        "planted": [list(w.tools) for w in led.workflows],
    }
    with open(path + ".json", "w") as f:
        json.dump(spec, f)


def _read_plain(path: str) -> dict[str, object]:
    """The tool-name column fetched the plain way, through the sqlite3 driver."""
    import sqlite3

    rss_start = status_mb("VmRSS")
    db = sqlite3.connect(path)
    t = time.perf_counter()
    names = db.execute(
        "SELECT name FROM sf_tool_calls WHERE user_id = ? AND agent_id = ? ORDER BY run_pk, seq",
        (_USER, _AGENT),
    ).fetchall()
    seconds = time.perf_counter() - t
    db.close()
    return {
        "calls": len(names),
        "read_plain_s": round(seconds, 2),
        "rss_start_mb": round(rss_start),
        "peak_rss_mb": round(status_mb("VmHWM")),
    }


def _detect(path: str, workflows: int) -> dict[str, object]:
    """What ``soloflow detect`` does: ``Store.read_tool_names``, then ``mine_ranked``."""
    from soloflow_core.mining.pipeline import mine_ranked
    from soloflow_core.store import Store
    from soloflow_core.testing.synthetic_ledger import score_top_k

    with open(path + ".json") as f:
        planted = json.load(f)["planted"]
    rss_start = status_mb("VmRSS")
    store = Store.open(f"sqlite:///{path}")
    t = time.perf_counter()
    cols = store.read_tool_names(user_id=_USER, agent_id=_AGENT)
    read = time.perf_counter() - t
    store.close()
    read_peak = status_mb("VmHWM")
    gc.collect()
    before = status_mb("VmRSS")
    peak_reset()  # from here VmHWM is the mining's peak (the resident columns included)
    phase_peaks: dict[str, int] = {}

    def progress(phase: str, done: float) -> None:
        if done == 1.0:  # each phase's peak: VmHWM reset as the phase starts
            phase_peaks[phase] = round(status_mb("VmHWM"))
            mining_peak[0] = max(mining_peak[0], phase_peaks[phase])
        elif done == 0.0:
            mining_peak[0] = max(mining_peak[0], status_mb("VmHWM"))
            peak_reset()

    mining_peak = [0.0]
    t = time.perf_counter()
    ranked = mine_ranked(cols, top_k=workflows, on_progress=progress)
    mine = time.perf_counter() - t
    mining_peak[0] = max(mining_peak[0], status_mb("VmHWM"))
    p, r = score_top_k([x.names for x in ranked], planted, k=workflows)
    nbytes = sum(
        a.nbytes
        for a in (
            cols.run_pks,
            cols.offsets,
            cols.codes,
            cols.errors,
            cols.success,
            cols.cost,
            cols.tokens,
        )
    )
    return {
        "runs": cols.run_count,
        "calls": int(cols.offsets[-1]),
        "read_tool_names_s": round(read, 2),
        "mine_s": round(mine, 2),
        "precision": p,
        "recall": r,
        "rss_start_mb": round(rss_start),
        "read_tool_names_peak_rss_mb": round(read_peak),
        "column_arrays_mb": round(nbytes / 2**20),
        "rss_before_mining_mb": round(before),
        "mining_peak_rss_mb": round(mining_peak[0]),
        "mining_phase_peak_rss_mb": phase_peaks,
        "peak_rss_mb": round(max(read_peak, mining_peak[0])),
    }


def _store_is_built(path: str, runs: int, workflows: int, noise: float, seed: int) -> bool:
    try:
        with open(path + ".json") as f:
            spec = json.load(f)
    except (OSError, ValueError):
        return False
    want = {"runs": runs, "workflows": workflows, "noise": noise, "seed": seed}
    return all(spec.get(k) == v for k, v in want.items())


def _run_from_store(path: str, runs: int, workflows: int, noise: float, seed: int) -> None:
    args = [
        "--from-store",
        path,
        "--runs",
        str(runs),
        "--workflows",
        str(workflows),
        "--noise",
        str(noise),
        "--seed",
        str(seed),
    ]
    if not _store_is_built(path, runs, workflows, noise, seed):
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--build", *args], check=True)
        print(f"built {path} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    res: dict[str, Any] = {}
    for phase in ("read-plain", "detect"):  # each in a fresh process: its peak is its own
        out = subprocess.run(
            [sys.executable, __file__, "--child", phase, *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(phase, out)
        res[phase] = json.loads(out)
    plain, detect = res["read-plain"], res["detect"]
    assert plain["calls"] == detect["calls"], (plain["calls"], detect["calls"])
    for read, seconds in (
        ("read_plain", plain["read_plain_s"]),
        ("read_tool_names", detect["read_tool_names_s"]),
    ):
        ratio = detect["mine_s"] / seconds
        print(f"mine / {read} = {detect['mine_s']} / {seconds} = {ratio:.2f} (≤ 2: {ratio <= 2})")
    peak = detect["peak_rss_mb"]
    print(f"detect peak_rss_mb = {peak} (≤ 1024: {peak <= 1024})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, nargs="+", default=[100_000])
    ap.add_argument("--workflows", type=int, default=50)
    ap.add_argument("--noise", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-units", default="", help="a number, 'none', or empty: the default")
    ap.add_argument("--trace-memory", action="store_true", help="tracemalloc (slows ranking)")
    ap.add_argument(
        "--from-store",
        default="",
        metavar="PATH",
        help="mine a SQLite store at PATH (built there once) instead",
    )
    ap.add_argument("--child", nargs="?", const="mine", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.from_store:
        path, runs = a.from_store, a.runs[0]
        if a.build:
            _build_store(path, runs, a.workflows, a.noise, a.seed)
        elif a.child:
            res = _read_plain(path) if a.child == "read-plain" else _detect(path, a.workflows)
            print(json.dumps(res))
        else:
            _run_from_store(path, runs, a.workflows, a.noise, a.seed)
        return
    if a.child:
        print(
            json.dumps(
                _measure(a.runs[0], a.workflows, a.noise, a.seed, a.sample_units, a.trace_memory)
            )
        )
        return
    for runs in a.runs:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--runs",
            str(runs),
            "--workflows",
            str(a.workflows),
            "--noise",
            str(a.noise),
            "--seed",
            str(a.seed),
            "--sample-units",
            a.sample_units,
        ] + ["--trace-memory"] * a.trace_memory
        print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
