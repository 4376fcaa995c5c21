"""Every path that judges a flow against recorded runs gives the same verdict on the same
ledger: replay verification in process (the middleware's ``replay_verifier``), ``soloflow
flows verify`` (a real subprocess and CliRunner), ``POST /api/candidates/{id}/verify`` on a
real uvicorn server driven by httpx, the reply template learned on promotion and the
fixtures of an exported skill.

Two ledgers: real τ-bench GPT-4o airline runs (tests/data; no side-effect metadata recorded,
so the tools' flags must be passed on every path) and a synthetic one where an agent looks
up a few orders before cancelling one, states its tools' side effects in one run's calls
only, and sometimes calls the lookup tool for something else right after the step."""

from __future__ import annotations

import gzip
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from flowrun_fixtures import soloflow_argv, subprocess_env
from langchain_core.tools import StructuredTool
from serve_helpers import live_server
from typer.testing import CliRunner

from soloflow_core.flow.effects import tool_side_effects
from soloflow_core.generalize.align import find_occurrences
from soloflow_core.generalize.propose import propose
from soloflow_core.learning.promotion import approve_candidate
from soloflow_core.ledger import parse_record
from soloflow_core.models import FlowCandidate, TaskRun, ToolCall
from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.server.api import create_app
from soloflow_langgraph.server.service import SoloFlowService
from soloflow_langgraph.skills import export_skill, import_skill
from soloflow_langgraph.verify import replay_verifier, verify_candidate

NS = {"user_id": "u", "agent_id": "a"}
TAU = Path(__file__).parent / "data" / "tau_bench_gpt-4o_airline_trials0-2.jsonl.gz"
CANCEL = ("get_user_details", "get_reservation_details", "cancel_reservation")
ORDERS = ("find_user", "get_order", "cancel_order")


def _tool(name: str, **metadata: bool) -> StructuredTool:
    def call(**kwargs: Any) -> str:  # never run: replay answers from the recording
        raise AssertionError(f"{name} called for real with {kwargs}")

    return StructuredTool.from_function(
        call,
        name=name,
        description=f"the {name} tool",
        metadata=metadata,
        args_schema={"type": "object", "properties": {}, "additionalProperties": True},
    )


TAU_TOOLS = [
    _tool("get_user_details", read_only=True),
    _tool("get_reservation_details", read_only=True),
    _tool("cancel_reservation", side_effects=True),
]
ORDER_TOOLS = [
    _tool("find_user", read_only=True),
    _tool("get_order", read_only=True),
    _tool("cancel_order", side_effects=True),
]


def _save_candidate(
    store: Store, runs: list[TaskRun], seq: tuple[str, ...], *, cid: str, repeated: list[int]
) -> FlowCandidate:
    """A candidate as the detector stores it: no side effects known to its proposal."""
    occs = find_occurrences(runs, seq)
    flow = propose(seq, [o for _, o in occs], observed=len(occs), repeated_steps=repeated).flow
    cand = FlowCandidate(
        id=cid,
        **NS,
        tool_sequence=list(seq),
        occurrence_count=len(occs),
        match_type="subsequence",
        estimated_token_savings=1.0,
        avg_cost_per_execution=1.0,
        dedupe_key="flow_offload:" + "→".join(seq),
        proposed_flow=flow,
        run_ids=[rid for rid, _ in occs],
        repeated_steps=repeated,
    )
    store.save_candidates([cand])
    return cand


def _rest_verify(store: Store, cid: str, *, tools: list[Any], body: dict[str, Any]) -> Any:
    token = store.create_api_token(**NS, scope="write").token
    service = SoloFlowService(store, tools=tools)
    try:
        with (
            live_server(create_app(service)) as url,
            httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as client,
        ):
            res = client.post(f"/api/candidates/{cid}/verify", json=body)
            assert res.status_code == 200, res.text
            return res.json()
    finally:
        service.close()


# ---------------------------------------------------------------------- τ-bench


@pytest.fixture
def tau_store(sqlite_url: str) -> Iterator[Store]:
    """Each task's latest trial that holds the cancellation (a task's trials share its text:
    held out beside another trial of its task, a run would not count)."""
    by_task: dict[str, TaskRun] = {}
    with gzip.open(TAU, "rt") as f:
        for line in f:
            rec = json.loads(line)
            run = parse_record(rec, default_user="u", default_agent="a")
            run = run.model_copy(update=NS)  # the records name their own agent
            task = run.run_id.rsplit("/", 2)[1]
            latest = by_task.get(task)
            if find_occurrences([run], CANCEL) and (latest is None or run.run_id > latest.run_id):
                by_task[task] = run
    runs = sorted(by_task.values(), key=lambda r: r.run_id)
    assert len(runs) == 9
    store = Store.open(sqlite_url)
    try:
        store.add_runs(runs)
        _save_candidate(store, runs, CANCEL, cid="cand_tau_cancel", repeated=[])
        yield store
    finally:
        store.close()


def test_tau_bench_in_process_cli_and_rest_agree(tau_store: Store, sqlite_url: str) -> None:
    """The τ-bench runs record no side effects: in process the middleware passes its tools'
    flags; the CLI and the server read the same tools' metadata, or are told the flags."""
    cid = "cand_tau_cancel"
    strict, _ = verify_candidate(tau_store, cid, save=False, **NS)
    cand = tau_store.get_candidate(cid, **NS)
    in_process = replay_verifier(tau_store, tool_side_effects(TAU_TOOLS))(cand)
    assert in_process.fidelity is not None and in_process.held_out == 3
    # The read-only lookups make a difference here: without them, every repeat is required.
    assert "repeated read-only call(s)" in in_process.verification_note
    assert in_process.divergences != strict.divergences
    done = subprocess.run(
        soloflow_argv(
            "--db",
            sqlite_url,
            "--user",
            "u",
            "--agent",
            "a",
            "flows",
            "verify",
            cid,
            "--tools",
            "test_verify_parity:TAU_TOOLS",  # the middleware's tools, their metadata
            "--json",
        ),
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    rest = _rest_verify(tau_store, cid, tools=TAU_TOOLS, body={})
    assert cli["fidelity"] == rest["candidate"]["fidelity"] == in_process.fidelity
    assert cli["held_out"] == rest["held_out"] == in_process.held_out
    assert cli["divergences"] == rest["candidate"]["divergences"] == in_process.divergences
    assert rest["candidate"]["verification_note"] == in_process.verification_note
    # A served tool set that says nothing: the request states the side effects instead.
    told = _rest_verify(
        tau_store,
        cid,
        tools=[],
        body={"side_effects": {"get_user_details": False, "get_reservation_details": False}},
    )
    assert told["candidate"]["fidelity"] == in_process.fidelity
    assert told["candidate"]["divergences"] == in_process.divergences
    res = CliRunner().invoke(
        app,
        ["--db", sqlite_url, "--user", "u", "--agent", "a", "flows", "verify", cid, "--json"]
        + ["--read-only", "get_user_details", "--read-only", "get_reservation_details"],
        catch_exceptions=False,
    )
    assert json.loads(res.stdout)["divergences"] == in_process.divergences


# ---------------------------------------------------------------------- synthetic


def _order_run(i: int, *, with_meta: bool) -> TaskRun:
    """find_user → get_order ×2–3 (some of the user's orders, the one to cancel last, then
    sometimes a lookup of something else) → cancel_order."""
    orders = [f"O-{i}0{k}" for k in range(1, 5)]
    target = orders[1 + i % 2]
    looked = [orders[0], *([orders[3]] if i % 2 else []), target]  # never the whole list
    total = f"{10 + i}.50"
    ro = {"read_only": True} if with_meta else {}
    calls = [
        ToolCall(
            name="find_user",
            args={"email": f"user{i}@x.io"},
            output=json.dumps({"user_id": f"U{i}", "orders": orders}),
            meta=ro,
        )
    ]
    for o in looked:
        calls.append(
            ToolCall(
                name="get_order",
                args={"order_id": o},
                output=json.dumps({"order_id": o, "status": "pending", "total": total}),
                meta=ro,
            )
        )
    if i % 3 == 1:  # the agent's own lookup, of a parcel: none of the step's arguments
        calls.append(
            ToolCall(
                name="get_order",
                args={"tracking": f"T-{i}"},
                output=json.dumps({"tracking": f"T-{i}", "status": "in transit"}),
                meta=ro,
            )
        )
    calls.append(
        ToolCall(
            name="cancel_order",
            args={"order_id": target, "reason": "asked"},
            output=json.dumps({"ok": True}),
            meta={"side_effects": True} if with_meta else {},
        )
    )
    at = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=i)
    return TaskRun(
        run_id=f"run-{i}",
        **NS,
        task=f"Please cancel order {target} for user{i}@x.io",
        tool_calls=calls,
        success=True,
        started_at=at,
        ended_at=at + timedelta(seconds=5),
        answer=f"Cancelled order {target} ({total} USD).",
    )


@pytest.fixture
def order_store(db_url: str) -> Iterator[Store]:
    runs = [_order_run(i, with_meta=i == 0) for i in range(9)]
    store = Store.open(db_url)
    try:
        store.add_runs(runs)
        _save_candidate(store, runs, ORDERS, cid="cand_orders", repeated=[1])
        yield store
    finally:
        store.close()


def test_side_effects_stated_in_one_run_count_on_every_path(
    order_store: Store, db_url: str
) -> None:
    """Only run 0's calls say the lookups are read-only; the held-out runs say nothing. The
    middleware (its tools' flags), the CLI with no option and the server with no tools give
    the same verdict: every held-out cancellation reproduced, its extra lookups not made."""
    cid = "cand_orders"
    cand = order_store.get_candidate(cid, **NS)
    in_process = replay_verifier(order_store, tool_side_effects(ORDER_TOOLS))(cand)
    assert in_process.fidelity == 1.0 and in_process.held_out == 3
    res = CliRunner().invoke(
        app,
        ["--db", db_url, "--user", "u", "--agent", "a", "flows", "verify", cid, "--json"],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    rest = _rest_verify(order_store, cid, tools=[], body={})
    assert cli["fidelity"] == rest["candidate"]["fidelity"] == in_process.fidelity
    assert cli["promotable"] is rest["promotable"] is True
    assert "repeated read-only call(s)" in in_process.verification_note
    # Told otherwise, every path requires every lookup again.
    res = CliRunner().invoke(
        app,
        ["--db", db_url, "--user", "u", "--agent", "a", "flows", "verify", cid]
        + ["--side-effects", "get_order", "--json"],
        catch_exceptions=False,
    )
    told = _rest_verify(order_store, cid, tools=[], body={"side_effects": {"get_order": True}})
    assert json.loads(res.stdout)["fidelity"] == told["candidate"]["fidelity"] < 1.0


def test_both_flags_for_one_tool_is_a_usage_error(order_store: Store, db_url: str) -> None:
    res = CliRunner().invoke(
        app,
        ["--db", db_url, "--user", "u", "--agent", "a", "flows", "verify", "cand_orders"]
        + ["--read-only", "get_order", "--side-effects", "get_order"],
    )
    assert res.exit_code == 2 and "get_order" in res.stderr


def test_promotion_learns_its_reply_from_the_calls_verify_judged(order_store: Store) -> None:
    """In runs 1, 4, 7 the agent looked up a parcel with ``get_order`` after the step's
    lookup. Verify leaves that call out; so must the reply learned on promotion, or the
    order's total (in the step's output, not the parcel's) cannot be written."""
    effects = tool_side_effects(ORDER_TOOLS)
    cand, report = verify_candidate(order_store, "cand_orders", side_effects=effects, **NS)
    assert report.fidelity == 1.0
    flow = approve_candidate(order_store, cand.id, **NS)
    assert flow.reply_template is not None
    assert "step_2.total" in flow.reply_template


def test_exported_fixtures_are_the_occurrences_verify_reproduces(
    order_store: Store, tmp_path: Path, sqlite_url: str
) -> None:
    """Every run is reproduced in replay (the explored lookups not made, the parcel lookup
    not the step's); the exported skill has one fixture per run, and another store imports
    it (its replay of the fixtures, with the side effects they carry, agrees)."""
    effects = tool_side_effects(ORDER_TOOLS)
    cand, _ = verify_candidate(order_store, "cand_orders", side_effects=effects, **NS)
    flow = approve_candidate(order_store, cand.id, **NS)
    done = export_skill(order_store, flow.name, tmp_path / "out", **NS)
    assert done.fixtures == 9, done.left_out
    fixture = json.loads((done.directory / "fixtures" / "0002.json").read_text())
    assert [s.get("side_effects") for s in fixture["steps"]] == [False, False, True]
    assert all(c["args"].get("order_id") for c in fixture["steps"][1]["calls"])
    other = Store.open(sqlite_url)
    try:
        imported = import_skill(other, done.directory, tools=ORDER_TOOLS, user_id="v", agent_id="b")
        assert imported.flow.name == flow.name
        again = export_skill(other, flow.name, tmp_path / "again", user_id="v", agent_id="b")
        assert again.fixtures == 9, again.left_out
        copied = json.loads((again.directory / "fixtures" / "0002.json").read_text())
        assert copied["steps"] == fixture["steps"]
    finally:
        other.close()
