"""``soloflow skills export | import``: flows as versioned Agent Skills packages."""

from __future__ import annotations

import typer
from rich.markup import escape

from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.cli._tool_specs import load_tools
from soloflow_langgraph.cli.app import MAX_COUNT, Context, app, out, print_json
from soloflow_langgraph.cli.flows_cmd import READ_ONLY_HELP, SIDE_EFFECTS_HELP, tool_effects

skills_app = typer.Typer(
    help="Flows as skill packages: export from one store, import into another.",
    no_args_is_help=True,
)
app.add_typer(skills_app, name="skills")


@skills_app.command("export")
def export(
    ctx: typer.Context,
    flow: str = typer.Argument(..., help="The flow's name."),
    out_dir: str = typer.Option(
        ..., "--out", help="Where to write the package (as OUT/<skill name>/)."
    ),
    version: int | None = typer.Option(
        None, "--version", min=1, max=MAX_COUNT, help="Default: the latest."
    ),
    read_only: list[str] = typer.Option([], "--read-only", metavar="TOOL", help=READ_ONLY_HELP),
    writes: list[str] = typer.Option([], "--side-effects", metavar="TOOL", help=SIDE_EFFECTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Write a flow version as a skill package: SKILL.md, flow.json, its recorded occurrences
    as fixtures (those it reproduces in replay, judged as `flows verify` judges them), its
    provenance, and a manifest of SHA-256 digests."""
    from soloflow_langgraph.skills import export_skill

    c: Context = ctx.obj
    effects = tool_effects(read_only, writes)
    store = c.store()
    ctx.call_on_close(store.close)
    done = export_skill(store, flow, out_dir, version=version, side_effects=effects or None, **c.ns)
    if as_json:
        print_json(
            {
                "directory": str(done.directory),
                "skill": done.skill_name,
                "flow": done.flow.name,
                "version": done.flow.version,
                "fixtures": done.fixtures,
                "left_out": done.left_out,
                "package_digest": done.digest,
            }
        )
        return
    out.print(
        f"wrote {escape(str(done.directory))}: flow {escape(done.flow.name)!r} v{done.flow.version}, "
        f"{done.fixtures} fixture(s)"
        + (f", {len(done.left_out)} occurrence(s) left out" if done.left_out else ""),
        highlight=False,
    )


@skills_app.command("import")
def import_(
    ctx: typer.Context,
    directory: str = typer.Argument(..., help="A package written by `skills export`."),
    tools: list[str] = typer.Option(
        [], "--tools", help="module:ATTR naming tools the steps call (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON only."),
) -> None:
    """Check a skill package (its files against its manifest, its flow against your tools, its
    fixtures by replay) and register its flow in your namespace as user-submitted."""
    from soloflow_langgraph.skills import import_skill

    c: Context = ctx.obj
    store = c.store(create=True)
    ctx.call_on_close(store.close)
    done = import_skill(
        store,
        directory,
        tools=[t for spec in tools for t in load_tools(spec)],
        plugin_manager=get_plugin_manager(),
        **c.ns,
    )
    if as_json:
        print_json(
            {
                "flow": done.flow.name,
                "version": done.flow.version,
                "skill": done.skill_name,
                "fixtures_replayed": done.fixtures_replayed,
                "package_digest": done.package_digest,
                "source": "user-submitted",
            }
        )
        return
    out.print(
        f"registered flow {escape(done.flow.name)!r} version {done.flow.version} (user-submitted) from "
        f"skill {done.skill_name}; {done.fixtures_replayed} fixture(s) replayed",
        highlight=False,
    )
