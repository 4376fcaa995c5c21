"""Traces: the spans of a real create_agent run, stored and read back on both stores, costs
from genai-prices, the tree with its roll-ups and critical path, the OTLP JSON form."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from soloflow_core import hookimpl
from soloflow_core.models import ModelPrice, TaskRun
from soloflow_core.store import Store
from soloflow_core.tracing import Span, build_tree, otlp_json, tree_json
from soloflow_core.tracing.pricing import PriceTable
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

MODEL = "gpt-4o"


@tool
def find_customer(email: str) -> str:
    """Look up a customer by email."""
    return "C-1"


@tool
def track_shipment(order_id: str) -> str:
    """Track an order's shipment."""
    return f"{order_id}: in transit"


def _reply(
    content: str,
    calls: list[tuple[str, dict[str, Any], str]],
    inp: int,
    out: int,
    model: str = MODEL,
) -> AIMessage:
    return AIMessage(
        content=content,
        tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls],
        usage_metadata={"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out},
        response_metadata={"model_name": model},
    )


def _run_agent(
    store: Store, *, model: str = MODEL, email: str = "a@x", **handler_kw: Any
) -> SoloFlowCallbackHandler:
    replies = [
        _reply("", [("find_customer", {"email": email}, "c1")], 1200, 40, model),
        _reply(
            "",
            [
                ("track_shipment", {"order_id": "O-1"}, "c2"),
                ("track_shipment", {"order_id": "O-2"}, "c3"),
            ],
            1500,
            60,
            model,
        ),
        _reply("Both in transit.", [], 1800, 25, model),
    ]
    agent = create_agent(
        ScriptedChatModel(responses=replies, model_name="scripted-request"),
        tools=[find_customer, track_shipment],
        name="support_agent",
    )
    handler = SoloFlowCallbackHandler(store=store, **handler_kw)
    agent.invoke(
        {"messages": [("user", f"Where are my orders? I am {email}")]},
        config={"callbacks": [handler]},
    )
    return handler


def _price(inp: int, out: int, model: str = MODEL) -> Decimal:
    return Decimal(
        calc_price(Usage(input_tokens=inp, output_tokens=out), model_ref=model).total_price
    )


def test_agent_run_trace_is_stored_node_by_node(store: Store) -> None:
    handler = _run_agent(store)
    run = handler.last_run
    assert run is not None
    spans = store.get_spans(run.run_id, user_id="default", agent_id="default")
    assert [s.kind for s in spans] == [
        "invoke_agent",
        "chat",
        "execute_tool",
        "chat",
        "execute_tool",
        "execute_tool",
        "chat",
    ]
    root = spans[0]
    assert root.parent is None and root.name == "invoke_agent support_agent"
    assert root.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support_agent",
    }
    assert root.trace_id == run.run_id.replace("-", "")
    assert all(s.parent == root.id and s.trace_id == root.trace_id for s in spans[1:])
    assert len({s.id for s in spans}) == 7 and all(
        s.status == "ok" and s.error is None for s in spans
    )
    chats = [s for s in spans if s.kind == "chat"]
    for chat, (inp, out) in zip(chats, [(1200, 40), (1500, 60), (1800, 25)], strict=True):
        assert chat.name == "chat scripted-request"
        assert chat.attributes["gen_ai.request.model"] == "scripted-request"
        assert chat.attributes["gen_ai.response.model"] == MODEL
        assert chat.attributes["gen_ai.usage.input_tokens"] == inp
        assert chat.attributes["gen_ai.usage.output_tokens"] == out
        assert Decimal(str(chat.attributes["soloflow.cost_usd"])) == _price(inp, out)
    tools = [s for s in spans if s.kind == "execute_tool"]
    # the two track_shipment calls run in parallel: their spans start in either order
    assert sorted(
        (t.attributes["gen_ai.tool.name"], t.attributes["gen_ai.tool.call.id"]) for t in tools
    ) == [("find_customer", "c1"), ("track_shipment", "c2"), ("track_shipment", "c3")]
    # Wall-clock starts in order, every span inside its root's time.
    assert all(s.duration_ms is not None and s.duration_ms >= 0 for s in spans)
    assert root.end is not None and all(
        root.start <= s.start and s.end <= root.end for s in spans[1:]
    )
    # The run's cost: the sum of its calls' costs (all priced).
    expected = _price(1200, 40) + _price(1500, 60) + _price(1800, 25)
    assert run.cost == pytest.approx(float(expected))
    assert store.get_run(run.run_id, user_id="default", agent_id="default").cost == pytest.approx(
        float(expected)
    )
    # The tree: roll-ups on the root, the critical path through its last child.
    (node,) = build_tree(spans)
    assert (node.input_tokens, node.output_tokens) == (4500, 125)
    assert node.cost == pytest.approx(expected) and node.unpriced == 0 and node.critical
    # Sequential turns are all on it; of the two parallel tool calls, the one that ended last.
    crit = [c.span.kind for c in node.children if c.critical]
    assert (
        node.children[-1].critical
        and crit[:3] == ["chat", "execute_tool", "chat"]
        and len(crit) >= 5
    )
    handler.close()


def test_spans_read_back_exactly(store: Store) -> None:
    start = datetime(2026, 11, 27, 13, 1, 2, 345678, tzinfo=UTC)
    spans = [
        Span(
            trace_id="ab" * 16,
            id="0123456789abcdef",
            parent=None,
            name="invoke_flow f",
            kind="invoke_flow",
            start=start,
            duration_ms=12.345678901,
            status="error",
            error="ValueError: boom",
            attributes={
                "soloflow.flow.name": "f",
                "soloflow.flow.version": 3,
                "x": 0.1 + 0.2,
                "ok": True,
            },
        ),
        Span(
            trace_id="ab" * 16,
            id="fedcba9876543210",
            parent="0123456789abcdef",
            name="step s",
            kind="step",
            start=start,
            duration_ms=None,
            status="unset",
        ),
    ]
    assert store.add_spans("run-1", spans, user_id="u", agent_id="a") == 2
    assert store.add_spans("run-1", spans, user_id="u", agent_id="a") == 0  # kept already
    assert store.get_spans("run-1", user_id="u", agent_id="a") == spans
    assert store.get_spans("run-1", user_id="u", agent_id="other") == []


def test_unknown_model_is_unpriced_not_zero(store: Store) -> None:
    handler = _run_agent(store, model="no-such-model-anywhere")
    run = handler.last_run
    assert run is not None and run.cost is None
    spans = store.get_spans(run.run_id, user_id="default", agent_id="default")
    chats = [s for s in spans if s.kind == "chat"]
    assert all(
        c.attributes["soloflow.unpriced"] is True and "soloflow.cost_usd" not in c.attributes
        for c in chats
    )
    (node,) = build_tree(spans)
    assert node.unpriced == 3 and node.cost_text == "unpriced"
    assert tree_json([node])[0]["cost_usd"] is None
    handler.close()


def test_user_prices_override_the_table(store: Store) -> None:
    own = {MODEL: ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}
    handler = _run_agent(store, prices=own)
    run = handler.last_run
    assert run is not None
    assert run.cost == pytest.approx((4500 * 1.0 + 125 * 2.0) / 1e6)
    assert PriceTable(own).price(MODEL, input_tokens=1_000_000, output_tokens=0) == Decimal(1)
    handler.close()


def test_otlp_json_form(store: Store) -> None:
    handler = _run_agent(store)
    assert handler.last_run is not None
    spans = store.get_spans(handler.last_run.run_id, user_id="default", agent_id="default")
    doc = json.loads(json.dumps(otlp_json(spans)))
    out = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["spanId"] for s in out] == [s.id for s in spans]
    assert out[0]["parentSpanId"] == "" and all(s["parentSpanId"] == spans[0].id for s in out[1:])
    chat = out[1]
    assert chat["kind"] == 3 and chat["status"] == {"code": 1}
    attrs = {a["key"]: a["value"] for a in chat["attributes"]}
    assert attrs["gen_ai.usage.input_tokens"] == {"intValue": "1200"}
    assert attrs["gen_ai.operation.name"] == {"stringValue": "chat"}
    assert int(chat["endTimeUnixNano"]) >= int(chat["startTimeUnixNano"])
    handler.close()


def test_soloflow_span_finished(store: Store, pm: Any) -> None:
    seen: list[tuple[str, str]] = []

    class Exporter:
        @hookimpl
        def soloflow_span_finished(self, span: Span) -> None:
            assert span.duration_ms is not None
            seen.append((span.kind, span.status))

    pm.register(Exporter())
    _run_agent(store, plugin_manager=pm).close()
    # Children end before their parent: the agent's span is the last to finish.
    assert seen[-1] == ("invoke_agent", "ok")
    assert sorted(k for k, _ in seen) == sorted(
        ["invoke_agent"] + ["chat"] * 3 + ["execute_tool"] * 3
    )


def test_cost_rolls_up_per_namespace(store: Store) -> None:
    _run_agent(store, user_id="ns-cost", agent_id="a").close()
    _run_agent(store, user_id="ns-cost", agent_id="a").close()
    _run_agent(store, user_id="ns-cost", agent_id="a", model="no-such-model-anywhere").close()
    one = _price(1200, 40) + _price(1500, 60) + _price(1800, 25)
    cost = store.namespace_cost(user_id="ns-cost", agent_id="a")
    assert (cost.priced_runs, cost.unpriced_runs) == (2, 1)
    assert cost.total_usd == pytest.approx(float(2 * one))
    assert store.namespace_cost(user_id="ns-cost", agent_id="b").priced_runs == 0


def test_a_runs_trace_is_stored_in_the_namespace_its_metadata_names(store: Store) -> None:
    replies = [
        _reply("", [("find_customer", {"email": "a@x"}, "c1")], 10, 2),
        _reply("Found.", [], 10, 2),
    ]
    agent = create_agent(
        ScriptedChatModel(responses=replies, model_name="scripted-request"),
        tools=[find_customer],
        name="support_agent",
    )
    handler = SoloFlowCallbackHandler(store=store)
    agent.invoke(
        {"messages": [("user", "Who is a@x?")]},
        config={"callbacks": [handler], "metadata": {"soloflow_user_id": "alice"}},
    )
    run = handler.last_run
    assert run is not None and run.user_id == "alice"
    spans = store.get_spans(run.run_id, user_id="alice", agent_id="default")
    assert [s.kind for s in spans][:2] == ["invoke_agent", "chat"]
    # the handler's own namespace holds nothing of it
    assert store.get_spans(run.run_id, user_id="default", agent_id="default") == []


def _two_spans(error: str | None = "ValueError: boom") -> list[Span]:
    start = datetime(2026, 11, 27, 13, 1, 2, 345678, tzinfo=UTC)
    root = Span(
        trace_id="cd" * 16,
        id="1111111111111111",
        parent=None,
        name="invoke_agent a",
        kind="invoke_agent",
        start=start,
        duration_ms=3.5,
        status="error" if error else "ok",
        error=error,
        attributes={"gen_ai.operation.name": "invoke_agent", "soloflow.cost": 0.25},
    )
    tool_span = Span(
        trace_id="cd" * 16,
        id="2222222222222222",
        parent=root.id,
        name="execute_tool t",
        kind="execute_tool",
        start=start,
        duration_ms=1.25,
        status="ok",
        attributes={"gen_ai.tool.name": "t"},
    )
    return [root, tool_span]


def test_a_run_and_its_trace_are_stored_in_one_call(store: Store) -> None:
    run = TaskRun(run_id="r-traced", user_id="u", agent_id="a", task="t", tool_calls=[])
    spans = _two_spans()
    assert store.add_traced_run(run, spans) is True
    assert store.get_run("r-traced", user_id="u", agent_id="a").task == "t"
    assert store.get_spans("r-traced", user_id="u", agent_id="a") == spans
    # The run is kept already: not written twice, and only the new span of its trace is added.
    more = _two_spans()
    more[1].id = "3333333333333333"
    assert store.add_traced_run(run, more) is False
    assert store.count_runs(user_id="u", agent_id="a") == 1
    assert [s.id for s in store.get_spans("r-traced", user_id="u", agent_id="a")] == [
        "1111111111111111",
        "2222222222222222",
        "3333333333333333",
    ]


def test_a_trace_with_text_no_database_stores_is_stored_made_storable(store: Store) -> None:
    run = TaskRun(run_id="r-nul", user_id="u", agent_id="a")
    assert store.add_traced_run(run, _two_spans(error="bad\x00 \udcff")) is True
    (root, _tool) = store.get_spans("r-nul", user_id="u", agent_id="a")
    assert root.error == "bad \\udcff"


def test_a_trace_the_database_cannot_take_never_costs_the_run(store: Store) -> None:
    """A span value no database column takes (an integer past 64 bits) is refused with the
    trace, on both stores alike; the run is stored all the same."""
    run = TaskRun(run_id="r-huge", user_id="u", agent_id="a", task="t")
    spans = _two_spans()
    spans[1].duration_ms = 10**20  # type: ignore[assignment]
    assert store.add_traced_run(run, spans) is True
    assert store.get_run("r-huge", user_id="u", agent_id="a").task == "t"
    assert store.count_runs(user_id="u", agent_id="a") == 1


@settings(max_examples=400, deadline=None)
@given(
    model=st.sampled_from(
        ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "deepseek-chat", "o3", "gemini-2.5-pro"]
        + ["claude-sonnet-4-5", "mine", "no-such-model-anywhere", ""]
    ),
    input_tokens=st.one_of(st.integers(0, 10**7), st.integers(0, 10**30)),
    output_tokens=st.one_of(st.integers(0, 10**5), st.integers(0, 10**28)),
)
def test_a_calls_cost_is_the_float_of_its_price(
    model: str, input_tokens: int, output_tokens: int
) -> None:
    """``cost`` (flat prices in integers) is ``float(price(...))`` to the last bit, for flat and
    tiered table prices, a user's own, an unknown model and token counts past 27 digits."""
    table = PriceTable({"mine": ModelPrice(input_per_mtok=1.1, output_per_mtok=3.3)})
    tokens = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    price = table.price(model, **tokens)
    cost = table.cost(model, **tokens)
    assert (cost is None) == (price is None)
    if price is not None:
        assert cost is not None and cost.hex() == float(price).hex()


@pytest.mark.parametrize("model", [MODEL, "claude-sonnet-4-5", "my-own-model"])
def test_a_negative_count_is_refused_alike_for_flat_tiered_and_own_prices(model: str) -> None:
    table = PriceTable({"my-own-model": ModelPrice(input_per_mtok=1, output_per_mtok=2)})
    for price in (table.price, table.cost):
        with pytest.raises(ValueError, match="token counts must be 0 or more"):
            price(model, input_tokens=-5, output_tokens=3)
    assert table.cost(None, input_tokens=-5, output_tokens=3) is None  # no model: unpriced
