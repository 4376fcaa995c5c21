"""``soloflow serve``: the REST API (FastAPI on uvicorn; the ``api`` extra)."""

from __future__ import annotations

import typer

from soloflow_langgraph.cli._serving import (
    TOOLS_HELP,
    listening_socket,
    require_api_extra,
    service_for,
)
from soloflow_langgraph.cli.app import app, err


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="The address to listen on."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="The port (0: any free one)."),
    tools: list[str] = typer.Option([], "--tools", help=TOOLS_HELP),
    log_level: str = typer.Option(
        "info", "--log-level", help="uvicorn's: critical | error | warning | info | debug"
    ),
) -> None:
    """Serve the REST API (FastAPI on uvicorn).

    Workflows, candidates, flows, flow runs, captured runs under /api. Every request needs a
    bearer token (`soloflow tokens create`) and answers in its namespace; the OpenAPI
    document is at /openapi.json."""
    require_api_extra("serve")
    import uvicorn

    from soloflow_langgraph.server.api import create_app

    sock = listening_socket(host, port)
    port = sock.getsockname()[1]
    service = service_for(ctx, tools)
    server = uvicorn.Server(
        uvicorn.Config(create_app(service), host=host, port=port, log_level=log_level)
    )
    err.print(
        f"SoloFlow API on http://{host}:{port}/api (OpenAPI: /openapi.json; store {service.store.url})",
        highlight=False,
        markup=False,
    )
    server.run(sockets=[sock])
