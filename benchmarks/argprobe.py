"""A blind adversarial probe of argument sources (``benchmarks/data/argprobe_cases.json``).

Each case is a small ledger written without reading the generaliser: a few runs of two to
four tool calls, the expected source of every argument and held-out runs with new values.
The runs go through the path a user gets: a fresh SQLite store, ``detect_candidates``
(``min_sequence_length=2``, the case's side effects); the candidate whose tool sequence is
the case's is scored (when the detector proposes none, ``propose`` on the occurrences is,
and the verdict says so). Each argument's inferred source is compared with the expected
one:

- ``right``: one of the expected sources;
- ``safe``: a safe fallback the case allows (a free input where deriving is hard);
- ``WRONG``: anything else, and ``HARD-CODED`` when a side-effecting step got a constant
  the case says varies (a trust failure: one customer's value in every run).

Then the flow is replayed (``verify_flow``) against the held-out runs: free inputs are
given from the held-out recording, as a caller would, and every call must match.

Source spellings in the cases: ``constant``, ``task`` (an input extracted from the task
text), ``free`` (an input the caller gives), ``upstream:step_2:orders.0.id`` (the path may
be left out), ``template`` (text around templates), ``composed`` (a dict or list holding
templates); ``a|b`` lists right answers and ``~c`` safe ones.

Usage::

    python benchmarks/argprobe.py [--case NAME] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from soloflow_core.flow.templates import Reference, iter_references
from soloflow_core.generalize.align import find_occurrences
from soloflow_core.generalize.propose import propose
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig, FlowDefinition, TaskRun
from soloflow_core.store import Store
from soloflow_langgraph.verify import verify_flow

CASES = Path(__file__).resolve().parent / "data" / "argprobe_cases.json"
NS = {"user_id": "default", "agent_id": "default"}


def inferred_source(flow: FlowDefinition, value: Any) -> str:
    """The source an ``input_map`` value reads, spelt as in the cases."""
    if value is None:
        return "absent"
    refs = [r for _, r in iter_references(value) if isinstance(r, Reference)]
    if not refs:
        return "constant"
    if not isinstance(value, str):
        return "composed"
    if len(refs) > 1 or value.strip() != refs[0].text:
        return "template"
    ref = refs[0]
    if ref.is_trigger:
        return "task" if ref.path[0] in flow.extraction else "free"
    ids = [s.id for s in flow.steps]
    root = f"step_{ids.index(ref.root) + 1}" if ref.root in ids else ref.root
    return f"upstream:{root}:{'.'.join(ref.path)}"


def _matches(got: str, want: str) -> bool:
    if want.startswith("upstream:") and want.count(":") == 1:
        return got.startswith(want + ":")
    return got == want


def judge(got: str, spec: str) -> str:
    """``right``, ``safe`` or ``WRONG`` for an inferred source against a case's spelling."""
    right, _, safe = spec.partition("~")
    if any(_matches(got, w.strip()) for w in right.split("|")):
        return "right"
    if safe and any(_matches(got, w.strip()) for w in safe.split("|")):
        return "safe"
    return "WRONG"


def learned_flow(
    case: dict[str, Any], runs: list[TaskRun], tmp: Path
) -> tuple[FlowDefinition, str]:
    """The flow a user gets from the detector (or from ``propose``, when not detected)."""
    seq = case["sequence"]
    store = Store.open(f"sqlite:///{tmp / (case['name'] + '.db')}")
    try:
        store.add_runs(runs)
        config = DetectorConfig(
            min_sequence_length=2, max_candidates=10, side_effects=case["side_effects"]
        )
        cands = detect_candidates(store, config=config, save=False, **NS)
    finally:
        store.close()
    for cand in cands:
        if cand.tool_sequence == seq:
            return cand.proposed_flow, "detected"
    occs = [o for _, o in find_occurrences(runs, seq)]
    p = propose(seq, occs, observed=len(occs), side_effects=case["side_effects"])
    found = ", ".join("→".join(c.tool_sequence) for c in cands) or "none"
    return p.flow, f"not detected (candidates: {found}); propose used"


def probe(case: dict[str, Any], tmp: Path, verbose: bool) -> tuple[int, int, int, int, bool]:
    """Print one case's verdicts; (right, safe, wrong, hard-coded, replay reproduced)."""
    runs = [TaskRun.model_validate(r) for r in case["runs"]]
    flow, how = learned_flow(case, runs, tmp)
    right = safe = wrong = hard = 0
    lines = []
    effects = case["side_effects"]
    for key, args in case["expected"].items():
        index = int(key.removeprefix("step_")) - 1
        step = flow.steps[index] if index < len(flow.steps) else None
        for name, spec in args.items():
            got = inferred_source(flow, None if step is None else step.input_map.get(name))
            verdict = judge(got, spec)
            if verdict == "WRONG" and got == "constant" and step is not None:
                if effects.get(step.skill_key, True):
                    verdict = "HARD-CODED"
                    hard += 1
            right += verdict == "right"
            safe += verdict == "safe"
            wrong += verdict in ("WRONG", "HARD-CODED")
            if verdict != "right" or verbose:
                lines.append(f"    {key}.{name}: {verdict} (inferred {got}; expected {spec})")
    held_runs = [TaskRun.model_validate(r) for r in case["held_out"]]
    held = find_occurrences(held_runs, case["sequence"])
    report = verify_flow(flow, held, trained_on=len(runs), side_effects=effects)
    ok = bool(report.outcomes) and all(o.reproduced for o in report.outcomes)
    if not ok:
        for d in report.divergences[:4]:
            lines.append(
                f"    replay {d.occurrence}: {d.kind} {d.tool or ''} made {d.made} "
                f"expected {d.expected} {d.message}"[:300]
            )
        if not report.outcomes:
            lines.append(f"    replay: nothing replayed ({'; '.join(report.notes)})")
    status = "PASS" if not wrong and ok else "FAIL"
    print(
        f"{status} {case['name']}: {right} right, {safe} safe, {wrong} wrong"
        f"{f' ({hard} hard-coded)' if hard else ''}; held-out replay "
        f"{sum(o.reproduced for o in report.outcomes)}/{len(held)}; {how}"
    )
    if verbose or status == "FAIL":
        print(f"    why: {case['why']}")
        if verbose:
            for step in flow.steps:
                print(f"    {step.id} {step.skill_key} {step.input_map}")
            print(f"    extraction: {flow.extraction}")
    for line in lines:
        print(line)
    return right, safe, wrong, hard, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", help="run only this case")
    ap.add_argument("--verbose", action="store_true", help="print every argument and the flow")
    args = ap.parse_args(argv)
    cases = json.loads(CASES.read_text())["cases"]
    if args.case:
        cases = [c for c in cases if c["name"] == args.case]
    totals = [0, 0, 0, 0]
    passed = replayed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            right, safe, wrong, hard, ok = probe(case, Path(tmp), args.verbose)
            for k, n in enumerate((right, safe, wrong, hard)):
                totals[k] += n
            passed += not wrong and ok
            replayed += ok
    args_total = sum(totals[:3])
    print(
        f"argprobe: {passed}/{len(cases)} cases pass; arguments {totals[0]} right, "
        f"{totals[1]} safe, {totals[2]} wrong ({totals[3]} hard-coded) of {args_total}; "
        f"held-out replay reproduced in {replayed}/{len(cases)} cases"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
