"""What capture costs per tool call, measured side by side in one run.

Each loop runs with (i) no callbacks, (ii) a no-op ``BaseCallbackHandler`` and (iii)
``SoloFlowCallbackHandler`` writing to a temporary SQLite file:

1. ``tool.invoke``, each call its own root run: for SoloFlow every call is a whole task run,
   so every call also commits one run to the database (by design: runs are durable);
2. ``tool.invoke`` × N inside one root run: per-call capture, one write at the end;
3. a ``create_agent`` agent (scripted model, one tool call per turn) with ``invoke``, plus
   (iv) the SoloFlow handler with its store write skipped, to split capture from the write;
4. the same agent with ``ainvoke``, plus (iv) the handler with ``run_inline=False``;
5. the events of one real agent invocation replayed into the handler: its own CPU cost,
   without LangChain's dispatch and with little noise;
6. runs of 3, 10 and 30 tool calls: agent ``invoke`` and replay, each with the run's
   end-of-run commit (one ``Store.add_run``) amortised over its tool calls.

Variants are measured round-robin (one rep of each, then the next rep) and the median of the
reps is reported, so drift on a noisy machine hits every variant alike.

Usage::

    python benchmarks/bench_capture.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool

from soloflow_core.models import TaskRun
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.tracing import Span
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

TARGET_US = 50.0
NONE, NOOP, SOLO = "(i) no callbacks", "(ii) no-op handler", "(iii) SoloFlow handler"
NO_WRITE = "(iv) SoloFlow, store write skipped"
NOT_INLINE = "(iv) SoloFlow, run_inline=False"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class NoOpHandler(BaseCallbackHandler):
    """Receives every event and does nothing: the cost of being a callback at all."""

    run_inline = True

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        # The base class raises NotImplementedError here, which makes LangChain fall back to
        # on_llm_start with the messages rendered as text: not a no-op.
        pass


class NotInline(SoloFlowCallbackHandler):
    """LangChain's default: under ainvoke a sync handler's events go through an executor."""

    run_inline = False


class CaptureOnly(SoloFlowCallbackHandler):
    """Builds the run like the real handler but skips the database write."""

    def _write(self, run: TaskRun, *, spans: Sequence[Span] = ()) -> bool:
        self.last_run = run
        return True


class Recorder(BaseCallbackHandler):
    """Records the callback events of one invocation, to replay them."""

    run_inline = True

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("on_"):
            return lambda *a, **kw: self.events.append((name, a, kw))
        return super().__getattribute__(name)


def _script(turns: int) -> Callable[[list[BaseMessage]], AIMessage]:
    def script(messages: list[BaseMessage]) -> AIMessage:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < turns:
            call = {
                "name": "add",
                "args": {"a": done, "b": 1},
                "id": f"c{done}",
                "type": "tool_call",
            }
            return AIMessage(content="", tool_calls=[call])
        return AIMessage(content=f"sum done after {done} calls")

    return script


def _config(handler: BaseCallbackHandler | None) -> RunnableConfig:
    return {"callbacks": [handler]} if handler is not None else {}


def measure(variants: dict[str, Callable[[], int]], reps: int) -> dict[str, list[float]]:
    """µs per tool call of each variant, one entry per rep, round-robin."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm-up: imports, caches, first DB pages
        fn()
    for _ in range(reps):
        for name, fn in variants.items():
            gc.collect()
            start = time.perf_counter()
            calls = fn()
            times[name].append((time.perf_counter() - start) * 1e6 / calls)
    return times


def report(title: str, times: dict[str, list[float]], note: str = "") -> dict[str, float]:
    """Print a table; return each variant's µs added per tool call vs the no-op handler."""
    print(f"\n{title}")
    if note:
        print(f"  ({note})")
    med = {name: statistics.median(v) for name, v in times.items()}
    base = med.get(NONE)
    print(f"  {'variant':<38} {'median µs/call':>14} {'min':>8} {'vs (i)':>7} {'vs (ii)':>9}")
    added: dict[str, float] = {}
    for name, v in times.items():
        ratio = f"{med[name] / base:.2f}x" if base else "-"
        delta = med[name] - med[NOOP] if NOOP in med else med[name]
        if name not in (NONE, NOOP):
            added[name] = delta
        shown = f"{delta:+.1f}" if name not in (NONE, NOOP) else ""
        print(f"  {name:<38} {med[name]:>14.1f} {min(v):>8.1f} {ratio:>7} {shown:>9}")
    return added


RUN_LENGTHS = (3, 10, 30)


def per_length(
    turns: int, store: Store, pm: Any, new: Callable[..., Any], reps: int, quick: bool
) -> tuple[float, float, float, float]:
    """Section 6 for runs of ``turns`` tool calls: the no-op handler's µs per tool call in
    an agent invoke, then the µs per tool call SoloFlow adds to it (with the write), in the
    replay (with the write), and in the replay with the write skipped."""
    agent: Any = create_agent(ScriptedChatModel(script=_script(turns)), tools=[add])
    invokes = max(1, (30 if quick else 60) // turns)
    noop = NoOpHandler()

    def agent_loop(handler: BaseCallbackHandler) -> Callable[[], int]:
        cfg = _config(handler)

        def run() -> int:
            for i in range(invokes):
                agent.invoke({"messages": [("user", f"add things {i}")]}, config=cfg)
            return invokes * turns

        return run

    t_inv = measure({NOOP: agent_loop(noop), SOLO: agent_loop(new())}, reps)
    recorder = Recorder()
    agent.invoke({"messages": [("user", "record me")]}, config=_config(recorder))
    copies = invokes * 2

    def replay(handler: BaseCallbackHandler) -> Callable[[], int]:
        def run() -> int:
            for _ in range(copies):
                for name, args, kw in _fresh_ids(recorder):
                    getattr(handler, name)(*args, **kw)
            return copies * turns

        return run

    t_rep = measure(
        {NOOP: replay(noop), SOLO: replay(new()), NO_WRITE: replay(new(CaptureOnly))}, reps
    )
    a_inv = report(f"6. runs of {turns} tool calls: create_agent invoke ({invokes} per rep)", t_inv)
    a_rep = report(f"6. runs of {turns} tool calls: replayed events ({copies} runs per rep)", t_rep)
    noop_us = statistics.median(t_inv[NOOP])
    return noop_us, a_inv[SOLO], a_rep[SOLO], a_rep[NO_WRITE]


def _fresh_ids(recorder: Recorder) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The recorded events with new run ids: each replay is a new run."""
    ids: dict[Any, uuid.UUID] = {}
    out = []
    for name, args, kw in recorder.events:
        kw = dict(kw)
        for key in ("run_id", "parent_run_id"):
            if kw.get(key) is not None:
                kw[key] = ids.setdefault(kw[key], uuid.uuid4())
        out.append((name, args, kw))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller loops, 7 reps")
    parser.add_argument("--reps", type=int, default=None, help="reps per variant (at least 5)")
    opts = parser.parse_args(argv)
    reps = max(5, opts.reps or (7 if opts.quick else 15))
    n_root, n_tool = (40, 150) if opts.quick else (60, 300)
    invokes, turns = (4, 10) if opts.quick else (8, 10)

    tmp = Path(tempfile.mkdtemp(prefix="soloflow-bench-"))
    store = Store.open(f"sqlite:///{tmp / 'bench.db'}")
    pm = get_plugin_manager()
    noop = NoOpHandler()

    def solo(cls: type[SoloFlowCallbackHandler] = SoloFlowCallbackHandler) -> Any:
        return cls(store=store, user_id="bench", agent_id="bench", plugin_manager=pm)

    handlers: list[SoloFlowCallbackHandler] = []

    def new(cls: type[SoloFlowCallbackHandler] = SoloFlowCallbackHandler) -> Any:
        handlers.append(solo(cls))
        return handlers[-1]

    print(
        f"bench_capture: Python {sys.version.split()[0]}, {reps} reps, median reported; "
        f"SQLite file {tmp / 'bench.db'}"
    )
    started = time.perf_counter()

    def bare(handler: BaseCallbackHandler | None) -> Callable[[], int]:
        cfg = _config(handler)

        def run() -> int:
            for i in range(n_root):
                add.invoke({"a": i, "b": 1}, config=cfg)
            return n_root

        return run

    t1 = measure({NONE: bare(None), NOOP: bare(noop), SOLO: bare(new())}, reps)

    def in_root(handler: BaseCallbackHandler | None) -> Callable[[], int]:
        def body(_: Any) -> int:
            for i in range(n_tool):
                add.invoke({"a": i, "b": 1})  # the root's callbacks reach it via contextvars
            return n_tool

        chain = RunnableLambda(body, name="tool_loop")
        cfg = _config(handler)
        return lambda: chain.invoke(0, config=cfg)

    t2 = measure({NONE: in_root(None), NOOP: in_root(noop), SOLO: in_root(new())}, reps)

    agent: Any = create_agent(
        ScriptedChatModel(script=_script(turns)), tools=[add], name="bench_agent"
    )
    calls = invokes * turns

    def agent_loop(handler: BaseCallbackHandler | None) -> Callable[[], int]:
        cfg = _config(handler)

        def run() -> int:
            for i in range(invokes):
                agent.invoke({"messages": [("user", f"add things {i}")]}, config=cfg)
            return calls

        return run

    t3 = measure(
        {
            NONE: agent_loop(None),
            NOOP: agent_loop(noop),
            SOLO: agent_loop(new()),
            NO_WRITE: agent_loop(new(CaptureOnly)),
        },
        reps,
    )

    loop = asyncio.new_event_loop()

    def async_loop(handler: BaseCallbackHandler | None) -> Callable[[], int]:
        cfg = _config(handler)

        async def go() -> None:
            for i in range(invokes):
                await agent.ainvoke({"messages": [("user", f"add things {i}")]}, config=cfg)

        def run() -> int:
            loop.run_until_complete(go())
            return calls

        return run

    t4 = measure(
        {
            NONE: async_loop(None),
            NOOP: async_loop(noop),
            SOLO: async_loop(new()),
            NOT_INLINE: async_loop(new(NotInline)),
        },
        reps,
    )
    loop.close()

    recorder = Recorder()
    agent.invoke({"messages": [("user", "record me")]}, config=_config(recorder))
    copies = 20 if opts.quick else 40

    def replay(handler: BaseCallbackHandler) -> Callable[[], int]:
        def run() -> int:
            for _ in range(copies):  # fresh run ids per copy: each replay is a new run
                for name, args, kw in _fresh_ids(recorder):
                    getattr(handler, name)(*args, **kw)
            return copies * turns

        return run

    t5 = measure(
        {NOOP: replay(noop), SOLO: replay(new()), NO_WRITE: replay(new(CaptureOnly))}, reps
    )

    lengths = {n: per_length(n, store, pm, new, reps, opts.quick) for n in RUN_LENGTHS}

    report(
        f"1. bare tool.invoke, each call a root run ({n_root} calls per rep)",
        t1,
        "for SoloFlow each call is a whole task run: one database commit per call",
    )
    a2 = report(f"2. tool.invoke × {n_tool} inside one root run (one write at the end)", t2)
    a3 = report(
        f"3. create_agent invoke: {invokes} invokes × {turns} tool turns + a final "
        "turn; µs per tool call, model turn included",
        t3,
        "SoloFlow writes one task run (10 tool calls, 11 model calls) per invoke",
    )
    a4 = report("4. create_agent ainvoke, same loop", t4)
    a5 = report(
        f"5. the events of one agent invocation ({len(recorder.events)} events, {turns} tool "
        "calls) replayed into the handler: its own CPU cost, µs per tool call",
        t5,
        "the no-op row is the replay loop itself",
    )

    print(f"\ntarget: ≤ {TARGET_US:.0f} µs added per tool call vs the no-op handler")
    rows = [
        ("in-memory capture (5, write skipped)", a5[NO_WRITE]),
        ("agent invoke, write skipped (3)", a3[NO_WRITE]),
        ("agent invoke, with the write (3)", a3[SOLO]),
        ("agent ainvoke, with the write (4)", a4[SOLO]),
        ("tool calls in one root, with the write (2)", a2[SOLO]),
        ("replay, with the write (5)", a5[SOLO]),
    ]
    for label, delta in rows:
        print(f"  {label:<44} {delta:+8.1f} µs  {'OK' if delta <= TARGET_US else 'OVER'}")
    per_run = (a5[SOLO] - a5[NO_WRITE]) * turns / 1000
    print(
        f"the write at the end of a run (one Store.add_run, {turns} tool + {turns + 1} model "
        f"calls) ≈ {per_run:.2f} ms, i.e. {per_run * 1000 / turns:.0f} µs per tool call of that run"
    )
    print(
        "\nper run length (6): µs added per tool call vs the no-op handler, the end-of-run "
        "commit included"
    )
    print(
        f"  {'tool calls per run':<20} {'no-op µs/call':>14} {'invoke +µs':>11} {'ratio':>6} "
        f"{'replay +µs':>11} {'write-skipped +µs':>18} {'write ms/run':>13}"
    )
    for n, (noop_us, inv, rep, skipped) in lengths.items():
        ratio = (noop_us + inv) / noop_us
        write_ms = (rep - skipped) * n / 1000
        print(
            f"  {n:<20} {noop_us:>14.1f} {inv:>+11.1f} {ratio:>5.2f}x {rep:>+11.1f} "
            f"{skipped:>+18.1f} {write_ms:>13.2f}  {'OK' if max(inv, rep) <= TARGET_US else 'OVER'}"
        )
    print("(i) vs (ii) in loops 3 and 4 shows this machine's noise: they should be equal")
    written = sum(h.runs_written for h in handlers if not isinstance(h, CaptureOnly))
    unsaved = sum(len(h.unsaved) for h in handlers)
    print(f"runs written {written}, unsaved {unsaved}; {time.perf_counter() - started:.0f} s")
    store.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
