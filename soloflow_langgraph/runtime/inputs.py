"""A flow's inputs: defaults applied, checked against its ``input_schema``, read from a task."""

from __future__ import annotations

import json
from typing import Any

from soloflow_core.errors import FlowValidationError
from soloflow_core.generalize.arguments import extract_inputs
from soloflow_core.models import FlowDefinition
from soloflow_core.store.json_values import json_text

__all__ = ["apply_input_defaults", "check_inputs", "inputs_from_task", "run_inputs"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


def apply_input_defaults(flow: FlowDefinition, inputs: dict[str, Any]) -> dict[str, Any]:
    """``inputs`` with the ``default`` of every ``input_schema`` property not given."""
    props: dict[str, Any] = (flow.input_schema or {}).get("properties") or {}
    missing = {
        k: v["default"]
        for k, v in props.items()
        if k not in inputs and isinstance(v, dict) and "default" in v
    }
    return {**missing, **inputs} if missing else inputs


def run_inputs(flow: FlowDefinition, given: dict[str, Any], *, as_stored: bool) -> dict[str, Any]:
    """The inputs a run of ``flow`` starts with: ``given`` with its defaults, checked; with
    ``as_stored``, as the run's record keeps them (JSON: a ``datetime`` becomes its text, a
    tuple a list) — what a run carried on from its inputs after a crash reads, so that its
    steps see the same values whether the run was interrupted or not.

    Raises:
        FlowValidationError: an input is missing, unknown or of the wrong type.
    """
    inputs = apply_input_defaults(flow, given)
    check_inputs(flow, inputs)
    if not as_stored:
        return inputs
    kept: dict[str, Any] = json.loads(json_text(inputs))
    return kept


def check_inputs(flow: FlowDefinition, inputs: dict[str, Any]) -> None:
    """Required inputs present and of the declared JSON type; names the input at fault."""
    schema = flow.input_schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    problems: list[tuple[str | None, str | None, str]] = []
    for name in schema.get("required") or []:
        if name not in inputs:
            problems.append((None, f"inputs.{name}", f"required input {name!r} is missing"))
    for name, value in inputs.items():
        spec = props.get(name)
        if spec is None:
            if props:
                problems.append(
                    (
                        None,
                        f"inputs.{name}",
                        f"unknown input {name!r}; the flow takes: {', '.join(props)}",
                    )
                )
            continue
        jtype = spec.get("type")
        ok = _JSON_TYPES.get(jtype) if isinstance(jtype, str) else None
        if ok and (
            not isinstance(value, ok)
            or (jtype in ("integer", "number") and isinstance(value, bool))
        ):
            problems.append(
                (None, f"inputs.{name}", f"expected {jtype}, got {type(value).__name__} {value!r}")
            )
    if problems:
        lines = "\n  ".join(f"flow {flow.name!r}, field {f!r}: {m}" for _, f, m in problems)
        raise FlowValidationError(
            "invalid flow inputs:\n  " + lines,
            flow=flow.name,
            field=problems[0][1],
            problems=problems,
        )


def inputs_from_task(flow: FlowDefinition, task: str) -> dict[str, Any]:
    """The flow's inputs recovered from a task text by its extraction rules.

    Raises:
        PatternTimeoutError: a rule's pattern ran past its time limit (names the flow, the
            field path and the pattern).
    """
    return extract_inputs(flow.extraction, task, flow=flow.name)
