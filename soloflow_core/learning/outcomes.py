"""Outcomes: what each execution of a flow teaches about it, and what the flow may then do.

Confidence is the mean of a Beta posterior over the flow's success probability::

    confidence = (alpha + successes + seen) / (alpha + beta + executions + seen)

with the prior Beta(1, 1) (no opinion: 0.5) unless the flow's replay fidelity seeds it, a
person approved it (as a replay of perfect fidelity: 5/6), or a person wrote it (Beta(4, 0):
1.0) — see :func:`initial_stats`. ``seen`` counts the agent's own successful runs of the
flow's sequence (:func:`record_agent_run`): evidence that the steps work, which brings back
a flow one bad input set back. Status follows the observed success rate (successes / executions):

- ``active`` → ``suggestion_only`` once executions ≥ 5 and the rate < ``min_success_rate``;
- ``suggestion_only`` → ``retired`` after 3 consecutive failures counted from the demotion,
  or once executions ≥ 10 and the rate < ``min_success_rate / 2``;
- ``suggestion_only`` → ``active`` again when the rate is back ≥ ``min_success_rate`` and
  the last 2 executions succeeded (the streak keeps it from flapping at the threshold);
- ``retired`` stays retired (outcomes are still counted); :func:`reinstate` is a person's act.

Reference: ``docs/learning.md``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig, SuggestionMode

__all__ = [
    "DEFAULT_PRIOR_WEIGHT",
    "DEFAULT_PROMOTION_THRESHOLD",
    "HALT_AFTER_FAILURES",
    "MIN_HELD_OUT",
    "MIN_EXECUTIONS_TO_DEMOTE",
    "MIN_EXECUTIONS_TO_RETIRE",
    "REACTIVATE_AFTER_SUCCESSES",
    "RETIRE_AFTER_FAILURES",
    "FlowStats",
    "FlowStatus",
    "initial_stats",
    "may_auto_execute",
    "promotion_route",
    "record_agent_run",
    "record_outcome",
    "reinstate",
]

FlowStatus = Literal["active", "suggestion_only", "retired"]

MIN_EXECUTIONS_TO_DEMOTE = 5
"""No flow is judged on fewer executions than this."""
RETIRE_AFTER_FAILURES = 3
"""Consecutive failures, counted from the demotion, that retire a suggestion-only flow."""
MIN_EXECUTIONS_TO_RETIRE = 10
"""From this many executions, a rate below ``min_success_rate / 2`` retires a demoted flow."""
REACTIVATE_AFTER_SUCCESSES = 2
"""Consecutive successes a recovered suggestion-only flow needs to be active again."""
DEFAULT_PRIOR_WEIGHT = 4.0
"""Pseudo-executions a replay fidelity (or a person's word) is worth in :func:`initial_stats`."""
DEFAULT_PROMOTION_THRESHOLD = 0.9
"""Automatic promotion needs at least this replay fidelity (``soloflow flows verify``)."""
MIN_HELD_OUT = 3
"""Automatic promotion needs at least this many held-out occurrences replayed."""


class FlowStats(BaseModel):
    """How a flow has fared: counts, confidence and what it is allowed to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    success_count: int = Field(default=0, ge=0)
    total_executions: int = Field(default=0, ge=0)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    """Posterior mean success probability; computed from the prior and counts when omitted."""
    status: FlowStatus = "active"
    prior_alpha: float = Field(default=1.0, gt=0.0)
    """Prior pseudo-successes (Beta's alpha)."""
    prior_beta: float = Field(default=1.0, ge=0.0)
    """Prior pseudo-failures (Beta's beta; 0 for a flow a person vouches for)."""
    consecutive_successes: int = Field(default=0, ge=0)
    consecutive_failures: int = Field(default=0, ge=0)
    """Failures in a row; reset to 0 when the flow is demoted, so retirement counts anew."""
    agent_successes: int = Field(default=0, ge=0)
    """Successful agent runs of the flow's sequence seen since it was registered: they count
    in the confidence (as successes), not in the executions or the status rules."""
    last_executed_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_confidence(cls, data: Any) -> Any:
        if isinstance(data, dict) and "confidence" not in data:
            alpha = data.get("prior_alpha", 1.0)
            beta = data.get("prior_beta", 1.0)
            s, n = data.get("success_count", 0), data.get("total_executions", 0)
            seen = data.get("agent_successes", 0)
            try:
                data = {
                    **data,
                    "confidence": _posterior_mean(
                        alpha, beta, successes=s + seen, executions=n + seen
                    ),
                }
            except (TypeError, ZeroDivisionError):
                pass  # let field validation report the bad input
        return data

    @model_validator(mode="after")
    def _counts_agree(self) -> FlowStats:
        if self.success_count > self.total_executions:
            raise ValueError(
                f"success_count {self.success_count} exceeds total_executions {self.total_executions}"
            )
        return self

    def learning_state(self) -> dict[str, Any]:
        """What the store keeps beside the counts to rebuild these stats (its ``learning``
        JSON column): the prior and the streaks. Rebuild with
        ``FlowStats(**state, success_count=..., total_executions=..., status=...,
        last_executed_at=...)`` — the confidence is recomputed."""
        return self.model_dump(
            include={
                "prior_alpha",
                "prior_beta",
                "consecutive_successes",
                "consecutive_failures",
                "agent_successes",
            }
        )

    @property
    def success_rate(self) -> float | None:
        """Observed successes / executions; None before the first execution."""
        return self.success_count / self.total_executions if self.total_executions else None

    @property
    def failure_count(self) -> int:
        return self.total_executions - self.success_count


def _posterior_mean(alpha: float, beta: float, successes: int, executions: int) -> float:
    return (alpha + successes) / (alpha + beta + executions)


def initial_stats(
    *,
    fidelity: float | None = None,
    weight: float = DEFAULT_PRIOR_WEIGHT,
    user_submitted: bool = False,
    approved: bool = False,
) -> FlowStats:
    """The stats of a newly registered flow.

    - Learned, not verified: the prior is Beta(1, 1), confidence 0.5.
    - ``approved`` by a person: the prior of a replay at fidelity 1.0 (5/6 with the default
      weight), whatever the replay measured: a person looked at it and said yes.
    - Learned with the replay ``fidelity`` the candidate reached (``soloflow flows
      verify``): Beta(1 + weight·fidelity, 1 + weight·(1 − fidelity)) — the held-out replay
      counts as ``weight`` executions on top of the uniform prior. Pass the number of
      replayed occurrences as ``weight`` when it is known.
    - ``user_submitted``: a person vouches for it: Beta(weight, 0), confidence 1.0 (as the
      store's default for user-submitted flows) until the first failure, which costs as
      much as for a learned flow of perfect fidelity (4/5 with the default weight).

    >>> initial_stats().confidence, initial_stats(fidelity=1.0).confidence
    (0.5, 0.8333333333333334)
    >>> initial_stats(user_submitted=True).confidence
    1.0
    """
    if not weight >= 0.0 or math.isinf(weight):
        raise ValueError(f"weight must be a finite number ≥ 0, got {weight!r}")
    if user_submitted:
        if fidelity is not None or weight == 0.0:
            raise ValueError("a user-submitted flow's prior takes a weight > 0 and no fidelity")
        return FlowStats(prior_alpha=weight, prior_beta=0.0)
    if approved:
        fidelity = 1.0
    if fidelity is None:
        return FlowStats()
    if not (0.0 <= fidelity <= 1.0) or math.isnan(fidelity):
        raise ValueError(f"fidelity must be within [0, 1], got {fidelity!r}")
    return FlowStats(
        prior_alpha=1.0 + weight * fidelity, prior_beta=1.0 + weight * (1.0 - fidelity)
    )


def record_outcome(
    stats: FlowStats, success: bool, config: LearningConfig, *, at: datetime | None = None
) -> FlowStats:
    """``stats`` after one more execution of the flow (``at``: when; now by default).

    >>> from soloflow_core.learning import LearningConfig
    >>> s = record_outcome(initial_stats(), True, LearningConfig())
    >>> (s.success_count, s.total_executions, round(s.confidence, 4), s.status)
    (1, 1, 0.6667, 'active')
    """
    s = stats.success_count + (1 if success else 0)
    n = stats.total_executions + 1
    wins = stats.consecutive_successes + 1 if success else 0
    losses = 0 if success else stats.consecutive_failures + 1
    status, losses = _next_status(
        stats.status, rate=s / n, n=n, wins=wins, losses=losses, floor=config.min_success_rate
    )
    seen = stats.agent_successes
    return stats.model_copy(
        update={
            "success_count": s,
            "total_executions": n,
            "confidence": _posterior_mean(
                stats.prior_alpha, stats.prior_beta, successes=s + seen, executions=n + seen
            ),
            "status": status,
            "consecutive_successes": wins,
            "consecutive_failures": losses,
            "last_executed_at": at if at is not None else datetime.now(UTC),
        }
    )


def record_agent_run(stats: FlowStats) -> FlowStats:
    """``stats`` after the agent itself did the flow's sequence successfully: one more
    success in the confidence; executions, streaks and status unchanged.

    >>> s = record_agent_run(initial_stats())
    >>> (s.agent_successes, round(s.confidence, 4), s.total_executions)
    (1, 0.6667, 0)
    """
    seen = stats.agent_successes + 1
    return stats.model_copy(
        update={
            "agent_successes": seen,
            "confidence": _posterior_mean(
                stats.prior_alpha,
                stats.prior_beta,
                successes=stats.success_count + seen,
                executions=stats.total_executions + seen,
            ),
        }
    )


def _next_status(
    status: FlowStatus, rate: float, n: int, wins: int, losses: int, floor: float
) -> tuple[FlowStatus, int]:
    """The status after an outcome, and the consecutive-failure count to keep."""
    if status == "active":
        if n >= MIN_EXECUTIONS_TO_DEMOTE and rate < floor:
            return "suggestion_only", 0  # retirement counts failures from here
        return "active", losses
    if status == "suggestion_only":
        if losses >= RETIRE_AFTER_FAILURES or (n >= MIN_EXECUTIONS_TO_RETIRE and rate < floor / 2):
            return "retired", losses
        if rate >= floor and wins >= REACTIVATE_AFTER_SUCCESSES:
            return "active", losses
    return status, losses


def reinstate(stats: FlowStats) -> FlowStats:
    """A retired or demoted flow made active again by a person (e.g. after fixing it).

    The counts start over from the flow's prior: its old record described the broken flow.
    """
    return FlowStats(
        prior_alpha=stats.prior_alpha,
        prior_beta=stats.prior_beta,
        last_executed_at=stats.last_executed_at,
    )


HALT_AFTER_FAILURES = 2
"""A flow whose last executions failed this many times in a row does not run unasked until an
execution of it succeeds again (the agent's own runs do not count here)."""


def may_auto_execute(stats: FlowStats, config: LearningConfig) -> bool:
    """Whether the flow may run without asking: ``auto_execute`` is on, the flow is active,
    its confidence ≥ ``confidence_threshold``, and its last :data:`HALT_AFTER_FAILURES`
    executions did not all fail."""
    return (
        config.auto_execute
        and stats.status == "active"
        and stats.confidence >= config.confidence_threshold
        and stats.consecutive_failures < HALT_AFTER_FAILURES
    )


def promotion_route(
    mode: SuggestionMode,
    read_only: bool,
    confidence: float | None,
    fidelity: float | None,
    config: LearningConfig,
    *,
    fidelity_threshold: float = DEFAULT_PROMOTION_THRESHOLD,
) -> Literal["auto", "manual"]:
    """Whether a candidate is promoted without a person (``"auto"``) or waits for one.

    - ``manual``: always ``"manual"``.
    - ``automatic``: ``"auto"`` when ``confidence`` ≥ ``config.confidence_threshold`` and
      the replay ``fidelity`` ≥ ``fidelity_threshold`` (the threshold of
      :func:`soloflow_core.learning.promotion.auto_promote_candidate`, 0.9); else ``"manual"``.
    - ``hybrid``: as ``automatic`` for a read-only flow, ``"manual"`` for any other.

    An unknown confidence or fidelity (None: not verified yet) means ``"manual"``. On
    ``"auto"``, promote with ``auto_promote_candidate(..., threshold=fidelity_threshold)``,
    which checks the fidelity again against the stored candidate.

    >>> from soloflow_core.learning import LearningConfig
    >>> promotion_route("hybrid", True, 0.85, 0.95, LearningConfig())
    'auto'
    >>> promotion_route("hybrid", False, 0.85, 0.95, LearningConfig())
    'manual'
    """
    if mode not in ("manual", "automatic", "hybrid"):
        raise ValueError(f"suggestion mode must be 'manual', 'automatic' or 'hybrid', got {mode!r}")
    if mode == "manual" or (mode == "hybrid" and not read_only):
        return "manual"
    if confidence is None or fidelity is None:
        return "manual"
    if confidence >= config.confidence_threshold and fidelity >= fidelity_threshold:
        return "auto"
    return "manual"
