"""Procedural-memory lookup: ``find_workflow`` at 10k flows, against the design document's way.

A namespace holds ``--flows`` flows (default 10,000) made of realistic parts: a verb, a
qualifier, an object of one of ten domains and a channel (``cancel overdue invoice via
email``), a description, 2–4 tools, 20 % user-submitted, confidence 0.5–1.0. Another
namespace holds as many again (isolation must not cost a scan of other users' flows).
``--queries`` task texts (default 1,000) are written for a random target flow each, with
names, e-mails, numbers and filler words around its words, in varied templates.

Timed per query, in one process, round-robin:

- **find_workflow**: :meth:`ProceduralMemory.find_workflow` (tokenizing, ranking the
  namespace's flows in the process's lookup index, one statement reading the best 50's
  confidence, status and the namespace's change counter, the final scoring), ``limit=5``;
- **baseline**: the design document's ``recall`` + ``selectBestWorkflow``: read the
  namespace's flows above the minimum confidence (name, description, trigger keywords),
  then a Python loop scoring each by the keywords found in the lowercased task.

Reports p50/p95/p99 (ms), the ratio baseline / find_workflow, and the share of queries
whose target flow ranks first (hit@1) and in the top 5; and the cold path: the first lookup
of the namespace, which reads its index into the process, and the index's memory.

Usage::

    python benchmarks/bench_lookup.py [--flows 10000] [--queries 1000] [--no-postgres]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from soloflow_core.memory.procedural import DEFAULT_MIN_CONFIDENCE, ProceduralMemory
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.store import schema as t
from soloflow_core.store.fulltext import namespace_token
from soloflow_core.store.procedural import insert_flow_version

NS = {"user_id": "alice", "agent_id": "support-bot"}
OTHER = {"user_id": "bob", "agent_id": "support-bot"}
PG_URL = os.environ.get("SOLOFLOW_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

DOMAINS = {
    "orders": ["order", "parcel", "shipment", "delivery", "return"],
    "billing": ["invoice", "payment", "charge", "subscription", "refund"],
    "accounts": ["password", "account", "profile", "login", "address"],
    "travel": ["flight", "booking", "seat", "baggage", "hotel"],
    "hr": ["leave", "payroll", "timesheet", "onboarding", "expense"],
    "devops": ["deployment", "build", "incident", "alert", "pipeline"],
    "support": ["ticket", "complaint", "escalation", "feedback", "warranty"],
    "crm": ["lead", "contact", "opportunity", "quote", "contract"],
    "analytics": ["report", "dashboard", "metric", "forecast", "export"],
    "calendar": ["meeting", "reminder", "invite", "schedule", "room"],
}
VERBS = [
    "create",
    "cancel",
    "update",
    "check",
    "track",
    "reset",
    "approve",
    "send",
    "review",
    "archive",
    "summarize",
    "escalate",
    "book",
    "verify",
    "close",
    "assign",
    "renew",
    "transfer",
    "split",
    "merge",
]
QUALIFIERS = [
    "weekly",
    "urgent",
    "international",
    "premium",
    "bulk",
    "monthly",
    "failed",
    "pending",
    "overdue",
    "vip",
    "corporate",
    "partner",
    "internal",
    "duplicate",
    "disputed",
]
CHANNELS = ["email", "slack", "sms", "portal", "phone", "teams"]
PEOPLE = ["Dave Miller", "Eve Chen", "Ana Souza", "Jonas Berg", "Priya Nair", "Tom O'Neil"]
TEMPLATES = [
    "Hi, could you {verb} the {qual} {obj} for {who} ({mail})? Please let them know by {chan}.",
    "{who} wrote in about their {qual} {obj} #{num}: we need to {verb} it and reply on {chan}.",
    "Task: {verb} {qual} {obj} {num}. Customer: {who}, {mail}. Notify via {chan} when done.",
    "Can you {verb} this {obj}? It's a {qual} one, ref {num}. {who} prefers {chan}. Thanks!",
    "Per ticket {num} please {verb} the {obj} ({qual}) and send {who} a {chan} update.",
]


def make_flows(n: int, rng: random.Random) -> list[tuple[FlowDefinition, dict]]:
    combos = [
        (v, q, d, o, c)
        for v in VERBS
        for q in QUALIFIERS
        for d, objs in DOMAINS.items()
        for o in objs
        for c in CHANNELS
    ]
    rng.shuffle(combos)
    out = []
    for verb, qual, domain, obj, chan in combos[:n]:
        tools = [f"{domain}_find_{obj}", f"{domain}_{verb}_{obj}", f"{chan}_notify"]
        if rng.random() < 0.4:
            tools.insert(1, f"{domain}_audit_log")
        steps = [
            FlowStep(id=f"s{i}", name=tool.replace("_", " ").title(), skill_key=tool)
            for i, tool in enumerate(tools)
        ]
        flow = FlowDefinition(
            name=f"{verb} {qual} {obj} via {chan}",
            description=f"{verb.title()} a {qual} {obj} for the customer and notify them by {chan}.",
            steps=steps,
            tags=[domain],
        )
        meta = {
            "verb": verb,
            "qual": qual,
            "obj": obj,
            "chan": chan,
            "source": "user-submitted" if rng.random() < 0.2 else "auto-learned",
            "confidence": round(rng.uniform(0.5, 1.0), 3),
        }
        out.append((flow, meta))
    return out


def make_queries(
    flows: list[tuple[FlowDefinition, dict]], n: int, rng: random.Random
) -> list[tuple[str, str]]:
    queries = []
    for _ in range(n):
        flow, m = rng.choice(flows)
        who = rng.choice(PEOPLE)
        text = rng.choice(TEMPLATES).format(
            verb=m["verb"],
            qual=m["qual"],
            obj=m["obj"],
            chan=m["chan"],
            who=who,
            mail=who.split()[0].lower() + "@example.com",
            num=rng.randint(1000, 99999),
        )
        queries.append((text, flow.name))
    return queries


def fill(store: Store, flows: list[tuple[FlowDefinition, dict]], ns: dict) -> None:
    with store.db.write() as conn:
        for flow, m in flows:
            insert_flow_version(conn, flow, **ns, source=m["source"], confidence=m["confidence"])


def baseline(store: Store) -> Callable[[str], list[str]]:
    """The design document's recall + selectBestWorkflow: every flow read, scored in Python."""
    c = t.flows.c
    q = sa.select(c.name, c.trigger_keywords, c.confidence).where(
        c.user_id == NS["user_id"],
        c.agent_id == NS["agent_id"],
        c.is_latest,
        c.status != "retired",
        c.confidence >= DEFAULT_MIN_CONFIDENCE,
    )

    def lookup(task: str) -> list[str]:
        text = task.lower()
        with store.engine.connect() as conn:
            rows = conn.execute(q).all()
        scored = []
        for name, keywords, confidence in rows:
            hits = sum(1 for k in keywords or () if k.lower() in text)
            if hits:
                scored.append((hits, confidence, name))
        scored.sort(reverse=True)
        return [name for _, _, name in scored[:5]]

    return lookup


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def run(label: str, store: Store, flows, queries) -> dict:
    started = time.perf_counter()
    fill(store, flows, NS)
    fill(store, flows, OTHER)
    if store.engine.dialect.name == "postgresql":
        # What autovacuum does within a minute of such a burst of writes: without it every
        # counter row (and the tables) would hold 20,000 dead versions that the reads skip.
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(sa.text("VACUUM ANALYZE"))
    print(
        f"[{label}] stored {2 * len(flows):,} flows in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    memory = ProceduralMemory(store)
    ours: Callable[[str], list[str]] = lambda task: [  # noqa: E731
        m.name for m in memory.find_workflow(NS["user_id"], NS["agent_id"], task, limit=5)
    ]
    theirs = baseline(store)
    cold = index_load(store, memory, queries[0][0])
    for task, _ in queries[:50]:  # warm-up: caches, pools, statement compilation
        ours(task), theirs(task)
    times: dict[str, list[float]] = {"find_workflow": [], "baseline": []}
    hits: dict[str, list[int]] = {"find_workflow": [0, 0], "baseline": [0, 0]}
    for task, target in queries:
        for name, fn in (("find_workflow", ours), ("baseline", theirs)):
            t0 = time.perf_counter()
            found = fn(task)
            times[name].append((time.perf_counter() - t0) * 1000)
            hits[name][0] += bool(found) and found[0] == target
            hits[name][1] += target in found
    result = {}
    for name in times:
        v = times[name]
        result[name] = {
            "p50": pct(v, 50),
            "p95": pct(v, 95),
            "p99": pct(v, 99),
            "mean": statistics.fmean(v),
            "hit1": hits[name][0] / len(queries),
            "hit5": hits[name][1] / len(queries),
        }
    print(
        f"\n{label}: {len(flows):,} flows in the namespace (+{len(flows):,} in another), "
        f"{len(queries):,} queries"
    )
    print("| lookup | p50 ms | p95 ms | p99 ms | hit@1 | hit@5 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in result.items():
        print(
            f"| {name} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | "
            f"{r['hit1']:.1%} | {r['hit5']:.1%} |"
        )
    ours_r, base_r = result["find_workflow"], result["baseline"]
    print(
        f"| baseline / find_workflow | {base_r['p50'] / ours_r['p50']:.1f}× | "
        f"{base_r['p95'] / ours_r['p95']:.1f}× | {base_r['p99'] / ours_r['p99']:.1f}× | | |"
    )
    print(
        f"lookup index of the namespace: first lookup (reads it) {cold['first_ms']:.0f} ms, "
        f"then {cold['warm_ms']:.2f} ms (median of 5); loading it alone {cold['load_ms']:.0f} ms (median of 3); "
        f"{cold['flows']:,} flows, {cold['postings']:,} postings, {cold['terms']:,} terms; "
        f"memory {cold['traced_mb']:.1f} MB measured (tracemalloc), {cold['estimate_mb']:.1f} MB "
        "estimated by the cache"
    )
    result["index"] = cold
    return result


def index_load(store: Store, memory: ProceduralMemory, task: str) -> dict:
    """The cold path: the first lookup of a namespace reads its index into the process."""
    ns = namespace_token(NS["user_id"], NS["agent_id"])
    cache = store.flow_index_cache()
    cache.clear()
    t0 = time.perf_counter()
    memory.find_workflow(NS["user_id"], NS["agent_id"], task)
    first = (time.perf_counter() - t0) * 1000
    warms = []
    for _ in range(5):
        t0 = time.perf_counter()
        memory.find_workflow(NS["user_id"], NS["agent_id"], task)
        warms.append((time.perf_counter() - t0) * 1000)
    warm = statistics.median(warms)
    loads = []
    for _ in range(3):
        cache.clear()
        t0 = time.perf_counter()
        memory.find_workflow(NS["user_id"], NS["agent_id"], task)
        loads.append((time.perf_counter() - t0) * 1000 - warm)
    cache.clear()
    gc.collect()
    tracemalloc.start()
    memory.find_workflow(NS["user_id"], NS["agent_id"], task)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    index = cache.get(ns)
    assert index is not None
    return {
        "first_ms": first,
        "warm_ms": warm,
        "load_ms": statistics.median(loads),
        "flows": len(index),
        "postings": len(index.positions),
        "terms": len(index.term_ids),
        "traced_mb": traced / 1e6,
        "estimate_mb": index.nbytes / 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    flows = make_flows(args.flows, rng)
    queries = make_queries(flows, args.queries, rng)
    with tempfile.TemporaryDirectory() as tmp:
        with Store.open(f"sqlite:///{Path(tmp) / 'lookup.db'}") as store:
            run("SQLite (file, WAL)", store, flows, queries)
    if args.no_postgres:
        return
    schema = "sf_bench_" + uuid.uuid4().hex[:10]
    admin = sa.create_engine("postgresql+psycopg://" + PG_URL.split("://", 1)[1])
    try:
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except sa.exc.OperationalError as exc:
        print(f"\nPostgreSQL at {PG_URL} not reachable ({str(exc).splitlines()[0]}): skipped")
        return
    try:
        sep = "&" if "?" in PG_URL else "?"
        with Store.open(f"{PG_URL}{sep}options=-csearch_path%3D{schema}") as store:
            run("PostgreSQL", store, flows, queries)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


if __name__ == "__main__":
    main()
