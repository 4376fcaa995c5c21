"""Helpers of the serving tests (``test_serve_*.py``, ``test_skills.py``): real servers on
127.0.0.1, a flow learned by a real agent, a flow that waits for approval.

Subprocesses import this module by name (``--tools serve_helpers:TOOLS``) with
``flowrun_fixtures.subprocess_env``, which puts this directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from soloflow_core.learning.promotion import approve_candidate
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig, FlowDefinition
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.demo.agent import TOOLS as DEMO_TOOLS
from soloflow_langgraph.demo.agent import build_support_agent
from soloflow_langgraph.verify import verify_candidate

EMAILS = [
    "alice@example.com",
    "bob@example.org",
    "carol@example.net",
    "dave@example.com",
    "erin@example.io",
]


@tool
def slow_echo(text: str, seconds: float = 0.0) -> str:
    """Echo a text after a pause (a slow tool, to hold a run)."""
    time.sleep(float(seconds))
    return text


TOOLS = [*DEMO_TOOLS, slow_echo]
"""The executors of the serving tests: the demo's support tools and ``slow_echo``."""

GATE_ENV = "SOLOFLOW_TEST_GATE"
"""A directory: ``wait_for_gate`` writes ``started`` in it, then waits for ``open`` there."""


@tool
def wait_for_gate(text: str) -> str:
    """Hold a run until the test opens the gate (at most two minutes); return ``text``."""
    gate = Path(os.environ[GATE_ENV])
    (gate / "started").write_text(text)
    deadline = time.monotonic() + 120
    while not (gate / "open").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never opened the gate")
        time.sleep(0.02)
    return text


GATE_TOOLS = [*TOOLS, wait_for_gate]
""":data:`TOOLS` and ``wait_for_gate``."""
GATED_FLOW: dict[str, Any] = {
    "name": "gated echo",
    "description": "Echo a text once the gate opens.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
    "steps": [
        {"id": "wait", "skill_key": "wait_for_gate", "input_map": {"text": "{{_trigger.text}}"}},
        {
            "id": "again",
            "skill_key": "slow_echo",
            "depends_on": ["wait"],
            "input_map": {"text": "{{wait}}"},
        },
    ],
}

APPROVAL_FLOW: dict[str, Any] = {
    "name": "notify after approval",
    "description": "Tell a customer about an order once a person approves.",
    "requires_approval": True,
    "input_schema": {
        "type": "object",
        "properties": {"customer_id": {"type": "string"}, "order_id": {"type": "string"}},
        "required": ["customer_id", "order_id"],
    },
    "steps": [
        {
            "id": "notify",
            "skill_key": "notify_customer",
            "side_effects": True,
            "input_map": {
                "customer_id": "{{_trigger.customer_id}}",
                "order_id": "{{_trigger.order_id}}",
                "status": "approved",
            },
        }
    ],
}
SLOW_FLOW: dict[str, Any] = {
    "name": "slow echo",
    "description": "Echo a text, slowly.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "seconds": {"type": "number", "default": 0}},
        "required": ["text"],
    },
    "steps": [
        {
            "id": "echo",
            "skill_key": "slow_echo",
            "retry_max": 0,
            "input_map": {"text": "{{_trigger.text}}", "seconds": "{{_trigger.seconds}}"},
        },
        {
            "id": "again",
            "skill_key": "slow_echo",
            "depends_on": ["echo"],
            "input_map": {"text": "{{echo}}"},
        },
    ],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """``app`` served by a real uvicorn on a free port of 127.0.0.1; its base URL. Always shut down."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def learn_demo_flow(
    store: Store, user_id: str, agent_id: str, emails: list[str] = EMAILS
) -> FlowDefinition:
    """Capture the demo agent's runs (a real ``create_agent`` agent, scripted model), detect the
    repeated sequence, verify it by replay and approve it: a learned flow with a candidate."""
    pm = get_plugin_manager()
    handler = SoloFlowCallbackHandler(
        store=store, user_id=user_id, agent_id=agent_id, plugin_manager=pm
    )
    agent, _ = build_support_agent()
    for email in emails:
        agent.invoke(
            {"messages": [{"role": "user", "content": f"Where is my order? My email is {email}."}]},
            config={"callbacks": [handler]},
        )
    config = DetectorConfig(min_sequence_length=3, min_occurrences=3, max_candidates=3)
    cand = detect_candidates(store, user_id=user_id, agent_id=agent_id, config=config)[0]
    verify_candidate(store, cand.id, user_id=user_id, agent_id=agent_id)
    return approve_candidate(store, cand.id, user_id=user_id, agent_id=agent_id, pm=pm)


def submit(store: Store, user_id: str, agent_id: str, flow: dict[str, Any]) -> FlowDefinition:
    return ProceduralMemory(store).submit_workflow(user_id, agent_id, flow)
