"""The sequential workflow's data: roles and their typed results, state, phases, results.

The field names follow the "ADC Sequential Workflow" design document (``WorkflowState``,
``PhaseRecord``, ``WorkflowResult``); fields the document does not have are marked
"beyond the document" in their docstrings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soloflow_core.errors import ConfigError

__all__ = [
    "BASELINE_TOKENS",
    "COMPLIANCE_THRESHOLD",
    "EXIT_REASONS",
    "RESULT_TYPES",
    "ROLES",
    "AuditResult",
    "CodeResult",
    "ContractResult",
    "EvaluationResult",
    "PhaseRecord",
    "PullRequestResult",
    "RefinementResult",
    "Role",
    "RoleInput",
    "TokenPrice",
    "WorkflowResult",
    "WorkflowState",
]

Role = Literal[
    "contract_writer", "auditor", "code_generator", "evaluator", "refiner", "pr_orchestrator"
]
ROLES: tuple[Role, ...] = (
    "contract_writer",
    "auditor",
    "code_generator",
    "evaluator",
    "refiner",
    "pr_orchestrator",
)
"""Every role, in workflow order."""

COMPLIANCE_THRESHOLD = 0.8
"""The inner loop ends when the auditor's compliance score reaches this."""
BASELINE_TOKENS = 15_100_000
"""The design document's orchestrator baseline: 15.1M tokens per task."""
EXIT_REASONS = (
    "completed",
    "stagnated",
    "max_inner_reached",
    "max_outer_reached",
    "budget_exceeded",
)
"""``WorkflowResult.reason``: ``completed`` is the success; the others are failures."""


class _RoleResult(BaseModel):
    # Models add keys of their own to JSON answers; unknown keys are dropped, missing or
    # mistyped ones are an error naming the role.
    model_config = ConfigDict(frozen=True, extra="ignore")


class ContractResult(_RoleResult):
    """What the contract writer returns."""

    contracts: str = Field(min_length=1)
    """The contracts (Markdown), in full. Agents later receive only their summary."""


class AuditResult(_RoleResult):
    """What the auditor returns."""

    compliance_score: float = Field(ge=0.0, le=1.0)
    """How far the implementation meets the contracts, from 0 to 1."""
    violations: list[str] = Field(default_factory=list)
    """Each contract the implementation breaks, one sentence each."""


class CodeResult(_RoleResult):
    """What the code generator returns."""

    summary: str = ""
    """What was changed."""
    files_changed: list[str] = Field(default_factory=list)
    """Paths of the files written, relative to the workspace."""


class EvaluationResult(_RoleResult):
    """What the evaluator returns."""

    satisfied: bool
    """True when the work passes (tests, review): the workflow opens the pull request."""
    feedback: str = ""
    """Why not, for the refiner."""


class RefinementResult(_RoleResult):
    """What the refiner returns."""

    contracts: str = Field(min_length=1)
    """The revised contracts, in full; their summary is reloaded for the next iteration."""
    notes: str = ""
    """What was changed and why."""


class PullRequestResult(_RoleResult):
    """What the PR orchestrator returns."""

    pr_url: str = ""
    """The pull request's address (or a local path)."""
    summary: str = ""
    """Its title or description."""


RESULT_TYPES: dict[str, type[_RoleResult]] = {
    "contract_writer": ContractResult,
    "auditor": AuditResult,
    "code_generator": CodeResult,
    "evaluator": EvaluationResult,
    "refiner": RefinementResult,
    "pr_orchestrator": PullRequestResult,
}
"""Each role's result type."""


class TokenPrice(BaseModel):
    """A model's price in US dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_million: float = Field(default=0.0, ge=0.0)
    output_per_million: float = Field(default=0.0, ge=0.0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The price of that many tokens."""
        return (
            input_tokens * self.input_per_million + output_tokens * self.output_per_million
        ) / 1_000_000


class RoleInput(BaseModel):
    """What an agent receives: the task and *summaries*, never the full context."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    task_description: str
    workspace: str
    outer_iteration: int = 0
    max_outer: int = 5
    inner_iteration: int = 0
    max_inner: int = 10
    contracts_summary: str = ""
    """The contracts' summary (empty for the contract writer)."""
    compliance_score: float | None = None
    """The last audit's score in this outer iteration, if there was one."""
    violations_summary: str = ""
    """The last audit's violations, summarised (for the code generator)."""
    evaluator_feedback: str = ""
    """The evaluator's feedback, summarised (for the refiner)."""

    def render(self) -> str:
        """The input as one Markdown document, for a chat model's human message."""
        parts = [
            f"# Role: {self.role}",
            f"## Task\n\n{self.task_description}",
            f"## Workspace\n\n{self.workspace}",
            f"## Iteration\n\nouter {self.outer_iteration} of {self.max_outer}, "
            f"inner {self.inner_iteration} of {self.max_inner}",
        ]
        if self.contracts_summary:
            parts.append(f"## Contracts (summary)\n\n{self.contracts_summary}")
        if self.compliance_score is not None:
            parts.append(f"## Last audit\n\ncompliance {self.compliance_score:.2f}")
        if self.violations_summary:
            parts.append(f"## Violations (summary)\n\n{self.violations_summary}")
        if self.evaluator_feedback:
            parts.append(f"## Evaluator feedback (summary)\n\n{self.evaluator_feedback}")
        return "\n\n".join(parts)

    def as_runnable_input(self) -> dict[str, Any]:
        """The dict a Runnable is invoked with: every field, ``context`` and ``messages``.

        ``context`` is :meth:`render` (for prompt templates); ``messages`` holds it as one
        human message, so an agent made with ``create_agent`` can be a role agent as it is.
        """
        text = self.render()
        return {**self.model_dump(), "context": text, "messages": [("human", text)]}


class PhaseRecord(BaseModel):
    """One phase (an agent run or a summarisation) of the workflow."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    """The role, or ``create_summary`` / ``reload_summary``."""
    timestamp: datetime
    """When the phase ended (UTC)."""
    tokens_used: int = 0
    """Input + output tokens of every model call of the phase."""
    result_summary: str = ""
    """One line on what the phase produced."""
    iteration_context: dict[str, int] = Field(default_factory=dict)
    """``{"outer": n, "inner": m}`` when the phase ran."""
    input_tokens: int = 0
    """Beyond the document: the input part of ``tokens_used``."""
    output_tokens: int = 0
    """Beyond the document: the output part of ``tokens_used``."""
    cost: float = 0.0
    """Beyond the document: US dollars, from the configured token prices."""
    duration_seconds: float = 0.0
    """Beyond the document: wall time of the phase."""
    compliance_score: float | None = None
    """Beyond the document: the auditor's score, for auditor phases."""


class WorkflowState(BaseModel):
    """The whole state shared by the phases: the only thing that persists between agents."""

    model_config = ConfigDict(extra="forbid")

    task_description: str
    workspace: str
    outer_iteration: int = 0
    """The current outer iteration, from 1 (0 before the first audit)."""
    inner_iteration: int = 0
    """Code generator runs in the current outer iteration."""
    max_outer: int = 5
    max_inner: int = 10
    contracts_summary: str = ""
    compliance_score: float = 0.0
    last_violations: list[str] = Field(default_factory=list)
    evaluator_satisfied: bool = False
    evaluator_feedback: str = ""
    inner_loop_active: bool = False
    phase_history: list[PhaseRecord] = Field(default_factory=list)
    contracts: str = ""
    """Beyond the document: the full contracts as last written; no agent receives them."""
    scores: list[float] = Field(default_factory=list)
    """Beyond the document: the audit scores of the current outer iteration (progress)."""
    total_tokens: int = 0
    """Beyond the document: tokens of every phase so far."""
    total_cost: float = 0.0
    """Beyond the document: US dollars so far."""
    token_budget: int | None = None
    """Beyond the document: the hard token limit (None: no limit)."""
    budget_warned: bool = False
    """Beyond the document: ``soloflow_token_budget_warning`` has been called."""
    status: Literal["running", "success", "failed"] = "running"
    """Beyond the document: ``running`` until an exit path is taken."""
    reason: str = ""
    """Beyond the document: the exit reason (:data:`EXIT_REASONS`) once finished."""
    pr_url: str = ""
    """Beyond the document: the PR orchestrator's result."""
    execution_time_seconds: float = 0.0
    """Beyond the document: the phases' wall time, summed across resumes."""


class WorkflowResult(BaseModel):
    """The outcome of a finished workflow."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["success", "failed"]
    final_state: WorkflowState
    total_tokens: int
    total_cost: float
    reason: str = "completed"
    """One of :data:`EXIT_REASONS`."""
    pr_url: str = ""
    execution_time_seconds: float = 0.0
    thread_id: str = ""
    """Beyond the document: the checkpoint thread, to inspect or resume it."""

    def token_efficiency_vs_baseline(self, baseline_tokens: int = BASELINE_TOKENS) -> float:
        """Percent of tokens saved against a baseline (default: the document's 15.1M).

        Negative when the workflow used more than the baseline.
        """
        if baseline_tokens <= 0:
            raise ConfigError(f"baseline_tokens must be positive, not {baseline_tokens}")
        return (1.0 - self.total_tokens / baseline_tokens) * 100.0
