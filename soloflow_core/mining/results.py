"""What the ranking returns: a chosen pattern, its occurrences and what it saves.

What a flow saves per occurrence is the model turns behind its calls (but the one that calls
the flow) and their tokens: measured from the runs' model calls (usage_metadata) where they
are aligned to tool calls, else each run's token total spread over its turns, else
:data:`~soloflow_core.mining.options.DEFAULT_TOKENS_PER_STEP` per saved call.
``savings_method`` says which. Occurrences are built lazily (:class:`OccurrenceList`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from soloflow_core.mining._packing import distinct_values
from soloflow_core.mining.options import SOURCE_MEASURED, SOURCE_RUN_TOTALS, BoolArray, IntArray

if TYPE_CHECKING:
    from soloflow_core.mining.matching import TolerantOccurrences
    from soloflow_core.mining.units import UnitLedger

__all__ = ["OccurrenceList", "PatternOccurrence", "RankedPattern"]


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

    __slots__ = ("_bounds", "_length", "_runs", "_spans", "_stray", "_swap_at", "_units")

    def __init__(
        self, ledger: UnitLedger, runs: IntArray, units: IntArray, occ: TolerantOccurrences
    ) -> None:
        self._runs, self._units = runs, units
        # Each step's calls are looked up when an occurrence is first read, not here: most
        # results are never read occurrence by occurrence (a whole ledger's replay ranks
        # tens of thousands of them, and its caller may want only the names and support).
        self._bounds = (ledger.unit_first, ledger.unit_last)
        self._spans: tuple[IntArray, IntArray] | None = None
        self._stray, self._swap_at, self._length = occ.stray, occ.swap_at, occ.length

    def _calls(self) -> tuple[IntArray, IntArray]:
        """Each step's first and last call (-1 for a step not reached), all rows at once."""
        if self._spans is None:
            units, (first, last) = self._units, self._bounds
            # A step not reached has unit -1: it reads the last unit, then is masked.
            self._spans = (
                np.where(units >= 0, first[units], -1),
                np.where(units >= 0, last[units], -1),
            )
        return self._spans

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
        first, last = self._calls()
        spans = tuple(
            (a, b) if a >= 0 else None
            for a, b in zip(first[k].tolist(), last[k].tolist(), strict=True)
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


def ranked_pattern(
    ledger: UnitLedger,
    pattern: Any,
    pat: IntArray,
    *,
    gain: float,
    occ: TolerantOccurrences,
    rank: int,
    source: int | None = None,
) -> RankedPattern:
    """``pat`` as a result; ``source``: :func:`one_source` of the ledger, if worked out."""
    names = tuple(ledger.names[c] for c in pat.tolist())
    reached = occ.pos >= 0
    # A step not reached has position -1: the ledger's last slot, a pad whose unit is -1.
    units = ledger.flat_unit[occ.pos]
    first_unit = units[:, 0] if len(units) else np.zeros(0, dtype=np.int64)
    first_unit = np.where(first_unit >= 0, first_unit, units.max(axis=1) if len(units) else 0)
    run_of = ledger.kept[ledger.unit_run[first_unit]] if len(units) else np.zeros(0, np.int64)
    occurrences = OccurrenceList(ledger, run_of, units, occ=occ)
    clean = int(((~occ.stray.any(axis=1)) & (occ.swap_at < 0) & (occ.length == len(pat))).sum())
    loops = ledger.unit_repeated[units] & reached
    repeated = tuple(int(j) for j in np.flatnonzero(loops.any(axis=0))) if len(units) else ()
    n = ledger.unit_count
    expected = n * float(np.exp2(-ledger.bits[pat].sum()))
    lift = len(occ) / expected if expected > 0 else math.inf
    per_tok, per_turn, method = _savings(ledger, units, reached, one=source)
    total = per_tok * len(occ)
    noisy = {
        "with a stray call": int(occ.stray.any(axis=1).sum()),
        "with two steps swapped": int((occ.swap_at >= 0).sum()),
        "cut short by a failing call": int((occ.length < len(pat)).sum()),
    }
    parts = ", ".join(f"{v} {k}" for k, v in noisy.items() if v)
    runs = distinct_values(run_of)
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


def one_source(ledger: UnitLedger) -> int | None:
    """How every unit's tokens were known, when it is the same for all (None otherwise):
    worked out once for the many results of one ledger, each of which would otherwise read
    its occurrences' sources."""
    src = ledger.unit_source
    if not len(src) or not (src == src[0]).all():
        return None
    return int(src[0])


def _savings(
    ledger: UnitLedger, units: IntArray, reached: BoolArray, *, one: int | None = None
) -> tuple[float, float, str]:
    """Tokens and model turns saved per occurrence, and how that was worked out (``one``:
    :func:`one_source` of the ledger, if worked out)."""
    if len(units) == 0:
        return 0.0, 0.0, "no occurrences"
    safe = units  # -1 where not reached: reads the last unit, masked by ``reached``
    if one is not None and reached[:, 0].all():  # each row's least source: the one
        source = np.full(len(units), one, dtype=np.int8)
    else:
        source = np.where(reached, ledger.unit_source[safe], SOURCE_MEASURED).min(axis=1)
    for level, how in (
        (
            SOURCE_MEASURED,
            "measured: tokens of the model turns that requested the pattern's calls "
            "(usage_metadata)",
        ),
        (
            SOURCE_RUN_TOTALS,
            "run totals: each run's tokens spread evenly over its model turns "
            "(one per call plus the answer)",
        ),
    ):
        use = source == level
        if use.any():  # the occurrences whose tokens are known that way
            some, on = (safe, reached) if use.all() else (safe[use], reached[use])
            off = ~on
            # Gathered fresh, so zeroed in place where not reached (as np.where would copy).
            t = ledger.unit_tokens[some]
            t[off] = 0.0
            k = ledger.unit_turns[some]
            k[off] = 0.0
            t, k = t.sum(axis=1), k.sum(axis=1)
            saved = np.where(k > 0, t * (k - 1) / np.maximum(k, 1e-9), 0.0)
            return (
                float(saved.mean()),
                float((k - 1).clip(min=0).mean()),
                f"{how}, in {int(use.sum())} of {len(units)} occurrences; all turns but the "
                "one that calls the flow are saved",
            )
    per_step = ledger.options.tokens_per_step
    calls = np.where(reached, ledger.unit_last[safe] - ledger.unit_first[safe] + 1, 0).sum(axis=1)
    saved_turns = float((calls - 1).clip(min=0).mean())
    return (
        per_step * saved_turns,
        saved_turns,
        f"estimate: {per_step:g} tokens per saved model turn (DEFAULT_TOKENS_PER_STEP; no token "
        "usage recorded), one turn per call but the one that calls the flow",
    )
