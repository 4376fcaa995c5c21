"""Progress detection: stop an inner loop whose compliance scores stopped improving.

Example:
    >>> tracker = ProgressTracker()
    >>> for score in (0.4, 0.6, 0.6):
    ...     tracker.record(score)
    >>> tracker.is_stuck()
    False
    >>> tracker.record(0.55)
    >>> tracker.is_stuck()
    True
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ProgressTracker"]


class ProgressTracker:
    """The compliance scores of one outer iteration, and whether they stagnate.

    Stuck means: the last three scores never increase (``s[-1] <= s[-2] <= s[-3]``), that
    is two runs in a row without improvement. Fewer than three scores are never stuck.
    The workflow starts a fresh tracker at each outer iteration, because the refiner
    changes the contracts that the scores measure.
    """

    __slots__ = ("scores",)

    WINDOW = 3

    def __init__(self, scores: Iterable[float] = ()) -> None:
        self.scores: list[float] = list(scores)

    def record(self, score: float) -> None:
        """Add the latest score."""
        self.scores.append(float(score))

    def is_stuck(self) -> bool:
        """True when the last two runs brought no improvement."""
        if len(self.scores) < self.WINDOW:
            return False
        first, second, third = self.scores[-self.WINDOW :]
        return third <= second <= first

    def __repr__(self) -> str:
        return f"ProgressTracker(scores={self.scores!r})"
