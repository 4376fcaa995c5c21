"""What capture costs per tool call, by part: the events of one real ``create_agent``
invocation (10 tool calls, 11 model calls) replayed into each handler, CPU time of the process,
round-robin, medians. The no-op handler's replay loop is the baseline.

Variants: the full handler (run and trace stored), ``trace=False``, and both with the store
write skipped (``bench_capture.CaptureOnly``). ``--profile VARIANT`` prints a cProfile of it.

Run: ``python benchmarks/bench_capture_replay.py [--runs 40] [--reps 5] [--profile NAME]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain.agents import create_agent  # noqa: E402

from benchmarks import bench_capture as B  # noqa: E402
from soloflow_core.plugins import get_plugin_manager  # noqa: E402
from soloflow_core.store import Store  # noqa: E402
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler  # noqa: E402
from soloflow_langgraph.testing import ScriptedChatModel  # noqa: E402

TOOL_CALLS = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="replayed runs per rep and variant")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--profile", default=None, help="a variant to profile afterwards")
    opts = parser.parse_args()
    store = Store.open(f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}")
    pm = get_plugin_manager()
    agent = create_agent(
        ScriptedChatModel(script=B._script(TOOL_CALLS)), tools=[B.add], name="bench_agent"
    )
    recorder = B.Recorder()
    agent.invoke({"messages": [("user", "record me")]}, config=B._config(recorder))

    def replay(handler: Any, runs: int) -> float:
        started = time.process_time()
        for _ in range(runs):
            for name, args, kw in B._fresh_ids(recorder):
                getattr(handler, name)(*args, **kw)
        return (time.process_time() - started) / runs / TOOL_CALLS * 1e6

    ns = {"store": store, "user_id": "bench", "agent_id": "bench", "plugin_manager": pm}
    handlers: dict[str, Any] = {
        "no-op handler": B.NoOpHandler(),
        "SoloFlow": SoloFlowCallbackHandler(**ns),
        "SoloFlow, trace=False": SoloFlowCallbackHandler(**ns, trace=False),
        "no write": B.CaptureOnly(**ns),
        "no write, trace=False": B.CaptureOnly(**ns, trace=False),
    }
    times: dict[str, list[float]] = {name: [] for name in handlers}
    for _ in range(opts.reps):
        for name, handler in handlers.items():
            times[name].append(replay(handler, opts.runs))
    base = statistics.median(times["no-op handler"])
    print(f"CPU µs per replayed tool call, median of {opts.reps} reps × {opts.runs} runs")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<24} {median:8.1f}   +{median - base:7.1f} over the no-op handler")
    if opts.profile:
        handler = handlers[opts.profile]
        profile = cProfile.Profile()
        profile.runcall(replay, handler, 100)
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
