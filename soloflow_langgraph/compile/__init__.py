"""Compile: a :class:`~soloflow_core.models.FlowDefinition` becomes a LangGraph ``StateGraph``.

- :mod:`.graph` — validate the flow and build the graph (the caller picks the checkpointer);
- :mod:`.nodes` — the graph's nodes: a step, a map step's fan-out, the approval gate, the end;
- :mod:`.state` — the graph's state, its reducers and the schema each flow gets;
- :mod:`.step_call` — how a node calls its executor (time limit, idempotency key, async);
- :mod:`.run_watch` — a whole invocation on one watched thread, sync steps called in line.
"""

from soloflow_langgraph.compile.graph import build_flow_graph, compile_flow, flow_mermaid

__all__ = ["build_flow_graph", "compile_flow", "flow_mermaid"]
