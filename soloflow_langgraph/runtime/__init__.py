"""Run: registered flows executed durably, recorded in the store, resumed after a crash.

- :mod:`.flow_runtime` — :class:`FlowRuntime`: start, resume, approve, cancel, retention;
- :mod:`.runner` — :func:`run_flow`, one run in one call;
- :mod:`.results` — :class:`FlowRunResult`, what a run returns;
- :mod:`.inputs` — a flow's inputs: defaults, checks, read from a task text;
- :mod:`.support` — the checkpointer opened for a store (:class:`~.support.OwnedCheckpointer`),
  run ownership, checkpoint cleanup through LangGraph's public API.
"""

from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.runtime.inputs import check_inputs, inputs_from_task
from soloflow_langgraph.runtime.results import FlowRunResult
from soloflow_langgraph.runtime.runner import run_flow

__all__ = ["FlowRunResult", "FlowRuntime", "check_inputs", "inputs_from_task", "run_flow"]
