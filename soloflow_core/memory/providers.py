"""The memory-provider interface (record and search, each with an async twin)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import ConfigError
from soloflow_core.plugins import plugin_errors

if TYPE_CHECKING:
    import pluggy


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One remembered event, owned by a (user, agent) namespace."""

    user_id: str
    agent_id: str
    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


class MemoryProvider:
    """Stores and finds memory records. Subclasses implement ``record`` and ``search``."""

    def record(self, item: MemoryRecord) -> None:
        raise NotImplementedError("implement record(item) to store one MemoryRecord")

    def search(
        self, query: str, *, user_id: str, agent_id: str, limit: int = 10
    ) -> list[MemoryRecord]:
        raise NotImplementedError(
            "implement search(query, user_id=, agent_id=, limit=) returning the namespace's "
            "matching MemoryRecords, best first"
        )

    async def arecord(self, item: MemoryRecord) -> None:
        self.record(item)

    async def asearch(
        self, query: str, *, user_id: str, agent_id: str, limit: int = 10
    ) -> list[MemoryRecord]:
        return self.search(query, user_id=user_id, agent_id=agent_id, limit=limit)


class InMemoryProvider(MemoryProvider):
    """A process-local provider for tests: word-overlap search, newest first on ties."""

    def __init__(self) -> None:
        self._items: list[MemoryRecord] = []
        self._lock = threading.Lock()

    def record(self, item: MemoryRecord) -> None:
        with self._lock:
            self._items.append(item)

    def search(
        self, query: str, *, user_id: str, agent_id: str, limit: int = 10
    ) -> list[MemoryRecord]:
        words = {w for w in query.lower().split() if w}
        with self._lock:
            mine = [i for i in self._items if i.user_id == user_id and i.agent_id == agent_id]
        scored = [(len(words & set(i.text.lower().split())), n, i) for n, i in enumerate(mine)]
        scored = [s for s in scored if s[0] > 0 or not words]
        scored.sort(key=lambda s: (-s[0], -s[1]))
        return [i for _, _, i in scored[:limit]]


class MemoryProviderRegistry:
    """Provider name → factory. The first registration of a name wins."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., MemoryProvider]] = {}

    def register(self, name: str, factory: Callable[..., MemoryProvider]) -> None:
        if not callable(factory):
            raise TypeError(f"memory provider {name!r}: factory must be callable")
        self._factories.setdefault(name, factory)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def create(self, name: str, **options: Any) -> MemoryProvider:
        try:
            factory = self._factories[name]
        except KeyError:
            raise ConfigError(
                f"no memory provider named {name!r}; registered: {', '.join(self.names()) or 'none'}"
            ) from None
        return factory(**options)


def build_memory_registry(pm: pluggy.PluginManager) -> MemoryProviderRegistry:
    """Collect every plugin's ``soloflow_register_memory_providers``; ``in-memory`` is built in."""
    registry = MemoryProviderRegistry()
    with plugin_errors(pm, "soloflow_register_memory_providers"):
        pm.hook.soloflow_register_memory_providers(register=registry.register)
    registry.register("in-memory", InMemoryProvider)
    return registry
