"""What the ranking modules share: its options, array types and constants.

Kept apart so that :mod:`~soloflow_core.mining.units`, :mod:`~soloflow_core.mining.matching`,
:mod:`~soloflow_core.mining.cover` and :mod:`~soloflow_core.mining.ranking` can all import
them without importing each other. Import them from :mod:`soloflow_core.mining.ranking`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_TOKENS_PER_STEP", "HasNames", "RankingOptions"]

DEFAULT_TOKENS_PER_STEP = 1000.0
"""Tokens one avoided tool-calling model turn is assumed to cost when no usage is recorded.
A turn re-reads the system prompt, tool schemas and conversation (τ-bench airline's policy
and tools alone are ~4k tokens), so 1,000 is deliberately conservative."""

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.signedinteger[Any]]
"""Positions, indices and tool codes of a unit ledger: int32 below 2**31 units, else int64."""
COVERED = -2  # code of a unit already covered by a chosen pattern
SOURCE_MEASURED, SOURCE_RUN_TOTALS, SOURCE_UNKNOWN = 2, 1, 0


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
