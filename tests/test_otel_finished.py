"""An agent run's ended spans handed straight to a span processor as finished spans
(``configure_tracing(provider, span_processor=...)``, and what the environment's pipeline
does by itself): the same spans as through the tracer — names, kinds, attributes, status,
times, parents — with the provider's resource and sampler, under the caller's own span.
Real ``create_agent`` agents (tests/test_traces.py's support agent)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from test_traces import _run_agent

from soloflow_core.store import Store
from soloflow_core.tracing import configure_tracing


@pytest.fixture(autouse=True)
def _no_export_after() -> Iterator[None]:
    yield
    configure_tracing(None)


def _exported(store: Store, *, direct: bool, **provider: Any) -> list[Any]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(**provider)
    processor = SimpleSpanProcessor(exporter)
    tracer_provider.add_span_processor(processor)
    configure_tracing(tracer_provider, span_processor=processor if direct else None)
    _run_agent(store).close()
    configure_tracing(None)
    return list(exporter.get_finished_spans())


def _shape(spans: list[Any]) -> list[tuple[Any, ...]]:
    """Each span as what a backend shows, ids replaced by the name of the parent."""
    by_id = {s.context.span_id: s.name for s in spans}
    return sorted(
        (
            s.name,
            s.kind,
            s.status.status_code,
            s.status.description,
            tuple(sorted(s.attributes.items())),
            by_id.get(s.parent.span_id) if s.parent else None,
            s.end_time >= s.start_time > 0,
            dict(s.resource.attributes) == dict(spans[0].resource.attributes),
            s.instrumentation_scope.name,
        )
        for s in spans
    )


def test_finished_spans_are_the_spans_the_tracer_makes(sqlite_store: Store) -> None:
    through_tracer = _exported(sqlite_store, direct=False)
    direct = _exported(sqlite_store, direct=True)
    assert len(direct) == len(through_tracer) == 7
    assert _shape(direct) == _shape(through_tracer)
    root = next(s for s in direct if s.parent is None)
    assert all(s.context.trace_id == root.context.trace_id for s in direct)
    assert len({s.context.span_id for s in direct}) == 7
    assert all(s.context.trace_flags.sampled for s in direct)


def test_the_providers_resource_and_sampler_are_kept(sqlite_store: Store) -> None:
    resource = Resource.create({"service.name": "support-desk"})
    spans = _exported(sqlite_store, direct=True, resource=resource)
    assert {s.resource.attributes["service.name"] for s in spans} == {"support-desk"}
    assert _exported(sqlite_store, direct=True, sampler=ALWAYS_OFF) == []


def test_the_run_nests_under_the_callers_own_span(sqlite_store: Store) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    configure_tracing(provider, span_processor=processor)
    with provider.get_tracer("user").start_as_current_span("handle ticket") as outer:
        _run_agent(sqlite_store).close()
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert root.parent is not None and root.parent.span_id == outer.get_span_context().span_id
    assert all(s.context.trace_id == outer.get_span_context().trace_id for s in spans)
    assert trace.get_current_span() is trace.INVALID_SPAN
