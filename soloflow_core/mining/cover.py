"""The greedy MDL cover: which patterns best compress the ledger, best first.

* **Bits.** Encoding a unit alone costs ``log2(N / count(tool))`` bits (N units in all). Each
  occurrence a pattern covers saves the bits of the units it covers and pays the pattern's
  own code, ``log2(N / usage)``, plus ``log2(L) + 1`` bits per tolerated defect; the pattern
  pays for its own definition once. A chance run of popular tools saves about what its code
  costs (its tools are cheap to encode alone), so it gains nothing.
* **Greedy cover.** Repeatedly take the pattern whose occurrences, among the units not yet
  covered, compress the ledger most (lazy evaluation: gains only shrink as the cover grows),
  and mark its units covered. A fragment of a chosen workflow is left with the broken
  occurrences only; it is dropped when those are fewer than ``fragment_slack`` of the
  workflow's. Swapped variants of a chosen pattern find nothing left, so both orders end up
  as one pattern.

Cost: the cover refreshes stale bounds in batches (:class:`_Bounds`), keeps matches that no
choice has touched (covering units only ever makes a match fail, so they stay exact:
:class:`_MatchCache`), and matches many candidates together
(:func:`~soloflow_core.mining.matching.match_patterns`); a fragment is told by one look-up among
the parts of the chosen patterns (:class:`_Chosen`); choices are made as they are read
(:func:`greedy_cover`), so a caller pays only for the ones it uses. A ledger too big to cover
whole is covered on a sample of its runs and the chosen patterns replayed on all of them
(:func:`replay_cover`; see :mod:`soloflow_core.mining.pipeline` for what that guarantees).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from soloflow_core.mining._packing import pattern_matrix
from soloflow_core.mining.growing import grow_pattern, grown_pattern
from soloflow_core.mining.matching import ChainIndex, match_pattern, match_patterns
from soloflow_core.mining.options import COVERED, BoolArray, FloatArray, IntArray
from soloflow_core.mining.positions import CodePositions, PairPositions, positions
from soloflow_core.mining.results import one_source, ranked_pattern
from soloflow_core.mining.units import UnitLedger, prepare_ledger

if TYPE_CHECKING:
    from soloflow_core.mining.matching import TolerantOccurrences
    from soloflow_core.mining.options import HasNames, RankingOptions
    from soloflow_core.mining.results import RankedPattern

__all__ = ["greedy_cover", "rank_coded", "rank_patterns", "replay_cover"]


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
        ledger,
        [c[0] for c in cands],
        supports,
        pattern_of=lambda i: cands[i][1],
        top_k=top_k,
        min_support=min_support,
    )


def rank_coded(
    ledger: UnitLedger,
    pats: Sequence[IntArray],
    supports: IntArray,
    *,
    pattern_of: Callable[[int], Any],
    top_k: int,
    min_support: int,
) -> list[RankedPattern]:
    """:func:`rank_patterns` on candidates given as unit codes (each with ≥ 2 steps,
    distinct), with each one's distinct-run support (0: unknown); ``pattern_of(i)`` is the
    mined pattern reported for candidate ``i``."""
    out: list[RankedPattern] = []
    if top_k < 1:
        return out
    source = one_source(ledger)
    for i, pat, gain, occ in greedy_cover(ledger, pats, supports):
        mined = pattern_of(i) if pat is pats[i] else grown_pattern(ledger, pat)
        ranked = ranked_pattern(
            ledger, mined, pat, gain=gain, occ=occ, rank=len(out) + 1, source=source
        )
        if ranked.support >= min_support:
            out.append(ranked)
            if len(out) == top_k:
                break
    return out


def greedy_cover(
    ledger: UnitLedger,
    pats: Sequence[IntArray],
    supports: IntArray,
    *,
    index: ChainIndex | None = None,
) -> Iterator[tuple[int, IntArray, float, TolerantOccurrences]]:
    """The greedy MDL cover's choices, best first, as they are made: each candidate's
    index, the pattern chosen (the candidate itself, or the candidate grown by
    :func:`~soloflow_core.mining.growing.grow_pattern`), its gain and occurrences (fragments
    of earlier choices left out). Stop reading when enough are chosen: each next choice
    costs matches. ``index``: the ledger's chain index, if built already (the cover updates
    it)."""
    if ledger.unit_count == 0 or not pats:
        return
    opt = ledger.options
    index = index or ChainIndex(ledger.code, ledger.err)
    bounds = _Bounds(ledger, index, list(pats))
    first = np.where(bounds.worthless(supports), 0.0, bounds.of(slice(None)))
    # Entries: (-value, candidate, cover version, exact?). A bound is refreshed when stale,
    # a match is made when a fresh bound tops the heap, a choice when a fresh gain does.
    heap = [(-g, i, 0, False) for i, g in enumerate(first.tolist()) if g > 0]
    heapq.heapify(heap)
    work = ledger.code.copy()
    chosen = _Chosen(opt.fragment_slack)
    cache = _MatchCache()
    version = 0
    best = (-1, 0.0)  # (version, the best exact gain found at that version)
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
            while heap and heap[0][2] != version and len(stale) < REFRESH:
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
                heap
                and heap[0][2] == version
                and not heap[0][3]
                and len(batch) < limit
                and (best[0] != version or -heap[0][0] > best[1])
            ):
                batch.append(heapq.heappop(heap)[1])
            some = [pats[j] for j in batch]
            found, gains = match_patterns(work, ledger, *index.starts_many(some, opt), some)
            for j, occ, gain in zip(batch, found, gains.tolist(), strict=True):
                cache.put(j, occ, gain)
                heapq.heappush(heap, (-gain, j, version, True))
                if best[0] != version or gain > best[1]:
                    best = (version, gain)
        else:
            kept = cache.take(i)
            # Evicted: nothing was covered since, so matching again finds the same.
            occ = kept or match_pattern(work, ledger, index.starts(pats[i], opt), pat=pats[i])
            pat, gain = pats[i], -neg
            fragment = chosen.is_fragment(pat, len(occ))
            if not fragment:
                pat, occ, gain = grow_pattern(work, ledger, index, pat=pat, occ=occ, gain=gain)
            taken = occ.pos[occ.pos >= 0]
            work[taken] = COVERED
            index.cover(taken)
            version += 1
            if fragment or (pat is not pats[i] and chosen.is_fragment(pat, len(occ))):
                continue
            chosen.add(pat, len(occ))
            yield i, pat, gain, occ


BATCH = 64
"""Candidates matched together at most, when their bounds top the heap."""
FIRST_BATCH = 4
"""... when no exact gain is known yet since the last choice."""
REFRESH = 1024
"""Stale bounds at the top of the heap refreshed together at most."""


class _MatchCache:
    """Matches kept across choices. Covering units only ever makes a match fail (a covered
    unit matches no step and is no stray), so a match none of whose units was covered since
    is still exactly what matching again would find. Bounded: the oldest go first."""

    LIMIT = 8_000_000  # matched steps kept, ~80 MB

    def __init__(self) -> None:
        self.entries: dict[int, tuple[TolerantOccurrences, float]] = {}
        self.size = 0

    def put(self, i: int, occ: TolerantOccurrences, gain: float) -> None:
        if i in self.entries:
            self.pop(i)
        self.entries[i] = (occ, gain)
        self.size += occ.pos.size
        while self.size > self.LIMIT and len(self.entries) > 1:
            self.pop(next(iter(self.entries)))

    def pop(self, i: int) -> TolerantOccurrences:
        occ, _ = self.entries.pop(i)
        self.size -= occ.pos.size
        return occ

    def take(self, i: int) -> TolerantOccurrences | None:
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


def _disturbed(occ: TolerantOccurrences, work: IntArray) -> bool:
    """Whether a unit these occurrences matched or passed over as a stray is covered now
    (else matching again finds exactly them). A step not reached (position -1) reads the
    ledger's last slot, a pad, which is never covered: no mask needed."""
    return bool(
        (work[occ.pos] == COVERED).any()
        or (occ.stray.any() and (work[occ.pos[occ.stray] - 1] == COVERED).any())
    )


def replay_cover(
    ledger: UnitLedger,
    pats: Iterable[IntArray],
    pattern_of: Callable[[int, tuple[int, ...]], Any],
    *,
    top_k: int,
    min_support: int,
    where: CodePositions | PairPositions | None = None,
    min_gain_bits: float | None = None,
) -> list[RankedPattern]:
    """The cover of ``ledger`` by ``pats`` taken in the given order (e.g. as a greedy cover
    of a sample chose them): occurrences, supports, gains and savings exact on ``ledger``.

    No chain index: the cost of a few patterns on a ledger too big to rank whole
    (``where``: the ledger's :func:`~soloflow_core.mining.positions.positions`, if built
    already). ``pats`` is
    read only as far as ``top_k`` results need (it may be a lazy cover), a batch matched
    together at a time. ``pattern_of(i, runs)`` is the mined pattern reported for the
    ``i``-th pattern, given the runs its occurrences are in. ``min_gain_bits`` overrides
    the ledger options' threshold.
    """
    opt = ledger.options
    threshold = opt.min_gain_bits if min_gain_bits is None else min_gain_bits
    where = where or positions(ledger.code)
    work = ledger.code.copy()
    chosen = _Chosen(opt.fragment_slack)
    out: list[RankedPattern] = []
    source = iter(pats)
    tokens_known = one_source(ledger)
    i = -1
    while len(out) < top_k:
        batch = list(islice(source, min(top_k - len(out), REPLAY_BATCH)))
        if not batch:
            break
        found, gains = match_patterns(work, ledger, *where.starts_many(work, batch, opt), batch)
        for pat, occ, gain in zip(batch, found, gains.tolist(), strict=True):
            i += 1
            if len(out) == top_k:
                break
            if _disturbed(occ, work):  # an earlier one of the batch took some of its units
                occ = match_pattern(work, ledger, where.starts(work, pat, opt), pat=pat)
                gain = pattern_gain(occ, ledger.bits[pat], ledger.unit_count)
            work[occ.pos[occ.pos >= 0]] = COVERED
            if gain <= threshold or chosen.is_fragment(pat, len(occ)):
                continue
            chosen.add(pat, len(occ))
            ranked = ranked_pattern(
                ledger, None, pat, gain=gain, occ=occ, rank=len(out) + 1, source=tokens_known
            )
            if ranked.support >= min_support:
                out.append(replace(ranked, pattern=pattern_of(i, ranked.runs)))
    return out


REPLAY_BATCH = 16
"""Patterns :func:`replay_cover` matches together (more: fewer passes, more memory)."""


class _Bounds:
    """Upper bounds on candidates' gains from how many free instances their pairs have.

    Best case: every chain of free pair instances is a clean occurrence; one cut short at
    step j also needs an errored unit of that tool there. Cheap enough to refresh after
    each choice, when the chosen pattern's units stop counting, so the fragments and
    variants of a chosen workflow sink without being matched again.
    """

    def __init__(self, ledger: UnitLedger, index: ChainIndex, pats: list[IntArray]) -> None:
        opt = ledger.options
        self.index, self.opt, self.n_units = index, opt, ledger.unit_count
        self.sizes = np.fromiter(map(len, pats), np.int64, len(pats))
        width = int(self.sizes.max())
        mat = pattern_matrix(pats, width, -1)
        self.ids = index.pair_ids(np.maximum(mat[:, :-1], 0), np.maximum(mat[:, 1:], 0))
        absent = np.asarray([index.adj.absent, index.skip.absent, index.adj.absent])
        np.copyto(self.ids, absent, where=(mat[:, 1:] < 0)[..., None])  # past the end: absent
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
        return cast(
            "FloatArray",
            np.maximum(saved - uses * np.log2(self.n_units / u), 0.0) - self.model[rows],
        )

    def worthless(self, supports: IntArray) -> BoolArray:
        """Candidates whose exact occurrences (the miner's ``support``, 0 when it gives none)
        are no more than their tools' frequencies alone predict."""
        exact = np.asarray(supports, dtype=np.float64)
        e = np.maximum(exact, 1.0)
        total = self.bits.sum(axis=1)
        return cast(
            "BoolArray", (exact > 0) & (e * (total - np.log2(self.n_units / e)) <= self.model)
        )


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


class _Chosen:
    """The patterns chosen so far, to tell a fragment: a pattern inside a better-ranked
    one, with fewer occurrences of its own than ``slack`` times the longer one's. Every
    contiguous part of a chosen pattern is kept with the most and fewest occurrences of the
    chosen ones it is part of, so a check is one look-up, however many were chosen."""

    def __init__(self, slack: float) -> None:
        self.slack = slack
        self.parts: dict[tuple[int, ...], tuple[int, int]] = {}

    def add(self, pat: IntArray, usage: int) -> None:
        codes = tuple(pat.tolist())
        n = len(codes)
        for m in range(2, n):  # parts of 2+ steps, shorter: a pattern is no fragment of itself
            for o in range(n - m + 1):
                part = codes[o : o + m]
                most, fewest = self.parts.get(part, (usage, usage))
                self.parts[part] = (max(most, usage), min(fewest, usage))

    def is_fragment(self, pat: IntArray, usage: int) -> bool:
        """Inside a chosen pattern, with few occurrences of its own beside it."""
        used = self.parts.get(tuple(pat.tolist()))
        if used is None:
            return False
        # usage < slack × used for some chosen one: the most used when slack ≥ 0.
        return usage < self.slack * (used[0] if self.slack >= 0 else used[1])


def pattern_gain(occ: TolerantOccurrences, pat_bits: FloatArray, n_units: int) -> float:
    """Bits saved by encoding these occurrences with the pattern (see the module doc)."""
    size = len(pat_bits)
    cum = np.cumsum(pat_bits)
    model = cum[-1] + 2 * math.log2(size + 1) + 1
    u = len(occ)
    if u == 0:
        return cast("float", -model)
    defects = occ.stray.sum() + (occ.swap_at >= 0).sum() + (occ.length < size).sum()
    saved = cum[occ.length - 1].sum()
    return float(saved - u * math.log2(n_units / u) - defects * (math.log2(size) + 1) - model)
