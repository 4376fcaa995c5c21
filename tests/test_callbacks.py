"""Capture with SoloFlowCallbackHandler: real create_agent agents, real stores, a scripted LLM."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import ToolException, tool

from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel

TASK = "Research the delivery status for alice@example.com"
RAISED: list[BaseException] = []


# --------------------------------------------------------------------------- the agent's world


@tool
def find_customer(email: str) -> str:
    """Look up a customer by email."""
    return json.dumps({"customer_id": "C-1", "email": email})


@tool
def list_orders(customer_id: str, limit: int = 5) -> list[dict[str, Any]]:
    """List a customer's orders."""
    return [{"order_id": "O-1", "customer_id": customer_id}][:limit]


@tool
def track_shipment(order_id: str) -> str:
    """Track an order's shipment."""
    return f"{order_id}: in transit"


@tool
def charge_card(customer_id: str, amount: float) -> str:
    """Charge the customer's card (always fails here)."""
    exc = ValueError(f"card declined for {customer_id}")
    RAISED.append(exc)
    raise exc


TOOLS = [find_customer, list_orders, track_shipment, charge_card]


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def _responses() -> list[AIMessage]:
    """Turn 1: one call; turn 2: two parallel calls; turn 3: the raising tool; then done."""
    return [
        AIMessage(
            content="",
            tool_calls=[_call("find_customer", {"email": "alice@example.com"}, "c1")],
            usage_metadata=_usage(100, 10),
        ),
        AIMessage(
            content="",
            tool_calls=[
                _call("list_orders", {"customer_id": "C-1"}, "c2"),
                _call("track_shipment", {"order_id": "O-1"}, "c3"),
            ],
            usage_metadata=_usage(150, 20),
        ),
        AIMessage(
            content="",
            tool_calls=[_call("charge_card", {"customer_id": "C-1", "amount": 9.5}, "c4")],
            usage_metadata=_usage(200, 30),
        ),
        AIMessage(content="Your order O-1 is in transit."),  # usage filled in by the model
    ]


def _agent(*, handle_errors: bool, responses: list[AIMessage] | None = None) -> Any:
    middleware = []
    if handle_errors:
        middleware.append(
            ToolErrorMiddleware(on_error=lambda exc, req: f"{type(exc).__name__}: {exc}")
        )
    model = ScriptedChatModel(responses=responses if responses is not None else _responses())
    return create_agent(
        model,
        tools=TOOLS,
        system_prompt="You help customers.",
        name="support",
        middleware=middleware,
    )


def _naive(dt: datetime) -> datetime:
    """UTC without tzinfo: SQLite returns naive datetimes, PostgreSQL aware ones."""
    return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo else dt


@pytest.fixture
def fresh_pm():
    return get_plugin_manager()


def _check_main_run(
    store: Store,
    handler: SoloFlowCallbackHandler,
    root: uuid.UUID,
    result: dict[str, Any],
    before: datetime,
    after: datetime,
) -> None:
    stored = store.get_run(str(root), user_id="u1", agent_id="a1")
    times = {"started_at", "ended_at"}
    assert stored.model_dump(exclude=times) == handler.last_run.model_dump(exclude=times)
    assert stored.run_id == str(root) and len(stored.run_id) == 36
    assert (stored.user_id, stored.agent_id) == ("u1", "a1")
    assert stored.task == TASK
    assert stored.success is True
    assert stored.classification == "deep"  # built-in keyword classifier: "research"
    assert stored.meta == {"agent_name": "support"}
    # Parallel calls are stored in the model's order whatever thread started first.
    assert stored.tool_names == ["find_customer", "list_orders", "track_shipment", "charge_card"]
    assert [c.args for c in stored.tool_calls] == [
        {"email": "alice@example.com"},
        {"customer_id": "C-1"},
        {"order_id": "O-1"},
        {"customer_id": "C-1", "amount": 9.5},
    ]
    assert [c.tool_call_id for c in stored.tool_calls] == ["c1", "c2", "c3", "c4"]
    assert [c.error for c in stored.tool_calls] == [False, False, False, True]
    assert json.loads(stored.tool_calls[0].output) == {
        "customer_id": "C-1",
        "email": "alice@example.com",
    }
    assert json.loads(stored.tool_calls[1].output) == [{"order_id": "O-1", "customer_id": "C-1"}]
    assert stored.tool_calls[2].output == "O-1: in transit"
    assert stored.tool_calls[3].output == "ValueError: card declined for C-1"
    assert all(c.duration_ms is not None and c.duration_ms >= 0 for c in stored.tool_calls)
    # Model calls: the usage each AIMessage of the result carries, in order.
    ai = [m for m in result["messages"] if isinstance(m, AIMessage)]
    assert len(stored.model_calls) == len(ai) == 4
    assert [m.total_tokens for m in stored.model_calls] == [
        m.usage_metadata["total_tokens"] for m in ai
    ]
    assert [m.input_tokens for m in stored.model_calls][:3] == [100, 150, 200]
    assert [m.tool_calls_requested for m in stored.model_calls] == [1, 2, 1, 0]
    assert {m.model for m in stored.model_calls} == {"soloflow-scripted"}
    assert stored.tokens == sum(m.usage_metadata["total_tokens"] for m in ai)
    assert _naive(before) <= _naive(stored.started_at) <= _naive(stored.ended_at) <= _naive(after)
    assert handler.runs_written == 1 and handler.unsaved == []
    assert handler.in_flight == 0 and handler._root_of == {}


# --------------------------------------------------------------------------- the main runs


def test_agent_invoke_is_stored_field_by_field(store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=store, user_id="u1", agent_id="a1", plugin_manager=pm)
    root = uuid.uuid4()
    before = datetime.now(UTC)
    result = _agent(handle_errors=True).invoke(
        {"messages": [{"role": "user", "content": TASK}]},
        config={"callbacks": [handler], "run_id": root},
    )
    after = datetime.now(UTC)
    assert result["messages"][-1].content == "Your order O-1 is in transit."
    error_msg = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"
    ]
    assert len(error_msg) == 1
    _check_main_run(store, handler, root, result, before, after)


async def test_agent_ainvoke_is_stored_field_by_field(store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=store, user_id="u1", agent_id="a1", plugin_manager=pm)
    root = uuid.uuid4()
    before = datetime.now(UTC)
    result = await _agent(handle_errors=True).ainvoke(
        {"messages": [HumanMessage(TASK)]}, config={"callbacks": [handler], "run_id": root}
    )
    after = datetime.now(UTC)
    _check_main_run(store, handler, root, result, before, after)


def test_tool_exception_propagates_unchanged_and_run_is_stored(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(
        store=sqlite_store, user_id="u1", agent_id="a1", plugin_manager=pm
    )
    RAISED.clear()
    with pytest.raises(ValueError) as info:
        _agent(handle_errors=False).invoke(
            {"messages": [("user", TASK)]}, config={"callbacks": [handler]}
        )
    assert info.value is RAISED[-1]
    run = sqlite_store.get_run(handler.last_run.run_id, user_id="u1", agent_id="a1")
    assert run.success is False
    assert run.meta == {"agent_name": "support", "error": "ValueError: card declined for C-1"}
    assert run.tool_names == ["find_customer", "list_orders", "track_shipment", "charge_card"]
    assert [c.error for c in run.tool_calls] == [False, False, False, True]
    assert len(run.model_calls) == 3 and run.tokens == 110 + 170 + 230
    assert handler.in_flight == 0


async def test_tool_exception_propagates_under_ainvoke(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    RAISED.clear()
    with pytest.raises(ValueError) as info:
        await _agent(handle_errors=False).ainvoke(
            {"messages": TASK}, config={"callbacks": [handler]}
        )
    assert info.value is RAISED[-1]
    run = sqlite_store.get_run(handler.last_run.run_id, user_id="default", agent_id="default")
    assert (run.success, run.task) == (False, TASK)
    assert run.tool_calls[-1].error is True and run.tool_calls[-1].name == "charge_card"


def test_streaming_agent_is_captured(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    chunks = list(
        _agent(handle_errors=True).stream(
            {"messages": [("human", TASK)]}, config={"callbacks": [handler]}, stream_mode="messages"
        )
    )
    assert any(isinstance(msg, ToolMessage) for msg, _meta in chunks)
    assert handler.last_run.tool_names == [
        "find_customer",
        "list_orders",
        "track_shipment",
        "charge_card",
    ]
    assert handler.last_run.success is True and len(handler.last_run.model_calls) == 4


# --------------------------------------------------------------------------- tasks, direct tools


def _task_of(handler: SoloFlowCallbackHandler, agent_input: Any) -> str | None:
    agent = _agent(handle_errors=True, responses=[AIMessage(content="ok")])
    agent.invoke(agent_input, config={"callbacks": [handler]})
    return handler.last_run.task


@pytest.mark.parametrize(
    "agent_input",
    [
        {"messages": [{"role": "user", "content": "the task"}]},
        {"messages": [HumanMessage("the task")]},
        {"messages": [("user", "the task")]},
        {"messages": "the task"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "the task"}]}]},
    ],
    ids=["dict", "HumanMessage", "tuple", "string", "content-blocks"],
)
def test_task_is_the_first_human_message(sqlite_store: Store, pm, agent_input: Any) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    assert _task_of(handler, agent_input) == "the task"


def test_the_agents_final_answer_is_captured_and_stored(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    agent = _agent(
        handle_errors=True, responses=[AIMessage(content=[{"type": "text", "text": "All done."}])]
    )
    agent.invoke({"messages": [("user", "the task")]}, config={"callbacks": [handler]})
    run = handler.last_run
    assert run.answer == "All done."
    assert (
        sqlite_store.get_run(run.run_id, user_id=run.user_id, agent_id=run.agent_id).answer
        == "All done."
    )
    # A root whose output is not a conversation ending with an answer has none.
    RunnableLambda(lambda s: {"value": s}).invoke("x", config={"callbacks": [handler]})
    assert handler.last_run.answer is None


def test_task_falls_back_to_the_model_conversation(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    model = ScriptedChatModel(responses=[AIMessage(content="hello")])
    chain = RunnableLambda(
        lambda n: model.invoke([HumanMessage(f"task number {n}")]).content, name="pipeline"
    )
    assert chain.invoke(7, config={"callbacks": [handler]}) == "hello"
    run = handler.last_run
    assert (run.task, run.meta["agent_name"], len(run.model_calls)) == (
        "task number 7",
        "pipeline",
        1,
    )
    assert run.tool_calls == [] and run.tokens == run.model_calls[0].total_tokens


def test_plain_string_root_input_is_the_task(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    RunnableLambda(lambda s: s.upper()).invoke("shout this", config={"callbacks": [handler]})
    assert handler.last_run.task == "shout this"


def test_direct_tool_call_is_a_one_call_run(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    assert list_orders.invoke(
        {"customer_id": "C-9", "limit": 1}, config={"callbacks": [handler]}
    ) == [{"order_id": "O-1", "customer_id": "C-9"}]
    run = sqlite_store.get_run(handler.last_run.run_id, user_id="default", agent_id="default")
    assert (run.success, run.task, run.tokens, run.model_calls) == (True, None, None, [])
    assert len(run.tool_calls) == 1
    call = run.tool_calls[0]
    assert (call.name, call.args, call.error) == (
        "list_orders",
        {"customer_id": "C-9", "limit": 1},
        False,
    )
    assert call.output == [{"order_id": "O-1", "customer_id": "C-9"}]  # the raw value, not a str

    with pytest.raises(ValueError, match="card declined"):
        charge_card.invoke({"customer_id": "C-9", "amount": 1}, config={"callbacks": [handler]})
    failed = handler.last_run
    assert failed.success is False and failed.tool_calls[0].error is True
    assert failed.meta["error"] == "ValueError: card declined for C-9"
    assert handler.runs_written == 2 and handler.in_flight == 0


def test_a_tools_side_effect_metadata_is_recorded(sqlite_store: Store, pm) -> None:
    from langchain_core.tools import StructuredTool

    def lookup(code: str) -> str:
        return code.upper()

    read_only = StructuredTool.from_function(
        lookup,
        name="lookup",
        description="Look up a code.",
        metadata={"read_only": True, "owner": "ops"},
    )
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    assert read_only.invoke({"code": "ab"}, config={"callbacks": [handler]}) == "AB"
    list_orders.invoke({"customer_id": "C-9"}, config={"callbacks": [handler]})
    runs = sqlite_store.load_runs(
        [r.run_id for r in sqlite_store.list_runs(user_id="default", agent_id="default")],
        user_id="default",
        agent_id="default",
    )
    metas = {r.tool_calls[0].name: r.tool_calls[0].meta for r in runs}
    assert metas == {"lookup": {"read_only": True}, "list_orders": {}}  # only the flags


def test_string_tool_input_without_inputs_dict(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    track_shipment.invoke("O-7", config={"callbacks": [handler]})
    assert handler.last_run.tool_calls[0].args == {"input": "O-7"}


@pytest.mark.parametrize(
    ("input_str", "expected"),
    [
        ('{"q": "x", "n": 2}', {"q": "x", "n": 2}),  # JSON
        ("{'q': 'x', 'n': (1, 2)}", {"q": "x", "n": [1, 2]}),  # a Python repr
        ("just text", {"input": "just text"}),
        ("[1, 2]", {"input": "[1, 2]"}),  # parses, but not to a dict
    ],
)
def test_input_str_is_parsed_only_without_inputs(
    sqlite_store: Store, pm, input_str: str, expected: dict[str, Any]
) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    run_id = uuid.uuid4()
    handler.on_tool_start({"name": "legacy_tool"}, input_str, run_id=run_id)
    handler.on_tool_end(object(), run_id=run_id)
    call = handler.last_run.tool_calls[0]
    assert call.args == expected
    assert isinstance(call.output, str) and call.output.startswith("<object object")


def test_tool_error_reported_as_a_tool_message_is_flagged(sqlite_store: Store, pm) -> None:
    @tool
    def picky(x: int) -> str:
        """Refuses odd numbers."""
        if x % 2:
            raise ToolException(f"{x} is odd")
        return "even"

    picky.handle_tool_error = True  # the tool answers ToolMessage(status="error"), no exception
    calls = [_call("picky", {"x": 1}, "p1"), _call("picky", {"x": 2}, "p2")]
    agent = create_agent(
        ScriptedChatModel(responses=[AIMessage(content="", tool_calls=calls), AIMessage("ok")]),
        tools=[picky],
    )
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    agent.invoke({"messages": [("user", "check")]}, config={"callbacks": [handler]})
    run = handler.last_run
    assert [(c.output, c.error) for c in run.tool_calls] == [("1 is odd", True), ("even", False)]
    assert run.success is True


def test_completion_llm_without_usage_and_direct_model_calls(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    llm = FakeListLLM(responses=["a poem"])
    chain = RunnableLambda(lambda topic: llm.invoke(f"write about {topic}"), name="poet")
    assert chain.invoke("the sea", config={"callbacks": [handler]}) == "a poem"
    run = handler.last_run
    assert (run.task, run.tokens, len(run.model_calls)) == ("the sea", None, 1)
    assert run.model_calls[0].model == "FakeListLLM" and run.model_calls[0].total_tokens == 0

    # A model called on its own is not a task run, and leaves nothing behind.
    ScriptedChatModel(responses=[AIMessage("hi")]).invoke("x", config={"callbacks": [handler]})
    assert handler.runs_written == 1 and handler.in_flight == 0 and handler._root_of == {}


# --------------------------------------------------------------------------- durability


def test_run_is_durable_when_the_process_exits_right_after_invoke(tmp_path: Path) -> None:
    db = tmp_path / "durable.db"
    code = textwrap.dedent(f"""
        import os
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool
        from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
        from soloflow_langgraph.testing import ScriptedChatModel

        @tool
        def step(n: int) -> int:
            '''One step.'''
            return n + 1

        calls = [AIMessage(content="", tool_calls=[
            {{"name": "step", "args": {{"n": i}}, "id": f"s{{i}}", "type": "tool_call"}}])
            for i in range(3)]
        agent = create_agent(ScriptedChatModel(responses=[*calls, AIMessage(content="done")]),
                             tools=[step])
        handler = SoloFlowCallbackHandler(database_url={str(db)!r}, user_id="u", agent_id="a")
        agent.invoke({{"messages": [("user", "count to three")]}}, config={{"callbacks": [handler]}})
        print(handler.last_run.run_id, flush=True)
        os._exit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    with Store.open(f"sqlite:///{db}") as store:
        run = store.get_run(run_id, user_id="u", agent_id="a")
    assert run.task == "count to three" and run.success is True
    assert run.tool_names == ["step", "step", "step"]
    assert [c.output for c in run.tool_calls] == ["1", "2", "3"]
    assert len(run.model_calls) == 4 and run.tokens is not None


# --------------------------------------------------------------------------- never breaks the agent


def test_failed_write_keeps_the_run_and_flush_stores_it(sqlite_url: str, pm, caplog) -> None:
    store = Store.open(sqlite_url)
    handler = SoloFlowCallbackHandler(store=store, plugin_manager=pm)
    admin = sa.create_engine(sqlite_url)
    try:
        with admin.begin() as conn:  # the ledger table disappears under the handler
            conn.execute(sa.text("ALTER TABLE sf_task_runs RENAME TO sf_task_runs_away"))
        result = _agent(handle_errors=True).invoke(
            {"messages": [("user", TASK)]}, config={"callbacks": [handler]}
        )
        assert result["messages"][-1].content == "Your order O-1 is in transit."
        assert handler.runs_written == 0 and handler.last_run is None
        assert len(handler.unsaved) == 1 and len(handler.unsaved[0].tool_calls) == 4
        assert "kept in the spill file" in caplog.text and "handler.unsaved" in caplog.text
        assert handler.flush() == 0 and len(handler.unsaved) == 1  # still failing: still kept

        with admin.begin() as conn:
            conn.execute(sa.text("ALTER TABLE sf_task_runs_away RENAME TO sf_task_runs"))
        kept = handler.unsaved[0]
        assert handler.flush() == 1
        assert handler.unsaved == [] and handler.runs_written == 1
        assert (
            store.get_run(kept.run_id, user_id="default", agent_id="default").tool_names
            == kept.tool_names
        )
    finally:
        admin.dispose()
        store.close()


def test_many_invocations_leave_no_state_behind(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    for i in range(50):
        handle = i % 5 != 0
        try:
            _agent(handle_errors=handle).invoke(
                {"messages": [("user", f"task {i}")]}, config={"callbacks": [handler]}
            )
        except ValueError:
            assert not handle
        find_customer.invoke({"email": f"{i}@x.io"}, config={"callbacks": [handler]})
        assert len(handler._root_of) == 0 and len(handler._runs) == 0
    assert handler.runs_written == 100
    assert sqlite_store.count_runs(user_id="default", agent_id="default") == 100


def test_concurrent_invocations_on_one_handler(sqlite_store: Store, pm) -> None:
    def script(messages: list[BaseMessage]) -> AIMessage:
        task = str(messages[1].content)  # [system, human, ...]
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done == 0:
            return AIMessage(
                content="",
                tool_calls=[
                    _call("find_customer", {"email": task}, f"{task}-1"),
                    _call("track_shipment", {"order_id": task}, f"{task}-2"),
                ],
            )
        if done == 2:
            return AIMessage(
                content="", tool_calls=[_call("list_orders", {"customer_id": task}, f"{task}-3")]
            )
        return AIMessage(content=f"done {task}")

    agent = create_agent(ScriptedChatModel(script=script), tools=TOOLS, system_prompt="s")
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    tasks = [f"t{i}" for i in range(12)]
    results = agent.batch(
        [{"messages": [("user", t)]} for t in tasks],
        config={"callbacks": [handler], "max_concurrency": 6},
    )
    assert [r["messages"][-1].content for r in results] == [f"done {t}" for t in tasks]
    summaries = sqlite_store.list_runs(user_id="default", agent_id="default", limit=100)
    runs = sqlite_store.load_runs(
        [s.run_id for s in summaries], user_id="default", agent_id="default"
    )
    assert sorted(r.task for r in runs) == sorted(tasks)
    for run in runs:
        assert run.tool_names == ["find_customer", "track_shipment", "list_orders"]
        assert {v for c in run.tool_calls for v in c.args.values()} == {run.task}
    assert handler.in_flight == 0


async def test_concurrent_ainvokes_on_one_handler(sqlite_store: Store, pm) -> None:
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    RAISED.clear()
    agents = [_agent(handle_errors=True) for _ in range(5)]
    results = await asyncio.gather(
        *(
            a.ainvoke({"messages": [("user", f"job {i}")]}, config={"callbacks": [handler]})
            for i, a in enumerate(agents)
        )
    )
    assert len(results) == 5 and handler.runs_written == 5 and handler.in_flight == 0
    for s in sqlite_store.list_runs(user_id="default", agent_id="default"):
        run = sqlite_store.get_run(s.run_id, user_id="default", agent_id="default")
        assert run.tool_names == ["find_customer", "list_orders", "track_shipment", "charge_card"]


def test_sync_tools_run_on_worker_threads(sqlite_store: Store, pm) -> None:
    """The premise of the lock: tool callbacks do not all come from the caller's thread."""
    seen: set[str] = set()

    class Spy(SoloFlowCallbackHandler):
        def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
            seen.add(threading.current_thread().name)
            super().on_tool_start(*args, **kwargs)

    handler = Spy(store=sqlite_store, plugin_manager=pm)
    _agent(handle_errors=True).invoke(
        {"messages": [("user", TASK)]}, config={"callbacks": [handler]}
    )
    assert seen and threading.main_thread().name not in seen
    assert len(handler.last_run.tool_calls) == 4


def test_handler_opens_the_embedded_default_store(pm) -> None:
    handler = SoloFlowCallbackHandler(plugin_manager=pm)  # SOLOFLOW_HOME is a temp dir here
    try:
        track_shipment.invoke({"order_id": "O-2"}, config={"callbacks": [handler]})
        with Store.open(None) as again:
            assert again.count_runs(user_id="default", agent_id="default") == 1
    finally:
        handler.close()


def test_store_argument_wins_over_database_url(sqlite_store: Store, tmp_path: Path, pm) -> None:
    other = tmp_path / "other.db"
    handler = SoloFlowCallbackHandler(
        store=sqlite_store, database_url=f"sqlite:///{other}", plugin_manager=pm
    )
    assert handler.store is sqlite_store and not other.exists()


def test_keyword_only_arguments() -> None:
    with pytest.raises(TypeError):
        SoloFlowCallbackHandler("sqlite:///x.db")  # type: ignore[misc]


# --------------------------------------------------------------------------- the scripted model


def test_scripted_model_responses_are_consumed_once() -> None:
    model = ScriptedChatModel(responses=[AIMessage(content="one"), AIMessage(content="two")])
    first, second = model.invoke("hi"), model.invoke("hi")
    assert (first.content, second.content, model.calls) == ("one", "two", 2)
    assert first.id != second.id and first.id.startswith("sf-")
    with pytest.raises(RuntimeError, match="ran out of responses"):
        model.invoke("hi")


def test_scripted_model_fills_usage_and_keeps_given_usage() -> None:
    given = AIMessage(content="x", usage_metadata=_usage(7, 3))
    model = ScriptedChatModel(responses=[AIMessage(content="a" * 40), given])
    est = model.invoke([HumanMessage("b" * 80)]).usage_metadata
    assert est == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
    assert model.invoke("hi").usage_metadata == _usage(7, 3)
    assert given.id is None  # the caller's message is not mutated


def test_scripted_model_script_sees_the_conversation_and_streams() -> None:
    model = ScriptedChatModel(script=lambda msgs: AIMessage(content=f"{len(msgs)} messages"))
    assert (
        model.invoke([HumanMessage("a"), AIMessage("b"), HumanMessage("c")]).content == "3 messages"
    )
    assert "".join(str(c.content) for c in model.stream("x")) == "1 messages"
    assert model._llm_type == "soloflow-scripted" and model.bind_tools(TOOLS) is model


def test_scripted_model_needs_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ScriptedChatModel()
