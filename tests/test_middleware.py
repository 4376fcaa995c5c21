"""SoloFlowMiddleware on a real ``create_agent`` agent driven by a scripted chat model.

The integration test follows the issue: three runs of a sequence → a proposed flow; approved,
the fourth matching task is routed to the flow with zero model calls; a failing flow falls
back to the agent and loses confidence; a second user sees none of it.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import tool
from pydantic import PrivateAttr
from typer.testing import CliRunner

from soloflow_core import StepRecord, hookimpl
from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import approve_candidate
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.demo.agent import (
    find_customer,
    list_orders,
    notify_customer,
    search_help_center,
    support_script,
    track_shipment,
)
from soloflow_langgraph.routing.hints import FLOW_RUN_TOOL, flow_hint, flow_hints
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware
from soloflow_langgraph.testing import ScriptedChatModel

USER, AGENT = "alice", "support"
SEQUENCE = ["find_customer", "list_orders", "track_shipment", "notify_customer"]
FLOW = "Auto: " + " → ".join(SEQUENCE)
TASKS = [
    "Where is my order? My email is alice@example.com.",
    "Hi, bob@example.org here. Can you check on my delivery?",
    "Please track the latest order for carol@example.net and let me know.",
]
FOURTH = "Can you track the order for dave@example.com?"
"""A new request for the learned job, in words its tasks used ("track", "order")."""
FOURTH_REPLY = "Your order O-5004 is label created (ETA 2026-11-28). I've sent you a notification."
"""The agent's own answer for dave, which the flow's learned reply template writes."""
HINT = (
    f"A deterministic flow '{FLOW}' is available for this pattern. Use flow_run('{FLOW}') "
    "instead of reasoning through these steps manually."
)

OUTAGE = {"left": 0}
"""Calls of ``track_shipment`` that fail before the carrier API is back."""


@tool("track_shipment")
def flaky_track_shipment(order_id: str) -> str:
    """Track the shipment of an order."""
    if OUTAGE["left"] > 0:
        OUTAGE["left"] -= 1
        raise ConnectionError("carrier API unavailable")
    return str(track_shipment.func(order_id))  # type: ignore[misc]  # not a nested tool run


TOOLS = [find_customer, list_orders, flaky_track_shipment, notify_customer, search_help_center]


class RecordingModel(ScriptedChatModel):
    """The scripted support 'LLM', recording the system prompt and tools of each call."""

    _systems: list[str] = PrivateAttr(default_factory=list)
    _bound: list[list[str]] = PrivateAttr(default_factory=list)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self._bound.append([t.name if hasattr(t, "name") else str(t) for t in tools])
        return self

    @property
    def systems(self) -> list[str]:
        return self._systems

    @property
    def bound(self) -> list[list[str]]:
        return self._bound


def _script(model: list[RecordingModel]):  # the model records through the closure
    def script(messages: list[BaseMessage]) -> AIMessage:
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        model[0].systems.append(str(system.content) if system is not None else "")
        return support_script(messages)

    return script


def make_model() -> RecordingModel:
    holder: list[RecordingModel] = []
    model = RecordingModel(script=_script(holder))
    holder.append(model)
    return model


@pytest.fixture(autouse=True)
def _no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A failing step's retries back off 1 s then 2 s: not in a unit test."""
    import soloflow_langgraph.compile.nodes as nodes

    monkeypatch.setattr(nodes.time, "sleep", lambda _s: None)
    OUTAGE["left"] = 0
    yield


CONFIG = LearningConfig(auto_execute=True, learning_timeout=60)


def build(
    store: Store,
    *,
    user: str = USER,
    tools: list[Any] | None = None,
    config: LearningConfig = CONFIG,
) -> tuple[Any, RecordingModel, SoloFlowMiddleware]:
    tools = TOOLS if tools is None else tools
    mw = SoloFlowMiddleware(store, user_id=user, agent_id=AGENT, tools=tools, config=config)
    model = make_model()
    agent = create_agent(
        model, tools=tools, system_prompt="You are a support agent.", middleware=[mw]
    )
    return agent, model, mw


def ask(agent: Any, mw: SoloFlowMiddleware, model: RecordingModel, task: str) -> tuple[str, int]:
    """(final answer, model calls) of one task."""
    before = model.calls
    result = agent.invoke(
        {"messages": [{"role": "user", "content": task}]}, config={"callbacks": mw.callbacks}
    )
    return str(result["messages"][-1].content), model.calls - before


def learned(store: Store) -> tuple[Any, RecordingModel, SoloFlowMiddleware]:
    """Three runs of the sequence, then the proposed flow approved."""
    agent, model, mw = build(store)
    for task in TASKS:
        ask(agent, mw, model, task)
    (cand,) = store.list_candidates(user_id=USER, agent_id=AGENT)
    approve_candidate(store, cand.id, user_id=USER, agent_id=AGENT)
    return agent, model, mw


def cli(store: Store, *args: str, user: str = USER) -> Any:
    return CliRunner().invoke(
        app, ["--db", store.url, "--user", user, "--agent", AGENT, *args], catch_exceptions=False
    )


# --------------------------------------------------------------------------- the test


def test_learn_approve_route_fall_back_and_isolate(sqlite_store: Store):
    store = sqlite_store
    agent, model, mw = build(store)
    handler = mw.callbacks[0]

    # 1. Three runs of the sequence: the flow is proposed after the third, not before.
    per_run: list[tuple[int, int]] = []
    for i, task in enumerate(TASKS, 1):
        _, calls = ask(agent, mw, model, task)
        run = handler.last_run
        assert run is not None and run.tool_names == SEQUENCE
        per_run.append((calls, run.tokens or 0))
        cands = store.list_candidates(user_id=USER, agent_id=AGENT)
        assert len(cands) == (1 if i == 3 else 0)
    assert [c for c, _ in per_run] == [5, 5, 5]  # four tool turns and the answer
    assert all(tokens > 0 for _, tokens in per_run)
    (cand,) = cands
    assert cand.status == "pending" and cand.tool_sequence == SEQUENCE
    assert cand.fidelity == 1.0  # verified by replay in the learning step
    assert store.list_flow_meta(user_id=USER, agent_id=AGENT) == []  # manual: nothing promoted

    # 2. A person approves; the fourth matching task runs through the flow: no model call,
    # and the user gets the agent's kind of answer (its reply template), not the raw output.
    flow = approve_candidate(store, cand.id, user_id=USER, agent_id=AGENT)
    assert flow.name == FLOW
    assert flow.reply_template == (
        "Your order {{step_3.order_id}} is {{step_3.status}} (ETA {{step_3.eta}}). "
        "I've sent you a notification."
    )
    answer, calls = ask(agent, mw, model, FOURTH)
    assert calls == 0
    assert answer == FOURTH_REPLY
    routed = handler.last_run
    assert routed is not None and routed.model_calls == [] and (routed.tokens or 0) == 0
    (frun,) = store.list_flow_runs(user_id=USER, agent_id=AGENT)
    assert frun["status"] == "completed" and frun["inputs"] == {"email": "dave@example.com"}
    after_success = store.get_flow_meta(FLOW, user_id=USER, agent_id=AGENT)
    assert (after_success.success_count, after_success.total_executions) == (1, 1)
    assert after_success.confidence == pytest.approx(6 / 7)  # approval prior Beta(5, 1) + 1 success

    # 3. The flow fails (the carrier API is down for its three attempts): the agent does the
    # task, told what happened, and the flow loses confidence...
    OUTAGE["left"] = 3
    answer, calls = ask(agent, mw, model, "Please track the order for erin@example.io")
    assert calls == 5 and "O-5005" in answer
    assert "The deterministic flow" in model.systems[-1] and "failed" in model.systems[-1]
    failed = store.get_flow_meta(FLOW, user_id=USER, agent_id=AGENT)
    assert (failed.success_count, failed.total_executions) == (1, 2)
    # ...but the agent's own successful run of the same sequence is evidence for the flow.
    assert failed.confidence == pytest.approx(7 / 9)  # (5 + 1 + 1 seen) / (6 + 2 + 1 seen)
    assert failed.confidence < after_success.confidence
    states = sorted(r["status"] for r in store.list_flow_runs(user_id=USER, agent_id=AGENT))
    assert states == ["completed", "failed"]
    # Below confidence_threshold now: the next matching task gets the hint, not a routed run;
    # the agent doing it is one more success, which brings the flow back to the threshold.
    _, calls = ask(agent, mw, model, "Where is my order? I'm bob@example.org")
    assert calls == 5 and HINT in model.systems[-1]
    back = store.get_flow_meta(FLOW, user_id=USER, agent_id=AGENT)
    assert back.confidence == pytest.approx(8 / 10)
    answer, calls = ask(agent, mw, model, "Please track the order for carol@example.net")
    assert calls == 0 and answer.startswith("Your order O-5003 is out for delivery")

    # 4. A second user sees none of it: lookup, middleware, CLI.
    task = FOURTH
    assert ProceduralMemory(store).find_workflow("bob", AGENT, task) == []
    assert flow_hints(store, "bob", AGENT, task, TOOLS) == ([], "")
    other, other_model, other_mw = build(store, user="bob")
    assert [t.name for t in other_mw.tools] == [FLOW_RUN_TOOL]
    _, calls = ask(other, other_mw, other_model, task)
    assert calls == 5 and all(
        "SoloFlow" not in s and "deterministic" not in s for s in other_model.systems
    )
    assert all(FLOW_RUN_TOOL not in names for names in other_model.bound)
    res = cli(store, "flows", "stats", "--json", user="bob")
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    assert json.loads(cli(store, "flows", "list", "--json", user="bob").stdout) == []
    assert store.list_flow_runs(user_id="bob", agent_id=AGENT) == []
    # ...while the first user's stats show the record and the savings.
    (row,) = json.loads(cli(store, "flows", "stats", "--json").stdout)
    assert row["flow"] == FLOW and row["total_executions"] == 3 and row["success_count"] == 2
    assert row["agent"]["runs"] == 3 and row["agent"]["model_calls"] == 5.0
    assert row["agent"]["tokens"] == pytest.approx(sum(t for _, t in per_run) / 3)
    assert row["flow_runs"] == {
        "runs": 3,
        "model_calls": 0.0,
        "tokens": 0.0,
        "cost": 0.0,
        "latency_ms": pytest.approx(row["flow_runs"]["latency_ms"]),
    }
    assert row["completed_runs"] == 2 and row["saved_total"]["model_calls"] == 10.0
    assert row["estimated_token_savings"] == cand.estimated_token_savings


# --------------------------------------------------------------------------- hints


def test_hint_text_is_the_design_documents_sentence():
    assert flow_hint("Refund order") == (
        "A deterministic flow 'Refund order' is available for this pattern. Use "
        "flow_run('Refund order') instead of reasoning through these steps manually."
    )
    assert flow_hint("F", "soloflow_F", ["email"]).endswith(" Its tool: soloflow_F. Inputs: email.")


def test_matching_flows_are_hinted_and_their_tools_offered(sqlite_store: Store):
    learned(sqlite_store)
    # Built after the flow exists: its typed tool is declared; no auto_execute: hints only.
    agent, model, mw = build(sqlite_store, config=LearningConfig(learning_timeout=60))
    typed = next(t.name for t in mw.tools if t.name != FLOW_RUN_TOOL)
    _, calls = ask(agent, mw, model, FOURTH)
    assert calls == 5  # the scripted model ignores hints; nothing was routed
    assert all(s.startswith("You are a support agent.\n\n" + HINT) for s in model.systems)
    assert f"Its tool: {typed}. Inputs: email." in model.systems[0]
    assert all({typed, FLOW_RUN_TOOL} <= set(names) for names in model.bound)
    # A task the flow does not fit: no hint, and the flow tools are taken out of the request.
    model.systems.clear()
    model.bound.clear()
    ask(agent, mw, model, "What is your return policy for opened items?")
    assert model.systems == ["You are a support agent."] * 2
    assert all(typed not in names and FLOW_RUN_TOOL not in names for names in model.bound)


def test_flow_hints_for_an_agent_soloflow_did_not_build(sqlite_store: Store):
    learned(sqlite_store)
    tools, text = flow_hints(sqlite_store, USER, AGENT, FOURTH, TOOLS)
    assert text.startswith(HINT)
    by_name = {t.name: t for t in tools}
    assert FLOW_RUN_TOOL in by_name and len(by_name) == 2
    out = by_name[FLOW_RUN_TOOL].invoke({"name": FLOW, "inputs": {"email": "erin@example.io"}})
    assert out == "notified C-1005 that O-5005 is in transit"
    typed = next(t for n, t in by_name.items() if n != FLOW_RUN_TOOL)
    assert typed.invoke({"email": "bob@example.org"}) == "notified C-1002 that O-5002 is delivered"
    # Each run is durable in the store.
    assert len(sqlite_store.list_flow_runs(user_id=USER, agent_id=AGENT)) == 2


# --------------------------------------------------------------------------- bad input


def test_a_one_megabyte_context(sqlite_store: Store):
    agent, model, mw = learned(sqlite_store)
    filler = "lorem ipsum dolor sit amet " * 40_000
    task = "Where is my order? " + filler + " My email is dave@example.com"
    assert len(task) > 1_000_000
    answer, calls = ask(agent, mw, model, task)
    # Not a request a flow runs for unasked (its words are not the job's): the agent does it.
    assert calls == 5 and "O-5004" in answer
    assert mw.route(task).run is None


@pytest.mark.parametrize(
    "task", ["", "   ", "我的包裹在哪里？邮箱 dave@example.com", "¿Dónde está mi pedido?"]
)
def test_empty_or_non_english_task(sqlite_store: Store, task: str):
    agent, model, mw = learned(sqlite_store)
    answer, calls = ask(agent, mw, model, task)
    if (
        "dave@example.com" in task
    ):  # the flow's input is in the text: routed or hinted, right either way
        assert "O-5004" in answer
    else:  # nothing to extract: never routed; the agent answers
        assert calls == 2 and answer.startswith("From our help center")


def test_a_flow_needing_a_tool_the_agent_lacks_is_not_offered(sqlite_store: Store):
    learned(sqlite_store)
    fewer = [find_customer, list_orders, flaky_track_shipment, search_help_center]
    agent, model, mw = build(sqlite_store, tools=fewer)
    assert [t.name for t in mw.tools] == [FLOW_RUN_TOOL]
    assert flow_hints(sqlite_store, USER, AGENT, FOURTH, fewer) == ([], "")
    _, calls = ask(agent, mw, model, FOURTH)
    assert calls == 5  # not routed: the model did the task (its notify call is refused)
    assert all("deterministic flow" not in s for s in model.systems)
    run_tool = mw.tools[0]
    reply = run_tool.invoke({"name": FLOW, "inputs": {"email": "dave@example.com"}})
    assert "this agent lacks notify_customer" in reply
    assert sqlite_store.list_flow_runs(user_id=USER, agent_id=AGENT) == []


# --------------------------------------------------------------------------- async


async def test_ainvoke_routes_and_hints(sqlite_store: Store):
    agent, model, mw = learned(sqlite_store)
    before = model.calls
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": FOURTH}]}, config={"callbacks": mw.callbacks}
    )
    assert model.calls == before
    assert result["messages"][-1].content == FOURTH_REPLY
    assert result["messages"][-1].response_metadata["soloflow_flow"] == FLOW
    # Without auto_execute the async path hints (awrap_model_call).
    agent2, model2, mw2 = build(sqlite_store, config=LearningConfig(learning_timeout=60))
    await agent2.ainvoke(
        {"messages": [{"role": "user", "content": FOURTH}]}, config={"callbacks": mw2.callbacks}
    )
    assert model2.calls == 5 and all(HINT in s for s in model2.systems)


# --------------------------------------------------------------------------- one plugin manager


class CarrierPlugin:
    """A user's plugin: its ``track_shipment`` executor wins over the agent's tool of that
    name, and it listens to every finished step."""

    def __init__(self) -> None:
        self.tracked: list[str] = []
        self.flow_steps: list[str] = []

    @hookimpl
    def soloflow_register_executors(self, register: Callable[[str, Any], None]) -> None:
        def track(order_id: str) -> str:
            self.tracked.append(order_id)
            return json.dumps({"order_id": order_id, "status": "with the plugin's carrier"})

        register("track_shipment", track)

    @hookimpl
    def soloflow_step_finished(self, step: StepRecord) -> None:
        if step.source == "flow":
            self.flow_steps.append(step.call.name)


def test_a_routed_flow_runs_on_the_middlewares_plugin_manager(sqlite_store: Store):
    store = sqlite_store
    _, _, learning_mw = learned(store)
    learning_mw.close()
    plugin = CarrierPlugin()
    pm = get_plugin_manager(plugins=[plugin])
    mw = SoloFlowMiddleware(
        store, user_id=USER, agent_id=AGENT, tools=TOOLS, config=CONFIG, plugin_manager=pm
    )
    try:
        assert mw.runtime.pm is pm
        model = make_model()
        agent = create_agent(
            model, tools=TOOLS, system_prompt="You are a support agent.", middleware=[mw]
        )
        answer, calls = ask(agent, mw, model, FOURTH)
        assert calls == 0  # routed: the flow ran, with the plugin's executor
        # The plugin's output has no ETA: the reply template cannot be written, so the reply
        # states what the flow did, with the last step's output.
        assert answer.startswith(f"Done: I ran the flow {FLOW!r}")
        assert answer.endswith("Result: notified C-1004 that O-5004 is with the plugin's carrier")
        assert plugin.tracked == ["O-5004"]
        assert plugin.flow_steps == SEQUENCE
    finally:
        mw.close()


def _open_files_under(directory: Path) -> int:
    """This process's file descriptors open on files under ``directory`` (SQLite databases,
    their -wal and -shm files, the checkpoint database)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor, too)
            continue
        count += target.startswith(str(directory))
    return count


def _own_postgres_backends(store: Store) -> int:
    """Rows of pg_stat_activity that are connections of this process (by client port)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[9]) in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    with store.engine.connect() as conn:
        clients = conn.execute(
            sa.text("SELECT client_port FROM pg_stat_activity WHERE datname = current_database()")
        ).scalars()
        return sum(1 for port in clients if port in ports)


def test_flow_hints_leaves_no_connection_open(store: Store, tmp_path: Path):
    _, _, learning_mw = learned(store)
    learning_mw.close()
    postgres = store.engine.dialect.name == "postgresql"

    def open_now() -> tuple[int, int]:
        return _open_files_under(tmp_path), _own_postgres_backends(store) if postgres else 0

    def hints() -> list[Any]:
        tools, text = flow_hints(store, USER, AGENT, FOURTH, TOOLS)
        assert HINT in text
        return tools

    hints()[0].invoke({"email": "dave@example.com"})  # the pools have what they keep
    before = open_now()
    gc.disable()  # an unclosed connection must not hide behind the cycle collector
    try:
        for i in range(100):
            tools = hints()
            if i % 25 == 0:  # a run opens its runtime and closes it when it returns
                assert "O-5004" in tools[0].invoke({"email": "dave@example.com"})
        after = open_now()
    finally:
        gc.enable()
    assert after[0] <= before[0]
    assert after[1] <= before[1]
