"""A flow that waits for a person's approval is not done again by the agent meanwhile.

A user-submitted invoice flow with ``requires_approval``, reached through the middleware of a
real ``create_agent`` agent: routed with no model call, called as a tool by the model, and
called in the same model turn as its own side-effecting step. The side effect (``send_email``,
counted in ``routing_world.EFFECTS``) happens only once a person approves, exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from pydantic import PrivateAttr

from benchmarks import routing_world as W
from soloflow_core.errors import SoloFlowError
from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import submit_flow
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware
from soloflow_langgraph.routing.tools import flow_tool_name
from soloflow_langgraph.testing import ScriptedChatModel

USER, AGENT = "ann", "shop"
EMAIL_RULE = {
    "shape": "email",
    "pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    "anchor": "",
    "type": "string",
}
INVOICE = FlowDefinition(
    name="Invoice by e-mail",
    description="E-mail a customer their latest invoice as a PDF link.",
    requires_approval=True,
    steps=[
        FlowStep(
            id="account", skill_key="lookup_account", input_map={"email": "{{_trigger.email}}"}
        ),
        FlowStep(
            id="invoices",
            skill_key="list_invoices",
            depends_on=["account"],
            input_map={"account_id": "{{account.account_id}}"},
        ),
        FlowStep(
            id="pdf",
            skill_key="get_invoice_pdf",
            depends_on=["invoices"],
            input_map={"invoice_id": "{{invoices.0.invoice_id}}"},
        ),
        FlowStep(
            id="send",
            skill_key="send_email",
            depends_on=["pdf"],
            input_map={
                "to": "{{_trigger.email}}",
                "subject": "Your invoice {{invoices.0.invoice_id}}",
                "body": "Your invoice: {{pdf.url}}",
            },
        ),
    ],
    input_schema={
        "type": "object",
        "properties": {"email": {"type": "string"}},
        "required": ["email"],
    },
    extraction={"email": EMAIL_RULE},
    reply_template="I've e-mailed your latest invoice to {{_trigger.email}}.",
)
TASK = "Please email me my latest invoice, ann@example.io"


class Recorder(ScriptedChatModel):
    """Fixed replies; records the system prompt and tool names of each call."""

    _systems: list[str] = PrivateAttr(default_factory=list)
    _bound: list[list[str]] = PrivateAttr(default_factory=list)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self._bound.append([t.name if hasattr(t, "name") else str(t) for t in tools])
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self._systems.append(
            str(messages[0].content) if messages and messages[0].type == "system" else ""
        )
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def _call(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"name": n, "args": a, "id": f"c{i}_{n}", "type": "tool_call"}
            for i, (n, a) in enumerate(calls)
        ],
    )


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def _agent(store: Store, model: Any, *, auto: bool) -> tuple[Any, SoloFlowMiddleware]:
    config = LearningConfig(auto_execute=auto, learning_timeout=60)
    mw = SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=config)
    return create_agent(model, tools=W.TOOLS, system_prompt="Support.", middleware=[mw]), mw


def _invoke(agent: Any, mw: SoloFlowMiddleware, text: str) -> list[Any]:
    out = agent.invoke(
        {"messages": [{"role": "user", "content": text}]}, config={"callbacks": mw.callbacks}
    )
    return list(out["messages"])


def test_a_routed_run_that_waits_ends_the_turn_and_runs_once_approved(store: Store):
    submit_flow(store, INVOICE, user_id=USER, agent_id=AGENT)
    model = Recorder(responses=[])  # any model call fails the test
    agent, mw = _agent(store, model, auto=True)
    try:
        messages = _invoke(agent, mw, TASK)
        assert model.calls == 0
        assert "waiting for a person's approval" in str(messages[-1].content)
        assert messages[-1].response_metadata["soloflow_status"] == "waiting"
        assert W.EFFECTS == []
        run_id = messages[-1].response_metadata["soloflow_run_id"]
        result = mw.runtime.approve(run_id)
        assert result.status == "completed"
        assert [e["tool"] for e in W.EFFECTS] == ["send_email"]
        assert W.EFFECTS[0]["args"]["to"] == "ann@example.io"
        assert W.EFFECTS[0]["args"]["body"].startswith(
            "Your invoice: https://files.example-shop.com/"
        )
        with pytest.raises(SoloFlowError):  # an ended run cannot be approved again
            mw.runtime.approve(run_id)
        assert len(W.EFFECTS) == 1
    finally:
        mw.close()


def test_a_model_that_tries_the_step_itself_after_the_flow_waits_is_refused(store: Store):
    submit_flow(store, INVOICE, user_id=USER, agent_id=AGENT)
    tool = flow_tool_name(store.get_flow(INVOICE.name, user_id=USER, agent_id=AGENT).flow)
    send = {"to": "ann@example.io", "subject": "Invoice", "body": "here"}
    model = Recorder(
        responses=[
            _call((tool, {"email": "ann@example.io"})),
            _call(("send_email", send)),  # a model that does it anyway
            AIMessage(content="It awaits approval."),
        ]
    )
    agent, mw = _agent(store, model, auto=False)
    try:
        messages = _invoke(agent, mw, TASK)
        waits = [m for m in messages if isinstance(m, ToolMessage) and m.name == tool]
        assert "waiting for a person's approval" in str(waits[0].content)
        refused = [m for m in messages if isinstance(m, ToolMessage) and m.name == "send_email"]
        assert refused and refused[0].status == "error" and "Refused" in str(refused[0].content)
        assert W.EFFECTS == []
        # After the flow waited, the model was told so, and send_email was taken away.
        assert "waiting for a person's approval" in model._systems[1]
        assert "send_email" not in model._bound[1]
        (run,) = store.list_flow_runs(user_id=USER, agent_id=AGENT)
        mw.runtime.approve(str(run["id"]))
        assert [e["tool"] for e in W.EFFECTS] == ["send_email"]
    finally:
        mw.close()


def test_the_flows_own_step_in_the_same_turn_is_refused(store: Store):
    submit_flow(store, INVOICE, user_id=USER, agent_id=AGENT)
    tool = flow_tool_name(store.get_flow(INVOICE.name, user_id=USER, agent_id=AGENT).flow)
    send = {"to": "ann@example.io", "subject": "Invoice", "body": "here"}
    model = Recorder(
        responses=[
            _call((tool, {"email": "ann@example.io"}), ("send_email", send)),
            AIMessage(content="Done."),
        ]
    )
    agent, mw = _agent(store, model, auto=False)
    try:
        messages = _invoke(agent, mw, TASK)
        refused = [m for m in messages if isinstance(m, ToolMessage) and m.name == "send_email"]
        assert refused[0].status == "error" and "does it in this turn" in str(refused[0].content)
        assert W.EFFECTS == []
        (run,) = store.list_flow_runs(user_id=USER, agent_id=AGENT)
        mw.runtime.approve(str(run["id"]))
        assert len(W.EFFECTS) == 1
    finally:
        mw.close()


def _runs(store: Store) -> list[dict[str, Any]]:
    return store.list_flow_runs(user_id=USER, agent_id=AGENT)


def test_while_a_run_waits_no_invocation_does_its_step_or_starts_it_again(store: Store):
    """A later invocation (the same thread, or a new one) may not send the e-mail itself,
    run the flow again by name, run another flow with the same step, or route the same
    request into a second run."""
    from langgraph.checkpoint.memory import InMemorySaver

    submit_flow(store, INVOICE, user_id=USER, agent_id=AGENT)
    copy = INVOICE.model_copy(update={"name": "Quick invoice", "requires_approval": False})
    submit_flow(store, copy, user_id=USER, agent_id=AGENT)
    send = {"to": "ann@example.io", "subject": "Invoice", "body": "here"}
    model = Recorder(
        responses=[
            _call(("send_email", send)),  # the same thread, a later turn: do it anyway
            AIMessage(content="ok"),
            _call(("flow_run", {"name": INVOICE.name, "inputs": {"email": "ann@example.io"}})),
            AIMessage(content="ok"),
            _call(("flow_run", {"name": "Quick invoice", "inputs": {"email": "ann@example.io"}})),
            AIMessage(content="ok"),
        ]
    )
    config = LearningConfig(auto_execute=True, learning_timeout=60)
    mw = SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=config)
    agent = create_agent(
        model,
        tools=W.TOOLS,
        system_prompt="Support.",
        middleware=[mw],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t1"}, "callbacks": mw.callbacks}
    try:
        first = agent.invoke({"messages": [{"role": "user", "content": TASK}]}, config=thread)
        run_id = first["messages"][-1].response_metadata["soloflow_run_id"]
        assert model.calls == 0 and W.EFFECTS == []
        agent.invoke({"messages": [{"role": "user", "content": "send it now"}]}, config=thread)
        for i, words in enumerate(("run the flow again", "use the quick one")):
            agent.invoke(
                {"messages": [{"role": "user", "content": words}]},
                config={"configurable": {"thread_id": f"n{i}"}, "callbacks": mw.callbacks},
            )
        # The same request again, in a new conversation: told it waits, no second run.
        again = agent.invoke(
            {"messages": [{"role": "user", "content": TASK}]},
            config={"configurable": {"thread_id": "t2"}, "callbacks": mw.callbacks},
        )
        assert again["messages"][-1].response_metadata["soloflow_run_id"] == run_id
        assert W.EFFECTS == []
        assert [r["id"] for r in _runs(store)] == [run_id]
        mw.runtime.approve(run_id)
        assert [e["tool"] for e in W.EFFECTS] == ["send_email"]
    finally:
        mw.close()


def test_the_same_flow_twice_in_one_turn_runs_once(store: Store):
    submit_flow(store, INVOICE, user_id=USER, agent_id=AGENT)
    tool = flow_tool_name(store.get_flow(INVOICE.name, user_id=USER, agent_id=AGENT).flow)
    model = Recorder(
        responses=[
            _call(
                (tool, {"email": "ann@example.io"}),
                ("flow_run", {"name": INVOICE.name, "inputs": {"email": "ann@example.io"}}),
            ),
            AIMessage(content="Done."),
        ]
    )
    agent, mw = _agent(store, model, auto=False)
    try:
        messages = _invoke(agent, mw, TASK)
        refused = [m for m in messages if isinstance(m, ToolMessage) and m.name == "flow_run"]
        assert refused and refused[0].status == "error" and "Refused" in str(refused[0].content)
        (run,) = _runs(store)
        mw.runtime.approve(str(run["id"]))
        assert len(W.EFFECTS) == 1
    finally:
        mw.close()


def test_a_runtime_of_another_namespace_is_refused(store: Store):
    from soloflow_core.errors import ConfigError
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    with FlowRuntime(store, tools=W.TOOLS, user_id="mallory", agent_id=AGENT) as runtime:
        with pytest.raises(ConfigError, match="another namespace"):
            SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, runtime=runtime)
