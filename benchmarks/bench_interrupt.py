"""Ctrl-C at random points of a flow with parallel layers: seconds from the signal to the
``soloflow flows run`` process's exit (130), the run's recorded state, and whether
``flows resume`` then finishes it with every side effect done once.

The flow is the 10-step ``crash10`` of ``tests/flowrun_fixtures.py`` (three parallel
branches, two fan-ins); each side effect takes 0.05–0.5 s. SIGINT is sent 0.2–1.5 s after the
run id is printed. Run: ``python benchmarks/bench_interrupt.py [--trials N] [--db URL]``.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from flowrun_fixtures import (  # noqa: E402 - the tests' fixtures, by path
    CRASH_DAG,
    CRASH_FLOW,
    LOG_ENV,
    SEED_ENV,
    SLEEP_ENV,
    log_lines,
    soloflow_argv,
    subprocess_env,
)

from soloflow_core.models import FlowDefinition  # noqa: E402
from soloflow_core.store import Store  # noqa: E402

NS = {"user_id": "default", "agent_id": "default"}
TOOLS = ("--tools", "flowrun_fixtures:TOOLS")


def _trial(url: str, log: Path, seed: str, delay: float) -> tuple[float, int, str] | None:
    """(seconds to exit, exit code, run id); None when the run ended before the signal."""
    env = subprocess_env(**{LOG_ENV: str(log), SLEEP_ENV: "0.05,0.5", SEED_ENV: seed})
    argv = soloflow_argv(
        "--db", url, "flows", "run", "crash10", "--input", json.dumps({"seed": seed}), *TOOLS
    )
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    run_id = proc.stdout.readline().strip()
    time.sleep(delay)
    if proc.poll() is not None:
        proc.communicate()
        return None
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    return time.monotonic() - sent, proc.returncode, run_id


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--db", default=None, help="a database URL (default: a fresh SQLite file)")
    args = ap.parse_args()
    rng = random.Random(25)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp, 'bench.db')}"
        log = Path(tmp, "effects.log")
        exits: list[float] = []
        codes: set[int] = set()
        interrupted = resumed_once = 0
        with Store.open(url) as store:
            store.register_flow(FlowDefinition.model_validate(CRASH_FLOW), source="user", **NS)
            for n in range(args.trials):
                seed = f"b{n}"
                got = _trial(url, log, seed, rng.uniform(0.2, 1.5))
                if got is None:
                    continue
                took, code, run_id = got
                exits.append(took)
                codes.add(code)
                interrupted += store.get_flow_run(run_id, **NS).state == "interrupted"
                env = subprocess_env(**{LOG_ENV: str(log), SLEEP_ENV: "0", SEED_ENV: seed})
                subprocess.run(
                    soloflow_argv("--db", url, "flows", "resume", run_id, *TOOLS),
                    capture_output=True,
                    env=env,
                    timeout=120,
                    check=True,
                )
                done = [
                    ln.split()[1].split(":", 1)[1]
                    for ln in log_lines(log)
                    if ln.startswith("done ") and ln.split()[1].startswith(run_id + ":")
                ]
                resumed_once += sorted(done) == sorted(CRASH_DAG)
    exits.sort()
    print(
        f"{len(exits)} runs interrupted (exit codes {sorted(codes)}): seconds to exit after SIGINT "
        f"median {statistics.median(exits):.3f}, p90 {exits[int(0.9 * (len(exits) - 1))]:.3f}, "
        f"max {exits[-1]:.3f}; recorded interrupted {interrupted}/{len(exits)}; resumed with "
        f"every side effect once {resumed_once}/{len(exits)}"
    )


if __name__ == "__main__":
    main()
