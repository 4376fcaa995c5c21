"""``soloflow flows ...``: candidates, approval, registered flows, running them."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from soloflow_core.learning.outcomes import DEFAULT_PROMOTION_THRESHOLD, MIN_HELD_OUT
from soloflow_core.learning.promotion import (
    approve_candidate,
    auto_promote_candidate,
    describe_divergences,
    reject_candidate,
    submit_flow,
)
from soloflow_core.models import SOURCE_USER
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.cli._listing import print_listing
from soloflow_langgraph.cli._resolve import resolve_flow, resolve_id
from soloflow_langgraph.cli._tool_specs import load_tools
from soloflow_langgraph.cli.app import MAX_COUNT, Context, app, fail, out, print_json
from soloflow_langgraph.cli.namespaces_cmd import hint_other_namespaces

if TYPE_CHECKING:
    from soloflow_core.learning.quality import QualityScore
    from soloflow_core.models import FlowDefinition

# LangGraph (compiler, runner, replay) is imported inside the commands that run a flow:
# importing it takes about a second and most commands never touch it.

flows_app = typer.Typer(help="Flow candidates and registered flows.", no_args_is_help=True)
app.add_typer(flows_app, name="flows")


_CANDIDATE_HELP = "A candidate id (from `soloflow detect`), or a unique prefix of it."


@flows_app.command("approve")
def approve(
    ctx: typer.Context,
    candidate_id: str = typer.Argument(..., help=_CANDIDATE_HELP),
) -> None:
    """Register a candidate's proposed flow. (A flow run waiting for approval:
    `soloflow flows runs approve RUN_ID`.)"""
    c: Context = ctx.obj
    flow = approve_candidate(
        c.store(),
        resolve_id(c, "candidate", candidate_id),
        pm=get_plugin_manager(),
        config=c.learning_config(),
        **c.ns,
    )
    out.print(f"registered flow [bold]{escape(flow.name)}[/] version {flow.version}")


@flows_app.command("reject")
def reject(
    ctx: typer.Context,
    candidate_id: str = typer.Argument(..., help=_CANDIDATE_HELP),
) -> None:
    """Reject a candidate: the same sequence is not proposed again. (A flow run waiting for
    approval: `soloflow flows runs reject RUN_ID`.)"""
    c: Context = ctx.obj
    cand_id = resolve_id(c, "candidate", candidate_id)
    reject_candidate(c.store(), cand_id, **c.ns)
    out.print(f"rejected {cand_id}", markup=False, highlight=False)


@flows_app.command("candidates")
def candidates(
    ctx: typer.Context,
    status: str | None = typer.Option(None, "--status", help="pending | approved | rejected"),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """List stored candidates."""
    c: Context = ctx.obj
    cands = c.store().list_candidates(status=status, **c.ns)
    if as_json:
        print_json([x.model_dump(mode="json") for x in cands])
        return
    print_listing(
        title=None,
        headers=("candidate", "status", "runs", "fidelity", "confidence"),
        rows=[
            (
                x.id,
                (
                    x.status,
                    str(x.occurrence_count),
                    "-" if x.fidelity is None else f"{x.fidelity:.2f}",
                    "-" if x.confidence is None else f"{x.confidence:.2f}",
                ),
                " → ".join(x.tool_sequence),
            )
            for x in cands
        ],
    )
    if not cands:
        hint_other_namespaces(c, "candidates")
    for x in cands:
        if x.status == "pending" and x.divergences:
            out.print(
                f"[yellow]{x.id}[/] diverged in replay:\n{describe_divergences(x)}", highlight=False
            )


READ_ONLY_HELP = "This tool changes nothing (repeatable), as its metadata would say in process."
SIDE_EFFECTS_HELP = "This tool changes the world (repeatable)."


def tool_effects(read_only: list[str], writes: list[str]) -> dict[str, bool]:
    """Tool → side effects from ``--read-only`` / ``--side-effects`` (exit 2 on both)."""
    both = sorted(set(read_only) & set(writes))
    if both:
        fail(escape(f"{', '.join(both)}: given both --read-only and --side-effects"), 2)
    return {**dict.fromkeys(read_only, False), **dict.fromkeys(writes, True)}


@flows_app.command("verify")
def verify(
    ctx: typer.Context,
    candidate_id: str = typer.Argument(..., help=_CANDIDATE_HELP),
    threshold: float = typer.Option(
        DEFAULT_PROMOTION_THRESHOLD,
        "--threshold",
        envvar="SOLOFLOW_PROMOTION_THRESHOLD",
        help="Fidelity needed for automatic promotion.",
        min=0.0,
        max=1.0,
    ),
    promote: bool = typer.Option(False, "--promote", help="Promote it when fidelity ≥ threshold."),
    read_only: list[str] = typer.Option(
        [],
        "--read-only",
        metavar="TOOL",
        help=READ_ONLY_HELP,
    ),
    writes: list[str] = typer.Option(
        [],
        "--side-effects",
        metavar="TOOL",
        help=SIDE_EFFECTS_HELP,
    ),
    tools: list[str] = typer.Option(
        [],
        "--tools",
        help="module:ATTR naming the agent's tools: their metadata says which are read-only "
        "(repeatable).",
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Replay the candidate's flow against held-out runs; store fidelity (and promote).

    A tool's side effects: the candidate's step flag, else --read-only/--side-effects, else
    the --tools' metadata, else what its recorded calls' metadata says, else assumed (as
    `verify_candidate` in process, given the middleware's tools)."""
    from soloflow_core.flow.effects import tool_side_effects
    from soloflow_langgraph.verify import verify_candidate

    c: Context = ctx.obj
    effects = {
        **tool_side_effects([t for spec in tools for t in load_tools(spec)]),
        **tool_effects(read_only, writes),
    }
    candidate_id = resolve_id(c, "candidate", candidate_id)
    cand, report = verify_candidate(c.store(), candidate_id, side_effects=effects or None, **c.ns)
    promoted = None
    promotable = report.passes(threshold) and report.held_out >= MIN_HELD_OUT
    if promote and promotable:
        promoted = auto_promote_candidate(
            c.store(),
            candidate_id,
            threshold=threshold,
            pm=get_plugin_manager(),
            config=c.learning_config(),
            **c.ns,
        )
    if as_json:
        print_json(
            {
                "candidate_id": cand.id,
                "fidelity": cand.fidelity,
                "confidence": cand.confidence,
                "threshold": threshold,
                "passes": report.passes(threshold),
                "promotable": promotable,
                "verified": cand.fidelity is not None,
                "trained_on": report.trained_on,
                "held_out": report.held_out,
                "arguments_from_recording": report.arguments_from_recording,
                "arguments_derived": report.arguments_derived,
                "free_inputs": report.free_inputs,
                "notes": report.notes,
                "divergences": cand.divergences,
                "promoted": None
                if promoted is None
                else {"name": promoted.name, "version": promoted.version},
            }
        )
        if cand.fidelity is None:
            raise typer.Exit(1)
        return
    out.print(f"{cand.id}: {escape(cand.verification_note)}", highlight=False)
    if cand.fidelity is None:
        raise typer.Exit(1)
    out.print(
        f"fidelity {cand.fidelity:.2f} (threshold {threshold:.2f}), confidence "
        f"{cand.confidence if cand.confidence is not None else '-'}; free inputs: "
        f"{', '.join(report.free_inputs) or 'none'}",
        highlight=False,
    )
    if promoted is not None:
        out.print(f"promoted: registered flow [bold]{promoted.name}[/] version {promoted.version}")
    elif not report.passes(threshold):
        out.print(
            f"[yellow]below the threshold: a person must approve or reject it.[/] Calls that diverged:\n"
            f"{escape(describe_divergences(cand))}",
            highlight=False,
        )
    elif not promotable:
        out.print(
            f"[yellow]replayed on {report.held_out} held-out occurrence(s): automatic promotion "
            f"needs {MIN_HELD_OUT}; a person must approve or reject it.[/]",
            highlight=False,
        )


_FLOW_HELP = (
    "The flow's name, a unique prefix of it (any case), or of its slug (auto-find-customer…)."
)


@flows_app.command("list")
def list_flows(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="JSON only.")
) -> None:
    """List registered flows (latest version of each)."""
    from soloflow_core.learning.quality import flows_quality

    c: Context = ctx.obj
    store = c.store()
    records = store.list_flows(**c.ns)
    quality = {
        name: q
        for (name, _), q in flows_quality(store, store.list_flow_meta(**c.ns), **c.ns).items()
    }
    if as_json:
        print_json(
            [
                {
                    "name": r.flow.name,
                    "version": r.flow.version,
                    "source": r.source,
                    "candidate_id": r.candidate_id,
                    "steps": [s.skill_key for s in r.flow.steps],
                    "inputs": list((r.flow.input_schema or {}).get("properties", {})),
                    "created_at": r.created_at,
                    "quality": q.as_dict() if (q := quality.get(r.flow.name)) is not None else None,
                }
                for r in records
            ]
        )
        return
    # The name is what every other command takes: never cut, on a narrow terminal too.
    print_listing(
        title=None,
        headers=("name", "version", "source", "steps", "quality"),
        rows=[
            (
                r.flow.name,
                (
                    f"v{r.flow.version}",
                    r.source,
                    str(len(r.flow.steps)),
                    "-" if (q := quality.get(r.flow.name)) is None else _quality_cell(q),
                ),
                ", ".join((r.flow.input_schema or {}).get("properties", {})) or "-",
            )
            for r in records
        ],
        long="inputs",
        label_long=True,
    )
    if not records:
        hint_other_namespaces(c, "flows")


def _quality_cell(q: QualityScore) -> str:
    return (
        f"{q.overall:.2f} (R {q.reliability:.2f} E {q.efficiency:.2f} M {q.maturity:.2f} "
        f"U {q.reusability:.2f})"
    )


@flows_app.command("show")
def show(
    ctx: typer.Context,
    name: str = typer.Argument(..., help=_FLOW_HELP),
    version: int | None = typer.Option(
        None, "--version", min=1, max=MAX_COUNT, help="Default: the latest."
    ),
    mermaid: bool = typer.Option(False, "--mermaid", help="Print only the Mermaid diagram."),
    as_json: bool = typer.Option(False, "--json", help="Print only the definition as JSON."),
) -> None:
    """Show a flow's definition (or its Mermaid diagram)."""
    from soloflow_langgraph.compile.graph import flow_mermaid

    c: Context = ctx.obj
    name = resolve_flow(c, name)
    record = c.store().get_flow(name, version=version, **c.ns)
    if mermaid:
        print(flow_mermaid(record.flow))
        return
    if as_json:
        print_json(record.flow.model_dump(mode="json"))
        return
    from soloflow_core.learning.quality import flow_quality

    meta = c.store().get_flow_meta(name, version=record.flow.version, **c.ns)
    q = flow_quality(c.store(), meta, **c.ns)
    out.print(
        f"[bold]{escape(record.flow.name)}[/] v{record.flow.version} ({record.source}); quality "
        f"{_quality_cell(q)} — reliability, efficiency, maturity, reusability",
        highlight=False,
    )
    text = json.dumps(record.flow.model_dump(mode="json"), indent=2, ensure_ascii=False)
    if out.is_terminal:  # wrapped, never cropped at the window's edge
        out.print(Syntax(text, "json", word_wrap=True))
    else:  # piped or redirected: the definition whole, as written
        sys.stdout.write(text + "\n")


def _check_flow_file(
    file: str, tools: list[str]
) -> tuple[FlowDefinition | None, list[list[str]], list[dict[str, Any]]]:
    """(flow or None, layers, problems) of a flow file, validated against the registered executors."""
    from soloflow_core.errors import FlowFileError
    from soloflow_core.flow.executors import build_executor_registry
    from soloflow_core.flow.loader import validate_flow_file

    all_tools = [t for spec in tools for t in load_tools(spec)]
    registry = build_executor_registry(get_plugin_manager(), tools=all_tools)
    try:
        flow, plan = validate_flow_file(file, executors=registry.keys())
    except FlowFileError as exc:
        return (
            None,
            [],
            [
                {
                    "path": p.path,
                    "line": p.line,
                    "column": p.column,
                    "message": p.message,
                    "text": p.format(exc.file),
                }
                for p in exc.issues
            ],
        )
    return flow, plan.layers, []


def _report_problems(file: str, problems: list[dict[str, Any]], as_json: bool) -> NoReturn:
    if as_json:
        print_json(
            {
                "valid": False,
                "file": file,
                "errors": [{k: v for k, v in p.items() if k != "text"} for p in problems],
                "layers": [],
            }
        )
        raise typer.Exit(1)
    head = (
        "invalid flow file"
        if len(problems) == 1
        else f"invalid flow file ({len(problems)} problems)"
    )
    fail(head + ":\n  " + "\n  ".join(escape(p["text"]) for p in problems))
    raise typer.Exit(1)


def _print_layers(layers: list[list[str]]) -> None:
    for i, layer in enumerate(layers, 1):
        out.print(f"  layer {i}: {', '.join(layer)}", highlight=False, markup=False)


@flows_app.command("validate")
def validate(
    file: str = typer.Argument(..., help="A flow definition file (JSON or YAML)."),
    tools: list[str] = typer.Option(
        [], "--tools", help="module:ATTR naming tools steps may call (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Check a flow file: fields and types, the DAG (cycles named), references, templates, skill_keys."""
    flow, layers, problems = _check_flow_file(file, tools)
    if problems or flow is None:
        _report_problems(file, problems, as_json)
    if as_json:
        print_json({"valid": True, "file": file, "name": flow.name, "errors": [], "layers": layers})
        return
    out.print(
        f"OK: flow {flow.name!r} ({len(flow.steps)} steps, {len(layers)} layers)",
        highlight=False,
        markup=False,
    )
    _print_layers(layers)


@flows_app.command("submit")
def submit(
    ctx: typer.Context,
    file: str = typer.Argument(..., help="A flow definition file (JSON or YAML)."),
    tools: list[str] = typer.Option(
        [], "--tools", help="module:ATTR naming tools steps may call (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Validate a flow file, then register it in your namespace (the next version of its name)."""
    c: Context = ctx.obj
    flow, layers, problems = _check_flow_file(file, tools)
    if problems or flow is None:
        _report_problems(file, problems, as_json)  # before the store is opened: nothing stored
    registered = submit_flow(c.store(create=True), flow, pm=get_plugin_manager(), **c.ns)
    if as_json:
        print_json(
            {
                "name": registered.name,
                "version": registered.version,
                "source": SOURCE_USER,
                "layers": layers,
            }
        )
        return
    out.print(f"registered flow [bold]{escape(registered.name)}[/] version {registered.version}")
    _print_layers(layers)


def _check_phrasing(text: str) -> None:
    """Refuse a phrasing ``--add`` cannot use: empty, too long, or with no word of a job."""
    from soloflow_core.memory.reading import read_request
    from soloflow_core.store.evidence import MAX_EVIDENCE_CHARS

    if not text:
        fail("--add needs a phrasing: an empty text says nothing of the job")
    if len(text) > MAX_EVIDENCE_CHARS:
        fail(
            f"--add: a phrasing of {len(text):,} characters is over {MAX_EVIDENCE_CHARS:,}; give the request itself"
        )
    if not read_request(text).terms:
        fail(
            f"--add {text[:80]!r}: it holds no word of a job (only values, courtesy or filler); "
            "write the request as a user would, e.g. --add 'send me my bill'"
        )


@flows_app.command("evidence")
def evidence(
    ctx: typer.Context,
    name: str = typer.Argument(..., help=_FLOW_HELP),
    add: list[str] = typer.Option(
        [],
        "--add",
        help="A phrasing of the flow's job you confirm (repeatable): its words become words "
        "the job knows, e.g. --add 'send me my bill'. Values in it are never intent words.",
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """The texts a flow's job is known by (the routing gate's evidence), with where each
    came from; --add confirms a phrasing of your own."""
    import hashlib

    c: Context = ctx.obj
    name = resolve_flow(c, name)
    store = c.store()
    store.get_flow(name, **c.ns)  # a clear error when there is no such flow
    texts = [t.strip() for t in add]
    for t in texts:
        _check_phrasing(t)
    added = store.add_flow_evidence(
        name,
        [("person:" + hashlib.sha256(t.encode()).hexdigest()[:24], t) for t in texts],
        source="person",
        **c.ns,
    )
    pairs = store.flow_evidence_sources([name], **c.ns)[name]
    if as_json:
        print_json(
            {"flow": name, "added": added, "evidence": [{"task": t, "source": s} for t, s in pairs]}
        )
        return
    if texts:
        out.print(f"added {added} phrasing(s) to [bold]{escape(name)}[/]'s evidence")
    table = Table("source", "task text")
    for task, source in pairs:
        table.add_row(source, escape(task))
    out.print(table)
