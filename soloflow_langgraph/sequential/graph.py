"""The sequential workflow as a LangGraph ``StateGraph``.

::

    contract_writer → create_summary → auditor ⇄ code_generator      (inner loop)
                                         │ compliance ≥ 0.8
                                         ▼
                                     evaluator ─ pass → pr_orchestrator → END (success)
                                         │ fail
                                         ▼
                          refiner → reload_summary → auditor           (outer loop)

Every node is one phase: it runs one agent (or one summarisation), appends a
:class:`~soloflow_langgraph.sequential.models.PhaseRecord`, adds its tokens and cost, and
decides the exit when one is due (``status``/``reason``); the routers only read that state.
The graph keeps JSON-ready values only (no custom classes), so any checkpointer stores them
as they are.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from soloflow_core.errors import PluginError
from soloflow_core.plugins import call_hook
from soloflow_langgraph.sequential.agents import RoleAgent
from soloflow_langgraph.sequential.budget import TokenBudget, Usage, UsageMeter
from soloflow_langgraph.sequential.hookspecs import add_sequential_hookspecs
from soloflow_langgraph.sequential.models import (
    COMPLIANCE_THRESHOLD,
    PhaseRecord,
    RoleInput,
    TokenPrice,
    WorkflowState,
)
from soloflow_langgraph.sequential.progress import ProgressTracker
from soloflow_langgraph.sequential.summarize import summarize_context
from soloflow_langgraph.sequential.tokens import count_tokens
from soloflow_langgraph.sequential.trace import current_phase, traced_phase

if TYPE_CHECKING:
    import pluggy
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import Checkpointer

__all__ = ["SequentialSettings", "build_sequential_graph", "recursion_limit"]

log = logging.getLogger(__name__)


class GraphState(TypedDict, total=False):
    """The graph's channels: :class:`WorkflowState` as JSON-ready values."""

    task_description: str
    workspace: str
    outer_iteration: int
    inner_iteration: int
    max_outer: int
    max_inner: int
    contracts_summary: str
    compliance_score: float
    last_violations: list[str]
    evaluator_satisfied: bool
    evaluator_feedback: str
    inner_loop_active: bool
    phase_history: Annotated[list[dict[str, Any]], operator.add]
    contracts: str
    scores: list[float]
    total_tokens: int
    total_cost: float
    token_budget: int | None
    budget_warned: bool
    status: str
    reason: str
    pr_url: str
    execution_time_seconds: float


@dataclass(frozen=True, slots=True)
class SequentialSettings:
    """How the graph behaves; the limits (``max_outer``...) travel in the state instead."""

    compliance_threshold: float = COMPLIANCE_THRESHOLD
    contracts_token_budget: int = 10_000
    """The contracts summary's size (the document: 100K → 10K)."""
    violations_token_budget: int = 5_000
    """The violations summary's size for the code generator (20K → 5K)."""
    feedback_token_budget: int = 5_000
    """The evaluator feedback's size for the refiner."""
    warn_fraction: float = 0.8
    """``soloflow_token_budget_warning`` fires at this fraction of the token budget."""
    prices: Mapping[str, TokenPrice] = field(default_factory=dict)
    """Token prices by model name (``ls_model_name``)."""
    default_price: TokenPrice = TokenPrice()
    """The price of a model not in ``prices``."""


def recursion_limit(max_outer: int, max_inner: int) -> int:
    """Graph steps the longest workflow can take, with room to spare."""
    per_outer = 2 * max_inner + 1 + 3  # audits and fixes, evaluator, refiner, reload
    return 2 + max_outer * per_outer + 10


def _state(values: Mapping[str, Any]) -> WorkflowState:
    return WorkflowState.model_validate(dict(values))


class _Phases:
    """The node functions, sharing the agents, the plugin manager and the settings."""

    def __init__(
        self,
        agents: Mapping[str, RoleAgent],
        pm: pluggy.PluginManager,
        settings: SequentialSettings,
    ) -> None:
        self.agents = agents
        self.pm = pm
        self.settings = settings

    # ------------------------------------------------------------------ shared steps

    def _meter(self) -> UsageMeter:
        return UsageMeter(self.settings.prices, self.settings.default_price, calls=current_phase())

    def _input(self, role: str, s: GraphState, **fields: Any) -> RoleInput:
        return RoleInput(
            role=role,  # type: ignore[arg-type]
            task_description=s["task_description"],
            workspace=s["workspace"],
            outer_iteration=s.get("outer_iteration", 0),
            max_outer=s["max_outer"],
            inner_iteration=s.get("inner_iteration", 0),
            max_inner=s["max_inner"],
            **fields,
        )

    def _summarize(
        self, text: str, *, budget: int, purpose: str, meter: UsageMeter, config: RunnableConfig
    ) -> str:
        return summarize_context(
            self.pm, text, token_budget=budget, purpose=purpose, meter=meter, config=config
        )

    def _finish(
        self,
        s: GraphState,
        agent: str,
        *,
        usage: Usage,
        started: float,
        summary: str,
        update: dict[str, Any],
        score: float | None = None,
    ) -> dict[str, Any]:
        """The node's update: its decision, the phase record, totals, and the budget check."""
        duration = time.perf_counter() - started
        record = PhaseRecord(
            agent=agent,
            timestamp=datetime.now(UTC),
            tokens_used=usage.total_tokens,
            result_summary=summary,
            iteration_context={
                "outer": update.get("outer_iteration", s.get("outer_iteration", 0)),
                "inner": update.get("inner_iteration", s.get("inner_iteration", 0)),
            },
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=usage.cost,
            duration_seconds=duration,
            compliance_score=score,
        )
        update = {
            **update,
            "phase_history": [record.model_dump(mode="json")],
            "total_tokens": s.get("total_tokens", 0) + usage.total_tokens,
            "total_cost": s.get("total_cost", 0.0) + usage.cost,
            "execution_time_seconds": s.get("execution_time_seconds", 0.0) + duration,
        }
        self._check_budget(s, update)
        return update

    def _check_budget(self, s: GraphState, update: dict[str, Any]) -> None:
        budget = TokenBudget(s.get("token_budget"), self.settings.warn_fraction)
        used = update["total_tokens"]
        if budget.should_warn(used) and not s.get("budget_warned", False):
            update["budget_warned"] = True
            after = {
                **s,
                **update,
                "phase_history": [*s.get("phase_history", []), *update["phase_history"]],
            }
            try:
                call_hook(
                    self.pm,
                    "soloflow_token_budget_warning",
                    used=used,
                    budget=budget.limit,
                    state=_state(after),
                )
            except PluginError:  # strict mode: a plugin's failure is fatal
                raise
            except Exception:  # a warning must never stop the work
                log.exception("a soloflow_token_budget_warning plugin failed")
        if budget.exceeded(used) and update.get("status", s.get("status")) == "running":
            update["status"], update["reason"] = "failed", "budget_exceeded"

    # ------------------------------------------------------------------ the phases

    def contract_writer(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        result = self.agents["contract_writer"].run(
            self._input("contract_writer", s), meter, config
        )
        summary = f"contracts written: {count_tokens(result.contracts)} tokens"
        return self._finish(
            s,
            "contract_writer",
            usage=meter.usage(),
            started=started,
            summary=summary,
            update={"contracts": result.contracts},
        )

    def _load_summary(self, s: GraphState, config: RunnableConfig, agent: str) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        contracts = s.get("contracts", "")
        summary_text = self._summarize(
            contracts,
            budget=self.settings.contracts_token_budget,
            purpose="contracts",
            meter=meter,
            config=config,
        )
        outer = s.get("outer_iteration", 0) + 1
        update = {
            "contracts_summary": summary_text,
            "outer_iteration": outer,
            "inner_iteration": 0,
            "scores": [],
            "compliance_score": 0.0,
            "last_violations": [],
            "evaluator_satisfied": False,
            "inner_loop_active": True,
        }
        line = (
            f"contracts {count_tokens(contracts)} → {count_tokens(summary_text)} tokens; "
            f"outer iteration {outer}"
        )
        return self._finish(
            s, agent, usage=meter.usage(), started=started, summary=line, update=update
        )

    def create_summary(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        return self._load_summary(s, config, "create_summary")

    def reload_summary(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        return self._load_summary(s, config, "reload_summary")

    def auditor(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        previous = s.get("scores") or []
        inp = self._input(
            "auditor",
            s,
            contracts_summary=s.get("contracts_summary", ""),
            compliance_score=previous[-1] if previous else None,
        )
        result = self.agents["auditor"].run(inp, meter, config)
        tracker = ProgressTracker(previous)
        tracker.record(result.compliance_score)
        update: dict[str, Any] = {
            "compliance_score": result.compliance_score,
            "last_violations": list(result.violations),
            "scores": tracker.scores,
        }
        if result.compliance_score >= self.settings.compliance_threshold:
            update["inner_loop_active"] = False
        elif tracker.is_stuck():
            update.update(status="failed", reason="stagnated", inner_loop_active=False)
        elif s.get("inner_iteration", 0) >= s["max_inner"]:
            update.update(status="failed", reason="max_inner_reached", inner_loop_active=False)
        line = f"compliance {result.compliance_score:.2f}, {len(result.violations)} violation(s)"
        return self._finish(
            s,
            "auditor",
            usage=meter.usage(),
            started=started,
            summary=line,
            update=update,
            score=result.compliance_score,
        )

    def code_generator(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        violations = "\n".join(f"- {v}" for v in s.get("last_violations") or [])
        inp = self._input(
            "code_generator",
            s,
            contracts_summary=s.get("contracts_summary", ""),
            compliance_score=s.get("compliance_score"),
            violations_summary=self._summarize(
                violations,
                budget=self.settings.violations_token_budget,
                purpose="violations",
                meter=meter,
                config=config,
            ),
        )
        result = self.agents["code_generator"].run(inp, meter, config)
        inner = s.get("inner_iteration", 0) + 1
        line = result.summary or f"{len(result.files_changed)} file(s) changed"
        return self._finish(
            s,
            "code_generator",
            usage=meter.usage(),
            started=started,
            summary=line,
            update={"inner_iteration": inner},
        )

    def evaluator(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        inp = self._input(
            "evaluator",
            s,
            contracts_summary=s.get("contracts_summary", ""),
            compliance_score=s.get("compliance_score"),
        )
        result = self.agents["evaluator"].run(inp, meter, config)
        update: dict[str, Any] = {
            "evaluator_satisfied": result.satisfied,
            "evaluator_feedback": result.feedback,
        }
        if not result.satisfied and s.get("outer_iteration", 0) >= s["max_outer"]:
            update.update(status="failed", reason="max_outer_reached")
        line = "satisfied" if result.satisfied else f"not satisfied: {result.feedback[:120]}"
        return self._finish(
            s, "evaluator", usage=meter.usage(), started=started, summary=line, update=update
        )

    def refiner(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        inp = self._input(
            "refiner",
            s,
            contracts_summary=s.get("contracts_summary", ""),
            compliance_score=s.get("compliance_score"),
            evaluator_feedback=self._summarize(
                s.get("evaluator_feedback", ""),
                budget=self.settings.feedback_token_budget,
                purpose="feedback",
                meter=meter,
                config=config,
            ),
        )
        result = self.agents["refiner"].run(inp, meter, config)
        line = result.notes or f"contracts revised: {count_tokens(result.contracts)} tokens"
        return self._finish(
            s,
            "refiner",
            usage=meter.usage(),
            started=started,
            summary=line,
            update={"contracts": result.contracts},
        )

    def pr_orchestrator(self, s: GraphState, config: RunnableConfig) -> dict[str, Any]:
        started, meter = time.perf_counter(), self._meter()
        inp = self._input(
            "pr_orchestrator",
            s,
            contracts_summary=s.get("contracts_summary", ""),
            compliance_score=s.get("compliance_score"),
        )
        result = self.agents["pr_orchestrator"].run(inp, meter, config)
        update = {"pr_url": result.pr_url, "status": "success", "reason": "completed"}
        return self._finish(
            s,
            "pr_orchestrator",
            usage=meter.usage(),
            started=started,
            summary=result.summary or result.pr_url or "pull request opened",
            update=update,
        )

    # ------------------------------------------------------------------ routing

    def after_audit(self, s: GraphState) -> str:
        if s.get("status", "running") != "running":
            return END
        if s.get("compliance_score", 0.0) >= self.settings.compliance_threshold:
            return "evaluator"
        return "code_generator"

    def after_evaluation(self, s: GraphState) -> str:
        if s.get("status", "running") != "running":
            return END
        return "pr_orchestrator" if s.get("evaluator_satisfied") else "refiner"


def _then(target: str) -> Any:
    """A router to ``target`` unless the phase ended the workflow (the budget)."""

    def route(s: GraphState) -> str:
        return target if s.get("status", "running") == "running" else END

    route.__name__ = f"to_{target}"
    return route


def build_sequential_graph(
    agents: Mapping[str, RoleAgent],
    pm: pluggy.PluginManager,
    *,
    settings: SequentialSettings | None = None,
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph:
    """The compiled workflow graph. The caller picks the checkpointer (None: no durability).

    Args:
        agents: every role's adapted agent (:func:`~soloflow_langgraph.sequential.agents.resolve_agents`).
        pm: the plugin manager whose hooks summarise and warn.
        settings: summary sizes, prices, thresholds.
        checkpointer: e.g. ``SqliteSaver``; needed to resume an interrupted workflow.

    Invoke it with a ``WorkflowState(...).model_dump(mode="json")`` and a ``thread_id``.
    """
    phases = _Phases(agents, add_sequential_hookspecs(pm), settings or SequentialSettings())
    graph = StateGraph(GraphState)
    for name in (
        "contract_writer",
        "create_summary",
        "auditor",
        "code_generator",
        "evaluator",
        "refiner",
        "reload_summary",
        "pr_orchestrator",
    ):
        graph.add_node(name, traced_phase(name, getattr(phases, name)))
    graph.add_edge(START, "contract_writer")
    graph.add_conditional_edges("contract_writer", _then("create_summary"), ["create_summary", END])
    graph.add_conditional_edges("create_summary", _then("auditor"), ["auditor", END])
    graph.add_conditional_edges("auditor", phases.after_audit, ["evaluator", "code_generator", END])
    graph.add_conditional_edges("code_generator", _then("auditor"), ["auditor", END])
    graph.add_conditional_edges(
        "evaluator", phases.after_evaluation, ["pr_orchestrator", "refiner", END]
    )
    graph.add_conditional_edges("refiner", _then("reload_summary"), ["reload_summary", END])
    graph.add_conditional_edges("reload_summary", _then("auditor"), ["auditor", END])
    graph.add_edge("pr_orchestrator", END)
    return graph.compile(checkpointer=checkpointer, name="soloflow_sequential_workflow")
