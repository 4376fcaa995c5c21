"""Time mine_ranked by phase on a synthetic ledger given as store columns, with peak RSS.

    python benchmarks/bench_mine_scale.py --runs 100000 --workflows 50 --noise 0.2
    python benchmarks/bench_mine_scale.py --runs 1000000 --workflows 50 --noise 0.2

Each size runs in a fresh subprocess so that its peak RSS is its own (the generated
columns are part of it, as the store's columns are in a real detection). Prints seconds per
phase (units, mine, rank), precision and recall in the top ``workflows``, the process's
peak RSS (generation included), and the peak RSS while mining (``mining_peak_rss_mb``: VmHWM
reset just before; the resident columns, ``rss_before_mining_mb``, are part of it).
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

from _memory import peak_reset, status_mb


def _measure(
    runs: int, workflows: int, noise: float, seed: int, sample: str, trace: bool
) -> dict[str, object]:
    import numpy as np

    from soloflow_core.mining.pipeline import DEFAULT_SAMPLE_UNITS, mine_ranked
    from soloflow_core.store.repository import ToolNameColumns
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
    return {"runs": runs, "calls": calls, **phases, "total": round(total, 3),
            "precision": p, "recall": r, "peak_rss_mb": round(rss),
            "rss_before_mining_mb": round(before), "mining_peak_rss_mb": round(status_mb("VmHWM")),
            "mining_peak_alloc_mb": mining_peak and round(mining_peak)}  # fmt: skip






def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, nargs="+", default=[100_000])
    ap.add_argument("--workflows", type=int, default=50)
    ap.add_argument("--noise", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-units", default="", help="a number, 'none', or empty: the default")
    ap.add_argument("--trace-memory", action="store_true", help="tracemalloc (slows ranking)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(
            json.dumps(
                _measure(a.runs[0], a.workflows, a.noise, a.seed, a.sample_units, a.trace_memory)
            )
        )
        return
    for runs in a.runs:
        cmd = [sys.executable, __file__, "--child", "--runs", str(runs), "--workflows",
               str(a.workflows), "--noise", str(a.noise), "--seed", str(a.seed),
               "--sample-units", a.sample_units] + ["--trace-memory"] * a.trace_memory  # fmt: skip
        print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
