"""``soloflow serve`` (and ``soloflow mcp --http``) stopped while a flow run it started is in
progress: the run is recorded ``interrupted`` (not left ``running`` with its process gone),
the server says so in its log, and the run resumes to completion — a real server subprocess
on 127.0.0.1 driven by httpx (by the MCP SDK's client), on SQLite and PostgreSQL, stopped by
SIGTERM and by Ctrl-C (SIGINT)."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import httpx2
import pytest
from flowrun_fixtures import soloflow_argv, subprocess_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from serve_helpers import GATE_ENV, GATE_TOOLS, GATED_FLOW, free_port, submit

from soloflow_core.store import Store
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "ann", "agent_id": "bot"}


def _serve(command: str, url: str, port: int, gate: Path) -> subprocess.Popen[str]:
    how = ["serve", "--log-level", "warning"] if command == "serve" else ["mcp", "--http"]
    return subprocess.Popen(
        soloflow_argv(
            "--db", url, *how, "--port", str(port), "--tools", "serve_helpers:GATE_TOOLS"
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(**{GATE_ENV: str(gate)}),
    )


def _wait_until(ready: object, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 60
    while not ready():  # type: ignore[operator]
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{what}: {proc.communicate()[1]}")
        time.sleep(0.05)


def _healthy(base: str) -> bool:
    try:  # the REST API's health check; the MCP endpoint answers 401 without a token
        return httpx.get(f"{base}/healthz").status_code == 200 or (
            httpx.post(f"{base}/mcp", json={}).status_code == 401
        )
    except httpx.TransportError:
        return False


def _start_over_rest(base: str, token: str) -> str:
    started = httpx.post(
        f"{base}/api/flows/gated echo/runs",
        json={"inputs": {"text": "hey"}, "wait_seconds": 0},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert started.status_code == 202, started.text  # accepted: still running
    assert started.json()["status"] == "running"
    return str(started.json()["run_id"])


async def _start_over_mcp(base: str, token: str) -> str:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        result = await client.call_tool(
            "soloflow_run", {"flow": "gated echo", "inputs": {"text": "hey"}, "wait_seconds": 0}
        )
    text = result.content[0].text  # type: ignore[union-attr]
    assert "is still running" in text, text
    found = re.search(r"frun_[0-9a-f]+", text)
    assert found is not None, text
    return found.group()


@pytest.mark.parametrize(
    ("command", "sig"),
    [("serve", signal.SIGTERM), ("serve", signal.SIGINT), ("mcp", signal.SIGTERM)],
    ids=["serve-sigterm", "serve-sigint", "mcp-http-sigterm"],
)
def test_a_run_in_progress_when_the_server_stops_is_interrupted_then_resumes(
    db_url: str,
    tmp_path: Path,
    command: str,
    sig: signal.Signals,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    with Store.open(db_url) as store:
        submit(store, "ann", "bot", GATED_FLOW)
        token = store.create_api_token(scope="write", **NS).token
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _serve(command, db_url, port, gate)
    try:
        _wait_until(lambda: _healthy(base), proc, "the server did not start")
        if command == "serve":
            run_id = _start_over_rest(base, token)
        else:
            run_id = asyncio.run(_start_over_mcp(base, token))
        _wait_until((gate / "started").exists, proc, "the gated step did not start")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # uvicorn hands the signal back once it has stopped: the default action of each
    assert proc.returncode in (-sig, 128 + sig, 0, 130), err
    assert "Traceback" not in err and "failed after its caller stopped waiting" not in err, err
    assert f"flow run {run_id}" in err and "recorded interrupted" in err, err

    with Store.open(db_url) as store:
        rec = store.get_flow_run(run_id, **NS)
        assert rec.state == "interrupted"
        last = [t for t in store.flow_run_history(run_id, **NS) if t.step_key is None][-1]
        assert (last.from_state, last.to_state) == ("running", "interrupted")
        assert "step 'wait'" in (last.detail or "")  # the call left running is named
        (gate / "open").touch()
        monkeypatch.setenv(GATE_ENV, str(gate))
        with FlowRuntime(store, tools=GATE_TOOLS, user_id="ann", agent_id="bot") as runtime:
            result = runtime.resume(run_id)
        assert (result.status, result.output) == ("completed", "hey"), result.error
        assert store.get_flow_run(run_id, **NS).state == "completed"
