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


TASKS = [
    "Where is my order? My email is alice@example.com.",
    "Hi, bob@example.org here. Can you check on my delivery?",
    "Please track the latest order for carol@example.net and let me know.",
]


def middleware_agent(store: Store, user: str = "alice") -> tuple[Any, Any]:
    from soloflow_core.learning import LearningConfig
    from soloflow_langgraph import SoloFlowMiddleware

    mw = SoloFlowMiddleware(store, user_id=user, agent_id="support", tools=TOOLS,
                            config=LearningConfig(learning_timeout=60))
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
            "call_0_find_customer", "call_1_list_orders", "call_2_track_shipment",
            "call_3_notify_customer"]
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
        (mine,) = [r for r in store.list_runs(user_id="alice", agent_id="support")
                   if r.task == TASKS[0]]
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
