"""Memory tiers: working memory, the forgetting curve, episodic and semantic search, prune,
namespaces, the provider conformance suite, a plugin's replacement, the CLI."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import TAU_BENCH
from typer.testing import CliRunner

import soloflow_plugins.store_memory
from soloflow_core import hookimpl
from soloflow_core.errors import ConfigError
from soloflow_core.ledger import ingest
from soloflow_core.memory import InMemoryProvider, MemoryProvider, MemoryRecord
from soloflow_core.memory.decay import (
    DEFAULT_THRESHOLD,
    INITIAL_STABILITY_DAYS,
    MAX_STABILITY_DAYS,
    REINFORCE_FACTOR,
    elapsed_days,
    forget_after,
    is_forgotten,
    reinforce,
    retention,
)
from soloflow_core.memory.store_provider import StoreMemoryProvider
from soloflow_core.memory.tiers import MemoryTiers, RetainingProvider
from soloflow_core.memory.working import WorkingMemory
from soloflow_core.models import FlowDefinition, FlowStep, TaskRun, ToolCall
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.store import schema as t
from soloflow_core.testing.memory_conformance import MemoryProviderConformance
from soloflow_langgraph.cli import app

NS = {"user_id": "alice", "agent_id": "bot"}
OTHER = {"user_id": "bob", "agent_id": "bot"}
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
runner = CliRunner()


def run(
    run_id: str,
    task: str,
    *calls: tuple[str, dict[str, Any], Any],
    at: datetime = T0,
    error_at: int | None = None,
    ns: dict[str, str] = NS,
) -> TaskRun:
    return TaskRun(
        run_id=run_id,
        task=task,
        started_at=at,
        ended_at=at,
        **ns,
        tool_calls=[
            ToolCall(name=n, args=a, output=o, error=True if i == error_at else None)
            for i, (n, a, o) in enumerate(calls)
        ],
    )


REFUND = run(
    "r-refund",
    "Refund the damaged kettle of order 1234",
    ("find_order", {"order_id": "1234"}, {"status": "delivered", "item": "kettle"}),
    ("refund_payment", {"order_id": "1234", "amount": 49.9}, "refund issued to visa 7447"),
)
RESET = run(
    "r-reset",
    "Reset my password please",
    ("send_reset_link", {"email": "dave@example.com"}, "link sent"),
    ("audit_log", {"event": "password_reset"}, "boom: disk quota exceeded"),
    error_at=1,
)
FOREIGN = run(
    "r-foreign",
    "Rückerstattung für Bestellung 77 bitte",
    ("buscar_pedido", {"nota": "заказ отменён клиентом"}, "查询订单 已完成"),
)


def flow(name: str, *tools: str, description: str = "") -> FlowDefinition:
    steps = [
        FlowStep(id=f"s{i}", skill_key=k, input_map={"order_id": "{{ inputs.order_id }}"})
        for i, k in enumerate(tools)
    ]
    return FlowDefinition(name=name, description=description, steps=steps)


@pytest.fixture
def memory(store: Store) -> MemoryTiers:
    return MemoryTiers(store, pm=get_plugin_manager())


def kinds(hits: list[Any]) -> list[tuple[str, str]]:
    return [(h.tier, h.kind) for h in hits]


# --------------------------------------------------------------------------- working memory


def test_working_memory_evicts_the_least_recently_used() -> None:
    wm = WorkingMemory(capacity=3)
    for key in "abc":
        wm.put(key, key.upper(), **NS)
    assert wm.get("a", **NS) == "A"  # a is now the most recent: b goes first
    wm.put("d", "D", **NS)
    assert [k for k, _ in wm.items(**NS)] == ["d", "a", "c"]
    assert wm.get("b", "gone", **NS) == "gone" and wm.evictions == 1
    wm.put("c", "C2", **NS)  # replacing refreshes, evicts nothing
    assert len(wm) == 3 and wm.items(**NS)[0] == ("c", "C2") and wm.evictions == 1
    assert wm.discard("c", **NS) and not wm.discard("c", **NS) and len(wm) == 2
    with pytest.raises(ValueError, match="capacity"):
        WorkingMemory(capacity=0)


def test_working_memory_keeps_namespaces_apart() -> None:
    wm = WorkingMemory(capacity=10)
    wm.put("order", "order 1234, damaged kettle", **NS)
    wm.put("order", "order 99 for bob", **OTHER)
    assert wm.get("order", **NS) == "order 1234, damaged kettle"
    assert wm.get("order", user_id="alice", agent_id="other") is None
    assert [e.key for e in wm.search("kettle", **NS)] == ["order"]
    assert (
        wm.search("kettle", **OTHER) == [] and wm.search("kettle", user_id="x", agent_id="y") == []
    )
    assert wm.clear(**OTHER) == 1 and wm.get("order", **NS) is not None


def test_working_memory_search_ranks_by_terms_then_recency() -> None:
    wm = WorkingMemory()
    wm.put("a", "refund order 1234", **NS)
    wm.put("b", {"note": "refund"}, **NS)
    wm.put("c", "Rückerstattung 查询订单", **NS)
    assert [e.key for e in wm.search("refund order", **NS)] == ["a", "b"]
    assert [e.key for e in wm.search("ruckerstattung", **NS)] == ["c"]
    assert [e.key for e in wm.search("订单", **NS)] == ["c"]
    assert [e.key for e in wm.search("", limit=2, **NS)] == ["c", "b"]
    assert wm.search("refund", limit=0, **NS) == []
    # A search is a use: the empty query above made b more recent than a.
    assert [e.key for e in wm.search("x " * 500_000 + "refund", **NS)] == ["b", "a"]


def test_working_memory_is_thread_safe() -> None:
    wm = WorkingMemory(capacity=100)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(2000):
                wm.put(f"{n}-{i}", i, user_id=f"u{n % 3}", agent_id="a")
                wm.get(f"{n}-{i - 1}", user_id=f"u{n % 3}", agent_id="a")
                if i % 50 == 0:
                    wm.items(user_id=f"u{n % 3}", agent_id="a")
                    wm.search("1", user_id=f"u{n % 3}", agent_id="a")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert len(wm) == 100 and wm.evictions == 8 * 2000 - 100
    assert sum(len(wm.items(user_id=f"u{n}", agent_id="a")) for n in range(3)) == 100


# --------------------------------------------------------------------------- forgetting curve


def test_retention_follows_the_exponential_curve() -> None:
    assert retention(1.0, 0.0, 7.0) == 1.0
    assert retention(1.0, 7.0, 7.0) == math.exp(-1) == 0.36787944117144233
    assert retention(1.0, 14.0, 7.0) == 0.1353352832366127
    assert retention(0.8, 3.5, 7.0) == 0.8 * math.exp(-0.5) == 0.4852245277701068
    assert retention(1.0, 12.0, INITIAL_STABILITY_DAYS) == 0.1800923121479524
    assert forget_after(1.0, 7.0, 0.2) == 7.0 * math.log(5.0) == 11.266065387038703
    assert forget_after(1.0, 14.0, 0.2) == 22.532130774077405
    assert forget_after(0.2, 7.0, 0.2) == 0.0 and forget_after(1.0, 7.0, 0.0) == math.inf
    assert is_forgotten(1.0, 11.27, 7.0, 0.2) and not is_forgotten(1.0, 11.26, 7.0, 0.2)
    assert elapsed_days(T0, T0 + timedelta(hours=36)) == 1.5
    assert elapsed_days(T0 + timedelta(days=1), T0) == 0.0  # clocks disagree: no negative age
    for bad in [(-0.1, 1.0, 7.0), (1.0, -1.0, 7.0), (1.0, 1.0, 0.0), (1.0, math.nan, 7.0)]:
        with pytest.raises(ValueError, match="must be"):
            retention(*bad)


def test_each_use_doubles_the_stability_up_to_a_cap() -> None:
    assert (INITIAL_STABILITY_DAYS, REINFORCE_FACTOR, DEFAULT_THRESHOLD) == (7.0, 2.0, 0.2)
    s = INITIAL_STABILITY_DAYS
    seen = []
    for _ in range(4):
        s = reinforce(s)
        seen.append(s)
    assert seen == [14.0, 28.0, 56.0, 112.0]
    assert reinforce(3000.0) == MAX_STABILITY_DAYS == 3650.0
    assert reinforce(5000.0) == 5000.0  # the cap never weakens an item
    assert reinforce(7.0, factor=1.5) == 10.5
    with pytest.raises(ValueError, match="never weakens"):
        reinforce(7.0, factor=0.5)


# --------------------------------------------------------------------------- episodic tier


def test_episodic_search_finds_tool_calls_by_their_arguments_and_outputs(
    store: Store, memory: MemoryTiers
) -> None:
    store.add_runs([REFUND, RESET])
    hits = memory.search("visa 7447", tiers="episodic", **NS)
    assert kinds(hits) == [("episodic", "tool_call")]
    assert hits[0].data["tool"] == "refund_payment" and hits[0].data["run_id"] == "r-refund"
    assert "refund_payment" in hits[0].text and "visa 7447" in hits[0].text

    (hit,) = memory.search("dave@example.com", tiers="episodic", **NS)
    assert hit.data["tool"] == "send_reset_link"
    (hit,) = memory.search("disk quota", tiers="episodic", **NS)
    assert (
        hit.kind == "tool_error" and hit.data["error"] is True and hit.data["tool"] == "audit_log"
    )
    hits = memory.search("damaged kettle", tiers="episodic", **NS)
    assert {h.kind for h in hits} == {"task", "tool_call"}
    assert hits[0].kind == "task" and hits[0].data == {"run_id": "r-refund", "success": None}
    assert hits[0].at == T0 and 0.0 < hits[0].retention <= 1.0  # type: ignore[operator]


def test_episodic_index_is_built_lazily_and_incrementally(
    store: Store, memory: MemoryTiers
) -> None:
    store.add_runs([REFUND])
    with store.engine.connect() as conn:  # writing runs indexes nothing
        assert conn.execute(sa.select(sa.func.count()).select_from(t.memory_items)).scalar() == 0
    episodic = memory.episodic
    assert isinstance(episodic, StoreMemoryProvider)
    assert episodic.index_new_events(**NS) == 1 and episodic.index_new_events(**NS) == 0
    assert memory.search("password", tiers="episodic", **NS) == []
    store.add_run(RESET)
    assert [h.data["tool"] for h in memory.search("dave", tiers="episodic", **NS)] == [
        "send_reset_link"
    ]
    assert episodic.index_new_events(**NS) == 0
    with store.engine.connect() as conn:  # each run's task and calls once
        keys = conn.execute(sa.select(t.memory_items.c.item_key)).scalars().all()
    assert len(keys) == len(set(keys)) == 2 * (1 + 2)


def test_concurrent_searches_index_each_run_once(store: Store) -> None:
    store.add_runs(
        [run(f"r{n}", f"parcel {n} delayed", ("track", {"n": n}, "late")) for n in range(40)]
    )
    providers = [StoreMemoryProvider(store, tier="episodic") for _ in range(4)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(providers))

    def search(provider: StoreMemoryProvider) -> None:
        try:
            barrier.wait()
            provider.search("parcel", limit=100, **NS)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search, args=(p,)) for p in providers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.memory_items)).scalar() == 80
    assert len(providers[0].search("parcel", limit=100, **NS)) == 40


def test_episodic_search_on_a_real_ledger(store: Store, memory: MemoryTiers) -> None:
    report = ingest(store, [TAU_BENCH], default_user="alice", default_agent="bot")
    assert report.runs_written == 150
    hits = memory.search("mia_li_3668 certificate", tiers="episodic", limit=5, **NS)
    assert hits and all("mia_li_3668" in h.text for h in hits)
    assert {h.kind for h in hits} <= {"task", "tool_call", "tool_error"}
    # Words of an output only: the address get_user_details returned.
    found = memory.search("Sunset Drive", tiers="episodic", limit=3, **NS)
    assert found and all(h.data.get("tool") == "get_user_details" for h in found)
    assert memory.search("mia_li_3668", tiers="all", **OTHER) == []


def test_non_english_and_hostile_text(store: Store, memory: MemoryTiers) -> None:
    store.add_runs([REFUND, FOREIGN])
    for query in ("rückerstattung", "RUCKERSTATTUNG", "заказ", "订单", "查询订单"):
        hits = memory.search(query, tiers="episodic", **NS)
        assert hits and all(h.data["run_id"] == "r-foreign" for h in hits), query
    for query in ("", "   ", "the of and", '"refund" OR (NEAR', "*", "\x00", "🚀🚀"):
        hits = memory.search(query, tiers="episodic", limit=3, **NS)
        assert len(hits) <= 3, query  # no error; an empty query lists the newest items
    big = "refund " + "lorem ipsum dolor sit amet " * 40_000
    assert len(big) > 1_000_000
    started = time.perf_counter()
    hits = memory.search(big, tiers="all", limit=5, **NS)
    assert time.perf_counter() - started < 5.0
    assert isinstance(hits, list)


# --------------------------------------------------------------------------- semantic tier


def test_semantic_search_finds_flows_and_follows_new_versions(
    store: Store, memory: MemoryTiers
) -> None:
    store.add_flow_version(
        flow("Refund order", "find_order", "refund_payment", description="refund a damaged item"),
        **NS,
        source="user-submitted",
    )
    store.add_flow_version(flow("Reset password", "send_reset_link"), **NS, source="user-submitted")
    (hit,) = memory.search("damaged refund", tiers="semantic", **NS)
    assert hit.kind == "flow" and hit.data["flow"] == "Refund order" and hit.data["version"] == 1
    assert "find_order → refund_payment" in hit.text
    hits = memory.search("inputs.order_id", tiers="semantic", **NS)  # the steps' templates
    assert {h.data["flow"] for h in hits} == {"Refund order", "Reset password"}
    (hit,) = memory.search("send_reset_link", tiers="semantic", **NS)
    assert hit.data["flow"] == "Reset password"
    store.add_flow_version(
        flow("Refund order", "lookup_invoice", description="refund by invoice"),
        **NS,
        source="user-submitted",
    )
    (hit,) = memory.search("refund", tiers="semantic", **NS)
    assert hit.data["version"] == 2 and "lookup_invoice" in hit.text
    assert memory.search("damaged", tiers="semantic", **NS) == []  # the old version is gone
    assert memory.search("refund", tiers="semantic", **OTHER) == []


# --------------------------------------------------------------------------- prune


def test_prune_archives_what_fell_below_the_threshold_and_never_deletes(
    store: Store, memory: MemoryTiers
) -> None:
    store.add_runs([REFUND, run("r-new", "refund the toaster", at=T0 + timedelta(days=10))])
    now = T0 + timedelta(days=12)  # REFUND: e^(-12/7) = 0.18 < 0.2; r-new: e^(-2/7) = 0.75
    dry = memory.prune(threshold=0.2, now=now, dry_run=True, **NS)
    assert dry.archived == {"episodic": ["r1:c0", "r1:c1", "r1:task"], "semantic": []}
    assert len(memory.search("refund", tiers="episodic", reinforce=False, now=now, **NS)) == 3

    report = memory.prune(threshold=0.2, now=now, **NS)
    assert report.archived == dry.archived and report.skipped == [] and not report.dry_run
    hits = memory.search("refund", tiers="episodic", reinforce=False, now=now, **NS)
    assert [h.data["run_id"] for h in hits] == ["r-new"]
    archived = memory.search(
        "refund", tiers="episodic", include_archived=True, reinforce=False, now=now, **NS
    )
    assert {(h.data["run_id"], h.archived) for h in archived} == {
        ("r-new", False),
        ("r-refund", True),
    }
    with store.engine.connect() as conn:  # archived: flagged, the items and runs are still there
        assert conn.execute(sa.select(sa.func.count()).select_from(t.memory_items)).scalar() == 4
        flagged = (
            conn.execute(
                sa.select(t.memory_strength.c.item_key).where(
                    t.memory_strength.c.archived_at.is_not(None)
                )
            )
            .scalars()
            .all()
        )
    assert sorted(flagged) == ["r1:c0", "r1:c1", "r1:task"]
    assert store.count_runs(**NS) == 2
    assert memory.prune(threshold=0.2, now=now, **NS).archived["episodic"] == []


def test_a_use_reinforces_an_item_and_brings_it_back(store: Store, memory: MemoryTiers) -> None:
    store.add_runs([REFUND, RESET])
    day5 = T0 + timedelta(days=5)
    (hit,) = memory.search("visa", tiers="episodic", now=day5, **NS)  # a use: stability 7 → 14
    day12 = T0 + timedelta(days=12)
    (hit,) = memory.search("visa", tiers="episodic", reinforce=False, now=day12, **NS)
    assert hit.retention == pytest.approx(math.exp(-7 / 14))
    archived = memory.prune(now=day12, **NS).archived["episodic"]
    assert hit.key not in archived and len(archived) == 5  # every other item of both runs
    assert memory.search("dave", tiers="episodic", reinforce=False, now=day12, **NS) == []
    (back,) = memory.search("dave", tiers="episodic", include_archived=True, now=day12, **NS)
    assert back.archived  # found while archived; the search was a use: it is back
    (again,) = memory.search("dave", tiers="episodic", reinforce=False, now=day12, **NS)
    assert not again.archived and again.retention == 1.0
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(t.memory_strength.c.stability, t.memory_strength.c.uses).where(
                t.memory_strength.c.item_key == back.key
            )
        ).one()
    assert tuple(row) == (14.0, 1)


def test_a_flow_in_use_is_not_pruned(store: Store, memory: MemoryTiers) -> None:
    store.add_flow_version(flow("Refund order", "find_order"), **NS, source="user-submitted")
    store.add_flow_version(flow("Reset password", "send_reset_link"), **NS, source="user-submitted")
    later = datetime.now(UTC) + timedelta(days=30)
    store.record_flow_execution("Refund order", success=True, at=later - timedelta(days=1), **NS)
    report = memory.prune(now=later, **NS)
    assert report.archived == {"episodic": [], "semantic": ["flow:Reset password"]}
    hits = memory.search("refund password", tiers="semantic", reinforce=False, now=later, **NS)
    assert [h.data["flow"] for h in hits] == ["Refund order"]


def test_prune_checks_its_threshold(memory: MemoryTiers) -> None:
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ConfigError, match="threshold"):
            memory.prune(threshold=bad, **NS)
    with pytest.raises(ConfigError, match="unknown memory tier 'procedural'"):
        memory.search("x", tiers=["procedural"], **NS)


# --------------------------------------------------------------------------- namespaces


def test_no_namespace_sees_another_ones_memories(store: Store, memory: MemoryTiers) -> None:
    store.add_runs([REFUND, FOREIGN, run("r-bob", "bob's own refund", ns=OTHER)])
    store.add_flow_version(flow("Refund order", "find_order"), **NS, source="user-submitted")
    memory.working.put("note", "refund pending", **NS)
    everything = memory.search("refund", include_archived=True, **NS)
    assert {h.tier for h in everything} == {"working", "episodic", "semantic"}
    assert "r-bob" not in {h.data.get("run_id") for h in everything}
    for ns in (OTHER, {"user_id": "alice", "agent_id": "other"}, {"user_id": "", "agent_id": ""}):
        hits = memory.search("refund", include_archived=True, **ns)
        assert all(h.data.get("run_id") in (None, "r-bob") for h in hits), ns
        assert not [h for h in hits if h.tier in ("working", "semantic")], ns
        for query in ("", "kettle", "订单", "rückerstattung"):
            assert [
                h
                for h in memory.search(query, include_archived=True, **ns)
                if h.data.get("run_id") != "r-bob"
            ] == []
    # Only bob's own run (its id is 3: written third).
    assert memory.prune(now=T0 + timedelta(days=400), **OTHER).archived["episodic"] == ["r3:task"]
    assert memory.search("kettle", tiers="episodic", reinforce=False, **NS)  # alice's untouched


def test_namespaces_through_the_cli(store: Store, db_url: str) -> None:
    store.add_runs([REFUND])
    base = ["--db", db_url, "--agent", "bot"]
    res = runner.invoke(app, [*base, "--user", "alice", "memory", "search", "visa", "--json"])
    assert res.exit_code == 0, res.output
    (hit,) = json.loads(res.stdout)
    assert hit["tier"] == "episodic" and hit["data"]["tool"] == "refund_payment"
    for user in ("bob", "alice2"):
        res = runner.invoke(app, [*base, "--user", user, "memory", "search", "visa", "--json"])
        assert res.exit_code == 0 and json.loads(res.stdout) == []
        res = runner.invoke(app, [*base, "--user", user, "memory", "search", "", "--json"])
        assert json.loads(res.stdout) == []


# --------------------------------------------------------------------------- CLI


def test_memory_cli_search_and_prune(store: Store, db_url: str) -> None:
    store.add_runs([REFUND, FOREIGN])
    store.add_flow_version(flow("Refund order", "find_order"), **NS, source="user-submitted")
    base = ["--db", db_url, "--user", "alice", "--agent", "bot", "memory"]
    res = runner.invoke(app, [*base, "search", "refund", "--json"])
    assert {h["tier"] for h in json.loads(res.stdout)} == {"episodic", "semantic"}
    res = runner.invoke(app, [*base, "search", "refund", "--tier", "semantic", "--json"])
    assert [h["data"]["flow"] for h in json.loads(res.stdout)] == ["Refund order"]
    res = runner.invoke(app, [*base, "search", "查询订单", "--limit", "1", "--json"])
    assert [h["data"]["run_id"] for h in json.loads(res.stdout)] == ["r-foreign"]
    res = runner.invoke(app, [*base, "search", "-", "--json"], input="kettle damaged\n")
    assert json.loads(res.stdout)[0]["data"]["run_id"] == "r-refund"
    res = runner.invoke(app, [*base, "search", "kettle"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "episodic" in res.stdout and "kettle" in res.stdout
    res = runner.invoke(app, [*base, "search", "nothing-like-this"])
    assert res.exit_code == 0 and "nothing found" in res.stdout
    res = runner.invoke(app, [*base, "search", "x", "--tier", "procedural"])
    assert res.exit_code == 1 and "--tier 'procedural'" in res.output

    res = runner.invoke(app, [*base, "prune", "--threshold", "0.999999", "--dry-run", "--json"])
    report = json.loads(res.stdout)
    assert (
        report["dry_run"]
        and report["archived"]["episodic"] == 5
        and report["threshold"] == 0.999999
    )
    res = runner.invoke(app, [*base, "prune", "--threshold", "0.999999"])
    assert res.exit_code == 0 and "episodic: archived 5 items" in res.stdout
    res = runner.invoke(app, [*base, "search", "kettle", "--json"])
    assert json.loads(res.stdout) == []
    res = runner.invoke(app, [*base, "search", "kettle", "--include-archived", "--json"])
    assert {h["archived"] for h in json.loads(res.stdout)} == {True}
    res = runner.invoke(app, [*base, "prune", "--threshold", "2"])
    assert res.exit_code == 2  # a usage error


# --------------------------------------------------------------------------- PostgreSQL


def test_a_run_committed_late_is_still_indexed(pg_url: str) -> None:
    # PostgreSQL only: SQLite serialises writers, so its ids commit in order.
    with Store.open(pg_url) as store:
        _late_commit_is_indexed(store, MemoryTiers(store, pm=get_plugin_manager()))


def _late_commit_is_indexed(store: Store, memory: MemoryTiers) -> None:
    from soloflow_core.store.writer import insert_returning, now

    conn = store.engine.connect()
    try:
        late = conn.begin()
        insert_returning(conn, [run("r-late", "late parcel")], now())  # takes the lower id
        store.add_run(run("r-early", "early parcel"))  # the higher id, committed first
        assert [h.data["run_id"] for h in memory.search("parcel", tiers="episodic", **NS)] == [
            "r-early"
        ]
        late.commit()
    finally:
        conn.close()
    hits = memory.search("parcel", tiers="episodic", reinforce=False, **NS)
    assert sorted(h.data["run_id"] for h in hits) == ["r-early", "r-late"]


# --------------------------------------------------------------------------- providers


def test_the_built_in_providers_come_from_the_plugin(memory: MemoryTiers) -> None:
    assert isinstance(memory.episodic, StoreMemoryProvider) and memory.episodic.tier == "episodic"
    assert isinstance(memory.semantic, StoreMemoryProvider) and memory.semantic.tier == "semantic"
    assert isinstance(memory.episodic, RetainingProvider)
    pm = get_plugin_manager()
    impls = [
        i
        for i in pm.hook.soloflow_register_memory_providers.get_hookimpls()
        if i.plugin is soloflow_plugins.store_memory
    ]
    assert len(impls) == 1 and impls[0].trylast


def test_blocking_the_built_in_leaves_the_tiers_without_providers(store: Store) -> None:
    with pytest.raises(
        ConfigError, match="no memory provider named 'episodic'; registered: in-memory"
    ):
        MemoryTiers(store, pm=get_plugin_manager(blocked=["store_memory"]))
    memory = MemoryTiers(
        store,
        pm=get_plugin_manager(blocked=["store_memory"]),
        episodic="in-memory",
        semantic="in-memory",
        options={"episodic": {}, "semantic": {}},
    )
    assert type(memory.episodic) is InMemoryProvider


class ListProvider(InMemoryProvider):
    """A replacement episodic store (what a vector database plugin would be)."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = options


class ReplaceEpisodic:
    @hookimpl
    def soloflow_register_memory_providers(self, register: Callable[..., None]) -> None:
        register("episodic", ListProvider)


@pytest.fixture
def replaced_pm() -> Iterator[Any]:
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(soloflow_plugins.store_memory, name="store_memory")
    plugin = ReplaceEpisodic()
    pm.register(plugin)
    try:
        yield pm
    finally:
        pm.unregister(plugin)


def test_a_plugin_replaces_the_episodic_provider(store: Store, replaced_pm: Any) -> None:
    store.add_runs([REFUND])
    store.add_flow_version(flow("Refund order", "find_order"), **NS, source="user-submitted")
    memory = MemoryTiers(store, pm=replaced_pm)
    assert isinstance(memory.episodic, ListProvider) and memory.episodic.options == {"store": store}
    assert isinstance(memory.semantic, StoreMemoryProvider)
    memory.episodic.record(
        MemoryRecord(kind="fact", text="alice prefers refunds to vouchers", **NS)
    )
    hits = memory.search("refund refunds", **NS)
    assert [(h.tier, h.kind, h.text) for h in hits if h.tier == "episodic"] == [
        ("episodic", "fact", "alice prefers refunds to vouchers")
    ]  # not the ledger's
    assert [h.data["flow"] for h in hits if h.tier == "semantic"] == ["Refund order"]
    assert hits[0].key is None and hits[0].retention is None
    report = memory.prune(now=T0 + timedelta(days=400), **NS)
    assert report.skipped == ["episodic"] and list(report.archived) == ["semantic"]


# --------------------------------------------------------------------------- conformance


class TestInMemoryProviderConformance(MemoryProviderConformance):
    @pytest.fixture
    def provider(self) -> MemoryProvider:
        return InMemoryProvider()


class TestEpisodicStoreConformance(MemoryProviderConformance):
    @pytest.fixture
    def provider(self, store: Store) -> MemoryProvider:
        return StoreMemoryProvider(store, tier="episodic")


class TestSemanticStoreConformance(MemoryProviderConformance):
    @pytest.fixture
    def provider(self, store: Store) -> MemoryProvider:
        return soloflow_plugins.store_memory.semantic(store)


class TestStoreProviderByUrlConformance(MemoryProviderConformance):
    @pytest.fixture
    def provider(self, sqlite_url: str) -> Iterator[MemoryProvider]:
        provider = StoreMemoryProvider(sqlite_url, tier="episodic")
        try:
            yield provider
        finally:
            provider.close()
