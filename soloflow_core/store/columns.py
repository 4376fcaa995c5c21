"""Reading a namespace's tool-name sequences as integer-coded numpy columns, for mining at
scale (:meth:`~soloflow_core.store.repository.Store.read_tool_names`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from soloflow_core.errors import StoreError
from soloflow_core.store import schema as t

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


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
    conn: Connection, user: str, agent: str, lookback: int | None, include_failed: bool
) -> ToolNameColumns:
    import numpy as np

    c = t.task_runs.c
    min_pk = 0
    if lookback is not None:
        newest = sa.select(c.id).where(c.user_id == user, c.agent_id == agent)
        newest = newest.order_by(c.id.desc()).limit(1).offset(max(lookback, 1) - 1)
        min_pk = conn.execute(newest).scalar() or 0
    fast = conn.dialect.name == "sqlite"
    runs = (_sqlite_run_columns(conn, user, agent, min_pk) if fast else None) or _run_columns(
        conn, user, agent, min_pk
    )
    pks, run_ids, counts, success, cost, tokens = runs
    offsets = np.zeros(len(pks) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    vocab = _Vocabulary()
    # Each chunk is written into its place: concatenating the chunks' arrays would hold the
    # columns twice and leave the chunks' heap resident (1M runs: ~50 MB more peak RSS,
    # ~60 MB more resident afterwards).
    codes = np.empty(int(offsets[-1]), dtype=np.int64)
    errors = np.empty(int(offsets[-1]), dtype=np.bool_)
    for lo, hi in _run_chunks(offsets):
        part = _sqlite_chunk(conn, user, agent, pks, offsets, lo, hi, vocab) if fast else None
        if part is None:  # PostgreSQL, or a chunk the quick read could not vouch for
            part = _ordered_chunk(conn, user, agent, pks, offsets, lo, hi, vocab)
        codes[offsets[lo] : offsets[hi]] = part[0]
        errors[offsets[lo] : offsets[hi]] = part[1]
        del part
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


_RunColumns = tuple[Any, list[str], Any, Any, Any, Any]


def _run_columns(conn: Connection, user: str, agent: str, min_pk: int) -> _RunColumns:
    """pks, run ids, tool counts, success (1/0/-1), cost and tokens (NaN for unknown) of the
    namespace's runs from ``min_pk`` on, in pk order (any database)."""
    import numpy as np

    c = t.task_runs.c
    q = sa.select(c.id, c.run_id, c.tool_count, c.success, c.cost, c.tokens).where(
        c.user_id == user, c.agent_id == agent, c.id >= min_pk
    )
    rows = conn.execute(q.order_by(c.id)).all()
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
    conn: Connection, user: str, agent: str, min_pk: int
) -> _RunColumns | None:
    """:func:`_run_columns` as six strings SQLite concatenates while it walks the namespace
    index (``quote`` writes a REAL that reads back exactly); None if they do not add up."""
    import numpy as np

    row = conn.exec_driver_sql(
        "SELECT count(*), group_concat(id), group_concat(run_id, char(31)), "
        "group_concat(tool_count), group_concat(ifnull(success, 2), ''), "
        "group_concat(CASE WHEN cost IS NULL THEN 'nan' ELSE quote(cost) END), "
        "group_concat(ifnull(tokens, 'nan')) FROM (SELECT * FROM sf_task_runs "
        "INDEXED BY ix_sf_task_runs_ns_id WHERE user_id = ? AND agent_id = ? AND id >= ? "
        "ORDER BY user_id, agent_id, id)",
        (user, agent, min_pk),
    ).one()
    n = row[0]
    if not n:
        return None
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


def _run_chunks(offsets: Any) -> Iterator[tuple[int, int]]:
    """Runs ``[lo, hi)`` holding about ``_CALLS_PER_READ`` calls each."""
    import numpy as np

    n = len(offsets) - 1
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(offsets, offsets[lo] + _CALLS_PER_READ, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        yield lo, hi
        lo = hi


def _sqlite_chunk(
    conn: Connection, user: str, agent: str, pks: Any, offsets: Any, lo: int, hi: int,
    vocab: _Vocabulary,
) -> tuple[Any, Any] | None:
    """Runs ``[lo, hi)``'s calls as strings SQLite concatenates while it scans the table:
    the names, and one digit per call (2 if ``seq`` is 0, plus 1 if it errored).

    Scanning the table in rowid order reads half the pages of walking the ``(run_pk,
    seq)`` index. It is the calls' order when their rowids grow along that index, which the
    store's writers ensure (a run's calls are written in order, in the transaction that
    writes the run); the index, read alone, checks it. None when anything does not add
    up, for the row-by-row read to redo.
    """
    import numpy as np

    lo_pk, hi_pk = int(pks[lo]), int(pks[hi - 1])
    expected = int(offsets[hi] - offsets[lo])
    if not expected:
        return np.zeros(0, np.int64), np.zeros(0, np.bool_)
    in_index_order = conn.exec_driver_sql(
        "SELECT group_concat(id) FROM (SELECT id FROM sf_tool_calls "
        "INDEXED BY ix_sf_tool_calls_run_seq WHERE run_pk BETWEEN ? AND ? "
        "ORDER BY run_pk, seq)",
        (lo_pk, hi_pk),
    ).scalar()
    if not in_index_order:
        return None
    rowids = np.fromstring(in_index_order, dtype=np.int64, sep=",")
    if len(rowids) > 1 and not bool((np.diff(rowids) > 0).all()):
        return None
    # When no other namespace has a run in the range (one agent's ledger), every call in it
    # is one of ours: comparing two strings per call would cost a quarter of the scan.
    others = conn.exec_driver_sql(
        "SELECT count(*) FROM sf_task_runs WHERE id BETWEEN ? AND ?", (lo_pk, hi_pk)
    ).scalar() != hi - lo
    names, flags, count = conn.exec_driver_sql(
        "SELECT group_concat(name, char(31)), group_concat((seq = 0) * 2 + (error IS 1), ''), "
        "count(*) FROM sf_tool_calls WHERE id BETWEEN ? AND ? AND run_pk BETWEEN ? AND ?"
        + (" AND user_id = ? AND agent_id = ?" if others else ""),
        (int(rowids[0]), int(rowids[-1]), lo_pk, hi_pk, *((user, agent) if others else ())),
    ).one()
    if count != expected:
        return None
    parts = names.split(_SEP)
    digits = np.frombuffer(flags.encode("ascii"), dtype=np.uint8) - ord("0")
    if len(parts) != count or len(digits) != count:
        return None
    starts = offsets[lo:hi] - offsets[lo]
    nonempty = starts[np.diff(offsets[lo : hi + 1]) > 0]
    if not np.array_equal(np.flatnonzero(digits >= 2), nonempty):
        return None
    codes = np.fromiter(map(vocab.__getitem__, parts), np.int64, count)
    return codes, (digits & 1).astype(np.bool_)


def _ordered_chunk(
    conn: Connection, user: str, agent: str, pks: Any, offsets: Any, lo: int, hi: int,
    vocab: _Vocabulary,
) -> tuple[Any, Any]:
    """Runs ``[lo, hi)``'s calls row by row, in ``(run_pk, seq)`` order (any database)."""
    import numpy as np

    tc = t.tool_calls.c
    q = (
        sa.select(tc.run_pk, tc.name, tc.error)
        .where(
            tc.user_id == user, tc.agent_id == agent,
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
    codes = np.fromiter((vocab[r[1]] for r, k in zip(rows, keep, strict=True) if k), np.int64)
    errors = np.fromiter((r[2] is True for r, k in zip(rows, keep, strict=True) if k), np.bool_)
    return codes, errors


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
