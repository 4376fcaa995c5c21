"""A namespace's full-text index held in process: :class:`InvertedIndex`, ranked by the sum
of BM25 inverse document frequencies, and :class:`IndexCache`, bounded in memory.

An entry is to be used only with a check of its namespace's change counter (see
:meth:`~soloflow_core.store.fulltext.FullTextIndex.counter_sql`).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

INDEX_CACHE_BYTES = 64 << 20
"""What :class:`IndexCache` keeps in one process by default (estimated): about fourteen
namespaces of 10,000 flows like the lookup benchmark's (4.5 MB each)."""
_HELD_BITS = 64


@dataclass(frozen=True, slots=True, eq=False)
class TermScores:
    """What :meth:`InvertedIndex.score` finds for the query ``terms``: ``scores[i]``, the sum
    of the BM25 inverse document frequencies of the terms row ``i`` holds (0: none);
    ``held[i]``, which ones (bit ``j`` for ``terms[j]``)."""

    terms: tuple[str, ...]
    scores: np.ndarray[Any, np.dtype[np.float64]]
    held: np.ndarray[Any, np.dtype[np.uint64]]

    def ranked(self, n: int | None = None) -> np.ndarray[Any, np.dtype[np.intp]]:
        """The positions of the rows holding any term, best score first, ties by position;
        the first ``n`` of them (all when None)."""
        hits = np.flatnonzero(self.scores > 0)
        if n is not None and len(hits) > n:
            # Only the best n (and whatever ties the n-th) are sorted.
            scores = self.scores[hits]
            nth = np.partition(scores, len(scores) - n)[len(scores) - n]
            hits = hits[scores >= nth]
        best = hits[np.lexsort((hits, -self.scores[hits]))]
        return best if n is None else best[:n]

    def held_terms(self, position: int) -> list[str]:
        """The query's terms row ``position`` holds, in query order."""
        return self.terms_of(int(self.held[position]))

    def terms_of(self, bits: int) -> list[str]:
        """The query's terms of a :attr:`held` value, in query order."""
        out = []
        while bits:
            low = bits & -bits
            out.append(self.terms[low.bit_length() - 1])
            bits ^= low
        return out


@dataclass(frozen=True, slots=True, eq=False)
class InvertedIndex:
    """One namespace's indexed rows, held in process, as of its change counter ``changes``.

    Row ``i`` (its position) is ``rows[i]``: whatever the caller keeps of it. The positions of
    the rows holding a term are ``positions[offsets[k]:offsets[k + 1]]``, ascending, where
    ``k = term_ids[term]``: one array for all the postings, not an array per term (a term
    held by one row costs a dictionary entry and eight bytes).
    """

    changes: int
    rows: Sequence[Any]
    term_ids: dict[str, int]
    offsets: np.ndarray[Any, np.dtype[np.int64]]
    positions: np.ndarray[Any, np.dtype[np.int32]]
    nbytes: int
    """An estimate of the memory it takes, the caller's ``rows`` included."""

    @staticmethod
    def build(
        changes: int, texts: Sequence[str], rows: Sequence[Any], *, rows_nbytes: int = 0
    ) -> InvertedIndex:
        """The index of ``rows`` whose indexed texts (:func:`~soloflow_core.store.fulltext.index_text` output) are
        ``texts``, in the same order; ``rows_nbytes`` estimates what ``rows`` take."""
        # A new term gets the next number: the lookups below stay in C.
        numbers: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        number = numbers.__getitem__
        ids: list[int] = []
        per_row: list[int] = []
        for text in texts:
            held = list(map(number, set(text.split())))
            ids.extend(held)
            per_row.append(len(held))
        term_ids = dict(numbers)
        term_of = np.array(ids, dtype=np.int32)
        order = np.argsort(term_of, kind="stable")  # stable: each term's rows stay ascending
        positions = np.repeat(np.arange(len(texts), dtype=np.int32), per_row)[order]
        offsets = np.zeros(len(term_ids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_of, minlength=len(term_ids)), out=offsets[1:])
        # A dictionary entry and its string: ~100 bytes and the characters.
        terms_nbytes = sum(len(term) for term in term_ids) + 100 * len(term_ids)
        return InvertedIndex(
            changes=changes,
            rows=rows,
            term_ids=term_ids,
            offsets=offsets,
            positions=positions,
            nbytes=positions.nbytes + offsets.nbytes + terms_nbytes + rows_nbytes,
        )

    def __len__(self) -> int:
        return len(self.rows)

    def postings(self, term: str) -> np.ndarray[Any, np.dtype[np.int32]]:
        """The positions of the rows holding ``term``, ascending."""
        k = self.term_ids.get(term)
        if k is None:
            return self.positions[:0]
        return self.positions[self.offsets[k] : self.offsets[k + 1]]

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of ``term`` (0 when no row holds it)."""
        n = len(self.postings(term))
        return math.log(1.0 + (len(self.rows) - n + 0.5) / (n + 0.5)) if n else 0.0

    def score(self, terms: Sequence[str]) -> TermScores:
        """Every row's score for the query ``terms`` (distinct; the first 64 count)."""
        query = tuple(dict.fromkeys(terms))[:_HELD_BITS]
        scores = np.zeros(len(self.rows), dtype=np.float64)
        held = np.zeros(len(self.rows), dtype=np.uint64)
        n = len(self.rows)
        for j, term in enumerate(query):
            k = self.term_ids.get(term)
            if k is None:
                continue
            rows = self.positions[self.offsets[k] : self.offsets[k + 1]]
            scores[rows] += math.log(1.0 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            held[rows] |= np.uint64(1 << j)
        return TermScores(terms=query, scores=scores, held=held)


class IndexCache:
    """The :class:`InvertedIndex` of the namespaces of one database most recently searched by
    one process, at most ``max_bytes`` of them together (estimated; the least recently
    searched go first, but the latest one put always stays).

    An entry is to be used only with a check of its namespace's change counter in the
    statement that reads its rows' changing fields (see the module docstring).
    Entries are keyed by namespace token: one namespace's entry is never read for another.
    """

    def __init__(self, max_bytes: int = INDEX_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[str, InvertedIndex] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, namespace: str) -> InvertedIndex | None:
        with self._lock:
            index = self._entries.get(namespace)
            if index is not None:
                self._entries.move_to_end(namespace)
            return index

    def put(self, namespace: str, index: InvertedIndex) -> None:
        """Keep ``index`` for ``namespace`` unless the entry held is of a later change."""
        with self._lock:
            current = self._entries.get(namespace)
            if current is not None and current.changes > index.changes:
                return
            if current is not None:
                self.nbytes -= current.nbytes
            self._entries[namespace] = index
            self._entries.move_to_end(namespace)
            self.nbytes += index.nbytes
            while self.nbytes > self.max_bytes and len(self._entries) > 1:
                self.nbytes -= self._entries.popitem(last=False)[1].nbytes

    def discard(self, namespace: str) -> None:
        with self._lock:
            index = self._entries.pop(namespace, None)
            if index is not None:
                self.nbytes -= index.nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0
