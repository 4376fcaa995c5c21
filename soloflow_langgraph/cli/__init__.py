"""The ``soloflow`` command line (typer + rich)."""

from soloflow_langgraph.cli import (  # noqa: F401,E402  (registers commands)
    demo_cmd,
    flows_cmd,
    runs_cmd,
    sequential_cmd,  # noqa: F401,E402  (registers `soloflow sequential`)
)
from soloflow_langgraph.cli.app import app, main

__all__ = ["app", "main"]
