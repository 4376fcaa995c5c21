"""compile_flow: templates, dependency order, retries, failure modes, validation errors."""

from __future__ import annotations

import json
import threading
import time

import pytest
from langchain_core.tools import tool

from soloflow_core.errors import ExecutorNotFoundError, FlowRunError, FlowValidationError
from soloflow_core.models import Compensation, FlowDefinition, FlowStep
from soloflow_langgraph.compile.graph import compile_flow, flow_mermaid
from soloflow_langgraph.runtime.inputs import check_inputs
from soloflow_langgraph.runtime.runner import run_flow


@tool
def find_user(email: str) -> str:
    """Find a user by email."""
    return json.dumps({"user": {"id": "U-" + email.split("@")[0], "tags": ["a", "b"]}})


@tool
def list_items(user_id: str, limit: int = 10) -> list:
    """List a user's items."""
    return [{"item_id": f"{user_id}-{i}"} for i in range(limit)]


def describe(item_id: str, prefix: str) -> str:
    return f"{prefix}:{item_id}"


def summary(first: str, tag: str, email: str) -> dict:
    return {"first": first, "tag": tag, "email": email}


FOUR_STEPS = FlowDefinition(
    name="four",
    input_schema={
        "type": "object",
        "properties": {"email": {"type": "string"}},
        "required": ["email"],
    },
    steps=[
        FlowStep(id="u", skill_key="find_user", input_map={"email": "{{_trigger.email}}"}),
        FlowStep(
            id="items",
            skill_key="list_items",
            depends_on=["u"],
            input_map={"user_id": "{{u.user.id}}", "limit": 2},
        ),
        FlowStep(
            id="d",
            skill_key="describe",
            depends_on=["items"],
            input_map={"item_id": "{{items.1.item_id}}", "prefix": "item"},
        ),
        FlowStep(
            id="s",
            skill_key="summary",
            depends_on=["d", "u"],
            input_map={
                "first": "{{d}}",
                "tag": "{{u.user.tags.0}}",
                "email": "mail to {{_trigger.email}}",
            },
        ),
    ],
)
TOOLS = [find_user, list_items, describe, summary]


def test_four_step_flow_with_templates_runs_in_order():
    result = run_flow(FOUR_STEPS, {"email": "ann@x.org"}, tools=TOOLS)
    assert result.status == "completed"
    assert result.results["items"] == [{"item_id": "U-ann-0"}, {"item_id": "U-ann-1"}]
    assert result.output == {"first": "item:U-ann-1", "tag": "a", "email": "mail to ann@x.org"}
    assert [c.name for c in result.steps] == ["find_user", "list_items", "describe", "summary"]


def test_compiled_graph_is_a_langgraph_runnable():
    graph = compile_flow(FOUR_STEPS, tools=TOOLS)
    state = graph.invoke({"inputs": {"email": "bo@y.com"}})
    assert state["results"]["d"] == "item:U-bo-1"
    assert set(graph.get_graph().nodes) >= {"u", "items", "d", "s"}


def test_a_flows_state_has_only_the_channels_it_writes():
    """A plain flow's graph carries six channels; a map step, an approval gate and a
    compensation each bring their own. Fewer channels, same results."""
    plain = compile_flow(FOUR_STEPS, tools=TOOLS)
    base = {"inputs", "results", "errors", "skipped", "failed_skip", "halt"}
    assert set(plain.builder.channels) == set(plain.stream_channels) == base
    mapped = FOUR_STEPS.model_copy(
        update={
            "steps": [
                *FOUR_STEPS.steps[:1],
                FlowStep(
                    id="each",
                    skill_key="describe",
                    depends_on=["u"],
                    map_over="{{u.user.tags}}",
                    input_map={"item_id": "{{_item}}", "prefix": "t"},
                ),
            ]
        }
    )
    gated = FOUR_STEPS.model_copy(update={"requires_approval": True})
    undone = FOUR_STEPS.model_copy(
        update={
            "steps": [
                FOUR_STEPS.steps[0].model_copy(
                    update={
                        "compensation": Compensation(
                            skill_key="describe", input_map={"item_id": "x", "prefix": "y"}
                        )
                    }
                ),
                *FOUR_STEPS.steps[1:],
            ]
        }
    )
    for flow, extra in (
        (mapped, {"map_parts", "map_item", "map_index"}),
        (gated, {"approval"}),
        (undone, {"compensation_errors"}),
    ):
        graph = compile_flow(flow, tools=TOOLS)
        assert set(graph.builder.channels) == base | extra, flow
    assert (
        plain.invoke({"inputs": {"email": "ann@x.org"}})["results"]["s"]
        == run_flow(FOUR_STEPS, {"email": "ann@x.org"}, tools=TOOLS).output
    )
    assert compile_flow(mapped, tools=TOOLS).invoke({"inputs": {"email": "ann@x.org"}})["results"][
        "each"
    ] == ["t:a", "t:b"]


def test_cycle_is_named():
    flow = FlowDefinition(
        name="loop",
        steps=[
            FlowStep(id="a", skill_key="describe", depends_on=["c"]),
            FlowStep(id="b", skill_key="describe", depends_on=["a"]),
            FlowStep(id="c", skill_key="describe", depends_on=["b"]),
        ],
    )
    with pytest.raises(FlowValidationError) as info:
        compile_flow(flow, tools=TOOLS)
    assert "dependency cycle: a → b → c → a" in str(info.value)
    assert "flow 'loop'" in str(info.value)


def test_unknown_step_reference_names_the_step_and_field():
    flow = FlowDefinition(
        name="bad-ref",
        steps=[
            FlowStep(id="a", skill_key="describe", input_map={"item_id": "x", "prefix": "p"}),
            FlowStep(
                id="b",
                skill_key="describe",
                depends_on=["a"],
                input_map={"item_id": "{{nope.id}}", "prefix": "p"},
            ),
        ],
    )
    with pytest.raises(FlowValidationError) as info:
        compile_flow(flow, tools=TOOLS)
    err = info.value
    assert err.step == "b" and err.field == "input_map.item_id"
    assert "unknown step 'nope'" in str(err)


def test_reference_to_a_step_that_is_not_upstream():
    flow = FlowDefinition(
        name="not-upstream",
        steps=[
            FlowStep(id="a", skill_key="describe"),
            FlowStep(id="b", skill_key="describe", input_map={"item_id": "{{a}}"}),
        ],
    )
    with pytest.raises(FlowValidationError, match="add 'a' to depends_on"):
        compile_flow(flow, tools=TOOLS)


def test_unknown_input_when_schema_declared():
    flow = FOUR_STEPS.model_copy(
        update={"input_schema": {"type": "object", "properties": {"mail": {}}}}
    )
    with pytest.raises(FlowValidationError, match="unknown flow input 'email'"):
        compile_flow(flow, tools=TOOLS)


def test_unknown_skill_key_names_the_step():
    flow = FlowDefinition(name="nosuch", steps=[FlowStep(id="only", skill_key="teleport")])
    with pytest.raises(ExecutorNotFoundError) as info:
        compile_flow(flow, tools=TOOLS)
    assert info.value.step == "only" and "teleport" in str(info.value)


def test_retry_of_any_exception_with_backoff():
    attempts: list[float] = []

    def flaky(x: int) -> int:
        attempts.append(time.perf_counter())
        if len(attempts) < 3:
            raise ValueError("transient")  # not retried by LangGraph's default policy
        return x * 2

    flow = FlowDefinition(
        name="retry",
        steps=[
            FlowStep(
                id="f", skill_key="flaky", retry_max=2, retry_backoff=0.05, input_map={"x": 21}
            )
        ],
    )
    result = run_flow(flow, {}, tools=[flaky])
    assert result.output == 42 and len(attempts) == 3
    assert attempts[2] - attempts[1] >= 0.09  # backoff doubled: 0.05 then 0.1


def test_failure_stops_the_run_and_names_the_step():
    def boom() -> None:
        raise RuntimeError("disk full")

    flow = FlowDefinition(
        name="stop",
        steps=[
            FlowStep(id="a", skill_key="boom", retry_max=0),
            FlowStep(
                id="b",
                skill_key="describe",
                depends_on=["a"],
                input_map={"item_id": "1", "prefix": "p"},
            ),
        ],
    )
    result = run_flow(flow, {}, tools=[boom, describe])
    assert result.status == "failed" and "disk full" in result.errors["a"]
    with pytest.raises(FlowRunError) as info:
        run_flow(flow, {}, tools=[boom, describe], raise_on_failure=True)
    assert info.value.step == "a"


def test_on_failure_continue_records_the_error_and_goes_on():
    def boom() -> None:
        raise RuntimeError("nope")

    flow = FlowDefinition(
        name="cont",
        steps=[
            FlowStep(
                id="a", skill_key="boom", retry_max=1, retry_backoff=0.01, on_failure="continue"
            ),
            FlowStep(
                id="b",
                skill_key="describe",
                depends_on=["a"],
                input_map={"item_id": "1", "prefix": "p"},
            ),
        ],
    )
    result = run_flow(flow, {}, tools=[boom, describe])
    assert result.status == "completed" and result.output == "p:1"
    assert "RuntimeError: nope" in result.errors["a"]
    assert [c.error for c in result.steps] == [True, True, False]


def test_missing_field_at_run_time_is_not_retried_and_names_the_step():
    calls = []

    def first() -> dict:
        calls.append(1)
        return {"x": 1}

    flow = FlowDefinition(
        name="missing",
        steps=[
            FlowStep(id="a", skill_key="first"),
            FlowStep(
                id="b",
                skill_key="describe",
                depends_on=["a"],
                retry_max=3,
                input_map={"item_id": "{{a.y}}", "prefix": "p"},
            ),
        ],
    )
    with pytest.raises(FlowRunError) as info:
        run_flow(flow, {}, tools=[first, describe], raise_on_failure=True)
    assert "step 'b'" in str(info.value) and "no 'y'" in str(info.value)
    assert calls == [1]


def test_independent_steps_run_in_parallel():
    threads: set[int] = set()
    # Each call waits until the other is in flight: one after the other would time out.
    both = threading.Barrier(2, timeout=30)

    def slow(n: int) -> int:
        threads.add(threading.get_ident())
        both.wait()
        return n

    flow = FlowDefinition(
        name="par",
        steps=[
            FlowStep(id="a", skill_key="slow", input_map={"n": 1}),
            FlowStep(id="b", skill_key="slow", input_map={"n": 2}),
            FlowStep(
                id="c",
                skill_key="summary",
                depends_on=["a", "b"],
                input_map={"first": "{{a}}", "tag": "{{b}}", "email": "-"},
            ),
        ],
    )
    result = run_flow(flow, {}, tools=[slow, summary])
    assert result.output == {"first": 1, "tag": 2, "email": "-"} and len(threads) == 2


def test_inputs_are_checked_with_the_field_path():
    with pytest.raises(FlowValidationError, match="required input 'email' is missing"):
        check_inputs(FOUR_STEPS, {})
    with pytest.raises(FlowValidationError) as info:
        check_inputs(FOUR_STEPS, {"email": 5})
    assert info.value.field == "inputs.email" and "expected string" in str(info.value)


def test_mermaid_needs_no_executors():
    text = flow_mermaid(FOUR_STEPS)
    assert "u --> items" in text and "d --> s" in text


async def test_async_invoke():
    graph = compile_flow(FOUR_STEPS, tools=TOOLS)
    state = await graph.ainvoke({"inputs": {"email": "cy@z.io"}})
    assert state["results"]["s"]["first"] == "item:U-cy-1"


def test_map_step_fans_out_with_send_and_collects_in_order():
    from soloflow_core.flow.executors import ExecutorRegistry
    from soloflow_core.models import FlowDefinition, FlowStep
    from soloflow_langgraph.runtime.runner import run_flow

    reg = ExecutorRegistry()
    reg.register(
        "user",
        lambda uid: (
            {"reservations": [{"id": "A"}, {"id": "B"}, {"id": "C"}]}
            if uid
            else {"reservations": []}
        ),
    )
    reg.register("res", lambda rid: rid.lower())
    reg.register("join", lambda parts: "".join(parts))
    flow = FlowDefinition(
        name="m",
        input_schema={"type": "object", "properties": {"uid": {}}},
        steps=[
            FlowStep(id="s1", skill_key="user", input_map={"uid": "{{_trigger.uid}}"}),
            FlowStep(
                id="s2",
                skill_key="res",
                depends_on=["s1"],
                map_over="{{s1.reservations}}",
                input_map={"rid": "{{_item.id}}"},
            ),
            FlowStep(id="s3", skill_key="join", depends_on=["s2"], input_map={"parts": "{{s2}}"}),
        ],
    )
    out = run_flow(flow, {"uid": "u"}, registry=reg)
    assert (
        out.status == "completed" and out.results["s2"] == ["a", "b", "c"] and out.output == "abc"
    )
    empty = run_flow(flow, {"uid": ""}, registry=reg)
    assert empty.status == "completed" and empty.results["s2"] == [] and empty.output == ""


def test_map_over_problems_name_the_step_and_field():
    import pytest

    from soloflow_core.errors import FlowValidationError
    from soloflow_core.flow.validate import validate_flow
    from soloflow_core.models import FlowDefinition, FlowStep

    flow = FlowDefinition(
        name="bad",
        steps=[
            FlowStep(id="s1", skill_key="a", input_map={"x": "{{_item}}"}),
            FlowStep(id="s2", skill_key="b", map_over="{{s1.items}} and more"),
        ],
    )
    with pytest.raises(FlowValidationError) as info:
        validate_flow(flow)
    msg = str(info.value)
    assert "step 's1', field 'input_map.x'" in msg and "has no map_over" in msg
    assert "step 's2', field 'map_over'" in msg
