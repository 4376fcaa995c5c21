"""8 agent processes capture into one ledger at once: every run is stored or spilled and
written back — 0 lost (issue 25). Bounded: a few hundred runs per process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

pytestmark = pytest.mark.stress

PROCESSES = 8
RUNS = 150
"""Runs per process, each a tool call (one run, one call: two rows and a transaction)."""

CAPTURER = textwrap.dedent("""
    import os, sys, time
    url, spill, go, name, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    from langchain_core.tools import tool
    from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

    @tool
    def step(key: str) -> str:
        \"\"\"One step.\"\"\"
        return "ok " + key

    handler = SoloFlowCallbackHandler(database_url=url, spill_path=spill, user_id="u", agent_id="a")
    print("ready", flush=True)
    while not os.path.exists(go):  # every process starts capturing at the same moment
        time.sleep(0.01)
    began = time.perf_counter()
    for i in range(runs):
        step.invoke({"key": f"{name}-{i}"}, config={"callbacks": [handler]})
    health = handler.health()
    print(health.runs_written, health.runs_spilled, health.runs_dropped,
          f"{time.perf_counter() - began:.3f}", flush=True)
    handler.close()
""")


def test_eight_processes_capture_into_one_ledger_and_lose_nothing(
    db_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "capture.py"
    script.write_text(CAPTURER)
    spill = tmp_path / "shared.spill.jsonl"
    SoloFlowCallbackHandler(database_url=db_url).close()  # the schema exists: load, not cold start
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), db_url, str(spill), str(go), f"p{i}", str(RUNS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(PROCESSES)
    ]
    for p in procs:  # started (imports take long on a loaded machine, and are not measured)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    lines = []
    for p in procs:
        out, err = p.communicate(timeout=55)
        assert p.returncode == 0, err[-2000:]
        lines.append(out.split())
    written = sum(int(x[0]) for x in lines)
    spilled = sum(int(x[1]) for x in lines)
    dropped = sum(int(x[2]) for x in lines)
    slowest = max(float(x[3]) for x in lines)
    assert dropped == 0 and written + spilled >= PROCESSES * RUNS
    handler = SoloFlowCallbackHandler(database_url=db_url, spill_path=spill)
    try:
        handler.flush()  # writes back what was spilled
        assert handler.store is not None
        stored = handler.store.count_runs(user_id="u", agent_id="a")
    finally:
        handler.close()
    assert stored == PROCESSES * RUNS  # 0 lost, none twice
    print(
        f"\n{db_url.split(':')[0]}: {PROCESSES}x{RUNS} runs, {written} written, "
        f"{spilled} spilled and written back, slowest process {slowest:.2f} s, "
        f"{PROCESSES * RUNS / slowest:.0f} runs/s together"
    )
