"""The ``soloflow`` command line (typer + rich)."""

from soloflow_langgraph.cli.app import app, main
from soloflow_langgraph.cli import demo_cmd, flows_cmd, runs_cmd  # noqa: F401,E402  (registers commands)

__all__ = ["app", "main"]
