"""The capture hooks, seen by plugins in a fresh plugin manager while a real agent runs."""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from soloflow_core import hookimpl
from soloflow_core.models import StepRecord, TaskRun
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _agent() -> Any:
    """lookup(a); then lookup(b) ∥ lookup(c) in one turn; then explode (handled); then done."""
    responses = [
        AIMessage(content="", tool_calls=[_call("lookup", {"key": "a"}, "k1")]),
        AIMessage(
            content="",
            tool_calls=[_call("lookup", {"key": "b"}, "k2"), _call("lookup", {"key": "c"}, "k3")],
        ),
        AIMessage(content="", tool_calls=[_call("explode", {"reason": "boom"}, "k4")]),
        AIMessage(content="all done"),
    ]
    return create_agent(
        ScriptedChatModel(responses=responses),
        tools=[lookup, explode],
        name="hooked",
        middleware=[ToolErrorMiddleware(on_error=lambda exc, req: f"{type(exc).__name__}: {exc}")],
    )


def _invoke(handler: SoloFlowCallbackHandler, task: str = "refund my last order") -> dict[str, Any]:
    return _agent().invoke({"messages": [("user", task)]}, config={"callbacks": [handler]})


class StepSpy:
    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    @hookimpl
    def soloflow_step_finished(self, step: StepRecord) -> None:
        with self._lock:
            self.steps.append(step)
            self.threads.add(threading.current_thread().name)


class RunSpy:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs: list[TaskRun] = []
        self.stored_when_called: list[bool] = []

    @hookimpl
    def soloflow_run_finished(self, run: TaskRun) -> None:
        self.runs.append(run)
        found = self.store.load_runs([run.run_id], user_id=run.user_id, agent_id=run.agent_id)
        self.stored_when_called.append(len(found) == 1)


class Failing:
    @hookimpl
    def soloflow_step_finished(self, step: StepRecord) -> None:
        raise RuntimeError("step plugin bug")

    @hookimpl
    def soloflow_run_finished(self, run: TaskRun) -> None:
        raise RuntimeError("run plugin bug")

    @hookimpl
    def soloflow_classify_task(self, task: str) -> str | None:
        raise RuntimeError("classifier bug")


def test_soloflow_step_finished(sqlite_store: Store) -> None:
    spy = StepSpy()
    pm = get_plugin_manager(load_entrypoints=False, plugins=[spy])
    handler = SoloFlowCallbackHandler(
        store=sqlite_store, user_id="u", agent_id="a", plugin_manager=pm
    )
    _invoke(handler)
    run = handler.last_run
    assert len(spy.steps) == 4
    by_index = sorted(spy.steps, key=lambda s: s.index)
    assert [s.index for s in by_index] == [0, 1, 2, 3]
    # Each step is exactly the call stored at its index.
    assert [s.call for s in by_index] == run.tool_calls
    assert {(s.run_id, s.user_id, s.agent_id, s.source) for s in spy.steps} == {
        (run.run_id, "u", "a", "agent")
    }
    assert [s.call.args["key"] for s in by_index[:3]] == ["a", "b", "c"]
    assert by_index[3].call.error is True and by_index[3].call.output == "RuntimeError: boom"
    assert threading.main_thread().name not in spy.threads  # fired on the tool's worker thread


def test_soloflow_step_finished_for_a_direct_tool_call(sqlite_store: Store) -> None:
    spy = StepSpy()
    pm = get_plugin_manager(load_entrypoints=False, plugins=[spy])
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    lookup.invoke({"key": "z"}, config={"callbacks": [handler]})
    assert [(s.index, s.call.output, s.run_id) for s in spy.steps] == [
        (0, "value of z", handler.last_run.run_id)
    ]


def test_soloflow_run_finished(sqlite_url: str) -> None:
    store = Store.open(sqlite_url)
    spy = RunSpy(store)
    pm = get_plugin_manager(load_entrypoints=False, plugins=[spy])
    handler = SoloFlowCallbackHandler(store=store, plugin_manager=pm)
    admin = sa.create_engine(sqlite_url)
    try:
        _invoke(handler)
        assert spy.runs == [handler.last_run] and spy.stored_when_called == [True]
        assert spy.runs[0].tool_names == ["lookup", "lookup", "lookup", "explode"]

        with admin.begin() as conn:  # writes fail: no run_finished until the run is stored
            conn.execute(sa.text("ALTER TABLE sf_task_runs RENAME TO sf_task_runs_away"))
        _invoke(handler)
        assert len(spy.runs) == 1 and len(handler.unsaved) == 1
        with admin.begin() as conn:
            conn.execute(sa.text("ALTER TABLE sf_task_runs_away RENAME TO sf_task_runs"))
        kept = handler.unsaved[0]
        assert handler.flush() == 1
        assert spy.runs[1] is kept and spy.stored_when_called == [True, True]
    finally:
        admin.dispose()
        store.close()


def test_soloflow_classify_task_on_capture(sqlite_store: Store) -> None:
    class Billing:
        def __init__(self) -> None:
            self.seen: list[str] = []

        @hookimpl
        def soloflow_classify_task(self, task: str) -> str | None:
            self.seen.append(task)
            return "billing" if "refund" in task else None

    plugin = Billing()
    pm = get_plugin_manager(plugins=[plugin])  # with the built-in keyword classifier too
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    _invoke(handler, "refund my last order")
    stored = sqlite_store.get_run(handler.last_run.run_id, user_id="default", agent_id="default")
    assert stored.classification == "billing"  # the user's plugin wins over the built-in one
    _invoke(handler, "research the shipping options")
    assert handler.last_run.classification == "deep"  # None from the plugin: the built-in answers
    lookup.invoke({"key": "k"}, config={"callbacks": [handler]})
    assert handler.last_run.task is None and handler.last_run.classification is None
    assert plugin.seen == ["refund my last order", "research the shipping options"]

    bare = SoloFlowCallbackHandler(
        store=sqlite_store, plugin_manager=get_plugin_manager(load_entrypoints=False)
    )
    _invoke(bare)
    assert bare.last_run.classification is None  # no classifier registered at all


def test_failing_plugins_never_break_the_agent(sqlite_store: Store, caplog) -> None:
    pm = get_plugin_manager(load_entrypoints=False, plugins=[Failing()])
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    result = _invoke(handler)
    assert result["messages"][-1].content == "all done"
    run = sqlite_store.get_run(handler.last_run.run_id, user_id="default", agent_id="default")
    assert run.classification is None and len(run.tool_calls) == 4
    for text in (
        "plugin 'Failing' failed in soloflow_step_finished",
        "plugin 'Failing' failed in soloflow_run_finished",
        "plugin 'Failing' failed in soloflow_classify_task",
    ):
        assert text in caplog.text
