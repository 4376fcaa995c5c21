"""Ranking mined patterns by how much of the ledger they explain, tolerating agent noise.

Counting a pattern's support and multiplying by a run's cost ranks 3-call fragments of common
workflows above the workflows, and chance sequences of popular tools above both. Here the
ranking picks the set of patterns that best *compresses* the ledger (the MDL idea of SQS and
GoKrimp), greedily:

* **Units.** Each run becomes a sequence of units: a call retried after it errored (same tool
  again right after) is one unit; by default so is a loop (the same tool several times in a
  row, e.g. one lookup per reservation: ``repeated`` marks it). Failed runs
  (``success=False``) are left out unless ``include_failed_runs``.
* **Bits.** Encoding a unit alone costs ``log2(N / count(tool))`` bits (N units in all). Each
  occurrence a pattern covers saves the bits of the units it covers and pays the pattern's
  own code, ``log2(N / usage)``, plus ``log2(L) + 1`` bits per tolerated defect; the pattern
  pays for its own definition once. A chance run of popular tools saves about what its code
  costs (its tools are cheap to encode alone), so it gains nothing.
* **Noise-tolerant occurrences.** An occurrence still counts with one stray call between two
  steps (at every gap, ``max_gap``), two adjacent steps swapped (``max_swaps`` per occurrence,
  not when the first one's output feeds the second), or cut short by a failing call (the
  last step reached errored; ``allow_truncated``). So noise does not break a workflow into
  fragments that out-support it.
* **Greedy cover.** Repeatedly take the pattern whose occurrences, among the units not yet
  covered, compress the ledger most (lazy evaluation: gains only shrink as the cover grows),
  and mark its units covered. A fragment of a chosen workflow is left with the broken
  occurrences only; it is dropped when those are fewer than ``fragment_slack`` of the
  workflow's. Swapped variants of a chosen pattern find nothing left, so both orders end up
  as one pattern.

What a flow saves per occurrence is the model turns behind its calls (but the one that calls
the flow) and their tokens: measured from the runs' model calls (usage_metadata) where they
are aligned to tool calls, else each run's token total spread over its turns, else
:data:`DEFAULT_TOKENS_PER_STEP` per saved call. ``savings_method`` says which.

Cost: the cover refreshes stale bounds in batches, keeps matches that no choice has touched
(covering units only ever makes a match fail, so they stay exact), and builds occurrences
lazily (:class:`OccurrenceList`). Matching is one array pass for many candidates at once
(:func:`_match_many`: every candidate whose bound tops the best gain found must be matched
before a choice, so they are matched together), from only the places where an instance of
a candidate's first three steps starts; choices are made as they are read
(:func:`greedy_cover`), so a caller pays only for the ones it uses. A ledger too big to cover whole is covered on a sample of
its runs and the chosen patterns replayed on all of them (:func:`replay_cover`; see
:mod:`soloflow_core.mining.pipeline` for what that guarantees).

Example:
    >>> ranked = rank_runs(task_runs, top_k=5)
    >>> [(r.names, r.estimated_token_savings) for r in ranked]
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np
import numpy.typing as npt

from soloflow_core.mining.closed import mine_closed_patterns
from soloflow_core.mining.fast import CodedLedger

if TYPE_CHECKING:
    from soloflow_core.models import TaskRun

__all__ = [
    "DEFAULT_TOKENS_PER_STEP",
    "OccurrenceList",
    "PatternOccurrence",
    "RankedPattern",
    "CodePositions",
    "RankingOptions",
    "UnitLedger",
    "collapse_retries",
    "prepare_ledger",
    "greedy_cover",
    "rank_coded",
    "rank_patterns",
    "rank_runs",
    "replay_cover",
    "unit_ledger_from_calls",
    "with_measured_savings",
]

DEFAULT_TOKENS_PER_STEP = 1000.0
"""Tokens one avoided tool-calling model turn is assumed to cost when no usage is recorded.
A turn re-reads the system prompt, tool schemas and conversation (τ-bench airline's policy
and tools alone are ~4k tokens), so 1,000 is deliberately conservative."""

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
_COVERED = -2  # code of a unit already covered by a chosen pattern
_MEASURED, _RUN_TOTALS, _UNKNOWN = 2, 1, 0


class HasNames(Protocol):
    """A mined pattern: anything with the tool ``names`` in order."""

    @property
    def names(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class RankingOptions:
    """Knobs of preprocessing and ranking (defaults are the measured ones, docs/mining.md)."""

    include_failed_runs: bool = False
    """Count runs with ``success=False`` (left out by default: a failing run shows what not
    to automate)."""
    collapse_loops: bool = True
    """The same tool several times in a row is one (repeated) unit."""
    max_gap: int = 1
    """Stray calls tolerated between two consecutive steps (0 or 1)."""
    max_swaps: int = 1
    """Adjacent swapped step pairs tolerated per occurrence."""
    allow_truncated: bool = True
    """An occurrence may stop early at a step whose call errored."""
    min_truncated_steps: int = 3
    """The fewest steps a cut-short occurrence must reach."""
    min_gain_bits: float = 0.0
    """A pattern must compress the ledger by more than this to be proposed."""
    fragment_slack: float = 0.25
    """Drop a pattern inside a better-ranked one when its own occurrences are fewer than
    this share of the longer one's."""
    tokens_per_step: float = DEFAULT_TOKENS_PER_STEP


@dataclass(frozen=True, slots=True)
class PatternOccurrence:
    """Where one (noise-tolerant) occurrence is."""

    run: int
    """Index of the run in the input."""
    spans: tuple[tuple[int, int] | None, ...]
    """Per step, the first and last call index of its unit in the run (a retried or looped
    step spans several calls); None for steps after a cut-short occurrence stopped."""
    noise: tuple[str, ...] = ()
    """Defects tolerated: ``stray@j`` (a stray call before step j), ``swap@j`` (steps j and
    j+1 in the other order), ``cut@j`` (stopped after step j, whose call failed)."""

    @property
    def calls(self) -> tuple[int | None, ...]:
        """Per step, the call that represents it: its last (successful) attempt."""
        return tuple(s[1] if s else None for s in self.spans)


class OccurrenceList(Sequence[PatternOccurrence]):
    """A pattern's occurrences, kept as arrays and built one by one when read."""

    __slots__ = ("_first", "_last", "_length", "_runs", "_stray", "_swap_at")

    def __init__(
        self, ledger: UnitLedger, runs: IntArray, units: IntArray, occ: _Occurrences
    ) -> None:
        safe = np.maximum(units, 0)
        self._runs = runs
        self._first = np.where(units >= 0, ledger.unit_first[safe], -1)
        self._last = np.where(units >= 0, ledger.unit_last[safe], -1)
        self._stray, self._swap_at, self._length = occ.stray, occ.swap_at, occ.length

    def __len__(self) -> int:
        return len(self._runs)

    @overload
    def __getitem__(self, k: int) -> PatternOccurrence: ...
    @overload
    def __getitem__(self, k: slice) -> tuple[PatternOccurrence, ...]: ...
    def __getitem__(self, k: int | slice) -> PatternOccurrence | tuple[PatternOccurrence, ...]:
        if isinstance(k, slice):
            return tuple(self[i] for i in range(*k.indices(len(self))))
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        k %= len(self)
        spans = tuple(
            (a, b) if a >= 0 else None
            for a, b in zip(self._first[k].tolist(), self._last[k].tolist(), strict=True)
        )
        noise = [f"stray@{j}" for j in np.flatnonzero(self._stray[k]).tolist()]
        if self._swap_at[k] >= 0:
            noise.append(f"swap@{int(self._swap_at[k])}")
        if self._length[k] < len(spans):
            noise.append(f"cut@{int(self._length[k]) - 1}")
        return PatternOccurrence(run=int(self._runs[k]), spans=spans, noise=tuple(noise))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OccurrenceList | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"<{len(self)} occurrences>"


@dataclass(frozen=True, slots=True)
class RankedPattern:
    """A pattern chosen by the cover, with its evidence and estimated savings."""

    names: tuple[str, ...]
    pattern: Any
    """The mined pattern it came from."""
    rank: int
    score: float
    """Bits it saves encoding the ledger (its gain when the greedy cover chose it)."""
    occurrences: Sequence[PatternOccurrence]
    """Built on access from compact arrays (a pattern may have a million occurrences)."""
    runs: tuple[int, ...]
    """Input indices of the runs with an occurrence, ascending."""
    clean_occurrences: int
    """Occurrences with no tolerated defect."""
    repeated_steps: tuple[int, ...]
    """Steps seen as a loop (same tool several times in a row) in some occurrence."""
    lift: float
    """Occurrences over what the tools' frequencies alone predict (independence)."""
    tokens_saved_per_occurrence: float
    turns_saved_per_occurrence: float
    estimated_token_savings: float
    """tokens_saved_per_occurrence × occurrences."""
    savings_method: str
    explanation: str

    @property
    def support(self) -> int:
        """Distinct runs with an occurrence."""
        return len(self.runs)


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
            names, errors, getattr(run, "success", None), None, None, _UNKNOWN, None
        )
    else:
        names = tuple(c.name for c in tool_calls)
        errors = tuple(bool(c.error) for c in tool_calls)
        flows = [_passes_data(a, b) for a, b in zip(tool_calls, tool_calls[1:], strict=False)]
        fields = _RunFields(names, errors, run.success, None, None, _UNKNOWN, flows)
        aligned = _align_turns(run.model_calls, len(tool_calls))
        if aligned is not None:
            fields.call_tokens, fields.call_turns = aligned
            fields.source = _MEASURED
    tokens = getattr(run, "tokens", None)
    if fields.source == _UNKNOWN and tokens and names:
        per_turn = tokens / (len(names) + 1)  # one turn per call plus the final answer
        fields.call_tokens, fields.call_turns = [per_turn] * len(names), [1.0] * len(names)
        fields.source = _RUN_TOTALS
    return fields


def _align_turns(
    model_calls: Sequence[Any], n_calls: int
) -> tuple[list[float], list[float]] | None:
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


def _passes_data(first: Any, second: Any) -> bool:
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
    each run, and two pad the end). Mine :meth:`coded` (or ``sequences``); rank with
    :func:`rank_patterns`.
    """

    kept: IntArray
    """Input index of each kept run."""
    names: list[str]
    code: IntArray
    """Flat unit codes; -1 at separators."""
    err: BoolArray
    flow: BoolArray
    """Data passes from this unit's last call to the next unit."""
    flat_unit: IntArray
    """Unit index at each flat position; -1 at separators."""
    unit_run: IntArray
    unit_first: IntArray
    unit_last: IntArray
    unit_repeated: BoolArray
    unit_tokens: FloatArray
    unit_turns: FloatArray
    unit_source: IntArray
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
        new_run = (np.cumsum(runs) - 1)[self.unit_run[units]]
        n_runs = int(runs.sum())
        old_at = units + self.unit_run[units]
        at = np.arange(len(units)) + new_run
        size = len(units) + n_runs + 2

        def flat(values: npt.NDArray[Any], fill: Any) -> npt.NDArray[Any]:
            out = np.full(size, fill, dtype=values.dtype)
            out[at] = values[old_at]
            return out

        flat_unit = np.full(size, -1, dtype=np.int64)
        flat_unit[at] = np.arange(len(units))
        counts = np.bincount(self.code[old_at], minlength=len(self.names)).astype(np.float64)
        with np.errstate(divide="ignore"):
            bits = np.log2(max(len(units), 1) / counts)
        return UnitLedger(
            kept=self.kept[runs], names=self.names, code=flat(self.code, -1),
            err=flat(self.err, False), flow=flat(self.flow, False), flat_unit=flat_unit,
            unit_run=new_run, unit_first=self.unit_first[units], unit_last=self.unit_last[units],
            unit_repeated=self.unit_repeated[units], unit_tokens=self.unit_tokens[units],
            unit_turns=self.unit_turns[units], unit_source=self.unit_source[units], bits=bits,
            dropped_failed=self.dropped_failed, options=self.options,
        )  # fmt: skip

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
        list(vocab), codes, errs, toks, turns, srcs, flows, lengths, kept, dropped, opt
    )


def unit_ledger_from_calls(
    names: Sequence[str],
    codes: Sequence[int] | IntArray,
    errs: Sequence[bool] | BoolArray,
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
    code_c = np.asarray(codes, dtype=np.int64)
    err_c = np.asarray(errs, dtype=bool)
    lens = np.asarray(lengths, dtype=np.int64)
    run_start = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=run_start[1:])
    same = np.zeros(len(code_c), dtype=bool)
    np.equal(code_c[1:], code_c[:-1], out=same[1:])
    if not opt.collapse_loops:
        same[1:] &= err_c[:-1]  # only a retry after an error merges
    same[run_start[:-1][lens > 0]] = False  # a run's first call starts a unit
    first = np.flatnonzero(~same)
    del same
    last = np.append(first[1:] - 1, len(code_c) - 1) if len(first) else first
    n_units = len(first)
    units_before = np.searchsorted(first, run_start)
    unit_run = np.repeat(np.arange(len(lens), dtype=np.int64), np.diff(units_before))
    ok_before: npt.NDArray[Any] = np.zeros(
        len(err_c) + 1, dtype=np.int32 if len(err_c) < 2**31 else np.int64
    )
    np.cumsum(~err_c, out=ok_before[1:])
    ok_calls: npt.NDArray[Any] = ok_before[last + 1] - ok_before[first]
    del ok_before
    flat_size = n_units + len(lens) + 2
    flat_pos = np.arange(n_units) + unit_run
    unit_code = code_c[first]
    code = np.full(flat_size, -1, dtype=np.int64)
    code[flat_pos] = unit_code
    err = np.zeros(flat_size, dtype=bool)
    err[flat_pos] = err_c[last]
    flow = np.zeros(flat_size, dtype=bool)
    if flows is not None:
        flow[flat_pos] = np.asarray(flows, dtype=bool)[last]
    flat_unit = np.full(flat_size, -1, dtype=np.int64)
    flat_unit[flat_pos] = np.arange(n_units)
    del flat_pos
    counts = np.bincount(unit_code, minlength=len(names)).astype(np.float64)
    del unit_code
    with np.errstate(divide="ignore"):
        bits = np.log2(max(n_units, 1) / counts)

    def per_unit(values: Sequence[float] | FloatArray | None) -> FloatArray:
        if values is None or n_units == 0:  # unknown for all: a read-only view, no memory
            return np.broadcast_to(np.float64(np.nan), (n_units,))
        return np.add.reduceat(np.asarray(values, dtype=np.float64), first)

    return UnitLedger(
        kept=np.asarray(kept, dtype=np.int64),
        names=list(names),
        code=code,
        err=err,
        flow=flow,
        flat_unit=flat_unit,
        unit_run=unit_run,
        unit_first=first - run_start[unit_run],
        unit_last=last - run_start[unit_run],
        unit_repeated=ok_calls >= 2,
        unit_tokens=per_unit(toks),
        unit_turns=per_unit(turns),
        unit_source=np.minimum.reduceat(np.asarray(srcs, dtype=np.int64), first)
        if n_units and srcs is not None
        else np.broadcast_to(np.int64(_UNKNOWN), (n_units,)),
        bits=bits,
        dropped_failed=dropped,
        options=opt,
    )


# ---------------------------------------------------------------------- matching


class _Instances:
    """Instances of keyed unit tuples in one or more forms (each form: where instances
    start, and how far they span), and how many of each key are still free of covered
    units."""

    DENSE = 2**21
    """Keys below this many are their own ids (no sorting)."""

    def __init__(
        self, size: int, forms: list[tuple[IntArray, IntArray, int]], key_space: int
    ) -> None:
        all_keys = np.concatenate([k for _, k, _ in forms]) if forms else np.zeros(0, np.int64)
        self.keys: IntArray | None = None
        if key_space <= self.DENSE:
            ids, self.absent = all_keys, key_space
        else:
            self.keys, ids = np.unique(all_keys, return_inverse=True)
            self.absent = len(self.keys)
        self.live = np.bincount(ids, minlength=self.absent + 1)  # the last: absent keys
        self.forms: list[tuple[npt.NDArray[np.int32], int]] = []
        done = 0
        for at, keys, span in forms:
            id_at = np.full(size, -1, dtype=np.int32)
            id_at[at] = ids[done : done + len(keys)]
            done += len(keys)
            self.forms.append((id_at, span))

    def ids(self, keys: IntArray) -> IntArray:
        """Key ids; absent keys get the id whose count is always 0."""
        if self.keys is None:
            return np.where((keys >= 0) & (keys < self.absent), keys, self.absent)
        i = np.searchsorted(self.keys, keys)
        ok = i < len(self.keys)
        ok[ok] = self.keys[i[ok]] == keys[ok]
        return np.where(ok, i, self.absent)

    def retire(self, starts: Mapping[int, IntArray]) -> None:
        """Instances spanning a taken unit are no longer free: ``starts[span]`` are the
        places from which ``span`` more units reach one."""
        for id_at, span in self.forms:
            key = id_at[starts[span]]
            free = key >= 0
            id_at[starts[span][free]] = -1
            np.subtract.at(self.live, key[free], 1)


class _ChainIndex:
    """Where pairs of units occur (adjacent, one apart) and how many free instances pairs and
    triples have in every form a tolerant occurrence can take: the material of gain bounds.

    Steps j, j+1, j+2 of an occurrence lie, relative to the first of them, in one of
    :data:`TRIPLE_FORMS`: each next step adjacent or one apart, or one pair swapped (a stray
    never sits next to a swapped pair, see :func:`_match`).
    """

    TRIPLE_FORMS = ((0, 1, 2), (0, 1, 3), (0, 2, 3), (0, 2, 4), (1, 0, 2), (0, 2, 1))

    def __init__(self, code: IntArray, err: BoolArray) -> None:
        self.width = w = int(code.max()) + 1 if len(code) and code.max() >= 0 else 1
        self.size = size = len(code)
        a, b, c = code[:-2], code[1:-1], code[2:]
        adj_at = np.flatnonzero((a >= 0) & (b >= 0))
        skip_at = np.flatnonzero((a >= 0) & (b >= 0) & (c >= 0))
        adj_keys, skip_keys = a[adj_at] * w + b[adj_at], a[skip_at] * w + c[skip_at]
        self.adj = _Instances(size, [(adj_at, adj_keys, 1)], w * w)
        self.skip = _Instances(size, [(skip_at, skip_keys, 2)], w * w)
        # Sorted (key, start) of pairs, to find where a pattern can start.
        self._shift = shift = max(size.bit_length(), 1)
        self.adj_sorted = _sorted_pairs(adj_keys, adj_at, (w * w).bit_length() + shift < 63)
        self.skip_sorted = _sorted_pairs(skip_keys, skip_at, (w * w).bit_length() + shift < 63)
        # Where a cut-short occurrence can stop: a pair whose later step errored (swapped:
        # the first unit of the pair).
        e1, e2 = err[1:-1], err[2:]
        self.err_keys = np.sort(np.concatenate((adj_keys[e1[adj_at]], skip_keys[e2[skip_at]])))
        self.err_swapped = np.sort((b[adj_at] * w + a[adj_at])[err[:-2][adj_at]])
        forms = []
        n = size - 4
        for f in self.TRIPLE_FORMS if n > 0 else ():
            x, y, z = (code[o : o + n] for o in f)
            inside = np.ones(n, dtype=bool)
            for o in range(max(f) + 1):
                inside &= code[o : o + n] >= 0  # within one run, strays included
            at = np.flatnonzero(inside)
            forms.append((at, self._triple_key(x[at], y[at], z[at]), max(f)))
        self.triples = _Instances(size, forms, w**3 if w < 2**20 else 2**62)
        # Sorted (triple id, start) of every form, packed: where a pattern can start.
        packed = [(id_at[at].astype(np.int64) << shift) | at
                  for (id_at, _), (at, _, _) in zip(self.triples.forms, forms, strict=True)]  # fmt: skip
        self.triple_starts = np.sort(np.concatenate(packed)) if packed else np.zeros(0, np.int64)

    def _triple_key(self, x: IntArray, y: IntArray, z: IntArray) -> IntArray:
        w = self.width
        if w < 2**20:  # w**3 fits in int64
            return (x * w + y) * w + z
        # Huge vocabularies: folding keys merges some triples, which only loosens bounds.
        return ((x * w + y) % (2**42)) * 2**20 + z % 2**20

    def starts(self, pat: IntArray, opt: RankingOptions) -> IntArray:
        """Every place a tolerant occurrence of ``pat`` can start (a superset)."""
        w = self.width
        found = [_between(*self.adj_sorted, int(pat[0] * w + pat[1]))]
        if opt.max_gap:
            found.append(_between(*self.skip_sorted, int(pat[0] * w + pat[1])))
        if opt.max_swaps:
            found.append(_between(*self.adj_sorted, int(pat[1] * w + pat[0])))
        out = np.sort(np.concatenate(found))
        return out[np.concatenate(([True], out[1:] != out[:-1]))] if len(out) else out

    def starts_many(
        self, pats: Sequence[IntArray], opt: RankingOptions
    ) -> tuple[IntArray, IntArray]:
        """:meth:`starts` of several patterns: (start, pattern index), sorted by both.

        An occurrence that reaches its third step starts where an instance of its first
        three steps' triple does, in one of :data:`TRIPLE_FORMS`: far fewer places than
        its first pair has."""
        shift = self._shift
        by_triple = (
            (not opt.allow_truncated or opt.min_truncated_steps >= 3)
            and opt.max_swaps <= 1  # two swaps make forms beyond TRIPLE_FORMS
            and len(self.triple_starts) > 0
        )
        three = [k for k, p in enumerate(pats) if by_triple and len(p) >= 3]
        parts = []
        if three:
            heads = np.asarray([pats[k][:3] for k in three], dtype=np.int64)
            ids = self.triple_ids(heads[:, 0], heads[:, 1], heads[:, 2])
            lo = np.searchsorted(self.triple_starts, ids << shift)
            hi = np.searchsorted(self.triple_starts, (ids + 1) << shift)
            count = hi - lo
            at = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
            pos = self.triple_starts[at] & ((1 << shift) - 1)
            parts.append((np.repeat(np.asarray(three, dtype=np.int64), count) << shift) | pos)
        if len(three) < len(pats):
            done = set(three)
            parts += [
                (k << shift) | self.starts(p, opt) for k, p in enumerate(pats) if k not in done
            ]
        packed = np.sort(np.concatenate(parts))
        packed = (
            packed[np.concatenate(([True], packed[1:] != packed[:-1]))] if len(packed) else packed
        )
        return packed & ((1 << shift) - 1), packed >> shift

    def pair_ids(self, firsts: IntArray, seconds: IntArray) -> IntArray:
        """Ids (adjacent, one apart, adjacent reversed) of each pair, stacked on the last axis."""
        w = self.width
        return np.stack(
            [self.adj.ids(firsts * w + seconds), self.skip.ids(firsts * w + seconds),
             self.adj.ids(seconds * w + firsts)],
            axis=-1,
        )  # fmt: skip

    def triple_ids(self, x: IntArray, y: IntArray, z: IntArray) -> IntArray:
        return self.triples.ids(self._triple_key(x, y, z))

    def pair_counts(self, ids: IntArray, opt: RankingOptions) -> IntArray:
        """Free instances of each pair in any tolerated form: adjacent, one unit apart (a
        stray between, or the next pair swapped), or swapped."""
        total = self.adj.live[ids[..., 0]]
        if opt.max_gap or opt.max_swaps:
            total = total + self.skip.live[ids[..., 1]]
        if opt.max_swaps:
            total = total + self.adj.live[ids[..., 2]]
        return total

    def stop_counts(self, before: IntArray, step: IntArray) -> IntArray:
        """How often ``step`` errored right after ``before`` (in any form; not updated)."""
        k = before * self.width + step
        return _count(self.err_keys, k) + _count(self.err_swapped, k)

    def cover(self, flat: IntArray) -> None:
        """Units at ``flat`` are taken: instances touching them are no longer free."""
        size = self.size
        taken = np.zeros(size + 4, dtype=bool)
        taken[flat] = True
        near = taken[:size].copy()  # near[p]: a taken unit within p .. p + span
        starts = {}
        for span in range(1, 5):
            near |= taken[span : size + span]
            starts[span] = np.flatnonzero(near)
        for inst in (self.adj, self.skip, self.triples):
            inst.retire(starts)


def _sorted_pairs(keys: IntArray, at: IntArray, packable: bool) -> tuple[IntArray, IntArray]:
    """(key, start) sorted by both: one packed sort when both fit in an int64."""
    if not packable:
        order = np.argsort(keys, kind="stable")
        return keys[order], at[order]
    shift = max(int(at.max(initial=0)).bit_length(), 1)
    packed = np.sort((keys << shift) | at)
    return packed >> shift, packed & ((1 << shift) - 1)


def _distinct(values: IntArray) -> IntArray:
    """The distinct values, ascending (np.unique without its first call's import of
    numpy.ma, ~80 ms in a fresh process)."""
    out = np.sort(values)
    return out[np.concatenate(([True], out[1:] != out[:-1]))] if len(out) else out


def _between(keys: IntArray, pos: IntArray, key: int) -> IntArray:
    return pos[np.searchsorted(keys, key, side="left") : np.searchsorted(keys, key, side="right")]


def _count(sorted_keys: IntArray, k: IntArray) -> IntArray:
    return np.searchsorted(sorted_keys, k, side="right") - np.searchsorted(
        sorted_keys, k, side="left"
    )


@dataclass(slots=True)
class _Occurrences:
    pos: IntArray  # (n, L) flat position of each step's unit, -1 when not reached
    stray: BoolArray  # (n, L) a stray unit before step j
    swap_at: IntArray  # (n,) j when steps j, j+1 were swapped, else -1
    length: IntArray  # (n,) steps reached

    def __len__(self) -> int:
        return len(self.length)


def _match(work: IntArray, ledger: UnitLedger, starts: IntArray, pat: IntArray) -> _Occurrences:
    """Tolerant occurrences of ``pat`` starting at ``starts``, all advanced step by step
    together; non-overlapping, leftmost first. Covered units (``work == -2``) never match."""
    first = np.asarray(starts, dtype=np.int64)
    return _match_many(work, ledger, first, np.zeros(len(first), np.int64), [pat])[0][0]


def _match_many(
    work: IntArray, ledger: UnitLedger, first: IntArray, cand: IntArray, pats: Sequence[IntArray]
) -> tuple[list[_Occurrences], FloatArray]:
    """:func:`_match` of several patterns in one pass, and their :func:`_gain`: one array
    operation per step for all of them, not one per pattern. ``first`` are the possible
    starts of ``pats[cand]``, sorted by pattern then start."""
    opt = ledger.options
    sizes = np.asarray([len(p) for p in pats], dtype=np.int64)
    width = int(sizes.max())
    mat = np.full((len(pats), width + 1), -9, dtype=np.int64)  # -9: matches no unit
    for row, p in enumerate(pats):
        mat[row, : len(p)] = p
    free = work[first] >= 0  # a covered unit starts nothing
    first, cand = first[free], cand[free]
    n = len(first)
    size = sizes[cand]
    # Step-major (a step's row is contiguous); the last row of pos is never set.
    pos = np.full((width + 1, n), -1, dtype=np.int64 if len(work) >= 2**31 else np.int32)
    end = np.empty(n, dtype=np.int64)  # the last unit each row reached
    strays = np.zeros(n, dtype=np.int64)
    stray = np.zeros((width, n), dtype=bool)
    swap_at = np.full(n, -1, dtype=np.int64)
    length = size.copy()
    # The rows still advancing, in arrays aligned with ``rows`` (compacted as rows stop):
    # next unit, pattern, swaps used, step of the first swap, step already matched.
    rows, cur, who, swaps, swapped = (
        np.arange(n),
        first.copy(),
        cand,
        np.zeros(n, np.int64),
        swap_at.copy(),
    )
    pend = np.zeros(n, dtype=bool)
    pending = False
    ending = set(sizes.tolist())
    for j in range(width):
        if j in ending:  # rows of patterns this long are complete
            more = size[rows] > j
            end[rows[~more]] = cur[~more] - 1
            rows, cur, who, swaps, swapped, pend = (
                a[more] for a in (rows, cur, who, swaps, swapped, pend)
            )
        if not len(rows):
            break
        if pending:  # a row whose step j a swap matched skips it
            act = np.flatnonzero(~pend)
            pend[:] = False
            pending = False
            c = cur[act]
        else:
            act, c = None, cur
        want = mat[:, j][who if act is None else who[act]]
        ok = work[c] == want
        if ok.all():
            pos[j, rows if act is None else rows[act]] = c
            if act is None:
                cur += 1
            else:
                cur[act] += 1
            continue
        act = np.arange(len(rows)) if act is None else act
        hit = act[ok]
        pos[j, rows[hit]] = c[ok]
        cur[hit] += 1
        act, c, want = act[~ok], c[~ok], want[~ok]
        if opt.max_swaps:
            after = mat[:, j + 1][who[act]]  # -9 past the end: no swap at the last step
            sw = (work[c] == after) & (work[c + 1] == want)
            sw &= (swaps[act] < opt.max_swaps) & ~ledger.flow[c]
            if sw.any():
                hit = act[sw]
                pos[j, rows[hit]], pos[j + 1, rows[hit]] = c[sw] + 1, c[sw]
                cur[hit] += 2
                swaps[hit] += 1
                hit = hit[swapped[hit] < 0]
                swapped[hit] = j
                swap_at[rows[hit]] = j
                pend[act[sw]] = pending = True
                act, c, want = act[~sw], c[~sw], want[~sw]
        if opt.max_gap and j > 0 and len(act):
            # Not right after a swap: every pair of steps stays within one unit of each
            # other, which the gain bounds rely on.
            gap = (work[c] >= 0) & (work[c + 1] == want) & (swapped[act] != j - 2)
            hit = act[gap]
            pos[j, rows[hit]] = c[gap] + 1
            stray[j, rows[hit]] = True
            strays[rows[hit]] += 1
            cur[hit] += 2
            act = act[~gap]
        if len(act):  # no way on: these rows stop short of step j
            length[rows[act]] = j
            end[rows[act]] = cur[act] - 1
            more = np.ones(len(rows), dtype=bool)
            more[act] = False
            rows, cur, who, swaps, swapped, pend = (
                a[more] for a in (rows, cur, who, swaps, swapped, pend)
            )
    end[rows] = cur - 1
    keep = length == size
    if opt.allow_truncated:
        least = np.minimum(max(opt.min_truncated_steps, 2), size)
        last = pos[np.maximum(length - 1, 0), np.arange(n)]
        keep |= (length >= least) & ledger.err[np.maximum(last, 0)] & (last >= 0)
    idx = np.flatnonzero(keep)
    # Leftmost first, without overlaps: offsetting each pattern's positions past the
    # previous one's lets one running maximum serve all of them.
    shift = cand[idx] * (len(work) + 1)
    ends = end[idx] + shift
    begins = first[idx] + shift
    idx = idx[_leftmost(begins, ends)]
    bounds = np.searchsorted(cand[idx], np.arange(len(pats) + 1))
    out = []
    for k, p in enumerate(pats):
        rows = idx[bounds[k] : bounds[k + 1]]
        w = len(p)
        at = pos[:w, rows].T.astype(np.int64, order="C")
        out.append(_Occurrences(at, stray[:w, rows].T.copy(), swap_at[rows], length[rows]))
    # The gains, as _gain works them out, for all patterns at once.
    cum = np.cumsum(np.where(mat[:, :width] >= 0, ledger.bits[np.maximum(mat[:, :width], 0)],
                             0.0), axis=1)  # fmt: skip
    model = cum[np.arange(len(pats)), sizes - 1] + 2 * np.log2(sizes + 1) + 1
    who = cand[idx]
    uses = np.bincount(who, minlength=len(pats)).astype(np.float64)
    saved = np.bincount(who, cum[who, length[idx] - 1], minlength=len(pats))
    defects = strays[idx] + (swap_at[idx] >= 0) + (length[idx] < size[idx])
    flaws = np.bincount(who, defects, minlength=len(pats))
    with np.errstate(divide="ignore", invalid="ignore"):
        code = np.where(uses > 0, uses * np.log2(ledger.unit_count / np.maximum(uses, 1)), 0.0)
    gains = saved - code - flaws * (np.log2(sizes) + 1) - model
    return out, gains


def _leftmost(begins: IntArray, ends: IntArray) -> BoolArray:
    """Which of these spans (sorted by begin) a scan keeps that takes each one not
    overlapping one taken before it. In rounds: a span no undropped earlier one reaches is
    taken, a span a taken one reaches is dropped; chains of overlaps take a round a link."""
    state = np.zeros(len(begins), dtype=np.int8)  # 0 open, 1 taken, 2 dropped
    for _ in range(16):
        open_ = state == 0
        if not open_.any():
            return state == 1
        reach = np.maximum.accumulate(np.where(state != 2, ends, -1))
        taken = np.maximum.accumulate(np.where(state == 1, ends, -1))
        state[1:][open_[1:] & (begins[1:] > reach[:-1])] = 1
        state[1:][open_[1:] & (begins[1:] <= taken[:-1])] = 2
        state[0] = 1
    edge = -1
    for i in range(len(begins)):  # long chains: finish in order
        if state[i] == 1 or (state[i] == 0 and begins[i] > edge):
            state[i] = 1
            edge = max(edge, int(ends[i]))
        else:
            state[i] = 2
    return state == 1


def _gain(occ: _Occurrences, pat_bits: FloatArray, n_units: int) -> float:
    """Bits saved by encoding these occurrences with the pattern (see the module doc)."""
    size = len(pat_bits)
    cum = np.cumsum(pat_bits)
    model = cum[-1] + 2 * math.log2(size + 1) + 1
    u = len(occ)
    if u == 0:
        return -model
    defects = occ.stray.sum() + (occ.swap_at >= 0).sum() + (occ.length < size).sum()
    saved = cum[occ.length - 1].sum()
    return float(saved - u * math.log2(n_units / u) - defects * (math.log2(size) + 1) - model)


# ---------------------------------------------------------------------- the cover


def rank_patterns(
    runs: UnitLedger | Iterable[Any],
    patterns: Iterable[HasNames],
    *,
    top_k: int = 5,
    min_support: int = 2,
    options: RankingOptions | None = None,
) -> list[RankedPattern]:
    """The ``top_k`` patterns of the greedy MDL cover, best first.

    ``runs`` is a :class:`UnitLedger` from :func:`prepare_ledger` (mine its ``sequences``)
    or the runs themselves. Patterns mined on the raw tool names work too (a loop inside a
    pattern is read as one repeated step). A chosen pattern in fewer than ``min_support``
    distinct runs is not returned.
    """
    ledger = runs if isinstance(runs, UnitLedger) else prepare_ledger(runs, options)
    if top_k < 1 or ledger.unit_count == 0:
        return []
    cands = _candidates(ledger, patterns)
    supports = np.asarray([_support(c[1]) for c in cands], dtype=np.int64)
    return rank_coded(
        ledger, [c[0] for c in cands], supports, lambda i: cands[i][1],
        top_k=top_k, min_support=min_support,
    )  # fmt: skip


def rank_coded(
    ledger: UnitLedger,
    pats: Sequence[IntArray],
    supports: IntArray,
    pattern_of: Callable[[int], Any],
    *,
    top_k: int,
    min_support: int,
) -> list[RankedPattern]:
    """:func:`rank_patterns` on candidates given as unit codes (each with ≥ 2 steps,
    distinct), with each one's distinct-run support (0: unknown); ``pattern_of(i)`` is the
    mined pattern reported for candidate ``i``."""
    out: list[RankedPattern] = []
    if top_k < 1:
        return out
    for i, gain, occ in greedy_cover(ledger, pats, supports):
        ranked = _ranked(ledger, pattern_of(i), pats[i], gain, occ, len(out) + 1)
        if ranked.support >= min_support:
            out.append(ranked)
            if len(out) == top_k:
                break
    return out


def greedy_cover(
    ledger: UnitLedger, pats: Sequence[IntArray], supports: IntArray
) -> Iterator[tuple[int, float, _Occurrences]]:
    """The greedy MDL cover's choices, best first, as they are made: each candidate's
    index, gain and occurrences (fragments of earlier choices left out). Stop reading
    when enough are chosen: each next choice costs matches."""
    if ledger.unit_count == 0 or not pats:
        return
    index = _ChainIndex(ledger.code, ledger.err)
    bounds = _Bounds(ledger, index, list(pats))
    first = np.where(bounds.worthless(supports), 0.0, bounds.of(slice(None)))
    # Entries: (-value, candidate, cover version, exact?). A bound is refreshed when stale,
    # a match is made when a fresh bound tops the heap, a choice when a fresh gain does.
    heap = [(-g, i, 0, False) for i, g in enumerate(first.tolist()) if g > 0]
    heapq.heapify(heap)
    work = ledger.code.copy()
    chosen: list[tuple[IntArray, int]] = []
    cache = _MatchCache()
    version = 0
    best = (-1, 0.0)  # (version, the best exact gain found at that version)
    opt = ledger.options
    while heap:
        neg, i, seen, exact = heapq.heappop(heap)
        if -neg <= opt.min_gain_bits:
            break  # nothing left can beat it
        if seen != version:
            hit = cache.still_valid(i, work)
            if hit is not None:  # none of its units was covered: same occurrences, same gain
                heapq.heappush(heap, (-hit, i, version, True))
                if best[0] != version or hit > best[1]:
                    best = (version, hit)
                continue
            # Refresh the stale entries at the top together: one array call for many.
            stale = [i]
            while heap and heap[0][2] != version and len(stale) < 256:
                j = heapq.heappop(heap)[1]
                hit = cache.still_valid(j, work)
                if hit is None:
                    stale.append(j)
                else:
                    heapq.heappush(heap, (-hit, j, version, True))
                    if best[0] != version or hit > best[1]:
                        best = (version, hit)
            fresh = bounds.of(np.asarray(stale, dtype=np.int64)).tolist()
            for j, g in zip(stale, fresh, strict=True):
                if g > opt.min_gain_bits:
                    heapq.heappush(heap, (-g, j, version, False))
        elif not exact:
            # Match the next fresh bounds together, one pass for many: those above the best
            # gain known (each would have to be matched before it is chosen), or a few.
            batch = [i]
            limit = BATCH if best[0] == version else FIRST_BATCH
            while (
                heap and heap[0][2] == version and not heap[0][3] and len(batch) < limit
                and (best[0] != version or -heap[0][0] > best[1])
            ):  # fmt: skip
                batch.append(heapq.heappop(heap)[1])
            some = [pats[j] for j in batch]
            found, gains = _match_many(work, ledger, *index.starts_many(some, opt), some)
            for j, occ, gain in zip(batch, found, gains.tolist(), strict=True):
                cache.put(j, occ, gain)
                heapq.heappush(heap, (-gain, j, version, True))
                if best[0] != version or gain > best[1]:
                    best = (version, gain)
        else:
            kept = cache.take(i)
            # Evicted: nothing was covered since, so matching again finds the same.
            occ = kept or _match(work, ledger, index.starts(pats[i], opt), pats[i])
            taken = occ.pos[occ.pos >= 0]
            work[taken] = _COVERED
            index.cover(taken)
            version += 1
            if _is_fragment(pats[i], len(occ), chosen, opt.fragment_slack):
                continue
            chosen.append((pats[i], len(occ)))
            yield i, -neg, occ


BATCH = 64
"""Candidates matched together at most, when their bounds top the heap."""
FIRST_BATCH = 4
"""... when no exact gain is known yet since the last choice."""


class _MatchCache:
    """Matches kept across choices. Covering units only ever makes a match fail (a covered
    unit matches no step and is no stray), so a match none of whose units was covered since
    is still exactly what matching again would find. Bounded: the oldest go first."""

    LIMIT = 8_000_000  # matched steps kept, ~80 MB

    def __init__(self) -> None:
        self.entries: dict[int, tuple[_Occurrences, float]] = {}
        self.size = 0

    def put(self, i: int, occ: _Occurrences, gain: float) -> None:
        if i in self.entries:
            self.pop(i)
        self.entries[i] = (occ, gain)
        self.size += occ.pos.size
        while self.size > self.LIMIT and len(self.entries) > 1:
            self.pop(next(iter(self.entries)))

    def pop(self, i: int) -> _Occurrences:
        occ, _ = self.entries.pop(i)
        self.size -= occ.pos.size
        return occ

    def take(self, i: int) -> _Occurrences | None:
        return self.pop(i) if i in self.entries else None

    def still_valid(self, i: int, work: IntArray) -> float | None:
        entry = self.entries.get(i)
        if entry is None:
            return None
        occ, gain = entry
        if _disturbed(occ, work):
            self.pop(i)
            return None
        return gain


def _disturbed(occ: _Occurrences, work: IntArray) -> bool:
    """Whether a unit these occurrences matched or passed over as a stray is covered now
    (else matching again finds exactly them)."""
    return bool(
        (work[occ.pos[occ.pos >= 0]] == _COVERED).any()
        or (occ.stray.any() and (work[occ.pos[occ.stray] - 1] == _COVERED).any())
    )


def replay_cover(
    ledger: UnitLedger,
    pats: Iterable[IntArray],
    pattern_of: Callable[[int, tuple[int, ...]], Any],
    *,
    top_k: int,
    min_support: int,
    where: CodePositions | None = None,
    min_gain_bits: float | None = None,
) -> list[RankedPattern]:
    """The cover of ``ledger`` by ``pats`` taken in the given order (e.g. as a greedy cover
    of a sample chose them): occurrences, supports, gains and savings exact on ``ledger``.

    Scans of the ledger, no index: the cost of a few patterns on a ledger too big to rank
    whole (``where``: the ledger's :class:`CodePositions`, if built already). ``pats`` is
    read only as far as ``top_k`` results need (it may be a lazy cover), a batch matched
    together at a time. ``pattern_of(i, runs)`` is the mined pattern reported for the
    ``i``-th pattern, given the runs its occurrences are in. ``min_gain_bits`` overrides
    the ledger options' threshold.
    """
    opt = ledger.options
    threshold = opt.min_gain_bits if min_gain_bits is None else min_gain_bits
    where = where or CodePositions(ledger.code)
    work = ledger.code.copy()
    chosen: list[tuple[IntArray, int]] = []
    out: list[RankedPattern] = []
    source = iter(pats)
    i = -1
    while len(out) < top_k:
        batch = list(islice(source, min(top_k - len(out), REPLAY_BATCH)))
        if not batch:
            break
        found, gains = _match_many(work, ledger, *_scan_starts_many(work, batch, opt, where), batch)
        for pat, occ, gain in zip(batch, found, gains.tolist(), strict=True):
            i += 1
            if len(out) == top_k:
                break
            if _disturbed(occ, work):  # an earlier one of the batch took some of its units
                occ = _match(work, ledger, _scan_starts(work, pat, opt, where), pat)
                gain = _gain(occ, ledger.bits[pat], ledger.unit_count)
            work[occ.pos[occ.pos >= 0]] = _COVERED
            if gain <= threshold or _is_fragment(pat, len(occ), chosen, opt.fragment_slack):
                continue
            chosen.append((pat, len(occ)))
            ranked = _ranked(ledger, None, pat, gain, occ, len(out) + 1)
            if ranked.support >= min_support:
                out.append(replace(ranked, pattern=pattern_of(i, ranked.runs)))
    return out


REPLAY_BATCH = 16
"""Patterns :func:`replay_cover` matches together (more: fewer passes, more memory)."""


class CodePositions:
    """Where each code sits in a flat code array, for ledgers too big to index by pairs: one
    packed sort, then each code's positions (ascending) are a slice."""

    def __init__(self, code: IntArray) -> None:
        at = np.flatnonzero(code >= 0)
        bits = max(len(code).bit_length(), 1)
        packed = (code[at] << bits) | at
        packed.sort()
        self.code = packed >> bits
        self.pos = packed & ((1 << bits) - 1)

    def of(self, c: int) -> IntArray:
        lo, hi = np.searchsorted(self.code, [c, c + 1])
        return self.pos[lo:hi]


def _scan_starts(
    work: IntArray, pat: IntArray, opt: RankingOptions, where: CodePositions
) -> IntArray:
    """Every free place a tolerant occurrence of ``pat`` can start (a superset)."""
    a, b = int(pat[0]), int(pat[1])
    at = where.of(a)
    ok = work[at + 1] == b
    if opt.max_gap:
        ok |= work[at + 2] == b
    found = at[ok & (work[at] == a)]
    if opt.max_swaps:
        at = where.of(b)
        found = _distinct(np.concatenate((found, at[(work[at + 1] == a) & (work[at] == b)])))
    return found


def _scan_starts_many(
    work: IntArray, pats: Sequence[IntArray], opt: RankingOptions, where: CodePositions
) -> tuple[IntArray, IntArray]:
    """:func:`_scan_starts` of several patterns: (start, pattern index), sorted by both.

    Each pattern's first two steps ``a, b`` are found from the positions of the rarer of
    the two: ``a`` then ``b`` one or two later, or ``b`` then ``a`` (swapped)."""
    heads = np.asarray([p[:2] for p in pats], dtype=np.int64)
    lo = np.searchsorted(where.code, heads)
    count = np.searchsorted(where.code, heads + 1) - lo
    by_b = count[:, 1] < count[:, 0]  # look the pair up from its second step
    pick = np.where(by_b, 1, 0)
    rows = np.arange(len(pats))
    lo, count = lo[rows, pick], count[rows, pick]
    at = where.pos[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())]
    who = np.repeat(rows, count)
    a, b, from_b = heads[who, 0], heads[who, 1], by_b[who]
    found = []
    for gap in (1, 2) if opt.max_gap else (1,):  # a, then b next or one unit later
        start = np.where(from_b, at - gap, at)
        ok = (work[start] == a) & (work[start + gap] == b)
        found.append((who[ok] << _SHIFT) | start[ok])
    if opt.max_swaps:  # b, then a: the occurrence starts at b
        start = np.where(from_b, at, at - 1)
        ok = (work[start] == b) & (work[start + 1] == a)
        found.append((who[ok] << _SHIFT) | start[ok])
    packed = np.sort(np.concatenate(found))
    packed = packed[np.concatenate(([True], packed[1:] != packed[:-1]))] if len(packed) else packed
    return packed & ((1 << _SHIFT) - 1), packed >> _SHIFT


_SHIFT = 40
"""Bits of a flat position in a packed (pattern, position) key."""


class _Bounds:
    """Upper bounds on candidates' gains from how many free instances their pairs have.

    Best case: every chain of free pair instances is a clean occurrence; one cut short at
    step j also needs an errored unit of that tool there. Cheap enough to refresh after
    each choice, when the chosen pattern's units stop counting, so the fragments and
    variants of a chosen workflow sink without being matched again.
    """

    def __init__(self, ledger: UnitLedger, index: _ChainIndex, pats: list[IntArray]) -> None:
        opt = ledger.options
        self.index, self.opt, self.n_units = index, opt, ledger.unit_count
        self.sizes = np.asarray([len(p) for p in pats], dtype=np.int64)
        width = int(self.sizes.max())
        mat = np.full((len(pats), width), -1, dtype=np.int64)
        for row, p in enumerate(pats):
            mat[row, : len(p)] = p
        self.ids = index.pair_ids(np.maximum(mat[:, :-1], 0), np.maximum(mat[:, 1:], 0))
        self.ids[mat[:, 1:] < 0] = index.adj.absent  # past the end: an absent pair
        self.ids[..., 1][mat[:, 1:] < 0] = index.skip.absent
        self.bits = np.where(mat >= 0, ledger.bits[np.maximum(mat, 0)], 0.0)
        m = np.maximum(mat, 0)
        self.triple_ids = index.triple_ids(m[:, :-2], m[:, 1:-1], m[:, 2:])
        self.triple_ids[mat[:, 2:] < 0] = index.triples.absent
        least = max(opt.min_truncated_steps, 2)
        steps = np.arange(width)
        # Where an occurrence may stop early: at step j (reached j + 1 steps) when that step's
        # unit errored, as often as the step errored right after the one before it.
        may_stop = (steps + 1 >= least) & (steps < self.sizes[:, None] - 1) & opt.allow_truncated
        m = np.maximum(mat, 0)
        errored = np.zeros_like(mat)
        errored[:, 1:] = index.stop_counts(m[:, :-1], m[:, 1:])
        self.stops = np.where(may_stop & (mat >= 0), errored, 0)
        self.model = self.bits.sum(axis=1) + 2 * np.log2(self.sizes + 1) + 1

    def of(self, rows: IntArray | slice) -> FloatArray:
        big = np.iinfo(np.int64).max
        counts = self.index.pair_counts(self.ids[rows], self.opt)  # (n, width - 1)
        sizes, bits, stops = self.sizes[rows], self.bits[rows], self.stops[rows]
        n, width = bits.shape
        pairs = np.arange(width - 1)
        counts = np.where(pairs < sizes[:, None] - 1, counts, big)
        # Reaching step j + 1 also needs the triple ending there.
        counts[:, 1:] = np.minimum(counts[:, 1:], self.index.triples.live[self.triple_ids[rows]])
        # reach[:, j]: occurrences that can reach step j (every pair before it is there).
        reach = np.concatenate(
            (np.full((n, 1), big), np.minimum.accumulate(counts, axis=1)), axis=1
        )
        complete = reach[np.arange(n), sizes - 1]
        cut = np.minimum(stops, reach)  # stopping right after step j
        # Occurrences that reach step j: the complete ones plus those stopping at j or later.
        later = np.cumsum(cut[:, ::-1], axis=1)[:, ::-1]
        at_step = np.minimum(reach, complete[:, None] + later)
        uses = at_step[:, 0]
        saved = (bits * np.where(bits > 0, at_step, 0)).sum(axis=1)
        u = np.maximum(uses, 1).astype(np.float64)
        return np.maximum(saved - uses * np.log2(self.n_units / u), 0.0) - self.model[rows]

    def worthless(self, supports: IntArray) -> BoolArray:
        """Candidates whose exact occurrences (the miner's ``support``, 0 when it gives none)
        are no more than their tools' frequencies alone predict."""
        exact = np.asarray(supports, dtype=np.float64)
        e = np.maximum(exact, 1.0)
        total = self.bits.sum(axis=1)
        return (exact > 0) & (e * (total - np.log2(self.n_units / e)) <= self.model)


def _support(pattern: Any) -> int:
    s = getattr(pattern, "support", None)
    return s if isinstance(s, int) else 0


def _candidates(ledger: UnitLedger, patterns: Iterable[HasNames]) -> list[tuple[IntArray, Any]]:
    """Distinct patterns as unit codes (loops read as one step), longest first."""
    vocab = {n: i for i, n in enumerate(ledger.names)}
    seen: dict[tuple[int, ...], Any] = {}
    for p in patterns:
        codes: list[int] = []
        for name in p.names:
            c = vocab.get(name)
            if c is None:
                break
            if not (ledger.options.collapse_loops and codes and codes[-1] == c):
                codes.append(c)
        else:
            if len(codes) >= 2:
                seen.setdefault(tuple(codes), p)
    order = sorted(seen, key=lambda k: (-len(k), k))
    return [(np.asarray(k, dtype=np.int64), seen[k]) for k in order]


def _contains(long: IntArray, short: IntArray) -> bool:
    n, m = len(long), len(short)
    if m >= n:
        return False
    big, small = long.tolist(), short.tolist()
    return any(big[o : o + m] == small for o in range(n - m + 1))


def _is_fragment(
    pat: IntArray, usage: int, better: list[tuple[IntArray, int]], slack: float
) -> bool:
    """Inside a better-ranked pattern, with few occurrences of its own beside it."""
    return any(_contains(long, pat) and usage < slack * used for long, used in better)


# ---------------------------------------------------------------------- results


def _ranked(
    ledger: UnitLedger, pattern: Any, pat: IntArray, gain: float, occ: _Occurrences, rank: int
) -> RankedPattern:
    names = tuple(ledger.names[c] for c in pat.tolist())
    reached = occ.pos >= 0
    units = np.where(reached, ledger.flat_unit[np.maximum(occ.pos, 0)], -1)
    first_unit = units[:, 0] if len(units) else np.zeros(0, dtype=np.int64)
    first_unit = np.where(first_unit >= 0, first_unit, units.max(axis=1) if len(units) else 0)
    run_of = ledger.kept[ledger.unit_run[first_unit]] if len(units) else np.zeros(0, np.int64)
    occurrences = OccurrenceList(ledger, run_of, units, occ)
    clean = int(((~occ.stray.any(axis=1)) & (occ.swap_at < 0) & (occ.length == len(pat))).sum())
    loops = ledger.unit_repeated[np.maximum(units, 0)] & reached
    repeated = tuple(int(j) for j in np.flatnonzero(loops.any(axis=0))) if len(units) else ()
    n = ledger.unit_count
    expected = n * float(np.exp2(-ledger.bits[pat].sum()))
    lift = len(occ) / expected if expected > 0 else math.inf
    per_tok, per_turn, method = _savings(ledger, units, reached)
    total = per_tok * len(occ)
    noisy = {
        "with a stray call": int(occ.stray.any(axis=1).sum()),
        "with two steps swapped": int((occ.swap_at >= 0).sum()),
        "cut short by a failing call": int((occ.length < len(pat)).sum()),
    }
    parts = ", ".join(f"{v} {k}" for k, v in noisy.items() if v)
    runs = _distinct(run_of)
    explanation = (
        f"{len(occ)} occurrences in {len(runs)} runs ({clean} exact"
        + (f"; {parts}" if parts else "")
        + f"); saves {gain:.0f} bits encoding the ledger; {lift:.3g}× more often than its "
        f"tools' frequencies predict"
        + (
            f"; step(s) {', '.join(str(j + 1) for j in repeated)} repeat in a loop"
            if repeated
            else ""
        )
        + f". Saves ~{per_turn:.1f} model turns and ~{per_tok:.0f} tokens per use."
    )
    return RankedPattern(
        names=names,
        pattern=pattern,
        rank=rank,
        score=round(gain, 3),
        occurrences=occurrences,
        runs=tuple(runs.tolist()),
        clean_occurrences=clean,
        repeated_steps=repeated,
        lift=lift,
        tokens_saved_per_occurrence=per_tok,
        turns_saved_per_occurrence=per_turn,
        estimated_token_savings=total,
        savings_method=method,
        explanation=explanation,
    )


def _savings(ledger: UnitLedger, units: IntArray, reached: BoolArray) -> tuple[float, float, str]:
    """Tokens and model turns saved per occurrence, and how that was worked out."""
    if len(units) == 0:
        return 0.0, 0.0, "no occurrences"
    safe = np.maximum(units, 0)
    tokens = np.where(reached, ledger.unit_tokens[safe], 0.0).sum(axis=1)
    turns = np.where(reached, ledger.unit_turns[safe], 0.0).sum(axis=1)
    source = np.where(reached, ledger.unit_source[safe], _MEASURED).min(axis=1)
    calls = np.where(reached, ledger.unit_last[safe] - ledger.unit_first[safe] + 1, 0).sum(axis=1)
    for level, how in (
        (_MEASURED, "measured: tokens of the model turns that requested the pattern's calls "
         "(usage_metadata)"),
        (_RUN_TOTALS, "run totals: each run's tokens spread evenly over its model turns "
         "(one per call plus the answer)"),
    ):  # fmt: skip
        use = source == level
        if use.any():
            t, k = tokens[use], turns[use]
            saved = np.where(k > 0, t * (k - 1) / np.maximum(k, 1e-9), 0.0)
            return (
                float(saved.mean()),
                float((k - 1).clip(min=0).mean()),
                f"{how}, in {int(use.sum())} of {len(units)} occurrences; all turns but the "
                "one that calls the flow are saved",
            )
    per_step = ledger.options.tokens_per_step
    saved_turns = float((calls - 1).clip(min=0).mean())
    return (
        per_step * saved_turns,
        saved_turns,
        f"estimate: {per_step:g} tokens per saved model turn (DEFAULT_TOKENS_PER_STEP; no token "
        "usage recorded), one turn per call but the one that calls the flow",
    )


def with_measured_savings(
    ranked: RankedPattern, runs: Mapping[int, TaskRun] | Sequence[TaskRun]
) -> RankedPattern:
    """``ranked`` with savings measured from full runs (keyed by input index), e.g. when it
    was ranked from name-only sequences and the runs behind its occurrences were loaded."""
    saved_tokens: list[float] = []
    saved_turns: list[float] = []
    for occ in ranked.occurrences:
        try:
            run = runs[occ.run]
        except (KeyError, IndexError):
            continue
        aligned = _align_turns(run.model_calls, len(run.tool_calls))
        if aligned is None:
            continue
        tok, turn = aligned
        calls = [i for span in occ.spans if span for i in range(span[0], span[1] + 1)]
        t = sum(tok[i] for i in calls)
        k = sum(turn[i] for i in calls)
        if k > 0:
            saved_tokens.append(t * (k - 1) / k)
            saved_turns.append(max(k - 1, 0.0))
    if not saved_tokens:
        return ranked
    per_tok = sum(saved_tokens) / len(saved_tokens)
    return replace(
        ranked,
        tokens_saved_per_occurrence=per_tok,
        turns_saved_per_occurrence=sum(saved_turns) / len(saved_turns),
        estimated_token_savings=per_tok * len(ranked.occurrences),
        savings_method=f"measured: tokens of the model turns that requested the pattern's calls "
        f"(usage_metadata), in {len(saved_tokens)} of {len(ranked.occurrences)} occurrences; all "
        "turns but the one that calls the flow are saved",
    )


def rank_runs(
    runs: Iterable[Any],
    *,
    top_k: int = 5,
    min_length: int = 3,
    min_support: int = 3,
    options: RankingOptions | None = None,
    miner: Callable[..., Sequence[HasNames]] | None = None,
) -> list[RankedPattern]:
    """Units → closed patterns (``miner``, default :func:`mine_closed_patterns`) → ranking."""
    ledger = prepare_ledger(runs, options)
    if ledger.unit_count == 0:
        return []
    mine = miner or mine_closed_patterns
    patterns = mine(ledger.sequences, min_length=min_length, min_support=min_support)
    return rank_patterns(ledger, patterns, top_k=top_k, min_support=min_support)
