"""Where capture's CPU goes in a real ``create_agent`` loop: the CPU time spent inside each
callback of ``SoloFlowCallbackHandler`` (``time.thread_time`` of the thread that runs it) and
inside the end-of-run write (on the writer thread), per tool call, in the real loop and in a
replay of one invocation's events; with ``trace=False``, with the trace stored, and with the
trace stored and exported to OpenTelemetry (an exporter that drops every batch), the agent
run's spans handed over when it ends through the tracer (``otel``), as finished spans straight
to the batch processor (``otel-direct``: ``configure_tracing(..., span_processor=)``, what the
``OTEL_EXPORTER_OTLP_*`` pipeline does) and span by span (``otel-live``).

A replay calls the handler in a tight loop; in the real loop LangGraph's own work runs between
two callbacks, so the same code finds cold caches. The figures are the handler's own CPU, not a
difference of two large loop timings, so they hold up on a busy machine.

Run: ``python benchmarks/bench_capture_inside.py [--invokes 40]``.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain.agents import create_agent  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from benchmarks.bench_capture import Recorder, _fresh_ids  # noqa: E402
from benchmarks.bench_traces import TURNS, DropExporter, add, script  # noqa: E402
from soloflow_core.plugins import get_plugin_manager  # noqa: E402
from soloflow_core.store import Store  # noqa: E402
from soloflow_core.tracing import configure_tracing  # noqa: E402
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler  # noqa: E402
from soloflow_langgraph.testing import ScriptedChatModel  # noqa: E402

WRITE = "the write (writer thread)"


def timed(handler: SoloFlowCallbackHandler, spent: collections.Counter[str]) -> Any:
    """``handler`` with each ``on_*`` callback and its store write timed into ``spent``."""

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - started

        return run

    for name in dir(type(handler)):
        if name.startswith("on_"):
            setattr(handler, name, wrap(name, getattr(handler, name)))
    link = handler._ledger  # the benchmark's own instrument: a private object, left as it was
    link.store_run = wrap(WRITE, link.store_run)  # type: ignore[method-assign]
    return handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--invokes", type=int, default=40)
    opts = parser.parse_args(argv)
    store = Store.open(f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}")
    agent: Any = create_agent(ScriptedChatModel(script=script), tools=[add], name="bench_agent")
    recorder = Recorder()
    agent.invoke({"messages": [("user", "record me")]}, config={"callbacks": [recorder]})
    n = opts.invokes
    provider = TracerProvider()
    processor = BatchSpanProcessor(DropExporter())
    provider.add_span_processor(processor)
    variants: tuple[bool | str, ...] = (False, True, "otel", "otel-direct", "otel-live")
    spent = {v: collections.Counter[str]() for v in variants}
    handlers = {
        v: timed(
            SoloFlowCallbackHandler(
                store=store,
                user_id="b",
                agent_id="b",
                plugin_manager=get_plugin_manager(),
                trace=bool(v),
            ),
            spent[v],
        )
        for v in variants
    }

    def export(v: bool | str) -> None:
        configure_tracing(
            provider if isinstance(v, str) else None,
            live=v == "otel-live",
            span_processor=processor if v == "otel-direct" else None,
        )

    def invoke(v: bool | str, text: str) -> float:
        """One invocation with variant ``v``; the handler's CPU in it, µs per tool call."""
        export(v)
        before = sum(spent[v].values())
        agent.invoke({"messages": [("user", text)]}, config={"callbacks": [handlers[v]]})
        return (sum(spent[v].values()) - before) / TURNS * 1e6

    for i in range(5):  # warm-up
        for v in variants:
            invoke(v, f"warm {i}")
    for counter in spent.values():
        counter.clear()
    per_invocation: dict[bool | str, list[float]] = {v: [] for v in variants}
    for i in range(n):  # round-robin: each variant's invocation beside the others'
        for v in variants:
            per_invocation[v].append(invoke(v, f"add things {i}"))
    loops = {v: {k: x / (n * TURNS) * 1e6 for k, x in spent[v].items()} for v in variants}
    for v in variants:
        spent[v].clear()
        export(v)
        for events in [_fresh_ids(recorder) for _ in range(n)]:
            for name, args, kw in events:
                getattr(handlers[v], name)(*args, **kw)
        replay = {k: x / (n * TURNS) * 1e6 for k, x in spent[v].items()}
        handlers[v].close()
        loop = loops[v]
        print(f"\ntrace={v}: CPU µs per tool call inside the handler ({n} invocations)")
        print(f"  {'part':<28} {'real loop':>10} {'replay':>8}")
        for k in sorted(loop, key=lambda k: -loop[k]):
            print(f"  {k:<28} {loop[k]:>10.1f} {replay.get(k, 0.0):>8.1f}")
        print(f"  {'total':<28} {sum(loop.values()):>10.1f} {sum(replay.values()):>8.1f}")
    print(
        "\nreal loop, per invocation (a collector pause in one invocation moves the mean, not these):"
    )
    base = per_invocation[False]
    for v in variants:
        med = statistics.median(per_invocation[v])
        paired = statistics.median(a - b for a, b in zip(per_invocation[v], base, strict=True))
        print(
            f"  trace={v!s:<10} median {med:7.1f} µs per tool call; paired vs trace=False {paired:+7.1f}"
        )
    configure_tracing(None)
    provider.shutdown()
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
