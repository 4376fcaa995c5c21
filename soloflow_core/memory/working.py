"""Working memory: a small, thread-safe LRU cache per process, keyed per (user, agent).

It holds what an agent is working with right now (the current task's facts, recent tool
results) and nothing survives the process. Namespaces share the capacity but never see each
other's entries: every method takes the caller's ``user_id`` and ``agent_id``.

Example:
    >>> wm = WorkingMemory(capacity=2)
    >>> wm.put("order", "order 1234, damaged", user_id="alice", agent_id="bot")
    >>> wm.get("order", user_id="alice", agent_id="bot")
    'order 1234, damaged'
    >>> wm.get("order", user_id="bob", agent_id="bot") is None
    True
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from soloflow_core.store.fulltext import scan_window, search_terms, tokenize

__all__ = ["DEFAULT_CAPACITY", "WorkingEntry", "WorkingMemory"]

DEFAULT_CAPACITY = 1024
"""Entries kept per process (all namespaces together) unless told otherwise."""

_Key = tuple[str, str, Hashable]


@dataclass(frozen=True, slots=True)
class WorkingEntry:
    """One entry found by :meth:`WorkingMemory.search`."""

    key: Hashable
    value: Any
    score: float
    """How many of the query's terms the entry's key and value hold."""


def _text(key: Hashable, value: Any) -> str:
    body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return f"{key} {body}"


class WorkingMemory:
    """A size-bounded LRU map per process; the least recently used entry goes first.

    ``put`` and ``get`` mark an entry as used. All methods take one lock: safe to share
    between an agent's worker threads.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be an integer ≥ 1, got {capacity!r}")
        self.capacity = capacity
        self.evictions = 0
        """How many entries were pushed out to make room."""
        self._entries: OrderedDict[_Key, Any] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: Hashable, value: Any, *, user_id: str, agent_id: str) -> None:
        """Store ``value`` under ``key`` (replacing it) as the most recently used entry."""
        k = (user_id, agent_id, key)
        with self._lock:
            self._entries[k] = value
            self._entries.move_to_end(k)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
                self.evictions += 1

    def get(self, key: Hashable, default: Any = None, *, user_id: str, agent_id: str) -> Any:
        """The value under ``key`` (marked as used), else ``default``."""
        k = (user_id, agent_id, key)
        with self._lock:
            if k not in self._entries:
                return default
            self._entries.move_to_end(k)
            return self._entries[k]

    def discard(self, key: Hashable, *, user_id: str, agent_id: str) -> bool:
        """Remove ``key``; whether it was there."""
        with self._lock:
            return self._entries.pop((user_id, agent_id, key), _MISSING) is not _MISSING

    def items(self, *, user_id: str, agent_id: str) -> list[tuple[Hashable, Any]]:
        """The namespace's entries, most recently used first (none is marked as used)."""
        with self._lock:
            return [
                (k[2], v)
                for k, v in reversed(self._entries.items())
                if k[0] == user_id and k[1] == agent_id
            ]

    def clear(self, *, user_id: str, agent_id: str) -> int:
        """Forget the namespace's entries; how many there were."""
        with self._lock:
            mine = [k for k in self._entries if k[0] == user_id and k[1] == agent_id]
            for k in mine:
                del self._entries[k]
            return len(mine)

    def search(
        self, query: str, *, user_id: str, agent_id: str, limit: int = 10
    ) -> list[WorkingEntry]:
        """The namespace's entries whose key or value holds any term of ``query`` (the
        full-text tokenizer's terms: any language; a long query is read by its ends), most
        terms first, then most recently used. An empty query lists the most recent ones.
        Found entries are marked as used."""
        if limit <= 0:
            return []
        terms = set(search_terms(query)) if isinstance(query, str) else set()
        found: list[WorkingEntry] = []
        for key, value in self.items(user_id=user_id, agent_id=agent_id):
            score = len(terms & set(tokenize(scan_window(_text(key, value))))) if terms else 0
            if score or not terms:
                found.append(WorkingEntry(key=key, value=value, score=float(score)))
        found.sort(key=lambda e: -e.score)  # stable: recency breaks ties
        found = found[:limit]
        with self._lock:
            for e in found:
                k = (user_id, agent_id, e.key)
                if k in self._entries:
                    self._entries.move_to_end(k)
        return found

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_MISSING = object()
