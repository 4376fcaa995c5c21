"""The REST API's routes, each one call of the service for the caller's principal.

No ``from __future__ import annotations`` here: FastAPI reads each route's annotations at
run time, and ``Caller`` is local to :func:`build_router`.
"""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from soloflow_core.learning.outcomes import DEFAULT_PROMOTION_THRESHOLD
from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE
from soloflow_core.models import FlowDefinition
from soloflow_core.models.names import Name
from soloflow_core.store.tokens import TokenScope
from soloflow_langgraph.server.api import ERRORS, NO_NUL, check_named
from soloflow_langgraph.server.driver import DEFAULT_WAIT, MAX_WAIT
from soloflow_langgraph.server.principal import Principal
from soloflow_langgraph.server.service import MAX_LIMIT, SoloFlowService
from soloflow_langgraph.server.views import (
    CandidateView,
    FindMatchView,
    FlowRunView,
    FlowView,
    Page,
    RunOutcomeView,
    RunSummaryView,
    SavingsView,
    TaskRunView,
    TokenView,
    TraceView,
    TransitionView,
    VerifyView,
    WorkflowPage,
    WorkflowView,
)

__all__ = ["build_router"]

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many items")]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1, description="Skip this many items")]
Wait = Annotated[
    float,
    Field(
        ge=0.0,
        le=MAX_WAIT,
        description="Seconds to wait for the run before answering with its id and status 'running'",
    ),
]
FlowName = Annotated[
    Name, Path(min_length=1, max_length=512, description="The flow's name (URL-encoded)")
]
RunId = Annotated[Name, Path(min_length=1, max_length=64, description="A flow run id (frun_…)")]
CandidateId = Annotated[Name, Path(max_length=64, description="A candidate id (cand_…)")]
"""Names and ids in paths: no control character (a clear 422 naming it and its position)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SubmitWorkflowBody(_Body):
    """The PRD's ``{userId, agentId, workflow}``: a flow definition (docs/flows.md)."""

    user_id: Name | None = Field(
        default=None,
        validation_alias=AliasChoices("userId", "user_id"),
        description="When given, must be the token's user (else 401)",
    )
    agent_id: Name | None = Field(
        default=None,
        validation_alias=AliasChoices("agentId", "agent_id"),
        description="When given, must be the token's agent (else 401)",
    )
    workflow: FlowDefinition = Field(description="The flow definition (docs/flows.md)")
    trigger_keywords: list[str] | None = Field(
        default=None, validation_alias=AliasChoices("triggerKeywords", "trigger_keywords")
    )


class SubmitResult(_Body):
    success: Literal[True] = True
    workflow: WorkflowView


class RunBody(_Body):
    inputs: dict[str, Any] = Field(default_factory=dict, description="The flow's inputs")
    task: str | None = Field(
        default=None,
        max_length=1_000_000,
        description="A task text: missing inputs are recovered from it",
    )
    wait_seconds: Wait = DEFAULT_WAIT


class DecideBody(_Body):
    comment: str | None = Field(default=None, max_length=10_000)
    wait_seconds: Wait = DEFAULT_WAIT


class ResumeBody(_Body):
    force: bool = Field(default=False, description="Even if the process that ran it seems alive")
    wait_seconds: Wait = DEFAULT_WAIT


class VerifyBody(_Body):
    threshold: float = Field(default=DEFAULT_PROMOTION_THRESHOLD, ge=0.0, le=1.0)
    promote: bool = Field(
        default=False, description="Register the flow when its fidelity reaches the threshold"
    )
    side_effects: dict[str, bool] = Field(
        default_factory=dict,
        max_length=1000,
        description="Tool → whether it changes the world (false: read-only), over what the "
        "served tools' metadata says; a tool named in neither: its recorded calls' metadata",
    )


class TokenBody(_Body):
    scope: TokenScope = "read"
    label: str | None = Field(default=None, max_length=255)


def _outcome(result: RunOutcomeView, response: Response) -> RunOutcomeView:
    response.status_code = 202 if result.status == "running" else 200
    return result


_RUN_ANSWERS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    202: {
        "model": RunOutcomeView,
        "description": "Still running after wait_seconds: follow its run_id",
    },
}


def build_router(service: SoloFlowService, caller: Callable[..., Any]) -> APIRouter:
    """Every ``/api`` route over ``service``; ``caller`` is the dependency giving the principal."""
    r = APIRouter(responses=ERRORS)
    Caller = Annotated[Principal, Depends(caller)]

    # ------------------------------------------------------------------ workflows (the PRD's)

    @r.get("/workflows", response_model=WorkflowPage, tags=["workflows"])
    def list_workflows(
        p: Caller,
        limit: Limit = 50,
        offset: Offset = 0,
        quality: Annotated[bool, Query(description="Compute each flow's quality score")] = True,
    ) -> WorkflowPage:
        """The namespace's flows (latest version of each, by name), with record and quality."""
        return service.list_workflows(p, limit=limit, offset=offset, quality=quality)

    @r.post("/workflows", response_model=SubmitResult, status_code=201, tags=["workflows"])
    def submit_workflow(
        p: Caller, request: Request, body: Annotated[SubmitWorkflowBody, Body()]
    ) -> SubmitResult:
        """Submit a user workflow: validated like `soloflow flows submit` (every problem with its
        field path), registered as the next version of its name, source user-submitted."""
        check_named(p, body.user_id, body.agent_id)
        request.state.flow_prefix = "body.workflow"
        request.state.submitted_steps = [{"id": s.id} for s in body.workflow.steps]
        return SubmitResult(
            workflow=service.submit_workflow(
                p, body.workflow, trigger_keywords=body.trigger_keywords
            )
        )

    # ------------------------------------------------------------------ flows

    @r.get("/flows", response_model=list[FindMatchView], tags=["flows"])
    def find_flows(
        p: Caller,
        text: Annotated[
            str,
            Query(
                min_length=1,
                max_length=1_000_000,
                pattern=NO_NUL,
                description="The task (or context)",
            ),
        ],
        tools: Annotated[
            str | None, Query(pattern=NO_NUL, description="Comma-separated tools the agent has")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=50)] = 5,
        min_confidence: Annotated[float, Query(ge=0.0, le=1.0)] = DEFAULT_MIN_CONFIDENCE,
    ) -> list[FindMatchView]:
        """The flows that fit a task text, best first (text, tools, confidence; ties by quality)."""
        available = None if tools is None else [t.strip() for t in tools.split(",") if t.strip()]
        return service.find_flows(
            p, text, tools=available, limit=limit, min_confidence=min_confidence
        )

    @r.get("/flows/{name:path}/versions", response_model=Page[WorkflowView], tags=["flows"])
    def flow_versions(
        p: Caller, name: FlowName, limit: Limit = 50, offset: Offset = 0
    ) -> Page[WorkflowView]:
        """Every stored version of the flow, newest first, each with its record."""
        return service.flow_versions(p, name, limit=limit, offset=offset)

    @r.get("/flows/{name:path}/stats", response_model=SavingsView, tags=["flows"])
    def flow_stats(p: Caller, name: FlowName) -> SavingsView:
        """The flow's record, its measured savings and its quality score."""
        return service.flow_stats(p, name)

    @r.post(
        "/flows/{name:path}/runs",
        response_model=RunOutcomeView,
        tags=["flow runs"],
        responses=_RUN_ANSWERS,
    )
    def start_run(
        p: Caller,
        name: FlowName,
        request: Request,
        response: Response,
        body: Annotated[RunBody, Body()] = RunBody(),  # noqa: B008
    ) -> RunOutcomeView:
        """Run the flow's latest version: its result (200), or its run id while it still runs (202)."""
        request.state.flow_prefix = "body"
        return _outcome(
            service.start_run(p, name, body.inputs, task=body.task, wait=body.wait_seconds),
            response,
        )

    @r.get("/flows/{name:path}", response_model=FlowView, tags=["flows"])
    def show_flow(
        p: Caller, name: FlowName, version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None
    ) -> FlowView:
        """A flow version (default the latest): definition, Mermaid diagram, record, quality."""
        return service.show_flow(p, name, version)

    # ------------------------------------------------------------------ candidates

    @r.get("/candidates", response_model=Page[CandidateView], tags=["candidates"])
    def list_candidates(
        p: Caller,
        limit: Limit = 50,
        offset: Offset = 0,
        status: Literal["pending", "approved", "rejected"] | None = None,
    ) -> Page[CandidateView]:
        """The namespace's flow candidates, largest estimated savings first."""
        return service.list_candidates(p, status=status, limit=limit, offset=offset)

    @r.get("/candidates/{candidate_id}", response_model=CandidateView, tags=["candidates"])
    def show_candidate(p: Caller, candidate_id: CandidateId) -> CandidateView:
        return service.candidate(p, candidate_id)

    @r.post("/candidates/{candidate_id}/verify", response_model=VerifyView, tags=["candidates"])
    def verify_candidate(
        p: Caller,
        candidate_id: CandidateId,
        body: Annotated[VerifyBody, Body()] = VerifyBody(),  # noqa: B008
    ) -> VerifyView:
        """Replay the candidate's flow against held-out runs; promote it when asked and earned."""
        return service.verify_candidate(
            p,
            candidate_id,
            threshold=body.threshold,
            promote=body.promote,
            side_effects=body.side_effects,
        )

    @r.post("/candidates/{candidate_id}/approve", response_model=WorkflowView, tags=["candidates"])
    def approve_candidate(p: Caller, candidate_id: CandidateId) -> WorkflowView:
        """Register the candidate's flow."""
        return service.approve_candidate(p, candidate_id)

    @r.post("/candidates/{candidate_id}/reject", response_model=CandidateView, tags=["candidates"])
    def reject_candidate(p: Caller, candidate_id: CandidateId) -> CandidateView:
        """Reject the candidate: its sequence is not proposed again."""
        return service.reject_candidate(p, candidate_id)

    # ------------------------------------------------------------------ flow runs

    @r.get("/flow-runs", response_model=Page[FlowRunView], tags=["flow runs"])
    def list_flow_runs(
        p: Caller,
        limit: Limit = 50,
        offset: Offset = 0,
        flow: Annotated[Name | None, Query(max_length=512)] = None,
        state: Literal[
            "draft", "active", "running", "interrupted", "completed", "failed", "cancelled"
        ]
        | None = None,
    ) -> Page[FlowRunView]:
        """The namespace's flow runs, newest first."""
        return service.list_flow_runs(p, flow=flow, state=state, limit=limit, offset=offset)

    @r.get("/flow-runs/{run_id}", response_model=FlowRunView, tags=["flow runs"])
    def run_status(p: Caller, run_id: RunId) -> FlowRunView:
        """A flow run's state, outcome and steps."""
        return service.run_status(p, run_id)

    @r.get(
        "/flow-runs/{run_id}/history",
        response_model=Page[TransitionView],
        tags=["flow runs"],
        response_model_by_alias=True,
    )
    def run_history(
        p: Caller,
        run_id: RunId,
        limit: Annotated[int, Query(ge=1, le=5000)] = 500,
        offset: Offset = 0,
    ) -> Page[TransitionView]:
        """Every recorded state transition of the run and its steps, oldest first."""
        return service.run_history(p, run_id, limit=limit, offset=offset)

    @r.post(
        "/flow-runs/{run_id}/approve",
        response_model=RunOutcomeView,
        tags=["flow runs"],
        responses=_RUN_ANSWERS,
    )
    def approve_run(
        p: Caller,
        run_id: RunId,
        response: Response,
        body: Annotated[DecideBody, Body()] = DecideBody(),  # noqa: B008
    ) -> RunOutcomeView:
        """Let a run waiting for approval go on (driven by this server)."""
        return _outcome(
            service.decide_run(
                p, run_id, approved=True, comment=body.comment, wait=body.wait_seconds
            ),
            response,
        )

    @r.post("/flow-runs/{run_id}/reject", response_model=RunOutcomeView, tags=["flow runs"])
    def reject_run(
        p: Caller,
        run_id: RunId,
        body: Annotated[DecideBody, Body()] = DecideBody(),  # noqa: B008
    ) -> RunOutcomeView:
        """Reject a run waiting for approval: it ends cancelled, outcome rejected."""
        return service.decide_run(
            p, run_id, approved=False, comment=body.comment, wait=body.wait_seconds
        )

    @r.post("/flow-runs/{run_id}/cancel", response_model=FlowRunView, tags=["flow runs"])
    def cancel_run(p: Caller, run_id: RunId) -> FlowRunView:
        """Cancel a run: a running one stops before its next step."""
        return service.cancel_run(p, run_id)

    @r.post(
        "/flow-runs/{run_id}/resume",
        response_model=RunOutcomeView,
        tags=["flow runs"],
        responses=_RUN_ANSWERS,
    )
    def resume_run(
        p: Caller,
        run_id: RunId,
        response: Response,
        body: Annotated[ResumeBody, Body()] = ResumeBody(),  # noqa: B008
    ) -> RunOutcomeView:
        """Carry on a run whose process ended; completed steps are not called again."""
        return _outcome(
            service.resume_run(p, run_id, force=body.force, wait=body.wait_seconds), response
        )

    # ------------------------------------------------------------------ captured runs

    @r.get("/runs", response_model=Page[RunSummaryView], tags=["runs"])
    def list_runs(p: Caller, limit: Limit = 50, offset: Offset = 0) -> Page[RunSummaryView]:
        """Captured agent runs, newest first."""
        return service.list_runs(p, limit=limit, offset=offset)

    @r.get("/runs/{run_id}", response_model=TaskRunView, tags=["runs"])
    def show_run(p: Caller, run_id: Annotated[Name, Path(max_length=512)]) -> TaskRunView:
        """A captured run with its tool calls and model calls."""
        return service.task_run(p, run_id)

    @r.get("/runs/{run_id}/trace", response_model=TraceView, tags=["runs"])
    def trace_run(p: Caller, run_id: Annotated[Name, Path(max_length=512)]) -> TraceView:
        """A captured run as a trace: model turns, each followed by the tool calls it asked for."""
        return service.trace(p, run_id)

    # ------------------------------------------------------------------ tokens (admin)

    @r.get("/tokens", response_model=Page[TokenView], tags=["tokens"])
    def list_tokens(p: Caller, limit: Limit = 50, offset: Offset = 0) -> Page[TokenView]:
        """The namespace's API tokens, oldest first (never their secrets). Needs an admin token."""
        return service.list_tokens(p, limit=limit, offset=offset)

    @r.post("/tokens", response_model=TokenView, status_code=201, tags=["tokens"])
    def create_token(p: Caller, body: Annotated[TokenBody, Body()] = TokenBody()) -> TokenView:  # noqa: B008
        """A new token for the namespace; the token is in this answer only. Needs an admin token."""
        return service.create_token(p, scope=body.scope, label=body.label)

    @r.post("/tokens/{token_id}/revoke", response_model=TokenView, tags=["tokens"])
    def revoke_token(p: Caller, token_id: Annotated[Name, Path(max_length=32)]) -> TokenView:
        """Revoke one of the namespace's tokens. Needs an admin token."""
        return service.revoke_token(p, token_id)

    return r
