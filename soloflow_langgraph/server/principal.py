"""Who asks the service: a :class:`Principal` is a (user, agent) namespace and its scope.

It comes from an API token (:mod:`soloflow_langgraph.server.auth`) or, for ``soloflow mcp`` over
stdio, from ``--user``/``--agent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from soloflow_core.errors import AccessDeniedError
from soloflow_core.store.tokens import scope_allows

__all__ = ["Namespace", "Principal"]


class Namespace(TypedDict):
    user_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who asks: a namespace and what it may do (``read`` < ``write`` < ``admin``)."""

    user_id: str
    agent_id: str
    scope: str = "admin"
    token_id: str | None = None
    """The API token it came from; None for a local principal (stdio, the CLI)."""

    def require(self, needed: str, act: str) -> None:
        """Raises ``AccessDeniedError`` unless the scope allows ``act`` (which needs ``needed``)."""
        if not scope_allows(self.scope, needed):
            raise AccessDeniedError(
                f"this token's scope is {self.scope!r}: it cannot {act} (needs {needed!r}); create "
                f"one with `soloflow tokens create --user {self.user_id} --agent {self.agent_id} "
                f"--scope {needed}`",
                scope=self.scope,
                needed=needed,
            )

    @property
    def ns(self) -> Namespace:
        return {"user_id": self.user_id, "agent_id": self.agent_id}
