"""Bearer tokens to principals, for the REST API (a FastAPI dependency) and the MCP server
over HTTP (the MCP SDK's ``TokenVerifier``).

A token is checked against the store on every request (one primary-key read, a hash and a
constant-time comparison), so a revoked token is refused from the next request on.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from soloflow_langgraph.server.principal import Principal

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

    from soloflow_core.store import Store

__all__ = [
    "NAMESPACE_CLAIM",
    "StoreTokenVerifier",
    "principal_for_token",
    "principal_of_access_token",
]

NAMESPACE_CLAIM = "soloflow"
"""The claim of an MCP ``AccessToken`` that holds the token's namespace and scope."""


def principal_for_token(store: Store, token: str | None) -> Principal | None:
    """The principal of an active token; None for no token or an unknown, revoked or
    malformed one."""
    if not token:
        return None
    record = store.verify_api_token(token)
    if record is None:
        return None
    return Principal(
        user_id=record.user_id,
        agent_id=record.agent_id,
        scope=record.scope,
        token_id=record.token_id,
    )


class StoreTokenVerifier:
    """The MCP SDK's ``TokenVerifier`` over the store's API tokens."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        principal = await asyncio.to_thread(principal_for_token, self.store, token)
        if principal is None:
            return None
        assert principal.token_id is not None
        return AccessToken(
            token=token,
            client_id=principal.token_id,
            scopes=[principal.scope],
            subject=f"{principal.user_id}/{principal.agent_id}",
            claims={
                NAMESPACE_CLAIM: {
                    "user_id": principal.user_id,
                    "agent_id": principal.agent_id,
                    "scope": principal.scope,
                }
            },
        )


def principal_of_access_token(token: AccessToken | None) -> Principal | None:
    """The principal an ``AccessToken`` of :class:`StoreTokenVerifier` stands for."""
    if token is None or not token.claims:
        return None
    ns = token.claims.get(NAMESPACE_CLAIM)
    if not isinstance(ns, dict):
        return None
    return Principal(
        user_id=str(ns["user_id"]),
        agent_id=str(ns["agent_id"]),
        scope=str(ns["scope"]),
        token_id=token.client_id,
    )
