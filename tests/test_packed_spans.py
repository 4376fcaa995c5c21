"""An agent run's trace kept as one row (``sf_spans.descendants``, migration 0009): read back
exactly as the live handler made it, on both stores; the spans made at the run's end equal
those made as it went; traces kept one row per span (before 0009) still read; the downgrade
writes the packed spans out as rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool, ToolException, tool

import soloflow_core.store
from soloflow_core import hookimpl
from soloflow_core.models import TaskRun
from soloflow_core.store import Store, schema
from soloflow_core.store.engine import create_store_engine
from soloflow_core.store.json_values import json_text
from soloflow_core.store.packed_spans import PackedSpans, pack_descendants
from soloflow_core.tracing import PriceTable, Span
from soloflow_core.tracing.tree import COST, INPUT_TOKENS, OUTPUT_TOKENS
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

NS: dict[str, Any] = {"user_id": "u", "agent_id": "a"}
MIGRATIONS = Path(soloflow_core.store.__file__).with_name("migrations")


class RecordingStore(Store):
    """A store that keeps what the handler hands it: the spans as the live handler made them."""

    handed: list[tuple[TaskRun, list[Span]]]
    given: list[Sequence[Span]]
    """The spans as handed over (a :class:`PackedSpans` when made at the run's end)."""

    def add_traced_run(self, run: Any, spans: Sequence[Span] = ()) -> bool:
        self.given.append(spans)
        self.handed.append((run, [replace(s, attributes=dict(s.attributes)) for s in spans]))
        return super().add_traced_run(run, spans)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _broken(key: str) -> str:
    """Always fails."""
    raise ToolException(f"no {key}")


broken = StructuredTool.from_function(func=_broken, name="broken", handle_tool_error=True)


def _reply(calls: list[tuple[str, str]], inp: int, out: int) -> AIMessage:
    return AIMessage(
        content="" if calls else "done",
        tool_calls=[
            {"name": n, "args": {"key": k}, "id": f"id-{n}-{k}", "type": "tool_call"}
            for n, k in calls
        ],
        usage_metadata={"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out},
        response_metadata={"model_name": "gpt-4o"},
    )


def _invoke(store: Store, **handler_kw: Any) -> SoloFlowCallbackHandler:
    replies = [
        _reply([("lookup", "a")], 100, 10),
        _reply([("lookup", "b"), ("broken", "c")], 200, 20),
        _reply([], 300, 30),
    ]
    agent = create_agent(
        ScriptedChatModel(responses=replies, model_name="scripted"),
        tools=[lookup, broken],
        name="packer",
    )
    handler = SoloFlowCallbackHandler(store=store, **NS, **handler_kw)
    agent.invoke({"messages": [("user", "look up a, b and c")]}, config={"callbacks": [handler]})
    return handler


@pytest.fixture
def recording(db_url: str) -> Any:
    s = RecordingStore.open(db_url)
    s.handed, s.given = [], []
    try:
        yield s
    finally:
        s.close()


def _span_rows(store: Store) -> list[Any]:
    with store.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT span_id, descendants FROM sf_spans ORDER BY run_id, pos")
        ).all()


def test_an_agent_runs_trace_is_one_row_read_back_as_the_handler_made_it(recording: Any) -> None:
    handler = _invoke(recording)
    handler.close()
    ((run, live),) = recording.handed
    assert [s.kind for s in live] == ["invoke_agent", "chat", "execute_tool", "chat"] + [
        "execute_tool",
        "execute_tool",
        "chat",
    ]
    assert [s.status for s in live].count("error") == 1
    (row,) = _span_rows(recording)
    assert row.span_id == live[0].id and row.descendants
    assert recording.get_spans(run.run_id, **NS) == live
    assert run.cost is not None and run.cost > 0


def test_a_trace_made_at_the_end_is_handed_over_packed_and_stored_as_is(recording: Any) -> None:
    """No listener, no hook: the handler hands the store the trace in the packed form (no span
    object made per call); its text is the one its spans pack to, and it is what is stored."""
    _invoke(recording).close()
    ((run, spans),) = recording.handed
    (given,) = recording.given
    assert isinstance(given, PackedSpans) and len(given) == len(spans) == 7
    (row,) = _span_rows(recording)
    assert row.descendants == given.text() == pack_descendants(spans[0], spans[1:])
    assert recording.get_spans(run.run_id, **NS) == spans == list(given)
    # The chat spans' costs are the table's prices of their tokens, as floats.
    table = PriceTable()
    for s in spans:
        if s.kind == "chat":
            tokens = s.attributes[INPUT_TOKENS], s.attributes[OUTPUT_TOKENS]
            price = table.price("gpt-4o", input_tokens=tokens[0], output_tokens=tokens[1])
            assert price is not None and s.attributes[COST] == float(price)


def test_packed_values_the_fast_json_cannot_take_are_written_as_json_text(store: Store) -> None:
    """A value of a packed span that is not text, a number, a boolean or None (or an integer
    past 64 bits: a tool call id can be anything) is written as :func:`json_text` writes it."""
    root = _packed_trace()[0]
    record = ["2222222222222222", None, "execute_tool t", "execute_tool", 7, 0.25, "ok", None, 0]
    for odd in (2**70, {"id": [1, 2]}):
        packed = PackedSpans(root, shapes=[("gen_ai.tool.call.id",)], records=[[*record, odd]])
        assert packed.text() == json_text([[["gen_ai.tool.call.id"]], [*record, odd]])
        run_id = f"odd-{type(odd).__name__}"
        assert store.add_traced_run(TaskRun(run_id=run_id, **NS), packed) is True
        (_, tool_span) = store.get_spans(run_id, **NS)
        assert tool_span == packed[1] and tool_span.attributes == {"gen_ai.tool.call.id": odd}


def test_a_packed_trace_of_a_root_alone_is_one_plain_row(store: Store) -> None:
    """A run that made no call: its root span's row, no packed text, as ``[root]`` is kept."""
    root = _packed_trace()[0]
    assert store.add_traced_run(
        TaskRun(run_id="alone-p", **NS), PackedSpans(root, shapes=[], records=[])
    )
    assert store.add_traced_run(TaskRun(run_id="alone-l", **NS), [root])
    assert [r.descendants for r in _span_rows(store)] == [None, None]
    assert store.get_spans("alone-p", **NS) == store.get_spans("alone-l", **NS) == [root]


def _shape(spans: list[Span]) -> list[tuple[Any, ...]]:
    """A trace without its ids and times: what must not depend on how it was made."""
    index = {s.id: n for n, s in enumerate(spans)}
    return [
        (s.kind, s.name, index.get(s.parent or ""), s.status, s.error, s.attributes) for s in spans
    ]


def test_spans_made_at_the_end_equal_spans_made_live(recording: Any, pm: Any) -> None:
    """No listener, no hook: the spans are made when the run ends. With a
    ``soloflow_span_finished`` hook they are made (and told) as the run goes: the same trace."""
    _invoke(recording).close()

    class Watcher:
        @hookimpl
        def soloflow_span_finished(self, span: Span) -> None:
            pass

    pm.register(Watcher())
    _invoke(recording, plugin_manager=pm).close()
    (_, at_end), (_, live) = recording.handed
    # (The model's two parallel tool calls may start in either order.)
    assert sorted(map(repr, _shape(at_end))) == sorted(map(repr, _shape(live)))
    assert [s.kind for s in at_end] == [s.kind for s in live]
    assert all(s.trace_id == at_end[0].trace_id for s in at_end)
    # Made at the end: starts are the run's start plus monotonic offsets, in the order the
    # calls started; every call ends within the run (to the microsecond the clocks round to).
    root, slack = at_end[0], timedelta(microseconds=1)
    assert root.end is not None
    starts = [s.start for s in at_end]
    assert starts == sorted(starts)
    assert all(s.end is not None and s.end <= root.end + slack for s in at_end[1:])


def _packed_trace(*, error: str | None = None, name: str = "execute_tool t") -> list[Span]:
    start = datetime(2026, 11, 27, 13, 1, 2, 345678, tzinfo=UTC)
    root = Span(
        trace_id="ef" * 16,
        id="1111111111111111",
        parent=None,
        name="invoke_agent a",
        kind="invoke_agent",
        start=start,
        duration_ms=30.5,
        status="ok",
        attributes={"gen_ai.operation.name": "invoke_agent"},
    )
    chat = Span(
        trace_id=root.trace_id,
        id="2222222222222222",
        parent=root.id,
        name="chat gpt-4o",
        kind="chat",
        start=start + timedelta(microseconds=1234),
        duration_ms=0.1 + 0.2,
        status="ok",
        attributes={"gen_ai.usage.input_tokens": 12, "soloflow.cost_usd": 4.25e-05},
    )
    tool_span = Span(
        trace_id=root.trace_id,
        id="3333333333333333",
        parent=chat.id,
        name=name,
        kind="execute_tool",
        start=start - timedelta(days=1, microseconds=1),
        duration_ms=None,
        status="error" if error else "unset",
        error=error,
        attributes={"gen_ai.tool.name": "t", "flag": True, "none": None},
    )
    return [root, chat, tool_span]


def test_a_packed_trace_reads_back_exactly(store: Store) -> None:
    spans = _packed_trace(error="ValueError: boom")
    assert store.add_traced_run(TaskRun(run_id="p1", **NS), spans) is True
    assert len(_span_rows(store)) == 1
    assert store.get_spans("p1", **NS) == spans
    # Stored already: nothing is added twice; a new span is added after the packed ones.
    more = [*spans, replace(spans[1], id="4444444444444444")]
    assert store.add_traced_run(TaskRun(run_id="p1", **NS), more) is False
    assert store.get_spans("p1", **NS) == more


def test_packed_text_no_database_stores_is_made_storable_as_in_rows(store: Store) -> None:
    """NUL and lone surrogates in a packed span: stored as a span's own row stores them."""
    bad = "bad\x00 \udcff"
    packed = _packed_trace(error=bad, name=bad)
    assert store.add_traced_run(TaskRun(run_id="p-bad", **NS), packed) is True
    rows = _packed_trace(error=bad, name=bad)
    assert store.add_spans("rows-bad", rows, **NS) == 3
    assert [(s.name, s.error) for s in store.get_spans("p-bad", **NS)] == [
        (s.name, s.error) for s in store.get_spans("rows-bad", **NS)
    ]
    assert store.get_spans("p-bad", **NS)[2].error == "bad \\udcff"


def _alembic(store_url: str, action: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    engine = create_store_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            getattr(command, action)(cfg, revision)
    finally:
        engine.dispose()


def test_a_trace_kept_before_0009_still_reads(db_url: str) -> None:
    _alembic(db_url, "upgrade", "0008")
    spans = _packed_trace()
    engine = create_store_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.insert(schema.spans),
                [
                    {
                        "span_id": s.id,
                        "pos": pos,
                        "trace_id": s.trace_id,
                        "parent_id": s.parent,
                        "name": s.name,
                        "kind": s.kind,
                        "start_at": s.start,
                        "duration_ms": s.duration_ms,
                        "status": s.status,
                        "error": s.error,
                        "attributes": s.attributes,
                        "run_id": "old",
                        **NS,
                    }
                    for pos, s in enumerate(spans)
                ],
            )
    finally:
        engine.dispose()
    with Store.open(db_url) as store:
        assert store.get_spans("old", **NS) == spans


def test_the_downgrade_writes_packed_spans_out_as_rows(db_url: str) -> None:
    spans = _packed_trace()
    with Store.open(db_url) as store:
        assert store.add_traced_run(TaskRun(run_id="p2", **NS), spans) is True
        later = replace(spans[1], id="5555555555555555")
        assert store.add_spans("p2", [later], **NS) == 1  # a row after the packed one
    _alembic(db_url, "downgrade", "0008")
    engine = create_store_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT span_id, pos FROM sf_spans WHERE run_id = 'p2' ORDER BY pos")
            ).all()
    finally:
        engine.dispose()
    assert [(r.span_id, r.pos) for r in rows] == [(s.id, n) for n, s in enumerate([*spans, later])]
    with Store.open(db_url) as store:  # upgraded again: the rows read as they were written
        assert store.get_spans("p2", **NS) == [*spans, later]
