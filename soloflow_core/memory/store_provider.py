"""The built-in episodic and semantic memory providers, kept in the store.

``soloflow_plugins.store_memory`` registers them as ``episodic`` and ``semantic``. Besides
the :class:`~soloflow_core.memory.MemoryProvider` methods they keep each item's forgetting
curve (:meth:`StoreMemoryProvider.reinforce`, :meth:`StoreMemoryProvider.prune`): they are
*retaining* providers (:class:`~soloflow_core.memory.tiers.RetainingProvider`).

Example:
    >>> episodic = StoreMemoryProvider(Store.open("sqlite:///sf.db"), tier="episodic")
    >>> [r.text for r in episodic.search("refund 1234", user_id="alice", agent_id="bot")]
    ['refund_payment {"order_id": "1234"} → refunded']
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import ConfigError
from soloflow_core.memory.decay import DEFAULT_THRESHOLD
from soloflow_core.memory.providers import MemoryProvider, MemoryRecord
from soloflow_core.store.memory_index import TIERS
from soloflow_core.store.memory_items import MemoryItem

if TYPE_CHECKING:
    from soloflow_core.store import Store

__all__ = ["StoreMemoryProvider"]


def _record(item: MemoryItem, user_id: str, agent_id: str) -> MemoryRecord:
    data: dict[str, Any] = {
        **item.data,
        "tier": item.tier,
        "key": item.key,
        "score": item.score,
        "retention": item.retention,
        "uses": item.uses,
        "archived": item.archived_at is not None,
    }
    return MemoryRecord(
        user_id=user_id, agent_id=agent_id, kind=item.kind, text=item.text, data=data, at=item.at
    )


class StoreMemoryProvider(MemoryProvider):
    """One memory tier (``episodic`` or ``semantic``) in a :class:`~soloflow_core.store.Store`.

    ``search`` first indexes what the namespace added since the last call (episodic: new
    runs of the ledger; semantic: new flow versions), then searches the full-text index.
    A returned record's ``data`` holds the item's own data (a run's ``run_id``, a tool call's
    ``tool`` and ``seq``, a flow's ``flow`` and ``version``) and ``tier``, ``key``, ``score``,
    ``retention``, ``uses``, ``archived``.

    Args:
        store: the store, or its URL (opened here, closed by :meth:`close`).
        tier: ``episodic`` or ``semantic``.
    """

    def __init__(self, store: Store | str | None = None, *, tier: str = "episodic") -> None:
        if tier not in TIERS:
            raise ConfigError(f"memory tier {tier!r} is not one of {', '.join(TIERS)}")
        self._owned = not hasattr(store, "engine")
        if self._owned:
            from soloflow_core.store import Store

            store = Store.open(store)  # type: ignore[arg-type]
        self.store: Store = store  # type: ignore[assignment]
        self.tier = tier
        self.items = self.store.memory

    def close(self) -> None:
        """Close the store if this provider opened it."""
        if self._owned:
            self.store.close()

    def record(self, item: MemoryRecord) -> None:
        self.items.add(
            self.tier,
            user_id=item.user_id,
            agent_id=item.agent_id,
            kind=item.kind,
            text=item.text,
            data=dict(item.data),
            at=item.at,
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str,
        limit: int = 10,
        include_archived: bool = False,
        now: datetime | None = None,
    ) -> list[MemoryRecord]:
        """The namespace's items holding any term of ``query``, best first; the newest
        first when the query has no terms (empty, or only words such as "the"). Archived
        items only with ``include_archived``."""
        self.items.refresh(self.tier, user_id=user_id, agent_id=agent_id)
        found = self.items.search(
            self.tier,
            query,
            user_id=user_id,
            agent_id=agent_id,
            limit=limit,
            include_archived=include_archived,
            now=now,
        )
        return [_record(i, user_id, agent_id) for i in found]

    def index_new_events(self, *, user_id: str, agent_id: str) -> int:
        """Index what the namespace added since the last call; how many runs (episodic) or
        flows (semantic)."""
        return self.items.refresh(self.tier, user_id=user_id, agent_id=agent_id)

    def reinforce(
        self, keys: Sequence[str], *, user_id: str, agent_id: str, now: datetime | None = None
    ) -> int:
        """Count a use of each item (``data["key"]`` of a found record): its stability grows
        (:func:`~soloflow_core.memory.decay.reinforce`), and an archived item comes back."""
        return self.items.reinforce(self.tier, keys, user_id=user_id, agent_id=agent_id, now=now)

    def prune(
        self,
        *,
        user_id: str,
        agent_id: str,
        threshold: float = DEFAULT_THRESHOLD,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        """Index what is new, then archive (flag, never delete) the items whose retention is
        below ``threshold``; returns their keys."""
        self.items.refresh(self.tier, user_id=user_id, agent_id=agent_id)
        return self.items.prune(
            self.tier,
            user_id=user_id,
            agent_id=agent_id,
            threshold=threshold,
            now=now,
            dry_run=dry_run,
        )

    async def arecord(self, item: MemoryRecord) -> None:
        await asyncio.to_thread(self.record, item)

    async def asearch(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str,
        limit: int = 10,
        include_archived: bool = False,
        now: datetime | None = None,
    ) -> list[MemoryRecord]:
        return await asyncio.to_thread(
            self.search,
            query,
            user_id=user_id,
            agent_id=agent_id,
            limit=limit,
            include_archived=include_archived,
            now=now,
        )

    async def areinforce(
        self, keys: Sequence[str], *, user_id: str, agent_id: str, now: datetime | None = None
    ) -> int:
        return await asyncio.to_thread(
            self.reinforce, keys, user_id=user_id, agent_id=agent_id, now=now
        )

    async def aprune(
        self,
        *,
        user_id: str,
        agent_id: str,
        threshold: float = DEFAULT_THRESHOLD,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        return await asyncio.to_thread(
            self.prune,
            user_id=user_id,
            agent_id=agent_id,
            threshold=threshold,
            now=now,
            dry_run=dry_run,
        )
