"""The ``soloflow`` command line (typer + rich)."""

from soloflow_langgraph.cli import (  # noqa: F401,E402  (registers commands)
    demo_cmd,
    flowrun_cmd,  # `soloflow flows run | resume | status | cancel | history | runs | prune`
    flows_cmd,
    mcp_cmd,  # `soloflow mcp [--http]`
    memory_cmd,  # `soloflow memory search | prune`
    namespaces_cmd,  # `soloflow namespaces`
    procedural_cmd,  # `soloflow flows find` and `flows versions`
    runs_cmd,
    sequential_cmd,  # noqa: F401,E402  (registers `soloflow sequential`)
    serve_cmd,  # `soloflow serve`
    skills_cmd,  # `soloflow skills export | import`
    stats_cmd,  # `soloflow flows stats`
    tokens_cmd,  # `soloflow tokens create | list | revoke`
    trace_cmd,  # `soloflow runs trace`, `soloflow flows runs trace`
)
from soloflow_langgraph.cli.app import app, main

__all__ = ["app", "main"]
