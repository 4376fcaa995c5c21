"""Who hears the MCP server's tool-list changes: each ``subscriptions/listen`` stream and each
pre-2026 connection, kept with its namespace and the API token it was opened with.

A change of a namespace's flows reaches only that namespace's listeners. A listener opened
with a token that is revoked since hears nothing more: :meth:`NamespaceBus.end` ends its
stream (the SDK already refuses the token's next request, but a stream stays open between
requests), and :meth:`Connections.drop` forgets its connection.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import anyio
    from mcp.server.session import ServerSession
    from mcp.shared.subscriptions import ServerEvent

__all__ = ["Connections", "Listener", "NamespaceBus", "current_listener"]


@dataclass(slots=True)
class Listener:
    """One listen stream: its namespace, its token (None over stdio) and the scope that ends it."""

    ns: tuple[str, str]
    token_id: str | None
    scope: anyio.CancelScope | None = None


current_listener: contextvars.ContextVar[Listener | None] = contextvars.ContextVar(
    "soloflow_listener", default=None
)
"""The listener a ``subscriptions/listen`` handler serves, read by :meth:`NamespaceBus.subscribe`."""


class NamespaceBus:
    """A ``SubscriptionBus`` whose listeners each belong to one namespace:
    :meth:`publish_to` reaches only that namespace's ``subscriptions/listen`` streams."""

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[Listener | None, Callable[[ServerEvent], None]]] = {}

    async def publish(self, event: ServerEvent) -> None:
        for _, listener in list(self._listeners.values()):
            listener(event)

    async def publish_to(self, ns: tuple[str, str], event: ServerEvent) -> None:
        for owner, listener in list(self._listeners.values()):
            if owner is not None and owner.ns == ns:
                listener(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (current_listener.get(), listener)
        return lambda: self._listeners.pop(token, None) and None

    def namespaces(self) -> set[tuple[str, str]]:
        return {owner.ns for owner, _ in self._listeners.values() if owner is not None}

    def token_ids(self) -> set[str]:
        """The API tokens the open streams were opened with."""
        return {
            owner.token_id
            for owner, _ in self._listeners.values()
            if owner is not None and owner.token_id is not None
        }

    def end(self, token_ids: Collection[str]) -> None:
        """End the streams opened with ``token_ids``; none of them hears another event."""
        for key, (owner, _) in list(self._listeners.items()):
            if owner is not None and owner.token_id in token_ids:
                self._listeners.pop(key, None)
                if owner.scope is not None:
                    owner.scope.cancel()


class Connections:
    """The connections of pre-2026 clients, by namespace then session, each with its token,
    told of changes with ``notifications/tools/list_changed``."""

    def __init__(self, *, keep: int) -> None:
        self.keep = keep
        self._by_ns: dict[tuple[str, str], dict[str, tuple[str | None, ServerSession]]] = {}

    def remember(
        self, ns: tuple[str, str], key: str, *, session: ServerSession, token_id: str | None
    ) -> None:
        """Keep ``session`` (the newest ``keep`` of a namespace)."""
        sessions = self._by_ns.setdefault(ns, {})
        sessions.pop(key, None)
        sessions[key] = (token_id, session)
        while len(sessions) > self.keep:
            sessions.pop(next(iter(sessions)))

    def of(self, ns: tuple[str, str]) -> list[ServerSession]:
        return [session for _, session in self._by_ns.get(ns, {}).values()]

    def namespaces(self) -> set[tuple[str, str]]:
        return {ns for ns, sessions in self._by_ns.items() if sessions}

    def token_ids(self) -> set[str]:
        return {tid for s in self._by_ns.values() for tid, _ in s.values() if tid is not None}

    def drop(self, token_ids: Collection[str]) -> None:
        """Forget the connections opened with ``token_ids``."""
        for sessions in self._by_ns.values():
            for key in [k for k, (tid, _) in sessions.items() if tid in token_ids]:
                del sessions[key]
