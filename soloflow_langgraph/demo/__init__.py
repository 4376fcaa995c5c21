"""``soloflow demo``: a scripted support agent learns a flow from its own runs, then uses it.

- :mod:`.run` — :func:`run_demo`: capture, detect, approve, compile and run, offline;
- :mod:`.agent` — the support agent, its tools and the scripted model that drives it.
"""

from soloflow_langgraph.demo.run import run_demo

__all__ = ["run_demo"]
