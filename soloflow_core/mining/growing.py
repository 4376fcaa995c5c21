"""Growing a pattern the cover is about to choose by the step its occurrences share.

The miner proposes a pattern only when ``min_support`` runs hold it *exactly*, every step
adjacent. Agents are noisy: a stray call or a swap anywhere in a long workflow breaks
that, so a 12-step workflow run twenty times may be held exactly by two runs while a 10-step
part of it is held by four. Only the part is mined, and the cover, which counts noise-tolerant
occurrences, would choose it: the workflow found without its first or last steps.

So before the cover takes a pattern, it is grown: among its complete occurrences, the tools
that most often come right after its last step (or right before its first one), adjacent or
past one stray unit, are tried as one more step, and the longest pattern is kept while a step
more compresses the ledger more (the same gain the cover ranks by). A tool that follows the
pattern only by chance is in too few of its occurrences to pay for the occurrences it loses.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from soloflow_core.mining.fast import DEFAULT_MAX_LENGTH, MinedPattern
from soloflow_core.mining.matching import match_patterns

if TYPE_CHECKING:
    from soloflow_core.mining.matching import ChainIndex, TolerantOccurrences
    from soloflow_core.mining.options import IntArray
    from soloflow_core.mining.units import UnitLedger

__all__ = ["grow_pattern", "grown_pattern"]

TRIED_PER_END = 2
"""The most frequent neighbouring tools tried at each end, per growth step."""


def grow_pattern(
    work: IntArray,
    ledger: UnitLedger,
    index: ChainIndex,
    *,
    pat: IntArray,
    occ: TolerantOccurrences,
    gain: float,
) -> tuple[IntArray, TolerantOccurrences, float]:
    """``pat`` grown one step at a time at either end while that raises its gain on the
    units of ``work`` not yet covered; with its occurrences and gain (``occ`` and ``gain``
    are ``pat``'s own, returned unchanged when no step more pays)."""
    opt = ledger.options
    tried: set[tuple[int, ...]] = set()
    while len(pat) < DEFAULT_MAX_LENGTH:
        longer = [p for p in _longer(work, pat, occ, gaps=opt.max_gap) if _new(p, tried)]
        if not longer:
            break
        found, gains = match_patterns(work, ledger, *index.starts_many(longer, opt), longer)
        worth = [
            _worth(ledger, pat=pat, occ=occ, longer=(p, o, g), slack=opt.fragment_slack)
            for p, o, g in zip(longer, found, gains.tolist(), strict=True)
        ]
        best = int(np.argmax(worth))
        if worth[best] <= gain:
            break
        pat, occ, gain = longer[best], found[best], float(gains[best])
    return pat, occ, gain


def _worth(
    ledger: UnitLedger,
    *,
    pat: IntArray,
    occ: TolerantOccurrences,
    longer: tuple[IntArray, TolerantOccurrences, float],
    slack: float,
) -> float:
    """What ``longer`` (a pattern, its occurrences, its gain) saves with the occurrences of
    ``pat`` it loses counted as its own, one defect each (the new step missing): -inf when
    they are too many for ``pat`` to be a fragment of it (``slack``, as the cover's)."""
    grown, found, gain = longer
    taken = np.zeros(len(ledger.code) + 1, dtype=bool)
    taken[found.pos[found.pos >= 0]] = True
    reached = occ.pos >= 0
    lost = ~(taken[occ.pos] & reached).any(axis=1)
    n_lost, kept = int(lost.sum()), len(found)
    if not kept or n_lost >= max(slack, 0.0) * kept:
        return -math.inf if n_lost else gain
    n = ledger.unit_count
    cum = np.cumsum(ledger.bits[pat])
    defects = (
        occ.stray[lost].sum() + (occ.swap_at[lost] >= 0).sum() + (occ.length[lost] < len(pat)).sum()
    )
    both = kept + n_lost
    return float(
        gain
        + kept * math.log2(n / kept)
        - both * math.log2(n / both)
        + cum[occ.length[lost] - 1].sum()
        - (n_lost + defects) * (math.log2(len(grown)) + 1)
    )


def grown_pattern(ledger: UnitLedger, pat: IntArray) -> MinedPattern:
    """A grown ``pat`` as a mined pattern: the runs holding it exactly, and the runs that
    are exactly it (what the miner reports for the patterns it finds)."""
    code, k = ledger.code, len(pat)
    at = np.flatnonzero(code[: max(len(code) - k, 0)] == pat[0])
    for j in range(1, k):
        at = at[code[at + j] == pat[j]]
    runs = ledger.unit_run[ledger.flat_unit[at]]
    whole = (code[at - 1] < 0) & (code[at + k] < 0)  # flat position 0: code[-1] is a pad
    codes = tuple(int(c) for c in pat.tolist())
    return MinedPattern(
        codes=codes,
        names=tuple(ledger.names[c] for c in codes),
        support=len(np.unique(runs)),
        exact_support=int(whole.sum()),
    )


def _new(pat: IntArray, tried: set[tuple[int, ...]]) -> bool:
    key = tuple(pat.tolist())
    if key in tried:
        return False
    tried.add(key)
    return True


def _longer(
    work: IntArray, pat: IntArray, occ: TolerantOccurrences, *, gaps: int
) -> list[IntArray]:
    """``pat`` with one more step at its end or its start: the tools most often found there
    in its complete occurrences (adjacent, or past one stray unit when ``gaps``)."""
    full = occ.length == len(pat)
    if not full.any():
        return []
    out = []
    for end, step in ((occ.pos[full, -1], 1), (occ.pos[full, 0], -1)):
        for code in _neighbours(work, end, step=step, gaps=gaps):
            if code == int(pat[-1] if step > 0 else pat[0]):
                continue  # the same tool again is a loop, one unit
            grown = np.append(pat, code) if step > 0 else np.insert(pat, 0, code)
            out.append(grown.astype(np.int64))
    return out


def _neighbours(work: IntArray, at: IntArray, *, step: int, gaps: int) -> list[int]:
    """The codes most often found ``step`` (then ``2 * step``) units from ``at``, most
    frequent first, each counted once per place; never a covered unit or a run's edge."""
    near = _at(work, at + step)
    found = [np.flatnonzero(near >= 0), near[near >= 0]]
    if gaps:
        past = _at(work, at + 2 * step)
        two = (near >= 0) & (past >= 0) & (past != near)
        found = [
            np.concatenate((found[0], np.flatnonzero(two))),
            np.concatenate((found[1], past[two])),
        ]
    if not len(found[1]):
        return []
    pairs = np.unique(np.stack(found), axis=1)  # (place, code), each once
    codes, counts = np.unique(pairs[1], return_counts=True)
    order = np.argsort(-counts, kind="stable")[:TRIED_PER_END]
    return [int(codes[k]) for k in order if counts[k] >= 2]


def _at(work: IntArray, places: IntArray) -> IntArray:
    """The codes at ``places``; -1 (a run's edge) outside the ledger."""
    inside = (places >= 0) & (places < len(work))
    return np.where(inside, work[np.clip(places, 0, len(work) - 1)], -1)
