"""``soloflow runs trace`` and ``soloflow flows runs trace``: the tree, --json, --otlp-json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_flow_traces import FLOW, _tools
from test_traces import _price, _run_agent
from typer.testing import CliRunner

from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

runner = CliRunner()


def _sf(url: str, *args: str, user: str = "default", agent: str = "default") -> object:
    return runner.invoke(
        app, ["--db", url, "--user", user, "--agent", agent, *args], catch_exceptions=False
    )


def test_runs_trace_prints_the_tree_with_tokens_cost_and_the_critical_path(sqlite_url: str) -> None:
    store = Store.open(sqlite_url)
    try:
        handler = _run_agent(store)
    finally:
        store.close()
    assert handler.last_run is not None
    run_id = handler.last_run.run_id
    res = _sf(sqlite_url, "runs", "trace", run_id)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "invoke_agent support_agent" in lines[1] and "★" in lines[1]
    assert "tokens 4,500 in / 125 out" in lines[1]
    total = _price(1200, 40) + _price(1500, 60) + _price(1800, 25)
    assert f"${total.normalize():f}" in lines[1]
    assert sum("chat scripted-request" in ln for ln in lines) == 3
    assert sum("execute_tool track_shipment" in ln for ln in lines) == 2
    first_chat = next(ln for ln in lines if "chat scripted-request" in ln)
    assert "tokens 1,200 in / 40 out" in first_chat and "★" in first_chat

    tree = json.loads(_sf(sqlite_url, "runs", "trace", run_id, "--json").stdout)
    (root,) = tree
    assert root["kind"] == "invoke_agent" and root["critical"] is True
    assert (root["input_tokens"], root["output_tokens"]) == (4500, 125)
    assert [c["kind"] for c in root["children"]] == [
        "chat",
        "execute_tool",
        "chat",
        "execute_tool",
        "execute_tool",
        "chat",
    ]


def test_otlp_json_file_and_a_missing_trace(sqlite_url: str, tmp_path: Path) -> None:
    store = Store.open(sqlite_url)
    try:
        handler = _run_agent(store)
    finally:
        store.close()
    assert handler.last_run is not None
    target = tmp_path / "trace.json"
    res = _sf(sqlite_url, "runs", "trace", handler.last_run.run_id, "--otlp-json", str(target))
    assert res.exit_code == 0 and "wrote 7 spans" in res.output
    spans = json.loads(target.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(spans) == 7 and spans[0]["name"] == "invoke_agent support_agent"
    missing = _sf(sqlite_url, "runs", "trace", "nope")
    assert missing.exit_code == 1 and "run nope has no trace" in missing.output
    other = _sf(sqlite_url, "runs", "trace", handler.last_run.run_id, user="someone-else")
    assert other.exit_code == 1


def test_flows_runs_trace_and_the_list(sqlite_url: str) -> None:
    store = Store.open(sqlite_url)
    try:
        rt = FlowRuntime(store, tools=_tools({"fetch": 1}), user_id="default", agent_id="default")
        result = rt.run(FLOW, {})
        rt.close()
    finally:
        store.close()
    assert result.run_id is not None
    res = _sf(sqlite_url, "flows", "runs", "trace", result.run_id)
    assert res.exit_code == 0, res.output
    assert "invoke_flow fan" in res.output and "step fetch" in res.output
    assert "attempt 1" in res.output and "RuntimeError: fetch broke" in res.output
    tree = json.loads(_sf(sqlite_url, "flows", "runs", "trace", result.run_id, "--json").stdout)
    assert [c["name"] for c in tree[0]["children"]][0] == "step fetch"
    listed = json.loads(_sf(sqlite_url, "flows", "runs", "list", "--json").stdout)
    assert [r["run_id"] for r in listed] == [result.run_id]


def test_runs_list_shows_each_runs_cost_and_the_namespace_total(sqlite_url: str) -> None:
    store = Store.open(sqlite_url)
    try:
        _run_agent(store).close()
        _run_agent(store, model="no-such-model-anywhere").close()
    finally:
        store.close()
    res = runner.invoke(
        app, ["--db", sqlite_url, "runs", "list"], catch_exceptions=False, terminal_width=200
    )
    total = _price(1200, 40) + _price(1500, 60) + _price(1800, 25)
    assert f"${float(total):.4f}" in res.output and "unpriced" in res.output
    assert f"namespace cost: ${float(total):.4f} over 1 priced run(s), 1 unpriced" in res.output


def test_runs_trace_shows_a_flow_called_as_a_tool_inside_the_tool_call(sqlite_url: str) -> None:
    from test_otel import _nested_agent

    store = Store.open(sqlite_url)
    try:
        rt = FlowRuntime(store, tools=_tools({}))
        _result, handler = _nested_agent(store, rt)
        rt.close()
    finally:
        store.close()
    assert handler.last_run is not None
    tree = json.loads(_sf(sqlite_url, "runs", "trace", handler.last_run.run_id, "--json").stdout)
    (root,) = tree
    (call,) = [c for c in root["children"] if c["kind"] == "execute_tool"]
    (flow,) = call["children"]
    assert flow["name"] == "invoke_flow lookup" and [c["name"] for c in flow["children"]] == [
        "step fetch"
    ]
    assert flow["trace_id"] == root["trace_id"]


def test_flows_stats_shows_the_money_the_agent_runs_cost(sqlite_url: str) -> None:
    store = Store.open(sqlite_url)
    try:
        for who in ("a@x", "b@x", "c@x"):  # three tasks (replays of one task count once)
            _run_agent(store, email=who).close()
    finally:
        store.close()
    found = json.loads(_sf(sqlite_url, "detect", "--min-length", "2", "--json").stdout)
    assert found, "the three identical runs give a candidate"
    assert _sf(sqlite_url, "flows", "approve", found[0]["id"]).exit_code == 0
    (row,) = json.loads(_sf(sqlite_url, "flows", "stats", "--json").stdout)
    per_run = _price(1200, 40) + _price(1500, 60) + _price(1800, 25)
    assert row["agent"]["runs"] == 3 and row["agent"]["cost"] == pytest.approx(float(per_run))
    shown = runner.invoke(
        app, ["--db", sqlite_url, "flows", "stats"], catch_exceptions=False, terminal_width=200
    )
    assert "cost (USD)" in shown.output and f"{float(per_run):.4f}" in shown.output
