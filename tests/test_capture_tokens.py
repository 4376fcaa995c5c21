"""A model's odd token figures never cost a run its record or its trace: a negative, fractional,
textual, non-finite or over-large count (a buggy provider, a proxy, a hand-made ``AIMessage``)
is read as a count the ledger holds, on both stores, and a token budget cannot be lowered by
a negative one."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from soloflow_core.ledger import MAX_TOKENS, token_usage
from soloflow_core.store import Store
from soloflow_core.tracing.pricing import PriceTable
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.sequential.budget import UsageMeter
from soloflow_langgraph.testing import ScriptedChatModel

NS = {"user_id": "default", "agent_id": "default"}
TIERED = "claude-sonnet-4-5"
"""A model genai-prices prices in tiers: its price object refuses a negative count."""


@tool
def find_customer(email: str) -> str:
    """Look up a customer by email."""
    return "C-1"


def _reply(content: str, usage: dict[str, Any], *, call: bool) -> AIMessage:
    """A reply carrying ``usage`` as is: set after the message is made, past its own checks,
    as a provider's integration or a proxy may leave it."""
    calls = [{"name": "find_customer", "args": {"email": "a@x"}, "id": "c1", "type": "tool_call"}]
    message = AIMessage(
        content=content,
        tool_calls=calls if call else [],
        usage_metadata={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        response_metadata={"model_name": TIERED},
    )
    message.usage_metadata = usage  # type: ignore[assignment]
    return message


def _run(store: Store, first: dict[str, Any], second: dict[str, Any], task: str) -> Any:
    agent = create_agent(
        ScriptedChatModel(
            responses=[_reply("", first, call=True), _reply("done", second, call=False)]
        ),
        tools=[find_customer],
    )
    handler = SoloFlowCallbackHandler(store=store)
    out = agent.invoke({"messages": [("user", task)]}, config={"callbacks": [handler]})
    assert out["messages"][-1].content == "done"  # the agent is never touched
    run = handler.last_run
    assert run is not None and not handler.unsaved
    return store.get_run(run.run_id, **NS)


@pytest.mark.parametrize(
    ("odd", "read_as"),
    [
        (-5, 0),
        (float("nan"), 0),
        (float("inf"), 0),
        (12.5, 0),
        ("12", 0),
        (True, 0),
        (10**30, MAX_TOKENS),
        (2**63, MAX_TOKENS),
        (7.0, 7),
    ],
)
def test_an_odd_token_count_keeps_the_run_and_its_trace(
    db_url: str, odd: Any, read_as: int, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store.open(db_url)
    try:
        with caplog.at_level(logging.WARNING):
            run = _run(
                store,
                {"input_tokens": odd, "output_tokens": 40},
                {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
                task=f"find a@x ({odd!r})",
            )
        assert run is not None, "the run was lost"
        assert [m.input_tokens for m in run.model_calls] == [read_as, 10]
        assert run.model_calls[0].total_tokens == min(read_as + 40, MAX_TOKENS)
        assert run.tokens == min(read_as + 40 + 13, MAX_TOKENS)
        spans = store.get_spans(run.run_id, **NS)
        chats = [s for s in spans if s.kind == "chat"]
        assert [c.attributes["gen_ai.usage.input_tokens"] for c in chats] == [read_as, 10]
        table = PriceTable()
        expected = sum(
            table.cost(TIERED, input_tokens=i, output_tokens=o) or 0.0
            for i, o in [(read_as, 40), (10, 3)]
        )
        assert run.cost == pytest.approx(expected)
    finally:
        store.close()


def test_an_odd_count_is_said_once_per_field(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="soloflow_core.ledger"):
        for _ in range(3):
            token_usage({"output_tokens": -1, "total_tokens": float("nan")})
    said = [r.getMessage() for r in caplog.records]
    # once per field and fault in the process: an earlier test may have said it already
    assert len(said) <= 2 and all("not a whole token count" in m for m in said)


def test_a_run_of_counts_at_the_limit_is_held_to_the_limit(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        at_limit = {"input_tokens": MAX_TOKENS, "output_tokens": MAX_TOKENS}
        run = _run(store, dict(at_limit), dict(at_limit), task="find a@x, twice over the limit")
        assert run is not None, "the run was lost"
        assert [m.total_tokens for m in run.model_calls] == [MAX_TOKENS, MAX_TOKENS]
        assert run.tokens == MAX_TOKENS
    finally:
        store.close()


def test_a_trace_that_fails_keeps_the_run(db_url: str) -> None:
    class BrokenPrices(PriceTable):
        def cost(self, model: str | None, *, input_tokens: int, output_tokens: int) -> None:
            raise RuntimeError("price table broken")

    store = Store.open(db_url)
    try:
        agent = create_agent(
            ScriptedChatModel(
                responses=[
                    _reply("", {"input_tokens": 5, "output_tokens": 1}, call=True),
                    _reply("done", {"input_tokens": 5, "output_tokens": 1}, call=False),
                ]
            ),
            tools=[find_customer],
        )
        handler = SoloFlowCallbackHandler(store=store)
        handler.prices = BrokenPrices()  # the table every run's trace is priced with
        agent.invoke({"messages": [("user", "find a@x")]}, config={"callbacks": [handler]})
        assert handler.last_run is not None
        run = store.get_run(handler.last_run.run_id, **NS)
        assert run is not None and run.tool_calls[0].name == "find_customer"
    finally:
        store.close()


def test_a_negative_count_never_lowers_a_token_budget() -> None:
    meter = UsageMeter()
    meter.add_returned_message(
        AIMessage(
            content="a",
            id="m1",
            usage_metadata={"input_tokens": 100, "output_tokens": 5, "total_tokens": 105},
        )
    )
    meter.add_returned_message(
        AIMessage(
            content="b",
            id="m2",
            usage_metadata={"input_tokens": -(10**6), "output_tokens": 5, "total_tokens": 5},
        )
    )
    used = meter.usage()
    assert (used.input_tokens, used.output_tokens) == (100, 10)


def test_usage_that_is_no_mapping_is_no_usage() -> None:
    assert token_usage(None) is None
    assert token_usage([1, 2]) is None
    assert token_usage(
        {"input_tokens": 3, "output_tokens": 4, "input_token_details": {"cache_read": 1}}
    ) == {
        "input_tokens": 3,
        "output_tokens": 4,
        "total_tokens": 7,
        "input_token_details": {"cache_read": 1},
    }
