"""OpenTelemetry export: every span live through the SDK (InMemorySpanExporter) with the GenAI
semantic conventions, for an agent run, a flow run with a retry and a parallel layer, and a
flow called as a tool inside an agent; a real OTLP/HTTP receiver on 127.0.0.1 decoding the
protobuf; a collector that is down changes nothing for the agent."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain.agents import create_agent
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from test_flow_traces import FLOW, NS, _tools
from test_traces import _reply, _run_agent

from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.tracing import configure_tracing, configure_tracing_from_env
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.routing.tools import flow_tool
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.testing import ScriptedChatModel


@pytest.fixture()
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(provider)
    try:
        yield exporter
    finally:
        configure_tracing(None)
        provider.shutdown()


def _by_name(spans: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


def test_an_agent_run_is_exported_with_genai_attributes(
    sqlite_store: Store, exported: InMemorySpanExporter
) -> None:
    handler = _run_agent(sqlite_store)
    spans = exported.get_finished_spans()
    assert len(spans) == 7
    names = _by_name(spans)
    (root,) = names["invoke_agent support_agent"]
    assert root.parent is None and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert (
        root.attributes["gen_ai.agent.name"] == "support_agent"
        and root.status.status_code == StatusCode.OK
    )
    trace_id = root.context.trace_id
    assert all(s.context.trace_id == trace_id for s in spans)
    assert all(
        s.parent is not None and s.parent.span_id == root.context.span_id
        for s in spans
        if s is not root
    )
    chats = names["chat scripted-request"]
    assert [c.attributes["gen_ai.usage.input_tokens"] for c in chats] == [1200, 1500, 1800]
    assert all(
        c.kind == SpanKind.CLIENT
        and c.attributes["gen_ai.request.model"] == "scripted-request"
        and c.attributes["gen_ai.response.model"] == "gpt-4o"
        and c.attributes["soloflow.cost_usd"] > 0
        for c in chats
    )
    tools = names["execute_tool track_shipment"]
    assert sorted(t.attributes["gen_ai.tool.call.id"] for t in tools) == ["c2", "c3"]
    assert all(t.attributes["gen_ai.tool.name"] == "track_shipment" for t in tools)
    # The stored trace and the exported one are the same spans, in time too.
    stored = sqlite_store.get_spans(handler.last_run.run_id, user_id="default", agent_id="default")  # type: ignore[union-attr]
    assert root.start_time == int(stored[0].start.timestamp() * 1_000_000) * 1000
    handler.close()


def test_a_flow_run_with_a_retry_and_a_parallel_layer(
    sqlite_store: Store, exported: InMemorySpanExporter
) -> None:
    rt = FlowRuntime(sqlite_store, tools=_tools({"fetch": 1}), **NS)
    try:
        result = rt.run(FLOW, {})
    finally:
        rt.close()
    assert result.status == "completed"
    spans = exported.get_finished_spans()
    names = _by_name(spans)
    (root,) = names["invoke_flow fan"]
    assert (
        root.attributes["soloflow.flow.name"] == "fan"
        and root.attributes["soloflow.flow.version"] == 1
    )
    assert root.attributes["soloflow.namespace"] == "tr-user/tr-agent"
    steps = {s.attributes["soloflow.step.id"]: s for s in spans if s.name.startswith("step ")}
    assert set(steps) == {"fetch", "left", "right", "join"}
    assert all(s.parent.span_id == root.context.span_id for s in steps.values())
    fetches = names["execute_tool fetch"]
    assert [(f.attributes["soloflow.attempt"], f.status.status_code) for f in fetches] == [
        (1, StatusCode.ERROR),
        (2, StatusCode.OK),
    ]
    assert all(f.parent.span_id == steps["fetch"].context.span_id for f in fetches)
    left, right = steps["left"], steps["right"]
    assert max(left.start_time, right.start_time) < min(
        left.end_time, right.end_time
    )  # side by side


def _nested_agent(store: Store, rt: FlowRuntime) -> tuple[Any, SoloFlowCallbackHandler]:
    inner = FlowDefinition(
        name="lookup", steps=[FlowStep(id="fetch", skill_key="fetch", input_map={"v": "x"})]
    )
    tool = flow_tool(inner, tools=_tools({}), run=lambda flow, inputs: rt.run(flow, inputs))
    replies = [_reply("", [(tool.name, {}, "f1")], 100, 10), _reply("done", [], 120, 5)]
    agent = create_agent(ScriptedChatModel(responses=replies), tools=[tool], name="outer")
    handler = SoloFlowCallbackHandler(store=store)
    return agent.invoke(
        {"messages": [("user", "look it up")]}, config={"callbacks": [handler]}
    ), handler


def test_a_flow_called_as_a_tool_nests_under_the_tool_call(
    sqlite_store: Store, exported: InMemorySpanExporter
) -> None:
    rt = FlowRuntime(sqlite_store, tools=_tools({}))
    try:
        _result, handler = _nested_agent(sqlite_store, rt)
    finally:
        rt.close()
    spans = exported.get_finished_spans()
    names = _by_name(spans)
    (agent,) = names["invoke_agent outer"]
    (call,) = [
        s for s in spans if s.name.startswith("execute_tool ") and s.name != "execute_tool fetch"
    ]
    (flow,) = names["invoke_flow lookup"]
    (step,) = names["step fetch"]
    assert call.parent.span_id == agent.context.span_id
    assert (
        flow.parent.span_id == call.context.span_id and step.parent.span_id == flow.context.span_id
    )
    assert len({s.context.trace_id for s in spans}) == 1
    # The stored agent trace names the flow run; the flow run's spans are in the agent's trace.
    run_id = handler.last_run.run_id  # type: ignore[union-attr]
    stored = sqlite_store.get_spans(run_id, user_id="default", agent_id="default")
    (tool_span,) = [s for s in stored if s.kind == "execute_tool"]
    flow_spans = sqlite_store.get_spans(
        tool_span.attributes["soloflow.flow_run.id"], user_id="default", agent_id="default"
    )
    assert flow_spans[0].parent == tool_span.id and flow_spans[0].trace_id == stored[0].trace_id
    handler.close()


# --------------------------------------------------------------------------- a real collector


class _Collector(BaseHTTPRequestHandler):
    received: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.received.append((self.path, request))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_spans_reach_a_real_otlp_http_receiver(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}"
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "soloflow-test")
    bridge = configure_tracing_from_env()
    assert bridge is not None
    try:
        _run_agent(sqlite_store).close()
        bridge.provider.force_flush()  # type: ignore[attr-defined]
    finally:
        configure_tracing(None)
        bridge.provider.shutdown()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
    paths = {p for p, _ in server.received}  # type: ignore[attr-defined]
    assert paths == {"/v1/traces"}
    spans = [
        s
        for _, r in server.received
        for rs in r.resource_spans
        for ss in rs.scope_spans  # type: ignore[attr-defined]
        for s in ss.spans
    ]
    service = {
        a.value.string_value
        for _, r in server.received
        for rs in r.resource_spans  # type: ignore[attr-defined]
        for a in rs.resource.attributes
        if a.key == "service.name"
    }
    assert service == {"soloflow-test"}
    by_name = _by_name(spans)
    (root,) = by_name["invoke_agent support_agent"]
    assert root.parent_span_id == b""
    assert all(s.parent_span_id == root.span_id for s in spans if s is not root) and len(spans) == 7
    chat = by_name["chat scripted-request"][0]
    attrs = {a.key: a.value for a in chat.attributes}
    assert attrs["gen_ai.usage.input_tokens"].int_value == 1200
    assert attrs["gen_ai.operation.name"].string_value == "chat"


def test_a_dead_collector_is_logged_once_and_the_agent_is_unchanged(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    bridge = configure_tracing_from_env()
    assert bridge is not None
    try:
        with caplog.at_level(logging.WARNING, logger="soloflow_core.tracing.otel"):
            first = _run_agent(sqlite_store)
            bridge.provider.force_flush()  # type: ignore[attr-defined]
            second = _run_agent(sqlite_store)
            bridge.provider.force_flush()  # type: ignore[attr-defined]
    finally:
        configure_tracing(None)
        bridge.provider.shutdown()  # type: ignore[attr-defined]
    for handler in (first, second):
        assert handler.last_run is not None and handler.last_run.answer == "Both in transit."
        assert (
            len(
                sqlite_store.get_spans(
                    handler.last_run.run_id, user_id="default", agent_id="default"
                )
            )
            == 7
        )
        handler.close()
    ours = [r for r in caplog.records if r.name == "soloflow_core.tracing.otel"]
    assert len(ours) == 1 and "OpenTelemetry export failed" in ours[0].getMessage()


# --------------------------------------------------------------------------- context in steps


def _instrumented_tools(provider: TracerProvider, seen: dict[str, int]) -> list[Any]:
    """The flow's tools, each opening its own span with the OpenTelemetry API (as a user's
    instrumented client would); ``seen`` gets each tool's thread."""
    tracer = trace.get_tracer("user-code", tracer_provider=provider)
    both = threading.Barrier(2, timeout=30)  # the parallel pair: each waits for the other

    def make(name: str, sleep: float, meet: bool = False) -> Any:
        def fn(v: Any = None) -> Any:
            seen[name] = threading.get_ident()
            with tracer.start_as_current_span(f"user {name}"):
                if meet:
                    both.wait()
                time.sleep(sleep)
            return {"from": name}

        fn.__name__ = name
        return fn

    return [
        make("fetch", 0.0),
        make("left", 0.05, meet=True),
        make("right", 0.05, meet=True),
        make("join", 0.0),
    ]


@pytest.mark.parametrize(
    "durability", ["sync", "async"]
)  # sync: called in line on the watched thread
def test_a_users_span_in_a_tool_nests_under_the_steps_call(
    sqlite_store: Store, durability: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(provider)
    flow = FlowDefinition(
        name="fan",
        version=1,
        steps=[
            FlowStep(id=s, skill_key=s, depends_on=d, input_map={"v": s})
            for s, d in (
                ("fetch", []),
                ("left", ["fetch"]),
                ("right", ["fetch"]),
                ("join", ["left", "right"]),
            )
        ],
    )
    seen: dict[str, int] = {}
    rt = FlowRuntime(
        sqlite_store, tools=_instrumented_tools(provider, seen), durability=durability, **NS
    )  # type: ignore[arg-type]
    try:
        result = rt.run(flow, {})
    finally:
        rt.close()
        configure_tracing(None)
    provider.shutdown()
    assert result.status == "completed"
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    for name in ("fetch", "left", "right", "join"):
        (user,) = _by_name(spans)[f"user {name}"]
        call = by_id[user.parent.span_id]
        assert call.name == f"execute_tool {name}" and call.attributes["soloflow.attempt"] == 1
        assert by_id[call.parent.span_id].name == f"step {name}"
        assert call.start_time <= user.start_time and user.end_time <= call.end_time
    assert seen["left"] != seen["right"]  # the parallel layer: each call on its own thread
    left, right = (_by_name(spans)[f"user {n}"][0] for n in ("left", "right"))
    assert max(left.start_time, right.start_time) < min(left.end_time, right.end_time)
    # Outside the run nothing is left current.
    assert not trace.get_current_span().get_span_context().is_valid
