"""Tracing's cost, side by side in one run: a real ``create_agent`` loop, and the events of one
real invocation replayed into the handler (its own cost, without the loop's noise).

Variants (each a handler on the same SQLite store; scripted model, one ``add`` tool, 10
tool-call turns per invocation; round-robin; the medians of the reps and of paired per-rep deltas):

(ii)  a no-op handler: the cost of being a callback at all;
(iii) the SoloFlow handler with ``trace=False``: the run alone, as before traces;
(iv)  the SoloFlow handler with traces stored (spans, prices, one more write per run);
(v)   (iv) with OpenTelemetry export on (the SDK's batch processor, an exporter that accepts
      and drops every batch: the export's cost on the agent's threads); an agent run's spans
      handed to the SDK when the run ends (the default);
(v-direct) (v) with ``configure_tracing(..., span_processor=)``: the run's ended spans
      handed straight to the batch processor as finished spans (what the pipeline built from
      the ``OTEL_EXPORTER_OTLP_*`` variables does);
(v-live) (v) with ``configure_tracing(..., live=True)``: each span started and ended in the
      SDK as it happens.

Times are **CPU time of the process** (``time.process_time``: every thread), per tool call,
so that other processes on a shared machine do not blur them. Targets (issue 23): (iv) - (iii)
≤ 50 µs per tool call; (v) - (iii) ≤ 100 µs.

Usage::

    python benchmarks/bench_traces.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
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
from langchain_core.tools import tool
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from soloflow_core.models import TaskRun
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_core.tracing import Span, configure_tracing
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

NOOP, BASE, TRACED, OTEL = (
    "(ii) no-op handler",
    "(iii) SoloFlow, trace=False",
    "(iv) SoloFlow, traces stored",
    "(v) (iv) + OpenTelemetry export",
)
UNWRITTEN = "(iv-a) (iv), spans built, not written"
OTEL_LIVE = "(v-live) (v), span by span"
OTEL_DIRECT = "(v-direct) (v), to the processor"
TURNS = 10


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(messages: list[BaseMessage]) -> AIMessage:
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done < TURNS:
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "add", "args": {"a": done, "b": 1}, "id": f"c{done}", "type": "tool_call"}
            ],
            response_metadata={"model_name": "gpt-4o"},
        )
    return AIMessage(
        content=f"sum done after {done} calls", response_metadata={"model_name": "gpt-4o"}
    )


class NoOpHandler(BaseCallbackHandler):
    run_inline = True

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        pass  # the base class raises here, which makes LangChain fall back to on_llm_start


class Recorder(BaseCallbackHandler):
    """Records the callback events of one invocation, to replay them."""

    run_inline = True

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("on_"):
            return lambda *a, **kw: self.events.append((name, a, kw))
        return super().__getattribute__(name)


class SpansNotWritten(SoloFlowCallbackHandler):
    """Builds the trace like (iv) but stores the run alone: splits building the spans from
    writing them."""

    def _write(self, run: TaskRun, *, spans: Sequence[Span] = ()) -> bool:
        return super()._write(run)


class DropExporter(SpanExporter):
    """Accepts every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def measure(variants: dict[str, Callable[[], int]], reps: int) -> dict[str, list[float]]:
    """CPU µs per tool call of each variant, one entry per rep, round-robin."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        fn()  # warm-up
    for _ in range(reps):
        for name, fn in variants.items():
            gc.collect()
            start = time.process_time()
            calls = fn()
            times[name].append((time.process_time() - start) * 1e6 / calls)
    return times


def report(title: str, times: dict[str, list[float]]) -> dict[str, float]:
    """Print each variant's median and its paired deltas (per rep, against the variant measured
    just before it in the same round: steadier than a difference of medians on a busy machine);
    return the median paired delta of each variant over (iii), and of (iii) over (ii)."""
    med = {name: statistics.median(v) for name, v in times.items()}

    def paired(name: str, base: str) -> float:
        return statistics.median(a - b for a, b in zip(times[name], times[base], strict=True))

    print(
        f"\n{title}\n  {'variant':<36} {'median CPU µs/call':>18} {'min':>8} "
        f"{'vs (ii)':>9} {'vs (iii)':>9}"
    )
    deltas: dict[str, float] = {}
    for name, v in times.items():
        vs_noop = f"{paired(name, NOOP):+.1f}" if name != NOOP else ""
        vs_base = f"{paired(name, BASE):+.1f}" if name not in (NOOP, BASE) else ""
        if name != NOOP:
            deltas[name] = paired(name, BASE if name != BASE else NOOP)
            deltas[name + " vs (ii)"] = paired(name, NOOP)
        print(f"  {name:<36} {med[name]:>18.1f} {min(v):>8.1f} {vs_noop:>9} {vs_base:>9}")
    return deltas


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer invocations, 7 reps")
    parser.add_argument("--reps", type=int, default=None)
    opts = parser.parse_args(argv)
    reps = max(5, opts.reps or (7 if opts.quick else 15))
    invokes = 4 if opts.quick else 8
    tmp = Path(tempfile.mkdtemp(prefix="soloflow-bench-traces-"))
    store = Store.open(f"sqlite:///{tmp / 'bench.db'}")
    pm = get_plugin_manager()
    provider = TracerProvider()
    processor = BatchSpanProcessor(DropExporter())
    provider.add_span_processor(processor)
    agent: Any = create_agent(ScriptedChatModel(script=script), tools=[add], name="bench_agent")
    print(
        f"bench_traces: Python {sys.version.split()[0]}, {reps} reps, median of CPU time reported"
    )

    def solo(trace: bool) -> SoloFlowCallbackHandler:
        return SoloFlowCallbackHandler(
            store=store, user_id="bench", agent_id="bench", plugin_manager=pm, trace=trace
        )

    unwritten = SpansNotWritten(
        store=store, user_id="bench", agent_id="bench", plugin_manager=pm, trace=True
    )

    def loop(handler: Any, export: str = "") -> Callable[[], int]:
        def run() -> int:
            configure_tracing(
                provider if export else None,
                live=export == "live",
                span_processor=processor if export == "direct" else None,
            )
            for i in range(invokes):
                agent.invoke(
                    {"messages": [("user", f"add things {i}")]}, config={"callbacks": [handler]}
                )
            configure_tracing(None)
            return invokes * TURNS

        return run

    recorder = Recorder()
    agent.invoke({"messages": [("user", "record me")]}, config={"callbacks": [recorder]})
    copies = invokes * 4

    def replay(handler: Any, export: str = "") -> Callable[[], int]:
        def run() -> int:
            configure_tracing(
                provider if export else None,
                live=export == "live",
                span_processor=processor if export == "direct" else None,
            )
            for _ in range(copies):
                ids: dict[Any, uuid.UUID] = {}
                for name, args, kw in recorder.events:
                    kw = dict(kw)
                    for key in ("run_id", "parent_run_id"):
                        if kw.get(key) is not None:
                            kw[key] = ids.setdefault(kw[key], uuid.uuid4())
                    getattr(handler, name)(*args, **kw)
            configure_tracing(None)
            return copies * TURNS

        return run

    try:
        loop_med = report(
            "create_agent loop (the model turn included)",
            measure(
                {
                    NOOP: loop(NoOpHandler()),
                    BASE: loop(solo(False)),
                    TRACED: loop(solo(True)),
                    OTEL: loop(solo(True), export="end"),
                    OTEL_DIRECT: loop(solo(True), export="direct"),
                    OTEL_LIVE: loop(solo(True), export="live"),
                },
                reps,
            ),
        )
        rep_med = report(
            "one invocation's events replayed into the handler",
            measure(
                {
                    NOOP: replay(NoOpHandler()),
                    BASE: replay(solo(False)),
                    UNWRITTEN: replay(unwritten),
                    TRACED: replay(solo(True)),
                    OTEL: replay(solo(True), export="end"),
                    OTEL_DIRECT: replay(solo(True), export="direct"),
                    OTEL_LIVE: replay(solo(True), export="live"),
                },
                reps,
            ),
        )
        for title, d in (("agent loop", loop_med), ("replayed", rep_med)):
            print(
                f"\n  {title}: traces stored {d[TRACED]:+.1f} µs per tool call over trace=False "
                f"({d[TRACED + ' vs (ii)']:+.1f} over the no-op handler; target ≤ +50), with "
                f"OpenTelemetry {d[OTEL]:+.1f} ({d[OTEL + ' vs (ii)']:+.1f}; target ≤ +100; "
                f"finished spans to the processor {d[OTEL_DIRECT]:+.1f}, "
                f"span by span {d[OTEL_LIVE]:+.1f}); "
                f"trace=False alone {d[BASE]:+.1f} over the no-op handler"
            )
    finally:
        provider.shutdown()
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
