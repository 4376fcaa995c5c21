"""Regenerate the AgentDojo flow files and score every one with its task's own check.

    pip install "soloflow-engine[benchmarks]"          # from a checkout of the repository
    python examples/agentdojo/regenerate.py            # write flows/, then run them all
    python examples/agentdojo/regenerate.py --check    # only run the flow files as they are

Each flow file is read back with ``validate_flow_file`` (against the suite's tool names),
compiled with ``compile_flow`` against AgentDojo's real tools on a fresh default
environment, run with inputs taken from the task prompt, and scored with the task's
``utility``: once with an empty answer (the environment alone) and once with every step
output as the answer text (a generous stand-in for a model's answer).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

# The AgentDojo harness lives in the repository's benchmarks/, not in the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.agentdojo import (  # noqa: E402
    ground_truth_flow,
    load_task,
    outputs_as_answer,
    run_task_flow,
    write_flow_file,
)
from benchmarks.agentdojo.flows import flow_file_path  # noqa: E402
from soloflow_core.flow.loader import validate_flow_file  # noqa: E402

FLOWS = Path(__file__).parent / "flows"
SUITES = ("workspace", "travel", "banking", "slack")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="do not rewrite the flow files")
    parser.add_argument("--out", type=Path, default=FLOWS)
    args = parser.parse_args(argv)
    empty: Counter[str] = Counter()
    with_outputs: Counter[str] = Counter()
    total: Counter[str] = Counter()
    templated = 0
    for suite in SUITES:
        tasks = load_task(suite, "user_task_0").suite.user_tasks
        for task_id in sorted(tasks, key=lambda t: int(t.rsplit("_", 1)[1])):
            if not args.check:
                write_flow_file(args.out, ground_truth_flow(suite, task_id), suite, task_id)
            path = flow_file_path(args.out, suite, task_id)
            flow, _ = validate_flow_file(path, executors=load_task(suite, task_id).tool_names)
            uses_steps = any("{{step_" in str(s.input_map) or s.map_over for s in flow.steps)
            templated += uses_steps
            plain = run_task_flow(flow, suite, task_id)
            generous = run_task_flow(flow, suite, task_id, answer=outputs_as_answer)
            total[suite] += 1
            empty[suite] += plain.passed
            with_outputs[suite] += generous.passed
            print(
                f"{suite:10} {task_id:13} steps={len(flow.steps):2} "
                f"inputs={len(plain.inputs)} data-passing={'yes' if uses_steps else 'no ':3} "
                f"empty-answer={'PASS' if plain.passed else 'fail'} "
                f"outputs-answer={'PASS' if generous.passed else 'fail'}"
            )
    print()
    for suite in SUITES:
        print(
            f"{suite:10} empty answer {empty[suite]:2}/{total[suite]:2}   "
            f"outputs as answer {with_outputs[suite]:2}/{total[suite]:2}"
        )
    print(
        f"{'all':10} empty answer {sum(empty.values()):2}/{sum(total.values()):2}   "
        f"outputs as answer {sum(with_outputs.values()):2}/{sum(total.values()):2}   "
        f"flows passing data between steps: {templated}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
