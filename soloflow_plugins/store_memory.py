"""Built-in memory providers: the ``episodic`` and ``semantic`` tiers, kept in the store.

``episodic`` holds the ledger's events (each run's task and tool calls), ``semantic`` the
registered flows; both are full-text searchable per (user, agent) namespace and keep a
forgetting curve per item (see ``docs/memory.md``). The factories take the store
(``store=``, a :class:`~soloflow_core.store.Store` or a database URL). A plugin that
registers either name first replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from soloflow_core import hookimpl

if TYPE_CHECKING:
    from soloflow_core.memory.store_provider import StoreMemoryProvider
    from soloflow_core.store import Store


def episodic(store: Store | str | None = None) -> StoreMemoryProvider:
    """The ledger's events of a namespace: tasks, tool calls, errors."""
    from soloflow_core.memory.store_provider import StoreMemoryProvider

    return StoreMemoryProvider(store, tier="episodic")


def semantic(store: Store | str | None = None) -> StoreMemoryProvider:
    """The registered flows of a namespace: names, descriptions, steps, templates."""
    from soloflow_core.memory.store_provider import StoreMemoryProvider

    return StoreMemoryProvider(store, tier="semantic")


@hookimpl(trylast=True)
def soloflow_register_memory_providers(register: Callable[[str, Callable[..., Any]], None]) -> None:
    register("episodic", episodic)
    register("semantic", semantic)
