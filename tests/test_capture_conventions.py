"""LangChain conventions in capture: one handler for many users (the namespace from each
call's ``metadata``), and the middleware capturing its own agent's runs."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler

from soloflow_core.store import Store
from soloflow_langgraph import SoloFlowCallbackHandler
from soloflow_langgraph.demo.agent import TOOLS, find_customer, support_script
from soloflow_langgraph.testing import ScriptedChatModel

TASK = "Where is my order? My email is alice@example.com."
SEQUENCE = ["find_customer", "list_orders", "track_shipment", "notify_customer"]


def support_agent(**kwargs: Any) -> Any:
    return create_agent(
        ScriptedChatModel(script=support_script),
        tools=TOOLS,
        system_prompt="You are a support agent.",
        **kwargs,
    )


def ask(agent: Any, task: str = TASK, **config: Any) -> dict[str, Any]:
    return agent.invoke({"messages": [{"role": "user", "content": task}]}, config=config or None)


def test_one_handler_serves_many_users_through_metadata(store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(
        store=store, user_id="app", agent_id="support", plugin_manager=pm
    )
    agent = support_agent()
    ask(agent, callbacks=[handler], metadata={"soloflow_user_id": "alice"})
    ask(
        agent,
        callbacks=[handler],
        metadata={"soloflow_user_id": "bob", "soloflow_agent_id": "billing"},
    )
    ask(agent, callbacks=[handler], metadata={"langfuse_user_id": "carol", "soloflow_user_id": ""})
    find_customer.invoke(
        {"email": "bob@example.org"},
        config={
            "callbacks": [handler],
            "metadata": {"soloflow_user_id": "bob", "soloflow_agent_id": "billing"},
        },
    )
    runs = {
        (r.user_id, r.agent_id): store.list_runs(user_id=r.user_id, agent_id=r.agent_id)
        for r in store.namespaces()
    }
    assert set(runs) == {("alice", "support"), ("bob", "billing"), ("app", "support")}
    (alice,) = runs[("alice", "support")]
    assert alice.tool_count == 4
    assert sorted(r.tool_count for r in runs[("bob", "billing")]) == [1, 4]
    assert len(runs[("app", "support")]) == 1  # no usable key: the handler's own namespace
    full = store.get_run(alice.run_id, user_id="alice", agent_id="support")
    assert full.tool_names == SEQUENCE and full.task == TASK
    assert handler.runs_written == 4 and handler.in_flight == 0


TASKS = [
    "Where is my order? My email is alice@example.com.",
    "Hi, bob@example.org here. Can you check on my delivery?",
    "Please track the latest order for carol@example.net and let me know.",
]


def middleware_agent(store: Store, user: str = "alice") -> tuple[Any, Any]:
    from soloflow_core.learning import LearningConfig
    from soloflow_langgraph import SoloFlowMiddleware

    mw = SoloFlowMiddleware(
        store,
        user_id=user,
        agent_id="support",
        tools=TOOLS,
        config=LearningConfig(learning_timeout=60),
    )
    return support_agent(middleware=[mw]), mw


def test_the_middleware_captures_and_learns_without_callbacks(store: Store) -> None:
    agent, mw = middleware_agent(store)
    try:
        for i, task in enumerate(TASKS, 1):
            ask(agent, task)  # no config at all
            runs = store.list_runs(user_id="alice", agent_id="support")
            assert len(runs) == i
            cands = store.list_candidates(user_id="alice", agent_id="support")
            assert len(cands) == (1 if i == 3 else 0)
        full = [store.get_run(r.run_id, user_id="alice", agent_id="support") for r in runs]
        assert all(r.tool_names == SEQUENCE for r in full)
        assert all(len(r.model_calls) == 5 and (r.tokens or 0) > 0 for r in full)
        assert {r.task for r in full} == set(TASKS)
        assert all(r.answer and r.answer.startswith("Your order") for r in full)
        assert [c.tool_call_id for c in full[0].tool_calls] == [
            "call_0_find_customer",
            "call_1_list_orders",
            "call_2_track_shipment",
            "call_3_notify_customer",
        ]
        assert cands[0].tool_sequence == SEQUENCE
        assert mw.callbacks[0].in_flight == 0
    finally:
        mw.close()


def test_passing_the_callbacks_too_records_each_run_once(store: Store) -> None:
    agent, mw = middleware_agent(store)
    try:
        ask(agent, TASKS[0], callbacks=mw.callbacks)
        other = SoloFlowCallbackHandler(store=store, user_id="alice", agent_id="support")
        ask(agent, TASKS[1], callbacks=[other])
        (mine,) = [
            r for r in store.list_runs(user_id="alice", agent_id="support") if r.task == TASKS[0]
        ]
        assert len(store.list_runs(user_id="alice", agent_id="support")) == 2
        assert mine.tool_count == 4 and mw.callbacks[0].in_flight == 0
    finally:
        mw.close()


async def test_the_middleware_captures_under_ainvoke(store: Store) -> None:
    agent, mw = middleware_agent(store, user="bob")
    try:
        await agent.ainvoke({"messages": [{"role": "user", "content": TASKS[1]}]})
        (run,) = store.list_runs(user_id="bob", agent_id="support")
        assert run.tool_count == 4 and run.model_call_count == 5
    finally:
        mw.close()


class ToolSeen(BaseCallbackHandler):
    """A user's own tracer: which tools it saw, with the tags and metadata they carried."""

    def __init__(self) -> None:
        self.tools: list[tuple[str, list[str], dict[str, Any]]] = []

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        self.tools.append(
            (
                str(serialized.get("name")),
                list(kwargs.get("tags") or []),
                dict(kwargs.get("metadata") or {}),
            )
        )


def track_flow() -> Any:
    from soloflow_core.models import FlowDefinition, FlowStep

    return FlowDefinition(
        name="track",
        input_schema={
            "type": "object",
            "properties": {"email": {"type": "string"}},
            "required": ["email"],
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


async def test_a_callers_config_reaches_every_steps_tool(store: Store) -> None:
    from soloflow_langgraph import FlowRuntime, run_flow

    flow = track_flow()
    store.register_flow(flow, source="user", user_id="alice", agent_id="support")
    inputs = {"email": "bob@example.org"}
    with FlowRuntime(store, tools=TOOLS, user_id="alice", agent_id="support") as runtime:
        seen = ToolSeen()
        result = runtime.run(
            "track",
            inputs,
            config={
                "callbacks": [seen],
                "tags": ["tenant-7"],
                "metadata": {"request_id": "r-1"},
                "configurable": {"thread_id": "not-yours"},
            },
        )
        assert result.status == "completed"
        assert [t[0] for t in seen.tools] == ["find_customer", "list_orders"]
        assert all(
            "tenant-7" in tags and meta.get("request_id") == "r-1" for _, tags, meta in seen.tools
        )
        assert (
            store.get_flow_run(result.run_id, user_id="alice", agent_id="support").state
            == "completed"
        )
        # Without a config: nothing follows (the earlier run's callbacks are not kept).
        assert runtime.run("track", inputs).status == "completed" and len(seen.tools) == 2
        later = ToolSeen()
        done = await runtime.arun("track", inputs, config={"callbacks": [later]})
        assert done.status == "completed" and [t[0] for t in later.tools] == [
            "find_customer",
            "list_orders",
        ]
    once = ToolSeen()
    assert run_flow(flow, inputs, tools=TOOLS, config={"callbacks": [once]}).status == "completed"
    assert [t[0] for t in once.tools] == ["find_customer", "list_orders"]
