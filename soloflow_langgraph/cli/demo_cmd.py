"""``soloflow demo``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from soloflow_langgraph.cli.app import Context, app, out


@app.command()
def demo(ctx: typer.Context) -> None:
    """Run the whole loop offline on a real agent with a scripted model (under a minute).

    Uses a fresh temporary database unless --db is given.
    """
    from soloflow_core.store import Store
    from soloflow_langgraph.demo.run import run_demo

    c: Context = ctx.obj
    if c.db:
        store = c.store()
        report = run_demo(store, user_id=c.user, agent_id=c.agent, console=out)
    else:
        with tempfile.TemporaryDirectory(prefix="soloflow-demo-") as tmp:
            with Store.open(str(Path(tmp) / "demo.db")) as store:
                report = run_demo(store, user_id=c.user, agent_id=c.agent, console=out)
        out.print("[dim]that database was temporary: run `soloflow --db demo.db demo` to keep it, then "
                  "`soloflow --db demo.db runs list` / `flows list` / `flows show NAME --mermaid`[/]")
    if report.flow is None or report.flow_model_calls != 0:
        raise typer.Exit(1)
