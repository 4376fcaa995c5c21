"""A flow as a LangChain tool (standard tests, inside a real agent) and as a subgraph node."""

from __future__ import annotations

import json
import operator
import sqlite3
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from pydantic import ValidationError
from typing_extensions import TypedDict

from soloflow_core.errors import (
    ConfigError,
    ExecutorNotFoundError,
    FlowRunError,
    FlowValidationError,
)
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_langgraph.routing.tools import flow_args_schema, flow_node, flow_tool, flow_tool_name
from soloflow_langgraph.runtime.results import FlowRunResult
from soloflow_langgraph.runtime.runner import run_flow
from soloflow_langgraph.testing import ScriptedChatModel

# --------------------------------------------------------------------------- the flow's world


@tool
def find_customer(email: str) -> str:
    """Look up a customer by email."""
    return json.dumps({"customer_id": "C-" + email.split("@")[0], "email": email})


@tool
def list_orders(customer_id: str, limit: int = 5) -> list[dict[str, Any]]:
    """List a customer's orders."""
    return [{"order_id": f"{customer_id}-O{i}"} for i in range(1, limit + 1)]


@tool
def track_shipment(order_id: str, carrier: str = "post") -> str:
    """Track an order's shipment."""
    return f"{order_id} via {carrier}: in transit"


@tool
def charge_card(customer_id: str) -> str:
    """Charge the customer's card (always declined here)."""
    raise ValueError(f"card declined for {customer_id}")


TOOLS = [find_customer, list_orders, track_shipment, charge_card]

STATUS = FlowDefinition(
    name="delivery status",
    description="Where is a customer's latest order?",
    input_schema={
        "type": "object",
        "properties": {
            "email": {"type": "string", "description": "The customer's email address"},
            "limit": {
                "type": "integer",
                "default": 2,
                "minimum": 1,
                "description": "Orders to scan",
            },
            "carrier": {"enum": ["post", "ups"], "description": "Who ships it"},
        },
        "required": ["email"],
    },
    steps=[
        FlowStep(
            id="customer", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}
        ),
        FlowStep(
            id="orders",
            skill_key="list_orders",
            depends_on=["customer"],
            input_map={"customer_id": "{{customer.customer_id}}", "limit": "{{_trigger.limit}}"},
        ),
        FlowStep(
            id="track",
            skill_key="track_shipment",
            depends_on=["orders"],
            input_map={"order_id": "{{orders.0.order_id}}"},
        ),
    ],
)
STATUS_OUT = "C-ann-O1 via post: in transit"

BILLING = FlowDefinition(
    name="billing",
    steps=[
        FlowStep(
            id="customer", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}
        ),
        FlowStep(
            id="charge",
            skill_key="charge_card",
            depends_on=["customer"],
            retry_max=0,
            input_map={"customer_id": "{{customer.customer_id}}"},
        ),
    ],
)

ORDERS = FlowDefinition(
    name="orders as json",
    steps=[
        FlowStep(
            id="customer", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}
        ),
        FlowStep(
            id="orders",
            skill_key="list_orders",
            depends_on=["customer"],
            input_map={"customer_id": "{{customer.customer_id}}", "limit": 2},
        ),
    ],
)


def status_tool() -> StructuredTool:
    return flow_tool(STATUS, tools=TOOLS)


# --------------------------------------------------------------------------- standard tests


class TestFlowToolUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return status_tool()

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"email": "ann@example.com", "limit": 1}


class TestFlowToolIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return status_tool()

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"email": "ann@example.com", "limit": 1}


def _class_params() -> dict[str, Any]:
    """The flow tool's parts, rebuilt through the ``StructuredTool`` class constructor."""
    t = status_tool()
    keys = (
        "name",
        "description",
        "args_schema",
        "func",
        "coroutine",
        "handle_tool_error",
        "metadata",
    )
    return {k: getattr(t, k) for k in keys}


class TestFlowToolClassUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> type[BaseTool]:
        return StructuredTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return _class_params()

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"email": "bo@example.com"}


class TestFlowToolClassIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> type[BaseTool]:
        return StructuredTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return _class_params()

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"email": "bo@example.com"}


# --------------------------------------------------------------------------- the tool itself


def test_name_description_and_schema_come_from_the_flow():
    t = status_tool()
    assert t.name == "soloflow_delivery_status"
    assert t.description.startswith("Where is a customer's latest order?\n")
    assert "Runs deterministic flow 'delivery status': customer → orders → track" in t.description
    spec = convert_to_openai_tool(t)["function"]
    params = spec["parameters"]
    assert spec["name"] == "soloflow_delivery_status"
    assert params["required"] == ["email"]
    assert set(params["properties"]) == {"email", "limit", "carrier"}  # no config, no callbacks
    assert params["properties"]["email"]["description"] == "The customer's email address"
    assert params["properties"]["limit"]["default"] == 2
    assert params["properties"]["limit"]["minimum"] == 1
    assert params["properties"]["carrier"]["anyOf"][0]["enum"] == ["post", "ups"]


def test_tool_names_follow_the_openai_rule():
    long = FlowDefinition(name="ünïcode & spaces/" + "x" * 80, steps=BILLING.steps)
    name = flow_tool_name(long)
    assert name.startswith("soloflow_unicode_spaces_x") and len(name) == 64
    with pytest.raises(ConfigError, match="not a valid tool name"):
        flow_tool(STATUS, tools=TOOLS, name="has space")
    assert flow_tool_name(FlowDefinition(name="!!!", steps=BILLING.steps)) == "soloflow_flow"


def test_schema_without_input_schema_comes_from_trigger_templates():
    flow = FlowDefinition(
        name="derived",
        steps=[
            FlowStep(id="c", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}),
            FlowStep(
                id="t",
                skill_key="track_shipment",
                depends_on=["c"],
                input_map={"order_id": "{{_trigger.order}}", "carrier": "by {{_trigger.schema}}"},
            ),
        ],
    )
    schema = flow_args_schema(flow).model_json_schema()
    assert schema["required"] == ["email", "order", "schema"]
    assert {p["type"] for p in schema["properties"].values()} == {"string"}
    t = flow_tool(flow, tools=TOOLS)
    assert (
        t.invoke({"email": "a@b", "order": "O-9", "schema": "ups"}) == "O-9 via by ups: in transit"
    )


def test_invoke_returns_text_or_compact_json():
    assert status_tool().invoke({"email": "ann@example.com"}) == STATUS_OUT
    out = flow_tool(ORDERS, tools=TOOLS).invoke({"email": "bo@x"})
    assert out == '[{"order_id":"C-bo-O1"},{"order_id":"C-bo-O2"}]'


async def test_ainvoke_matches_invoke():
    assert await status_tool().ainvoke({"email": "ann@example.com", "carrier": "ups"}) == STATUS_OUT


def test_missing_executor_fails_when_the_tool_is_built():
    with pytest.raises(ExecutorNotFoundError, match="charge_card"):
        flow_tool(BILLING, tools=[find_customer])


def test_bad_input_is_a_validation_error_naming_the_field():
    t = status_tool()
    with pytest.raises(ValidationError) as missing:
        t.invoke({"limit": 1})
    assert [e["loc"] for e in missing.value.errors()] == [("email",)]
    assert missing.value.errors()[0]["type"] == "missing"
    with pytest.raises(ValidationError) as wrong:
        t.invoke({"email": "ann@example.com", "limit": "three"})
    assert [e["loc"] for e in wrong.value.errors()] == [("limit",)]
    with pytest.raises(ValidationError) as enum:
        t.invoke({"email": "ann@example.com", "carrier": "dhl"})
    assert enum.value.errors()[0]["loc"] == ("carrier",)


def _names_flow_step_and_error(text: str) -> bool:
    return all(part in text for part in ("'billing'", "step 'charge'", "card declined for C-cy"))


def test_failed_step_is_an_error_tool_message_naming_flow_and_step():
    t = flow_tool(BILLING, tools=TOOLS)
    msg = t.invoke({"type": "tool_call", "id": "call-1", "name": t.name, "args": {"email": "cy@x"}})
    assert isinstance(msg, ToolMessage) and msg.status == "error"
    assert str(msg.content).startswith("flow 'billing'")
    assert _names_flow_step_and_error(str(msg.content))
    assert str(msg.content).count("'billing'") == 1
    with pytest.raises(ToolException) as info:
        t.func(config={}, email="cy@x")  # type: ignore[misc]
    assert _names_flow_step_and_error(str(info.value))


def test_fallback_returns_the_handoff_text_through_the_injected_runner():
    seen: list[dict[str, Any]] = []

    def runner(flow: FlowDefinition, inputs: dict[str, Any]) -> FlowRunResult:
        seen.append(inputs)
        result = run_flow(flow, inputs, tools=TOOLS)
        result.status = "fallback"
        handoff = f"partial: customer {result.results['customer']}; please finish by hand"
        return _WithHandoff(result, handoff)  # type: ignore[return-value]

    t = flow_tool(STATUS, run=runner)
    out = t.invoke({"email": "ann@example.com", "carrier": "ups"})
    assert out.startswith("partial: customer {") and out.endswith("please finish by hand")
    assert seen == [{"email": "ann@example.com", "limit": 2, "carrier": "ups"}]
    t.invoke({"email": "bo@example.com"})
    assert seen[-1] == {"email": "bo@example.com", "limit": 2}  # no carrier=None: it has no default


def test_fallback_without_handoff_text_returns_the_partial_results():
    def runner(flow: FlowDefinition, inputs: dict[str, Any]) -> FlowRunResult:
        result = run_flow(flow, inputs, tools=TOOLS)
        result.status = "fallback"
        return result

    out = flow_tool(ORDERS, run=runner).invoke({"email": "bo@x"})
    assert out.startswith("flow 'orders as json' handed the task back to you; results so far: ")
    assert '"orders":[{"order_id":"C-bo-O1"}' in out


def test_continued_failures_are_listed_after_the_output():
    flow = BILLING.model_copy(
        update={
            "steps": [
                *BILLING.steps[:1],
                BILLING.steps[1].model_copy(update={"on_failure": "continue"}),
            ],
            "output_step": "customer",
        }
    )
    out = flow_tool(flow, tools=TOOLS).invoke({"email": "cy@x"})
    first, note = out.split("\n")
    assert json.loads(first)["customer_id"] == "C-cy"
    assert note.startswith("(flow 'billing' skipped failed steps: charge: ")
    assert "card declined for C-cy" in note


class _WithHandoff:
    """A FlowRunResult plus the ``handoff`` field the runtime is adding."""

    def __init__(self, result: FlowRunResult, handoff: str) -> None:
        self._result, self.handoff = result, handoff

    def __getattr__(self, name: str) -> Any:
        return getattr(self._result, name)


class _Tree(BaseCallbackHandler):
    """Run name and parent run name of every chain and tool start (thread-safe)."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.edges: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()

    def _start(self, name: str, run_id: Any, parent_run_id: Any) -> None:
        with self._lock:
            self.names[run_id] = name
            self.edges.append((name, self.names.get(parent_run_id)))

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self._start(kw.get("name") or "?", run_id, parent_run_id)

    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self._start(serialized.get("name") or "?", run_id, parent_run_id)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_callbacks_nest_the_flow_steps_under_the_tool_run(mode: str):
    t, tree = status_tool(), _Tree()
    args, config = {"email": "ann@example.com"}, {"callbacks": [tree]}
    out = t.invoke(args, config=config) if mode == "sync" else await t.ainvoke(args, config=config)
    assert out == STATUS_OUT
    parent = dict(tree.edges)
    assert parent["soloflow_delivery_status"] is None
    assert parent["flow:delivery_status"] == "soloflow_delivery_status"
    assert [parent[s] for s in ("customer", "orders", "track")] == ["flow:delivery_status"] * 3
    assert (parent["find_customer"], parent["list_orders"], parent["track_shipment"]) == (
        "customer",
        "orders",
        "track",
    )


# --------------------------------------------------------------------------- inside a real agent


def _agent_with(t: BaseTool, *calls: dict[str, Any], checkpointer: Any = None) -> Any:
    replies = [AIMessage(content="", tool_calls=[c]) for c in calls] + [AIMessage(content="done")]
    return create_agent(
        ScriptedChatModel(responses=replies),
        tools=[t],
        system_prompt="s",
        name="support",
        checkpointer=checkpointer,
    )


def _call(t: BaseTool, args: dict[str, Any], call_id: str = "call-1") -> dict[str, Any]:
    return {"name": t.name, "args": args, "id": call_id, "type": "tool_call"}


def _tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_agent_calls_the_flow_once_and_gets_its_output():
    t, tree = status_tool(), _Tree()
    agent = _agent_with(t, _call(t, {"email": "ann@example.com"}))
    state = agent.invoke(
        {"messages": [("user", "where is my order? ann@example.com")]}, config={"callbacks": [tree]}
    )
    (msg,) = _tool_messages(state)
    assert (msg.content, msg.tool_call_id, msg.status) == (STATUS_OUT, "call-1", "success")
    assert state["messages"][-1].content == "done"
    parent = dict(tree.edges)
    assert [n for n, _ in tree.edges].count("soloflow_delivery_status") == 1
    assert parent["flow:delivery_status"] == "soloflow_delivery_status"
    assert parent["track_shipment"] == "track"


async def test_agent_with_a_checkpointer_runs_the_flow_async():
    t = status_tool()
    agent = _agent_with(
        t, _call(t, {"email": "ann@example.com", "limit": 3}), checkpointer=InMemorySaver()
    )
    state = await agent.ainvoke(
        {"messages": [("user", "status?")]}, config={"configurable": {"thread_id": "t-1"}}
    )
    assert [m.content for m in _tool_messages(state)] == [STATUS_OUT]


def test_agent_sees_a_failing_step_as_a_tool_message_and_goes_on():
    t = flow_tool(BILLING, tools=TOOLS)
    agent = _agent_with(t, _call(t, {"email": "cy@example.com"}))
    state = agent.invoke({"messages": [("user", "charge me")]})
    (msg,) = _tool_messages(state)
    assert msg.status == "error"
    assert _names_flow_step_and_error(str(msg.content))
    assert state["messages"][-1].content == "done"


def test_agent_sees_bad_arguments_as_a_tool_message_naming_the_field():
    t = status_tool()
    agent = _agent_with(
        t, _call(t, {"limit": "many"}, "c-bad"), _call(t, {"email": "ann@example.com"}, "c-good")
    )
    state = agent.invoke({"messages": [("user", "status?")]})
    bad, good = _tool_messages(state)
    assert bad.status == "error" and bad.tool_call_id == "c-bad"
    assert "email: Field required" in str(bad.content)
    assert "limit: Input should be a valid integer" in str(bad.content)
    assert good.content == STATUS_OUT


# --------------------------------------------------------------------------- as a subgraph node


class Parent(TypedDict, total=False):
    email: str
    status: str
    log: Annotated[list[str], operator.add]


def _parent(node: Any, checkpointer: Any = None) -> Any:
    g = StateGraph(Parent)
    g.add_node("pre", lambda s: {"log": ["pre"]})
    g.add_node("lookup", node)
    g.add_node("post", lambda s: {"log": ["post:" + s["status"][:8]]})
    g.add_edge(START, "pre")
    g.add_edge("pre", "lookup")
    g.add_edge("lookup", "post")
    g.add_edge("post", END)
    return g.compile(checkpointer=checkpointer)


def _status_node(**kw: Any) -> Any:
    return flow_node(STATUS, tools=TOOLS, inputs={"email": "email"}, output_key="status", **kw)


def test_subgraph_node_writes_only_its_key_so_the_parent_log_is_not_duplicated():
    out = _parent(_status_node()).invoke({"email": "ann@example.com", "log": ["start"]})
    assert out["log"] == ["start", "pre", "post:C-ann-O1"]
    assert out["status"] == STATUS_OUT
    assert set(out) == {"email", "status", "log"}


def test_the_pitfall_this_avoids_is_real():
    """Adding a compiled graph that shares the ``log`` key duplicates the parent's entries."""
    sub = StateGraph(Parent)
    sub.add_node("x", lambda s: {"log": ["x"]})
    sub.add_edge(START, "x")
    sub.add_edge("x", END)
    out = _parent(sub.compile()).invoke({"email": "e", "status": "s", "log": []})
    assert out["log"] == ["pre", "pre", "x", "post:s"]


async def test_subgraph_node_async_and_with_a_mapping_function():
    node = flow_node(
        STATUS,
        tools=TOOLS,
        output_key="status",
        inputs=lambda s: {"email": s["email"].lower(), "limit": 1},
    )
    out = await _parent(node).ainvoke({"email": "ANN@example.com", "log": []})
    assert out["status"] == STATUS_OUT and out["log"] == ["pre", "post:C-ann-O1"]


def test_subgraph_node_with_a_parent_checkpointer_streams_the_flow_namespace():
    graph = _parent(_status_node(), checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "p-1"}}
    events = list(graph.stream({"email": "ann@example.com", "log": []}, cfg, subgraphs=True))
    inner = [(ns, upd) for ns, upd in events if ns]
    steps = [next(iter(u)) for _, u in inner]
    assert [n for n in steps if not n.startswith("__")] == ["customer", "orders", "track"]
    assert {ns[0].split(":")[0] for ns, _ in inner} == {"lookup"}  # lookup:<task id>
    outer = [upd for ns, upd in events if not ns]
    assert outer[1] == {"lookup": {"status": STATUS_OUT}}
    assert graph.get_state(cfg).values["log"] == ["pre", "post:C-ann-O1"]
    assert [name for name, _ in graph.get_subgraphs()] == ["lookup"]


def test_subgraph_node_with_a_sqlite_checkpointer_file(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "ckpt.sqlite", check_same_thread=False)
    try:
        graph = _parent(_status_node(), checkpointer=SqliteSaver(conn))
        cfg = {"configurable": {"thread_id": "p-2"}}
        out = graph.invoke({"email": "ann@example.com", "log": []}, cfg)
        assert out["log"] == ["pre", "post:C-ann-O1"] and out["status"] == STATUS_OUT
        history = list(graph.get_state_history(cfg))
        assert history and history[0].values["status"] == STATUS_OUT
    finally:
        conn.close()


def test_subgraph_node_failure_names_flow_and_step():
    node = flow_node(BILLING, tools=TOOLS, inputs={"email": "email"}, output_key="status")
    with pytest.raises(FlowRunError) as info:
        _parent(node).invoke({"email": "cy@example.com", "log": []})
    assert (info.value.flow, info.value.step) == ("billing", "charge")
    assert _names_flow_step_and_error(str(info.value))
    assert isinstance(info.value.__cause__, ValueError)


def test_subgraph_node_errors_key_gets_continued_failures():
    flow = BILLING.model_copy(
        update={
            "steps": [
                BILLING.steps[0],
                BILLING.steps[1].model_copy(update={"on_failure": "continue"}),
            ]
        }
    )

    class S(TypedDict, total=False):
        email: str
        out: Any
        errs: dict[str, str]

    g = StateGraph(S)
    g.add_node(
        "flow",
        flow_node(
            flow, tools=TOOLS, inputs={"email": "email"}, output_key="out", errors_key="errs"
        ),
    )
    g.add_edge(START, "flow")
    out = g.compile().invoke({"email": "cy@x"})
    assert out["out"] is None
    assert list(out["errs"]) == ["charge"]
    assert "card declined for C-cy" in out["errs"]["charge"]


def test_subgraph_node_checks_its_input_mapping():
    with pytest.raises(ConfigError, match="'mail', which the flow does not take"):
        flow_node(STATUS, tools=TOOLS, inputs={"mail": "email"}, output_key="o")
    with pytest.raises(ConfigError, match="leaves out required input\\(s\\) 'email'"):
        flow_node(STATUS, tools=TOOLS, inputs={"limit": "n"}, output_key="o")
    with pytest.raises(FlowValidationError, match="parent state has no 'email'") as info:
        _parent(_status_node()).invoke({"log": []})
    assert info.value.field == "inputs.email"
