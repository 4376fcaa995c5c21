"""The closed contiguous-pattern miner on numpy arrays: near-linear in the ledger's size.

The ledger is one array of integer tool codes (all runs concatenated, laid out flat with a
``-1`` after each run, so no gram spans two runs). Patterns grow level by level; at level
*k* every surviving position carries the dense id of the *k*-gram that starts there. The
(*k*+1)-gram at *p* is the *k*-gram at *p* plus the tool at *p*+*k*; it can only be frequent
when the *k*-gram at *p*+1 is frequent too (its suffix), so positions whose suffix died are
dropped before any sorting. Grouping is one sort of (gram key, position) packed in an int64
(a plain sort rather than a stable argsort), which also leaves each gram's
positions, hence its runs, in order: support is the number of distinct runs, counted by
comparing neighbours. The work per level is the number of positions still inside a
frequent gram.

A *k*-gram is closed when no frequent (*k*+1)-gram with the same support extends it to the
right (same prefix id) or to the left (same suffix id); both are read off level *k*+1.

:func:`mine_levels` returns the closed patterns as arrays (what the pipeline ranks);
:func:`mine_coded` as :class:`MinedPattern` objects. Where a pattern occurs is computed on
demand for the few patterns that need it (:meth:`CodedLedger.occurrences`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from soloflow_core.mining.closed import Pattern

DEFAULT_MAX_LENGTH = 64

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MinedPattern:
    """A closed frequent pattern, without its occurrence lists."""

    codes: tuple[int, ...]
    names: tuple[str, ...]
    support: int
    """Distinct runs containing it."""
    exact_support: int
    """Runs whose whole sequence is exactly this pattern."""
    truncated: bool = False
    """True when it reached ``max_length`` and may continue further."""


@dataclass(slots=True)
class CodedLedger:
    """Runs as integer codes: ``codes[offsets[r]:offsets[r + 1]]`` is run ``r``."""

    codes: IntArray
    offsets: IntArray
    names: list[str]

    @classmethod
    def from_sequences(cls, sequences: Sequence[Sequence[str]]) -> CodedLedger:
        vocab: dict[str, int] = {}
        flat: list[int] = []
        offsets = [0]
        for seq in sequences:
            flat.extend(vocab.setdefault(n, len(vocab)) for n in seq)
            offsets.append(len(flat))
        return cls(
            np.asarray(flat, dtype=np.int64), np.asarray(offsets, dtype=np.int64), list(vocab)
        )

    @property
    def run_count(self) -> int:
        return len(self.offsets) - 1

    def run_ids(self) -> IntArray:
        lengths = np.diff(self.offsets)
        return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)

    def sequence(self, run: int) -> tuple[str, ...]:
        return tuple(self.names[c] for c in self.codes[self.offsets[run] : self.offsets[run + 1]])

    def occurrences(self, codes: Sequence[int]) -> tuple[IntArray, IntArray]:
        """Where a pattern occurs: (runs ascending, first start position in each run)."""
        k = len(codes)
        n = len(self.codes)
        if k == 0 or k > n:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        starts = np.flatnonzero(self.codes[: n - k + 1] == codes[0])
        for i in range(1, k):
            starts = starts[self.codes[starts + i] == codes[i]]
        run_of = np.searchsorted(self.offsets, starts, side="right") - 1
        fits = starts + k <= self.offsets[run_of + 1]
        starts, run_of = starts[fits], run_of[fits]
        runs, first = np.unique(run_of, return_index=True)
        return runs, starts[first] - self.offsets[runs]


@dataclass(frozen=True, slots=True)
class CodedPatterns:
    """Closed patterns of one length as arrays: what :func:`mine_levels` yields."""

    codes: IntArray
    """``(n, k)`` each pattern's codes."""
    support: IntArray
    """``(n,)`` distinct runs containing it."""
    exact_support: IntArray
    """``(n,)`` runs whose whole sequence is exactly it."""
    truncated: bool
    """True when ``k`` is the length cap (each may continue further)."""


class _Flat:
    """The ledger laid out flat with one ``-1`` after each run, so that a gram never spans
    two runs: run ``r``'s call ``i`` sits at ``offsets[r] + i + r``."""

    def __init__(self, ledger: CodedLedger) -> None:
        lengths = np.diff(ledger.offsets)
        n_runs = len(lengths)
        self.size = len(ledger.codes) + n_runs + 1  # the last slot: an end pad
        self.small: type[np.integer[Any]] = np.int32 if self.size < 2**31 - 1 else np.int64
        run = np.arange(n_runs, dtype=self.small)
        self.rid: npt.NDArray[Any] = np.append(np.repeat(run, lengths + 1), n_runs)
        self.rid = self.rid.astype(self.small, copy=False)
        self.at = np.arange(len(ledger.codes), dtype=np.int64)
        self.at += np.repeat(run, lengths)
        self.code = np.full(self.size, -1, dtype=np.int64)
        self.code[self.at] = ledger.codes
        self.pos_bits = max(int(self.size).bit_length(), 1)


def _sorted_groups(
    key: IntArray, pos: IntArray, key_max: int, *, pos_bits: int
) -> tuple[IntArray, IntArray]:
    """``(key, pos)`` pairs sorted by key, then position: one packed sort when both fit in
    63 bits (a plain sort), else a lexsort. ``key`` (int64,
    the caller's to drop) is packed, sorted and unpacked in place: one fresh array, not four."""
    if key_max < 2 ** (63 - pos_bits):
        packed = np.left_shift(key, pos_bits, out=key)
        packed |= pos
        packed.sort()
        pos = packed & ((1 << pos_bits) - 1)
        packed >>= pos_bits
        return packed, pos
    order = np.lexsort((pos, key))
    return key[order], pos[order]


def _group_support(
    ks: IntArray, ps: IntArray, rid: npt.NDArray[Any]
) -> tuple[IntArray, IntArray, IntArray]:
    """Dense ids of sorted keys, each id's distinct-run support and first position."""
    start = np.empty(len(ks), dtype=bool)
    start[:1] = True
    np.not_equal(ks[1:], ks[:-1], out=start[1:])
    gid = np.cumsum(start) - 1
    r = rid[ps]
    new_run = start.copy()
    new_run[1:] |= r[1:] != r[:-1]
    n = int(gid[-1]) + 1 if len(gid) else 0
    # np.compress, not a boolean index: several times faster on arrays this long.
    return gid, np.bincount(np.compress(new_run, gid), minlength=n), np.compress(start, ps)


def mine_levels(
    ledger: CodedLedger,
    *,
    min_length: int = 3,
    min_support: int = 3,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> list[CodedPatterns]:
    """Closed patterns of length ``min_length``..``max_length`` in ≥ ``min_support`` runs, as
    arrays, one entry per length (shortest first). See :func:`mine_coded`."""
    if min_length < 1 or min_support < 1 or max_length < min_length:
        raise ValueError("need 1 ≤ min_length ≤ max_length and min_support ≥ 1")
    if len(ledger.codes) == 0 or ledger.run_count < min_support:
        return []
    flat = _Flat(ledger)
    code, rid, bits = flat.code, flat.rid, flat.pos_bits
    # Level 1: grams are the tools; only frequent ones matter from here on.
    ks, ps = _sorted_groups(code[flat.at], flat.at, int(code.max()), pos_bits=bits)
    gid, sup, rep = _group_support(ks, ps, rid)
    del ks
    gid_at: npt.NDArray[Any] = np.full(flat.size + 1, -1, dtype=flat.small)
    out: list[CodedPatterns] = []
    k = 1
    while True:
        frequent = sup >= min_support
        keep = np.flatnonzero(frequent[gid])
        remap = np.cumsum(frequent) - 1
        pos, gid = ps[keep], remap[gid[keep]]
        sup, rep = sup[frequent], rep[frequent]
        del ps, keep
        if len(pos) == 0:
            break
        gid_at[pos] = gid
        if k == 1:
            tool_at = gid_at.copy()  # each position's frequent tool, dense
            n_tools = len(sup)
        # Extend a gram when the gram one to the right is frequent too (its suffix).
        grow = np.compress(gid_at[pos + 1] >= 0, pos) if k < max_length else pos[:0]
        nks, nps = _sorted_groups(
            gid_at[grow].astype(np.int64) * n_tools + tool_at[grow + k],
            grow,
            len(sup) * n_tools,
            pos_bits=bits,
        )
        ngid, nsup, nrep = _group_support(nks, nps, rid)
        del nks
        if k >= min_length:
            closed = np.ones(len(sup), dtype=bool)
            big = nsup >= min_support
            if big.any():
                h = nrep[big]
                prefix, suffix = gid_at[h], gid_at[h + 1]
                closed[prefix[nsup[big] == sup[prefix]]] = False
                closed[suffix[nsup[big] == sup[suffix]]] = False
            out.append(
                _closed_level(
                    code, pos, gid, sup=sup, rep=rep, closed=closed, k=k, truncated=k == max_length
                )
            )
        gid_at[pos] = -1
        if k == max_length:
            break
        ps, gid, sup, rep = nps, ngid, nsup, nrep
        k += 1
    return out


def _closed_level(
    code: IntArray,
    pos: IntArray,
    gid: IntArray,
    *,
    sup: IntArray,
    rep: IntArray,
    closed: npt.NDArray[np.bool_],
    k: int,
    truncated: bool,
) -> CodedPatterns:
    wanted = np.flatnonzero(closed)
    whole = (code[pos - 1] < 0) & (code[pos + k] < 0)  # pos 0: code[-1] is the end pad
    exact = np.bincount(np.compress(whole, gid), minlength=len(sup))
    window = code[rep[wanted][:, None] + np.arange(k)]
    return CodedPatterns(window, sup[wanted], exact[wanted], truncated=truncated)


def mine_coded(
    ledger: CodedLedger,
    *,
    min_length: int = 3,
    min_support: int = 3,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> list[MinedPattern]:
    """Closed patterns of length ``min_length``..``max_length`` in ≥ ``min_support`` runs.

    Sorted longest first, then by support (descending), then by names.
    """
    levels = mine_levels(
        ledger, min_length=min_length, min_support=min_support, max_length=max_length
    )
    names = ledger.names
    out = [
        MinedPattern(
            codes=tuple(row),
            names=tuple(names[c] for c in row),
            support=s,
            exact_support=e,
            truncated=lv.truncated,
        )
        for lv in levels
        for row, s, e in zip(
            lv.codes.tolist(), lv.support.tolist(), lv.exact_support.tolist(), strict=True
        )
    ]
    out.sort(key=lambda p: (-len(p.codes), -p.support, p.names))
    return out


def mine_closed_patterns_fast(
    sequences: Sequence[Sequence[str]] | CodedLedger,
    *,
    min_length: int = 3,
    min_support: int = 3,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> list[Pattern]:
    """:func:`soloflow_core.mining.closed.mine_closed_patterns` with occurrence lists, fast."""
    ledger = (
        sequences if isinstance(sequences, CodedLedger) else CodedLedger.from_sequences(sequences)
    )
    out = []
    for p in mine_coded(
        ledger, min_length=min_length, min_support=min_support, max_length=max_length
    ):
        runs, firsts = ledger.occurrences(p.codes)
        lengths = np.diff(ledger.offsets)[runs]
        exact = runs[(lengths == len(p.codes)) & (firsts == 0)]
        out.append(
            Pattern(
                names=p.names,
                runs=tuple(int(r) for r in runs),
                exact_runs=tuple(int(r) for r in exact),
                first_positions=tuple(int(f) for f in firsts),
            )
        )
    return out
