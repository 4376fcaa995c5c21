"""``soloflow memory search`` and ``soloflow memory prune``: the memory tiers from the shell.

The store, SQLAlchemy and the providers are imported inside the commands: ``soloflow``
starts without them.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from soloflow_langgraph.cli.app import Context, app, out, print_json

if TYPE_CHECKING:
    from soloflow_core.memory.tiers import MemoryTiers

memory_app = typer.Typer(
    help="Memory tiers: episodic (the ledger's events) and semantic (flows).", no_args_is_help=True
)
app.add_typer(memory_app, name="memory")

_TIERS = ("episodic", "semantic", "all")


def _memory(ctx: typer.Context) -> MemoryTiers:
    """The namespace's memory over the command's store (closed when the command ends); the
    providers come from the installed plugins, so a plugin's replacement is used here too."""
    from soloflow_core.memory.tiers import MemoryTiers
    from soloflow_core.plugins import get_plugin_manager

    store = ctx.obj.store()
    ctx.call_on_close(store.close)
    return MemoryTiers(store, pm=get_plugin_manager())


def _when(at: datetime | None) -> str:
    return "-" if at is None else f"{at:%Y-%m-%d %H:%M}"


@memory_app.command("search")
def search(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="Words to look for (any language); '-' reads stdin."),
    tier: str = typer.Option("all", "--tier", help="episodic, semantic or all."),
    limit: int = typer.Option(10, "--limit", min=1, max=1000, help="At most this many per tier."),
    include_archived: bool = typer.Option(
        False, "--include-archived", help="Also items a prune archived."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Full-text search of your memory: runs' tasks and tool calls (names, arguments,
    outputs, errors), and registered flows. New runs are indexed first. Read-only: a search
    from the shell does not count as a use."""
    from soloflow_core.errors import ConfigError

    c: Context = ctx.obj
    if tier not in _TIERS:
        raise ConfigError(f"--tier {tier!r}: use one of {', '.join(_TIERS)}")
    if text == "-":
        text = sys.stdin.read()
    tiers = ["episodic", "semantic"] if tier == "all" else [tier]
    hits = _memory(ctx).search(
        text, tiers=tiers, limit=limit, include_archived=include_archived, reinforce=False, **c.ns
    )
    if as_json:
        print_json([h.as_dict() for h in hits])
        return
    if not hits:
        out.print("nothing found")
        return
    table = Table("tier", "kind", "when", "score", "retention", "text")
    for h in hits:
        shown = h.text if len(h.text) <= 160 else h.text[:159] + "…"
        table.add_row(
            h.tier,
            h.kind + (" (archived)" if h.archived else ""),
            _when(h.at),
            "-" if h.score is None else f"{h.score:.2f}",
            "-" if h.retention is None else f"{h.retention:.2f}",
            escape(shown),
        )
    out.print(table)


@memory_app.command("prune")
def prune(
    ctx: typer.Context,
    threshold: float = typer.Option(
        0.2,
        "--threshold",
        min=0.0,
        max=1.0,
        help="Archive the items whose retention is below this.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what would be archived."),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Archive the episodic and semantic items the forgetting curve has let fall below the
    threshold. Archived items stay in the database (flagged, never deleted) and are left out
    of searches unless --include-archived."""
    c: Context = ctx.obj
    report = _memory(ctx).prune(threshold=threshold, dry_run=dry_run, **c.ns)
    if as_json:
        print_json(report.as_dict())
        return
    verb = "would archive" if dry_run else "archived"
    for tier, keys in report.archived.items():
        out.print(f"{tier}: {verb} {len(keys)} item{'' if len(keys) == 1 else 's'}")
    for tier in report.skipped:
        out.print(f"{tier}: its provider keeps no forgetting curve; nothing pruned")
