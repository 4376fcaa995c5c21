"""Finding a pattern's noise-tolerant occurrences in a :class:`~soloflow_core.mining.units.UnitLedger`.

* **Noise-tolerant occurrences.** An occurrence still counts with one stray call between two
  steps (at every gap, ``max_gap``), two adjacent steps swapped (``max_swaps`` per occurrence,
  not when the first one's output feeds the second), or cut short by a failing call (the
  last step reached errored; ``allow_truncated``). So noise does not break a workflow into
  fragments that out-support it.

Matching is one array pass for many candidates at once (:func:`match_patterns`: every candidate
whose bound tops the best gain found must be matched before a choice, so they are matched
together), from only the places where a free instance of a candidate's first three steps
starts (:class:`ChainIndex`, which also counts the free pair and triple instances the cover's
gain bounds are made of; an instance with a covered unit can start no occurrence, so as the
cover grows, fewer places are read). A ledger too big for that index (the whole one a
sample's choices are replayed on) is read through :mod:`~soloflow_core.mining.positions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from soloflow_core.mining._packing import (
    count_keys,
    packed_starts,
    pair_keys,
    pattern_matrix,
    positions_between,
    sorted_pairs,
)
from soloflow_core.mining.options import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:
    from soloflow_core.mining.options import RankingOptions
    from soloflow_core.mining.units import UnitLedger

__all__ = ["ChainIndex", "TolerantOccurrences", "leftmost_spans", "match_pattern", "match_patterns"]


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
        # id_at[f, p]: the key id of form f's instance starting at p, -1 when none is free.
        self.id_at = np.full((len(forms), size), -1, dtype=np.int32)
        self.forms: list[tuple[npt.NDArray[np.int32], int]] = []
        done = 0
        for f, (at, keys, span) in enumerate(forms):
            self.id_at[f, at] = ids[done : done + len(keys)]
            done += len(keys)
            self.forms.append((self.id_at[f], span))

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
        places from which ``span`` more units reach one. All forms in one pass (each form
        has its own row of ``id_at``, so none sees another's changes): a few array calls
        per choice of the cover, not a few per form."""
        size = self.id_at.shape[1]
        places = [starts[span] + f * size for f, (_, span) in enumerate(self.forms)]
        at = np.concatenate(places) if len(places) > 1 else places[0]
        id_at = self.id_at.reshape(-1)  # a view: flat places index every form's row
        key = id_at[at]
        free = np.flatnonzero(key >= 0)
        id_at[at[free]] = -1
        np.subtract.at(self.live, key[free], 1)


class ChainIndex:
    """Where pairs of units occur (adjacent, one apart) and how many free instances pairs and
    triples have in every form a tolerant occurrence can take: the material of gain bounds.

    Steps j, j+1, j+2 of an occurrence lie, relative to the first of them, in one of
    :data:`TRIPLE_FORMS`: each next step adjacent or one apart, or one pair swapped (a stray
    never sits next to a swapped pair, see :func:`match_pattern`).
    """

    TRIPLE_FORMS = ((0, 1, 2), (0, 1, 3), (0, 2, 3), (0, 2, 4), (1, 0, 2), (0, 2, 1))

    def __init__(self, code: IntArray, err: BoolArray) -> None:
        code = code.astype(np.int64, copy=False)  # keys are products of codes
        self.width = w = int(code.max()) + 1 if len(code) and code.max() >= 0 else 1
        self.size = size = len(code)
        a, b, c = code[:-2], code[1:-1], code[2:]
        adj_at = np.flatnonzero((a >= 0) & (b >= 0))
        skip_at = np.flatnonzero((a >= 0) & (b >= 0) & (c >= 0))
        adj_keys, skip_keys = pair_keys(a, b, adj_at, w=w), pair_keys(a, c, skip_at, w=w)
        self.adj = _Instances(size, [(adj_at, adj_keys, 1)], w * w)
        self.skip = _Instances(size, [(skip_at, skip_keys, 2)], w * w)
        # Sorted (key, start) of pairs, to find where a pattern can start.
        self._shift = shift = max(size.bit_length(), 1)
        self.adj_sorted = sorted_pairs(adj_keys, adj_at, (w * w).bit_length() + shift < 63)
        self.skip_sorted = sorted_pairs(skip_keys, skip_at, (w * w).bit_length() + shift < 63)
        # Where a cut-short occurrence can stop: a pair whose later step errored (swapped:
        # the first unit of the pair).
        e1, e2 = err[1:-1], err[2:]
        self.err_keys = np.sort(
            np.concatenate(
                (
                    np.compress(e1[adj_at], adj_keys),
                    np.compress(e2[skip_at], skip_keys),
                    np.compress(err[:-2][adj_at], b[adj_at] * w + a[adj_at]),
                )  # swapped: its first
            )
        )
        forms = []
        n = size - 4
        for f in self.TRIPLE_FORMS if n > 0 else ():
            x, y, z = (code[o : o + n] for o in f)
            inside = np.ones(n, dtype=bool)
            for o in range(max(f) + 1):
                inside &= code[o : o + n] >= 0  # within one run, strays included
            at = np.flatnonzero(inside)
            forms.append((at, self._triple_key(x[at], y[at], z[at], reuse=True), max(f)))
        self.triples = _Instances(size, forms, w**3 if w < 2**20 else 2**62)
        # Sorted (triple id, form, start) of every instance, packed: where a pattern can start.
        packed = [
            packed_starts(id_at, at, f, shift=shift)
            for f, ((id_at, _), (at, _, _)) in enumerate(
                zip(self.triples.forms, forms, strict=True)
            )
        ]
        self.triple_starts = np.concatenate(packed) if packed else np.zeros(0, np.int64)
        self.triple_starts.sort()

    def _triple_key(self, x: IntArray, y: IntArray, z: IntArray, reuse: bool = False) -> IntArray:
        """Each triple's key (``reuse``: built in ``x``, an int64 array the caller drops)."""
        w = self.width
        if w < 2**20:  # w**3 fits in int64
            key = np.multiply(x, w, out=x if reuse else None)
            key += y
            key *= w
            key += z
            return key
        # Huge vocabularies: folding keys merges some triples, which only loosens bounds.
        return ((x * w + y) % (2**42)) * 2**20 + z % 2**20

    def starts(self, pat: IntArray, opt: RankingOptions) -> IntArray:
        """Every place a tolerant occurrence of ``pat`` can start (a superset)."""
        w = self.width
        found = [positions_between(*self.adj_sorted, int(pat[0] * w + pat[1]))]
        if opt.max_gap or opt.max_swaps:  # a stray between, or the next two steps swapped
            found.append(positions_between(*self.skip_sorted, int(pat[0] * w + pat[1])))
        if opt.max_swaps:
            found.append(positions_between(*self.adj_sorted, int(pat[1] * w + pat[0])))
        out = np.sort(np.concatenate(found))
        return out[np.concatenate(([True], out[1:] != out[:-1]))] if len(out) else out

    def starts_many(
        self, pats: Sequence[IntArray], opt: RankingOptions
    ) -> tuple[IntArray, IntArray]:
        """:meth:`starts` of several patterns: (start, pattern index), sorted by both.

        An occurrence that reaches its third step starts where an instance of its first
        three steps' triple does, in one of :data:`TRIPLE_FORMS`: far fewer places than
        its first pair has. The instance's units are its first steps and the stray
        between them, none of them covered: so only instances still free are read."""
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
            lo = np.searchsorted(self.triple_starts, ids << (shift + 3))
            hi = np.searchsorted(self.triple_starts, (ids + 1) << (shift + 3))
            count = hi - lo
            at = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
            packed = self.triple_starts[at]
            pos = packed & ((1 << shift) - 1)
            form = (packed >> shift) & 7  # the id of each form's row, read flat: one take
            free = np.flatnonzero(self.triples.id_at.reshape(-1)[form * self.size + pos] >= 0)
            who = np.repeat(np.asarray(three, dtype=np.int64), count)
            parts.append((who[free] << shift) | pos[free])
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
            [
                self.adj.ids(firsts * w + seconds),
                self.skip.ids(firsts * w + seconds),
                self.adj.ids(seconds * w + firsts),
            ],
            axis=-1,
        )

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
        if self.width**2 <= _Instances.DENSE:  # a table of every pair: one look-up each
            return cast("IntArray", np.bincount(self.err_keys, minlength=self.width**2)[k])
        return count_keys(self.err_keys, k)

    def cover(self, flat: IntArray) -> None:
        """Units at ``flat`` are taken: instances touching them are no longer free."""
        size = self.size
        starts = {}
        if not len(flat):
            return
        if len(flat) * 16 < size:
            # Few taken (a choice's occurrences are a small share of the ledger): the places
            # within ``span`` before one, from the sorted taken ones, each span adding one
            # shifted copy (a stable sort merges the two sorted runs), not a pass per span
            # over a mask of the whole ledger.
            taken = np.sort(flat)
            near = taken
            for span in range(1, 5):
                near = np.concatenate((near, taken - span))
                near.sort(kind="stable")
                near = np.compress(np.concatenate(([True], near[1:] != near[:-1])), near)
                starts[span] = near[near >= 0] if near[0] < 0 else near
        else:
            mask = np.zeros(size + 4, dtype=bool)
            mask[flat] = True
            hit = mask[:size].copy()  # hit[p]: a taken unit within p .. p + span
            for span in range(1, 5):
                hit |= mask[span : size + span]
                starts[span] = np.flatnonzero(hit)
        for inst in (self.adj, self.skip, self.triples):
            inst.retire(starts)


@dataclass(slots=True)
class TolerantOccurrences:
    pos: IntArray  # (n, L) flat position of each step's unit, -1 when not reached
    stray: BoolArray  # (n, L) a stray unit before step j
    swap_at: IntArray  # (n,) j when steps j, j+1 were swapped, else -1
    length: IntArray  # (n,) steps reached

    def __len__(self) -> int:
        return len(self.length)


def match_pattern(
    work: IntArray, ledger: UnitLedger, starts: IntArray, *, pat: IntArray
) -> TolerantOccurrences:
    """Tolerant occurrences of ``pat`` starting at ``starts``, all advanced step by step
    together; non-overlapping, leftmost first. Covered units (``work == -2``) never match."""
    first = np.asarray(starts, dtype=np.int64)
    return match_patterns(work, ledger, first, cand=np.zeros(len(first), np.int64), pats=[pat])[0][
        0
    ]


def match_patterns(
    work: IntArray, ledger: UnitLedger, first: IntArray, cand: IntArray, pats: Sequence[IntArray]
) -> tuple[list[TolerantOccurrences], FloatArray]:
    """:func:`match_pattern` of several patterns in one pass, and their :func:`pattern_gain`: one array
    operation per step for all of them, not one per pattern. ``first`` are the possible
    starts of ``pats[cand]``, sorted by pattern then start."""
    opt = ledger.options
    sizes = np.fromiter(map(len, pats), np.int64, len(pats))
    width = int(sizes.max())
    mat = pattern_matrix(pats, width + 1, -9)  # -9: matches no unit
    free = np.flatnonzero(work[first] >= 0)  # a covered unit starts nothing
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
    # The rows still advancing, one column each of ``state`` (compacted as rows stop): row,
    # next unit, pattern, swaps used, step of the first swap; and whether a swap matched the
    # step already. Masks become indices once and index every array they select from (one
    # take of the stacked state, not five boolean selections: several times faster).
    state = np.stack((np.arange(n), first, cand, np.zeros(n, np.int64), swap_at))
    rows, cur, who, swaps, swapped = state
    pend = np.zeros(n, dtype=bool)
    pending = False
    ending = set(sizes.tolist())
    for j in range(width):
        if j in ending:  # rows of patterns this long are complete
            more = size[rows] > j
            done = np.flatnonzero(~more)
            end[rows[done]] = cur[done] - 1
            live = np.flatnonzero(more)
            state, pend = state.take(live, axis=1), pend[live]
            rows, cur, who, swaps, swapped = state
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
        yes, no = np.flatnonzero(ok), np.flatnonzero(~ok)
        hit = act[yes]
        pos[j, rows[hit]] = c[yes]
        cur[hit] += 1
        act, c, want = act[no], c[no], want[no]
        if opt.max_swaps:
            after = mat[:, j + 1][who[act]]  # -9 past the end: no swap at the last step
            sw = (work[c] == after) & (work[c + 1] == want)
            sw &= (swaps[act] < opt.max_swaps) & ~ledger.flow[c]
            if sw.any():
                yes, no = np.flatnonzero(sw), np.flatnonzero(~sw)
                hit = act[yes]
                at = rows[hit]
                pos[j, at], pos[j + 1, at] = c[yes] + 1, c[yes]
                cur[hit] += 2
                swaps[hit] += 1
                pend[hit] = pending = True
                hit = hit[swapped[hit] < 0]
                swapped[hit] = j
                swap_at[rows[hit]] = j
                act, c, want = act[no], c[no], want[no]
        if opt.max_gap and j > 0 and len(act):
            # Not right after a swap: every pair of steps stays within one unit of each
            # other, which the gain bounds rely on.
            gap = (work[c] >= 0) & (work[c + 1] == want)
            if j >= 2:  # (before step 2 no swap can have been made: -1 is "none")
                gap &= swapped[act] != j - 2
            yes = np.flatnonzero(gap)
            hit = act[yes]
            at = rows[hit]
            pos[j, at] = c[yes] + 1
            stray[j, at] = True
            strays[at] += 1
            cur[hit] += 2
            act = act[np.flatnonzero(~gap)]
        if len(act):  # no way on: these rows stop short of step j
            length[rows[act]] = j
            end[rows[act]] = cur[act] - 1
            more = np.ones(len(rows), dtype=bool)
            more[act] = False
            live = np.flatnonzero(more)
            state, pend = state.take(live, axis=1), pend[live]
            rows, cur, who, swaps, swapped = state
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
    idx = idx[leftmost_spans(begins, ends)]
    bounds = np.searchsorted(cand[idx], np.arange(len(pats) + 1)).tolist()
    # The kept rows of all patterns gathered row-major at once (they are sorted by pattern),
    # then each pattern's rows copied out of them: a few array calls per pattern, not seven.
    kept_pos = pos[:width, idx].T.astype(np.int64, order="C")
    kept_stray = stray[:, idx].T.copy()
    kept_swap, kept_length = swap_at[idx], length[idx]
    out = []
    for k, p in enumerate(pats):
        lo, hi, w = bounds[k], bounds[k + 1], len(p)
        out.append(
            TolerantOccurrences(
                kept_pos[lo:hi, :w].copy(),
                kept_stray[lo:hi, :w].copy(),
                kept_swap[lo:hi].copy(),
                length=kept_length[lo:hi].copy(),
            )
        )
    # The gains, as pattern_gain works them out, for all patterns at once.
    cum = np.cumsum(
        np.where(mat[:, :width] >= 0, ledger.bits[np.maximum(mat[:, :width], 0)], 0.0), axis=1
    )
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


def leftmost_spans(begins: IntArray, ends: IntArray) -> BoolArray:
    """Which of these spans (sorted by begin) a scan keeps that takes each one not
    overlapping one taken before it. In rounds: a span no undropped earlier one reaches is
    taken, a span a taken one reaches is dropped; chains of overlaps take a round a link."""
    state = np.zeros(len(begins), dtype=np.int8)  # 0 open, 1 taken, 2 dropped
    for _ in range(16):
        open_ = state == 0
        if not open_.any():
            return cast("BoolArray", state == 1)
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
    return cast("BoolArray", state == 1)
