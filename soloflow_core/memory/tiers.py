"""Memory tiers: working (this process), episodic (the ledger's events), semantic (flows).

:class:`MemoryTiers` puts the three behind one ``search`` and one ``prune``:

- **working** — :class:`~soloflow_core.memory.working.WorkingMemory`, an LRU cache per process;
- **episodic** — what happened: each run's task and tool calls (names, arguments, outputs,
  errors), full-text searchable;
- **semantic** — what is known: the registered flows (name, description, steps, tools,
  input templates).

The episodic and semantic tiers are memory providers picked by name from the plugins'
``soloflow_register_memory_providers`` (built in: ``episodic`` and ``semantic``, kept in the
store by ``soloflow_plugins.store_memory``): a plugin registering the same name replaces one.
A provider that also has ``reinforce`` and ``prune`` (a :class:`RetainingProvider`) keeps
each item's forgetting curve (:mod:`~soloflow_core.memory.decay`); others are searched only.

Example:
    >>> memory = MemoryTiers(Store.open("sqlite:///sf.db"))
    >>> for hit in memory.search("refund order 1234", user_id="alice", agent_id="bot"):
    ...     print(hit.tier, hit.kind, hit.text)
    episodic tool_call refund_payment {"order_id": "1234"} → refunded
    >>> memory.prune(user_id="alice", agent_id="bot", threshold=0.2).archived
    {'episodic': [...], 'semantic': []}
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from soloflow_core.errors import ConfigError
from soloflow_core.memory.decay import DEFAULT_THRESHOLD
from soloflow_core.memory.providers import (
    MemoryProvider,
    MemoryProviderRegistry,
    MemoryRecord,
    build_memory_registry,
)
from soloflow_core.memory.working import WorkingMemory
from soloflow_core.plugins import get_plugin_manager

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.store import Store

__all__ = ["TIERS", "MemoryHit", "MemoryTiers", "PruneReport", "RetainingProvider"]

TIERS = ("working", "episodic", "semantic")
_STORED = ("episodic", "semantic")
_BOOKKEEPING = frozenset({"key", "score", "retention", "archived", "tier", "uses"})


@runtime_checkable
class RetainingProvider(Protocol):
    """A provider that keeps a forgetting curve per item. Its ``search`` also takes
    ``include_archived=`` and ``now=``, and each record it returns has ``data["key"]``."""

    def reinforce(
        self, keys: Sequence[str], *, user_id: str, agent_id: str, now: datetime | None = None
    ) -> int: ...

    def prune(
        self,
        *,
        user_id: str,
        agent_id: str,
        threshold: float = DEFAULT_THRESHOLD,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One item found by :meth:`MemoryTiers.search`."""

    tier: str
    kind: str
    text: str
    key: str | None
    """The item's key in its tier (None from a provider that keeps none)."""
    score: float | None
    """The tier's own rank, higher is better; comparable only within a tier."""
    retention: float | None
    """What the forgetting curve leaves of it, 0..1 (None: the provider keeps no curve)."""
    archived: bool
    at: datetime | None
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "kind": self.kind,
            "text": self.text,
            "key": self.key,
            "score": self.score,
            "retention": self.retention,
            "archived": self.archived,
            "at": None if self.at is None else self.at.isoformat(),
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What :meth:`MemoryTiers.prune` archived (or would have, with ``dry_run``)."""

    threshold: float
    now: datetime
    dry_run: bool
    archived: dict[str, list[str]] = field(default_factory=dict)
    """Tier → keys of the items archived."""
    skipped: list[str] = field(default_factory=list)
    """Tiers whose provider keeps no forgetting curve (not a :class:`RetainingProvider`)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "now": self.now.isoformat(),
            "dry_run": self.dry_run,
            "archived": {k: len(v) for k, v in self.archived.items()},
            "keys": {k: v[:100] for k, v in self.archived.items()},
            "skipped": self.skipped,
        }


def _hit(tier: str, r: MemoryRecord, position: int) -> MemoryHit:
    d = r.data if isinstance(r.data, dict) else {}
    key, score, kept = d.get("key"), d.get("score"), d.get("retention")
    return MemoryHit(
        tier=tier,
        kind=r.kind,
        text=r.text,
        key=key if isinstance(key, str) else None,
        score=float(score) if isinstance(score, int | float) else -float(position),
        retention=float(kept) if isinstance(kept, int | float) else None,
        archived=bool(d.get("archived", False)),
        at=r.at,
        data={k: v for k, v in d.items() if k not in _BOOKKEEPING},
    )


def tiers_of(tiers: str | Sequence[str]) -> list[str]:
    """``"all"``, one tier or several, checked, in :data:`TIERS` order.

    Raises:
        ConfigError: an unknown tier.
    """
    names = [tiers] if isinstance(tiers, str) else list(tiers)
    if "all" in names:
        return list(TIERS)
    unknown = [n for n in names if n not in TIERS]
    if unknown:
        raise ConfigError(f"unknown memory tier {unknown[0]!r}: use {', '.join(TIERS)} or all")
    return [n for n in TIERS if n in names]


class MemoryTiers:
    """The working, episodic and semantic memory of an agent, by (user, agent) namespace.

    Args:
        store: the store the built-in providers keep their items in.
        registry: where providers are looked up by name; default
            :func:`~soloflow_core.memory.build_memory_registry` of ``pm``.
        pm: the plugin manager for the default registry (default: a new one with every
            installed plugin).
        episodic, semantic: each tier's provider: a registered name, or a provider object.
        options: tier → keyword arguments for its provider's factory; default ``{"store":
            store}`` (give ``{}`` for a factory that takes none, such as ``in-memory``).
        working: the working memory (default: a new one of 1,024 entries).
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        registry: MemoryProviderRegistry | None = None,
        pm: pluggy.PluginManager | None = None,
        episodic: str | MemoryProvider = "episodic",
        semantic: str | MemoryProvider = "semantic",
        options: Mapping[str, Mapping[str, Any]] | None = None,
        working: WorkingMemory | None = None,
    ) -> None:
        self.working = working if working is not None else WorkingMemory()
        options = options or {}
        chosen = {"episodic": episodic, "semantic": semantic}
        if registry is None and any(isinstance(v, str) for v in chosen.values()):
            registry = build_memory_registry(pm if pm is not None else get_plugin_manager())
        providers: dict[str, MemoryProvider] = {}
        for tier, spec in chosen.items():
            if not isinstance(spec, str):
                providers[tier] = spec
                continue
            opts = options.get(tier, {} if store is None else {"store": store})
            providers[tier] = registry.create(spec, **opts)  # type: ignore[union-attr]
        self.episodic = providers["episodic"]
        self.semantic = providers["semantic"]

    def provider(self, tier: str) -> MemoryProvider:
        """The provider of ``episodic`` or ``semantic``."""
        if tier not in _STORED:
            raise ConfigError(f"memory tier {tier!r} has no provider: use episodic or semantic")
        return self.episodic if tier == "episodic" else self.semantic

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str,
        tiers: str | Sequence[str] = "all",
        limit: int = 10,
        include_archived: bool = False,
        reinforce: bool = True,
        now: datetime | None = None,
    ) -> list[MemoryHit]:
        """The namespace's items that fit ``query``: at most ``limit`` per tier, grouped by
        tier (working, episodic, semantic), each tier's best first. Never raises on odd text
        (empty, any language, 1 MB, query syntax).

        Args:
            tiers: ``"all"``, a tier name, or several.
            include_archived: also pruned items (retaining providers).
            reinforce: count each found item as a use: its working-memory entry becomes the
                most recent, its forgetting curve is reinforced (an archived one comes back).
        """
        found: list[MemoryHit] = []
        for tier in tiers_of(tiers):
            if tier == "working":
                for e in self.working.search(
                    query, user_id=user_id, agent_id=agent_id, limit=limit
                ):
                    found.append(
                        MemoryHit(
                            tier="working",
                            kind="working",
                            text=str(e.value),
                            key=str(e.key),
                            score=e.score,
                            retention=None,
                            archived=False,
                            at=None,
                            data={},
                        )
                    )
                continue
            provider = self.provider(tier)
            if isinstance(provider, RetainingProvider):
                records = provider.search(
                    query,
                    user_id=user_id,
                    agent_id=agent_id,
                    limit=limit,
                    include_archived=include_archived,
                    now=now,
                )  # type: ignore[call-arg]
            else:
                records = provider.search(query, user_id=user_id, agent_id=agent_id, limit=limit)
            hits = [_hit(tier, r, n) for n, r in enumerate(records[:limit])]
            found.extend(hits)
            keys = [h.key for h in hits if h.key is not None]
            if reinforce and keys and isinstance(provider, RetainingProvider):
                provider.reinforce(keys, user_id=user_id, agent_id=agent_id, now=now)
        return found

    def prune(
        self,
        *,
        user_id: str,
        agent_id: str,
        threshold: float = DEFAULT_THRESHOLD,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> PruneReport:
        """Archive (flag, never delete) the namespace's episodic and semantic items whose
        retention is below ``threshold`` at ``now``. Working memory is not pruned: it is
        bounded by its capacity.

        Raises:
            ConfigError: ``threshold`` is not within [0, 1].
        """
        if not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be a number within [0, 1], got {threshold!r}")
        now = now or datetime.now(UTC)
        report = PruneReport(threshold=float(threshold), now=now, dry_run=dry_run)
        for tier in _STORED:
            provider = self.provider(tier)
            if not isinstance(provider, RetainingProvider):
                report.skipped.append(tier)
                continue
            report.archived[tier] = provider.prune(
                user_id=user_id, agent_id=agent_id, threshold=threshold, now=now, dry_run=dry_run
            )
        return report

    async def asearch(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str,
        tiers: str | Sequence[str] = "all",
        limit: int = 10,
        include_archived: bool = False,
        reinforce: bool = True,
        now: datetime | None = None,
    ) -> list[MemoryHit]:
        return await asyncio.to_thread(
            self.search,
            query,
            user_id=user_id,
            agent_id=agent_id,
            tiers=tiers,
            limit=limit,
            include_archived=include_archived,
            reinforce=reinforce,
            now=now,
        )

    async def aprune(
        self,
        *,
        user_id: str,
        agent_id: str,
        threshold: float = DEFAULT_THRESHOLD,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> PruneReport:
        return await asyncio.to_thread(
            self.prune,
            user_id=user_id,
            agent_id=agent_id,
            threshold=threshold,
            now=now,
            dry_run=dry_run,
        )
