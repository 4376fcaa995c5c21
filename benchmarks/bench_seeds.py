"""Detection and generalisation on unseen seeds, with the noise agents make.

For each setting and seed, a ledger is generated (``generate_ledger`` with its noise,
retries, swapped steps, failed runs and truncation), its first two thirds are added to a
fresh SQLite store and the real pipeline runs on it, as a user would:

1. ``detect_candidates`` (what ``soloflow detect`` runs: ``mine_ranked``, the checks on the
   runs, ``propose_flow``), ``max_candidates`` = the number of planted workflows, with the
   generator's read-only flags as ``side_effects`` — detection precision and recall of
   those candidates against the planted workflows (``score_top_k``);
2. for every planted workflow, the candidate that holds it (``matches_planted``): each
   argument of the proposed flow against its planted ``ArgSource`` — a constant must be
   that value, a task field an input with an extraction rule, an upstream value a reference
   to that step and path; a literal where the planted source is the task or an earlier
   step is a flow *hard-coding* one task's value;
3. ``verify_candidate`` (``soloflow flows verify``: generalise from two thirds of the
   candidate's complete occurrences, replay the rest) and a replay of the proposed flow
   against the complete occurrences in the last third of the ledger (runs never stored).

Settings: the first five (``--settings original``: default, wide, short, noisy, long) are
those tuned on seeds 100-139. The others (``--settings variants``, 2026-11-28) stress other
axes of the generator and were first run on seeds 300-339: a vocabulary of 24 tools shared
by all (``shared``), 160 runs (``few``), 11 workflows (``many``), a quarter of the runs
planted among a steep popularity (``sparse``), 30 % retried steps with many cut and failed
runs (``flaky``), no token usage (``nousage``), and harsher ones: two- or three-step
workflows over 20 tools (``shortshared``), twelve workflows in 600 runs (``manyrare``),
200 runs with a stray call in a quarter of the gaps and a quarter of the runs swapped
(``fewnoisy``), five workflows in a quarter of 600 runs over 25 tools (``sparseshared``).

A planted workflow with fewer than ``MIN_SUPPORT`` complete runs among the stored two thirds
cannot be found in principle: it is listed as such and left out of recall and of the
argument and verification counts (precision still counts every candidate).

Every wrong item is printed. ``--cli`` also runs ``soloflow ingest`` / ``detect --json`` /
``flows verify --json`` as subprocesses on one generated ledger file and checks they give
the same candidates, flows and fidelities as the in-process calls.

Usage::

    python benchmarks/bench_seeds.py [--seeds 100-139] [--settings original,variants]
    python benchmarks/bench_seeds.py --seeds 300-339 --settings fewnoisy,manyrare --show 100
    python benchmarks/bench_seeds.py --seeds 100 --settings default --cli
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soloflow_core.generalize.align import TOLERATED_GAP, find_occurrences
from soloflow_core.ledger import dump_run
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig
from soloflow_core.store import Store
from soloflow_core.testing.synthetic_ledger import (
    generate_ledger,
    matches_planted,
    score_top_k,
)
from soloflow_langgraph.verify import verify_candidate, verify_flow

USER, AGENT = "default", "default"  # where Store.add_runs puts generated runs

SETTINGS: dict[str, dict[str, Any]] = {
    # generate_ledger's own noise defaults.
    "default": {"runs": 450, "workflows": 4, "min_len": 3, "max_len": 8},
    # More workflows, longer, a smaller planted share.
    "wide": {"runs": 700, "workflows": 8, "min_len": 3, "max_len": 12, "planted_fraction": 0.45},
    # Two- and three-step workflows (detect --min-length 2).
    "short": {"runs": 450, "workflows": 4, "min_len": 2, "max_len": 3},
    # generate_ledger's own defaults (workflows up to 15 steps, its noise and rates).
    "long": {"runs": 500, "workflows": 5, "min_len": 3, "max_len": 15},
    # Three times the noise.
    "noisy": {
        "runs": 600,
        "workflows": 4,
        "min_len": 3,
        "max_len": 8,
        "noise": 0.3,
        "retry_rate": 0.15,
        "swap_rate": 0.3,
        "failed_run_rate": 0.2,
        "truncate_rate": 0.1,
    },
    # The settings below stress other axes of generate_ledger (seedvariants).
    # A vocabulary of 24 tools shared by the workflows and the background.
    "shared": {"runs": 450, "workflows": 4, "min_len": 3, "max_len": 8, "vocabulary": 24},
    # Few runs: each workflow is seen a handful of times.
    "few": {"runs": 160, "workflows": 3, "min_len": 3, "max_len": 8},
    # Many workflows among many runs.
    "many": {"runs": 900, "workflows": 11, "min_len": 3, "max_len": 8},
    # A quarter of the runs planted, among background runs dominated by a few tools.
    "sparse": {
        "runs": 600,
        "workflows": 4,
        "min_len": 3,
        "max_len": 8,
        "planted_fraction": 0.25,
        "zipf_exponent": 1.8,
    },
    # Many retried steps, cut and failed runs.
    "flaky": {
        "runs": 600,
        "workflows": 4,
        "min_len": 3,
        "max_len": 8,
        "retry_rate": 0.3,
        "truncate_rate": 0.25,
        "failed_run_rate": 0.3,
    },
    # Runs without token usage or cost.
    "nousage": {"runs": 450, "workflows": 4, "min_len": 3, "max_len": 8, "with_usage": False},
    # Two- to three-step workflows over 20 tools: chance pairs of popular tools compete.
    "shortshared": {"runs": 450, "workflows": 4, "min_len": 2, "max_len": 3, "vocabulary": 20},
    # Twelve workflows, the rarest run a handful of times.
    "manyrare": {"runs": 600, "workflows": 12, "min_len": 3, "max_len": 8},
    # Few runs with a stray call in a quarter of the gaps and a quarter swapped.
    "fewnoisy": {
        "runs": 200,
        "workflows": 4,
        "min_len": 3,
        "max_len": 6,
        "noise": 0.25,
        "swap_rate": 0.25,
    },
    # A quarter planted, 25 tools, a steep popularity.
    "sparseshared": {
        "runs": 600,
        "workflows": 5,
        "min_len": 3,
        "max_len": 6,
        "vocabulary": 25,
        "planted_fraction": 0.25,
        "zipf_exponent": 1.5,
    },
}
GROUPS = {
    "original": ("default", "wide", "short", "noisy", "long"),
    "variants": tuple(
        k for k in SETTINGS if k not in ("default", "wide", "short", "noisy", "long")
    ),
}
"""Shorthands for ``--settings``: the first five settings, and those added after them."""
MIN_SUPPORT = 3
"""A planted workflow needs this many complete runs in the stored two thirds to be findable
(the detector's default ``min_support``); one with fewer is reported as unsatisfiable."""


@dataclass
class Tally:
    """What one setting measured, over its seeds."""

    precision: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    args_right: int = 0
    args_total: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    hard_coded_flows: int = 0
    flows: int = 0
    verify: list[float] = field(default_factory=list)
    unseen_ok: int = 0
    unseen_total: int = 0
    unseen_set_aside: int = 0
    wrong: list[str] = field(default_factory=list)
    unsatisfiable: list[str] = field(default_factory=list)
    """Planted workflows with fewer than ``MIN_SUPPORT`` complete runs stored: not scored."""


def _seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _inferred(flow: Any, step: int, name: str) -> tuple:
    """The kind of source the flow gives argument ``name`` of step ``step`` (0-based)."""
    if name not in flow.steps[step].input_map:
        return ("missing",)
    got = flow.steps[step].input_map[name]
    if not isinstance(got, str) or "{{" not in got:
        return ("constant", got)
    text = got.strip()
    inner = text[2:-2].strip() if text.startswith("{{") and text.endswith("}}") else None
    if inner is None or "{{" in inner:
        return ("composed", got)
    root, _, path = inner.partition(".")
    if root == "_trigger":
        return ("task",) if path in flow.extraction else ("free", path)
    return ("upstream", root, path)


def _expected(src: Any, offset: int) -> tuple:
    if src.kind == "constant":
        return ("constant", src.value)
    if src.kind == "task":
        return ("task",)
    return ("upstream", f"step_{src.step + offset + 1}", src.path.replace("[0]", ".0"))


def _same(got: tuple, want: tuple) -> bool:
    if want[0] == "constant" and got[0] == "constant":
        return str(got[1]) == str(want[1])
    return got == want


def _error_class(got: tuple, want: tuple) -> str:
    if want[0] in ("task", "upstream") and got[0] == "constant":
        return f"{want[0]} hard-coded as a constant"
    if want[0] == "constant" and got[0] in ("free", "task"):
        return f"constant taken as a {got[0]} input"
    return f"{want[0]} inferred as {got[0]}"


def _ledger(setting: str, seed: int) -> Any:
    return generate_ledger(seed=seed, **SETTINGS[setting])


def _config(setting: str, workflows: int, effects: dict[str, bool] | None) -> DetectorConfig:
    return DetectorConfig(
        max_candidates=workflows,
        min_sequence_length=SETTINGS[setting]["min_len"],
        side_effects=effects or {},
    )


def run_seed(setting: str, seed: int, tally: Tally, tmp: Path) -> None:
    led = _ledger(setting, seed)
    cut = 2 * len(led.runs) // 3
    runs = list(led.runs)
    effects = {s.tool: not s.read_only for w in led.workflows for s in w.steps}
    where = f"{setting} seed {seed}"
    with Store.open(f"sqlite:///{tmp / f'{setting}-{seed}.db'}") as store:
        store.add_runs(runs[:cut])
        cands = detect_candidates(
            store,
            user_id=USER,
            agent_id=AGENT,
            config=_config(setting, len(led.workflows), effects),
        )
        seqs = [c.tool_sequence for c in cands]
        complete = Counter(lab.workflow for lab in led.labels[:cut] if lab.kind == "planted")
        findable = [w for w in led.workflows if complete[w.index] >= MIN_SUPPORT]
        for w in led.workflows:
            if complete[w.index] < MIN_SUPPORT:
                tally.unsatisfiable.append(
                    f"{where}: wf {w.index} has {complete[w.index]} complete run(s) stored"
                )
        p, _ = score_top_k(seqs, led.workflows, k=len(led.workflows))
        _, r = score_top_k(seqs, findable, k=len(led.workflows))
        tally.precision.append(p)
        tally.recall.append(r)
        for c in cands:
            if not any(matches_planted(c.tool_sequence, w.tools) for w in led.workflows):
                tally.wrong.append(
                    f"{where}: candidate matches no planted workflow: {c.tool_sequence}"
                )
        for wf in findable:
            cand = next((c for c in cands if tuple(c.tool_sequence) == wf.tools), None)
            cand = cand or next(
                (c for c in cands if matches_planted(c.tool_sequence, wf.tools)), None
            )
            planted = sum(1 for lab in led.labels[:cut] if lab.workflow == wf.index)
            if cand is None:
                tally.wrong.append(
                    f"{where}: planted wf {wf.index} ({len(wf.tools)} steps, {planted} runs) not "
                    f"found: {wf.tools}"
                )
                continue
            _score_flow(cand, wf, tally, where=where)
            _, report = verify_candidate(
                store, cand.id, user_id=USER, agent_id=AGENT, save=False, side_effects=effects
            )
            if report.fidelity is not None:
                tally.verify.append(report.fidelity)
                if report.fidelity < 1.0:
                    kinds = Counter(f"{d.kind} {d.tool or ''}" for d in report.divergences)
                    tally.wrong.append(
                        f"{where}: wf {wf.index} verify fidelity {report.fidelity:.2f}: {dict(kinds)}"
                    )
            held = find_occurrences(
                runs[cut:], cand.tool_sequence, repeated_steps="any", max_gap=TOLERATED_GAP
            )
            unseen = verify_flow(cand.proposed_flow, held)
            ok = sum(o.reproduced for o in unseen.outcomes)
            tally.unseen_ok += ok
            tally.unseen_total += len(unseen.outcomes)  # chance meetings are not replayed
            tally.unseen_set_aside += len(held) - len(unseen.outcomes)
            if ok < len(unseen.outcomes):
                msgs = Counter(
                    f"{d.kind} {d.tool or ''} {d.message[:90]}" for d in unseen.divergences
                )
                tally.wrong.append(
                    f"{where}: wf {wf.index} unseen replay {ok}/{len(unseen.outcomes)}: "
                    + "; ".join(f"{m} ×{n}" for m, n in msgs.most_common(3))
                )


def _score_flow(cand: Any, wf: Any, tally: Tally, *, where: str) -> None:
    seq, want_tools = tuple(cand.tool_sequence), wf.tools
    offset = next(
        o
        for o in range(len(seq) - len(want_tools) + 1)
        if seq[o : o + len(want_tools)] == want_tools
    )
    flow = cand.proposed_flow
    tally.flows += 1
    hard = False
    for j, step in enumerate(wf.steps):
        for name, src in step.args:
            want = _expected(src, offset)
            got = _inferred(flow, j + offset, name)
            tally.args_total += 1
            if _same(got, want):
                tally.args_right += 1
                continue
            cls = _error_class(got, want)
            hard = hard or "hard-coded" in cls
            tally.errors[cls] += 1
            tally.wrong.append(
                f"{where}: wf {wf.index} step_{j + offset + 1} {step.tool}.{name}: planted "
                f"{want}, inferred {got} [{cls}]"
            )
    tally.hard_coded_flows += hard


def report(setting: str, tally: Tally, seconds: float, show: int) -> None:
    n = len(tally.precision)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    perfect = sum(1 for f in tally.verify if f == 1.0)
    print(
        f"{setting}: {n} seeds in {seconds:.0f} s; detection P {mean(tally.precision):.3f} "
        f"R {mean(tally.recall):.3f}; argument sources right {tally.args_right}/"
        f"{tally.args_total}; flows hard-coding a task's value {tally.hard_coded_flows}/"
        f"{tally.flows}; verify fidelity mean {mean(tally.verify):.3f} ({perfect}/"
        f"{len(tally.verify)} at 1.0); unseen runs replayed {tally.unseen_ok}/{tally.unseen_total} "
        f"({tally.unseen_set_aside} set aside: the tools met by chance)"
    )
    if tally.unsatisfiable:
        print(
            f"   {len(tally.unsatisfiable)} planted workflow(s) not findable in principle "
            "(left out of recall and arguments):",
            "; ".join(tally.unsatisfiable[:5]),
        )
    if tally.errors:
        print("   errors by class:", dict(tally.errors.most_common()))
    for w in tally.wrong[:show]:
        print("   wrong:", w)
    if len(tally.wrong) > show:
        print(f"   ... {len(tally.wrong) - show} more")


def cli_check(setting: str, seed: int, tmp: Path) -> None:
    """The same ledger through the ``soloflow`` commands: same candidates, flows, fidelity."""
    led = _ledger(setting, seed)
    jsonl = tmp / "ledger.jsonl"
    with open(jsonl, "w") as f:
        for run in list(led.runs):
            f.write(json.dumps(dump_run(run)) + "\n")
    cli = shutil.which("soloflow", path=str(Path(sys.executable).parent)) or "soloflow"
    url = f"sqlite:///{tmp / 'cli.db'}"
    base = [cli, "--db", url, "--user", USER, "--agent", AGENT]
    k = str(len(led.workflows))
    subprocess.run([*base, "ingest", str(jsonl), "--json"], check=True, capture_output=True)
    min_len = str(SETTINGS[setting]["min_len"])
    out = subprocess.run(
        [*base, "detect", "--json", "--max-candidates", k, "--min-length", min_len],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    listed = json.loads(out)
    with Store.open(f"sqlite:///{tmp / 'api.db'}") as store:
        store.add_runs(list(led.runs))
        mine = detect_candidates(
            store, user_id=USER, agent_id=AGENT, config=_config(setting, len(led.workflows), None)
        )
        mismatches = []
        for got, want in zip(listed, mine, strict=False):
            if got["tool_sequence"] != want.tool_sequence:
                mismatches.append(f"sequence {got['tool_sequence']} vs {want.tool_sequence}")
            elif got["proposed_flow"] != want.proposed_flow.model_dump(mode="json"):
                mismatches.append(f"flow of {want.tool_sequence} differs")
            verified = subprocess.run(
                [*base, "flows", "verify", got["id"], "--json"], capture_output=True, text=True
            )
            _, rep = verify_candidate(store, want.id, user_id=USER, agent_id=AGENT, save=False)
            fid = json.loads(verified.stdout).get("fidelity")
            if fid != (None if rep.fidelity is None else round(rep.fidelity, 4)):
                mismatches.append(
                    f"fidelity of {want.tool_sequence}: CLI {fid}, API {rep.fidelity}"
                )
    p, r = score_top_k([c["tool_sequence"] for c in listed], led.workflows, k=len(led.workflows))
    print(
        f"CLI {setting} seed {seed}: {len(listed)} candidates (API {len(mine)}), P {p:.2f} R "
        f"{r:.2f}; {len(mismatches)} mismatch(es) with the in-process pipeline"
    )
    for m in mismatches:
        print("   mismatch:", m)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="100-139", help="e.g. 100-139 or 1,2,5-9")
    ap.add_argument(
        "--settings",
        default="original,variants",
        help=f"comma-separated: {', '.join(SETTINGS)}, or the groups {', '.join(GROUPS)}",
    )
    ap.add_argument("--show", type=int, default=60, help="wrong items printed per setting")
    ap.add_argument("--cli", action="store_true", help="also check the CLI path on one seed")
    args = ap.parse_args(argv)
    seeds = _seeds(args.seeds)
    with tempfile.TemporaryDirectory(prefix="soloflow-seeds-") as tmpdir:
        tmp = Path(tmpdir)
        chosen = [n for part in args.settings.split(",") for n in GROUPS.get(part, (part,))]
        for setting in chosen:
            tally, t0 = Tally(), time.perf_counter()
            for seed in seeds:
                run_seed(setting, seed, tally, tmp)
            report(setting, tally, time.perf_counter() - t0, args.show)
        if args.cli:
            cli_check(chosen[0], seeds[0], tmp)


if __name__ == "__main__":
    main(sys.argv[1:])
