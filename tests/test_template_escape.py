"""Literal ``{{`` in templates: recorded constants are stored escaped and replay as text,
flow files write a literal ``{{`` as ``{{'{{'}}``, and parsing is linear in the input."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.tools import tool

from soloflow_core.flow.templates import TemplateError, escape_literal, iter_references, render
from soloflow_core.flow.validate import validate_flow
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.propose import propose
from soloflow_core.learning.promotion import submit_flow
from soloflow_core.store import Store
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

SENT: list[str] = []


@tool
def fetch(q: str) -> str:
    """Fetch a record."""
    return '{"v": "FROM STEP ONE"}'


@tool
def echo(x: str) -> str:
    """Echo text."""
    SENT.append(x)
    return x


_PIECES = st.sampled_from([*"{}'\\ ab.", "{{", "}}", "{{'{{'}}", "{{step_1.v}}"])
_TEXT = st.lists(_PIECES, max_size=20).map("".join)


@given(_TEXT)
def test_an_escaped_literal_renders_to_itself_and_holds_no_reference(text: str) -> None:
    escaped = escape_literal(text)
    assert render(escaped, inputs={}, results={"step_1": {"v": 1}}) == text
    assert list(iter_references(escaped)) == []


def test_the_escape_in_flow_text() -> None:
    assert render("Dear {{'{{'}}name}}", inputs={}, results={}) == "Dear {{name}}"
    assert render("{{'{{'}}x}} is {{_trigger.x}}", inputs={"x": 3}, results={}) == "{{x}} is 3"
    assert render({"a": ["{{'{{'}}"]}, inputs={}, results={}) == {"a": ["{{"]}
    # A lone reference still keeps its type; a quoted literal beside it makes it text.
    assert render("{{_trigger.x}}", inputs={"x": [1]}, results={}) == [1]
    assert render("{{'['}}{{_trigger.x}}", inputs={"x": 1}, results={}) == "[1"


def test_a_recorded_literal_with_braces_replays_as_a_literal(sqlite_store: Store) -> None:
    occs = [
        Occurrence(
            task=f"send it {n}",
            args=[{"q": f"q{n}"}, {"x": "literal {{step_1.v}}"}],
            outputs=['{"v": "FROM STEP ONE"}', "literal {{step_1.v}}"],
        )
        for n in (1, 2, 3)
    ]
    flow = propose(["fetch", "echo"], occs, observed=3).flow
    validate_flow(flow)
    assert flow.steps[1].input_map["x"] == "literal {{'{{'}}step_1.v}}"
    submit_flow(sqlite_store, flow, user_id="u", agent_id="a")
    SENT.clear()
    with FlowRuntime(sqlite_store, tools=[fetch, echo], user_id="u", agent_id="a") as runtime:
        result = runtime.run(flow.name, {"q": "q9"})
    assert result.status == "completed", result.error
    assert SENT == ["literal {{step_1.v}}"]


def test_a_recorded_dear_name_keeps_the_candidate_valid() -> None:
    occs = [
        Occurrence(task=f"greet {n}", args=[{"q": n}, {"x": "Dear {{name}}"}], outputs=["ok", "ok"])
        for n in ("a", "b", "c")
    ]
    flow = propose(["fetch", "echo"], occs, observed=3).flow
    validate_flow(flow)  # "{{name}}" names no step: unescaped it would be refused
    assert render(flow.steps[1].input_map["x"], inputs={}, results={}) == "Dear {{name}}"


@pytest.mark.parametrize(
    "text",
    ["{{" * 16_384, "{{a" * 10_000, "{{'" * 10_000, ("{{_trigger.x}}" + "}" * 3) * 2_000],
    ids=["open-braces", "unclosed-refs", "quotes", "many-refs"],
)
def test_parsing_is_linear(text: str) -> None:
    start = time.perf_counter()
    problems = [p for _, p in iter_references(text) if isinstance(p, TemplateError)]
    try:
        render(text, inputs={"x": 1}, results={})
    except TemplateError as exc:
        assert len(str(exc)) < 400  # the error quotes the start of the text, not 32 KB
    took = time.perf_counter() - start
    assert took < 0.5, f"{took:.2f} s for {len(text)} characters"  # quadratic took ~7 s
    assert ("{{" * 16_384 != text) or problems
