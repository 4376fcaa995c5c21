"""A request a flow answered is recorded as such: the captured run names the flow, its version,
its flow run and how it ended (``meta["routed"]``), so a run with no tool and no model call of
its own does not look empty; a run the agent answered names none."""

from __future__ import annotations

from collections.abc import Callable

from routing_support import SHOP, Desk, approve, world

from benchmarks import routing_world as W
from soloflow_core.store import Store

SHOP_WORLD = world(SHOP)
NS = SHOP_WORLD.ns


def test_a_routed_run_names_the_flow_and_its_flow_run(
    trained_store: Callable[[str], Store],
) -> None:
    store = trained_store(SHOP)
    approve(store, SHOP_WORLD)
    first = next(r for r in W.load_corpus() if r["category"] == "paraphrase")
    with Desk(store, SHOP_WORLD) as desk:
        got = desk.ask(first["text"])
        assert got["calls"] == 0 and got["flow"] is not None, got  # a flow answered
        routed = store.list_runs(**NS, limit=1)[0]
        assert routed.routed_flow == got["flow"]  # the listing tells it from an agent's run
        run = store.get_run(routed.run_id, **NS)
        assert run is not None and run.model_calls == [] and run.tool_calls == []
        (flow_run,) = store.list_flow_runs(**NS)
        assert run.meta["routed"] == {
            "flow": got["flow"],
            "version": 1,
            "flow_run_id": flow_run["id"],
            "status": "completed",
        }
        got = desk.ask("What's the weather like in Lisbon?")
        assert got["calls"] > 0 and got["flow"] is None  # the agent answered
        answered = store.list_runs(**NS, limit=1)[0]
        assert answered.run_id != routed.run_id and answered.routed_flow is None
        run = store.get_run(answered.run_id, **NS)
        assert run is not None and "routed" not in run.meta


def test_runs_show_says_which_flow_answered(
    trained_sqlite: Callable[[str], Store], sqlite_url: str
) -> None:
    from typer.testing import CliRunner

    from soloflow_langgraph.cli import app

    store = trained_sqlite(SHOP)
    approve(store, SHOP_WORLD)
    first = next(r for r in W.load_corpus() if r["category"] == "paraphrase")
    with Desk(store, SHOP_WORLD) as desk:
        name = desk.ask(first["text"])["flow"]
    routed = store.list_runs(**NS, limit=1)[0]
    (flow_run,) = store.list_flow_runs(**NS)
    res = CliRunner().invoke(
        app,
        ["--db", sqlite_url, "--user", NS["user_id"], "--agent", NS["agent_id"]]
        + ["runs", "show", routed.run_id],
    )
    assert res.exit_code == 0, res.output
    said = " ".join(res.stdout.split())
    assert f"answered by the flow {name!r} v1: flow run {flow_run['id']} completed" in said
