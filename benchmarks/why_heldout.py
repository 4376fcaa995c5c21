"""Why a held-out replay failed: per failed occurrence, per divergence, what the flow did,
what the real run did, and where the real value came from.

The τ-bench split of ``bench_replay.py`` (mine and generalise on trials 0–1, replay on
trial 2). For each failed occurrence every divergence is explained:

* ``repeated``: a step of the real run is k consecutive calls of one tool (the alignment
  takes them as one step) and the flow, which does not map over a list there, made one;
  the replay requires the others when they have side effects, or when they are read-only
  and no side effect follows them (a read-only flow returns what they found);
* ``argument``: a call the flow made that the run did not: each argument that differs from
  the nearest recorded call of the tool, the flow's template, the value it derived, the
  real value, and where that value stands (the task text, the first user message, an
  earlier output of the occurrence, an output of the run before the occurrence, nowhere
  the ledger shows: a later chat turn);
* ``input``: an input the flow could not give (an extraction rule found nothing).

Each failure is then classed: **(a)** unknowable — the value is nowhere in the ledger, it
came from a chat turn the flow is not given (a correct flow takes it as an input, and the
replay gives it from the recording); **(b)** wrong derivation — the value is in the task
or an earlier output, the flow derived another; **(c)** alignment — the occurrence holds
calls the flow is not meant to make (repeated calls of one step). Free inputs are listed
with where their recorded value stands.

AgentDojo (``--agentdojo``): the ground truth holds one run per task, so within each suite
the top patterns' occurrences are split, every third held out, with the suite's read-only
tools (``benchmarks.agentdojo.flows.is_read_only``).

Usage::

    python benchmarks/why_heldout.py [--strict] [--agentdojo]

``--strict`` replays without the tools' side effects (every repeated call required).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agentdojo.flows import is_read_only  # noqa: E402
from benchmarks.bench_replay import TAU, TAU_SIDE_EFFECTS, mine_tau  # noqa: E402
from soloflow_core.generalize.align import find_occurrences  # noqa: E402
from soloflow_core.generalize.arguments import Occurrence, canonical_json  # noqa: E402
from soloflow_core.generalize.loops import step_calls_of  # noqa: E402
from soloflow_core.generalize.propose import propose  # noqa: E402
from soloflow_core.ledger import parse_record  # noqa: E402
from soloflow_core.models import FlowDefinition  # noqa: E402
from soloflow_langgraph.verify import (  # noqa: E402
    Divergence,
    args_match,
    split_holdout,
    verify_flow,
)

AGENTDOJO = TAU.parent / "agentdojo_ground_truth_v1.2.2.jsonl.gz"


def _text(v: Any) -> str:
    return v if isinstance(v, str) else canonical_json(v)


def where_from(value: Any, *, occ: Occurrence, step: int, run: Any) -> str:
    """Where ``value`` (an argument of ``step``) stands in what the ledger holds."""
    s = _text(value)
    if not s:
        return "empty"
    if s in (occ.task or ""):
        return "task text"
    first = (run.meta or {}).get("first_user_message") or ""
    if s in first:
        return "first user message"
    for j in range(step - 1, -1, -1):
        for _, out in step_calls_of(occ, j):
            if s in _text(out):
                return f"output of step_{j + 1}"
    for k, c in enumerate(run.tool_calls):
        if s in _text(c.output):
            return f"output of call {k + 1} ({c.name}) of the run"
    if isinstance(value, list) and value:
        parts = {where_from(v, occ=occ, step=step, run=run) for v in value}
        if len(parts) == 1 and "nowhere" not in next(iter(parts)):
            return f"items picked from the {parts.pop()} (the model's choice)"
    return "nowhere in the ledger (a chat turn or the model's own words)"


def _explain_unexpected(
    d: Divergence, *, flow: FlowDefinition, occ: Occurrence, run: Any
) -> list[str]:
    made = d.made or {}
    expected = list(d.expected or [])
    if not expected:
        return [f"{d.step} {d.tool}: made a call of a tool the run did not call there"]
    best = min(expected, key=lambda a: sum(not args_match(made.get(k), a.get(k)) for k in a))
    step = next(s for s in flow.steps if s.skill_key == d.tool)
    idx = flow.steps.index(step)
    lines = []
    for key in sorted(set(made) | set(best)):
        if key in made and key in best and args_match(made[key], best[key]):
            continue
        lines.append(
            f"{step.id}.{key}: flow {step.input_map.get(key)!r} gave {_text(made.get(key))[:80]!r}, "
            f"run used {_text(best.get(key))[:80]!r} "
            f"(from: {where_from(best.get(key), occ=occ, step=idx, run=run)})"
        )
    return lines


def diagnose(
    flow: FlowDefinition,
    occ: Occurrence,
    run: Any,
    divergences: Sequence[Divergence],
    *,
    side_effects: Mapping[str, bool],
) -> tuple[str, list[str]]:
    """(class, explanation lines) of one failed replay."""
    lines: list[str] = []
    classes: set[str] = set()
    repeated = Counter(d.step for d in divergences if d.kind == "missing")
    for i, step in enumerate(flow.steps):
        calls = step_calls_of(occ, i)
        if len(calls) > 1 and step.map_over is None:
            effects = side_effects.get(step.skill_key)
            kind = {None: "side effects unknown", True: "side-effecting", False: "read-only"}
            missed = repeated.get(step.id, 0)
            lines.append(
                f"{step.id} {step.skill_key}: the run made {len(calls)} calls in a row, the flow "
                f"one ({kind[effects]}); {missed} of the {len(calls) - 1} others required"
            )
            if missed:
                classes.add(
                    {
                        False: "(c) repeated read-only calls a read-only flow must make",
                        True: "(c) repeated side effects",
                        None: "(c) repeated calls, side effects unknown",
                    }[effects]
                )
    for d in divergences:
        if d.kind == "unexpected":
            for line in _explain_unexpected(d, flow=flow, occ=occ, run=run):
                lines.append(line)
                classes.add("(a) value from the chat" if "nowhere" in line else "(b) derivation")
        elif d.kind == "input":
            lines.append(f"input: {d.message}")
            name = d.message.partition("'")[2].partition("'")[0]
            value = _recorded_input(flow, occ, name)
            where = where_from(value, occ=occ, step=_user(flow, name), run=run)
            lines.append(f"  the run used {_text(value)[:60]!r} (from: {where})")
            classes.add(
                "(b) task value under wording the rule never saw"
                if where == "task text"
                else "(a) value from the chat"
                if "nowhere" in where
                else "(b) derivation"
            )
    return " + ".join(sorted(classes)) or "(?)", lines


def _recorded_input(flow: FlowDefinition, occ: Occurrence, name: str) -> Any:
    """The recorded argument an input stands for (the first one reading it)."""
    ref = "{{_trigger." + name + "}}"
    for i, step in enumerate(flow.steps):
        for key, tmpl in step.input_map.items():
            if tmpl == ref:
                return occ.args[i].get(key)
    return None


def _user(flow: FlowDefinition, name: str) -> int:
    """The first step reading input ``name``."""
    ref = "{{_trigger." + name + "}}"
    return next(
        (i for i, s in enumerate(flow.steps) if ref in json.dumps(s.input_map)), len(flow.steps)
    )


FREE_SOURCES: Counter[str] = Counter()
"""Where the recorded values of the free inputs (given from the recording) stand."""


def _kind_of(where: str) -> str:
    if where.startswith("output of step"):
        return "an earlier output of the occurrence (no one path in every occurrence)"
    if where.startswith("output of call"):
        return "an output of the run outside the occurrence"
    if where.startswith("items picked"):
        return "items picked from an earlier output"
    return where


def explain(
    seq: Sequence[str],
    train: Sequence[Occurrence],
    held: Sequence[tuple[str, Occurrence]],
    *,
    runs: Mapping[str, Any],
    side_effects: Mapping[str, bool],
) -> tuple[int, Counter[str]]:
    """Generalise ``seq`` from ``train``, replay ``held`` and explain each failure; returns
    (reproduced, failures by class)."""
    p = propose(seq, train, observed=len(train), side_effects=side_effects)
    report = verify_flow(p.flow, held, trained_on=len(train), side_effects=side_effects)
    print(f"== {' → '.join(seq)} (trained on {len(train)}, held out {len(held)})")
    tally: Counter[str] = Counter()
    for (label, occ), outcome in zip(held, report.outcomes, strict=True):
        wheres = {
            n: where_from(outcome.inputs.get(n), occ=occ, step=_user(p.flow, n), run=runs[label])
            for n in outcome.inputs_from_recording
        }
        FREE_SOURCES.update(_kind_of(w) for w in wheres.values())
        free = ", ".join(
            f"{n}={_text(outcome.inputs.get(n))[:24]!r} [{w}]" for n, w in wheres.items()
        )
        if outcome.reproduced:
            print(f"  OK   {label}; free inputs: {free or '-'}")
            continue
        cls, lines = diagnose(
            p.flow, occ, runs[label], outcome.divergences, side_effects=side_effects
        )
        tally[cls] += 1
        print(f"  FAIL {label}: {cls}; free inputs: {free or '-'}")
        for line in lines:
            print(f"       {line}")
    return sum(o.reproduced for o in report.outcomes), tally


def tau(*, strict: bool) -> None:
    """τ-bench: generalise on trials 0–1, replay trial 2 (as ``bench_replay.py``)."""
    records = [json.loads(line) for line in gzip.open(TAU, "rt")]
    runs = {r["run_id"]: parse_record(r, default_user="u", default_agent="a") for r in records}
    train = [runs[r["run_id"]] for r in records if r["meta"]["trial"] in (0, 1)]
    test = [runs[r["run_id"]] for r in records if r["meta"]["trial"] == 2]
    effects = {} if strict else TAU_SIDE_EFFECTS
    tally: Counter[str] = Counter()
    ok = total = 0
    for seq in mine_tau(train):
        occs = [o for _, o in find_occurrences(train, seq)]
        held = find_occurrences(test, seq)
        if not occs or not held:
            continue
        k, t = explain(seq, occs, held, runs=runs, side_effects=effects)
        ok, total, tally = ok + k, total + len(held), tally + t
    print(f"τ-bench: reproduced {ok}/{total}; failures by class: {dict(tally)}")
    print("τ-bench: free inputs (given from the recording) by where the value stands:")
    for where, n in FREE_SOURCES.most_common():
        print(f"  {n:3}  {where}")


def agentdojo(*, strict: bool) -> None:
    """AgentDojo ground truth: one run per task, so per suite the top 10 patterns' occurrences
    are split (every 3rd held out, as ``verify_occurrences`` does)."""
    records = [json.loads(line) for line in gzip.open(AGENTDOJO, "rt")]
    runs = {r["run_id"]: parse_record(r, default_user="u", default_agent="a") for r in records}
    tally: Counter[str] = Counter()
    ok = total = 0
    for suite in sorted({r["meta"]["suite"] for r in records}):
        in_suite = [runs[r["run_id"]] for r in records if r["meta"]["suite"] == suite]
        for seq in mine_tau(in_suite):
            occs = find_occurrences(in_suite, seq)
            train_idx, held_idx = split_holdout(len(occs))
            if len(train_idx) < 2 or not held_idx:
                continue
            effects = {} if strict else {t: not is_read_only(t) for t in seq}
            held = [occs[k] for k in held_idx]
            k, t = explain(
                seq, [occs[k][1] for k in train_idx], held, runs=runs, side_effects=effects
            )
            ok, total, tally = ok + k, total + len(held), tally + t
    print(f"AgentDojo: reproduced {ok}/{total}; failures by class: {dict(tally)}")
    print("AgentDojo: free inputs (given from the recording) by where the value stands:")
    for where, n in FREE_SOURCES.most_common():
        print(f"  {n:3}  {where}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--agentdojo", action="store_true", help="AgentDojo instead of τ-bench")
    args = ap.parse_args(argv)
    (agentdojo if args.agentdojo else tau)(strict=args.strict)


if __name__ == "__main__":
    main(sys.argv[1:])
