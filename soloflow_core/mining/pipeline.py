"""Mine and rank a ledger in one call: units → closed patterns → greedy MDL cover.

The single entry point the detector, the CLI and the benchmarks use, so that all of them
measure the same thing. Input is either the store's columnar view
(:class:`~soloflow_core.store.ToolNameColumns`, what :meth:`Store.read_tool_names`
returns) or runs in memory (task runs, or anything with ``names``, ``errors`` and
``success``). Columns are turned into units in whole arrays, with no Python object per run
or call.

**Large ledgers: two stages.** The greedy cover costs a match per candidate it looks at,
each proportional to the ledger, so beyond ``sample_units`` units (default
:data:`DEFAULT_SAMPLE_UNITS`, about 20k runs) it runs on a sample:

1. A uniform sample of the runs (each kept run independently, with probability
   ``sample_units / units``, seeded: the same ledger gives the same sample) is mined (with
   the support threshold scaled to the sample, never below 2) and covered greedily.
2. The sample's choices, in their order, cover the *whole* ledger again
   (:func:`~soloflow_core.mining.ranking.replay_cover`): every occurrence, support, score,
   savings figure and the reported mined pattern's support are exact on all runs; a
   pattern that turns out a fragment or below ``min_support`` there is dropped, and the
   sample's cover is read one choice further (it is lazy: choices past the ``top_k`` the
   whole needs are never made).

The whole ledger is needed only from the replay on: from store columns, the sample's units
are built straight from the columns. A second thread then builds the sample's chain index
(what the cover reads) while the sample is mined, and the whole ledger's units and the index
that finds where patterns start in it (:func:`~soloflow_core.mining.positions.positions`)
while the cover makes its first choices: bulk numpy work, which releases the GIL. Each is
waited for where it is needed: only the order of the work changes, never what it finds.

What is approximate is only *which* patterns are chosen and their order: a pattern's gain
on the sample estimates its share of the whole one's, with a relative error of about
``1 / sqrt(occurrences in the sample)`` (sampling runs independently). A pattern in a share
*p* of the runs appears in the sample in about ``p × sampled runs`` of them, so one that
explains too little to be expected in the sample a few times is missed; such a pattern
saves little, and at the default budget (~20k runs) anything in ≥ 0.1 % of the runs is
seen ~20 times. Measured (benchmarks on synthetic ledgers, 50 workflows, 20 % noise):
precision and recall in the top 50 stay ≥ 0.9 at 100k and 1M runs. ``sample_units=None``
ranks the whole ledger exactly, at the cost of time.

Example:
    >>> cols = store.read_tool_names(user_id="alice", agent_id="bot")
    >>> [p.names for p in mine_ranked(cols, top_k=5)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from itertools import chain, islice
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.random import default_rng  # at import: numpy loads it lazily, ~5 ms

from soloflow_core.mining._packing import distinct_values
from soloflow_core.mining.cover import greedy_cover, rank_coded, replay_cover
from soloflow_core.mining.fast import CodedLedger, CodedPatterns, MinedPattern, mine_levels
from soloflow_core.mining.matching import ChainIndex
from soloflow_core.mining.options import SOURCE_RUN_TOTALS, SOURCE_UNKNOWN, RankingOptions
from soloflow_core.mining.positions import CodePositions, PairPositions, positions
from soloflow_core.mining.results import RankedPattern
from soloflow_core.mining.units import (
    UnitLedger,
    continues_unit,
    prepare_ledger,
    unit_ledger_from_calls,
)

if TYPE_CHECKING:
    from soloflow_core.mining.options import BoolArray, FloatArray, IntArray

__all__ = ["DEFAULT_SAMPLE_UNITS", "MiningProgress", "mine_ranked", "prepare_units"]

DEFAULT_SAMPLE_UNITS = 150_000
"""Above this many units, :func:`mine_ranked` mines and ranks a sample of the runs, then
counts the chosen patterns on all of them (see the module docstring). 150k units (about
20k runs) keeps top-50 precision and recall ≥ 0.9 on 20 % noise; 100k did not on 1M runs."""

Positions = CodePositions | PairPositions

MiningProgress = Callable[[str, float], None]
"""Called with a phase name (``"units"``, ``"mine"``, ``"rank"``) and the fraction done."""


def _column_units(
    cols: Any, options: RankingOptions | None, sample: BoolArray | None = None
) -> UnitLedger:
    """Units of the store's columns, in numpy throughout (no per-run Python objects). With
    ``sample`` (a flag per kept run), of the flagged runs only: the ledger
    ``_column_units(cols, options).restricted_to(sample)`` is, without building the whole."""
    opt = options or RankingOptions()
    offsets: IntArray = np.asarray(cols.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    keep = _kept_runs(cols, opt)
    dropped = len(lengths) - int(keep.sum())
    if sample is not None:
        keep[np.flatnonzero(keep)[~sample]] = False
    kept = np.flatnonzero(keep)
    codes, errors = _kept_calls(cols, keep, lengths)
    lens = lengths[kept]
    # A run's token total spread over its turns: one per call plus the final answer.
    tokens = np.asarray(cols.tokens, dtype=np.float64)[kept]
    known = np.isfinite(tokens) & (tokens != 0) & (lens > 0)
    per_turn = np.where(known, tokens / (lens + 1), np.nan)
    ledger = unit_ledger_from_calls(  # the columns carry no arguments: no data flow known
        cols.names,
        codes,
        errors,
        toks=None,
        turns=None,
        srcs=None,
        flows=None,
        lengths=lens,
        kept=kept,
        dropped=dropped,
        opt=opt,
    )
    return _with_run_totals(ledger, known, per_turn)


def _kept_runs(cols: Any, opt: RankingOptions) -> BoolArray:
    """Which runs of the columns count (failed ones only with ``include_failed_runs``)."""
    if opt.include_failed_runs:
        return np.ones(len(cols.offsets) - 1, dtype=bool)
    return cast("BoolArray", np.asarray(cols.success) != 0)


def _kept_calls(cols: Any, keep: BoolArray, lengths: IntArray) -> tuple[IntArray, BoolArray]:
    """The codes and error flags of the kept runs' calls."""
    codes, errors = np.asarray(cols.codes), np.asarray(cols.errors, dtype=bool)
    if keep.all():
        return codes, errors
    calls = np.repeat(keep, lengths)  # np.compress rather than a boolean index
    return np.compress(calls, codes), np.compress(calls, errors)


def _column_unit_count(cols: Any, options: RankingOptions | None) -> tuple[int, int]:
    """Kept runs and units of the columns' ledger, without building it (what deciding on a
    sample needs). A run's first call always starts a unit, so the units of the kept runs
    are counted among all the calls: no copy of the kept ones."""
    opt = options or RankingOptions()
    offsets: IntArray = np.asarray(cols.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    keep = _kept_runs(cols, opt)
    codes, errors = np.asarray(cols.codes), np.asarray(cols.errors, dtype=bool)
    starts = ~continues_unit(codes, errors, lengths, run_start=offsets, opt=opt)
    if not keep.all():
        starts &= np.repeat(keep, lengths)
    return int(keep.sum()), int(np.count_nonzero(starts))


def _name_units(runs: list[Any], options: RankingOptions | None) -> UnitLedger | None:
    """Units of runs that carry only names, errors, success and tokens (the store's
    :class:`~soloflow_core.store.RunSequence`), read a field at a time rather than a run at
    a time; the same ledger as :func:`prepare_ledger` gives them. None when a run has tool
    calls or its errors are not one per call."""
    for kind in {type(r) for r in runs}:  # a slotted class without tool_calls has none
        if hasattr(kind, "tool_calls") or kind.__dictoffset__:
            if any(getattr(r, "tool_calls", None) is not None for r in runs):
                return None
            break
    opt = options or RankingOptions()
    given = len(runs)
    kept = list(range(given))
    if not opt.include_failed_runs:
        failed = {i for i, s in enumerate(_field(runs, "success")) if s is False}
        if failed:
            kept = [i for i in kept if i not in failed]
            runs = [runs[i] for i in kept]
    names = _field(runs, "names")
    errors = [e or () for e in _field(runs, "errors")]
    lens = np.fromiter(map(len, names), np.int64, len(names))
    if not np.array_equal(lens, np.fromiter(map(len, errors), np.int64, len(errors))):
        return None
    flat = list(chain.from_iterable(names))
    vocab = {n: i for i, n in enumerate(dict.fromkeys(flat))}  # first appearance, as runs do
    codes = np.fromiter(map(vocab.__getitem__, flat), np.int64, len(flat))
    errs = _flags(errors, lens)
    # A run's token total spread over its turns: one per call plus the final answer.
    tokens = _field(runs, "tokens")
    known = np.fromiter(map(bool, tokens), bool, len(runs)) & (lens > 0)
    total = np.asarray([float(t) if k else 0.0 for t, k in zip(tokens, known, strict=True)])
    ledger = unit_ledger_from_calls(
        list(vocab),
        codes,
        errs,
        toks=None,
        turns=None,
        srcs=None,
        flows=None,
        lengths=lens,
        kept=kept,
        dropped=given - len(kept),
        opt=opt,
    )
    return _with_run_totals(ledger, known, np.where(known, total / (lens + 1), np.nan))


def _flags(errors: list[Any], lens: IntArray) -> BoolArray:
    """Each call's error flag (its truth value), all runs concatenated: read only in the
    runs where some call errored (most runs have none)."""
    out = np.zeros(int(lens.sum()), dtype=bool)
    some = np.flatnonzero(np.fromiter(map(any, errors), bool, len(errors)))
    if len(some):
        n = lens[some]
        start = (np.cumsum(lens) - lens)[some]
        at = np.repeat(start - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        flags = chain.from_iterable(errors[i] for i in some.tolist())
        out[at] = np.fromiter(map(bool, flags), bool, len(at))
    return out


def _with_run_totals(ledger: UnitLedger, known: BoolArray, per_turn: FloatArray) -> UnitLedger:
    """``ledger`` with each kept run's token total spread over its turns (``per_turn``,
    where ``known``): a unit of k calls is k turns. Per unit, not per call: the same as
    spreading per call and summing each unit's calls."""
    if not known.any():
        return ledger
    run = ledger.unit_run
    # In place where it can be: each fresh array of a whole ledger's size costs page faults.
    calls = np.subtract(ledger.unit_last, ledger.unit_first, dtype=np.float64)
    calls += 1
    ledger.unit_tokens = per_turn[run]
    ledger.unit_tokens *= calls
    of_known = known[run]
    ledger.unit_source = np.where(of_known, np.int8(SOURCE_RUN_TOTALS), np.int8(SOURCE_UNKNOWN))
    np.copyto(calls, np.nan, where=~of_known)
    ledger.unit_turns = calls
    return ledger


def _field(runs: list[Any], name: str) -> list[Any]:
    """Each run's ``name`` attribute (None where it has none)."""
    try:
        return list(map(attrgetter(name), runs))
    except AttributeError:
        return [getattr(r, name, None) for r in runs]


def prepare_units(runs: Any, options: RankingOptions | None = None) -> UnitLedger:
    """The unit ledger of ``runs`` (store columns or runs in memory)."""
    if hasattr(runs, "codes") and hasattr(runs, "offsets"):
        return _column_units(runs, options)
    runs = list(runs)
    ledger = _name_units(runs, options)
    return ledger if ledger is not None else prepare_ledger(runs, options)


def mine_ranked(
    runs: Any | Sequence[Any],
    *,
    min_length: int = 3,
    min_support: int = 3,
    top_k: int = 20,
    options: RankingOptions | None = None,
    on_progress: MiningProgress | None = None,
    sample_units: int | None = DEFAULT_SAMPLE_UNITS,
) -> list[RankedPattern]:
    """The ``top_k`` patterns that best explain the ledger, best first.

    ``RankedPattern.runs`` and each occurrence's ``run`` index the input runs (the
    columns' run order). Patterns shorter than ``min_length`` units or in fewer than
    ``min_support`` distinct runs are not proposed. A ledger of more than ``sample_units``
    units is mined and ranked on a sample of its runs, then counted whole (see the module
    docstring); ``None`` never samples.
    """
    report = on_progress or (lambda _phase, _done: None)
    report("units", 0.0)
    if sample_units is not None and top_k >= 1 and _is_columns(runs):
        kept, units = _column_unit_count(runs, options)
        if units > sample_units:  # the sample is mined while the whole ledger is built
            sample = _sample(kept, units, sample_units)
            ledger = _column_units(runs, options, sample)
            report("units", 1.0)
            with ThreadPoolExecutor(max_workers=1) as background:
                index = background.submit(ChainIndex, ledger.code, ledger.err)
                whole = background.submit(_indexed, lambda: _column_units(runs, options))
                return _mine_sampled(
                    ledger,
                    index,
                    whole,
                    kept=kept,
                    min_length=min_length,
                    min_support=min_support,
                    top_k=top_k,
                    report=report,
                )
    ledger = prepare_units(runs, options)
    report("units", 1.0)
    if ledger.unit_count == 0 or top_k < 1:
        return []
    if sample_units is not None and ledger.unit_count > sample_units:
        part = ledger.restricted_to(_sample(len(ledger.kept), ledger.unit_count, sample_units))
        with ThreadPoolExecutor(max_workers=1) as background:
            index = background.submit(ChainIndex, part.code, part.err)
            whole = background.submit(_indexed, lambda: ledger)
            return _mine_sampled(
                part,
                index,
                whole,
                kept=len(ledger.kept),
                min_length=min_length,
                min_support=min_support,
                top_k=top_k,
                report=report,
            )
    report("mine", 0.0)
    coded = ledger.coded()
    levels = mine_levels(coded, min_length=min_length, min_support=min_support)
    levels = [*_broken_seeds(coded, min_length=min_length, min_support=min_support), *levels]
    report("mine", 1.0)
    report("rank", 0.0)
    cands = _Candidates(levels, ledger.names)
    ranked = rank_coded(
        ledger,
        cands.rows,
        _with_seed_orders(cands),
        pattern_of=cands.mined,
        top_k=top_k,
        min_support=min_support,
    )
    if len(ranked) < top_k and cands.rows:
        ranked += _below_significance(
            ledger, ranked, cands, slots=top_k - len(ranked), min_support=min_support
        )
    report("rank", 1.0)
    return ranked


def _is_columns(runs: Any) -> bool:
    return hasattr(runs, "codes") and hasattr(runs, "offsets")


def _indexed(build: Callable[[], UnitLedger]) -> tuple[UnitLedger, Positions]:
    """The ledger ``build`` gives, and where its patterns can start."""
    ledger = build()
    return ledger, positions(ledger.code)


def _mine_sampled(
    ledger: UnitLedger,
    index: Future[ChainIndex],
    whole: Future[tuple[UnitLedger, Positions]],
    *,
    kept: int,
    min_length: int,
    min_support: int,
    top_k: int,
    report: MiningProgress,
) -> list[RankedPattern]:
    """Mine and cover the sample ``ledger``, and replay its choices on the whole one (of
    ``kept`` runs). Another thread builds the sample's chain ``index`` and the ``whole``
    ledger meanwhile: the first is waited for when the cover starts, the second when the
    replay does."""
    report("mine", 0.0)
    # A pattern in min_support runs of the whole may be in fewer of the sample: mine it
    # with the support scaled down (never below 2), rank it on what it explains.
    share = len(ledger.kept) / max(kept, 1)
    floor = max(2, min(min_support, math.floor(min_support * share)))
    levels = mine_levels(ledger.coded(), min_length=min_length, min_support=floor)
    report("mine", 1.0)
    report("rank", 0.0)
    cands = _Candidates(levels, ledger.names)
    # The sample's cover is read lazily: as far as the whole's needs (counted whole, a
    # choice may turn out a fragment or too rare, and the next one is read instead).
    order: list[IntArray] = []

    def choices() -> Iterator[IntArray]:
        for _i, pat, _gain, occ in greedy_cover(
            ledger, cands.rows, cands.support, index=index.result()
        ):
            if _run_support(ledger, occ.pos) >= 2:
                order.append(pat)
                yield pat

    chosen = choices()
    # Chosen before waiting for the whole ledger: the replay reads at least ``top_k``
    # choices (each result is one), unless the cover runs out first.
    first = list(islice(chosen, top_k))
    full, where = whole.result()
    ranked = replay_cover(
        full,
        chain(first, chosen),
        lambda i, _runs: _whole_pattern(full, order[i], where),
        top_k=top_k,
        min_support=min_support,
        where=where,
    )
    if len(ranked) < top_k and cands.rows:
        ranked += _below_significance(
            full, ranked, cands, slots=top_k - len(ranked), min_support=min_support
        )
    report("rank", 1.0)
    return ranked


def _broken_seeds(coded: CodedLedger, *, min_length: int, min_support: int) -> list[CodedPatterns]:
    """The ``min_length``-grams held exactly by 2 to ``min_support - 1`` runs: more
    candidates for the cover, which counts their noise-tolerant occurrences (and grows them).

    A short workflow run a handful of times is often held exactly by fewer than
    ``min_support`` runs (a stray call or a swap breaks each of the others), and no part of
    it is mined (its parts are shorter than ``min_length``), so growing cannot find it
    either. Seeded here, it is proposed when its tolerant occurrences are in
    ``min_support`` runs, as any pattern is."""
    if min_support <= 2:
        return []
    seeds = mine_levels(coded, min_length=min_length, min_support=2, max_length=min_length)
    out = []
    for lv in seeds:
        rare = lv.support < min_support
        # Support 0 (unknown): the cover's quick test of worth reads exact support, which
        # is what these lack; it judges them on their tolerant occurrences instead.
        unknown = np.zeros(int(rare.sum()), dtype=np.int64)
        out.append(CodedPatterns(lv.codes[rare], unknown, lv.exact_support[rare], truncated=False))
    return out


def _with_seed_orders(cands: _Candidates) -> IntArray:
    """The candidates' supports, 0 (unknown, so weighed by the cover on their tolerant
    occurrences) for each seed (:func:`_broken_seeds`) and each candidate that is a seed with
    two adjacent steps swapped: the cover reads a swap as noise, so both orders of the same
    steps are weighed alike and the one more occurrences show wins."""
    support = cands.support.copy()
    seeds = np.flatnonzero(support == 0)
    if not len(seeds):
        return support
    where = {tuple(row.tolist()): i for i, row in enumerate(cands.rows)}
    for i in seeds.tolist():
        row = cands.rows[i].tolist()
        for j in range(len(row) - 1):
            swapped = (*row[:j], row[j + 1], row[j], *row[j + 2 :])
            k = where.get(swapped)
            if k is not None:
                support[k] = 0
    return support


FILL_POOL = 500
"""Frequent patterns considered for the slots the MDL cover leaves empty."""


def _below_significance(
    ledger: UnitLedger,
    ranked: list[RankedPattern],
    cands: _Candidates,
    *,
    slots: int,
    min_support: int,
) -> list[RankedPattern]:
    """Up to ``slots`` more patterns when the cover found fewer than asked: frequent ones
    that do not compress the ledger (on a small ledger, even a workflow repeated in every
    run saves less than its own definition costs — three runs of ``a, b, c`` score −0.25
    bits). They still repeat in ≥ ``min_support`` runs, SoloFlow's definition of a
    repetition, so they are proposed after every significant pattern, the longest and most
    supported first, each counted on what the chosen ones leave uncovered (so fragments of
    chosen patterns drop out) and said to be below significance in its explanation."""
    taken = {tuple(int(c) for c in r.pattern.codes) for r in ranked if r.pattern is not None}
    order = sorted(
        (i for i in range(len(cands.rows)) if tuple(cands.rows[i].tolist()) not in taken),
        key=lambda i: (-int(cands.support[i]) * (len(cands.rows[i]) - 1), -len(cands.rows[i])),
    )[:FILL_POOL]
    first = [np.asarray(r.pattern.codes, dtype=np.int64) for r in ranked if r.pattern is not None]
    pats = first + [cands.rows[i] for i in order]
    where = positions(ledger.code)
    replayed = replay_cover(
        ledger,
        pats,
        lambda i, _runs: _whole_pattern(ledger, pats[i], where),
        top_k=len(first) + slots,
        min_support=min_support,
        where=where,
        min_gain_bits=-math.inf,
    )
    out: list[RankedPattern] = []
    for r in replayed:
        if tuple(int(c) for c in r.pattern.codes) in taken:
            continue
        if len(out) == slots:
            break
        out.append(
            replace(
                r,
                rank=len(ranked) + len(out) + 1,
                explanation=r.explanation + " Below significance: it does not compress the "
                "ledger (too few runs to tell it from chance), proposed because it repeats in "
                f"≥ {min_support} runs.",
            )
        )
    return out


class _Candidates:
    """The mined levels as the ranking reads them: rows of unit codes, longest first."""

    def __init__(self, levels: list[CodedPatterns], names: list[str]) -> None:
        levels = [lv for lv in reversed(levels) if lv.codes.shape[1] >= 2]
        self.names = names
        self.rows: list[IntArray] = [row for lv in levels for row in lv.codes]
        self.support = np.concatenate([lv.support for lv in levels] or [np.zeros(0, np.int64)])
        self.exact = np.concatenate([lv.exact_support for lv in levels] or [np.zeros(0, np.int64)])
        self.truncated = np.concatenate(
            [np.full(len(lv.support), lv.truncated) for lv in levels] or [np.zeros(0, bool)]
        )

    def mined(self, i: int) -> MinedPattern:
        codes = tuple(self.rows[i].tolist())
        return MinedPattern(
            codes=codes,
            names=tuple(self.names[c] for c in codes),
            support=int(self.support[i]),
            exact_support=int(self.exact[i]),
            truncated=bool(self.truncated[i]),
        )


def _run_support(ledger: UnitLedger, pos: IntArray) -> int:
    """Distinct runs of occurrences at flat positions ``pos`` (one row each)."""
    if not len(pos):
        return 0
    units = ledger.flat_unit[pos.max(axis=1)]
    return len(distinct_values(ledger.unit_run[units]))


def _sample(kept: int, units: int, budget: int) -> BoolArray:
    """A uniform sample of ``kept`` runs of ``units`` units in all, about ``budget`` units;
    seeded, so the same ledger always gives the same sample."""
    share = budget / units
    return default_rng(0).random(kept) < share


def _whole_pattern(
    ledger: UnitLedger, pat: IntArray, where: CodePositions | PairPositions
) -> MinedPattern:
    """``pat`` as mined on the whole ledger: runs containing it exactly, and runs that are it."""
    k, code = len(pat), ledger.code
    at = where.candidates(pat)
    at = at[(at >= 0) & (at + k < len(code))]
    for j in range(k):
        at = at[code[at + j] == pat[j]]
    runs = ledger.unit_run[ledger.flat_unit[at]]
    whole = (code[at - 1] < 0) & (code[at + k] < 0)  # flat position 0: code[-1] is a pad
    codes = tuple(pat.tolist())
    return MinedPattern(
        codes=codes,
        names=tuple(ledger.names[c] for c in codes),
        support=len(distinct_values(runs)),
        exact_support=int(whole.sum()),
    )
