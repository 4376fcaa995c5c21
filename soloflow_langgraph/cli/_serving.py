"""What ``soloflow serve`` and ``soloflow mcp`` share: the ``api`` extra's check, the service."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.cli._tool_specs import load_tools
from soloflow_langgraph.cli.app import Context, fail

if TYPE_CHECKING:
    from soloflow_langgraph.server.service import SoloFlowService

__all__ = ["TOOLS_HELP", "listening_socket", "require_api_extra", "service_for"]

TOOLS_HELP = "module:ATTR naming tools flow steps call (repeatable); plugins register the rest."


def require_api_extra(command: str) -> None:
    """One clear line and exit code 1 when the ``api`` extra is not installed."""
    from soloflow_langgraph.server import API_EXTRA_HINT, missing_api_packages

    missing = missing_api_packages()
    if missing:
        fail(
            escape(
                f"`soloflow {command}` needs the api extra ({', '.join(missing)} not installed): "
                f"{API_EXTRA_HINT}"
            )
        )


def service_for(ctx: typer.Context, tools: list[str]) -> SoloFlowService:
    """The service over the command's store and executors, closed (runs waited for, runtimes
    closed, then the store) when the command ends."""
    from soloflow_langgraph.server.service import SoloFlowService

    c: Context = ctx.obj
    store = c.store(create=True)  # a server may start before anything is stored
    service = SoloFlowService(
        store,
        tools=[t for spec in tools for t in load_tools(spec)],
        plugin_manager=get_plugin_manager(),
    )
    ctx.call_on_close(store.close)
    ctx.call_on_close(service.close)  # called first: last registered, first called
    return service


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket the server will answer on, bound before anything is announced: a port in
    use or a host that is not this machine's is one error line, and ``--port 0`` is told
    which port it got (``sock.getsockname()[1]``).

    Raises:
        typer.Exit: (after the error line) the address cannot be bound.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        fail(
            escape(
                f"--host {host!r}: {getattr(exc, 'strerror', None) or exc}; give an address of "
                "this machine (127.0.0.1, 0.0.0.0, ::1)"
            )
        )
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        fail(
            escape(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
                "(--port 0: any free one) or stop what listens there"
            )
        )
    return sock
