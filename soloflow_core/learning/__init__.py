"""Learning policy: when a run teaches a flow, what each flow execution teaches about it, and
promotion (a verified candidate becomes a registered flow, :mod:`.promotion`).

Framework-free: pure functions over :class:`~soloflow_core.models.TaskRun` and
:class:`FlowStats`; storage and the agent integration call them. Reference:
``docs/learning.md``.
"""

from soloflow_core.learning.capacity import CapacityDecision, FlowUsage, make_room_for_learned_flow
from soloflow_core.learning.config import (
    ENV_PREFIX,
    LearningConfig,
    SuggestionMode,
    find_config_file,
    format_duration,
    load_learning_config,
    parse_duration,
)
from soloflow_core.learning.outcomes import (
    DEFAULT_PRIOR_WEIGHT,
    DEFAULT_PROMOTION_THRESHOLD,
    MIN_EXECUTIONS_TO_DEMOTE,
    MIN_EXECUTIONS_TO_RETIRE,
    MIN_HELD_OUT,
    REACTIVATE_AFTER_SUCCESSES,
    RETIRE_AFTER_FAILURES,
    FlowStats,
    FlowStatus,
    initial_stats,
    may_auto_execute,
    promotion_route,
    record_agent_run,
    record_outcome,
    reinstate,
)
from soloflow_core.learning.promotion import (
    approve_candidate,
    auto_promote_candidate,
    describe_divergences,
    reject_candidate,
    submit_flow,
)
from soloflow_core.learning.triggers import (
    LearningAttempt,
    LearningDecision,
    run_learning,
    should_learn,
)

__all__ = [
    "DEFAULT_PRIOR_WEIGHT",
    "DEFAULT_PROMOTION_THRESHOLD",
    "ENV_PREFIX",
    "MIN_EXECUTIONS_TO_DEMOTE",
    "MIN_HELD_OUT",
    "MIN_EXECUTIONS_TO_RETIRE",
    "REACTIVATE_AFTER_SUCCESSES",
    "RETIRE_AFTER_FAILURES",
    "CapacityDecision",
    "FlowStats",
    "FlowStatus",
    "FlowUsage",
    "LearningAttempt",
    "LearningConfig",
    "LearningDecision",
    "SuggestionMode",
    "approve_candidate",
    "auto_promote_candidate",
    "describe_divergences",
    "find_config_file",
    "format_duration",
    "initial_stats",
    "load_learning_config",
    "make_room_for_learned_flow",
    "may_auto_execute",
    "parse_duration",
    "promotion_route",
    "record_agent_run",
    "record_outcome",
    "reinstate",
    "reject_candidate",
    "run_learning",
    "should_learn",
    "submit_flow",
]
