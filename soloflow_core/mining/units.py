"""Runs as units: the ledger the ranking reads.

* **Units.** Each run becomes a sequence of units: a call retried after it errored (same tool
  again right after) is one unit; by default so is a loop (the same tool several times in a
  row, e.g. one lookup per reservation: ``repeated`` marks it). Failed runs
  (``success=False``) are left out unless ``include_failed_runs``.

Each unit also carries the tokens and model turns behind its calls (how they were known: see
:mod:`soloflow_core.mining.results`) and whether its output feeds the next unit's arguments
(a swap is not tolerated across such a pair, see :mod:`soloflow_core.mining.matching`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from soloflow_core.mining.fast import CodedLedger
from soloflow_core.mining.options import (
    SOURCE_MEASURED,
    SOURCE_RUN_TOTALS,
    SOURCE_UNKNOWN,
    BoolArray,
    FloatArray,
    IndexArray,
    IntArray,
    RankingOptions,
)

__all__ = [
    "UnitLedger",
    "collapse_retries",
    "prepare_ledger",
    "continues_unit",
    "unit_ledger_from_calls",
    "unit_starts",
]


# ---------------------------------------------------------------------- reading runs


def collapse_retries(names: Sequence[str], errors: Sequence[bool]) -> list[int]:
    """Indices of the calls kept when each retry after an error counts once: a call that
    errored and is followed by the same tool is dropped.

    >>> collapse_retries(["a", "b", "b", "c"], [False, True, False, False])
    [0, 2, 3]
    """
    n = len(names)
    return [
        i
        for i in range(n)
        if not (i + 1 < n and i < len(errors) and errors[i] and names[i + 1] == names[i])
    ]


@dataclass(slots=True)
class _RunFields:
    names: Sequence[str]
    errors: Sequence[bool]
    success: bool | None
    call_tokens: Sequence[float] | None  # tokens of the turn behind each call (shared turns split)
    call_turns: Sequence[float] | None  # share of a turn per call
    source: int
    flows: Sequence[bool] | None  # call i's output feeds call i+1's arguments


def _run_fields(run: Any) -> _RunFields:
    tool_calls = getattr(run, "tool_calls", None)
    if tool_calls is None:  # a name-and-error view, e.g. the store's RunSequence
        names = tuple(run.names)
        errors = tuple(bool(e) for e in (getattr(run, "errors", None) or ()))
        fields = _RunFields(
            names,
            errors,
            getattr(run, "success", None),
            call_tokens=None,
            call_turns=None,
            source=SOURCE_UNKNOWN,
            flows=None,
        )
    else:
        names = tuple(c.name for c in tool_calls)
        errors = tuple(bool(c.error) for c in tool_calls)
        flows = [passes_data(a, b) for a, b in zip(tool_calls, tool_calls[1:], strict=False)]
        fields = _RunFields(
            names,
            errors,
            run.success,
            call_tokens=None,
            call_turns=None,
            source=SOURCE_UNKNOWN,
            flows=flows,
        )
        aligned = align_turns(run.model_calls, len(tool_calls))
        if aligned is not None:
            fields.call_tokens, fields.call_turns = aligned
            fields.source = SOURCE_MEASURED
    tokens = getattr(run, "tokens", None)
    if fields.source == SOURCE_UNKNOWN and tokens and names:
        per_turn = tokens / (len(names) + 1)  # one turn per call plus the final answer
        fields.call_tokens, fields.call_turns = [per_turn] * len(names), [1.0] * len(names)
        fields.source = SOURCE_RUN_TOTALS
    return fields


def align_turns(model_calls: Sequence[Any], n_calls: int) -> tuple[list[float], list[float]] | None:
    """Each tool call's share of the model turn that requested it, when the counts agree."""
    if not model_calls or n_calls == 0:
        return None
    tokens: list[float] = []
    turns: list[float] = []
    for m in model_calls:
        k = m.tool_calls_requested
        if k > 0:
            total = m.total_tokens or (m.input_tokens + m.output_tokens)
            tokens += [total / k] * k
            turns += [1.0 / k] * k
    return (tokens, turns) if len(tokens) == n_calls else None


def _leaves(value: Any, out: set[str], depth: int = 0) -> None:
    if depth > 6:
        return
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in "[{" and depth == 0:
            try:
                _leaves(json.loads(s), out, depth + 1)
                return
            except ValueError:
                pass
        if len(s) >= 3:
            out.add(s)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        if abs(value) >= 10:  # small numbers match by coincidence
            out.add(repr(value))
    elif isinstance(value, dict):
        for v in value.values():
            _leaves(v, out, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value[:50]:
            _leaves(v, out, depth + 1)


def passes_data(first: Any, second: Any) -> bool:
    """Whether a value of ``first``'s output appears in ``second``'s arguments."""
    if first.output is None or not second.args:
        return False
    produced: set[str] = set()
    _leaves(first.output, produced)
    used: set[str] = set()
    _leaves(second.args, used, 1)
    return not produced.isdisjoint(used)


# ---------------------------------------------------------------------- the unit ledger


@dataclass(slots=True)
class UnitLedger:
    """Runs as units (retries and, by default, loops collapsed) in flat arrays.

    Unit *u* of kept run *r* sits at flat position ``u + r`` (a ``-1`` separator follows
    each run, and two pad the end). Positions, indices and codes are int32 while the flat
    array has fewer than 2**31 slots (:func:`index_dtype`): half the memory of int64 on a
    million runs. Mine :meth:`coded` (or ``sequences``); rank with
    :func:`rank_patterns`.
    """

    kept: IntArray
    """Input index of each kept run."""
    names: list[str]
    code: IndexArray
    """Flat unit codes; -1 at separators."""
    err: BoolArray
    flow: BoolArray
    """Data passes from this unit's last call to the next unit."""
    flat_unit: IndexArray
    """Unit index at each flat position; -1 at separators."""
    unit_run: IndexArray
    """Kept run (its index among the kept runs) of each unit."""
    unit_first: IndexArray
    """Each unit's first and last call, counted from its run's first call."""
    unit_last: IndexArray
    unit_repeated: BoolArray
    unit_tokens: FloatArray
    unit_turns: FloatArray
    unit_source: npt.NDArray[np.int8]
    """How the tokens were known: ``0`` unknown, ``1`` run totals, ``2`` measured."""
    bits: FloatArray
    """Bits to encode each tool's unit alone."""
    dropped_failed: int
    options: RankingOptions

    @property
    def unit_count(self) -> int:
        return len(self.unit_run)

    def coded(self) -> CodedLedger:
        """The kept runs' units as a :class:`CodedLedger`: what the miner reads."""
        per_run = np.bincount(self.unit_run, minlength=len(self.kept))
        offsets = np.zeros(len(self.kept) + 1, dtype=np.int64)
        np.cumsum(per_run, out=offsets[1:])
        return CodedLedger(self.code[self.flat_unit >= 0], offsets, self.names)

    def restricted_to(self, runs: BoolArray) -> UnitLedger:
        """The ledger of the kept runs where ``runs`` (one flag per kept run) is True; their
        input indices stay the same, each tool's bits are counted afresh."""
        units = np.flatnonzero(runs[self.unit_run])
        n_runs = int(runs.sum())
        size = len(units) + n_runs + 2
        ix = index_dtype(size)
        new_run = (np.cumsum(runs) - 1).astype(ix)[self.unit_run[units]]
        old_at = units + self.unit_run[units]
        at = np.arange(len(units), dtype=ix) + new_run

        def flat(values: npt.NDArray[Any], fill: Any) -> npt.NDArray[Any]:
            out = np.full(size, fill, dtype=values.dtype)
            out[at] = values[old_at]
            return out

        flat_unit = np.full(size, -1, dtype=ix)
        flat_unit[at] = np.arange(len(units), dtype=ix)
        counts = np.bincount(self.code[old_at], minlength=len(self.names)).astype(np.float64)
        with np.errstate(divide="ignore"):
            bits = np.log2(max(len(units), 1) / counts)
        return UnitLedger(
            kept=self.kept[runs],
            names=self.names,
            code=flat(self.code, -1),
            err=flat(self.err, False),
            flow=flat(self.flow, False),
            flat_unit=flat_unit,
            unit_run=new_run,
            unit_first=self.unit_first[units],
            unit_last=self.unit_last[units],
            unit_repeated=self.unit_repeated[units],
            unit_tokens=self.unit_tokens[units],
            unit_turns=self.unit_turns[units],
            unit_source=self.unit_source[units],
            bits=bits,
            dropped_failed=self.dropped_failed,
            options=self.options,
        )

    @property
    def sequences(self) -> list[tuple[str, ...]]:
        """Unit tool names per kept run (built on each access: prefer :meth:`coded`)."""
        coded = self.coded()
        names, codes, bounds = self.names, coded.codes.tolist(), coded.offsets.tolist()
        return [
            tuple(names[c] for c in codes[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)
        ]


def prepare_ledger(runs: Iterable[Any], options: RankingOptions | None = None) -> UnitLedger:
    """Units of the runs (TaskRuns, the store's RunSequences, or anything with ``names``,
    ``errors`` and ``success``)."""
    opt = options or RankingOptions()
    vocab: dict[str, int] = {}
    codes: list[int] = []
    errs: list[bool] = []
    toks: list[float] = []
    turns: list[float] = []
    srcs: list[int] = []
    flows: list[bool] = []
    lengths: list[int] = []
    kept: list[int] = []
    dropped = 0
    for i, run in enumerate(runs):
        f = _run_fields(run)
        if f.success is False and not opt.include_failed_runs:
            dropped += 1
            continue
        n = len(f.names)
        kept.append(i)
        lengths.append(n)
        codes.extend([vocab.setdefault(name, len(vocab)) for name in f.names])
        errs.extend(
            f.errors[:n] if len(f.errors) >= n else list(f.errors) + [False] * (n - len(f.errors))
        )
        toks.extend(f.call_tokens if f.call_tokens is not None else [math.nan] * n)
        turns.extend(f.call_turns if f.call_turns is not None else [math.nan] * n)
        srcs.extend([f.source] * n)
        flows.extend(list(f.flows or [False] * max(n - 1, 0)) + [False] if n else [])
    return unit_ledger_from_calls(
        list(vocab),
        codes,
        errs,
        toks=toks,
        turns=turns,
        srcs=srcs,
        flows=flows,
        lengths=lengths,
        kept=kept,
        dropped=dropped,
        opt=opt,
    )


def index_dtype(size: int) -> type[np.signedinteger[Any]]:
    """The narrowest of int32 and int64 that holds every index of an array of ``size``
    (and every tool code): the unit ledger's index arrays are half as big in int32."""
    return np.int32 if size < 2**31 else np.int64


def unit_starts(
    code: IntArray, err: BoolArray, lens: IntArray, *, run_start: IntArray, opt: RankingOptions
) -> IntArray:
    """Each unit's first call, counting calls across the runs (``run_start``: each run's
    first call, then the total): see :func:`continues_unit`."""
    return np.flatnonzero(~continues_unit(code, err, lens, run_start=run_start, opt=opt))


def continues_unit(
    code: IntArray, err: BoolArray, lens: IntArray, *, run_start: IntArray, opt: RankingOptions
) -> BoolArray:
    """Whether each call is part of the unit of the call before it: it repeats that call in
    the same run (a loop; without ``collapse_loops``, only a retry after an error)."""
    same = np.zeros(len(code), dtype=bool)
    np.equal(code[1:], code[:-1], out=same[1:])
    if not opt.collapse_loops:
        same[1:] &= err[:-1]  # only a retry after an error merges
    same[run_start[:-1][lens > 0]] = False  # a run's first call starts a unit
    return same


def _per_unit(values: Sequence[float] | FloatArray | None, first: IntArray) -> FloatArray:
    """Per unit (starting at call ``first``), the sum of its calls' ``values``."""
    if values is None or len(first) == 0:  # unknown for all: a read-only view, no memory
        return np.broadcast_to(np.float64(np.nan), (len(first),))
    return np.add.reduceat(np.asarray(values, dtype=np.float64), first)


def unit_ledger_from_calls(
    names: Sequence[str],
    codes: Sequence[int] | IntArray,
    errs: Sequence[bool] | BoolArray,
    *,
    toks: Sequence[float] | FloatArray | None,
    turns: Sequence[float] | FloatArray | None,
    srcs: Sequence[int] | IntArray | None,
    flows: Sequence[bool] | BoolArray | None,
    lengths: Sequence[int] | IntArray,
    kept: Sequence[int] | IntArray,
    dropped: int,
    opt: RankingOptions,
) -> UnitLedger:
    """The unit ledger of the kept runs' calls, given per call (all runs concatenated):
    tool code (an index into ``names``), errored, tokens and share of a model turn behind
    it (NaN or None: unknown), how those were known (0 unknown, 1 run totals, 2 measured),
    and whether its output feeds the next call (None: never); ``lengths`` and ``kept``
    (input index) per run. Works in whole arrays, so a million runs take seconds.
    """
    code_c = np.asarray(codes)
    if code_c.dtype.kind not in "iu":
        code_c = code_c.astype(np.int64)
    err_c = np.asarray(errs, dtype=bool)
    lens = np.asarray(lengths, dtype=np.int64)
    run_start = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=run_start[1:])
    first = unit_starts(code_c, err_c, lens, run_start=run_start, opt=opt)
    last = np.empty_like(first)  # in one array: each fresh one costs page faults too
    if len(first):
        np.subtract(first[1:], 1, out=last[:-1])
        last[-1] = len(code_c) - 1
    n_units = len(first)
    flat_size = n_units + len(lens) + 2
    ix = index_dtype(max(flat_size, len(code_c) + 1, len(names)))
    units_before = np.searchsorted(first, run_start)
    unit_run = np.repeat(np.arange(len(lens), dtype=ix), np.diff(units_before))
    del units_before
    ok_before: npt.NDArray[Any] = np.zeros(len(err_c) + 1, dtype=ix)
    np.cumsum(~err_c, out=ok_before[1:])
    unit_repeated = (ok_before[1:][last] - ok_before[first]) >= 2
    del ok_before
    flat_pos = np.arange(n_units, dtype=ix)
    flat_pos += unit_run
    unit_code = code_c[first]
    code = np.full(flat_size, -1, dtype=ix)
    code[flat_pos] = unit_code
    err = np.zeros(flat_size, dtype=bool)
    err[flat_pos] = err_c[last]
    flow = np.zeros(flat_size, dtype=bool)
    if flows is not None:
        flow[flat_pos] = np.asarray(flows, dtype=bool)[last]
    flat_unit = np.full(flat_size, -1, dtype=ix)
    flat_unit[flat_pos] = np.arange(n_units, dtype=ix)
    del flat_pos
    counts = np.bincount(unit_code, minlength=len(names)).astype(np.float64)
    del unit_code
    with np.errstate(divide="ignore"):
        bits = np.log2(max(n_units, 1) / counts)
    tokens, turns = _per_unit(toks, first), _per_unit(turns, first)
    source = (
        np.minimum.reduceat(np.asarray(srcs, dtype=np.int8), first)
        if n_units and srcs is not None
        else np.broadcast_to(np.int8(SOURCE_UNKNOWN), (n_units,))
    )
    start = run_start[unit_run]  # each unit's run's first call
    first -= start
    last -= start
    del start
    return UnitLedger(
        kept=np.asarray(kept, dtype=np.int64),
        names=list(names),
        code=code,
        err=err,
        flow=flow,
        flat_unit=flat_unit,
        unit_run=unit_run,
        unit_first=first.astype(ix, copy=False),
        unit_last=last.astype(ix, copy=False),
        unit_repeated=unit_repeated,
        unit_tokens=tokens,
        unit_turns=turns,
        unit_source=source,
        bits=bits,
        dropped_failed=dropped,
        options=opt,
    )
