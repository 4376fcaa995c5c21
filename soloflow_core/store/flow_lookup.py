"""Procedural-memory lookup: a namespace's latest flow versions ranked in process.

:func:`find_candidates` answers
:meth:`~soloflow_core.store.flows.FlowRepository.find_flow_candidates`. Each store keeps,
per namespace, an :class:`~soloflow_core.store.inverted_index.InvertedIndex` of the latest flow
versions' indexed text (:func:`load_flow_index`) in an
:class:`~soloflow_core.store.inverted_index.IndexCache`, ranks every flow there (BM25 inverse
document frequencies of the query's terms), and reads only the best ones' changing fields —
confidence, status, latest flag — by id, with the namespace's change counter, in one
statement. A counter that moved since the index was read (any writer, any process) makes the
lookup read the index again.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from soloflow_core.store.fulltext import CHANGES, FullTextIndex, namespace_token
from soloflow_core.store.inverted_index import IndexCache, InvertedIndex

if TYPE_CHECKING:
    from soloflow_core.store.database import Database

FLOW_SEARCH = FullTextIndex("sf_flows", "search_text")
"""The full-text index of the latest flow versions."""


@dataclass(frozen=True, slots=True)
class LookupCandidate:
    """A flow version found by :func:`find_candidates`: its ranking
    fields (a :class:`FlowMeta`'s, without the record's dates and counts)."""

    name: str
    version: int
    source: str
    status: str
    confidence: float
    trigger_keywords: tuple[str, ...]
    skill_keys: tuple[str, ...]
    terms: frozenset[str]
    """The query's terms its index holds."""
    rank: float
    """Its text rank: the sum of the BM25 inverse document frequencies (in the namespace) of
    the query's terms its index holds. Higher is better."""


class IndexedFlow(NamedTuple):
    """What the lookup index keeps of a flow version in process: the fields that do not
    change while its namespace's change counter stays (its definition's, and the trigger
    keywords, whose change re-indexes). Confidence and status are read per lookup."""

    key: int
    name: str
    version: int
    source: str
    trigger_keywords: tuple[str, ...]
    skill_keys: tuple[str, ...]


_LOOKUP_ATTEMPTS = 3
"""A lookup reloads a namespace's index at most this often when its counter keeps moving
(a write between reading the index and reading the candidates); then it answers from the
last one read."""
_MAX_BATCH = 4096


def _index_sql(dialect: str) -> str:
    """The statement reading a namespace's lookup index (its latest versions) and its change
    counter, in one snapshot; a first row of NULLs with the counter when it has no flow.
    Parameters: namespace token, :data:`CHANGES`, user, agent."""
    m = "?" if dialect == "sqlite" else "%s"
    # JSON as text on PostgreSQL too: decoded here in one call, not one per value.
    json = "" if dialect == "sqlite" else "::text"
    return (
        f"SELECT {FLOW_SEARCH.counter_sql(m)} AS changes, f.id, f.name, f.version, f.source, "
        f"f.trigger_keywords{json}, f.skill_keys{json}, f.search_text FROM (SELECT 1) AS one "
        f"LEFT JOIN {FLOW_SEARCH.table} AS f ON f.user_id = {m} AND f.agent_id = {m} "
        "AND f.is_latest"
    )


@lru_cache(maxsize=32)
def _fields_sql(dialect: str, keys: int) -> str:
    """The statement reading the changing fields of flow rows by id (``keys`` of them on
    SQLite; an array on PostgreSQL), with the namespace's change counter in the same
    snapshot. Parameters: namespace token, :data:`CHANGES`, the ids, user, agent."""
    if dialect == "sqlite":  # ``+``: by the primary key, not the namespace's index
        m, ids, ns = "?", f"f.id IN ({', '.join('?' * keys)})", "+f.user_id = ? AND +f.agent_id = ?"
    else:
        m, ids, ns = "%s", "f.id = ANY(%s)", "f.user_id = %s AND f.agent_id = %s"
    return (
        f"SELECT {FLOW_SEARCH.counter_sql(m)} AS changes, f.id, f.confidence, f.status, "
        f"f.is_latest FROM (SELECT 1) AS one LEFT JOIN {FLOW_SEARCH.table} AS f ON {ids} "
        f"AND {ns}"
    )


_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_list(value: Any) -> tuple[str, ...]:
    """A JSON list column as SQLite (text) or psycopg (decoded) returns it, as a tuple."""
    if isinstance(value, str):
        try:  # the decoder's scanner, without json.loads' wrapping (a third of its time)
            value = _scan_json(value, 0)[0]
        except StopIteration:
            value = json.loads(value)
    return tuple(value) if isinstance(value, list) else ()


def _json_lists(values: list[Any]) -> list[Any]:
    """:func:`_json_list` of many values (lists as psycopg returns them, else JSON text), the
    text decoded in one call."""
    if all(isinstance(v, list) for v in values):
        return values
    if all(isinstance(v, str) for v in values):
        try:
            decoded = json.loads("[" + ",".join(values) + "]")
            return [v if isinstance(v, list) else [] for v in decoded]
        except ValueError:
            pass
    return [_json_list(v) for v in values]


@contextmanager
def _read_cursor(db: Database) -> Iterator[Any]:
    """A driver cursor for reads, each statement its own snapshot: SQLite's connections run
    without an open transaction; PostgreSQL's in autocommit (no BEGIN or ROLLBACK round
    trips)."""
    raw = db.driver_connection()
    driver: Any = raw.driver_connection
    sqlite = db.dialect == "sqlite"
    try:
        if not sqlite:
            driver.autocommit = True
        cur = driver.cursor()
        try:
            yield cur
        finally:
            cur.close()
    finally:
        try:
            if not sqlite:
                driver.autocommit = False
        finally:
            raw.close()


def load_flow_index(cur: Any, dialect: str, *, user_id: str, agent_id: str) -> InvertedIndex:
    """The namespace's lookup index: an :class:`InvertedIndex` of its latest flow versions'
    indexed text (retired and unsure ones included: they count in the terms' document
    frequencies), rows :class:`IndexedFlow` by name, as of the change counter read in the
    same statement."""
    cur.execute(
        _index_sql(dialect), (namespace_token(user_id, agent_id), CHANGES, user_id, agent_id)
    )
    rows = cur.fetchall()
    collecting = gc.isenabled()
    gc.disable()  # tens of thousands of new tuples, none cyclic: no collection passes meanwhile
    try:
        return _build_flow_index(rows)
    finally:
        if collecting:
            gc.enable()


def _build_flow_index(rows: list[Any]) -> InvertedIndex:
    changes = int(rows[0][0])
    rows = sorted((r for r in rows if r[1] is not None), key=lambda r: r[2])  # ties rank by name
    strings: dict[str, str] = {}
    same = strings.setdefault  # one string object per distinct keyword, tool or source
    keywords = _json_lists([r[5] for r in rows])
    skills = _json_lists([r[6] for r in rows])
    flows = [
        IndexedFlow(
            r[1],
            r[2],
            r[3],
            source=same(r[4], r[4]),
            trigger_keywords=tuple(map(same, k, k)),
            skill_keys=tuple(map(same, s, s)),
        )
        for r, k, s in zip(rows, keywords, skills, strict=True)
    ]
    # Calibrated with tracemalloc (4.5 MB for the benchmark's 10,000 flows): ~270 bytes a flow,
    # its name and its tuples' slots; each distinct string once.
    nbytes = sum(
        270 + len(f.name) + 8 * (len(f.trigger_keywords) + len(f.skill_keys)) for f in flows
    )
    nbytes += sum(50 + len(text) for text in strings)
    return InvertedIndex.build(changes, [r[7] or "" for r in rows], flows, rows_nbytes=nbytes)


def _read_fields(
    cur: Any, dialect: str, keys: list[int], *, ns: str, user_id: str, agent_id: str
) -> tuple[int, dict[int, tuple[Any, ...]]]:
    """(the namespace's change counter, id → (confidence, status, is_latest)) of the flow rows
    ``keys`` of the namespace, in one statement."""
    if dialect == "sqlite":
        size = 8
        while size < len(keys):
            size *= 2
        # A few statement texts (sizes 8, 16, 32, ...) for sqlite3's statement cache; id 0 is none.
        cur.execute(
            _fields_sql(dialect, size),
            (ns, CHANGES, *keys, *[0] * (size - len(keys)), user_id, agent_id),
        )
    else:
        cur.execute(_fields_sql(dialect, 0), (ns, CHANGES, keys or [0], user_id, agent_id))
    rows = cur.fetchall()
    return int(rows[0][0]), {row[1]: row[2:] for row in rows if row[1] is not None}


def _pick_candidates(
    cur: Any,
    dialect: str,
    index: InvertedIndex,
    *,
    terms: Sequence[str],
    ns: str,
    user_id: str,
    agent_id: str,
    min_confidence: float,
    limit: int,
) -> tuple[list[LookupCandidate], bool]:
    """The ``limit`` best candidates by ``index`` whose changing fields (read by id, best first,
    a batch a statement) pass; and whether the namespace's counter is still the index's."""
    scores = index.score(terms)
    order = scores.ranked(limit)
    flows: list[IndexedFlow] = index.rows  # type: ignore[assignment]
    sets: dict[int, frozenset[str]] = {}  # many candidates hold the same terms

    def held(bits: int) -> frozenset[str]:
        terms = sets.get(bits)
        if terms is None:
            terms = sets[bits] = frozenset(scores.terms_of(bits))
        return terms

    found: list[LookupCandidate] = []
    everything = len(order) < limit  # every flow holding a term is in ``order``
    done, batch = 0, limit
    while True:
        positions = order[done : done + batch].tolist()
        changes, fields = _read_fields(
            cur,
            dialect,
            [flows[p].key for p in positions],
            ns=ns,
            user_id=user_id,
            agent_id=agent_id,
        )
        if changes != index.changes:
            return found, False
        for p in positions:
            flow = flows[p]
            live = fields.get(flow.key)
            if live is None:
                continue
            confidence, status, latest = live
            if not latest or status == "retired" or confidence < min_confidence:
                continue
            found.append(
                LookupCandidate(
                    name=flow.name,
                    version=flow.version,
                    source=flow.source,
                    status=status,
                    confidence=float(confidence),
                    trigger_keywords=flow.trigger_keywords,
                    skill_keys=flow.skill_keys,
                    terms=held(int(scores.held[p])),
                    rank=float(scores.scores[p]),
                )
            )
            if len(found) == limit:
                return found, True
        done += len(positions)
        if done == len(order):
            if everything:
                return found, True
            # Some of the best were left out (unsure, retired): the rest, in the same order.
            order, everything = scores.ranked(), True
            if done == len(order):
                return found, True
        batch = min(_MAX_BATCH, 4 * batch)


def find_candidates(
    db: Database,
    cache: IndexCache,
    terms: Sequence[str],
    *,
    user_id: str,
    agent_id: str,
    min_confidence: float,
    limit: int,
) -> list[LookupCandidate]:
    """The ``limit`` best latest, non-retired flow versions of the namespace holding any of
    ``terms`` with confidence ≥ ``min_confidence``, best first (see
    :meth:`~soloflow_core.store.flows.FlowRepository.find_flow_candidates`), through
    ``db`` (reads only) and the namespace's index in ``cache``."""
    if not terms or limit <= 0:
        return []
    dialect = db.dialect
    ns = namespace_token(user_id, agent_id)
    found: list[LookupCandidate] = []
    with _read_cursor(db) as cur:
        index = cache.get(ns)
        for _ in range(_LOOKUP_ATTEMPTS):
            if index is None:
                index = load_flow_index(cur, dialect, user_id=user_id, agent_id=agent_id)
                cache.put(ns, index)
            found, current = _pick_candidates(
                cur,
                dialect,
                index,
                terms=terms,
                ns=ns,
                user_id=user_id,
                agent_id=agent_id,
                min_confidence=min_confidence,
                limit=limit,
            )
            if current:
                break
            index = None
    return found
