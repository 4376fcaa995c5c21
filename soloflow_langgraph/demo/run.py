"""``soloflow demo``: the whole loop on a real agent, offline, in seconds.

capture (callback handler) → ledger → detect → approve → compile to LangGraph →
the next matching task runs through the flow with zero model calls, measured against
the agent doing the same task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from soloflow_core.learning.promotion import approve_candidate
from soloflow_core.learning.service import flow_savings
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import DetectorConfig, FlowCandidate, FlowDefinition, TaskRun
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.compile.graph import compile_flow
from soloflow_langgraph.demo.agent import TOOLS, build_support_agent
from soloflow_langgraph.runtime.inputs import inputs_from_task
from soloflow_langgraph.runtime.runner import run_flow

if TYPE_CHECKING:
    from soloflow_core.learning.savings import FlowSavings

TASKS = [
    "Where is my order? My email is alice@example.com.",
    "What is your return policy for opened items?",
    "Hi, bob@example.org here. Can you check on my delivery?",
    "Please track the latest order for carol@example.net and let me know.",
]
NEXT_TASK = "Any news on my package? Account: dave@example.com"


@dataclass
class DemoReport:
    captured: list[TaskRun] = field(default_factory=list)
    detected_after: int = 0
    candidate: FlowCandidate | None = None
    flow: FlowDefinition | None = None
    flow_inputs: dict[str, Any] = field(default_factory=dict)
    flow_output: Any = None
    flow_model_calls: int = 0
    flow_ms: float = 0.0
    agent_run: TaskRun | None = None
    agent_ms: float = 0.0
    same_calls: bool = False
    mermaid: str = ""
    savings: FlowSavings | None = None


def _agent_task(agent: Any, handler: SoloFlowCallbackHandler, task: str) -> tuple[TaskRun, float]:
    start = time.perf_counter()
    agent.invoke({"messages": [{"role": "user", "content": task}]}, config={"callbacks": [handler]})
    elapsed = (time.perf_counter() - start) * 1000
    assert handler.last_run is not None
    return handler.last_run, elapsed


def run_demo(
    store: Store, *, user_id: str, agent_id: str, console: Console | None = None
) -> DemoReport:
    """Run the demo against ``store`` in the (user, agent) namespace; print as it goes."""
    con = console or Console()
    pm = get_plugin_manager()
    report = DemoReport()
    handler = SoloFlowCallbackHandler(
        store=store, user_id=user_id, agent_id=agent_id, plugin_manager=pm
    )
    agent, model = build_support_agent()
    config = DetectorConfig(min_sequence_length=3, min_occurrences=3, max_candidates=3)

    con.rule("[bold]1. The agent works; SoloFlow captures every tool call and model call")
    table = Table("task", "tool calls", "model calls", "tokens", "ms")
    matched = 0
    for task in TASKS:
        run, ms = _agent_task(agent, handler, task)
        report.captured.append(run)
        table.add_row(
            task,
            " → ".join(run.tool_names),
            str(len(run.model_calls)),
            str(run.tokens),
            f"{ms:.0f}",
        )
        if len(run.tool_calls) >= 3:
            matched += 1
        if matched >= 3 and report.candidate is None:
            cands = detect_candidates(store, user_id=user_id, agent_id=agent_id, config=config)
            if cands:
                report.candidate = cands[0]
                report.detected_after = len(report.captured)
    con.print(table)
    cand = report.candidate
    if cand is None:
        con.print("[red]no candidate detected[/]")
        return report

    con.rule("[bold]2. The detector proposes a flow")
    con.print(
        f"after {report.detected_after} runs: candidate [bold]{cand.id}[/] — "
        f"{' → '.join(cand.tool_sequence)}\n  seen in {cand.occurrence_count} distinct runs "
        f"({cand.match_type} match); estimated savings {cand.estimated_token_savings:g} "
        f"[dim]({cand.savings_method})[/]"
    )
    args = Table("step", "tool", "input_map (where each argument comes from)")
    for s in cand.proposed_flow.steps:
        args.add_row(s.id, s.skill_key, ", ".join(f"{k}={v}" for k, v in s.input_map.items()))
    con.print(args)

    con.rule("[bold]3. Approved (demo mode) and compiled to LangGraph")
    flow = approve_candidate(store, cand.id, user_id=user_id, agent_id=agent_id, pm=pm)
    report.flow = flow
    graph = compile_flow(flow, tools=TOOLS, plugin_manager=pm)
    report.mermaid = graph.get_graph().draw_mermaid()
    con.print(Panel(Syntax(report.mermaid, "text"), title=f"{flow.name} (Mermaid)"))

    con.rule("[bold]4. The next matching task: through the flow, and through the agent")
    con.print(f"task: [italic]{NEXT_TASK}[/]")
    report.flow_inputs = inputs_from_task(flow, NEXT_TASK)
    calls_before = model.calls
    result = run_flow(
        flow,
        report.flow_inputs,
        tools=TOOLS,
        plugin_manager=pm,
        store=store,
        user_id=user_id,
        agent_id=agent_id,
    )
    report.flow_model_calls = model.calls - calls_before
    report.flow_output = result.output
    report.flow_ms = result.duration_ms
    con.print(f"flow inputs recovered from the task text: {report.flow_inputs}")
    con.print(f"flow result: {result.status}: {result.output}")
    agent_run, report.agent_ms = _agent_task(agent, handler, NEXT_TASK)
    report.agent_run = agent_run
    agent_calls = [(c.name, c.args) for c in agent_run.tool_calls]
    flow_calls = [(c.name, c.args) for c in result.steps]
    report.same_calls = agent_calls == flow_calls

    measured = Table(
        "", "agent (LLM reasons)", "flow (deterministic)", title="measured on the same task"
    )
    measured.add_row("model calls", str(len(agent_run.model_calls)), str(report.flow_model_calls))
    measured.add_row("tokens", str(agent_run.tokens or 0), "0")
    measured.add_row("tool calls", str(len(agent_calls)), str(len(flow_calls)))
    measured.add_row("wall time (ms)", f"{report.agent_ms:.1f}", f"{report.flow_ms:.1f}")
    con.print(measured)
    con.print(
        "[green]✓[/] the flow made exactly the tool calls the agent made"
        if report.same_calls
        else "[yellow]![/] the flow's calls differ from the agent's"
    )
    _print_savings(con, report, store, user_id=user_id, agent_id=agent_id)
    con.print(f"[dim]data: {store.url}[/]")
    return report


def _print_savings(
    con: Console, report: DemoReport, store: Store, *, user_id: str, agent_id: str
) -> None:
    """The savings ledger (`soloflow flows stats`): measured, next to the detector's estimate."""
    assert report.flow is not None
    (s,) = flow_savings(store, user_id, agent_id, names=[report.flow.name])
    report.savings = s
    con.rule("[bold]5. The savings ledger (soloflow flows stats)")
    table = Table(
        "per occurrence",
        "agent runs it replaces",
        "flow runs",
        "saved",
        title=f"measured: {s.agent.runs} agent runs vs {s.flow_runs.runs} flow run(s)",
    )
    for label, attr in (
        ("model calls", "model_calls"),
        ("tokens", "tokens"),
        ("latency (ms)", "latency_ms"),
    ):
        cells = [getattr(x, attr) for x in (s.agent, s.flow_runs, s.saved_per_run)]
        table.add_row(label, *("-" if v is None else f"{v:.1f}" for v in cells))
    con.print(table)
    estimate = s.estimated_tokens_per_occurrence
    con.print(
        f"measured tokens saved per occurrence: {s.saved_per_run.tokens or 0:.0f}; the design "
        f"document's estimate: {estimate or 0:.0f} [dim]({s.savings_method})[/]"
    )
    con.print(
        "[dim]latency: the scripted model answers at once; with a real model each saved call "
        "is its seconds of generation[/]"
    )
