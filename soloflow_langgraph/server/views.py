"""What the REST API and the MCP tools answer: pydantic models, one per resource.

The service (:mod:`.service`) builds them from the store's records; the API returns them
as JSON (their schemas are the OpenAPI document's), the MCP server as structured content.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from soloflow_core.learning.quality import QualityScore
    from soloflow_core.learning.savings import FlowSavings, SideMeasure
    from soloflow_core.memory.procedural import WorkflowMatch
    from soloflow_core.models import FlowCandidate, TaskRun
    from soloflow_core.store import ApiToken, FlowRunRecord, RunSummary, Transition
    from soloflow_core.store.procedural import FlowMeta
    from soloflow_langgraph.runtime.results import FlowRunResult

__all__ = [
    "CandidateView",
    "ErrorBody",
    "FindMatchView",
    "FlowRunView",
    "FlowView",
    "Page",
    "QualityView",
    "RunOutcomeView",
    "RunSummaryView",
    "SavingsView",
    "StepView",
    "TaskRunView",
    "TokenView",
    "TraceSpan",
    "TraceView",
    "TransitionView",
    "VerifyView",
    "WorkflowPage",
    "WorkflowView",
]

T = TypeVar("T")


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(_View):
    """Every error: ``error`` is the kind (``Unauthorized``, ``Forbidden``, ``Not Found``,
    ``Invalid``, ``Conflict``), ``detail`` says what and how to fix it."""

    error: str
    detail: str
    problems: list[dict[str, Any]] = Field(default_factory=list)
    """For invalid input: each problem with its field ``path`` and ``message``."""


class QualityView(_View):
    """The quality score: four dimensions in [0, 1] and their mean (formulas: docs/serve.md)."""

    reliability: float
    efficiency: float
    maturity: float
    reusability: float
    overall: float
    evidence: dict[str, Any]

    @classmethod
    def of(cls, q: QualityScore) -> QualityView:
        d = q.as_dict()
        return cls(
            **{
                k: d[k] for k in ("reliability", "efficiency", "maturity", "reusability", "overall")
            },
            evidence=d["evidence"],
        )


class WorkflowView(_View):
    """A registered flow (its latest version) with its record."""

    name: str
    version: int
    source: str
    status: str
    confidence: float
    success_count: int
    total_executions: int
    steps: list[str]
    """The tools it calls, in order."""
    inputs: list[str]
    trigger_keywords: list[str]
    created_at: datetime
    last_used: datetime | None
    candidate_id: str | None
    quality: QualityView | None = None

    @classmethod
    def of(cls, meta: FlowMeta, inputs: list[str], quality: QualityScore | None) -> WorkflowView:
        return cls(
            name=meta.name,
            version=meta.version,
            source=meta.source,
            status=meta.status,
            confidence=meta.confidence,
            success_count=meta.success_count,
            total_executions=meta.total_executions,
            steps=list(meta.skill_keys),
            inputs=inputs,
            trigger_keywords=list(meta.trigger_keywords),
            created_at=meta.created_at,
            last_used=meta.last_used,
            candidate_id=meta.candidate_id,
            quality=None if quality is None else QualityView.of(quality),
        )


class Page(_View, Generic[T]):
    """One page of a list: ``next_offset`` is where the next page starts (None: the last)."""

    items: list[T]
    limit: int
    offset: int
    next_offset: int | None


class WorkflowPage(_View):
    """``GET /api/workflows``: the PRD's ``{workflows}``, paginated."""

    workflows: list[WorkflowView]
    limit: int
    offset: int
    next_offset: int | None


class FlowView(_View):
    """One flow version: definition, Mermaid diagram, record, quality."""

    workflow: WorkflowView
    definition: dict[str, Any]
    mermaid: str


class FindMatchView(_View):
    """A flow that fits a task text, and why."""

    name: str
    version: int
    source: str
    status: str
    confidence: float
    score: float
    text_score: float
    tool_score: float
    matched_keywords: list[str]
    missing_tools: list[str]
    why: str
    quality: QualityView | None

    @classmethod
    def of(cls, m: WorkflowMatch, quality: QualityScore | None) -> FindMatchView:
        return cls(
            name=m.name,
            version=m.version,
            source=m.source,
            status=m.status,
            confidence=m.confidence,
            score=m.score,
            text_score=m.text_score,
            tool_score=m.tool_score,
            matched_keywords=list(m.matched_keywords),
            missing_tools=list(m.missing_tools),
            why=m.why,
            quality=None if quality is None else QualityView.of(quality),
        )


class _Side(_View):
    runs: int
    model_calls: float | None
    tokens: float | None
    cost: float | None
    latency_ms: float | None

    @classmethod
    def of(cls, s: SideMeasure) -> _Side:
        return cls(
            runs=s.runs,
            model_calls=s.model_calls,
            tokens=s.tokens,
            cost=s.cost,
            latency_ms=s.latency_ms,
        )


class SavingsView(_View):
    """``flows stats``: the record, the measured savings and the quality of one flow."""

    flow: str
    version: int
    source: str
    status: str
    confidence: float
    success_count: int
    total_executions: int
    agent: _Side
    flow_runs: _Side
    completed_runs: int
    saved_per_run: _Side
    saved_total: _Side
    estimated_token_savings: float | None
    quality: QualityView

    @classmethod
    def of(cls, s: FlowSavings, quality: QualityScore) -> SavingsView:
        return cls(
            flow=s.flow,
            version=s.version,
            source=s.source,
            status=s.status,
            confidence=s.confidence,
            success_count=s.success_count,
            total_executions=s.total_executions,
            agent=_Side.of(s.agent),
            flow_runs=_Side.of(s.flow_runs),
            completed_runs=s.completed_runs,
            saved_per_run=_Side.of(s.saved_per_run),
            saved_total=_Side.of(s.saved_total),
            estimated_token_savings=s.estimated_token_savings,
            quality=QualityView.of(quality),
        )


class CandidateView(_View):
    """A flow candidate the detector proposed."""

    id: str
    status: str
    tool_sequence: list[str]
    occurrence_count: int
    match_type: str
    estimated_token_savings: float
    fidelity: float | None
    confidence: float | None
    verification_note: str
    divergences: list[dict[str, Any]]
    proposed_flow: dict[str, Any]
    explanation: str
    created_at: datetime | None

    @classmethod
    def of(cls, c: FlowCandidate) -> CandidateView:
        return cls(
            id=c.id,
            status=c.status,
            tool_sequence=c.tool_sequence,
            occurrence_count=c.occurrence_count,
            match_type=c.match_type,
            estimated_token_savings=c.estimated_token_savings,
            fidelity=c.fidelity,
            confidence=c.confidence,
            verification_note=c.verification_note,
            divergences=c.divergences,
            proposed_flow=c.proposed_flow.model_dump(mode="json"),
            explanation=c.explanation,
            created_at=c.created_at,
        )


class VerifyView(_View):
    """A candidate after replay verification (and promotion, when asked and earned)."""

    candidate: CandidateView
    passes: bool
    promotable: bool
    """Passes over at least ``MIN_HELD_OUT`` held-out occurrences (promoted on ``promote``)."""
    threshold: float
    held_out: int
    free_inputs: list[str]
    promoted: WorkflowView | None


class StepView(_View):
    step: str
    state: str
    attempts: int
    error: str | None


class FlowRunView(_View):
    """A flow run as stored."""

    run_id: str
    flow: str
    version: int
    state: str
    outcome: str | None
    waiting_for_approval: bool
    cancel_requested: bool
    inputs: Any
    outputs: Any
    error: str | None
    started_at: datetime
    ended_at: datetime | None
    steps: list[StepView]

    @classmethod
    def of(cls, r: FlowRunRecord) -> FlowRunView:
        return cls(
            run_id=r.id,
            flow=r.flow_name,
            version=r.flow_version,
            state=r.state,
            outcome=r.outcome,
            waiting_for_approval=r.waiting_for_approval,
            cancel_requested=r.cancel_requested,
            inputs=r.inputs,
            outputs=r.outputs,
            error=r.error,
            started_at=r.started_at,
            ended_at=r.ended_at,
            steps=[
                StepView(step=s.step_key, state=s.state, attempts=s.attempts, error=s.error)
                for s in r.steps
            ],
        )


class RunOutcomeView(_View):
    """What starting (approving, resuming) a run gave within the wait: its result when it
    ended or waits for approval; else ``status`` ``running`` and its id, to follow with
    ``/api/flow-runs/{id}`` (or ``soloflow_status``)."""

    run_id: str | None
    flow: str
    status: Literal["completed", "failed", "fallback", "cancelled", "waiting", "running"]
    outcome: str | None = None
    """Why it ended so, as recorded (see ``FlowRunResult.outcome``); None while it runs or waits."""
    output: Any = None
    results: dict[str, Any] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    handoff: str | None = None
    interrupt: Any = None
    failed_step: str | None = None
    error: str | None = None
    duration_ms: float | None = None

    @classmethod
    def of(cls, r: FlowRunResult) -> RunOutcomeView:
        return cls(
            run_id=r.run_id,
            flow=r.flow,
            status=r.status,
            outcome=r.outcome,
            output=r.output,
            results=r.results,
            errors=r.errors,
            handoff=r.handoff,
            interrupt=r.interrupt,
            failed_step=r.failed_step,
            error=r.error,
            duration_ms=round(r.duration_ms, 3),
        )


class TransitionView(_View):
    at: datetime
    step: str | None
    from_state: str | None = Field(serialization_alias="from")
    to_state: str = Field(serialization_alias="to")
    detail: str | None

    @classmethod
    def of(cls, m: Transition) -> TransitionView:
        return cls(
            at=m.at, step=m.step_key, from_state=m.from_state, to_state=m.to_state, detail=m.detail
        )


class RunSummaryView(_View):
    """A captured agent run, without its calls."""

    run_id: str
    task: str | None
    success: bool | None
    tool_count: int
    model_call_count: int
    tokens: int | None
    cost: float | None
    created_at: datetime
    routed_flow: str | None
    """The flow that answered the request in the agent's place (no model call); null when
    the agent answered it."""

    @classmethod
    def of(cls, r: RunSummary) -> RunSummaryView:
        return cls(
            run_id=r.run_id,
            task=r.task,
            success=r.success,
            tool_count=r.tool_count,
            model_call_count=r.model_call_count,
            tokens=r.tokens,
            cost=r.cost,
            created_at=r.created_at,
            routed_flow=r.routed_flow,
        )


class TaskRunView(_View):
    """A captured agent run with its tool calls and model calls."""

    run_id: str
    task: str | None
    success: bool | None
    tokens: int | None
    cost: float | None
    started_at: datetime | None
    ended_at: datetime | None
    tool_calls: list[dict[str, Any]]
    model_calls: list[dict[str, Any]]

    @classmethod
    def of(cls, r: TaskRun) -> TaskRunView:
        return cls(
            run_id=r.run_id,
            task=r.task,
            success=r.success,
            tokens=r.tokens,
            cost=r.cost,
            started_at=r.started_at,
            ended_at=r.ended_at,
            tool_calls=[c.model_dump(mode="json") for c in r.tool_calls],
            model_calls=[m.model_dump(mode="json") for m in r.model_calls],
        )


class TraceSpan(_View):
    """One call of a captured run, in the order the agent made it."""

    kind: Literal["model", "tool"]
    index: int
    """Position among the run's calls of its kind."""
    turn: int
    """The model turn it belongs to (a tool call: the turn that asked for it)."""
    name: str | None
    duration_ms: float | None
    tokens: int | None = None
    args: dict[str, Any] | None = None
    error: bool | None = None


class TraceView(_View):
    """A captured run as a trace: model turns, each followed by the tool calls it asked for.
    The order is rebuilt from each model call's ``tool_calls_requested``; tool calls no turn
    accounts for come last."""

    run_id: str
    task: str | None
    spans: list[TraceSpan]
    total_tokens: int
    model_ms: float
    tool_ms: float

    @classmethod
    def of(cls, run: TaskRun) -> TraceView:
        """A captured run's calls in the order the agent made them."""
        spans: list[TraceSpan] = []
        tools = list(run.tool_calls)
        t = 0
        for i, m in enumerate(run.model_calls):
            spans.append(
                TraceSpan(
                    kind="model",
                    index=i,
                    turn=i,
                    name=m.model,
                    duration_ms=m.duration_ms,
                    tokens=m.total_tokens,
                )
            )
            for _ in range(m.tool_calls_requested):
                if t < len(tools):
                    c = tools[t]
                    spans.append(
                        TraceSpan(
                            kind="tool",
                            index=t,
                            turn=i,
                            name=c.name,
                            duration_ms=c.duration_ms,
                            args=c.args,
                            error=c.error,
                        )
                    )
                    t += 1
        for k in range(t, len(tools)):
            c = tools[k]
            spans.append(
                TraceSpan(
                    kind="tool",
                    index=k,
                    turn=len(run.model_calls),
                    name=c.name,
                    duration_ms=c.duration_ms,
                    args=c.args,
                    error=c.error,
                )
            )
        return cls(
            run_id=run.run_id,
            task=run.task,
            spans=spans,
            total_tokens=sum(m.total_tokens for m in run.model_calls),
            model_ms=round(sum(m.duration_ms or 0.0 for m in run.model_calls), 3),
            tool_ms=round(sum(c.duration_ms or 0.0 for c in run.tool_calls), 3),
        )


class TokenView(_View):
    """An API token (never its secret; ``token`` only in the answer that created it)."""

    token_id: str
    user_id: str
    agent_id: str
    scope: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None
    token: str | None = None

    @classmethod
    def of(cls, t: ApiToken, secret: str | None = None) -> TokenView:
        return cls(
            token_id=t.token_id,
            user_id=t.user_id,
            agent_id=t.agent_id,
            scope=t.scope,
            label=t.label,
            created_at=t.created_at,
            revoked_at=t.revoked_at,
            token=secret,
        )
