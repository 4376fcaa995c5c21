"""Run a flow on an AgentDojo task through ``compile_flow`` and score it with the task's check.

Example:
    >>> flow = load_flow_file("examples/agentdojo/flows/banking/user_task_3.yaml")  # doctest: +SKIP
    >>> run_task_flow(flow, "banking", "user_task_3").passed                         # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from benchmarks.agentdojo.environment import (
    BENCHMARK_VERSION,
    AgentDojoTask,
    load_task,
)
from soloflow_core.errors import FlowValidationError
from soloflow_core.generalize.arguments import extract_inputs
from soloflow_core.models import FlowDefinition
from soloflow_langgraph.compile.graph import compile_flow

__all__ = ["TaskFlowResult", "outputs_as_answer", "run_task_flow", "task_inputs"]

Answer = str | Callable[[Mapping[str, Any]], str]
"""The final answer text given to ``utility``: fixed text, or made from the step outputs."""


@dataclass(slots=True)
class TaskFlowResult:
    """What a flow did on a task and what the task's own check said."""

    suite: str
    task_id: str
    passed: bool
    inputs: dict[str, Any]
    results: dict[str, Any]
    errors: dict[str, str]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Every tool call the flow made, in order, as ``(tool, arguments)``."""
    answer: str = ""


def task_inputs(flow: FlowDefinition, task: AgentDojoTask) -> dict[str, Any]:
    """The flow's inputs, recovered from the task prompt by the flow's extraction rules.

    Raises:
        FlowValidationError: a required input cannot be found in the prompt (names it).
    """
    inputs = extract_inputs(flow.extraction, task.prompt)
    required = (flow.input_schema or {}).get("required") or []
    missing = [name for name in required if name not in inputs]
    if missing:
        problems: list[tuple[str | None, str | None, str]] = [
            (
                None,
                f"inputs.{name}",
                f"required input {name!r} is not in the task text "
                f"of {task.suite_name}/{task.task_id}; pass it in inputs=",
            )
            for name in missing
        ]
        raise FlowValidationError(
            f"flow {flow.name!r}: " + "; ".join(p[2] for p in problems),
            flow=flow.name,
            field=problems[0][1],
            problems=problems,
        )
    return inputs


def outputs_as_answer(results: Mapping[str, Any]) -> str:
    """Every step output as the agent would have read it, one after another.

    Not an answer a model would write; a generous stand-in for the tasks whose check looks
    for facts in the answer text.
    """
    return "\n".join(
        out if isinstance(out, str) else yaml.safe_dump(out, allow_unicode=True)
        for out in results.values()
    )


def run_task_flow(
    flow: FlowDefinition,
    suite: str,
    task_id: str,
    *,
    inputs: Mapping[str, Any] | None = None,
    answer: Answer = "",
    version: str = BENCHMARK_VERSION,
) -> TaskFlowResult:
    """Compile ``flow`` against the real tools of a fresh default environment of the task,
    run it, and score it with the task's own utility check.

    Args:
        flow: the flow (e.g. from ``load_flow_file``).
        suite: ``workspace``, ``travel``, ``banking`` or ``slack``.
        task_id: ``user_task_<n>``.
        inputs: the flow inputs; by default recovered from the task prompt.
        answer: the final answer text for the check (empty: the environment alone).
        version: the AgentDojo benchmark version.

    Raises:
        ModuleNotFoundError: the ``agentdojo`` extra is not installed.
        FlowValidationError: the flow is invalid or an input is missing.
        ExecutorNotFoundError: a step names a tool the suite does not have.
        Exception: a step failed (as ``graph.invoke`` raises it).
    """
    task = load_task(suite, task_id, version=version)
    graph = compile_flow(flow, tools=task.tools())
    given = dict(inputs) if inputs is not None else task_inputs(flow, task)
    state = graph.invoke({"inputs": given, "results": {}, "errors": {}})
    results = dict(state.get("results") or {})
    text = answer(results) if callable(answer) else answer
    return TaskFlowResult(
        suite=suite,
        task_id=task_id,
        passed=task.utility(text),
        inputs=given,
        results=results,
        errors=dict(state.get("errors") or {}),
        answer=text,
        calls=[(c.function, dict(c.args)) for c in task.calls],
    )
