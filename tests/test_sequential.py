"""The sequential workflow: every exit path on real LangGraph with a real SqliteSaver.

Agents are plain functions (or real chat-model agents driven by ``ScriptedChatModel``);
the crash test kills a real subprocess with SIGKILL and resumes it in a new one.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
import pytest
from genai_prices import Usage as GenaiUsage
from genai_prices import calc_price
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import JsonOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from typer.testing import CliRunner

import soloflow_langgraph.sequential.tokens as tokens_module
from soloflow_core import (
    AgentError,
    AgentOutputError,
    ConfigError,
    MissingAgentsError,
    PluginError,
    SequentialWorkflowError,
    hookimpl,
)
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.tracing import Span, build_tree, configure_tracing, trace_id_for
from soloflow_langgraph.cli import app
from soloflow_langgraph.cli.sequential_cmd import PhaseView
from soloflow_langgraph.sequential import (
    AuditResult,
    ChatModelAgent,
    CodeResult,
    ContractResult,
    EvaluationResult,
    PhaseRecord,
    ProgressTracker,
    PullRequestResult,
    RefinementResult,
    RoleInput,
    SequentialWorkflow,
    TokenBudget,
    TokenPrice,
    WorkflowResult,
    WorkflowState,
    as_role_agent,
    dev_agents,
)
from soloflow_langgraph.sequential.agents import registered_agents
from soloflow_langgraph.sequential.budget import UsageMeter
from soloflow_langgraph.sequential.hookspecs import add_sequential_hookspecs
from soloflow_langgraph.sequential.models import ROLES
from soloflow_langgraph.sequential.tokens import (
    ESTIMATE,
    count_tokens,
    default_token_counter,
    load_tiktoken_offline,
)
from soloflow_langgraph.testing import ScriptedChatModel
from soloflow_plugins.extractive_summarizer import summarize_extractive

# --------------------------------------------------------------------------- fixtures

FEEDBACK = (
    "The integration test for expired sessions fails. The contracts never say what happens "
    "when a token expires. " + "Log excerpt: request rejected with 500 instead of 401. " * 40
)


def contracts_text(sections: int = 6) -> str:
    """Markdown contracts of about 660 estimated tokens: headings, paragraphs, bullets, code."""
    parts = ["# Contracts: todo API", "", "This document fixes what the API must do. " * 3]
    for n in range(1, sections + 1):
        parts += [
            "",
            f"## Section {n}",
            "",
            f"Section {n} opens with its rule. It then explains the rule at length. "
            "It adds detail nobody needs in a summary. And more detail still.",
            "",
            f"- Rule {n}.1 must hold for every request. It is checked by a unit test.",
            f"- Rule {n}.2 must hold for every response. It is checked by an integration test.",
            f"  It continues on a second line {n}. With another sentence.",
            "",
            "```python",
            f"def handler_{n}(request):",
            "    return response",
            "```",
        ]
    return "\n".join(parts)


CONTRACTS = contracts_text()


@dataclass
class Team:
    """Function agents with scripted answers that record what they receive.

    The answers depend only on the input (outer/inner iteration), as a real agent's state
    does on the workspace, so a resumed workflow sees the same story.
    """

    scores: list[list[float]]
    """The auditor's score per outer iteration, by number of fixes (the last repeats)."""
    verdicts: list[bool] = field(default_factory=lambda: [True])
    """The evaluator's verdict per outer iteration (the last repeats)."""
    contracts: str = CONTRACTS
    feedback: str = FEEDBACK
    inputs: dict[str, list[RoleInput]] = field(default_factory=lambda: defaultdict(list))

    def _row(self, table: list[Any], outer: int) -> Any:
        return table[min(max(outer, 1), len(table)) - 1]

    def contract_writer(self, inp: RoleInput) -> ContractResult:
        self.inputs["contract_writer"].append(inp)
        return ContractResult(contracts=self.contracts)

    def auditor(self, inp: RoleInput) -> AuditResult:
        self.inputs["auditor"].append(inp)
        row = self._row(self.scores, inp.outer_iteration)
        score = row[min(inp.inner_iteration, len(row) - 1)]
        return AuditResult(compliance_score=score, violations=[f"rule {inp.inner_iteration}"])

    def code_generator(self, inp: RoleInput) -> CodeResult:
        self.inputs["code_generator"].append(inp)
        return CodeResult(summary=f"fix {inp.inner_iteration + 1}", files_changed=["app.py"])

    def evaluator(self, inp: RoleInput) -> EvaluationResult:
        self.inputs["evaluator"].append(inp)
        ok = self._row(self.verdicts, inp.outer_iteration)
        return EvaluationResult(satisfied=ok, feedback="" if ok else self.feedback)

    def refiner(self, inp: RoleInput) -> RefinementResult:
        self.inputs["refiner"].append(inp)
        revised = "# Refined contracts\n\n- Sessions expire after a day. Expired ones get a 401."
        return RefinementResult(contracts=revised, notes="added session expiry")

    def pr_orchestrator(self, inp: RoleInput) -> PullRequestResult:
        self.inputs["pr_orchestrator"].append(inp)
        return PullRequestResult(pr_url="https://git.example.org/todo/pull/7", summary="todo API")

    def agents(self) -> dict[str, Callable[[RoleInput], Any]]:
        return {role: getattr(self, role) for role in ROLES}

    def calls(self) -> Counter[str]:
        return Counter({role: len(v) for role, v in self.inputs.items()})


def phases(result: WorkflowResult) -> list[str]:
    return [p.agent for p in result.final_state.phase_history]


@pytest.fixture
def run_team(tmp_path: Path, pm: pluggy.PluginManager) -> Iterator[Callable[..., WorkflowResult]]:
    """Run a team in a fresh workspace (SqliteSaver on WORKSPACE/.soloflow/sequential.db)."""
    opened: list[SequentialWorkflow] = []

    def run(team: Team, task: str = "Build a todo API", **options: Any) -> WorkflowResult:
        wf = SequentialWorkflow(tmp_path / "ws", team.agents(), plugin_manager=pm, **options)
        opened.append(wf)
        return wf.run(task)

    try:
        yield run
    finally:
        for wf in opened:
            wf.close()


# --------------------------------------------------------------------------- exit paths


def test_success_on_the_first_outer_iteration(
    run_team: Callable[..., WorkflowResult], tmp_path: Path
) -> None:
    team = Team(scores=[[0.9]], verdicts=[True])
    result = run_team(team)
    assert (result.status, result.reason) == ("success", "completed")
    assert phases(result) == [
        "contract_writer",
        "create_summary",
        "auditor",
        "evaluator",
        "pr_orchestrator",
    ]
    assert result.pr_url == "https://git.example.org/todo/pull/7"
    state = result.final_state
    assert (state.outer_iteration, state.inner_iteration) == (1, 0)
    assert state.compliance_score == 0.9 and state.evaluator_satisfied
    assert not state.inner_loop_active
    assert (tmp_path / "ws" / ".soloflow" / "sequential.db").is_file()
    assert team.calls() == Counter(contract_writer=1, auditor=1, evaluator=1, pr_orchestrator=1)


def test_compliance_reached_after_several_inner_iterations(
    run_team: Callable[..., WorkflowResult],
) -> None:
    team = Team(scores=[[0.3, 0.5, 0.7, 0.85]])
    result = run_team(team)
    assert result.status == "success"
    assert phases(result)[2:] == [
        "auditor",
        "code_generator",
        "auditor",
        "code_generator",
        "auditor",
        "code_generator",
        "auditor",
        "evaluator",
        "pr_orchestrator",
    ]
    audits = [p for p in result.final_state.phase_history if p.agent == "auditor"]
    assert [a.compliance_score for a in audits] == [0.3, 0.5, 0.7, 0.85]
    assert [a.iteration_context for a in audits] == [{"outer": 1, "inner": i} for i in range(4)]
    assert result.final_state.inner_iteration == 3
    assert result.final_state.scores == [0.3, 0.5, 0.7, 0.85]
    # The code generator gets the last audit's score and its violations (summarised).
    fixes = team.inputs["code_generator"]
    assert [f.compliance_score for f in fixes] == [0.3, 0.5, 0.7]
    assert [f.violations_summary for f in fixes] == ["- rule 0", "- rule 1", "- rule 2"]


def test_max_inner_reached(run_team: Callable[..., WorkflowResult]) -> None:
    team = Team(scores=[[0.1, 0.2, 0.3, 0.4]])
    result = run_team(team, max_inner=2)
    assert (result.status, result.reason) == ("failed", "max_inner_reached")
    assert team.calls() == Counter(contract_writer=1, auditor=3, code_generator=2)
    assert phases(result)[-1] == "auditor"
    assert result.final_state.inner_iteration == 2 and not result.final_state.inner_loop_active


def test_stagnation_fails_fast(run_team: Callable[..., WorkflowResult]) -> None:
    team = Team(scores=[[0.5, 0.6, 0.6, 0.55, 0.9]])
    result = run_team(team)
    assert (result.status, result.reason) == ("failed", "stagnated")
    # 0.5 → 0.6 is progress; 0.6 → 0.6 → 0.55 is two runs without: stop, far before max_inner.
    assert result.final_state.scores == [0.5, 0.6, 0.6, 0.55]
    assert team.calls() == Counter(contract_writer=1, auditor=4, code_generator=3)


def test_the_evaluator_fails_and_the_refiner_fixes_it(
    run_team: Callable[..., WorkflowResult],
) -> None:
    team = Team(scores=[[0.5, 0.9], [0.6, 0.95]], verdicts=[False, True])
    result = run_team(team, feedback_token_budget=60)
    assert (result.status, result.reason) == ("success", "completed")
    assert phases(result)[2:] == [
        "auditor",
        "code_generator",
        "auditor",
        "evaluator",
        "refiner",
        "reload_summary",
        "auditor",
        "code_generator",
        "auditor",
        "evaluator",
        "pr_orchestrator",
    ]
    state = result.final_state
    assert state.outer_iteration == 2
    # The refiner received the evaluator's feedback summarised to its budget.
    (refiner_input,) = team.inputs["refiner"]
    assert refiner_input.evaluator_feedback.startswith("The integration test for expired")
    assert count_tokens(refiner_input.evaluator_feedback) <= 60 < count_tokens(FEEDBACK)
    # The next outer iteration works from the reloaded summary of the refined contracts,
    # with a fresh inner loop and progress tracker.
    second_audits = [i for i in team.inputs["auditor"] if i.outer_iteration == 2]
    assert [a.inner_iteration for a in second_audits] == [0, 1]
    assert all(a.contracts_summary.startswith("# Refined contracts") for a in second_audits)
    assert second_audits[0].compliance_score is None
    assert state.scores == [0.6, 0.95]
    assert state.contracts.startswith("# Refined contracts")


def test_max_outer_reached(run_team: Callable[..., WorkflowResult]) -> None:
    team = Team(scores=[[0.9]], verdicts=[False])
    result = run_team(team, max_outer=3)
    assert (result.status, result.reason) == ("failed", "max_outer_reached")
    assert team.calls() == Counter(contract_writer=1, auditor=3, evaluator=3, refiner=2)
    assert phases(result)[-1] == "evaluator"  # no refinement nobody would use
    assert result.final_state.outer_iteration == 3
    assert result.final_state.evaluator_feedback == FEEDBACK


# --------------------------------------------------------------------------- budget


def _usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


ANSWERS = {
    "contract_writer": {"contracts": "# C\n\n- Rule one."},
    "auditor": {"compliance_score": 0.5, "violations": ["rule one"]},
    "code_generator": {"summary": "fixed"},
    "evaluator": {"satisfied": True},
    "refiner": {"contracts": "# C2"},
    "pr_orchestrator": {"pr_url": "https://git.example.org/pr/1"},
}


def metered_team(per_call: tuple[int, int], model_prefix: str = "m") -> dict[str, Any]:
    """Chat-model agents: each call reports ``per_call`` tokens in its usage_metadata."""
    audits = iter([0.3, 0.5, 0.7, 0.9, 0.95, 0.97])

    def script_for(role: str) -> Callable[[list[BaseMessage]], AIMessage]:
        def script(messages: list[BaseMessage]) -> AIMessage:
            answer = dict(ANSWERS[role])
            if role == "auditor":
                answer["compliance_score"] = next(audits)
            return AIMessage(content=json.dumps(answer), usage_metadata=_usage(*per_call))

        return script

    return {
        role: ScriptedChatModel(script=script_for(role), model_name=f"{model_prefix}-{role}")
        for role in ROLES
    }


class BudgetSpy:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, int, WorkflowState]] = []
        self.fail = fail

    @hookimpl
    def soloflow_token_budget_warning(self, used: int, budget: int, state: Any) -> None:
        self.calls.append((used, budget, state))
        if self.fail:
            raise RuntimeError("pager down")


def test_budget_exceeded_is_a_hard_stop(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    spy = BudgetSpy()
    pm.register(spy)
    try:
        with SequentialWorkflow(
            tmp_path, metered_team((800, 200)), plugin_manager=pm, token_budget=4500
        ) as wf:
            result = wf.run("Build a todo API")
    finally:
        pm.unregister(spy)
    assert (result.status, result.reason) == ("failed", "budget_exceeded")
    # 1,000 tokens a call: writer, auditor, fixer, auditor (4,000 ≥ 80%: warned), fixer
    # (5,000 > 4,500: stop). No phase runs after the one that went past the budget.
    assert phases(result) == [
        "contract_writer",
        "create_summary",
        "auditor",
        "code_generator",
        "auditor",
        "code_generator",
    ]
    assert result.total_tokens == 5000
    assert [p.tokens_used for p in result.final_state.phase_history] == [
        1000,
        0,
        1000,
        1000,
        1000,
        1000,
    ]
    assert [(used, budget) for used, budget, _ in spy.calls] == [(4000, 4500)]
    assert result.final_state.budget_warned


def test_soloflow_token_budget_warning(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    failing, spy = BudgetSpy(fail=True), BudgetSpy()
    pm.register(failing)
    pm.register(spy)
    try:
        with SequentialWorkflow(
            tmp_path / "a",
            metered_team((80, 20)),
            plugin_manager=pm,
            token_budget=2000,
            warn_fraction=0.25,
        ) as wf:
            result = wf.run("Build a todo API")
        # No budget: never called.
        with SequentialWorkflow(tmp_path / "b", metered_team((80, 20)), plugin_manager=pm) as wf:
            unlimited = wf.run("Build a todo API")
    finally:
        pm.unregister(failing)
        pm.unregister(spy)
    assert result.status == "success" and unlimited.status == "success"
    # Called once, at the first phase that reached 25% (500 tokens), with the state then;
    # the failing plugin's exception was logged, not raised.
    assert len(spy.calls) == 1 and len(failing.calls) == 1
    used, budget, state = spy.calls[0]
    assert (used, budget) == (500, 2000)
    assert isinstance(state, WorkflowState)
    assert state.total_tokens == 500 and state.phase_history[-1].agent == "code_generator"
    assert result.total_tokens == 1000 < 2000


def test_tokens_and_cost_come_from_usage_metadata(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    prices = {"m-auditor": TokenPrice(input_per_million=3.0, output_per_million=15.0)}
    default = TokenPrice(input_per_million=1.0, output_per_million=2.0)
    with SequentialWorkflow(
        tmp_path,
        metered_team((1_000, 100)),
        plugin_manager=pm,
        prices=prices,
        default_price=default,
    ) as wf:
        result = wf.run("Build a todo API")
    calls = Counter(phases(result))
    assert result.total_tokens == 1_100 * (calls.total() - calls["create_summary"])
    audit = (1_000 * 3.0 + 100 * 15.0) / 1e6
    other = (1_000 * 1.0 + 100 * 2.0) / 1e6
    expected = calls["auditor"] * audit + (calls.total() - calls["auditor"] - 1) * other
    assert result.total_cost == pytest.approx(expected)
    first_audit = next(p for p in result.final_state.phase_history if p.agent == "auditor")
    assert (first_audit.input_tokens, first_audit.output_tokens) == (1_000, 100)
    assert first_audit.cost == pytest.approx(audit)
    assert result.token_efficiency_vs_baseline() == pytest.approx(
        (1 - result.total_tokens / 15_100_000) * 100
    )
    assert result.token_efficiency_vs_baseline(result.total_tokens) == 0.0


def test_a_workflow_is_traced_phase_by_phase_down_to_its_model_calls(
    tmp_path: Path, pm: pluggy.PluginManager, store: Store
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(provider)
    team = metered_team((1_000, 100))
    team["evaluator"] = ScriptedChatModel(  # a model genai-prices knows, named by the response
        responses=[
            AIMessage(
                content=json.dumps({"satisfied": True}),
                usage_metadata=_usage(2_000, 50),
                response_metadata={"model_name": "gpt-4o"},
            )
        ],
        model_name="scripted-eval",
    )
    prices = {"m-auditor": TokenPrice(input_per_million=3.0, output_per_million=15.0)}
    finished: list[str] = []

    class SpanWatcher:
        @hookimpl
        def soloflow_span_finished(self, span: Span) -> None:
            finished.append(span.name)

    watcher = SpanWatcher()
    pm.register(watcher)
    try:
        with SequentialWorkflow(
            tmp_path,
            team,
            plugin_manager=pm,
            prices=prices,
            store=store,
            user_id="wf-user",
            agent_id="wf-agent",
        ) as wf:
            result = wf.run("Build a todo API", thread_id="wf-thread-1")
    finally:
        pm.unregister(watcher)
        configure_tracing(None)
        provider.shutdown()
    assert finished[:3] == [
        "chat m-contract_writer",
        "phase contract_writer",
        "phase create_summary",
    ]
    assert finished[-1] == "invoke_workflow sequential"
    assert result.status == "success"
    spans = store.get_spans("wf-thread-1", user_id="wf-user", agent_id="wf-agent")
    (root,) = build_tree(spans)
    assert (root.span.kind, root.span.name, root.span.status) == (
        "invoke_workflow",
        "invoke_workflow sequential",
        "ok",
    )
    assert root.span.trace_id == trace_id_for("wf-thread-1")
    assert root.span.attributes == {
        "soloflow.workflow.thread_id": "wf-thread-1",
        "soloflow.workflow.resumed": False,
        "soloflow.namespace": "wf-user/wf-agent",
        "soloflow.workflow.status": "success",
        "soloflow.workflow.reason": "completed",
    }
    # One phase span per phase, in order; the model calls of each under it.
    assert [c.span.name for c in root.children] == [f"phase {p}" for p in phases(result)]
    assert all(c.span.kind == "phase" and c.span.status == "ok" for c in root.children)
    for node, record in zip(root.children, result.final_state.phase_history, strict=True):
        chats = [c.span for c in node.children]
        assert all(c.kind == "chat" for c in chats)
        assert (
            sum(c.attributes.get("gen_ai.usage.input_tokens", 0) for c in chats)
            == record.input_tokens
        )
        assert (
            sum(c.attributes.get("gen_ai.usage.output_tokens", 0) for c in chats)
            == record.output_tokens
        )
        assert len(chats) == (0 if record.agent == "create_summary" else 1)
    audits = [c for c in root.children if c.span.name == "phase auditor"]
    assert [a.span.attributes["soloflow.phase.compliance_score"] for a in audits] == [
        p.compliance_score for p in result.final_state.phase_history if p.agent == "auditor"
    ]
    (audit_chat,) = audits[0].children
    assert audit_chat.span.name == "chat m-auditor"
    assert audit_chat.span.attributes["soloflow.cost_usd"] == pytest.approx(
        (1_000 * 3.0 + 100 * 15.0) / 1e6
    )
    (eval_phase,) = [c for c in root.children if c.span.name == "phase evaluator"]
    (eval_chat,) = eval_phase.children
    assert eval_chat.span.attributes["gen_ai.response.model"] == "gpt-4o"
    assert eval_chat.span.attributes["soloflow.cost_usd"] == pytest.approx(
        float(
            calc_price(
                GenaiUsage(input_tokens=2_000, output_tokens=50), model_ref="gpt-4o"
            ).total_price
        )
    )
    (writer,) = [c for c in root.children if c.span.name == "phase contract_writer"]
    assert writer.children[0].span.attributes["soloflow.unpriced"] is True  # unknown model: not 0
    assert root.unpriced > 0 and root.output_tokens == sum(
        p.output_tokens for p in result.final_state.phase_history
    )
    # Exported live, the same tree.
    exported = exporter.get_finished_spans()
    assert len(exported) == len(spans)
    by_id = {s.context.span_id: s for s in exported}
    for s in exported:
        if s.name.startswith("chat "):
            assert by_id[s.parent.span_id].name.startswith("phase ")
        elif s.name.startswith("phase "):
            assert by_id[s.parent.span_id].name == "invoke_workflow sequential"
        else:
            assert s.parent is None and s.name == "invoke_workflow sequential"


def test_a_failed_workflow_ends_its_trace_in_error(
    tmp_path: Path, pm: pluggy.PluginManager, store: Store
) -> None:
    with SequentialWorkflow(
        tmp_path,
        metered_team((800, 200)),
        plugin_manager=pm,
        token_budget=4500,
        store=store,
        user_id="wf-user",
        agent_id="wf-agent",
    ) as wf:
        result = wf.run("Build a todo API", thread_id="wf-thread-2")
    assert result.reason == "budget_exceeded"
    (root,) = build_tree(store.get_spans("wf-thread-2", user_id="wf-user", agent_id="wf-agent"))
    assert root.span.status == "error" and root.span.error == "workflow failed: budget_exceeded"
    assert root.children[-1].span.attributes["soloflow.workflow.status"] == "failed"
    assert [c.span.name for c in root.children] == [f"phase {p}" for p in phases(result)]


def test_token_budget_checks_its_limits() -> None:
    budget = TokenBudget(limit=100, warn_fraction=0.8)
    assert [budget.should_warn(n) for n in (79, 80)] == [False, True]
    assert [budget.exceeded(n) for n in (100, 101)] == [False, True]
    assert not TokenBudget().should_warn(10**9) and not TokenBudget().exceeded(10**9)
    with pytest.raises(ConfigError, match="positive"):
        TokenBudget(limit=0)


# --------------------------------------------------------------------------- durability


CRASHING_RUN = textwrap.dedent(
    """
    import os, sys, time, json
    from pathlib import Path
    from soloflow_langgraph.sequential import SequentialWorkflow

    workspace, mode = Path(sys.argv[1]), sys.argv[2]
    log = workspace / "calls.log"

    def note(event):
        with open(log, "a") as f:
            f.write(event + "\\n")
            f.flush()
            os.fsync(f.fileno())

    def contract_writer(inp):
        note("contract_writer")
        return {"contracts": "# C\\n\\n- Rule one. Rule two."}

    def auditor(inp):
        note(f"auditor {inp.inner_iteration}")
        return {"compliance_score": [0.3, 0.5, 0.9][inp.inner_iteration], "violations": ["v"]}

    def code_generator(inp):
        note(f"code_generator start {inp.inner_iteration}")
        if mode == "crash" and inp.inner_iteration == 1:
            (workspace / "ready").write_text("killing time")
            time.sleep(120)
        note(f"code_generator done {inp.inner_iteration}")
        return {"summary": "fixed"}

    def evaluator(inp):
        note("evaluator")
        return {"satisfied": True}

    def refiner(inp):
        note("refiner")
        return {"contracts": "# C"}

    def pr_orchestrator(inp):
        note("pr_orchestrator")
        return {"pr_url": "https://git.example.org/pr/1"}

    agents = dict(contract_writer=contract_writer, auditor=auditor,
                  code_generator=code_generator, evaluator=evaluator, refiner=refiner,
                  pr_orchestrator=pr_orchestrator)
    with SequentialWorkflow(workspace, agents) as wf:
        result = wf.run("Build a todo API", thread_id="t-1") if mode == "crash" else wf.resume("t-1")
    print(json.dumps(result.model_dump(mode="json")))
    """
)


def test_resume_after_a_crash(tmp_path: Path) -> None:
    script = tmp_path / "crashing_run.py"
    script.write_text(CRASHING_RUN)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(workspace), "crash"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not (workspace / "ready").exists():
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "the workflow never reached the second fix"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # mid-phase: the second code generator run
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL
    before = (workspace / "calls.log").read_text().splitlines()
    assert before == [
        "contract_writer",
        "auditor 0",
        "code_generator start 0",
        "code_generator done 0",
        "auditor 1",
        "code_generator start 1",
    ]

    done = subprocess.run(
        [sys.executable, str(script), str(workspace), "resume"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = WorkflowResult.model_validate_json(done.stdout.strip().splitlines()[-1])
    after = (workspace / "calls.log").read_text().splitlines()[len(before) :]
    # Only the phase that was killed runs again; every finished phase is kept.
    assert after == [
        "code_generator start 1",
        "code_generator done 1",
        "auditor 2",
        "evaluator",
        "pr_orchestrator",
    ]
    assert (result.status, result.thread_id) == ("success", "t-1")
    assert phases(result) == [
        "contract_writer",
        "create_summary",
        "auditor",
        "code_generator",
        "auditor",
        "code_generator",
        "auditor",
        "evaluator",
        "pr_orchestrator",
    ]


def test_an_agent_error_names_the_role_and_the_thread_resumes(
    tmp_path: Path, pm: pluggy.PluginManager
) -> None:
    team = Team(scores=[[0.9]])
    broken = {"down": True}

    def evaluator(inp: RoleInput) -> EvaluationResult:
        if broken["down"]:
            raise ConnectionError("model endpoint unreachable")
        return team.evaluator(inp)

    with SequentialWorkflow(
        tmp_path, {**team.agents(), "evaluator": evaluator}, plugin_manager=pm
    ) as wf:
        with pytest.raises(AgentError, match=r"the evaluator agent raised ConnectionError") as info:
            wf.run("Build a todo API", thread_id="t-err")
        assert info.value.role == "evaluator"
        with pytest.raises(SequentialWorkflowError, match="already holds a workflow"):
            wf.run("Build a todo API", thread_id="t-err")
        broken["down"] = False
        result = wf.resume("t-err")
        assert result.status == "success"
        assert team.calls()["contract_writer"] == 1 and team.calls()["auditor"] == 1
        assert wf.resume("t-err") == result  # finished: nothing runs again
        assert team.calls()["pr_orchestrator"] == 1
        assert wf.latest_thread_id() == "t-err"
        with pytest.raises(SequentialWorkflowError, match="no workflow with thread id 'nope'"):
            wf.resume("nope")


# --------------------------------------------------------------------------- progress


@pytest.mark.parametrize(
    ("scores", "stuck"),
    [
        ([], False),
        ([0.5, 0.5], False),  # two scores are never stuck
        ([0.5, 0.5, 0.5], True),
        ([0.6, 0.5, 0.4], True),
        ([0.4, 0.5, 0.5], False),
        ([0.5, 0.5, 0.6], False),
        ([0.5, 0.4, 0.45], False),
        ([0.1, 0.9, 0.7, 0.7], True),  # only the last three count
        ([0.7, 0.7, 0.1, 0.2], False),
    ],
)
def test_progress_tracker(scores: list[float], stuck: bool) -> None:
    tracker = ProgressTracker()
    for score in scores:
        tracker.record(score)
    assert tracker.is_stuck() is stuck
    assert ProgressTracker(scores).is_stuck() is stuck


# --------------------------------------------------------------------------- summarisation


@pytest.mark.parametrize("budget", [5, 20, 60, 120, 250, 500, 1000])
def test_the_summary_keeps_to_its_budget(budget: int) -> None:
    summary = summarize_extractive(CONTRACTS, budget, counter=ESTIMATE)
    assert 0 < ESTIMATE.count(summary) <= budget
    assert summarize_extractive(CONTRACTS, budget, counter=ESTIMATE) == summary  # deterministic


def test_the_summary_keeps_the_structure() -> None:
    assert ESTIMATE.count(CONTRACTS) > 600
    summary = summarize_extractive(CONTRACTS, 230, counter=ESTIMATE)
    lines = summary.splitlines()
    # Every heading, in order, with its marker.
    assert [ln for ln in lines if ln.startswith("#")] == [
        "# Contracts: todo API",
        *[f"## Section {n}" for n in range(1, 7)],
    ]
    # First sentences of paragraphs and bullets, with the bullet markers.
    assert "Section 1 opens with its rule." in lines
    assert "- Rule 1.1 must hold for every request. It is checked by a unit test." in lines
    assert "- Rule 1.2 must hold for every response." in lines
    assert "- Rule 6.2 must hold for every response." in lines
    # Later sentences and code are what went.
    assert "It adds detail nobody needs" not in summary and "def handler_" not in summary
    assert summary.count("\n\n") > 10  # paragraphs stay apart


def test_a_summary_with_room_adds_the_rest_in_order() -> None:
    summary = summarize_extractive(CONTRACTS, 500, counter=ESTIMATE)
    assert "Section 1 opens with its rule. It then explains the rule at length." in summary
    assert "def handler_1(request):" in summary
    kept = [ln for ln in CONTRACTS.splitlines() if ln.startswith("#")]
    assert [ln for ln in summary.splitlines() if ln.startswith("#")] == kept


def test_the_summary_edge_cases() -> None:
    short = "# Title\n\nFits."
    assert summarize_extractive(short, 100, counter=ESTIMATE) == short  # unchanged
    assert summarize_extractive(CONTRACTS, 0, counter=ESTIMATE) == ""
    one_long_sentence = "word " * 400
    cut = summarize_extractive(one_long_sentence, 10, counter=ESTIMATE)
    assert cut and ESTIMATE.count(cut) <= 10
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | row number {i} |" for i in range(50))
    assert summarize_extractive(table, 12, counter=ESTIMATE).startswith("| a | b |\n|---|---|")


def test_agents_receive_the_summary_not_the_contracts(
    run_team: Callable[..., WorkflowResult],
) -> None:
    team = Team(scores=[[0.5, 0.9]])
    result = run_team(team, contracts_token_budget=100)
    summary = result.final_state.contracts_summary
    assert count_tokens(summary) <= 100 < count_tokens(CONTRACTS)
    for role, inputs in team.inputs.items():
        for inp in inputs:
            assert CONTRACTS not in inp.model_dump_json(), role
            if role != "contract_writer":
                assert inp.contracts_summary == summary
    create = result.final_state.phase_history[1]
    assert create.agent == "create_summary"
    assert f"contracts {count_tokens(CONTRACTS)} → {count_tokens(summary)} tokens" in (
        create.result_summary
    )


class Summariser:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.seen: list[tuple[int, str]] = []

    @hookimpl
    def soloflow_summarize_context(self, context: str, token_budget: int, purpose: str) -> Any:
        self.seen.append((token_budget, purpose))
        return self.answer


def test_soloflow_summarize_context(
    run_team: Callable[..., WorkflowResult], pm: pluggy.PluginManager
) -> None:
    # The workflow adds its hook specs to the plugin manager it gets; called directly here.
    hook = add_sequential_hookspecs(pm).hook.soloflow_summarize_context
    # The built-in extractive summariser answers alone.
    built_in = hook(context=CONTRACTS, token_budget=50, purpose="contracts")
    assert built_in == summarize_extractive(CONTRACTS, 50)
    # First result: None passes on, a string stops the call.
    passer, mine = Summariser(None), Summariser("MY SUMMARY")
    pm.register(mine)
    pm.register(passer)  # registered last: asked first
    try:
        assert hook(context=CONTRACTS, token_budget=50, purpose="contracts") == "MY SUMMARY"
        team = Team(scores=[[0.5, 0.9]], verdicts=[False, True])
        run_team(
            team, contracts_token_budget=111, violations_token_budget=22, feedback_token_budget=33
        )
    finally:
        pm.unregister(mine)
        pm.unregister(passer)
    assert (
        passer.seen[1:]
        == mine.seen[1:]
        == [
            (111, "contracts"),
            (22, "violations"),
            (33, "feedback"),
            (111, "contracts"),
            (22, "violations"),
        ]
    )
    assert all(i.contracts_summary == "MY SUMMARY" for i in team.inputs["auditor"])
    assert team.inputs["refiner"][0].evaluator_feedback == "MY SUMMARY"


def test_a_workflow_needs_a_summariser(tmp_path: Path) -> None:
    pm = get_plugin_manager(blocked=["extractive_summarizer"])
    with SequentialWorkflow(tmp_path, Team(scores=[[0.9]]).agents(), plugin_manager=pm) as wf:
        with pytest.raises(SequentialWorkflowError, match="extractive_summarizer") as info:
            wf.run("Build a todo API")
    assert info.value.phase == "summarize_contracts"


def test_the_tokenizer_never_downloads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tiktoken is not installed here: a stand-in with tiktoken's loader layout shows the guard."""
    fetched: list[str] = []
    local = tmp_path / "local.tiktoken"
    local.write_bytes(b"local")

    def read_file(blobpath: str) -> bytes:
        fetched.append(blobpath)  # the real one would download
        return b""

    load = types.ModuleType("tiktoken.load")
    load.read_file = read_file  # type: ignore[attr-defined]
    fake = types.ModuleType("tiktoken")
    fake.load = load  # type: ignore[attr-defined]

    class Encoding:
        def encode(self, text: str, disallowed_special: Any = ()) -> list[int]:
            return [0] * len(text.split())

        def decode(self, ids: list[int]) -> str:
            return "x " * len(ids)

    def get_encoding(name: str) -> Encoding:
        source = str(local) if name == "cl100k_base" else f"https://example.org/{name}.tiktoken"
        load.read_file(source)  # type: ignore[attr-defined]
        return Encoding()

    fake.get_encoding = get_encoding  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    monkeypatch.setitem(sys.modules, "tiktoken.load", load)

    assert load_tiktoken_offline(["o200k_base"]) is None  # would have downloaded: refused
    counter = load_tiktoken_offline()  # o200k_base refused, cl100k_base is local
    assert counter is not None and counter.name == "tiktoken:cl100k_base"
    assert counter.count("three words here") == 3
    assert fetched == [str(local)]  # the URL never reached the real loader
    assert load.read_file is read_file  # type: ignore[attr-defined]  # restored

    default_token_counter.cache_clear()
    try:
        monkeypatch.setenv(tokens_module.ENV_TOKENIZER, "estimate")
        assert default_token_counter() is ESTIMATE
        monkeypatch.delenv(tokens_module.ENV_TOKENIZER)
        default_token_counter.cache_clear()
        assert default_token_counter().name == "tiktoken:cl100k_base"
    finally:
        default_token_counter.cache_clear()


# --------------------------------------------------------------------------- role adapters


def _input(role: str = "auditor", **fields: Any) -> RoleInput:
    return RoleInput(
        role=role,
        task_description="Build a todo API",
        workspace="/ws",  # type: ignore[arg-type]
        contracts_summary="# C\n\n- Rule one.",
        **fields,
    )


def test_a_callable_agent() -> None:
    seen: list[RoleInput] = []

    def auditor(inp: RoleInput) -> dict[str, Any]:
        seen.append(inp)
        return {"compliance_score": 0.75, "violations": ["rule one"], "note": "extra keys go"}

    result = as_role_agent("auditor", auditor).run(_input(), UsageMeter())
    assert result == AuditResult(compliance_score=0.75, violations=["rule one"])
    assert seen == [_input()]


def test_runnable_agents() -> None:
    chain = RunnableLambda(lambda d: f'{{"satisfied": {json.dumps(d["compliance_score"] > 0.8)}}}')
    ok = as_role_agent("evaluator", chain).run(
        _input("evaluator", compliance_score=0.9), UsageMeter()
    )
    assert ok == EvaluationResult(satisfied=True)

    # A prompt template | chat model | parser chain, fed by the input's fields.
    model = ScriptedChatModel(
        script=lambda msgs: AIMessage(
            content=json.dumps({"summary": msgs[-1].content.upper(), "files_changed": ["a.py"]}),
            usage_metadata=_usage(40, 10),
        )
    )
    prompt = ChatPromptTemplate.from_messages([("human", "fix {violations_summary}")])
    meter = UsageMeter()
    code = as_role_agent("code_generator", prompt | model | JsonOutputParser()).run(
        _input("code_generator", violations_summary="- rule one"), meter
    )
    assert code == CodeResult(summary="FIX - RULE ONE", files_changed=["a.py"])
    assert meter.usage().total_tokens == 50  # counted through the callbacks


def test_a_create_agent_agent_in_the_workflow(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    @tool
    def run_tests(path: str) -> str:
        """Run the tests under a path."""
        return "12 passed"

    def script(messages: list[BaseMessage]) -> AIMessage:
        if not any(m.type == "tool" for m in messages):
            assert "## Contracts (summary)" in messages[-1].content
            call = {"name": "run_tests", "args": {"path": "tests"}, "id": "c1", "type": "tool_call"}
            return AIMessage(content="", tool_calls=[call], usage_metadata=_usage(300, 20))
        return AIMessage(
            content='All good.\n```json\n{"compliance_score": 0.92, "violations": []}\n```',
            usage_metadata=_usage(400, 30),
        )

    auditor = create_agent(ScriptedChatModel(script=script), tools=[run_tests], name="auditor")
    team = Team(scores=[[0.0]])
    with SequentialWorkflow(
        tmp_path, {**team.agents(), "auditor": auditor}, plugin_manager=pm
    ) as wf:
        result = wf.run("Build a todo API")
    assert result.status == "success"
    audit = next(p for p in result.final_state.phase_history if p.agent == "auditor")
    assert (audit.compliance_score, audit.tokens_used) == (0.92, 750)
    assert result.total_tokens == 750


def test_a_chat_model_with_a_role_prompt() -> None:
    received: list[list[BaseMessage]] = []

    def script(messages: list[BaseMessage]) -> AIMessage:
        received.append(messages)
        return AIMessage(
            content='Here it is:\n```json\n{"compliance_score": 0.4, "violations": ["no tests"]}\n```',
            usage_metadata=_usage(120, 30),
        )

    model = ScriptedChatModel(script=script, model_name="judge")
    meter = UsageMeter(prices={"judge": TokenPrice(input_per_million=10, output_per_million=20)})
    agent = as_role_agent("auditor", ChatModelAgent(model, "You audit strictly."))
    result = agent.run(_input(compliance_score=0.2), meter)
    assert result == AuditResult(compliance_score=0.4, violations=["no tests"])
    system, human = received[0]
    assert system.content.startswith("You audit strictly.")
    assert '"compliance_score": <number from 0 to 1>' in system.content
    assert "## Contracts (summary)\n\n# C\n\n- Rule one." in human.content
    assert "compliance 0.20" in human.content
    usage = meter.usage()
    assert (usage.input_tokens, usage.output_tokens, usage.model_calls) == (120, 30, 1)
    assert usage.cost == pytest.approx((120 * 10 + 30 * 20) / 1e6)

    # A bare chat model gets the built-in role prompt.
    bare = as_role_agent("auditor", ScriptedChatModel(script=script))
    bare.run(_input(), UsageMeter())
    assert received[1][0].content.startswith("You are the auditor.")


@pytest.mark.parametrize(
    ("role", "answer", "problem"),
    [
        ("auditor", "I think it is mostly fine.", "holds no JSON object"),
        ("auditor", '{"score": 0.9}', r"compliance_score: Field required"),
        ("auditor", '{"compliance_score": 1.7}', r"compliance_score: Input should be less"),
        ("evaluator", '{"satisfied": "maybe"}', r"satisfied: Input should be a valid boolean"),
        ("contract_writer", '{"contracts": ""}', r"contracts: String should have at least"),
    ],
)
def test_bad_agent_output_names_the_role_and_what_was_expected(
    role: str, answer: str, problem: str
) -> None:
    model = ScriptedChatModel(responses=[AIMessage(content=answer)])
    with pytest.raises(AgentOutputError, match=problem) as info:
        as_role_agent(role, model).run(_input(role), UsageMeter())
    assert info.value.role == role
    assert f"the {role} agent" in str(info.value)
    assert info.value.expected in str(info.value)


def test_an_agent_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(
        AgentOutputError,
        match=r"the refiner agent returned a int; it must return a RefinementResult",
    ):
        as_role_agent("refiner", lambda inp: 42).run(_input("refiner"), UsageMeter())
    with pytest.raises(ConfigError, match="unknown role 'tester'"):
        as_role_agent("tester", lambda inp: {})
    with pytest.raises(ConfigError, match="the auditor role is a int"):
        as_role_agent("auditor", 7)


# --------------------------------------------------------------------------- plugin agents


class AgentPlugin:
    def __init__(self, agents: dict[str, Any]) -> None:
        self.agents = agents

    @hookimpl
    def soloflow_register_sequential_agents(self, register: Callable[[str, Any], None]) -> None:
        for role, agent in self.agents.items():
            register(role, agent)


def test_soloflow_register_sequential_agents(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    team, other = Team(scores=[[0.9]]), Team(scores=[[0.9]])
    first = AgentPlugin(team.agents())
    second = AgentPlugin({"auditor": other.auditor})  # registered last: called first, wins
    pm.register(first)
    pm.register(second)
    try:
        assert registered_agents(pm)["auditor"] == other.auditor
        with SequentialWorkflow(tmp_path / "a", plugin_manager=pm) as wf:
            assert wf.run("Build a todo API").status == "success"
        assert other.calls()["auditor"] == 1 and "auditor" not in team.calls()
        # Agents passed in win over registered ones.
        mine = Team(scores=[[0.95]])
        with SequentialWorkflow(tmp_path / "b", {"auditor": mine.auditor}, plugin_manager=pm) as wf:
            assert wf.run("Build a todo API").final_state.compliance_score == 0.95
    finally:
        pm.unregister(first)
        pm.unregister(second)

    bad = AgentPlugin({"tester": team.auditor})
    pm.register(bad)
    try:
        with pytest.raises(PluginError, match="unknown role 'tester'"):
            registered_agents(pm)
    finally:
        pm.unregister(bad)

    some = AgentPlugin({"auditor": team.auditor, "evaluator": team.evaluator})
    pm.register(some)
    try:
        with pytest.raises(MissingAgentsError) as info:
            SequentialWorkflow(tmp_path / "c", plugin_manager=pm)
    finally:
        pm.unregister(some)
    assert info.value.roles == ["contract_writer", "code_generator", "refiner", "pr_orchestrator"]
    assert "contract_writer, code_generator, refiner, pr_orchestrator" in str(info.value)


# --------------------------------------------------------------------------- models


def test_the_models_have_the_documents_fields() -> None:
    assert {
        "task_description",
        "workspace",
        "outer_iteration",
        "inner_iteration",
        "max_outer",
        "max_inner",
        "contracts_summary",
        "compliance_score",
        "last_violations",
        "evaluator_satisfied",
        "evaluator_feedback",
        "inner_loop_active",
        "phase_history",
    } <= set(WorkflowState.model_fields)
    assert {"agent", "timestamp", "tokens_used", "result_summary", "iteration_context"} <= set(
        PhaseRecord.model_fields
    )
    assert {
        "status",
        "final_state",
        "total_tokens",
        "total_cost",
        "reason",
        "pr_url",
        "execution_time_seconds",
    } <= set(WorkflowResult.model_fields)
    state = WorkflowState(task_description="t", workspace="w")
    assert (state.max_outer, state.max_inner, state.outer_iteration) == (5, 10, 0)


# --------------------------------------------------------------------------- CLI

runner = CliRunner()


def test_cli_dev_json(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    res = runner.invoke(
        app,
        [
            "sequential",
            "run",
            "Build a todo API",
            "--workspace",
            str(ws),
            "--dev",
            "--json",
            "--input-price",
            "3",
            "--output-price",
            "15",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    result = WorkflowResult.model_validate_json(res.stdout)  # nothing else on stdout
    assert (result.status, result.reason) == ("success", "completed")
    assert result.final_state.outer_iteration == 2  # the dev story refines once
    assert result.pr_url == "dev://pull-request/2"
    assert result.total_tokens > 0 and result.total_cost > 0
    assert (ws / ".soloflow" / "sequential.db").is_file()

    # Resuming a finished thread returns its result and runs nothing.
    again = runner.invoke(
        app,
        [
            "sequential",
            "run",
            "Build a todo API",
            "--workspace",
            str(ws),
            "--dev",
            "--json",
            "--resume",
            "--thread-id",
            result.thread_id,
        ],
        catch_exceptions=False,
    )
    assert again.exit_code == 0, again.output
    assert WorkflowResult.model_validate_json(again.stdout) == result


def test_cli_live_view_and_exit_codes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    res = runner.invoke(
        app,
        [
            "sequential",
            "run",
            "Build a todo API",
            "--workspace",
            str(ws),
            "--dev",
            "--max-inner",
            "1",
            "--thread-id",
            "cli-1",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 1  # the workflow failed
    lines = res.stdout.splitlines()
    assert lines[0].lstrip().startswith("1 contract_writer")
    assert any("auditor" in ln and "score 0.45" in ln for ln in lines)
    assert "failed (max_inner_reached)" in res.stdout and "thread cli-1" in res.stdout
    assert "thread cli-1 · checkpoints" in res.stderr

    res = runner.invoke(
        app,
        [
            "sequential",
            "run",
            "x",
            "--workspace",
            str(ws),
            "--resume",
            "--dev",
            "--thread-id",
            "nope",
        ],
    )
    assert res.exit_code == 1 and "no workflow with thread id 'nope'" in res.stderr

    # --resume alone takes the latest thread; a finished one is reported, not re-run.
    res = runner.invoke(
        app, ["sequential", "run", "x", "--workspace", str(ws), "--resume", "--dev"]
    )
    assert res.exit_code == 1
    assert "note: resuming thread cli-1 whose task is 'Build a todo API'" in res.stderr
    assert "failed (max_inner_reached)" in res.stdout and "contract_writer" not in res.stdout


def test_the_live_view_on_a_terminal(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160, color_system=None)
    view = PhaseView(console, token_budget=50_000)
    with SequentialWorkflow(tmp_path, dev_agents(), plugin_manager=pm) as wf, view.showing():
        result = wf.run("Build a todo API", on_phase=view)
    final = screen.getvalue().split("sequential workflow")[-1]  # the last frame
    for phase in (
        "contract_writer",
        "create_summary",
        "auditor",
        "evaluator",
        "refiner",
        "reload_summary",
        "pr_orchestrator",
    ):
        assert phase in final
    assert "0.86" in final and "0.93" in final
    assert f"tokens {result.total_tokens:,} of 50,000" in final


def test_cli_without_agents_names_the_missing_roles(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["sequential", "run", "Build a todo API", "--workspace", str(tmp_path)]
    )
    assert res.exit_code == 1
    assert "no agent for the role(s) contract_writer, auditor, code_generator" in res.stderr
    assert "soloflow_register_sequential_agents" in res.stderr and "--dev" in res.stderr


def test_dev_agents_run_the_whole_story(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    with SequentialWorkflow(tmp_path, dev_agents(evaluator_passes_at=1), plugin_manager=pm) as wf:
        result = wf.run("Build a todo API")
    assert result.status == "success" and result.final_state.outer_iteration == 1
    assert [
        p.compliance_score for p in result.final_state.phase_history if p.agent == "auditor"
    ] == [
        0.45,
        0.62,
        0.86,
    ]


def test_the_workflow_adds_its_hook_specs_once(tmp_path: Path) -> None:
    pm = get_plugin_manager()
    # The core does not carry them; the built-in summariser implements one all the same.
    assert pm.hook.soloflow_summarize_context.spec is None
    assert pm.hook.soloflow_summarize_context.get_hookimpls()
    assert add_sequential_hookspecs(add_sequential_hookspecs(pm)) is pm
    assert pm.hook.soloflow_summarize_context.spec is not None
    # Specified now: the first result, not a list of results.
    summary = pm.hook.soloflow_summarize_context(context=CONTRACTS, token_budget=50, purpose="x")
    assert summary == summarize_extractive(CONTRACTS, 50)
    # A workflow given this plugin manager adds nothing twice.
    with SequentialWorkflow(tmp_path, Team(scores=[[0.9]]).agents(), plugin_manager=pm) as wf:
        assert wf.run("Build a todo API").status == "success"
