"""Closed contiguous tool-sequence patterns with distinct-run support.

A pattern is a contiguous run of tool names. Its support is the number of distinct input
sequences (task runs) containing it at least once. A pattern is *closed* when no pattern
one step longer (to the left or the right) has the same support: a longer pattern
supported by exactly the same runs makes the shorter one redundant. One-step extensions
suffice, because support can only shrink as a pattern grows.

The search is level-wise (anti-monotone pruning): only frequent patterns are extended,
each through the list of places where it occurs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pattern:
    """A closed frequent pattern."""

    names: tuple[str, ...]
    runs: tuple[int, ...]
    """Indices (into the input) of the sequences that contain it, ascending."""
    exact_runs: tuple[int, ...]
    """Indices of the sequences that are exactly this pattern."""
    first_positions: tuple[int, ...]
    """For each entry of ``runs``, where its first occurrence starts."""

    @property
    def support(self) -> int:
        return len(self.runs)


Occurrences = list[tuple[int, int]]  # (sequence index, start position)


def _distinct(occ: Occurrences) -> int:
    count, last = 0, -1
    for r, _ in occ:  # occurrence lists are sorted by (run, pos)
        if r != last:
            count += 1
            last = r
    return count


def mine_closed_patterns(
    sequences: Sequence[Sequence[str]], *, min_length: int = 3, min_support: int = 3
) -> list[Pattern]:
    """All closed contiguous patterns of length ≥ ``min_length`` in ≥ ``min_support`` runs.

    Returns them longest first, then by support (descending), then by names.
    """
    if min_length < 1 or min_support < 1:
        raise ValueError("min_length and min_support must be at least 1")
    codes: dict[str, int] = {}
    coded = [[codes.setdefault(n, len(codes)) for n in seq] for seq in sequences]
    names = list(codes)

    level: dict[tuple[int, ...], Occurrences] = defaultdict(list)
    for r, seq in enumerate(coded):
        for p in range(len(seq) - min_length + 1):
            level[tuple(seq[p : p + min_length])].append((r, p))
    frequent = {k: v for k, v in level.items() if _distinct(v) >= min_support}

    out: list[Pattern] = []
    length = min_length
    while frequent:
        nxt: dict[tuple[int, ...], Occurrences] = defaultdict(list)
        for pat, occ in frequent.items():
            support = _distinct(occ)
            right: dict[int, Occurrences] = defaultdict(list)
            left: dict[int, Occurrences] = defaultdict(list)
            for r, p in occ:
                seq = coded[r]
                if p + length < len(seq):
                    right[seq[p + length]].append((r, p))
                if p > 0:
                    left[seq[p - 1]].append((r, p - 1))
            closed = True
            for tok, ext in right.items():
                s = _distinct(ext)
                if s >= min_support:
                    nxt[pat + (tok,)] = ext
                if s == support:
                    closed = False
            if closed and any(_distinct(ext) == support for ext in left.values()):
                closed = False
            if closed:
                runs: list[int] = []
                firsts: list[int] = []
                for r, p in occ:
                    if not runs or runs[-1] != r:
                        runs.append(r)
                        firsts.append(p)
                exact = tuple(r for r in runs if len(coded[r]) == length)
                out.append(
                    Pattern(
                        names=tuple(names[c] for c in pat),
                        runs=tuple(runs),
                        exact_runs=exact,
                        first_positions=tuple(firsts),
                    )
                )
        frequent = nxt
        length += 1
    out.sort(key=lambda p: (-len(p.names), -p.support, p.names))
    return out
