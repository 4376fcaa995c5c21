"""The state of a compiled flow: :class:`FlowState`, its reducers, the schema each flow's graph
gets (:func:`flow_state_schema`), and a step's output as the state keeps it (:func:`state_value`).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, get_type_hints

from soloflow_core.store.json_values import jsonable

if TYPE_CHECKING:
    from soloflow_core.models import FlowDefinition

__all__ = [
    "FlowState",
    "first_halt",
    "flow_state_schema",
    "merge_dicts",
    "merge_map_parts",
    "state_value",
]


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for keys that parallel steps write to."""
    return {**(left or {}), **(right or {})}


def merge_map_parts(
    left: dict[str, dict[int, Any]] | None, right: dict[str, dict[int, Any]] | None
) -> dict[str, dict[int, Any]]:
    """Reducer for the per-item outputs of map steps (step id → item index → output)."""
    out = {k: dict(v) for k, v in (left or {}).items()}
    for k, v in (right or {}).items():
        out.setdefault(k, {}).update(v)
    return out


def first_halt(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer of ``halt``: the first reason to stop starting steps wins."""
    return left or right


class FlowState(TypedDict, total=False):
    """The state of a compiled flow."""

    inputs: dict[str, Any]
    results: Annotated[dict[str, Any], merge_dicts]
    errors: Annotated[dict[str, str], merge_dicts]
    skipped: Annotated[dict[str, str], merge_dicts]
    """Steps that did not run, and why."""
    failed_skip: Annotated[dict[str, str], merge_dicts]
    """Failed steps whose ``on_failure`` is ``skip_dependents``."""
    halt: Annotated[dict[str, Any] | None, first_halt]
    """Set when no further step may start: ``{"kind": fallback | compensate | cancelled |
    rejected, "step": ..., "error": ...}``."""
    compensation_errors: Annotated[dict[str, str], merge_dicts]
    approval: dict[str, Any]
    map_parts: Annotated[dict[str, dict[int, Any]], merge_map_parts]
    """Per map step, each item's output until the step collects them into a list."""
    map_item: Any
    """Only in a map item's ``Send`` payload: the item."""
    map_index: int
    """Only in a map item's ``Send`` payload: the item's position."""


_OPTIONAL_CHANNELS = {
    "compensation": ("compensation_errors",),
    "approval": ("approval",),
    "map": ("map_parts", "map_item", "map_index"),
}
"""The channels of :class:`FlowState` only some flows write, by what writes them."""

_SCHEMAS: dict[frozenset[str], type] = {}
_SCHEMAS_LOCK = threading.Lock()


def flow_state_schema(flow: FlowDefinition) -> type:
    """The state schema of ``flow``'s graph: :class:`FlowState` without the channels it
    never writes (compensation errors without compensations, the approval without a gate,
    map parts without map steps). LangGraph reads and copies every channel of the schema at
    every superstep, so a plain flow runs on six; its state and results are the same."""
    uses = {
        "compensation": any(s.compensation is not None for s in flow.steps),
        "approval": flow.requires_approval,
        "map": any(s.map_over is not None for s in flow.steps),
    }
    dropped = frozenset(
        ch for what, chans in _OPTIONAL_CHANNELS.items() if not uses[what] for ch in chans
    )
    if not dropped:
        return FlowState
    with _SCHEMAS_LOCK:
        schema = _SCHEMAS.get(dropped)
        if schema is None:
            hints = get_type_hints(FlowState, include_extras=True)
            fields = {k: v for k, v in hints.items() if k not in dropped}
            name = "FlowState" + "".join("_no_" + w for w, on in sorted(uses.items()) if not on)
            # The functional form: mypy wants a literal name and fields, which a schema made
            # per kind of flow cannot give; LangGraph reads it as any TypedDict.
            schema = _SCHEMAS[dropped] = TypedDict(name, fields, total=False)  # type: ignore[operator]
            schema.__module__ = __name__
            schema.__doc__ = FlowState.__doc__
        return schema


def state_value(out: Any) -> Any:
    """A step's output as it is kept in the run's state and journal: JSON data (pydantic
    models and dataclasses as their fields, anything else JSON cannot hold as its text), so
    a resumed run sees exactly what a fresh one saw and every checkpointer can store it."""
    dump = getattr(out, "model_dump", None)
    if callable(dump) and not isinstance(out, type):
        out = dump(mode="json")
    elif dataclasses.is_dataclass(out) and not isinstance(out, type):
        out = dataclasses.asdict(out)
    return jsonable(out)
