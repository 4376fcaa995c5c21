"""Skill packages with LangGraph replay: :func:`export_skill` and :func:`import_skill`.

The core (:mod:`soloflow_core.skills`) checks and writes packages; a fixture is replayed here,
on the flow's compiled LangGraph graph, each call answered from the recording when the tool
and its arguments match (:func:`soloflow_langgraph.verify.replay_occurrence`, the replay
``soloflow flows verify`` uses).

Example::

    export_skill(store, "refund order", "out/", user_id="ann", agent_id="support")
    import_skill(other_store, "out/refund-order", user_id="bob", agent_id="desk", tools=[...])
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soloflow_core.flow.executors import build_executor_registry
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.skills import MAX_FIXTURES, ExportedSkill, ImportedSkill
from soloflow_core.skills import export_skill as _export
from soloflow_core.skills import import_skill as _import
from soloflow_langgraph.verify import replay_occurrence

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.generalize.arguments import Occurrence
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store import Store

__all__ = ["export_skill", "import_skill", "replay_fixture"]


def replay_fixture(flow: FlowDefinition, occurrence: Occurrence) -> tuple[bool, list[str]]:
    """Replay ``flow`` against one recorded occurrence: (reproduced, each divergence in words)."""
    outcome = replay_occurrence(flow, occurrence, label="fixture")
    reasons = []
    for d in outcome.divergences:
        where = " ".join(
            x
            for x in (f"step {d.step!r}" if d.step else "", f"tool {d.tool!r}" if d.tool else "")
            if x
        )
        if d.kind == "unexpected":
            reasons.append(f"{where}: called with {d.made!r}, recorded {d.expected!r}")
        elif d.kind == "missing":
            reasons.append(f"{where}: the recorded call {d.expected!r} was not made")
        else:
            reasons.append(f"{where + ': ' if where else ''}{d.message}")
    return outcome.reproduced, reasons


def export_skill(
    store: Store,
    name: str,
    out_dir: str | os.PathLike[str],
    *,
    user_id: str,
    agent_id: str,
    version: int | None = None,
    max_fixtures: int = MAX_FIXTURES,
    side_effects: Mapping[str, bool | None] | None = None,
) -> ExportedSkill:
    """:func:`soloflow_core.skills.export_skill` with the LangGraph replay; ``side_effects``
    (tool → bool) as for :func:`soloflow_langgraph.verify.verify_candidate`."""
    return _export(
        store,
        name,
        Path(out_dir),
        user_id=user_id,
        agent_id=agent_id,
        replay=replay_fixture,
        version=version,
        max_fixtures=max_fixtures,
        side_effects=side_effects,
    )


def import_skill(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    user_id: str,
    agent_id: str,
    tools: Sequence[Any] = (),
    plugin_manager: pluggy.PluginManager | None = None,
) -> ImportedSkill:
    """:func:`soloflow_core.skills.import_skill` with the LangGraph replay; the target's
    executors are ``tools`` and those the plugins register (a fresh ``get_plugin_manager()``
    when none is given)."""
    pm = plugin_manager if plugin_manager is not None else get_plugin_manager()
    registry = build_executor_registry(pm, tools=tools)
    return _import(
        store,
        directory,
        user_id=user_id,
        agent_id=agent_id,
        executors=registry.keys(),
        replay=replay_fixture,
        pm=pm,
    )
