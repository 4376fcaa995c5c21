"""The one reading of a tool's side-effect flags and of a message's text, and that capture,
compilation and routing all use it (the same answer for the same metadata)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool

from soloflow_core.flow.effects import side_effects_of
from soloflow_core.generalize.dataflow import side_effects_from_calls
from soloflow_core.models import ToolCall
from soloflow_langgraph._messages import content_text, message_text
from soloflow_langgraph.compile.step_call import inspect_executor
from soloflow_langgraph.routing.middleware import task_of

CASES: list[tuple[Any, bool | None]] = [
    ({"side_effects": False}, False),
    ({"side_effects": True}, True),
    ({"read_only": True}, False),
    ({"read_only": False}, True),
    ({"side_effects": True, "read_only": True}, True),  # side_effects is the one read first
    ({"side_effects": "no", "read_only": True}, False),  # only booleans count
    ({"read_only": 1}, None),
    ({}, None),
    (None, None),
    ("read_only", None),
]


@pytest.mark.parametrize(("meta", "expected"), CASES)
def test_side_effects_of_reads_the_flags_in_one_order(meta: Any, expected: bool | None) -> None:
    assert side_effects_of(meta) is expected


@pytest.mark.parametrize(("meta", "expected"), [c for c in CASES if isinstance(c[0], dict)])
def test_compilation_generalisation_and_routing_agree(
    meta: dict[str, Any], expected: bool | None
) -> None:
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return order_id

    tool = StructuredTool.from_function(lookup, metadata=meta)
    info = inspect_executor(tool)
    assert info.read_only is (None if expected is None else not expected)
    recorded = side_effects_from_calls([ToolCall(name="lookup", args={}, meta=meta)])
    assert recorded.get("lookup") is expected


def test_the_middleware_reads_tool_metadata_the_same_way() -> None:
    from soloflow_core.flow.effects import tool_side_effects

    tools = [
        StructuredTool.from_function(lambda: "", name=f"t{i}", description="t", metadata=meta)
        for i, (meta, _) in enumerate(CASES)
        if isinstance(meta, dict)
    ]
    expected = {
        f"t{i}": e for i, (meta, e) in enumerate(CASES) if isinstance(meta, dict) and e is not None
    }
    assert tool_side_effects(tools) == expected


def test_message_text_keeps_text_blocks_only() -> None:
    blocks = [
        "Hello, ",
        {"type": "text", "text": "Ann"},
        {"type": "image_url", "image_url": "x"},
        {"type": "reasoning", "text": "hidden"},
    ]
    assert content_text(blocks) == "Hello, Ann"
    assert content_text("plain") == "plain"
    assert content_text(None) == content_text(3) == ""
    assert message_text(AIMessage(content=blocks)) == "Hello, Ann"
    assert task_of(
        [AIMessage(content="hi"), HumanMessage(content=blocks), HumanMessage(content="more")]
    ) == ("Hello, Ann", 2)
