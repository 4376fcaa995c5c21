"""``soloflow mcp``: the MCP server over stdio (``--user``/``--agent``) or streamable HTTP
(bearer tokens); the ``api`` extra."""

from __future__ import annotations

import typer

from soloflow_langgraph.cli._serving import (
    TOOLS_HELP,
    listening_socket,
    require_api_extra,
    service_for,
)
from soloflow_langgraph.cli.app import Context, app, err


@app.command()
def mcp(
    ctx: typer.Context,
    http: bool = typer.Option(
        False, "--http", help="Streamable HTTP (bearer tokens) instead of stdio."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: the address to listen on."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="With --http: the port."),
    path: str = typer.Option("/mcp", "--path", help="With --http: the endpoint's path."),
    tools: list[str] = typer.Option([], "--tools", help=TOOLS_HELP),
    watch_interval: float = typer.Option(
        1.0,
        "--watch-interval",
        min=0.05,
        help="Seconds between two looks at the store for changed flows.",
    ),
) -> None:
    """Serve flows to MCP clients (stdio, or streamable HTTP with --http).

    Tools: soloflow_run / status / list / cancel / find, and every active flow as its own
    tool. Over stdio the namespace is --user/--agent; over --http, each request's bearer
    token (`soloflow tokens create`)."""
    require_api_extra("mcp")
    from soloflow_langgraph.server.mcp import SoloFlowMCP
    from soloflow_langgraph.server.principal import Principal

    c: Context = ctx.obj
    service = service_for(ctx, tools)
    if not http:
        import anyio

        server = SoloFlowMCP(
            service, principal=Principal(c.user, c.agent), watch_interval=watch_interval
        )
        anyio.run(server.run_stdio)
        return
    import uvicorn

    from soloflow_langgraph.server.driver import StopRunsAtShutdown

    sock = listening_socket(host, port)
    port = sock.getsockname()[1]
    server = SoloFlowMCP(service, watch_interval=watch_interval)
    app_ = StopRunsAtShutdown(server.http_app(host=host, port=port, path=path), service.stop_runs)
    err.print(
        f"SoloFlow MCP on http://{host}:{port}{path} (streamable HTTP; bearer tokens; store "
        f"{service.store.url})",
        highlight=False,
        markup=False,
    )
    uvicorn.Server(uvicorn.Config(app_, host=host, port=port, log_level="warning")).run(
        sockets=[sock]
    )
