"""Dependencies from data flow, and when independent steps may run in parallel.

A step depends on the steps whose outputs its ``input_map`` (or ``map_over``) reads.
Two steps with no data path between them may run in parallel only when both tools are
declared read-only (``side_effects=False``, from tool metadata or configuration); any
other pair keeps the order the agent used. Unknown tools count as having side effects:
running a write earlier or concurrently could change what another step sees.

Example:
    >>> maps = [{"q": "{{_trigger.q}}"}, {"q": "{{_trigger.q}}"}, {"a": "{{step_1.id}}"}]
    >>> dataflow_depends_on(["search_a", "search_b", "book"], maps,
    ...                     side_effects={"search_a": False, "search_b": False})
    [[], [], ['step_1', 'step_2']]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soloflow_core.flow.effects import side_effects_of
from soloflow_core.flow.templates import Reference, iter_references

__all__ = ["data_dependencies", "dataflow_depends_on", "side_effects_from_calls"]

_ITEM = "_item"


def data_dependencies(input_map: Mapping[str, Any], map_over: str | None = None) -> list[str]:
    """The step ids whose outputs ``input_map`` and ``map_over`` read, in first-use order."""
    found: list[str] = []
    refs = list(iter_references(dict(input_map)))
    if map_over:
        refs += list(iter_references(map_over, "map_over"))
    for _, ref in refs:
        if (
            isinstance(ref, Reference)
            and not ref.is_trigger
            and ref.root != _ITEM
            and ref.root not in found
        ):
            found.append(ref.root)
    return found


def dataflow_depends_on(
    tools: Sequence[str],
    input_maps: Sequence[Mapping[str, Any]],
    *,
    side_effects: Mapping[str, bool | None] | None = None,
    map_over: Sequence[str | None] | None = None,
    step_ids: Sequence[str] | None = None,
) -> list[list[str]]:
    """Per step, its ``depends_on``: the steps it reads, then the order edges it needs.

    Args:
        tools: each step's tool, in the observed order.
        input_maps: each step's argument templates.
        side_effects: tool → True (writes), False (read-only), None/absent (unknown:
            treated as writes).
        map_over: each step's ``map_over`` template, if any.
        step_ids: the step ids (default ``step_1``…).
    """
    n = len(tools)
    ids = list(step_ids) if step_ids is not None else [f"step_{i + 1}" for i in range(n)]
    index = {sid: i for i, sid in enumerate(ids)}
    effects = side_effects or {}
    read_only = [effects.get(t) is False for t in tools]
    overs = list(map_over) if map_over is not None else [None] * n
    data = [
        [d for d in data_dependencies(input_maps[i], overs[i]) if d in index and index[d] < i]
        for i in range(n)
    ]
    ancestors: list[set[int]] = []
    out: list[list[str]] = []
    for j in range(n):
        direct = [index[d] for d in data[j]]
        reach: set[int] = set()
        for d in direct:
            reach |= {d} | ancestors[d]
        # Order edges, nearest first, skipping what is already reached through another.
        order: list[int] = []
        for i in range(j - 1, -1, -1):
            if i in reach or (read_only[i] and read_only[j]):
                continue
            order.append(i)
            reach |= {i} | ancestors[i]
        ancestors.append(reach)
        out.append([ids[i] for i in direct] + [ids[i] for i in sorted(order) if i not in direct])
    return out


def side_effects_from_calls(calls: Sequence[Any]) -> dict[str, bool]:
    """Tool → side-effects flag, from the ``meta`` of recorded calls.

    A call's ``meta`` may say ``{"side_effects": false}`` or ``{"read_only": true}`` (as a
    tool's LangChain ``metadata`` is recorded; read by
    :func:`~soloflow_core.flow.effects.side_effects_of`); the first statement about a tool wins.
    """
    out: dict[str, bool] = {}
    for call in calls:
        meta = getattr(call, "meta", None)
        if not meta:  # most calls: nothing recorded
            continue
        name = getattr(call, "name", None)
        if not isinstance(name, str) or name in out:
            continue
        effects = side_effects_of(meta)
        if effects is not None:
            out[name] = effects
    return out
