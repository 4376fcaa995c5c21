"""Capacity: ``max_workflows_per_agent`` flows per (user, agent), and which learned flow goes.

Every flow counts toward the limit; only learned flows are ever evicted — a user-submitted
flow is a person's decision and stays. When a new learned flow would exceed the limit, the
learned flows leave in this order: retired first, then suggestion-only, then active; within
a status the least recently used (never executed counts as used when registered), and among
equally recent ones the lowest confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from soloflow_core.models import SOURCE_USER

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.learning.outcomes import FlowStats

__all__ = ["CapacityDecision", "FlowUsage", "make_room_for_learned_flow"]

_STATUS_ORDER = {"retired": 0, "suggestion_only": 1, "active": 2}
_NEVER = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class FlowUsage:
    """One stored flow, as far as eviction cares."""

    flow_id: str
    source: str
    """``"auto-learned"`` or ``"user-submitted"`` (:mod:`soloflow_core.learning.promotion`)."""
    stats: FlowStats
    registered_at: datetime | None = None
    """When the flow was registered: its last use until it is executed."""


@dataclass(frozen=True, slots=True)
class CapacityDecision:
    """Whether a new learned flow may be stored, and which flows to delete first."""

    allowed: bool
    evict: tuple[str, ...] = ()
    """Flow ids to delete before storing the new flow, in eviction order."""
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


def _eviction_key(flow: FlowUsage) -> tuple[int, datetime, float, str]:
    used = flow.stats.last_executed_at or flow.registered_at or _NEVER
    if used.tzinfo is None:
        used = used.replace(tzinfo=UTC)
    return (_STATUS_ORDER[flow.stats.status], used, flow.stats.confidence, flow.flow_id)


def make_room_for_learned_flow(
    flows: Sequence[FlowUsage], config: LearningConfig
) -> CapacityDecision:
    """Whether one more learned flow fits among ``flows`` (the namespace's stored flows).

    >>> from soloflow_core.learning import LearningConfig, FlowStats
    >>> flows = [FlowUsage("a", "auto-learned", FlowStats()), FlowUsage("u", "user-submitted", FlowStats())]
    >>> make_room_for_learned_flow(flows, LearningConfig(max_workflows_per_agent=2)).evict
    ('a',)
    """
    limit = config.max_workflows_per_agent
    excess = len(flows) + 1 - limit
    if excess <= 0:
        return CapacityDecision(
            True, (), f"{len(flows)} of max_workflows_per_agent={limit} flows stored"
        )
    learned = sorted((f for f in flows if f.source != SOURCE_USER), key=_eviction_key)
    if len(learned) < excess:
        return CapacityDecision(
            False,
            (),
            f"max_workflows_per_agent={limit} reached and only {len(learned)} of the "
            f"{len(flows)} flows are learned; user-submitted flows are never evicted. Raise "
            "max_workflows_per_agent or delete flows",
        )
    evict = tuple(f.flow_id for f in learned[:excess])
    return CapacityDecision(
        True, evict, f"max_workflows_per_agent={limit} reached: evicting {', '.join(evict)}"
    )
