"""Detection, measured side by side: the design document's algorithm vs SoloFlow's miner.

**Baseline**: ``baseline_doc_detector.detect_doc_candidates``, the design document's Flow
Sequence Detector written straightforwardly (dicts keyed by tuples), over the whole ledger
instead of its 200-record lookback so that both sides read the same runs.
**SoloFlow**: ``soloflow_core.mining.pipeline.mine_ranked``.

Synthetic mode (the default): for each size, one seeded ledger with planted workflows
(``generate_ledger``; usage on, arguments off, so runs carry a cost for the document's
savings formula) is generated once and written to a pickle of plain tuples. Each
measurement is its own subprocess that loads that file into the shape its side gets from
the store, untimed, then times mining + ranking only (each side's module is imported
before the clock starts), and reads its peak resident memory (``VmHWM``, reset after
loading), so neither side's memory includes the other's or the generator's:

* **baseline**: one object per run with its tool names as a tuple of strings, cost and
  tokens: what ``Store.iter_sequences`` yields (its ``RunSequence``), the document's
  algorithm's natural input;
* **SoloFlow**: the integer-coded columns ``Store.read_tool_names`` returns
  (``ToolNameColumns``: codes by first appearance, offsets, errors, success, cost, tokens),
  what ``soloflow detect`` mines;
* **SoloFlow, from strings**: ``mine_ranked`` on the same ``RunSequence`` objects as the
  baseline (it turns the 846k strings of 100k runs into arrays itself, ~0.25 s more):
  printed too, so that neither input shape hides anything.

The sides alternate, ``--repeats`` times (1 at 1M runs), and the median is reported. A side
is killed past ``--timeout`` seconds or ``--mem-cap-mb`` resident. Precision and recall are
those of the top k against the planted workflows, k = the number planted (``score_top_k``).

``--end-to-end``: 100k runs written as JSONL and ingested into a SQLite store (cached under
``/tmp``), then the baseline's naive load (``Store.iter_sequences``) + mine vs the real
``soloflow ... detect --json`` command as a subprocess (start-up included).

``--tau``: both sides on the real τ-bench ledger in ``tests/data``: timing and the top 10.

Usage::

    python benchmarks/bench_detect.py [--sizes 10000,100000,1000000] [--repeats 3] [--quick]
    python benchmarks/bench_detect.py --end-to-end
    python benchmarks/bench_detect.py --tau
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _memory import peak_reset, status_mb
from baseline_doc_detector import detect_doc_candidates

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(tempfile.gettempdir()) / "soloflow-bench-detect"
SEED = 20240611
USER, AGENT = "bench", "detect"
E2E_TARGET = 5.0
MB = 1024 * 1024


# ---------------------------------------------------------------------- one side, in a child


@dataclass(slots=True)
class _Run:
    """A run as the baseline reads it."""

    names: tuple[str, ...]
    cost: float | None
    tokens: float | None


def _mine_baseline(runs: list[Any], k: int) -> list[tuple[list[str], int]]:
    cands = detect_doc_candidates(runs, min_sequence_length=3, min_occurrences=3, max_candidates=k)
    return [(list(c.tool_sequence), c.occurrence_count) for c in cands]


def _mine_soloflow(runs: Any, k: int, options: Any = None) -> list[tuple[list[str], int]]:
    from soloflow_core.mining.pipeline import mine_ranked

    ranked = mine_ranked(runs, min_length=3, min_support=3, top_k=k, options=options)
    return [(list(p.names), p.support) for p in ranked]


def _columns(rows: list[tuple[Any, ...]]) -> Any:
    """The ledger as ``Store.read_tool_names`` hands it over: integer codes by first
    appearance, run offsets, per-call errors, per-run success (1/0/-1), cost and tokens
    (NaN when unknown)."""
    import numpy as np

    from soloflow_core.store import ToolNameColumns

    vocab: dict[str, int] = {}
    codes = np.fromiter((vocab.setdefault(n, len(vocab)) for row in rows for n in row[1]), np.int64)
    lengths = np.fromiter((len(row[1]) for row in rows), np.int64, len(rows))

    def known(v: Any) -> float:
        return float("nan") if v is None else float(v)

    return ToolNameColumns(
        run_pks=np.arange(1, len(rows) + 1, dtype=np.int64),
        run_ids=[row[0] for row in rows],
        offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        codes=codes,
        names=list(vocab),
        errors=np.fromiter((bool(e) for row in rows for e in row[2]), bool, len(codes)),
        success=np.fromiter((-1 if r[3] is None else int(r[3]) for r in rows), np.int8),
        cost=np.fromiter((known(r[4]) for r in rows), np.float64, len(rows)),
        tokens=np.fromiter((known(r[5]) for r in rows), np.float64, len(rows)),
    )


def _child_synthetic(side: str, path: str, k: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        rows = pickle.load(f)
    runs: Any
    if side == "baseline":
        runs = [_Run(names, cost, tokens) for _, names, _, _, cost, tokens in rows]
        mine = _mine_baseline
    elif side == "soloflow":
        runs = _columns(rows)
        mine = _mine_soloflow
    else:  # "soloflow-strings"
        from soloflow_core.store import RunSequence

        runs = [RunSequence(*row) for row in rows]
        mine = _mine_soloflow
    del rows
    if side != "baseline":
        # Imported before the clock starts, as the baseline's detector module is (at the
        # top of this file): both sides time mining, neither its import (~0.02 s here).
        import soloflow_core.mining.pipeline  # noqa: F401
    load_s = time.perf_counter() - t0
    gc.collect()
    peak_reset()
    before = status_mb("VmRSS")
    t0 = time.perf_counter()
    top = mine(runs, k)
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "load_s": load_s,
        "rss_before_mb": before,
        "peak_mb": status_mb("VmHWM"),
        "top": top,
    }


def _child_e2e_baseline(db: str, k: int) -> dict[str, Any]:
    from soloflow_core.store import Store

    t0 = time.perf_counter()
    store = Store.open(db)
    runs = list(store.iter_sequences(user_id=USER, agent_id=AGENT))
    load_s = time.perf_counter() - t0
    top = _mine_baseline(runs, k)
    seconds = time.perf_counter() - t0
    store.close()
    return {"seconds": seconds, "load_s": load_s, "peak_mb": status_mb("VmHWM"), "top": top}


# ---------------------------------------------------------------------- running a child


@dataclass(slots=True)
class Outcome:
    """One child's result, or why it has none."""

    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    failure: str = ""
    cpu_s: float = 0.0
    """User + system CPU seconds of the child (all its threads): steadier than wall time
    on a shared machine."""


def _run_child(argv: list[str], timeout: float, cap_mb: float) -> Outcome:
    """Run ``argv``, killing it past ``timeout`` seconds or ``cap_mb`` resident; its last
    stdout line is its JSON result."""
    t0 = time.perf_counter()
    used0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=ROOT, text=True)
        failure = ""
        while proc.poll() is None:
            elapsed = time.perf_counter() - t0
            rss = _child_rss_mb(proc.pid)
            if elapsed > timeout:
                failure = f"did not finish in {timeout:.0f} s"
            elif rss > cap_mb:
                failure = f"killed at {rss / 1024:.1f} GB resident after {elapsed:.0f} s"
            if failure:
                proc.kill()
                proc.wait()
                break
            try:  # returns as the child exits (a sleep would add up to its length to wall)
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
        wall = time.perf_counter() - t0
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = used.ru_utime + used.ru_stime - used0.ru_utime - used0.ru_stime
        err = proc.stderr.read() if proc.stderr else ""
        if failure:
            return Outcome(False, wall_s=wall, failure=failure)
        if proc.returncode != 0:
            last = (err.strip().splitlines() or ["?"])[-1]
            return Outcome(False, wall_s=wall, failure=f"exit {proc.returncode}: {last}")
        out.seek(0)
        text = out.read().decode()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = json.loads(text.strip().splitlines()[-1])
    return Outcome(True, data if isinstance(data, dict) else {"result": data}, wall, cpu_s=cpu)


def _child_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _self(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


# ---------------------------------------------------------------------- synthetic ledgers


@dataclass(slots=True)
class SizeResult:
    runs: int
    workflows: int
    calls: int
    gen_s: float
    base: list[Outcome]
    solo: list[Outcome]
    scores: dict[str, tuple[float, float]]
    strings: list[Outcome] = field(default_factory=list)
    """SoloFlow on the baseline's input (strings), for comparison."""


def _write_ledger(n: int, workflows: int, seed: int, path: Path) -> tuple[int, float, Any]:
    from soloflow_core.testing.synthetic_ledger import generate_ledger

    t0 = time.perf_counter()
    ledger = generate_ledger(runs=n, workflows=workflows, seed=seed, noise=0.1, with_args=False)
    rows = [(s.run_id, s.names, s.errors, s.success, s.cost, s.tokens) for s in ledger.sequences]
    with open(path, "wb") as f:
        pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
    calls = sum(len(r[1]) for r in rows)
    return calls, time.perf_counter() - t0, ledger.workflows


def bench_size(n: int, workflows: int, repeats: int, args: argparse.Namespace) -> SizeResult:
    from soloflow_core.testing.synthetic_ledger import score_top_k

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.pickle"
        calls, gen_s, planted = _write_ledger(n, workflows, args.seed, path)
        gc.collect()
        base: list[Outcome] = []
        solo: list[Outcome] = []
        strings: list[Outcome] = []
        sides = (("baseline", base), ("soloflow", solo), ("soloflow-strings", strings))
        for _ in range(repeats):
            for side, got in sides:
                argv = _self("--child", side, "--input", str(path), "--k", str(workflows))
                got.append(_run_child(argv, args.timeout, args.mem_cap_mb))
    scores = {}
    for side, got in sides:
        done = [o for o in got if o.ok]
        if done:
            names = [names for names, _ in done[0].data["top"]]
            scores[side] = score_top_k(names, planted, workflows)
    if solo and strings and solo[0].ok and strings[0].ok:
        # One ledger, two input shapes: the same candidates, or the bench says so.
        assert solo[0].data["top"] == strings[0].data["top"], "columns and strings differ"
    return SizeResult(n, workflows, calls, gen_s, base, solo, scores, strings)


def _median(outcomes: list[Outcome], key: str) -> float | None:
    vals = [o.data[key] for o in outcomes if o.ok]
    return statistics.median(vals) if vals else None


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "—" if v is None else format(v, spec)


def _pr(scores: dict[str, tuple[float, float]], side: str) -> str:
    return "—" if side not in scores else "{:.2f}/{:.2f}".format(*scores[side])


def print_synthetic(results: list[SizeResult]) -> None:
    print(
        "\nSoloFlow mines the store's integer-coded columns (`Store.read_tool_names`), the "
        "baseline its `RunSequence`s (`Store.iter_sequences`); both loads untimed. "
        '"from strings": SoloFlow on the baseline\'s input.\n'
        "\n| runs | planted | calls | baseline s | SoloFlow s | speed-up "
        "| SoloFlow s, from strings | speed-up, from strings | baseline peak MB "
        "| SoloFlow peak MB | baseline P/R@k | SoloFlow P/R@k | reps |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        bs, ss = _median(r.base, "seconds"), _median(r.solo, "seconds")
        st = _median(r.strings, "seconds")
        ratio = f"{bs / ss:.1f}×" if bs and ss else "—"
        if bs is None and ss and r.base:
            ratio = f"> {r.base[0].wall_s / ss:.0f}× (baseline killed)"
        print(
            f"| {r.runs:,} | {r.workflows} | {r.calls:,} | {_fmt(bs)} | {_fmt(ss)} | {ratio} "
            f"| {_fmt(st)} | {f'{bs / st:.1f}×' if bs and st else '—'} "
            f"| {_fmt(_median(r.base, 'peak_mb'), '.0f')} "
            f"| {_fmt(_median(r.solo, 'peak_mb'), '.0f')} "
            f"| {_pr(r.scores, 'baseline')} | {_pr(r.scores, 'soloflow')} "
            f"| {len([o for o in r.base if o.ok])}/{len(r.solo)} |"
        )
    print()
    for r in results:
        sides = (("baseline", r.base), ("SoloFlow", r.solo), ("SoloFlow from strings", r.strings))
        for side, got in sides:
            for o in got:
                if not o.ok:
                    print(f"- {r.runs:,} runs, {side}: {o.failure}")
        before = _median(r.solo, "rss_before_mb"), _median(r.base, "rss_before_mb")
        print(
            f"- {r.runs:,} runs / {r.workflows} planted: ledger generated + written in "
            f"{r.gen_s:.1f} s (not timed); resident before mining: SoloFlow "
            f"{_fmt(before[0], '.0f')} MB, baseline {_fmt(before[1], '.0f')} MB; "
            f"times per rep: baseline {_times(r.base)}, SoloFlow {_times(r.solo)}, "
            f"SoloFlow from strings {_times(r.strings)} (P/R {_pr(r.scores, 'soloflow-strings')}, "
            f"peak {_fmt(_median(r.strings, 'peak_mb'), '.0f')} MB)"
        )


def _times(outcomes: list[Outcome]) -> str:
    return "[" + ", ".join(f"{o.data['seconds']:.2f}" if o.ok else "x" for o in outcomes) + "]"


# ---------------------------------------------------------------------- end to end


def _e2e_db(n: int, seed: int) -> Path:
    """A SQLite store with ``n`` synthetic runs, built once and cached."""
    from soloflow_core.ledger import dump_run, ingest
    from soloflow_core.store import Store
    from soloflow_core.testing.synthetic_ledger import generate_ledger

    CACHE.mkdir(exist_ok=True)
    db = CACHE / f"e2e-{n}-seed{seed}.db"
    if db.exists():
        return db
    t0 = time.perf_counter()
    jsonl = CACHE / f"e2e-{n}-seed{seed}.jsonl"
    ledger = generate_ledger(runs=n, workflows=20, seed=seed, noise=0.1)
    with open(jsonl, "w") as f:
        for run in ledger.runs:
            f.write(json.dumps(dump_run(run)) + "\n")
    t1 = time.perf_counter()
    partial = db.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with Store.open(f"sqlite:///{partial}") as store:
        report = ingest(store, [jsonl], default_user=USER, default_agent=AGENT)
    partial.rename(db)
    jsonl.unlink()
    print(
        f"built {db}: {report.runs_written:,} runs; JSONL written in {t1 - t0:.0f} s, "
        f"ingested in {time.perf_counter() - t1:.0f} s"
    )
    return db


def bench_end_to_end(n: int, repeats: int, args: argparse.Namespace) -> None:
    db = _e2e_db(n, args.seed)
    url = f"sqlite:///{db}"
    cli = shutil.which("soloflow", path=str(Path(sys.executable).parent)) or "soloflow"
    detect = [cli, "--db", url, "--user", USER, "--agent", AGENT, "detect", "--json"]
    base: list[Outcome] = []
    solo: list[Outcome] = []
    for _ in range(repeats):
        base.append(
            _run_child(
                _self("--child", "e2e-baseline", "--db", url, "--k", "5"),
                args.timeout,
                args.mem_cap_mb,
            )
        )
        solo.append(_run_child(detect + ["--max-candidates", "5"], args.timeout, args.mem_cap_mb))
    for o in solo:
        if not o.ok:
            print(f"- soloflow detect: {o.failure}")
    b_total, b_load = _median(base, "seconds"), _median(base, "load_s")
    b_wall = statistics.median([o.wall_s for o in base if o.ok] or [float("nan")])
    s_wall = statistics.median([o.wall_s for o in solo if o.ok] or [float("nan")])
    print(
        f"\nend to end, {n:,} ingested runs in {db} ({db.stat().st_size / MB:.0f} MB), "
        f"{repeats} reps, medians:"
    )
    print("| side | what is timed | s |")
    print("|---|---|---:|")
    print(f"| baseline | `Store.iter_sequences` load | {_fmt(b_load)} |")
    print(f"| baseline | load + mine (in process, start-up excluded) | {_fmt(b_total)} |")
    print(f"| baseline | whole subprocess (start-up included) | {b_wall:.2f} |")
    print(f"| SoloFlow | `soloflow detect --json` subprocess (start-up included) | {s_wall:.2f} |")
    b_cpu = statistics.median([o.cpu_s for o in base if o.ok] or [float("nan")])
    s_cpu = statistics.median([o.cpu_s for o in solo if o.ok] or [float("nan")])
    print(f"| baseline | whole subprocess, CPU (user + system) | {b_cpu:.2f} |")
    print(
        f"| SoloFlow | `soloflow detect` subprocess, CPU (user + system, all threads) | {s_cpu:.2f} |"
    )
    if b_total:
        print(
            f"\nspeed-up (baseline load + mine / soloflow detect wall): {b_total / s_wall:.1f}× "
            f"(target ≥ {E2E_TARGET:.0f}×); per rep: baseline {_times(base)}, "
            f"soloflow [{', '.join(f'{o.wall_s:.2f}' if o.ok else 'x' for o in solo)}]"
        )
    for name, got in (("baseline", base), ("soloflow detect", solo)):
        if got and got[0].ok:
            top = got[0].data.get("top") or [
                (c["tool_sequence"], c["occurrence_count"]) for c in got[0].data["result"]
            ]
            print(f"\n{name} top {len(top)}:")
            for names, support in top:
                print(f"- [{support}] " + " → ".join(names))


# ---------------------------------------------------------------------- τ-bench


def _tau_runs() -> list[Any]:
    from soloflow_core.errors import LedgerError
    from soloflow_core.ledger import read_ledger
    from soloflow_core.store import RunSequence

    path = next((ROOT / "tests" / "data").glob("*tau*.jsonl*"))
    out = []
    for _, run in read_ledger(path, default_user=USER, default_agent=AGENT):
        if isinstance(run, LedgerError):
            raise run
        out.append(
            RunSequence(
                run_id=run.run_id,
                names=tuple(c.name for c in run.tool_calls),
                errors=tuple(bool(c.error) for c in run.tool_calls),
                success=run.success,
                cost=run.cost,
                tokens=run.tokens,
            )
        )
    return out


def bench_tau(repeats: int) -> None:
    from soloflow_core.mining.options import RankingOptions

    runs = _tau_runs()
    good = [r for r in runs if r.success is not False]
    calls = sum(len(r.names) for r in runs)
    print(f"\nτ-bench airline (gpt-4o): {len(runs)} runs ({len(good)} successful), {calls} calls;")
    print(f"{repeats} reps, medians. SoloFlow skips failed runs unless told otherwise; the")
    print("baseline reads every run it is given, so it is shown on both inputs.")
    with_failed = RankingOptions(include_failed_runs=True)
    variants = {
        "baseline, all runs": lambda: _mine_baseline(runs, 10),
        "baseline, successful runs only": lambda: _mine_baseline(good, 10),
        "SoloFlow, default (successful runs only)": lambda: _mine_soloflow(runs, 10),
        "SoloFlow, include_failed_runs=True": lambda: _mine_soloflow(runs, 10, with_failed),
    }
    tops = {}
    for name, mine in variants.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            tops[name] = mine()
            times.append(time.perf_counter() - t0)
        print(f"- {name}: {statistics.median(times) * 1000:.1f} ms")
    for name, top in tops.items():
        print(f"\n{name}: top {len(top)} (support = distinct runs)")
        for i, (names, support) in enumerate(top, 1):
            print(f"{i:2d}. [{support}] " + " → ".join(names))


# ---------------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument(
        "--workflows",
        default="20,50",
        help="planted workflows; the second value is added at 100k runs and more",
    )
    p.add_argument("--repeats", type=int, default=3, help="per size below 1M (1M: once)")
    p.add_argument("--quick", action="store_true", help="10k and 100k, 20 planted, 1 rep")
    p.add_argument("--end-to-end", action="store_true")
    p.add_argument("--tau", action="store_true")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds, per side and rep")
    p.add_argument("--mem-cap-mb", type=float, default=6144.0, help="resident, per side")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child == "e2e-baseline":
        print(json.dumps(_child_e2e_baseline(args.db, args.k)))
        return
    if args.child:
        print(json.dumps(_child_synthetic(args.child, args.input, args.k)))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, seed {args.seed}")
    if args.end_to_end:
        bench_end_to_end(100_000, 1 if args.quick else args.repeats, args)
    if args.tau:
        bench_tau(args.repeats)
    if args.end_to_end or args.tau:
        return
    sizes = [10_000, 100_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    counts = [int(w) for w in args.workflows.split(",")]
    results = []
    for n in sizes:
        for w in counts[:1] if args.quick or n < 100_000 else counts:
            repeats = 1 if args.quick or n >= 1_000_000 else args.repeats
            results.append(bench_size(n, w, repeats, args))
            print_synthetic(results[-1:])
            sys.stdout.flush()
    print("\nall sizes:")
    print_synthetic(results)


if __name__ == "__main__":
    main()
