"""SoloFlow's LangChain / LangGraph adapters: capture, verify, compile, run and route flows.

Everything a user needs is importable from here::

    from soloflow_langgraph import SoloFlowCallbackHandler, SoloFlowMiddleware, run_flow

The stages, one room each: :mod:`.callbacks` (capture), :mod:`.verify` (replay before
promotion), :mod:`.compile` (flow → LangGraph), :mod:`.runtime` (durable runs),
:mod:`.routing` (flows handed back to agents), plus :mod:`.testing` (a scripted chat
model), :mod:`.demo`, :mod:`.sequential` and :mod:`.cli`. See ``docs/architecture.md``.

Names are imported when first used: ``soloflow --help`` does not load LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "FlowRunResult",
    "FlowRuntime",
    "SoloFlowCallbackHandler",
    "SoloFlowMiddleware",
    "compile_flow",
    "flow_hints",
    "flow_node",
    "flow_tool",
    "inputs_from_task",
    "run_flow",
    "verify_candidate",
]

_WHERE = {
    "FlowRunResult": "runtime.results",
    "FlowRuntime": "runtime.flow_runtime",
    "SoloFlowCallbackHandler": "callbacks",
    "SoloFlowMiddleware": "routing.middleware",
    "compile_flow": "compile.graph",
    "flow_hints": "routing.hints",
    "flow_node": "routing.tools",
    "flow_tool": "routing.tools",
    "inputs_from_task": "runtime.inputs",
    "run_flow": "runtime.runner",
    "verify_candidate": "verify",
}

if TYPE_CHECKING:
    from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
    from soloflow_langgraph.compile.graph import compile_flow
    from soloflow_langgraph.routing.hints import flow_hints
    from soloflow_langgraph.routing.middleware import SoloFlowMiddleware
    from soloflow_langgraph.routing.tools import flow_node, flow_tool
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
    from soloflow_langgraph.runtime.inputs import inputs_from_task
    from soloflow_langgraph.runtime.results import FlowRunResult
    from soloflow_langgraph.runtime.runner import run_flow
    from soloflow_langgraph.verify import verify_candidate


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
