"""``soloflow tokens create | list | revoke``: API tokens for the REST API and the MCP server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import Context, app, err, out, print_json

if TYPE_CHECKING:
    from soloflow_core.store import Store

tokens_app = typer.Typer(
    help="API tokens: one (user, agent) namespace and a scope each.", no_args_is_help=True
)
app.add_typer(tokens_app, name="tokens")

_USER = typer.Option(None, "--user", help="The token's user (default: the global --user).")
_AGENT = typer.Option(None, "--agent", help="The token's agent (default: the global --agent).")


def _ns(
    ctx: typer.Context, user: str | None, agent: str | None, *, create: bool = False
) -> tuple[Store, str, str]:
    c: Context = ctx.obj
    store = c.store(create=create)
    ctx.call_on_close(store.close)
    return store, user or c.user, agent or c.agent


@tokens_app.command("create")
def create(
    ctx: typer.Context,
    user: str | None = _USER,
    agent: str | None = _AGENT,
    scope: str = typer.Option("read", "--scope", help="read | write | admin"),
    label: str | None = typer.Option(
        None, "--label", help="What it is for (shown by `tokens list`)."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Create a token for a namespace. The token is printed this once: it is stored hashed."""
    store, user_id, agent_id = _ns(ctx, user, agent, create=True)
    issued = store.create_api_token(user_id=user_id, agent_id=agent_id, scope=scope, label=label)
    if as_json:
        print_json({**issued.record.as_dict(), "token": issued.token})
        return
    print(issued.token)
    err.print(
        f"token {issued.record.token_id} for user {escape(user_id)!r}, agent {escape(agent_id)!r}, "
        f"scope {scope}: copy it now, it is not shown again",
        highlight=False,
    )


@tokens_app.command("list")
def list_tokens(
    ctx: typer.Context,
    user: str | None = _USER,
    agent: str | None = _AGENT,
    active: bool = typer.Option(False, "--active", help="Only tokens not revoked."),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """A namespace's tokens (their ids and scopes, never the tokens)."""
    store, user_id, agent_id = _ns(ctx, user, agent)
    records = store.list_api_tokens(user_id=user_id, agent_id=agent_id, include_revoked=not active)
    if as_json:
        print_json([r.as_dict() for r in records])
        return
    if not records:
        out.print("no token")
        return
    table = Table("token id", "scope", "label", "created", "revoked")
    for r in records:
        table.add_row(
            r.token_id,
            r.scope,
            escape(r.label or ""),
            f"{r.created_at:%Y-%m-%d %H:%M}",
            "-" if r.revoked_at is None else f"{r.revoked_at:%Y-%m-%d %H:%M}",
        )
    out.print(table)


@tokens_app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: str = typer.Argument(
        ..., help="The token's id (`tokens list`), or the token itself."
    ),
    user: str | None = _USER,
    agent: str | None = _AGENT,
) -> None:
    """Revoke a token of the namespace: the next request with it is refused."""
    from soloflow_core.store.tokens import parse_token

    store, user_id, agent_id = _ns(ctx, user, agent)
    parsed = parse_token(token_id)
    record = store.revoke_api_token(
        parsed[0] if parsed else token_id, user_id=user_id, agent_id=agent_id
    )
    out.print(f"revoked token {record.token_id}", highlight=False)
