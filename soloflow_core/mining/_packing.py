"""Packed sorts and look-ups the matching indexes share (:mod:`~soloflow_core.mining.matching`,
:mod:`~soloflow_core.mining.positions`).

Each index of a ledger (pairs and triples of units, and where they start) is a sort of keys
packed with positions in one int64; these build them with as few fresh arrays as they can
(each fresh array of a whole ledger's size costs page faults as well as its copy).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from soloflow_core.mining.options import IndexArray, IntArray


def pattern_matrix(pats: Sequence[IntArray], width: int, fill: int) -> IntArray:
    """The patterns as rows of a ``(len(pats), width)`` matrix, padded with ``fill``."""
    sizes = np.fromiter(map(len, pats), np.int64, len(pats))
    mat = np.full((len(pats), width), fill, dtype=np.int64)
    if len(pats):
        starts = np.cumsum(sizes) - sizes
        step = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
        mat[np.repeat(np.arange(len(pats)), sizes), step] = np.concatenate(pats)
    return mat


def sorted_pairs(
    keys: IntArray, at: IntArray, packable: bool, *, reuse: bool = False, small: bool = False
) -> tuple[IntArray, IndexArray]:
    """(key, start) sorted by both: one packed sort when both fit in an int64.

    Packed, sorted and unpacked in place, in one buffer (``keys`` itself with ``reuse``):
    every fresh array of a whole ledger's size costs page faults as well as its copy.
    ``small``: starts as int32 when they fit (half the memory; a caller that packs them
    with Python ints must not ask)."""
    if not packable:
        order = np.argsort(keys, kind="stable")
        return keys[order], at[order]
    shift = max(int(at.max(initial=0)).bit_length(), 1)
    packed = np.left_shift(keys, shift, out=keys if reuse else None)
    packed |= at
    packed.sort()
    pos: IndexArray = packed.astype(np.int32 if small and shift <= 31 else np.int64)
    pos &= (1 << shift) - 1
    packed >>= shift
    return packed, pos


def distinct_values(values: IntArray) -> IntArray:
    """The distinct values, ascending (as np.unique, without its import of numpy.ma;
    np.compress rather than a boolean index)."""
    out = np.sort(values)
    return np.compress(np.concatenate(([True], out[1:] != out[:-1])), out) if len(out) else out


def positions_between(keys: IntArray, pos: IntArray, key: int) -> IntArray:
    return pos[np.searchsorted(keys, key, side="left") : np.searchsorted(keys, key, side="right")]


def count_keys(sorted_keys: IntArray, k: IntArray) -> IntArray:
    return np.searchsorted(sorted_keys, k, side="right") - np.searchsorted(
        sorted_keys, k, side="left"
    )


def pair_keys(a: IntArray, b: IntArray, at: IntArray, *, w: int) -> IntArray:
    """``a[at] * w + b[at]`` in int64 (keys are products of codes), built in one array."""
    keys = a[at].astype(np.int64, copy=False)
    keys *= w
    keys += b[at]
    return keys


def packed_starts(id_at: npt.NDArray[np.int32], at: IntArray, form: int, *, shift: int) -> IntArray:
    """(triple id, form, start) of a form's instances starting ``at``, packed in an int64."""
    packed = id_at[at].astype(np.int64)
    packed <<= shift + 3
    packed |= form << shift
    packed |= at
    return packed
