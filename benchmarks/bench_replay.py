"""Argument sources, replay fidelity and generalisation time, on planted and real data.

**Synthetic** (``generate_ledger``, no noise): for every planted workflow, its clean
occurrences are split (every 3rd held out); the flow is generalised from the others, with
the generator's read-only flags as ``side_effects``; each argument's inferred source is
compared with the planted ``ArgSource`` (kind, and step + path for upstream ones); the
flow is replayed through its compiled LangGraph graph against the held-out occurrences.

**Timing**: ``propose`` (argument sources + data flow + loops) on 20 occurrences × 10
steps, median of 30.

**τ-bench** (``tests/data``, GPT-4o airline): trials 0–1 are mined with SoloFlow's miner
and ranking (``mine_ranked``, failed runs counted, top 10), each pattern is generalised
from its trial 0–1 occurrences, and the flow is replayed against its occurrences in trial 2
(never seen by the miner or the generaliser). The airline tools' side effects are declared
(``TAU_SIDE_EFFECTS``, as a user configures them): a read-only step the agent repeated (five
lookups before one cancellation) need not be repeated by the flow; the figure with every
repeat required (``strict``) is printed beside it. ``benchmarks/why_heldout.py`` explains
each failed replay.

Usage::

    python benchmarks/bench_replay.py [--seeds 1,2,3] [--skip-tau]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from soloflow_core.generalize.align import find_occurrence, find_occurrences
from soloflow_core.generalize.arguments import generalize
from soloflow_core.generalize.propose import propose
from soloflow_core.ledger import parse_record
from soloflow_core.mining.options import RankingOptions
from soloflow_core.mining.pipeline import mine_ranked
from soloflow_core.testing.synthetic_ledger import generate_ledger
from soloflow_langgraph.verify import split_holdout, verify_flow

TAU = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "data"
    / "tau_bench_gpt-4o_airline_trials0-2.jsonl.gz"
)


def _expected(src) -> tuple:
    if src.kind == "upstream":
        return ("upstream", f"step_{src.step + 1}", src.path.replace("[0]", ".0"))
    return (src.kind,)


def _inferred(template, source) -> tuple:
    if source is None:
        return ("constant",)
    if source.kind == "upstream":
        root, _, path = template.strip("{}").partition(".")
        return ("upstream", root, path)
    return (source.kind,)


def synthetic(seeds: list[int]) -> None:
    right = total = 0
    fidelities: list[float] = []
    wrong: list[str] = []
    for seed in seeds:
        led = generate_ledger(
            runs=400,
            workflows=5,
            seed=seed,
            noise=0.0,
            retry_rate=0.0,
            swap_rate=0.0,
            failed_run_rate=0.0,
            truncate_rate=0.0,
            min_len=3,
            max_len=10,
            planted_fraction=0.9,
        )
        for wf in led.workflows:
            occs = []
            for i, lab in enumerate(led.labels):
                if lab.workflow == wf.index and lab.kind == "planted":
                    run = led.runs[i]
                    occ = find_occurrence(
                        run.tool_calls, wf.tools, task=run.task or "", repeated_steps=()
                    )
                    if occ is not None:
                        occs.append((run.run_id, occ))
            train, held = split_holdout(len(occs))
            if len(train) < 2 or not held:
                continue
            effects = {s.tool: not s.read_only for s in wf.steps}
            p = propose(
                wf.tools, [occs[k][1] for k in train], observed=len(train), side_effects=effects
            )
            gen = generalize([occs[k][1] for k in train])
            for i, step in enumerate(wf.steps):
                for name, src in step.args:
                    total += 1
                    got = _inferred(p.flow.steps[i].input_map.get(name), gen.sources[i].get(name))
                    if got == _expected(src):
                        right += 1
                    else:
                        wrong.append(
                            f"seed {seed} wf {wf.index} step_{i + 1}.{name}: planted "
                            f"{_expected(src)}, inferred {got}"
                        )
            report = verify_flow(p.flow, [occs[k] for k in held], trained_on=len(train))
            fidelities.append(report.fidelity or 0.0)
            print(
                f"  seed {seed} workflow {wf.index} ({len(wf.tools)} steps, {len(train)}+{len(held)} "
                f"occurrences): fidelity {report.fidelity:.2f}, parallel layers "
                f"{sum(1 for s in p.flow.steps if not s.depends_on)} roots"
            )
    print(
        f"synthetic: argument sources right {right}/{total} = {right / total:.1%}; "
        f"held-out fidelity mean {statistics.mean(fidelities):.3f}, min {min(fidelities):.3f} "
        f"over {len(fidelities)} workflows"
    )
    for w in wrong[:10]:
        print("   wrong:", w)


def timing() -> None:
    led = generate_ledger(
        runs=80,
        workflows=1,
        seed=7,
        noise=0.0,
        retry_rate=0.0,
        swap_rate=0.0,
        failed_run_rate=0.0,
        truncate_rate=0.0,
        min_len=10,
        max_len=10,
        planted_fraction=1.0,
    )
    wf = led.workflows[0]
    occs = [
        find_occurrence(r.tool_calls, wf.tools, task=r.task or "", repeated_steps=())
        for r in led.runs
    ]
    occs20 = [o for o in occs if o is not None][:20]
    assert len(occs20) == 20
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        propose(wf.tools, occs20, observed=20)
        times.append((time.perf_counter() - t0) * 1000)
    print(
        f"generalise 20 occurrences × 10 steps: median {statistics.median(times):.2f} ms, "
        f"max {max(times):.2f} ms (target ≤ 50 ms)"
    )


TAU_SIDE_EFFECTS: dict[str, bool] = {
    **dict.fromkeys(
        [
            "get_user_details",
            "get_reservation_details",
            "search_direct_flight",
            "search_onestop_flight",
            "list_all_airports",
            "calculate",
            "think",
        ],
        False,
    ),
    **dict.fromkeys(
        [
            "book_reservation",
            "cancel_reservation",
            "update_reservation_flights",
            "update_reservation_baggages",
            "update_reservation_passengers",
            "send_certificate",
            "transfer_to_human_agents",
        ],
        True,
    ),
}
"""τ-bench airline's tools: which change the database (its ``tools/`` module: the
``get_``/``search_``/``list_`` tools, ``calculate`` and ``think`` only read)."""


def mine_tau(runs, top: int = 10) -> list[tuple[str, ...]]:
    """SoloFlow's miner and ranking (``mine_ranked``), failed runs counted: τ-bench's
    ``success`` is the task's reward, and most runs with reward 0 still did the lookups."""
    options = RankingOptions(include_failed_runs=True, min_gain_bits=0.0)
    return [p.names for p in mine_ranked(runs, top_k=top, options=options)]


def tau() -> None:
    records = [json.loads(line) for line in gzip.open(TAU, "rt")]
    train = [
        parse_record(r, default_user="u", default_agent="a")
        for r in records
        if r["meta"]["trial"] in (0, 1)
    ]
    test = [
        parse_record(r, default_user="u", default_agent="a")
        for r in records
        if r["meta"]["trial"] == 2
    ]
    patterns = mine_tau(train)
    print(
        f"τ-bench: mined trials 0–1 ({len(train)} runs; mine_ranked, failed runs counted, top 10): "
        f"{len(patterns)} candidates; replayed on trial 2 ({len(test)} runs)"
    )
    total_held = total_ok = total_strict = 0
    for seq in patterns:
        occs = [o for _, o in find_occurrences(train, seq)]
        p = propose(seq, occs, observed=len(occs), side_effects=TAU_SIDE_EFFECTS)
        held = find_occurrences(test, seq)
        report = verify_flow(p.flow, held, trained_on=len(occs), side_effects=TAU_SIDE_EFFECTS)
        ok = sum(o.reproduced for o in report.outcomes)
        strict = sum(o.reproduced and not o.repeats_not_made for o in report.outcomes)
        total_held += len(held)
        total_ok += ok
        total_strict += strict
        maps = [f"{s.id}<-{s.map_over}" for s in p.flow.steps if s.map_over]
        fid = "-" if report.fidelity is None else f"{report.fidelity:.2f}"
        print(
            f"  {' → '.join(seq)}: trained on {len(occs)}, held out {len(held)}, fidelity {fid}; "
            f"map steps {maps or '-'}; task inputs {sorted(p.flow.extraction) or '-'}; "
            f"free {p.free_inputs or '-'}; repeated read-only calls not made "
            f"{report.repeats_not_made}"
        )
        kinds: dict[str, int] = {}
        for d in report.divergences:
            key = f"{d.kind} {d.tool or ''}".strip()
            kinds[key] = kinds.get(key, 0) + 1
        if kinds:
            print(f"      divergences: {kinds}")
    if total_held:
        print(
            f"τ-bench overall: {total_ok}/{total_held} held-out occurrences reproduced "
            f"({total_ok / total_held:.1%}); strict (every repeated call required) "
            f"{total_strict}/{total_held}"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--skip-tau", action="store_true")
    args = ap.parse_args(argv)
    synthetic([int(s) for s in args.seeds.split(",")])
    timing()
    if not args.skip_tau:
        tau()


if __name__ == "__main__":
    main(sys.argv[1:])
