"""What the durable flow runtime costs per step, and how fast it starts a run.

Target 1: SoloFlow's per-step overhead ≤ 1.3× a hand-written LangGraph graph with the same
nodes and checkpointer. The baseline is a ``StateGraph`` written by hand: one node per step,
each reading its dependency's output from the state and calling the same trivial tool
directly (a plain function, or a LangChain ``@tool``), a reducer-merged ``results`` dict,
compiled with a checkpointer and invoked with ``durability="sync"`` and a fresh
``thread_id`` per run. SoloFlow runs the same steps as a ``FlowDefinition``:

* ``SF graph``: ``compile_flow`` + ``graph.invoke`` with the same checkpointer and no store:
  templates, skip checks, the per-call thread and the final node, but no step journal;
* ``SF runtime``: ``FlowRuntime.run(name, inputs)`` on a store, ``retention="keep"``: the
  durable path (run record, step journal, the run's end) with the runtime's default
  ``durability="exit"`` — LangGraph saves the run's checkpoint when the invocation ends, and
  the step journal (one synchronous commit per step on PostgreSQL) is what keeps completed
  steps from running again after a crash; the baseline's ``"sync"`` is LangGraph's way to the
  same guarantee (two commits per step). Both survive a kill mid-run without repeating a
  completed step; neither row is compared with LangGraph's non-durable ``"exit"``. Each invocation runs on one
  watched daemon thread and the steps of one-task supersteps call their tool in line
  (``soloflow_langgraph.compile.run_watch``): one thread hand-off per run instead of per step. On a
  SQLite file store its
  checkpointer is ``SqliteSaver`` on a file next to the store; on PostgreSQL LangGraph's
  ``PostgresSaver`` (opened as ``PostgresSaver.from_conn_string`` opens it, the baseline's
  settings) in the same database. On both the journal writes one transaction per step (a
  step's deferred completion with its successor's begin; see docs/flows.md). The target rows: ``SF
  runtime`` against ``LG`` on ``sqlite`` and on
  ``postgres``.
* ``SF runtime, retention``: the same with the default retention — the runtime deletes each
  run's checkpoints as it ends (batched, on a background thread), inside the timing.
* ``SF runtime, sync``: the same with ``durability="sync"`` (LangGraph's checkpoint before every
  superstep as well as the journal).

Configurations: no checkpointer, ``InMemorySaver``, ``SqliteSaver`` on a file, and
``PostgresSaver`` when ``--pg`` is reachable. Shapes: chains of 5 and 10 steps and a
diamond ``a → (b1 ∥ b2 ∥ b3) → d``. Checkpoints of the ``LG``, ``SF graph`` and ``SF
runtime`` rows are deleted after each rep, outside the timing (``delete_thread`` time is
shown separately): the hand-written graph deletes none of its own, so neither does the row
it is compared with; ``SF runtime, retention`` shows what the runtime's own deletion adds.

Target 2: starting a run (find the compiled flow, start its first step) ≤ 10 ms with a warm
cache (the design document asks < 200 ms): the time from the ``runtime.run("name", inputs)``
call until the first step's tool body starts (``time.perf_counter()`` inside the tool),
warm (same runtime, graph cached) and cold (a fresh ``FlowRuntime`` per run).

Variants are measured round-robin (one rep of each, then the next rep); within a rep they take
turns run by run (``--interleave run``, the default: each SF run has LG runs made within
milliseconds of it) or run in blocks of ``--runs`` (``--interleave block``, how it measured before
2026-11-26); medians are quoted.

Usage::

    python benchmarks/bench_runtime.py [--quick] [--reps N] [--runs N] [--no-pg] [--profile]
                                        [--only steps|target|components|start|profile] [--interleave run|block]

``--only target`` measures only the target rows and their baselines (more reps in the same
time). Each target row shows a 95% bootstrap interval of its ratio: on a shared, noisy
machine a ratio's median moves by ±0.1 between runs, and the interval says whether a shape
is above the target or only drawn there by noise.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from soloflow_core.flow.executors import ExecutorRegistry
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_langgraph.compile.graph import compile_flow
from soloflow_langgraph.compile.step_call import call_with_limit, inspect_executor
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

TARGET_RATIO = 1.3
TARGET_START_MS = 10.0
DESIGN_START_MS = 200.0
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
AGENT = "bench"

# ----------------------------------------------------------------------------- the tool


def work(x: int, step: str) -> int:
    """The step body: trivial, so that what is measured is the machinery around it."""
    return x + 1


@tool
def work_tool(x: int, step: str) -> int:
    """Add one (the LangChain tool variant of ``work``)."""
    return x + 1


FIRST_STEP_AT: list[float] = []


def mark(x: int, step: str) -> int:
    """``work`` that records when the first step's body starts."""
    if step == "s0":
        FIRST_STEP_AT.append(time.perf_counter())
    return x + 1


TOOLS: dict[str, tuple[Any, bool]] = {"fn": (work, False), "@tool": (work_tool, True)}

# ----------------------------------------------------------------------------- the flows


def shape_edges(shape: str) -> list[tuple[str, list[str]]]:
    """(step id, dependencies) in order; the first dependency feeds the step's ``x``."""
    if shape.startswith("chain"):
        n = int(shape[5:])
        return [(f"s{i}", [] if i == 0 else [f"s{i - 1}"]) for i in range(n)]
    if shape == "diamond":
        return [
            ("s0", []),
            ("b1", ["s0"]),
            ("b2", ["s0"]),
            ("b3", ["s0"]),
            ("d", ["b1", "b2", "b3"]),
        ]
    raise ValueError(shape)


def make_flow(name: str, shape: str, skill_key: str) -> FlowDefinition:
    steps = [
        FlowStep(
            id=sid,
            skill_key=skill_key,
            depends_on=deps,
            side_effects=False,
            input_map={"x": "{{_trigger.x}}" if not deps else f"{{{{{deps[0]}}}}}", "step": sid},
        )
        for sid, deps in shape_edges(shape)
    ]
    return FlowDefinition(
        name=name,
        steps=steps,
        input_schema={
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
        },
    )


def _merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class LGState(TypedDict, total=False):
    inputs: dict[str, Any]
    results: Annotated[dict[str, Any], _merge]


def hand_written(shape: str, fn: Any, is_tool: bool, checkpointer: Any) -> Any:
    """The baseline: the same steps as a hand-written LangGraph graph."""
    g = StateGraph(LGState)

    def node(sid: str, dep: str | None) -> Callable[[LGState], dict[str, Any]]:
        def run(state: LGState) -> dict[str, Any]:
            x = state["results"][dep] if dep else state["inputs"]["x"]
            out = fn.invoke({"x": x, "step": sid}) if is_tool else fn(x=x, step=sid)
            return {"results": {sid: out}}

        return run

    edges = shape_edges(shape)
    for sid, deps in edges:
        g.add_node(sid, node(sid, deps[0] if deps else None))  # type: ignore[call-overload]
        if not deps:
            g.add_edge(START, sid)
        elif len(deps) == 1:
            g.add_edge(deps[0], sid)
        else:
            g.add_edge(deps, sid)
    has_dependents = {d for _, deps in edges for d in deps}
    for sid, _ in edges:
        if sid not in has_dependents:
            g.add_edge(sid, END)
    return g.compile(checkpointer=checkpointer)


# ----------------------------------------------------------------------------- checkpointers


def sqlite_saver(path: Path) -> SqliteSaver:
    """As ``runtime.support.open_checkpointer`` builds it for a SQLite store."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def pg_saver(url: str) -> Any:
    """As ``runtime.support.open_checkpointer`` builds it for a PostgreSQL store."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)  # type: ignore[arg-type]
    saver.setup()
    return saver


def close_saver(saver: Any) -> None:
    conn = getattr(saver, "conn", None)
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


# ----------------------------------------------------------------------------- measuring


@dataclass
class Variant:
    """One row: ``run(i)`` runs the flow once; ``cleanup()`` runs after each rep, untimed."""

    config: str
    who: str
    run: Callable[[int], Any]
    cleanup: Callable[[], float] | None = None


def graph_variant(config: str, who: str, graph: Any, saver: Any, runs: int) -> Variant:
    threads: list[str] = []
    durable = saver is not None

    def run(i: int) -> Any:
        tid = uuid.uuid4().hex
        threads.append(tid)
        cfg: Any = {"configurable": {"thread_id": tid}}
        inp = {"inputs": {"x": i}}
        if durable:
            return graph.invoke(inp, cfg, durability="sync")
        return graph.invoke(inp, cfg)

    def cleanup() -> float:
        """Deletes this rep's checkpoints; the median ms per ``delete_thread``."""
        times = []
        if saver is not None:
            for tid in threads:
                t0 = time.perf_counter()
                saver.delete_thread(tid)
                times.append(time.perf_counter() - t0)
        threads.clear()
        return statistics.median(times) * 1000 if times else float("nan")

    return Variant(config, who, run, cleanup)


RETAINING = "SF runtime, retention"
SYNC = "SF runtime, sync"
"""The runtime with ``durability="sync"``: LangGraph's checkpoint before every superstep as well
as the journal, shown beside the target row."""
"""The runtime with its default retention (checkpoints deleted by the runtime as runs end,
inside the timing): shown beside the target row, whose checkpoints go untimed like LG's."""


def runtime_variant(
    config: str, who: str, runtime: FlowRuntime, flow: FlowDefinition | str
) -> Variant:
    """A runtime's runs. With ``retention="keep"`` its checkpoints are deleted after each rep,
    outside the timing — as the ``LG`` and ``SF graph`` rows' are."""
    kept: list[str] = []

    def run(i: int) -> Any:
        res = runtime.run(flow, {"x": i})
        if res.status != "completed":
            raise RuntimeError(f"{who} {config}: run ended {res.status}: {res.errors}")
        if runtime.retention == "keep":
            kept.append(res.run_id)
        return res

    def cleanup() -> float:
        times = []
        for tid in kept:
            t0 = time.perf_counter()
            runtime.checkpointer.delete_thread(tid)
            times.append(time.perf_counter() - t0)
        kept.clear()
        return statistics.median(times) * 1000 if times else float("nan")

    return Variant(config, who, run, cleanup if runtime.retention == "keep" else None)


def measure(
    variants: list[Variant],
    reps: int,
    runs: int,
    deletes: dict[str, list[float]],
    interleave: str = "run",
) -> dict[int, list[float]]:
    """ms per run of each variant (index → one entry per rep); the cleanups' ``delete_thread``
    ms go to ``deletes[config]``. ``interleave="run"``: within a rep, the variants take turns
    run by run (run 1 of each, then run 2 of each, ...), each run timed on its own; ``"block"``:
    each variant runs its ``runs`` runs in one block, then the next variant. Either way the
    reps go round-robin. Taking turns run by run pairs each SF run with an LG run made within
    milliseconds of it: on a shared machine whose speed drifts over tenths of a second, the
    ratio of the two then moves less from rep to rep."""
    times: dict[int, list[float]] = {k: [] for k in range(len(variants))}
    for v in variants:  # warm-up: imports, caches, first pages, first compilation
        for i in range(2):
            v.run(i)
        if v.cleanup:
            v.cleanup()

    def clean(v: Variant) -> None:
        if v.cleanup:
            d = v.cleanup()
            if d == d:
                deletes.setdefault(v.config, []).append(d)

    for _ in range(reps):
        if interleave == "block":
            for k, v in enumerate(variants):
                gc.collect()
                start = time.perf_counter()
                for i in range(runs):
                    v.run(i)
                times[k].append((time.perf_counter() - start) * 1000 / runs)
                clean(v)
            continue
        spent = [0.0] * len(variants)
        gc.collect()
        for i in range(runs):
            for k, v in enumerate(variants):
                start = time.perf_counter()
                v.run(i)
                spent[k] += time.perf_counter() - start
        for k, v in enumerate(variants):
            times[k].append(spent[k] * 1000 / runs)
            clean(v)
    return times


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


# ----------------------------------------------------------------------------- PostgreSQL


def open_pg(url: str) -> Store | None:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            pass
        store = Store.open(url)
    except Exception as exc:  # not reachable, or not at this store's revision
        print(f"PostgreSQL at {url} not used: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        return None
    vacuum_pg(url)
    return store


VACUUMED = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "sf_flow_runs",
    "sf_flow_step_runs",
    "sf_flow_transitions",
)


def vacuum_pg(url: str) -> None:
    """``VACUUM ANALYZE`` the tables both sides write, before measuring: a server with
    autovacuum off (this machine's) otherwise carries the dead rows of every earlier run into
    this one's inserts and index scans, on both sides but not equally."""
    import psycopg

    close_saver(pg_saver(url))  # LangGraph's checkpoint tables exist from here on
    with psycopg.connect(url, autocommit=True) as conn:
        off = conn.execute("SHOW autovacuum").fetchone()
        t0 = time.perf_counter()
        conn.execute(f"VACUUM ANALYZE {', '.join(VACUUMED)}")
    print(
        f"PostgreSQL: vacuumed {len(VACUUMED)} tables in {time.perf_counter() - t0:.1f} s "
        f"(autovacuum {off[0] if off else '?'})"
    )


def pg_cleanup(store: Store, user_id: str) -> int:
    """Delete what this run created in the shared PostgreSQL database; flow runs removed."""
    import sqlalchemy as sa

    from soloflow_core.store import schema as t

    with store.db.write() as conn:  # maintenance of our own rows
        ids = sa.select(t.flow_runs.c.id).where(t.flow_runs.c.user_id == user_id)
        conn.execute(sa.delete(t.flow_transitions).where(t.flow_transitions.c.run_id.in_(ids)))
        conn.execute(sa.delete(t.flow_step_runs).where(t.flow_step_runs.c.run_id.in_(ids)))
        n = conn.execute(sa.delete(t.flow_runs).where(t.flow_runs.c.user_id == user_id)).rowcount
        conn.execute(sa.delete(t.flows).where(t.flows.c.user_id == user_id))
    return int(n or 0)


# ----------------------------------------------------------------------------- sections


def per_step(
    opts: argparse.Namespace,
    tmp: Path,
    store: Store,
    pg: Store | None,
    pg_user: str,
    deletes: dict[str, list[float]],
) -> list[dict[str, Any]]:
    """Target 1; one dict per (shape, tool, config, who) row."""
    reps, runs = opts.reps, opts.runs
    rows: list[dict[str, Any]] = []
    shapes = ["chain5", "chain10", "diamond"]
    savers: list[Any] = []
    runtimes: list[Any] = []
    for shape in shapes:
        for tool_kind, (fn, is_tool) in TOOLS.items():
            key = "work_tool" if is_tool else "work"
            registry = ExecutorRegistry()
            registry.register(key, fn)
            name = f"bench-{shape}-{'tool' if is_tool else 'fn'}"
            flow = make_flow(name, shape, key)
            store.register_flow(flow, user_id="bench", agent_id=AGENT, source="user-submitted")
            variants: list[Variant] = []
            full = not opts.target_only  # --only target: LG and SF runtime on sqlite and postgres
            # (a) no checkpointer
            variants += (
                []
                if not full
                else [
                    graph_variant("none", "LG", hand_written(shape, fn, is_tool, None), None, runs),
                    graph_variant(
                        "none", "SF graph", compile_flow(flow, registry=registry), None, runs
                    ),
                ]
            )
            # (b) InMemorySaver
            m1, m2, m3 = InMemorySaver(), InMemorySaver(), InMemorySaver()
            variants += (
                []
                if not full
                else [
                    graph_variant("memory", "LG", hand_written(shape, fn, is_tool, m1), m1, runs),
                    graph_variant(
                        "memory",
                        "SF graph",
                        compile_flow(flow, registry=registry, checkpointer=m2),
                        m2,
                        runs,
                    ),
                    runtime_variant(
                        "memory",
                        "SF runtime (no store)",
                        FlowRuntime(None, registry=registry, checkpointer=m3),
                        flow,
                    ),
                ]
            )
            # (c) SqliteSaver on a file, durability="sync"
            s1 = sqlite_saver(tmp / f"lg-{name}.db")
            s2 = sqlite_saver(tmp / f"sfg-{name}.db")
            rt = FlowRuntime(
                store, registry=registry, user_id="bench", agent_id=AGENT, retention="keep"
            )
            rt_del = FlowRuntime(store, registry=registry, user_id="bench", agent_id=AGENT)
            rt_sync = FlowRuntime(
                store,
                registry=registry,
                user_id="bench",
                agent_id=AGENT,
                retention="keep",
                durability="sync",
            )
            savers += [s1, s2]
            runtimes += [rt, rt_del, rt_sync]
            variants += [
                graph_variant("sqlite", "LG", hand_written(shape, fn, is_tool, s1), s1, runs),
                *(
                    [
                        graph_variant(
                            "sqlite",
                            "SF graph",
                            compile_flow(flow, registry=registry, checkpointer=s2),
                            s2,
                            runs,
                        )
                    ]
                    if full
                    else []
                ),
                runtime_variant("sqlite", "SF runtime", rt, name),
                *([runtime_variant("sqlite", RETAINING, rt_del, name)] if full else []),
                *([runtime_variant("sqlite", SYNC, rt_sync, name)] if full else []),
            ]
            # (d) PostgreSQL
            if pg is not None:
                pg.register_flow(flow, user_id=pg_user, agent_id=AGENT, source="user-submitted")
                p1, p2 = pg_saver(PG_URL), pg_saver(PG_URL)
                prt = FlowRuntime(
                    pg, registry=registry, user_id=pg_user, agent_id=AGENT, retention="keep"
                )
                prt_del = FlowRuntime(pg, registry=registry, user_id=pg_user, agent_id=AGENT)
                prt_sync = FlowRuntime(
                    pg,
                    registry=registry,
                    user_id=pg_user,
                    agent_id=AGENT,
                    retention="keep",
                    durability="sync",
                )
                savers += [p1, p2]
                runtimes += [prt, prt_del, prt_sync]
                variants += [
                    graph_variant("postgres", "LG", hand_written(shape, fn, is_tool, p1), p1, runs),
                    *(
                        [
                            graph_variant(
                                "postgres",
                                "SF graph",
                                compile_flow(flow, registry=registry, checkpointer=p2),
                                p2,
                                runs,
                            )
                        ]
                        if full
                        else []
                    ),
                    runtime_variant("postgres", "SF runtime", prt, name),
                    *([runtime_variant("postgres", RETAINING, prt_del, name)] if full else []),
                    *([runtime_variant("postgres", SYNC, prt_sync, name)] if full else []),
                ]
            t0 = time.perf_counter()
            times = measure(variants, reps, runs, deletes, opts.interleave)
            n_steps = len(flow.steps)
            for k, v in enumerate(variants):
                rows.append(
                    {
                        "shape": shape,
                        "tool": tool_kind,
                        "config": v.config,
                        "who": v.who,
                        "steps": n_steps,
                        "ms": statistics.median(times[k]),
                        "min": min(times[k]),
                        "reps": len(times[k]),
                        "samples": times[k],
                    }
                )
            print(
                f"  measured {shape} / {tool_kind}: {len(variants)} variants × {reps} reps × {runs} runs "
                f"in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
    for r in runtimes:
        r.close()
    for s in savers:
        close_saver(s)
    return rows


def print_per_step(rows: list[dict[str, Any]]) -> None:
    print(
        "\nTarget 1: per-run and per-step time, medians over interleaved reps "
        "(SF ÷ LG = ratio to the hand-written graph with the same checkpointer)"
    )
    print(
        f"  {'shape':<8} {'tool':<6} {'config':<9} {'variant':<22} {'ms/run':>8} {'min':>7} "
        f"{'ms/step':>8} {'SF÷LG':>6} {'+ms/step':>9}  {'95% CI of SF÷LG':<15}"
    )
    base: dict[tuple[str, str, str], dict[str, Any]] = {
        (r["shape"], r["tool"], r["config"]): r for r in rows if r["who"] == "LG"
    }
    for r in rows:
        b = base[(r["shape"], r["tool"], r["config"])]
        per = r["ms"] / r["steps"]
        ratio = "" if r["who"] == "LG" else f"{r['ms'] / b['ms']:.2f}x"
        extra = "" if r["who"] == "LG" else f"{(r['ms'] - b['ms']) / r['steps']:+.2f}"
        target = r["config"] in ("sqlite", "postgres") and r["who"] == "SF runtime"
        ci = ""
        if target:
            lo, hi = ratio_ci(r["samples"], b["samples"])
            r["ci"] = (lo, hi)
            ci = f"{lo:.2f}–{hi:.2f}x ◀ target"
        print(
            f"  {r['shape']:<8} {r['tool']:<6} {r['config']:<9} {r['who']:<22} {r['ms']:>8.2f} "
            f"{r['min']:>7.2f} {per:>8.3f} {ratio:>6} {extra:>9}  {ci}"
        )
    print(
        "  (ms/step = ms/run ÷ flow steps; 95% CI: bootstrap over the reps, each resample keeping a "
        "rep's SF and LG times together)"
    )
    print(
        "\nSummary (same checkpointer, checkpoints deleted untimed after each rep on every row; LG = "
        "durability=sync, LangGraph's durable mode; SF runtime = its default durability=exit, the run "
        "record and the synchronous step journal keeping steps exactly-once):"
    )
    for config in ("sqlite", "postgres"):
        for who in ("SF runtime", RETAINING, SYNC):
            sel = [r for r in rows if r["config"] == config and r["who"] == who]
            if not sel:
                continue
            ratios = [r["ms"] / base[(r["shape"], r["tool"], config)]["ms"] for r in sel]
            journal = [
                (r["ms"] - g["ms"]) / r["steps"]
                for r in sel
                for g in rows
                if g["who"] == "SF graph"
                and (g["shape"], g["tool"], g["config"]) == (r["shape"], r["tool"], config)
            ]
            verdict = (
                f"target ≤ {TARGET_RATIO}x: {'met' if max(ratios) <= TARGET_RATIO else 'NOT met'}"
                if who == "SF runtime"
                else "(retention's deletions inside the timing; not the target row)"
                if who == RETAINING
                else "(LangGraph's checkpoint before every superstep too; not the target row)"
            )
            vs_graph = (
                f"; runtime − SF graph: {statistics.median(journal):+.2f} ms/step"
                if journal
                else ""
            )
            print(
                f"  {config:<9} {who} ÷ LG: {min(ratios):.2f}–{max(ratios):.2f}x (median "
                f"{statistics.median(ratios):.2f}x); {verdict}{vs_graph}"
            )
            if who == "SF runtime":
                above = [f"{r['shape']}/{r['tool']}" for r in sel if r["ci"][0] > TARGET_RATIO]
                unsure = [
                    f"{r['shape']}/{r['tool']}"
                    for r in sel
                    if r["ci"][0] <= TARGET_RATIO < r["ci"][1]
                ]
                print(
                    f"  {'':<9} by the 95% CIs: above {TARGET_RATIO}x: {', '.join(above) or 'none'}; "
                    f"undecided (CI spans {TARGET_RATIO}x): {', '.join(unsure) or 'none'}; "
                    f"below: {len(sel) - len(above) - len(unsure)} of {len(sel)}"
                )


def ratio_ci(sf: list[float], lg: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of median(sf) ÷ median(lg): reps are resampled with
    replacement, a rep's two times together (they were measured moments apart)."""
    rng = random.Random(seed)
    k = len(sf)
    stats = sorted(
        statistics.median(sf[i] for i in pick) / statistics.median(lg[i] for i in pick)
        for pick in ([rng.randrange(k) for _ in range(k)] for _ in range(n))
    )
    return stats[int(0.025 * (n - 1))], stats[int(0.975 * (n - 1))]


def components(opts: argparse.Namespace, store: Store) -> None:
    """The pieces of the per-step path, each timed on its own (medians of many calls)."""
    n = 60 if opts.quick else 200
    flow = make_flow("bench-components", "chain5", "work")
    out: list[tuple[str, float, str]] = []

    def timeit(fn: Callable[[], Any], count: int) -> float:
        samples = []
        for _ in range(count):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples)

    info = inspect_executor(work)
    out.append(("work(**kwargs) directly", timeit(lambda: work(x=1, step="s"), n) * 1e6, "µs"))
    out.append(
        (
            "call_with_limit(work): daemon thread + Event",
            timeit(
                lambda: call_with_limit(
                    work, info, {"x": 1, "step": "s"}, timeout=120, key=None, where="bench"
                ),
                n,
            )
            * 1e6,
            "µs",
        )
    )
    from soloflow_langgraph.compile.run_watch import RunWatch

    watch = RunWatch(1.0)
    out.append(
        (
            "RunWatch.call(work): in line, deadline published",
            timeit(
                lambda: watch.call(
                    work,
                    info,
                    {"x": 1, "step": "s"},
                    timeout=120,
                    key=None,
                    step_key="s",
                    attempt=1,
                    where="bench",
                ),
                n,
            )
            * 1e6,
            "µs",
        )
    )
    tinfo = inspect_executor(work_tool)
    out.append(
        (
            "work_tool.invoke directly",
            timeit(lambda: work_tool.invoke({"x": 1, "step": "s"}), n) * 1e6,
            "µs",
        )
    )
    out.append(
        (
            "call_with_limit(work_tool)",
            timeit(
                lambda: call_with_limit(
                    work_tool, tinfo, {"x": 1, "step": "s"}, timeout=120, key=None, where="bench"
                ),
                n,
            )
            * 1e6,
            "µs",
        )
    )
    run_ids: list[str] = []

    def start() -> None:
        run_ids.append(
            store.start_flow_run(flow, {"x": 1}, user_id="bench", agent_id=AGENT, owner="bench")
        )

    out.append(("Store.start_flow_run", timeit(start, n // 2) * 1000, "ms"))
    journal = store.step_journal(run_ids[0])
    keys = iter(range(10**6))
    begins: list[float] = []
    ends: list[float] = []
    for _ in range(n):
        k = f"k{next(keys)}"
        t0 = time.perf_counter()
        journal.begin(k, k)
        t1 = time.perf_counter()
        journal.succeeded(k, 2)
        begins.append(t1 - t0)
        ends.append(time.perf_counter() - t1)
    out.append(("StoreStepJournal.begin (new step)", statistics.median(begins) * 1000, "ms"))
    out.append(("StoreStepJournal.succeeded", statistics.median(ends) * 1000, "ms"))
    fin = iter(run_ids[1:])
    out.append(
        (
            "Store.finish_flow_run",
            timeit(
                lambda: store.finish_flow_run(
                    next(fin), status="completed", outputs={"output": 1}, outcome="completed"
                ),
                len(run_ids) - 1,
            )
            * 1000,
            "ms",
        )
    )
    print("\nComponents of SoloFlow's per-step path (SQLite file store; medians of single calls)")
    for label, v, unit in out:
        print(
            f"  {label:<46} {v:>9.1f} {unit}" if unit == "µs" else f"  {label:<46} {v:>9.3f} {unit}"
        )


def start_latency(
    opts: argparse.Namespace, tmp: Path, store: Store, pg: Store | None, pg_user: str
) -> None:
    """Target 2: from ``runtime.run("name", inputs)`` to the first step's tool body; beside it
    the hand-written graph with the same checkpointer, from ``invoke`` to its first node."""
    warm_n, cold_n = (40, 8) if opts.quick else (200, 30)
    registry = ExecutorRegistry()
    registry.register("mark", mark)
    flow = make_flow("bench-start", "chain5", "mark")
    targets: list[tuple[str, Store, str]] = [("sqlite", store, "bench")]
    if pg is not None:
        targets.append(("postgres", pg, pg_user))
    print(
        f"\nTarget 2: start latency — runtime.run('bench-start', inputs) → first tool body "
        f"(chain5; warm {warm_n} runs, cold {cold_n} fresh runtimes; LG = hand-written graph, "
        "same checkpointer, invoke → first node, interleaved with the warm runs)"
    )
    print(f"  {'store':<9} {'case':<46} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for label, st, user in targets:
        st.register_flow(flow, user_id=user, agent_id=AGENT, source="user-submitted")

        def sample(rt: FlowRuntime, i: int) -> float:
            FIRST_STEP_AT.clear()
            t0 = time.perf_counter()
            res = rt.run("bench-start", {"x": i})
            if res.status != "completed" or not FIRST_STEP_AT:
                raise RuntimeError(f"start run ended {res.status}")
            return (FIRST_STEP_AT[0] - t0) * 1000

        saver = sqlite_saver(tmp / "lg-start.db") if label == "sqlite" else pg_saver(PG_URL)
        lg = hand_written("chain5", mark, False, saver)

        def sample_lg(i: int, lg: Any = lg, saver: Any = saver) -> float:
            FIRST_STEP_AT.clear()
            tid = uuid.uuid4().hex
            t0 = time.perf_counter()
            lg.invoke({"inputs": {"x": i}}, {"configurable": {"thread_id": tid}}, durability="sync")
            took = (FIRST_STEP_AT[0] - t0) * 1000
            saver.delete_thread(tid)
            return took

        rt = FlowRuntime(st, registry=registry, user_id=user, agent_id=AGENT)
        first = sample(rt, 0)  # the first run of a fresh runtime: lookup + compile
        sample_lg(0)
        warm, base = [], []
        for i in range(warm_n):
            gc.collect()
            warm.append(sample(rt, i))
            gc.collect()
            base.append(sample_lg(i))
        rt.close()  # waits for its queued checkpoint deletions, then closes its saver
        close_saver(saver)
        cold, build = [], []
        for i in range(cold_n):
            gc.collect()
            t0 = time.perf_counter()
            fresh = FlowRuntime(st, registry=registry, user_id=user, agent_id=AGENT)
            build.append((time.perf_counter() - t0) * 1000)
            cold.append(sample(fresh, i))
            fresh.close()
        both = [a + b for a, b in zip(build, cold, strict=True)]
        for case, vals in (
            ("warm: same runtime, graph cached", warm),
            ("LG baseline: invoke → first node (warm)", base),
            ("cold: fresh FlowRuntime, run() → first step", cold),
            ("cold: FlowRuntime() construction alone", build),
            ("cold: construction + run() → first step", both),
        ):
            print(
                f"  {label:<9} {case:<46} {statistics.median(vals):>10.2f} {pct(vals, 0.95):>8.2f} "
                f"{max(vals):>8.2f}"
            )
        print(f"  {label:<9} {'(first run of the warm runtime)':<46} {first:>10.2f}")
        med = statistics.median(warm)
        print(
            f"  {label:<9} warm target ≤ {TARGET_START_MS:g} ms: {'met' if med <= TARGET_START_MS else 'NOT met'}"
            f" (median {med:.2f}, p95 {pct(warm, 0.95):.2f}; SoloFlow adds "
            f"{med - statistics.median(base):+.2f} ms to LG's own start); design < {DESIGN_START_MS:g} ms "
            f"cold (p95): {'met' if pct(both, 0.95) < DESIGN_START_MS else 'NOT met'}"
        )


def profile(opts: argparse.Namespace, tmp: Path, store: Store) -> None:
    """cProfile of ``SF runtime`` on chain10 with the plain-function tool."""
    registry = ExecutorRegistry()
    registry.register("work", work)
    flow = make_flow("bench-profile", "chain10", "work")
    store.register_flow(flow, user_id="bench", agent_id=AGENT, source="user-submitted")
    rt = FlowRuntime(store, registry=registry, user_id="bench", agent_id=AGENT)
    for i in range(3):
        rt.run("bench-profile", {"x": i})
    runs = 30 if opts.quick else 100
    import soloflow_langgraph.runtime.invocation as runtime_module

    # The run's own thread (run_watch) is profiled too: one profiler per thread, merged.
    prof, in_run = cProfile.Profile(), cProfile.Profile()
    watched = runtime_module.run_watched

    def profiled(target: Callable[[], Any], watch: Any) -> Any:
        def inner() -> Any:
            in_run.enable()
            try:
                return target()
            finally:
                in_run.disable()

        return watched(inner, watch)

    runtime_module.run_watched = profiled  # type: ignore[assignment]
    t0 = time.perf_counter()
    try:
        prof.enable()
        for i in range(runs):
            rt.run("bench-profile", {"x": i})
        prof.disable()
    finally:
        runtime_module.run_watched = watched
    wall = (time.perf_counter() - t0) * 1000 / runs
    rt.close()
    print(
        f"\ncProfile: SF runtime, SQLite, chain10, {runs} runs ({wall:.1f} ms/run under the profiler); "
        "the caller's thread and the run's own thread, merged (LangGraph's worker threads are not profiled)"
    )
    stats = pstats.Stats(prof)
    stats.add(in_run)
    _print_stats(stats, (("cumulative", 45), ("tottime", 25)))

    # The step journal on its own: begin + succeeded of new steps, as a step does them.
    run_id = store.start_flow_run(flow, {"x": 1}, user_id="bench", agent_id=AGENT, owner="bench")
    journal = store.step_journal(run_id)
    pairs = 150 if opts.quick else 500
    for k in range(20):
        journal.begin(f"w{k}", "w")
        journal.succeeded(f"w{k}", k)
    t0 = time.perf_counter()
    for k in range(pairs):
        journal.begin(f"p{k}", "p")
        journal.succeeded(f"p{k}", k)
    plain = (time.perf_counter() - t0) * 1000 / pairs
    prof = cProfile.Profile()
    prof.enable()
    for k in range(pairs):
        journal.begin(f"q{k}", "q")
        journal.succeeded(f"q{k}", k)
    prof.disable()
    st = pstats.Stats(prof)
    total = st.total_tt  # type: ignore[attr-defined]
    groups = {"sqlite3 execute/commit (the database)": 0.0, "SQLAlchemy": 0.0, "other": 0.0}
    for (file, _, func), (_, _, tt, _, _) in st.stats.items():  # type: ignore[attr-defined]
        if "sqlite3" in func or func in (
            "<method 'execute' of 'sqlite3.Cursor' objects>",
            "<method 'commit' of 'sqlite3.Connection' objects>",
        ):
            groups["sqlite3 execute/commit (the database)"] += tt
        elif "sqlalchemy" in file:
            groups["SQLAlchemy"] += tt
        else:
            groups["other"] += tt
    print(
        f"\ncProfile: StoreStepJournal.begin + succeeded, {pairs} new steps ({plain:.3f} ms per pair "
        f"without the profiler, {total * 1000 / pairs:.3f} ms with it); own time by origin:"
    )
    for label, tt in groups.items():
        print(f"  {label:<40} {tt * 1000 / pairs:>7.3f} ms per pair  {tt / total:>5.0%}")
    _print_stats(prof, (("tottime", 20),))


def _print_stats(
    prof: cProfile.Profile | pstats.Stats, orders: tuple[tuple[str, int], ...]
) -> None:
    for key, n in orders:
        buf = io.StringIO()
        stats = prof if isinstance(prof, pstats.Stats) else pstats.Stats(prof)
        stats.stream = buf  # type: ignore[attr-defined]
        stats.strip_dirs().sort_stats(key).print_stats(n)
        text = buf.getvalue()
        print(f"--- sorted by {key} ---")
        print(text[text.find("   ncalls") :].rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer reps and runs")
    parser.add_argument("--reps", type=int, default=None, help="interleaved reps per variant (≥ 3)")
    parser.add_argument("--runs", type=int, default=None, help="flow runs per rep")
    parser.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of SF runtime"
    )
    parser.add_argument(
        "--interleave",
        choices=["run", "block"],
        default="run",
        help="within a rep, variants take turns run by run (default) or run in blocks",
    )
    parser.add_argument(
        "--only",
        choices=["steps", "target", "start", "components", "profile"],
        default=None,
        help="one section; 'target' is 'steps' with only the target rows and their baselines "
        "(LG and SF runtime on sqlite and postgres), 21 reps by default",
    )
    opts = parser.parse_args(argv)
    opts.target_only = opts.only == "target"
    opts.reps = max(3, opts.reps or (5 if opts.quick else 21 if opts.target_only else 11))
    opts.runs = opts.runs or (4 if opts.quick else 10)

    tmp = Path(tempfile.mkdtemp(prefix="soloflow-bench-rt-"))
    store = Store.open(f"sqlite:///{tmp / 'store.db'}")
    pg = None if opts.no_pg else open_pg(opts.pg_url)
    pg_user = f"bench_rt_{uuid.uuid4().hex[:12]}"
    print(
        f"bench_runtime: Python {sys.version.split()[0]}, {opts.reps} reps × {opts.runs} runs "
        f"(interleaved by {opts.interleave}), "
        f"medians; SQLite store {tmp / 'store.db'}; PostgreSQL {'on (user ' + pg_user + ')' if pg else 'off'}"
    )
    started = time.perf_counter()
    try:
        if opts.only in (None, "steps", "target"):
            deletes: dict[str, list[float]] = {}
            rows = per_step(opts, tmp, store, pg, pg_user, deletes)
            print_per_step(rows)
            print(
                "  checkpoint delete_thread per run (untimed in the LG / SF graph rows, inside "
                "SF runtime's): "
                + ", ".join(f"{c} {statistics.median(v):.2f} ms" for c, v in deletes.items())
            )
        if opts.only in (None, "components"):
            components(opts, store)
        if opts.only in (None, "start"):
            start_latency(opts, tmp, store, pg, pg_user)
        if opts.profile or opts.only == "profile":
            profile(opts, tmp, store)
    finally:
        if pg is not None:
            removed = pg_cleanup(pg, pg_user)
            print(f"PostgreSQL: removed {removed} flow runs and the flows of user {pg_user}")
            pg.close()
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
