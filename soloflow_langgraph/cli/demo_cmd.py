"""``soloflow demo``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from soloflow_langgraph.cli.app import Context, app, out


@app.command()
def demo(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None, "--db", help="Keep the demo's data in this database (same as the global --db)."
    ),
) -> None:
    """Run the whole loop offline on a real agent with a scripted model (under a minute).

    Uses a fresh temporary database unless --db is given (here or before `demo`).
    """
    from soloflow_core.store import Store
    from soloflow_langgraph.demo.run import run_demo

    c: Context = ctx.obj
    if db:
        c.db = db
    if c.db:
        store = c.store(create=True)
        ctx.call_on_close(store.close)
        report = run_demo(store, user_id=c.user, agent_id=c.agent, console=out)
    else:
        with tempfile.TemporaryDirectory(prefix="soloflow-demo-") as tmp:
            with Store.open(str(Path(tmp) / "demo.db")) as store:
                report = run_demo(store, user_id=c.user, agent_id=c.agent, console=out)
        out.print(
            "[dim]that database was temporary: run `soloflow demo --db demo.db` to keep it, then "
            "`soloflow --db demo.db runs list` / `flows list` / `flows show auto --mermaid`[/]"
        )
    if report.flow is None or report.flow_model_calls != 0:
        raise typer.Exit(1)
