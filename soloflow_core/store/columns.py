"""Reading a namespace's tool-name sequences as integer-coded numpy columns, for mining at
scale (:meth:`~soloflow_core.store.runs.RunRepository.read_tool_names`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from soloflow_core.errors import StoreError
from soloflow_core.models.ledger import utc_instant
from soloflow_core.store import schema as t

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from soloflow_core.store.database import Database


@dataclass(frozen=True, slots=True)
class ToolNameColumns:
    """A namespace's runs as arrays, oldest first: what a miner reads (see
    :meth:`Store.read_tool_names`). ``R`` runs, ``C`` tool calls in all.

    Run ``r``'s calls are ``codes[offsets[r]:offsets[r + 1]]``, and ``names[code]`` is a
    call's tool name: ``CodedLedger(codes, offsets, names)`` in
    :mod:`soloflow_core.mining.fast` is this ledger.
    """

    run_pks: npt.NDArray[np.int64]
    """``(R,)`` the runs' store keys, ascending (the order they were stored in)."""
    run_ids: list[str]
    """``R`` run ids."""
    offsets: npt.NDArray[np.int64]
    """``(R + 1,)`` where each run's calls start in ``codes``; ``offsets[-1] == C``."""
    codes: npt.NDArray[np.int64]
    """``(C,)`` each call's tool, as an index into ``names``."""
    names: list[str]
    """The distinct tool names, in order of first appearance."""
    errors: npt.NDArray[np.bool_]
    """``(C,)`` True where the call errored (False for false or unknown)."""
    success: npt.NDArray[np.int8]
    """``(R,)`` 1 for a run that succeeded, 0 for one that failed, -1 when unknown."""
    cost: npt.NDArray[np.float64]
    """``(R,)`` the run's cost, NaN when unknown."""
    tokens: npt.NDArray[np.float64]
    """``(R,)`` the run's total tokens, NaN when unknown."""

    @property
    def run_count(self) -> int:
        return len(self.run_pks)


# ---------------------------------------------------------------------- reading name columns

_CALLS_PER_READ = 1 << 18
_SEP = "\x1f"


class _Vocabulary(dict[str, int]):
    """Tool name → code, a new name taking the next code."""

    def __missing__(self, name: str) -> int:
        code = self[name] = len(self)
        return code


def read_tool_names(
    db: Database, user: str, agent: str, *, lookback: int | None, include_failed: bool
) -> ToolNameColumns:
    """See :meth:`~soloflow_core.store.runs.RunRepository.read_tool_names`."""
    with db.read() as conn:
        return _read_tool_names(
            conn, user, agent, db=db, lookback=lookback, include_failed=include_failed
        )


def _read_tool_names(
    conn: Connection,
    user: str,
    agent: str,
    *,
    db: Database,
    lookback: int | None,
    include_failed: bool,
) -> ToolNameColumns:
    c = t.task_runs.c
    min_pk = 0
    if lookback is not None:
        newest = sa.select(c.id).where(c.user_id == user, c.agent_id == agent)
        newest = newest.order_by(c.id.desc()).limit(1).offset(max(lookback, 1) - 1)
        min_pk = conn.execute(newest).scalar() or 0
    fast = conn.dialect.name == "sqlite"
    runs = (
        _sqlite_run_columns(conn, user, agent, min_pk=min_pk) if fast else None
    ) or _run_columns(conn, user, agent, min_pk=min_pk)
    import numpy as np

    pks, run_ids, counts, success, cost, tokens = runs
    offsets = np.zeros(len(pks) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # Each chunk is written into its place: concatenating the chunks' arrays would hold the
    # columns twice and leave the chunks' heap resident (1M runs: ~50 MB more peak RSS,
    # ~60 MB more resident afterwards). A chunk is coded with its own vocabulary, mapped
    # onto the ledger's here, in chunk order: codes still number the names in order of
    # first appearance, whichever way each chunk was read.
    codes = np.empty(int(offsets[-1]), dtype=np.int64)
    errors = np.empty(int(offsets[-1]), dtype=np.bool_)
    vocab: dict[str, int] = {}

    def place(lo: int, hi: int, part: _Chunk | None) -> None:
        if part is None:  # PostgreSQL, or a chunk the quick read could not vouch for
            part = _ordered_chunk(conn, user, agent, pks=pks, offsets=offsets, lo=lo, hi=hi)
        local, names, errs = part
        remap = np.fromiter((vocab.setdefault(n, len(vocab)) for n in names), np.int64, len(names))
        codes[offsets[lo] : offsets[hi]] = remap[local] if len(local) else local
        errors[offsets[lo] : offsets[hi]] = errs

    if not fast:
        for lo, hi in _run_chunks(offsets):
            place(lo, hi, None)
    elif not _file_backed(conn):  # an in-memory database is one connection's own
        for lo, hi in _run_chunks(offsets):
            text = _sqlite_chunk(conn, user, agent, pks=pks, offsets=offsets, lo=lo, hi=hi)
            place(lo, hi, None if text is None else _decode_chunk(text, offsets, lo, hi=hi))
    else:
        _read_in_parallel(db, user, agent, pks=pks, offsets=offsets, place=place)
    cols = ToolNameColumns(
        run_pks=pks,
        run_ids=run_ids,
        offsets=offsets,
        codes=codes,
        names=list(vocab),
        errors=errors,
        success=success,
        cost=cost,
        tokens=tokens,
    )
    return cols if include_failed else _without_failed(cols)


_READERS = 2
"""Connections reading chunks at once on a SQLite file (SQLite works without the GIL)."""


def _file_backed(conn: Connection) -> bool:
    database = conn.engine.url.database or ""
    return database not in ("", ":memory:") and "mode=memory" not in str(conn.engine.url)


def _read_in_parallel(
    db: Database,
    user: str,
    agent: str,
    *,
    pks: Any,
    offsets: Any,
    place: Callable[[int, int, _Chunk | None], None],
) -> None:
    """Each chunk read (and decoded) by one of :data:`_READERS` workers on a connection of
    its own, placed here in chunk order; at most ``2 × _READERS`` chunks are in hand.

    A worker's connection may see a later state of the database than the caller's, whose
    read fixed ``pks`` and ``offsets``: runs written since have larger keys, outside every
    chunk (the store never deletes or rewrites a run's calls), and a chunk whose calls do
    not add up to what ``offsets`` says is read again on the caller's, row by row.
    """
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    def quick(lo: int, hi: int) -> _Chunk | None:
        with db.read() as own:
            text = _sqlite_chunk(own, user, agent, pks=pks, offsets=offsets, lo=lo, hi=hi)
        return None if text is None else _decode_chunk(text, offsets, lo, hi=hi)

    # Chunks of an equal share, two per reader at least: the readers finish together.
    share = -(-int(offsets[-1]) // (2 * _READERS))
    chunks = _run_chunks(offsets, max(share, _CALLS_PER_READ >> 4))
    waiting: deque[tuple[int, int, Future[_Chunk | None]]] = deque()
    with ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="soloflow-read") as pool:

        def submit() -> None:
            chunk = next(chunks, None)
            if chunk is not None:
                waiting.append((*chunk, pool.submit(quick, *chunk)))

        try:
            for _ in range(2 * _READERS):
                submit()
            while waiting:
                lo, hi, job = waiting.popleft()
                part = job.result()
                submit()
                place(lo, hi, part)
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


_RunColumns = tuple[Any, list[str], Any, Any, Any, Any]


def _run_columns(conn: Connection, user: str, agent: str, *, min_pk: int) -> _RunColumns:
    """pks, run ids, tool counts, success (1/0/-1), cost and tokens (NaN for unknown) of the
    namespace's runs from ``min_pk`` on, in pk order (any database)."""
    c = t.task_runs.c
    q = sa.select(c.id, c.run_id, c.tool_count, c.success, c.cost, c.tokens).where(
        c.user_id == user, c.agent_id == agent, c.id >= min_pk
    )
    rows = conn.execute(q.order_by(c.id)).all()
    import numpy as np

    n = len(rows)
    return (
        np.fromiter((r[0] for r in rows), np.int64, n),
        [r[1] for r in rows],
        np.fromiter((r[2] for r in rows), np.int64, n),
        np.fromiter((-1 if r[3] is None else int(r[3]) for r in rows), np.int8, n),
        np.array([r[4] for r in rows], dtype=np.float64),  # None becomes NaN
        np.array([r[5] for r in rows], dtype=np.float64),
    )


def _sqlite_run_columns(
    conn: Connection, user: str, agent: str, *, min_pk: int
) -> _RunColumns | None:
    """:func:`_run_columns` as six strings SQLite concatenates while it walks the namespace
    index (``quote`` writes a REAL that reads back exactly); None if they do not add up."""
    row = conn.exec_driver_sql(
        "SELECT count(*), group_concat(id), group_concat(run_id, char(31)), "
        "group_concat(tool_count), group_concat(ifnull(success, 2), ''), "
        "group_concat(CASE WHEN cost IS NULL THEN 'nan' ELSE quote(cost) END), "
        "group_concat(ifnull(tokens, 'nan')) FROM (SELECT id, run_id, tool_count, success, cost, "
        "tokens FROM sf_task_runs "
        "INDEXED BY ix_sf_task_runs_ns_id WHERE user_id = ? AND agent_id = ? AND id >= ? "
        "ORDER BY user_id, agent_id, id)",
        (user, agent, min_pk),
    ).one()
    n = row[0]
    if not n:
        return None
    import numpy as np  # after the query: a caller may import numpy meanwhile (soloflow detect)

    pks = np.fromstring(row[1], dtype=np.int64, sep=",")
    run_ids = row[2].split(_SEP)
    counts = np.fromstring(row[3], dtype=np.int64, sep=",")
    success = np.frombuffer(row[4].encode("ascii"), dtype=np.uint8).astype(np.int8) - ord("0")
    cost = np.fromstring(row[5], dtype=np.float64, sep=",")
    tokens = np.fromstring(row[6], dtype=np.float64, sep=",")
    if not all(len(a) == n for a in (pks, run_ids, counts, success, cost, tokens)):
        return None
    if n > 1 and not bool((np.diff(pks) > 0).all()):
        return None
    success[success == 2] = -1
    return pks, run_ids, counts, success, cost, tokens


def _run_chunks(offsets: Any, size: int = 0) -> Iterator[tuple[int, int]]:
    """Runs ``[lo, hi)`` holding about ``size`` calls each (default and at most
    ``_CALLS_PER_READ``)."""
    import numpy as np

    size = min(size or _CALLS_PER_READ, _CALLS_PER_READ)
    n = len(offsets) - 1
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(offsets, offsets[lo] + size, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        yield lo, hi
        lo = hi


_Chunk = tuple[Any, list[str], Any]
"""A chunk's calls: codes into its own vocabulary, that vocabulary, errors."""


def _sqlite_chunk(
    conn: Connection, user: str, agent: str, *, pks: Any, offsets: Any, lo: int, hi: int
) -> tuple[str, str, str] | None:
    """Runs ``[lo, hi)``'s calls as strings SQLite concatenates while it scans the table:
    the rowids in index order, the names, and one digit per call (2 if ``seq`` is 0, plus 1
    if it errored); :func:`_decode_chunk` checks and codes them.

    Scanning the table in rowid order reads half the pages of walking the ``(run_pk,
    seq)`` index. It is the calls' order when their rowids grow along that index, which the
    store's writers ensure (a run's calls are written in order, in the transaction that
    writes the run); the index, read alone, checks it. None when the count does not add
    up, for the row-by-row read to redo.
    """
    lo_pk, hi_pk = int(pks[lo]), int(pks[hi - 1])
    expected = int(offsets[hi] - offsets[lo])
    if not expected:
        return "", "", ""
    in_index_order, first, last = conn.exec_driver_sql(
        "SELECT group_concat(id), min(id), max(id) FROM (SELECT id FROM sf_tool_calls "
        "INDEXED BY ix_sf_tool_calls_run_seq WHERE run_pk BETWEEN ? AND ? "
        "ORDER BY run_pk, seq)",
        (lo_pk, hi_pk),
    ).one()
    if not in_index_order:
        return None
    # When no other namespace has a run in the range (one agent's ledger), every call in it
    # is one of ours: comparing two strings per call would cost a quarter of the scan.
    others = (
        conn.exec_driver_sql(
            "SELECT count(*) FROM sf_task_runs WHERE id BETWEEN ? AND ?", (lo_pk, hi_pk)
        ).scalar()
        != hi - lo
    )
    names, flags, count = conn.exec_driver_sql(
        "SELECT group_concat(name, char(31)), group_concat((seq = 0) * 2 + (error IS 1), ''), "
        "count(*) FROM sf_tool_calls WHERE id BETWEEN ? AND ? AND run_pk BETWEEN ? AND ?"
        + (" AND user_id = ? AND agent_id = ?" if others else ""),
        (first, last, lo_pk, hi_pk, *((user, agent) if others else ())),
    ).one()
    if count != expected:
        return None
    return in_index_order, names, flags


def _decode_chunk(text: tuple[str, str, str], offsets: Any, lo: int, *, hi: int) -> _Chunk | None:
    """:func:`_sqlite_chunk`'s strings as a chunk, or None unless the rowids grow along
    the index and each run's first call is where its ``tool_count`` puts it."""
    import numpy as np

    in_index_order, names, flags = text
    if not in_index_order:  # runs without calls
        return np.zeros(0, np.int64), [], np.zeros(0, np.bool_)
    rowids = np.fromstring(in_index_order, dtype=np.int64, sep=",")
    if len(rowids) > 1 and not bool((np.diff(rowids) > 0).all()):
        return None
    count = int(offsets[hi] - offsets[lo])
    parts = names.split(_SEP)
    digits = np.frombuffer(flags.encode("ascii"), dtype=np.uint8) - ord("0")
    if len(parts) != count or len(digits) != count:
        return None
    starts = offsets[lo:hi] - offsets[lo]
    nonempty = starts[np.diff(offsets[lo : hi + 1]) > 0]
    if not np.array_equal(np.flatnonzero(digits >= 2), nonempty):
        return None
    vocab = _Vocabulary()
    codes = np.fromiter(map(vocab.__getitem__, parts), np.int64, count)
    return codes, list(vocab), (digits & 1).astype(np.bool_)


def _ordered_chunk(
    conn: Connection, user: str, agent: str, *, pks: Any, offsets: Any, lo: int, hi: int
) -> _Chunk:
    """Runs ``[lo, hi)``'s calls row by row, in ``(run_pk, seq)`` order (any database)."""
    import numpy as np

    tc = t.tool_calls.c
    q = (
        sa.select(tc.run_pk, tc.name, tc.error)
        .where(
            tc.user_id == user,
            tc.agent_id == agent,
            tc.run_pk.between(int(pks[lo]), int(pks[hi - 1])),
        )
        .order_by(tc.run_pk, tc.seq)
    )
    rows = conn.execute(q).all()
    run_pk = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    wanted = pks[lo:hi]
    keep = np.isin(run_pk, wanted)  # runs of the range outside the lookback or namespace
    per_run = np.bincount(np.searchsorted(wanted, run_pk[keep]), minlength=hi - lo)
    if not np.array_equal(per_run, np.diff(offsets[lo : hi + 1])):
        raise StoreError(
            "the tool calls stored do not match their runs' tool_count; "
            "was the database edited by hand?"
        )
    vocab = _Vocabulary()
    codes = np.fromiter((vocab[r[1]] for r, k in zip(rows, keep, strict=True) if k), np.int64)
    errors = np.fromiter((r[2] is True for r, k in zip(rows, keep, strict=True) if k), np.bool_)
    return codes, list(vocab), errors


def _without_failed(cols: ToolNameColumns) -> ToolNameColumns:
    import numpy as np

    keep = cols.success != 0
    lengths = np.diff(cols.offsets)[keep]
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    per_call = np.repeat(keep, np.diff(cols.offsets))
    return ToolNameColumns(
        run_pks=cols.run_pks[keep],
        run_ids=[r for r, k in zip(cols.run_ids, keep, strict=True) if k],
        offsets=offsets,
        codes=cols.codes[per_call],
        names=cols.names,
        errors=cols.errors[per_call],
        success=cols.success[keep],
        cost=cols.cost[keep],
        tokens=cols.tokens[keep],
    )


# ---------------------------------------------------------------------- reading evidence runs


@dataclass(slots=True)
class EvidenceCall:
    """A tool call as the detector reads it (the fields of
    :class:`~soloflow_core.models.ToolCall` that savings and generalisation use)."""

    name: str
    args: dict[str, Any]
    output: Any
    error: bool | None
    meta: dict[str, Any]


@dataclass(slots=True)
class EvidenceTurn:
    """A model call's token usage (the fields of :class:`~soloflow_core.models.ModelCall`
    that the measured savings read)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    tool_calls_requested: int


@dataclass(slots=True)
class EvidenceRun:
    """A run behind a mined pattern's occurrence: its task text and its calls, in order.

    Duck-types what :func:`~soloflow_core.mining.ranking.with_measured_savings` and
    :mod:`soloflow_core.generalize` read of a :class:`~soloflow_core.models.TaskRun`,
    without validating a model per run and per call (the values were validated when the
    run was stored): 1,000 runs of 15 calls in ~0.1 s, against ~0.6 s through
    :meth:`Store.load_runs`.
    """

    task: str | None
    tool_calls: list[EvidenceCall]
    model_calls: list[EvidenceTurn]
    started_at: datetime | None = None
    """When the run started (UTC), when recorded: the day its task was asked."""


_EVIDENCE_CHUNK = 5000
"""Run keys per ``IN (...)`` list (SQLite allows 32,766 parameters, PostgreSQL 65,535)."""


def _json_array(values: list[Any]) -> list[Any]:
    """JSON column values as SQLite returns them, decoded in one parse: text is JSON, SQL
    NULL is None, and a number is itself (a JSON column's NUMERIC affinity stores a number
    output as one). One value at a time if they do not make one array of as many values."""
    import json

    dumps = json.dumps
    try:
        out = json.loads("[" + ",".join(v if type(v) is str else dumps(v) for v in values) + "]")
    except ValueError:
        out = None
    if not isinstance(out, list) or len(out) != len(values):
        out = [json.loads(v) if isinstance(v, str) else v for v in values]
    return out


def read_evidence(
    conn: Connection, user: str, agent: str, *, pks: list[int]
) -> dict[int, EvidenceRun]:
    """The namespace's runs ``pks`` (store keys), with their tool and model calls in order,
    keyed by pk; a pk not in the namespace is left out.

    On SQLite the rows come from the driver as tuples and each JSON column is decoded in
    one parse (a ``json.loads`` call per value, ~3 per tool call, cost more than the
    reading); PostgreSQL's driver decodes JSONB itself.
    """
    sqlite = conn.dialect.name == "sqlite"
    out: dict[int, EvidenceRun] = {}
    for start in range(0, len(pks), _EVIDENCE_CHUNK):
        chunk = pks[start : start + _EVIDENCE_CHUNK]
        runs, calls, turns = (_sqlite_evidence if sqlite else _evidence_rows)(
            conn, user, agent, chunk
        )
        for pk, task, started in runs:
            out[pk] = EvidenceRun(task, [], [], started_at=utc_instant(started))
        if sqlite:
            args, outputs, metas = (_json_array([row[k] for row in calls]) for k in (2, 3, 5))
        else:
            args, outputs, metas = ([row[k] for row in calls] for k in (2, 3, 5))
        for row, a, o, m in zip(calls, args, outputs, metas, strict=True):
            run = out.get(row[0])
            if run is not None:
                error = None if row[4] is None else bool(row[4])
                run.tool_calls.append(EvidenceCall(row[1], a or {}, o, error=error, meta=m or {}))
        for pk, tin, tout, total, requested in turns:
            run = out.get(pk)
            if run is not None:
                run.model_calls.append(
                    EvidenceTurn(tin, tout, total, tool_calls_requested=requested)
                )
    return out


_EvidenceRows = tuple[Sequence[Any], Sequence[Any], Sequence[Any]]


def _evidence_rows(conn: Connection, user: str, agent: str, pks: list[int]) -> _EvidenceRows:
    """The runs' (pk, task, started_at), tool-call (run pk, name, args, output, error, meta) and
    model-call (run pk, input, output and total tokens, calls requested) rows, each in
    ``(run pk, seq)`` order (any database)."""
    r, tc, mc = t.task_runs.c, t.tool_calls.c, t.model_calls.c
    runs = sa.select(r.id, r.task, r.started_at).where(
        r.user_id == user, r.agent_id == agent, r.id.in_(pks)
    )
    calls = sa.select(tc.run_pk, tc.name, tc.args, tc.output, tc.error, tc.meta).where(
        tc.user_id == user, tc.agent_id == agent, tc.run_pk.in_(pks)
    )
    turns = sa.select(
        mc.run_pk, mc.input_tokens, mc.output_tokens, mc.total_tokens, mc.tool_calls_requested
    ).where(mc.user_id == user, mc.agent_id == agent, mc.run_pk.in_(pks))
    return (
        conn.execute(runs).all(),
        conn.execute(calls.order_by(tc.run_pk, tc.seq)).all(),
        conn.execute(turns.order_by(mc.run_pk, mc.seq)).all(),
    )


def _sqlite_evidence(conn: Connection, user: str, agent: str, pks: list[int]) -> _EvidenceRows:
    """:func:`_evidence_rows` through the driver, as plain tuples, JSON columns as text."""
    cursor = conn.connection.driver_connection
    assert cursor is not None
    marks = ",".join("?" * len(pks))
    params = (user, agent, *pks)
    ns = f"user_id = ? AND agent_id = ? AND run_pk IN ({marks}) ORDER BY run_pk, seq"
    return (
        cursor.execute(
            f"SELECT id, task, started_at FROM sf_task_runs WHERE user_id = ? AND agent_id = ? "
            f"AND id IN ({marks})",
            params,
        ).fetchall(),
        cursor.execute(
            f"SELECT run_pk, name, args, output, error, meta FROM sf_tool_calls WHERE {ns}", params
        ).fetchall(),
        cursor.execute(
            "SELECT run_pk, input_tokens, output_tokens, total_tokens, tool_calls_requested "
            f"FROM sf_model_calls WHERE {ns}",
            params,
        ).fetchall(),
    )
