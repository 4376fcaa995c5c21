"""``soloflow ingest``, ``soloflow runs ...`` and ``soloflow detect``."""

from __future__ import annotations

import gc
import shlex
from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from soloflow_core.models import DetectorConfig
from soloflow_langgraph.cli._listing import print_listing
from soloflow_langgraph.cli._resolve import resolve_id
from soloflow_langgraph.cli.app import (
    INTERRUPTED_EXIT,
    MAX_COUNT,
    MAX_LIMIT,
    Context,
    app,
    err,
    fail,
    out,
    print_json,
)
from soloflow_langgraph.cli.namespaces_cmd import hint_other_namespaces

TASK_SHOWN = 80
"""How much of a task `runs list` shows (`runs show` and `--json` give it whole)."""
FLOW_SHOWN = 60
"""How much of the name of the flow that answered a run `runs list` shows before its task."""

runs_app = typer.Typer(help="The captured task runs (the ledger).", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


@app.command()
def ingest(
    ctx: typer.Context,
    files: list[Path] = typer.Argument(None, help="Ledger files: JSON Lines, optionally .gz."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON only."),
    strict: bool = typer.Option(
        False, "--strict", help="Exit 1 when any line was bad (good lines are still kept)."
    ),
    keep_namespaces: bool = typer.Option(
        False,
        "--keep-namespaces",
        help="Store each run under the user_id/agent_id its record names (operators ingesting a "
        "fleet's ledger). Default: every run goes to --user/--agent.",
    ),
    spill: Path | None = typer.Option(
        None,
        "--spill",
        metavar="PATH",
        help="Write back a capture's spill file (runs it could not store; each into its own "
        "namespace), then empty it.",
    ),
) -> None:
    """Read ledger files into the store. Bad lines are reported with their line number and skipped."""
    from soloflow_core.ledger import ingest as do_ingest
    from soloflow_core.ledger.spill import write_back_spill

    c: Context = ctx.obj
    files = list(files or [])
    if spill is not None:
        if files:
            err.print("[bold red]error:[/] give either ledger files or --spill PATH, not both")
            raise typer.Exit(2)
        if not spill.is_file():
            err.print(
                f"[bold red]error:[/] {escape(str(spill))}: no such spill file", soft_wrap=True
            )
            raise typer.Exit(1)
        files = [spill]
    elif not files:
        err.print("[bold red]error:[/] give ledger files to read, or --spill PATH")
        raise typer.Exit(2)
    for f in files:
        if f.is_dir():
            name = escape(str(f))
            fail(
                f"{name}: is a directory; give the ledger files in it: soloflow ingest {name}/*.jsonl"
            )
        if not f.is_file():
            fail(f"{escape(str(f))}: no such file")
    store = c.store(create=True)
    total = sum(f.stat().st_size for f in files)
    with Progress(
        TextColumn("[bold]ingest"),
        BarColumn(),
        TextColumn("{task.fields[lines]:,} lines"),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=as_json or not err.is_terminal,
    ) as progress:
        task = progress.add_task("ingest", total=total, lines=0)

        def on_progress(lines: int, done: int, _total: int) -> None:
            progress.update(task, completed=done, lines=lines)

        try:
            if spill is not None:
                report = write_back_spill(store, spill)
            else:
                report = do_ingest(
                    store,
                    files,
                    default_user=c.user,
                    default_agent=c.agent,
                    on_progress=on_progress,
                    keep_namespaces=keep_namespaces,
                )
        except KeyboardInterrupt:
            progress.stop()
            err.print(
                "interrupted (Ctrl-C): the batches written before are kept, each run whole; "
                "run the same command again to write the rest (runs already stored are "
                "skipped).",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(INTERRUPTED_EXIT) from None
    for e in report.errors[:50]:
        err.print(f"[yellow]skipped[/] {e}", highlight=False, soft_wrap=True)
    if len(report.errors) > 50:
        err.print(f"[yellow]... and {len(report.errors) - 50} more bad lines[/]")
    summary = {
        "files": [str(f) for f in files],
        "lines": report.lines,
        "runs_written": report.runs_written,
        "runs_skipped_existing": report.runs_skipped_existing,
        "bad_lines": [{"path": e.path, "line": e.line, "reason": e.reason} for e in report.errors],
        "database": store.url,
        "namespaces": [
            {"user_id": u, "agent_id": a, "runs": n} for (u, a), n in report.namespaces.items()
        ],
    }
    if as_json:
        print_json(summary)
    else:
        out.print(
            f"ingested [bold]{report.runs_written}[/] runs from {len(files)} file(s) "
            f"({report.runs_skipped_existing} already stored, {len(report.errors)} bad lines) "
            f"into {store.url}, {escape(_where(report.namespaces, c.user, c.agent))}",
            highlight=False,
        )
    if strict and report.errors:
        raise typer.Exit(1)


def _where(namespaces: dict[tuple[str, str], int], user: str, agent: str) -> str:
    """The namespaces an ingest wrote into, as the options that read them back."""
    if not namespaces or list(namespaces) == [(user, agent)]:
        return f"namespace --user {shlex.quote(user)} --agent {shlex.quote(agent)}"
    shown = sorted(namespaces.items(), key=lambda item: -item[1])[:5]
    listed = ", ".join(
        f"--user {shlex.quote(u)} --agent {shlex.quote(a)} ({n})" for (u, a), n in shown
    )
    more = f", and {len(namespaces) - 5} more" if len(namespaces) > 5 else ""
    return f"{len(namespaces)} namespaces: {listed}{more}"


@runs_app.command("list")
def runs_list(
    ctx: typer.Context,
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_LIMIT, help="How many (newest first)."),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """List task runs, the last stored first; a run a flow answered is marked [flow: NAME]."""
    c: Context = ctx.obj
    rows = c.store().list_runs(limit=limit, **c.ns)
    if as_json:
        print_json(
            [
                {
                    "run_id": r.run_id,
                    "task": r.task,
                    "success": r.success,
                    "tool_calls": r.tool_count,
                    "model_calls": r.model_call_count,
                    "tokens": r.tokens,
                    "cost": r.cost,
                    "classification": r.classification,
                    "created_at": r.created_at,
                    "routed_flow": r.routed_flow,
                }
                for r in rows
            ]
        )
        return
    cost = c.store().namespace_cost(**c.ns)
    caption = f"namespace cost: ${cost.total_usd:.4f} over {cost.priced_runs} priced run(s)" + (
        f", {cost.unpriced_runs} unpriced" if cost.unpriced_runs else ""
    )
    listed = []
    for r in rows:
        task = " ".join((r.task or "").split())
        task = task[:TASK_SHOWN] + ("…" if len(task) > TASK_SHOWN else "")
        if r.routed_flow is not None:  # a flow answered, with no model call: say which
            flow = " ".join(r.routed_flow.split())
            task = f"[flow: {flow[:FLOW_SHOWN]}{'…' if len(flow) > FLOW_SHOWN else ''}] {task}"
        priced = (
            f"${r.cost:.4f}" if r.cost is not None else ("unpriced" if r.model_call_count else "")
        )
        listed.append(
            (
                r.run_id,
                (
                    {True: "✓", False: "✗", None: "?"}[r.success],
                    str(r.tool_count),
                    str(r.model_call_count),
                    "" if r.tokens is None else str(r.tokens),
                    priced,
                ),
                task,
            )
        )
    print_listing(
        title=f"task runs ({c.user}/{c.agent})",
        headers=("run id", "ok", "tools", "model calls", "tokens", "cost"),
        rows=listed,
        long="task",
    )
    out.print(caption, highlight=False)
    if not rows:
        hint_other_namespaces(c, "task runs")


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The run id, or a unique prefix of it."),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Show one task run with its tool calls."""
    c: Context = ctx.obj
    run = c.store().get_run(resolve_id(c, "run", run_id), **c.ns)
    if as_json:
        print_json(run.model_dump(mode="json"))
        return
    out.print(
        f"[bold]{escape(run.run_id)}[/] success={run.success} tokens={run.tokens}\n"
        f"[dim]{escape(run.task or '')}[/]"
    )
    routed = run.meta.get("routed")
    if isinstance(routed, dict):  # a flow answered, with no model call: which one
        out.print(
            f"answered by the flow {escape(str(routed.get('flow')))!r} "
            f"v{escape(str(routed.get('version', '?')))}: flow run "
            f"{escape(str(routed.get('flow_run_id')))} {escape(str(routed.get('status')))} "
            f"(soloflow flows status {escape(str(routed.get('flow_run_id')))})",
            highlight=False,
        )
    table = Table("#", "tool", "args", "error", "ms")
    for i, call in enumerate(run.tool_calls):
        table.add_row(
            str(i),
            escape(call.name),
            escape(str(call.args)[:80]),
            str(call.error),
            "" if call.duration_ms is None else f"{call.duration_ms:.1f}",
        )
    out.print(table)


@app.command()
def detect(
    ctx: typer.Context,
    min_length: int = typer.Option(
        3, "--min-length", min=2, max=MAX_LIMIT, help="Shortest sequence to report."
    ),
    min_occurrences: int = typer.Option(
        3,
        "--min-occurrences",
        min=2,
        max=MAX_COUNT,
        help="Distinct runs a sequence must appear in.",
    ),
    lookback: int | None = typer.Option(
        None, "--lookback", min=1, max=MAX_COUNT, help="Only the newest N runs (default: all)."
    ),
    max_candidates: int = typer.Option(
        5, "--max-candidates", min=1, max=MAX_LIMIT, help="How many candidates to propose."
    ),
    include_failed: bool = typer.Option(
        False, "--include-failed", help="Count runs that failed (success=false) toward support."
    ),
    noise_tolerance: bool = typer.Option(
        True,
        "--noise-tolerance/--no-noise-tolerance",
        help="Credit occurrences with a stray call, a swapped adjacent pair or a failing end.",
    ),
    min_gain_bits: float = typer.Option(
        0.0,
        "--min-gain-bits",
        min=-1e12,
        max=1e12,
        help="Propose only patterns that compress the ledger by more than this.",
    ),
    also: list[str] = typer.Option(
        [],
        "--also",
        metavar="USER/AGENT",
        help="Also mine this namespace's runs (repeatable; explicit opt-in across namespaces). "
        "Candidates stay in --user/--agent.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the candidates as JSON only."),
) -> None:
    """Find repeated tool sequences and store them as flow candidates."""
    from concurrent.futures import ThreadPoolExecutor

    c: Context = ctx.obj
    config = DetectorConfig(
        min_sequence_length=min_length,
        min_occurrences=min_occurrences,
        lookback_limit=lookback,
        max_candidates=max_candidates,
        include_failed_runs=include_failed,
        tolerate_noise=noise_tolerance,
        min_gain_bits=min_gain_bits,
    )
    namespaces = []
    for spec in also:
        user, sep, agent = spec.partition("/")
        if not sep or not user or not agent:
            err.print(
                f"[bold red]error:[/] --also {spec!r}: expected USER/AGENT, e.g. --also alice/support-bot"
            )
            raise typer.Exit(2)
        namespaces.append((user, agent))
    store = c.store()
    with Progress(
        TextColumn("[bold]detect {task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=as_json or not err.is_terminal,
    ) as progress:
        task = progress.add_task("reading", total=4)
        steps = {"units": 1, "mine": 2, "rank": 3}
        # The database reads the ledger (mostly without the GIL) while the miner is imported.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="soloflow-detect") as pool:
            reading = pool.submit(store.read_tool_names, lookback=lookback, **c.ns)
            from soloflow_core.mining.detector import detect_candidates

            columns = reading.result()

        def on_progress(phase: str, done: float) -> None:
            progress.update(task, description=phase, completed=steps.get(phase, 0) + done)

        # A one-shot command: the cyclic collector's passes over the records that detection
        # builds free nothing (100k runs: 284 passes, 0 objects, 0.07 s), so none are run.
        gc.disable()
        try:
            cands = detect_candidates(
                store,
                config=config,
                also_namespaces=namespaces,
                on_progress=on_progress,
                columns=columns,
                **c.ns,
            )
        finally:
            gc.enable()
    if as_json:
        print_json([cand.model_dump(mode="json") for cand in cands])
        return
    if not cands:
        out.print(
            "no repeated sequence found (need "
            f"≥{min_length} calls repeated in ≥{min_occurrences} runs)"
        )
        if not include_failed:
            failed = store.count_runs(success=False, **c.ns)
            if failed:
                out.print(
                    f"{failed} failed run(s) were left out; [bold]--include-failed[/] counts them"
                )
        if not store.count_runs(**c.ns):  # the wrong --user/--agent, most likely
            hint_other_namespaces(c, "task runs")
        return
    print_listing(
        title="flow candidates",
        headers=("candidate", "runs", "match", "tokens saved", "bits"),
        rows=[
            (
                cand.id,
                (
                    str(cand.occurrence_count),
                    cand.match_type,
                    f"{cand.estimated_token_savings:,.0f}",
                    f"{round(cand.score_bits or 0):,}",  # round() first: never "-0"
                ),
                " → ".join(
                    f"{name}×n" if i in cand.repeated_steps else name
                    for i, name in enumerate(cand.tool_sequence)
                ),
            )
            for cand in cands
        ],
    )
    out.print("approve one with [bold]soloflow flows approve CANDIDATE_ID[/]")
