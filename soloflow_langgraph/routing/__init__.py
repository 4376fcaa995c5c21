"""Route: learned flows handed back to agents, as hints, tools, graph nodes and direct runs.

- :mod:`.middleware` — :class:`SoloFlowMiddleware` for ``create_agent``: hints, tools,
  routing a task to a flow, learning from the outcome;
- :mod:`.hints` — :func:`flow_hints` for an agent SoloFlow did not build, and the hint text;
- :mod:`.tools` — a flow as a LangChain tool (:func:`flow_tool`) or a graph node (:func:`flow_node`).
"""

from soloflow_langgraph.routing.hints import FLOW_RUN_TOOL, flow_hint, flow_hints
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware
from soloflow_langgraph.routing.tools import flow_args_schema, flow_node, flow_tool, flow_tool_name

__all__ = [
    "FLOW_RUN_TOOL",
    "SoloFlowMiddleware",
    "flow_args_schema",
    "flow_hint",
    "flow_hints",
    "flow_node",
    "flow_tool",
    "flow_tool_name",
]
