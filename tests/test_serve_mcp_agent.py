"""The flow tools of ``soloflow mcp`` loaded into a real ``create_agent`` agent through
``langchain-mcp-adapters``, over streamable HTTP (a real server on 127.0.0.1, a bearer token)
and over stdio (a ``soloflow mcp`` subprocess).

``langchain-mcp-adapters`` requires ``mcp<2`` and the server runs on ``mcp`` 2, so the agent
runs in its own environment (``.venv-mcp-client``, from ``mcp_client_requirements.txt``:
built by ``.ci/run``, or here on first use; ``$SOLOFLOW_TEST_MCP_CLIENT_PYTHON`` names another).
That is also what users of the adapters run today: a client on the pre-2026 protocol.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowrun_fixtures import soloflow_argv, subprocess_env
from serve_helpers import TOOLS, learn_demo_flow, live_server

from soloflow_core.store import Store
from soloflow_langgraph.routing import flow_tool_name
from soloflow_langgraph.server.mcp import SoloFlowMCP
from soloflow_langgraph.server.service import SoloFlowService

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLIENT_ENV = "SOLOFLOW_TEST_MCP_CLIENT_PYTHON"
CLIENT_VENV = ROOT / ".venv-mcp-client"
PROBE = "import langchain_mcp_adapters.client, langchain.agents, mcp"


@pytest.fixture(scope="session")
def client_python() -> Path:
    """The client environment's Python (built on first use)."""
    given = os.environ.get(CLIENT_ENV)
    python = Path(given) if given else CLIENT_VENV / "bin" / "python"
    if (
        python.exists()
        and subprocess.run([python, "-c", PROBE], capture_output=True).returncode == 0
    ):
        return python
    if given:
        pytest.fail(
            f"${CLIENT_ENV}={given} cannot import langchain_mcp_adapters: pip install -r "
            f"{HERE / 'mcp_client_requirements.txt'} there"
        )
    for argv in (
        [sys.executable, "-m", "venv", str(CLIENT_VENV)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "-r",
            str(HERE / "mcp_client_requirements.txt"),
        ],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            pytest.fail(
                f"could not build the MCP client environment ({' '.join(argv)}):\n{done.stderr[-3000:]}"
            )
    return python


@pytest.fixture
def served(sqlite_url: str) -> Iterator[tuple[str, str, str, str]]:
    """(MCP URL, ann's token, the learned flow's tool name, the store URL)."""
    store = Store.open(sqlite_url)
    service = SoloFlowService(store, tools=TOOLS)
    try:
        flow = learn_demo_flow(store, "ann", "bot")
        token = store.create_api_token(user_id="ann", agent_id="bot", scope="write").token
        with live_server(SoloFlowMCP(service).http_app()) as base:
            yield f"{base}/mcp", token, flow_tool_name(flow), sqlite_url
    finally:
        service.close()
        store.close()


def test_flow_tools_in_a_create_agent_agent_through_langchain_mcp_adapters(
    client_python: Path, served: tuple[str, str, str, str]
) -> None:
    url, token, tool, db_url = served
    stdio = soloflow_argv(
        "--db", db_url, "--user", "ann", "--agent", "bot", "mcp", "--tools", "serve_helpers:TOOLS"
    )
    config = {
        "servers": {
            "http": {
                "transport": "streamable_http",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
            },
            "stdio": {
                "transport": "stdio",
                "command": stdio[0],
                "args": stdio[1:],
                "env": subprocess_env(),
            },
        },
        "tool": tool,
        "args": {"email": "erin@example.io"},
        "task": "Where is my order? My email is erin@example.io.",
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    done = subprocess.run(
        [str(client_python), str(HERE / "mcp_agent_client.py"), json.dumps(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for transport in ("http", "stdio"):
        got = report[transport]
        assert tool in got["tools"] and {"soloflow_run", "soloflow_status", "soloflow_find"} <= set(
            got["tools"]
        )
        (message,) = got["tool_messages"]
        assert message["name"] == tool and message["status"] == "success"
        assert message["text"] == "notified C-1005 that O-5005 is in transit"
        assert got["answer"] == "The flow says: notified C-1005 that O-5005 is in transit"
    with Store.open(db_url) as store:
        runs = store.list_flow_runs(user_id="ann", agent_id="bot")
        assert [r["status"] for r in runs] == [
            "completed",
            "completed",
        ]  # one per transport, in ann's namespace
