"""LangChain conventions in capture: one handler for many users (the namespace from each
call's ``metadata``), and the middleware capturing its own agent's runs."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent

from soloflow_core.store import Store
from soloflow_langgraph import SoloFlowCallbackHandler
from soloflow_langgraph.demo.agent import TOOLS, find_customer, support_script
from soloflow_langgraph.testing import ScriptedChatModel

TASK = "Where is my order? My email is alice@example.com."
SEQUENCE = ["find_customer", "list_orders", "track_shipment", "notify_customer"]


def support_agent(**kwargs: Any) -> Any:
    return create_agent(ScriptedChatModel(script=support_script), tools=TOOLS,
                        system_prompt="You are a support agent.", **kwargs)


def ask(agent: Any, task: str = TASK, **config: Any) -> dict[str, Any]:
    return agent.invoke({"messages": [{"role": "user", "content": task}]}, config=config or None)


def test_one_handler_serves_many_users_through_metadata(store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=store, user_id="app", agent_id="support", plugin_manager=pm)
    agent = support_agent()
    ask(agent, callbacks=[handler], metadata={"soloflow_user_id": "alice"})
    ask(agent, callbacks=[handler], metadata={"soloflow_user_id": "bob", "soloflow_agent_id": "billing"})
    ask(agent, callbacks=[handler], metadata={"langfuse_user_id": "carol", "soloflow_user_id": ""})
    find_customer.invoke({"email": "bob@example.org"}, config={
        "callbacks": [handler], "metadata": {"soloflow_user_id": "bob", "soloflow_agent_id": "billing"}})
    runs = {(r.user_id, r.agent_id): store.list_runs(user_id=r.user_id, agent_id=r.agent_id)
            for r in store.namespaces()}
    assert set(runs) == {("alice", "support"), ("bob", "billing"), ("app", "support")}
    (alice,) = runs[("alice", "support")]
    assert alice.tool_count == 4
    assert sorted(r.tool_count for r in runs[("bob", "billing")]) == [1, 4]
    assert len(runs[("app", "support")]) == 1  # no usable key: the handler's own namespace
    full = store.get_run(alice.run_id, user_id="alice", agent_id="support")
    assert full.tool_names == SEQUENCE and full.task == TASK
    assert handler.runs_written == 4 and handler.in_flight == 0
