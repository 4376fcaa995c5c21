"""`soloflow demo`: the whole loop, in-process and as the installed command."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from soloflow_core.store import Store
from soloflow_langgraph.demo.run import run_demo


def test_run_demo_closes_the_loop(sqlite_url):
    with Store.open(sqlite_url) as store:
        report = run_demo(store, user_id="demo", agent_id="support")
        assert report.detected_after == 4  # three matching runs plus one unrelated task
        assert report.candidate is not None
        assert report.candidate.tool_sequence == [
            "find_customer",
            "list_orders",
            "track_shipment",
            "notify_customer",
        ]
        assert report.flow is not None and report.flow.version == 1
        assert report.flow_inputs == {"email": "dave@example.com"}
        assert report.flow_model_calls == 0
        assert report.flow_output == "notified C-1004 that O-5004 is label created"
        assert report.agent_run is not None and len(report.agent_run.model_calls) == 5
        assert (report.agent_run.tokens or 0) > 0
        assert report.same_calls
        assert "step_1" in report.mermaid
        # Everything captured is in the store, in the demo's namespace only.
        assert store.count_runs(user_id="demo", agent_id="support") == 5
        assert store.count_runs(user_id="default", agent_id="default") == 0
        (flow_run,) = store.list_flow_runs(user_id="demo", agent_id="support")
        assert flow_run["status"] == "completed"
        # The savings ledger: the three agent runs the flow came from against its one run.
        savings = report.savings
        assert savings is not None and savings.agent.runs == 3 and savings.completed_runs == 1
        assert savings.agent.model_calls == 5.0 and savings.flow_runs.model_calls == 0.0
        assert savings.saved_per_run.tokens == savings.agent.tokens > 0
        assert (
            savings.estimated_tokens_per_occurrence == report.candidate.tokens_saved_per_occurrence
        )


def test_soloflow_demo_command_finishes_under_a_minute(tmp_path):
    exe = shutil.which("soloflow") or str(Path(sys.executable).with_name("soloflow"))
    start = time.perf_counter()
    proc = subprocess.run(
        [exe, "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": str(Path(sys.executable).parent),
            "SOLOFLOW_HOME": str(tmp_path),
            "HOME": str(tmp_path),
            "COLUMNS": "120",
        },
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 60
    assert "find_customer → list_orders → track_shipment → notify_customer" in proc.stdout
    assert "model calls" in proc.stdout and "flowchart" in proc.stdout or "graph TD" in proc.stdout
    assert "The savings ledger" in proc.stdout and "the design document's estimate" in proc.stdout
