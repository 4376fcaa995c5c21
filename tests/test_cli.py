"""The `soloflow` command line, in-process and as the installed console script."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys

import pytest
from conftest import TAU_BENCH
from typer.testing import CliRunner

from soloflow_langgraph.cli import app

runner = CliRunner()


def sf(db: str, *args: str, user: str = "u1"):
    return runner.invoke(app, ["--db", db, "--user", user, *args], catch_exceptions=False)


def test_ingest_detect_approve_show_run(sqlite_url):
    res = sf(sqlite_url, "ingest", str(TAU_BENCH), "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["runs_written"] == 150 and report["bad_lines"] == []

    res = sf(sqlite_url, "runs", "list", "--limit", "5", "--json")
    runs = json.loads(res.stdout)
    assert len(runs) == 5 and all(r["run_id"].startswith("tau-bench/") for r in runs)

    res = sf(sqlite_url, "detect", "--json", "--max-candidates", "3")
    cands = json.loads(res.stdout)
    assert len(cands) == 3
    fields = {
        "id",
        "tool_sequence",
        "occurrence_count",
        "match_type",
        "estimated_token_savings",
        "avg_cost_per_execution",
        "dedupe_key",
        "proposed_flow",
        "run_ids",
    }
    assert fields <= set(cands[0])
    assert "input_map" in cands[0]["proposed_flow"]["steps"][0]

    res = sf(sqlite_url, "flows", "approve", cands[0]["id"])
    assert res.exit_code == 0 and "version 1" in res.stdout
    res = sf(sqlite_url, "flows", "list", "--json")
    (flow,) = json.loads(res.stdout)
    assert flow["name"] == cands[0]["proposed_flow"]["name"] and flow["source"] == "auto-learned"
    res = sf(sqlite_url, "flows", "show", flow["name"], "--mermaid")
    assert res.exit_code == 0 and "step_1 --> step_2" in res.stdout
    res = sf(sqlite_url, "flows", "reject", cands[1]["id"])
    assert res.exit_code == 0
    res = sf(sqlite_url, "flows", "candidates", "--json")
    assert {c["status"] for c in json.loads(res.stdout)} == {"approved", "rejected", "pending"}

    # Another user sees nothing of it.
    assert json.loads(sf(sqlite_url, "runs", "list", "--json", user="u2").stdout) == []
    assert json.loads(sf(sqlite_url, "flows", "list", "--json", user="u2").stdout) == []
    assert json.loads(sf(sqlite_url, "detect", "--json", user="u2").stdout) == []


def test_flows_run_with_tools_and_task(sqlite_url):
    from soloflow_core.learning.promotion import submit_flow
    from soloflow_core.models import FlowDefinition, FlowStep
    from soloflow_core.store import Store

    flow = FlowDefinition(
        name="track",
        input_schema={
            "type": "object",
            "properties": {"email": {"type": "string"}},
            "required": ["email"],
        },
        extraction={
            "email": {
                "shape": "email",
                "pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
                "anchor": "",
                "type": "string",
            }
        },
        steps=[
            FlowStep(id="c", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}),
            FlowStep(
                id="o",
                skill_key="list_orders",
                depends_on=["c"],
                input_map={"customer_id": "{{c.customer_id}}"},
            ),
        ],
    )
    with Store.open(sqlite_url) as store:
        submit_flow(store, flow, user_id="u1", agent_id="default")
    tools = "soloflow_langgraph.demo.agent:TOOLS"
    res = sf(
        sqlite_url,
        "flows",
        "run",
        "track",
        "--task",
        "where is bob@example.org's order",
        "--tools",
        tools,
    )
    assert res.exit_code == 0, res.output
    first, *rest = res.stdout.splitlines()
    assert first.startswith("frun_") and "O-5002" in "".join(rest)
    res = sf(sqlite_url, "flows", "run", "track", "--input", '{"email": 3}', "--tools", tools)
    assert res.exit_code == 1


def test_bad_lines_are_reported_and_good_ones_kept(sqlite_url, tmp_path):
    path = tmp_path / "mixed.jsonl.gz"
    lines = [
        json.dumps({"run_id": "ok1", "tool_calls": [{"name": "a"}]}),
        "{not json",
        json.dumps({"run_id": "bad", "tool_calls": [{"args": {}}]}),
        json.dumps({"run_id": "ok2"}),
    ]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    res = sf(sqlite_url, "ingest", str(path), "--json")
    assert res.exit_code == 0
    report = json.loads(res.stdout)
    assert report["runs_written"] == 2
    assert [b["line"] for b in report["bad_lines"]] == [2, 3]
    assert "tool_calls[0].name" in report["bad_lines"][1]["reason"]
    assert sf(sqlite_url, "ingest", str(path), "--strict").exit_code == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["flows", "approve", "cand_nope"], "no candidate 'cand_nope'"),
        (["flows", "show", "nope"], "no flow 'nope'"),
        (["runs", "show", "nope"], "no task run 'nope'"),
        (["flows", "run", "x", "--input", "[1]"], "--input must be a JSON object"),
    ],
)
def test_errors_are_one_clear_line(sqlite_url, args, message):
    from soloflow_core.store import Store

    Store.open(sqlite_url).close()  # an existing database: the errors are about the ids
    exe = shutil.which("soloflow") or str(
        __import__("pathlib").Path(sys.executable).with_name("soloflow")
    )
    proc = subprocess.run(
        [exe, "--db", sqlite_url, *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_the_cli_starts_without_langgraph():
    # `soloflow detect` and the store commands need no LangGraph: importing it costs a second.
    code = (
        "import sys, soloflow_langgraph.cli; print(sorted(m for m in sys.modules if m.split('.')[0] "
        "in ('langgraph', 'langchain_core', 'langchain', 'sqlalchemy')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
