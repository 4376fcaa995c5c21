"""The two-level sequential agent workflow (the "ADC Sequential Workflow" design) on LangGraph.

A contract writer, then an outer loop (auditor → inner loop of auditor ⇄ code generator until
compliance ≥ 0.8 → evaluator → PR orchestrator, or refiner and again), with agents that
receive summaries instead of the full context, progress detection, a token budget and
checkpoints after every phase. See ``docs/sequential.md``.

Names are imported lazily, so that ``soloflow_langgraph.sequential.tokens`` (used by the
built-in summariser plugin on every plugin-manager creation) does not load LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "AuditResult",
    "ChatModelAgent",
    "CodeResult",
    "ContractResult",
    "EvaluationResult",
    "PhaseRecord",
    "ProgressTracker",
    "PullRequestResult",
    "RefinementResult",
    "RoleInput",
    "SequentialWorkflow",
    "TokenBudget",
    "TokenPrice",
    "WorkflowResult",
    "WorkflowState",
    "as_role_agent",
    "build_sequential_graph",
    "dev_agents",
]

_WHERE = {
    "AuditResult": "models",
    "CodeResult": "models",
    "ContractResult": "models",
    "EvaluationResult": "models",
    "PhaseRecord": "models",
    "PullRequestResult": "models",
    "RefinementResult": "models",
    "RoleInput": "models",
    "TokenPrice": "models",
    "WorkflowResult": "models",
    "WorkflowState": "models",
    "ProgressTracker": "progress",
    "TokenBudget": "budget",
    "ChatModelAgent": "agents",
    "as_role_agent": "agents",
    "build_sequential_graph": "graph",
    "SequentialWorkflow": "workflow",
    "dev_agents": "dev_agents",
}

if TYPE_CHECKING:
    from soloflow_langgraph.sequential.agents import ChatModelAgent, as_role_agent
    from soloflow_langgraph.sequential.budget import TokenBudget
    from soloflow_langgraph.sequential.dev_agents import dev_agents
    from soloflow_langgraph.sequential.graph import build_sequential_graph
    from soloflow_langgraph.sequential.models import (
        AuditResult,
        CodeResult,
        ContractResult,
        EvaluationResult,
        PhaseRecord,
        PullRequestResult,
        RefinementResult,
        RoleInput,
        TokenPrice,
        WorkflowResult,
        WorkflowState,
    )
    from soloflow_langgraph.sequential.progress import ProgressTracker
    from soloflow_langgraph.sequential.workflow import SequentialWorkflow


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
