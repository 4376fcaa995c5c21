"""`soloflow runs list`, ``store.list_runs`` and ``GET /api/runs``: the last stored run first on
every store, and a run a learned flow answered (``meta["routed"]``) marked with the flow's
name, read with the listing's one query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from soloflow_core.models import TaskRun
from soloflow_core.store import Store
from soloflow_langgraph.cli import app

NS = {"user_id": "ann", "agent_id": "bot"}
ROUTED = {"flow": "order status", "version": 2, "flow_run_id": "frun_1", "status": "completed"}


def _sf(db_url: str, *args: str, width: int = 200) -> Any:
    res = CliRunner().invoke(
        app,
        ["--db", db_url, "--user", NS["user_id"], "--agent", NS["agent_id"], *args],
        catch_exceptions=False,
        terminal_width=width,
    )
    assert res.exit_code == 0, res.output
    return res


def test_runs_list_is_last_stored_first_on_every_store(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """An ingested ledger lists its last line first (whatever the runs' ``started_at``); a run
    stored after it comes before it."""
    ledger = tmp_path / "ledger.jsonl"
    started = ["2026-01-05T00:00:00Z", "2026-01-01T00:00:00Z", "2026-01-09T00:00:00Z"]
    ledger.write_text(
        "".join(
            json.dumps({"run_id": f"line{i}", "task": "t", "started_at": at, "tool_calls": []})
            + "\n"
            for i, at in enumerate(started)
        )
    )
    _sf(db_url, "ingest", str(ledger))
    store.add_run(TaskRun(run_id="later", **NS))
    expected = ["later", "line2", "line1", "line0"]
    assert [r.run_id for r in store.list_runs(**NS)] == expected
    listed = json.loads(_sf(db_url, "runs", "list", "--json").stdout)
    assert [r["run_id"] for r in listed] == expected
    assert [r.run_id for r in store.list_runs(**NS, limit=2, offset=1)] == expected[1:3]


def _routed_runs(store: Store) -> None:
    store.add_runs(
        [
            TaskRun(run_id="by-agent", task="what is the weather", **NS),
            TaskRun(run_id="by-flow", task="where is my order", meta={"routed": ROUTED}, **NS),
            # What a hand-written ledger may hold under the key: no flow named, or not a name.
            TaskRun(run_id="odd-a", meta={"routed": "yes"}, **NS),
            TaskRun(run_id="odd-b", meta={"routed": {"flow": 7}}, **NS),
        ]
    )


def test_list_runs_names_the_flow_that_answered(store: Store) -> None:
    _routed_runs(store)
    got = {r.run_id: r.routed_flow for r in store.list_runs(**NS)}
    assert got == {"by-agent": None, "by-flow": "order status", "odd-a": None, "odd-b": "7"}


def test_runs_list_marks_routed_runs(store: Store, db_url: str) -> None:
    _routed_runs(store)
    listed = {r["run_id"]: r for r in json.loads(_sf(db_url, "runs", "list", "--json").stdout)}
    assert listed["by-flow"]["routed_flow"] == "order status"
    assert listed["by-agent"]["routed_flow"] is None
    for width in (200, 80):  # a table, and blocks on a narrow terminal
        lines = _sf(db_url, "runs", "list", width=width).stdout.splitlines()
        marked = [i for i, line in enumerate(lines) if "[flow: order status] where is my" in line]
        at = {run: next(i for i, line in enumerate(lines) if run in line) for run in ("by-flow",)}
        assert len(marked) == 1 and marked[0] - at["by-flow"] in (0, 1), lines  # its row
        assert sum("[flow:" in line for line in lines) == 2, lines  # and odd-b's "7" only


def test_rest_runs_list_names_the_flow_that_answered(sqlite_store: Store) -> None:
    from fastapi.testclient import TestClient

    from soloflow_langgraph.server.api import create_app
    from soloflow_langgraph.server.service import SoloFlowService

    _routed_runs(sqlite_store)
    token = sqlite_store.create_api_token(**NS, scope="read").token
    service = SoloFlowService(sqlite_store)
    try:
        with TestClient(create_app(service)) as client:
            page = client.get("/api/runs", headers={"Authorization": f"Bearer {token}"})
    finally:
        service.close()
    assert page.status_code == 200, page.text
    got = {r["run_id"]: r["routed_flow"] for r in page.json()["items"]}
    assert got == {"by-agent": None, "by-flow": "order status", "odd-a": None, "odd-b": "7"}
    assert [r["run_id"] for r in page.json()["items"]] == ["odd-b", "odd-a", "by-flow", "by-agent"]
