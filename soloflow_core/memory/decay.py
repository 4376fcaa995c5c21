"""The forgetting curve: how much of a memory is left, and how a use strengthens it.

Retention follows Ebbinghaus' exponential curve::

    R(t) = base · e^(−t / stability)

``t`` is the time since the item was last used (or, never used, since it happened) and
``stability`` the time it takes ``R`` to fall to ``base / e`` (≈ 37 %), both in days. Each use
multiplies the stability by :data:`REINFORCE_FACTOR` (spaced repetition: an item recalled
often is forgotten ever more slowly), up to :data:`MAX_STABILITY_DAYS`. An item whose retention
is below a threshold (:data:`DEFAULT_THRESHOLD`) is archived by ``soloflow memory prune``.

With the defaults, an item never used is archived :func:`forget_after` ``(1, 7, 0.2)`` =
7 · ln 5 ≈ 11.3 days after it happened; once used, 22.5 days after that use; twice, 45 days.

Every function here is pure.

Example:
    >>> round(retention(1.0, 7.0, 7.0), 4)
    0.3679
    >>> reinforce(7.0)
    14.0
"""

from __future__ import annotations

import math
from datetime import datetime

__all__ = [
    "DEFAULT_BASE",
    "DEFAULT_THRESHOLD",
    "INITIAL_STABILITY_DAYS",
    "MAX_STABILITY_DAYS",
    "REINFORCE_FACTOR",
    "elapsed_days",
    "forget_after",
    "is_forgotten",
    "reinforce",
    "retention",
]

DEFAULT_BASE = 1.0
"""Retention right after an item happens or is used."""
INITIAL_STABILITY_DAYS = 7.0
"""Stability of an item never used: a week to fall to 37 %."""
REINFORCE_FACTOR = 2.0
"""Each use doubles the stability (7 → 14 → 28 → 56 days ...)."""
MAX_STABILITY_DAYS = 3650.0
"""Stability never grows past ten years: an item unused for decades still fades."""
DEFAULT_THRESHOLD = 0.2
"""Items whose retention is below this are archived by a prune."""

_SECONDS_PER_DAY = 86_400.0


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if (
        not isinstance(value, int | float)
        or math.isnan(value)
        or value < 0
        or (positive and value == 0)
    ):
        need = "a number > 0" if positive else "a number ≥ 0"
        raise ValueError(f"{name} must be {need}, got {value!r}")


def retention(base: float, t: float, stability: float) -> float:
    """``base · e^(−t / stability)``: what is left of an item ``t`` days after its last use.

    Raises:
        ValueError: ``base`` or ``t`` negative, ``stability`` not positive, or any NaN.
    """
    _check("base", base)
    _check("t", t)
    _check("stability", stability, positive=True)
    return base * math.exp(-t / stability)


def reinforce(
    stability: float, *, factor: float = REINFORCE_FACTOR, cap: float = MAX_STABILITY_DAYS
) -> float:
    """The stability after one more use: ``min(stability · factor, cap)``."""
    _check("stability", stability, positive=True)
    if not isinstance(factor, int | float) or not factor >= 1.0:
        raise ValueError(f"factor must be a number ≥ 1 (a use never weakens), got {factor!r}")
    return min(stability * factor, max(cap, stability))


def forget_after(base: float, stability: float, threshold: float) -> float:
    """Days after the last use at which retention falls to ``threshold``:
    ``stability · ln(base / threshold)``; 0 when ``base ≤ threshold``, infinity when
    ``threshold`` is 0."""
    _check("base", base)
    _check("stability", stability, positive=True)
    _check("threshold", threshold)
    if threshold == 0:
        return math.inf
    if base <= threshold:
        return 0.0
    return stability * math.log(base / threshold)


def is_forgotten(base: float, t: float, stability: float, threshold: float) -> bool:
    """Whether retention has fallen below ``threshold`` (strictly)."""
    return retention(base, t, stability) < threshold


def elapsed_days(since: datetime, now: datetime) -> float:
    """Days from ``since`` to ``now``; 0 when ``since`` is later (clocks disagree)."""
    return max((now - since).total_seconds() / _SECONDS_PER_DAY, 0.0)
