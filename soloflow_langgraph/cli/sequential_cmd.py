"""``soloflow sequential run``: the two-level sequential agent workflow, with a live view."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from soloflow_core.errors import SoloFlowError
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.cli.app import app, err, fail, out, print_json

if TYPE_CHECKING:
    from soloflow_langgraph.sequential import PhaseRecord, WorkflowState

sequential_app = typer.Typer(
    help="The two-level sequential agent workflow (contracts → audit ⇄ code → evaluate → PR).",
    no_args_is_help=True,
)
app.add_typer(sequential_app, name="sequential")


class PhaseView:
    """The phases so far as a table: live on a terminal, one line per phase otherwise."""

    def __init__(self, console: Console, token_budget: int | None) -> None:
        self.console = console
        self.budget = token_budget
        self.rows: list[tuple[str, ...]] = []
        self.totals = (0, 0.0)
        self.live: Live | None = None

    def table(self) -> Table:
        budget = f" of {self.budget:,}" if self.budget else ""
        table = Table(
            "#",
            "phase",
            "outer",
            "inner",
            "score",
            "tokens",
            "cost",
            "result",
            title="sequential workflow",
            caption=f"tokens {self.totals[0]:,}{budget} · cost ${self.totals[1]:.4f}",
        )
        for row in self.rows:
            table.add_row(*row)
        return table

    def __call__(self, record: PhaseRecord, state: WorkflowState) -> None:
        ctx = record.iteration_context
        score = "" if record.compliance_score is None else f"{record.compliance_score:.2f}"
        row = (
            str(len(state.phase_history)),
            record.agent,
            str(ctx.get("outer", "")),
            str(ctx.get("inner", "")),
            score,
            f"{record.tokens_used:,}",
            f"${record.cost:.4f}",
            record.result_summary[:60],
        )
        self.rows.append(row)
        self.totals = (state.total_tokens, state.total_cost)
        if self.live is not None:
            self.live.update(self.table())
        else:
            self.console.print(
                f"{row[0]:>3} {record.agent:<16} outer {row[2]} inner {row[3]}"
                + (f" score {score}" if score else "")
                + f" tokens {record.tokens_used:,} (total {state.total_tokens:,})"
                + f" ${state.total_cost:.4f}  {row[7]}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )

    @contextlib.contextmanager
    def showing(self) -> Iterator[PhaseView]:
        if not self.console.is_terminal:
            yield self
            return
        with Live(self.table(), console=self.console, refresh_per_second=8) as live:
            self.live = live
            try:
                yield self
            finally:
                live.update(self.table())
                self.live = None


@sequential_app.command("run")
def run(
    task: Annotated[str, typer.Argument(help="The task description.")],
    workspace: Annotated[
        Path,
        typer.Option(
            "--workspace",
            file_okay=False,
            help="The directory the agents work in (created if missing).",
        ),
    ],
    dev: Annotated[bool, typer.Option("--dev", help="Scripted agents, no LLM (dev mode).")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the WorkflowResult as JSON.")
    ] = False,
    max_outer: Annotated[
        int, typer.Option("--max-outer", min=1, help="Outer iterations at most.")
    ] = 5,
    max_inner: Annotated[
        int, typer.Option("--max-inner", min=1, help="Code fixes per outer iteration at most.")
    ] = 10,
    token_budget: Annotated[
        int | None,
        typer.Option(
            "--token-budget",
            min=1,
            help="Stop past this many tokens (the soloflow_token_budget_warning hook fires at 80%).",
        ),
    ] = None,
    thread_id: Annotated[
        str | None, typer.Option("--thread-id", help="The checkpoint thread (default: a new one).")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Go on with an interrupted workflow (--thread-id, default the latest one).",
        ),
    ] = False,
    input_price: Annotated[
        float, typer.Option("--input-price", min=0.0, help="USD per million input tokens.")
    ] = 0.0,
    output_price: Annotated[
        float, typer.Option("--output-price", min=0.0, help="USD per million output tokens.")
    ] = 0.0,
) -> None:
    """Run the sequential workflow for TASK in a workspace; checkpoints in WORKSPACE/.soloflow/sequential.db.

    Without --dev, agents come from plugins (the soloflow_register_sequential_agents hook).
    """
    from soloflow_langgraph.sequential import SequentialWorkflow, TokenPrice, dev_agents

    workspace.mkdir(parents=True, exist_ok=True)
    # With --json stdout carries only the result; the view goes to a terminal's stderr.
    show = not as_json or err.is_terminal
    view = PhaseView(err if as_json else out, token_budget)
    try:
        with SequentialWorkflow(
            workspace,
            dev_agents() if dev else None,
            plugin_manager=get_plugin_manager(),
            max_outer=max_outer,
            max_inner=max_inner,
            token_budget=token_budget,
            default_price=TokenPrice(
                input_per_million=input_price, output_per_million=output_price
            ),
        ) as workflow:
            if resume:
                thread_id = thread_id or workflow.latest_thread_id()
                if thread_id is None:
                    fail(f"nothing to resume: no workflow in {workflow.checkpoint_path}")
                stored = workflow.state(thread_id)  # type: ignore[arg-type]
                if stored is not None and stored.task_description != task:
                    err.print(
                        f"note: resuming thread {thread_id} whose task is "
                        f"{stored.task_description[:80]!r}",
                        highlight=False,
                        markup=False,
                    )
            else:
                thread_id = thread_id or uuid.uuid4().hex
            if show:
                err.print(
                    f"thread {thread_id} · checkpoints {workflow.checkpoint_path}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
            on_phase = view if show else None
            with view.showing() if show else contextlib.nullcontext():
                if resume:
                    result = workflow.resume(thread_id, on_phase=on_phase)  # type: ignore[arg-type]
                else:
                    result = workflow.run(task, thread_id=thread_id, on_phase=on_phase)
    except SoloFlowError as exc:
        fail(str(exc))
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        colour = "green" if result.status == "success" else "red"
        out.print(
            f"[bold {colour}]{result.status}[/] ({result.reason}) after "
            f"{result.final_state.outer_iteration} outer iteration(s): "
            f"{result.total_tokens:,} tokens, ${result.total_cost:.4f}, "
            f"{result.execution_time_seconds:.2f}s"
            + (f" · PR {result.pr_url}" if result.pr_url else "")
            + f" · thread {result.thread_id}",
            highlight=False,
            soft_wrap=True,
        )
    if result.status != "success":
        raise typer.Exit(1)
