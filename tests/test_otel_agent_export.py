"""When a captured agent run's spans reach OpenTelemetry: handed over together as the run ends
(the default: less work on the agent's path) or one by one as each ends (``live=True``,
``SOLOFLOW_OTEL_LIVE=1``). The same spans either way, with the stored trace's times; a failed
run's spans too; a flow called as a tool still nests under its (not yet exported) tool call;
nothing is left waiting after a run. Real ``create_agent`` agents, both stores."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from test_otel import _nested_agent
from test_traces import _reply

from soloflow_core.store import Store
from soloflow_core.tracing import active_listener, configure_tracing, configure_tracing_from_env
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.testing import ScriptedChatModel

from test_flow_traces import _tools  # isort: skip


@pytest.fixture(autouse=True)
def _no_export_after() -> Iterator[None]:
    yield
    configure_tracing(None)


MODES = ("at the end", "at the end, finished spans to the processor", "live")


def _export(*, live: bool, direct: bool = False) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = SimpleSpanProcessor(exporter)  # exported as each span ends
    provider.add_span_processor(processor)
    configure_tracing(provider, live=live, span_processor=processor if direct else None)
    return provider, exporter


def _run(
    store: Store, seen: list[int], exporter: InMemorySpanExporter, *, fail: bool = False
) -> Any:
    """A support agent that tracks two shipments; each tool call notes how many spans were
    exported by then (the second one fails when ``fail``, and the run with it)."""

    @tool
    def track_shipment(order_id: str) -> str:
        """Track an order's shipment."""
        seen.append(len(exporter.get_finished_spans()))
        if fail and order_id == "O-2":
            raise RuntimeError("carrier API down")
        return f"{order_id}: in transit"

    replies = [
        _reply("", [("track_shipment", {"order_id": "O-1"}, "c1")], 1200, 40),
        _reply("", [("track_shipment", {"order_id": "O-2"}, "c2")], 1500, 60),
        _reply("Both in transit.", [], 1800, 25),
    ]
    agent = create_agent(
        ScriptedChatModel(responses=replies, model_name="scripted-request"),
        tools=[track_shipment],
        name="support_agent",
    )
    handler = SoloFlowCallbackHandler(store=store)
    try:
        agent.invoke(
            {"messages": [("user", "Where are my orders O-1 and O-2?")]},
            config={"callbacks": [handler]},
        )
    except RuntimeError:
        if not fail:
            raise
    handler.close()
    return handler


def _shape(spans: Any) -> list[tuple[Any, ...]]:
    """What a backend shows of each span, its ids left out: name, kind, parent's name,
    attributes, status."""
    names = {s.context.span_id: s.name for s in spans}
    return sorted(
        (
            s.name,
            s.kind,
            names.get(s.parent.span_id) if s.parent is not None else None,
            sorted(s.attributes.items()),
            s.status.status_code,
        )
        for s in spans
    )


def test_spans_are_exported_when_the_run_ends_or_live_the_same_spans(store: Store) -> None:
    shapes = {}
    for mode in MODES:
        live = mode == "live"
        provider, exporter = _export(live=live, direct="processor" in mode)
        seen: list[int] = []
        handler = _run(store, seen, exporter)
        spans = exporter.get_finished_spans()
        # Live: the first model call has ended before the first tool runs, and that tool and
        # the second model call before the second. At the end: nothing until the run ends.
        assert seen == ([1, 3] if live else [0, 0])
        assert len(spans) == 6 and len({s.context.trace_id for s in spans}) == 1
        shapes[mode] = _shape(spans)
        bridge = active_listener()
        assert bridge is not None and bridge.live is live and bridge.pending == 0
        # The exported times are the stored trace's.
        stored = store.get_spans(handler.last_run.run_id, user_id="default", agent_id="default")
        assert sorted(s.start_time for s in spans) == sorted(
            int(s.start.timestamp() * 1_000_000) * 1000 for s in stored
        )
        for s in spans:
            assert s.start_time <= s.end_time
        provider.shutdown()
    assert shapes[MODES[0]] == shapes[MODES[1]] == shapes[MODES[2]]
    chats = [s for s in shapes[MODES[0]] if s[0] == "chat scripted-request"]
    assert len(chats) == 3 and all(s[4] == StatusCode.OK for s in shapes[MODES[0]])


def test_a_failed_runs_spans_are_exported_with_the_error(store: Store) -> None:
    shapes = {}
    for mode in MODES:
        provider, exporter = _export(live=mode == "live", direct="processor" in mode)
        _run(store, [], exporter, fail=True)
        spans = exporter.get_finished_spans()
        by_name: dict[str, list[Any]] = {}
        for s in spans:
            by_name.setdefault(s.name, []).append(s)
        (root,) = by_name["invoke_agent support_agent"]
        assert root.status.status_code == StatusCode.ERROR
        assert root.attributes["error.type"] == "RuntimeError"
        tools = sorted(by_name["execute_tool track_shipment"], key=lambda s: s.start_time)
        assert [t.status.status_code for t in tools] == [StatusCode.OK, StatusCode.ERROR]
        assert "carrier API down" in (tools[1].status.description or "")
        bridge = active_listener()
        assert bridge is not None and bridge.pending == 0
        shapes[mode] = _shape(spans)
        provider.shutdown()
    assert shapes[MODES[0]] == shapes[MODES[1]] == shapes[MODES[2]]


@pytest.mark.parametrize("direct", [False, True], ids=["tracer", "processor"])
def test_a_flow_called_as_a_tool_nests_under_a_tool_call_not_yet_exported(
    store: Store, direct: bool
) -> None:
    provider, exporter = _export(live=False, direct=direct)
    rt = FlowRuntime(store, tools=_tools({}))
    try:
        for _ in range(3):
            _result, handler = _nested_agent(store, rt)
            handler.close()
    finally:
        rt.close()
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    flows = [s for s in spans if s.name == "invoke_flow lookup"]
    assert len(flows) == 3
    for flow in flows:
        call = by_id[flow.parent.span_id]  # the agent's tool call, started early for it
        agent = by_id[call.parent.span_id]
        assert call.name.startswith("execute_tool ") and agent.name == "invoke_agent outer"
        assert call.attributes["soloflow.flow_run.id"]  # named after the flow started
        assert call.start_time <= flow.start_time and flow.end_time <= call.end_time
    assert len(spans) == len(by_id)  # each span exported once
    bridge = active_listener()
    assert bridge is not None and bridge.pending == 0
    provider.shutdown()


@pytest.mark.parametrize(
    ("value", "live"), [("1", True), (" TRUE ", True), ("0", False), ("", False), ("maybe", False)]
)
def test_soloflow_otel_live_chooses_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str, live: bool
) -> None:
    with socket.socket() as s:  # a port nothing listens on: nothing is exported here
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("SOLOFLOW_OTEL_LIVE", value)
    bridge = configure_tracing_from_env()
    try:
        assert bridge is not None and bridge.live is live
        warned = [r.getMessage() for r in caplog.records if "SOLOFLOW_OTEL_LIVE" in r.getMessage()]
        assert warned == (
            [
                "SOLOFLOW_OTEL_LIVE='maybe' is not a yes or a no (1/true/yes/on, "
                "0/false/no/off): an agent run's spans are exported when it ends"
            ]
            if value == "maybe"
            else []
        )
    finally:
        configure_tracing(None)
        bridge.provider.shutdown()  # type: ignore[union-attr]
