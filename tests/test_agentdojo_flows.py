"""AgentDojo reference solutions as flow files, run on AgentDojo's real tools and checked by
each task's own ``utility`` (needs the ``agentdojo`` extra; runs offline)."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENTDOJO

from benchmarks.agentdojo import (
    INSTALL_HINT,
    ground_truth_flow,
    load_task,
    require_agentdojo,
    run_task_flow,
    task_inputs,
)
from benchmarks.agentdojo.flows import flow_file_path, flow_to_yaml
from soloflow_core.errors import ExecutorNotFoundError, FlowFileError, FlowValidationError
from soloflow_core.flow.loader import load_flow_file, validate_flow_file
from soloflow_core.flow.templates import iter_references, lookup
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_langgraph.compile.graph import compile_flow

FLOWS = Path(__file__).parent.parent / "examples" / "agentdojo" / "flows"


def _records() -> list[dict[str, Any]]:
    with gzip.open(AGENTDOJO, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


RECORDS = {(r["meta"]["suite"], r["meta"]["task_id"]): r for r in _records()}
EMPTY_ANSWER_TASKS = sorted(
    k for k, r in RECORDS.items() if r["meta"]["utility_passes_with_empty_answer"]
)


def _canon(calls: list[tuple[str, dict[str, Any]]]) -> Counter[str]:
    return Counter(json.dumps([name, args], sort_keys=True, default=str) for name, args in calls)


def test_the_data_names_54_tasks_checked_by_state_alone() -> None:
    assert len(RECORDS) == 97
    assert len(EMPTY_ANSWER_TASKS) == 54


@pytest.mark.parametrize(
    ("suite", "task_id"), EMPTY_ANSWER_TASKS, ids=["/".join(k) for k in EMPTY_ANSWER_TASKS]
)
def test_flow_file_passes_the_tasks_own_utility_check(suite: str, task_id: str) -> None:
    task = load_task(suite, task_id)
    flow, _ = validate_flow_file(flow_file_path(FLOWS, suite, task_id), executors=task.tool_names)
    graph = compile_flow(flow, tools=task.tools())
    inputs = task_inputs(flow, task)
    state = graph.invoke({"inputs": inputs})

    assert set(state["results"]) == {s.id for s in flow.steps}
    assert task.utility("") is True
    # The flow makes the reference solution's calls, no more and no fewer (map items run
    # side by side, so the order inside a map step is not compared).
    recorded = [(c["name"], c["args"]) for c in RECORDS[suite, task_id]["tool_calls"]]
    made = [(c.function, dict(c.args)) for c in task.calls]
    assert _canon(made) == _canon(recorded)


def test_without_the_flow_the_same_check_fails() -> None:
    """The checks are not vacuous: an untouched environment fails 49 of them. The other
    five (AgentDojo's own checks of read-only or already-satisfied banking tasks) pass
    whatever the flow does, so for them the call comparison above is what counts."""
    vacuous = {k for k in EMPTY_ANSWER_TASKS if load_task(*k).utility("")}
    assert vacuous == {("banking", f"user_task_{n}") for n in (5, 6, 8, 9, 10)}


def _data_passing(flow: FlowDefinition) -> list[tuple[FlowStep, str, str]]:
    found = []
    for step in flow.steps:
        for field, ref in iter_references(step.input_map, "input_map"):
            if not isinstance(ref, Exception) and not ref.is_trigger:
                found.append((step, field, ref.text))
        if step.map_over:
            found.append((step, "map_over", step.map_over))
    return found


def test_flows_pass_data_from_earlier_steps_and_read_inputs_from_the_prompt() -> None:
    flows = {k: load_flow_file(flow_file_path(FLOWS, *k)) for k in EMPTY_ANSWER_TASKS}
    passing = {k for k, f in flows.items() if _data_passing(f)}
    with_inputs = {k for k, f in flows.items() if f.extraction}
    map_steps = {k for k, f in flows.items() if any(s.map_over for s in f.steps)}
    assert len(passing) >= 25, sorted(passing)
    assert len(with_inputs) >= 25, sorted(with_inputs)
    assert map_steps >= {("slack", "user_task_9"), ("slack", "user_task_10")}


def test_a_template_carries_the_value_the_earlier_tool_returned() -> None:
    # banking/user_task_4: "Please refund GB29… for what they've sent me" — the amount is
    # read from the transaction history, the IBAN from the prompt.
    flow = load_flow_file(flow_file_path(FLOWS, "banking", "user_task_4"))
    send = flow.steps[-1]
    assert send.skill_key == "send_money"
    assert send.input_map["recipient"] == "{{_trigger.recipient}}"
    amount = send.input_map["amount"]
    assert amount.startswith("{{step_1.")
    result = run_task_flow(flow, "banking", "user_task_4")
    assert result.passed
    assert result.inputs == {"recipient": "GB29NWBK60161331926819"}
    ref = next(r for _, r in iter_references(amount) if not isinstance(r, Exception))
    expected = lookup(result.results["step_1"], ref.path, where=ref.text)
    assert result.calls[-1] == ("send_money", {**result.calls[-1][1], "amount": expected})
    assert result.calls[-1][1]["recipient"] == "GB29NWBK60161331926819"


def test_another_input_changes_what_the_flow_does() -> None:
    flow = load_flow_file(flow_file_path(FLOWS, "banking", "user_task_4"))
    result = run_task_flow(
        flow, "banking", "user_task_4", inputs={"recipient": "DE89370400440532013000"}
    )
    assert result.calls[-1][1]["recipient"] == "DE89370400440532013000"
    assert not result.passed


def test_map_step_fans_out_over_the_listed_channels() -> None:
    flow = load_flow_file(flow_file_path(FLOWS, "slack", "user_task_10"))
    walk = next(s for s in flow.steps if s.map_over)
    result = run_task_flow(flow, "slack", "user_task_10")
    channels = result.results[walk.depends_on[0]]
    assert len(channels) >= 2
    assert len(result.results[walk.id]) == len(channels)
    assert result.passed


def test_regenerated_flow_equals_the_checked_in_file() -> None:
    path = flow_file_path(FLOWS, "workspace", "user_task_13")
    assert ground_truth_flow("workspace", "user_task_13") == load_flow_file(path)
    assert "{{_trigger.sender}}" in flow_to_yaml(load_flow_file(path))


def test_a_tool_agentdojo_does_not_have_names_the_step(tmp_path: Path) -> None:
    text = flow_file_path(FLOWS, "banking", "user_task_3").read_text(encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        text.replace("skill_key: send_money", "skill_key: wire_all_money"), encoding="utf-8"
    )
    task = load_task("banking", "user_task_3")
    flow = load_flow_file(bad)
    with pytest.raises(ExecutorNotFoundError) as info:
        compile_flow(flow, tools=task.tools())
    assert info.value.step == "step_2"
    assert "wire_all_money" in str(info.value) and "send_money" in str(info.value)
    with pytest.raises(FlowFileError) as file_info:
        validate_flow_file(bad, executors=task.tool_names)
    assert "bad.yaml" in str(file_info.value) and "steps[1].skill_key" in str(file_info.value)


def test_a_missing_input_is_named() -> None:
    flow = load_flow_file(flow_file_path(FLOWS, "banking", "user_task_4"))
    task = load_task("banking", "user_task_0")  # its prompt has no "refund <IBAN>"
    with pytest.raises(FlowValidationError, match="'recipient' is not in the task text"):
        task_inputs(flow, task)


def test_unknown_task_lists_what_exists() -> None:
    with pytest.raises(KeyError, match="suites: workspace"):
        load_task("airline", "user_task_0")
    with pytest.raises(KeyError, match="user_task_15"):
        load_task("banking", "user_task_99")


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agentdojo.task_suite.load_suites", None)
    with pytest.raises(ModuleNotFoundError) as info:
        require_agentdojo("agentdojo.task_suite.load_suites")
    assert INSTALL_HINT in str(info.value)
    with pytest.raises(ModuleNotFoundError, match="soloflow-engine"):
        load_task("banking", "user_task_0")


def test_suite_tools_for_the_command_line() -> None:
    from benchmarks import agentdojo

    assert "send_money" in {t.name for t in agentdojo.BANKING_TOOLS}
    with pytest.raises(AttributeError):
        agentdojo.AIRLINE_TOOLS  # noqa: B018
