"""Hook calls isolate a failing plugin: the others still run, the failure names the plugin,
and strict mode (``get_plugin_manager(strict=True)``, ``SOLOFLOW_STRICT_PLUGINS=1``) makes it
fatal. Real agents, a real flow runtime and a real SQLite store."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tools import tool

from soloflow_core import PluginError, hookimpl
from soloflow_core.learning.promotion import submit_flow
from soloflow_core.models import FlowDefinition, FlowStep, StepRecord
from soloflow_core.plugins import call_hook, get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.callbacks import SoloFlowCallbackHandler
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class BrokenListener:
    @hookimpl(tryfirst=True)
    def soloflow_step_finished(self, step: StepRecord) -> None:
        raise RuntimeError("listener bug")

    @hookimpl(tryfirst=True)
    def soloflow_classify_task(self, task: str) -> str | None:
        raise ValueError("classifier bug")

    @hookimpl(tryfirst=True)
    def soloflow_flow_promoted(self, flow: FlowDefinition) -> None:
        raise KeyError("promotion bug")


class Listener:
    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self.promoted: list[str] = []

    @hookimpl
    def soloflow_step_finished(self, step: StepRecord) -> None:
        self.steps.append(step)

    @hookimpl
    def soloflow_flow_promoted(self, flow: FlowDefinition) -> None:
        self.promoted.append(flow.name)


class Timing:
    """A wrapper sees one call however many implementations fail."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl(wrapper=True)
    def soloflow_step_finished(self, step: StepRecord) -> Iterator[None]:
        self.calls += 1
        return (yield)


FLOW = FlowDefinition(
    name="Look",
    steps=[
        FlowStep(id="a", skill_key="lookup", input_map={"key": "{{_trigger.k}}"}),
        FlowStep(id="b", skill_key="lookup", depends_on=["a"], input_map={"key": "{{a}}"}),
    ],
)


def _step(index: int = 0) -> StepRecord:
    from soloflow_core.models import ToolCall

    return StepRecord(
        run_id="r",
        user_id="u",
        agent_id="a",
        index=index,
        call=ToolCall(name="lookup", args={"key": "k"}, output="v"),
    )


def test_a_failing_listener_does_not_silence_the_others(caplog: pytest.LogCaptureFixture) -> None:
    listener, timing = Listener(), Timing()
    pm = get_plugin_manager(load_entrypoints=False, plugins=[listener, BrokenListener(), timing])
    with caplog.at_level(logging.ERROR, logger="soloflow_core.plugins"):
        call_hook(pm, "soloflow_step_finished", step=_step())
    assert len(listener.steps) == 1
    assert timing.calls == 1
    assert (
        "plugin 'BrokenListener' failed in soloflow_step_finished (RuntimeError: listener bug)"
        in caplog.text
    )
    assert "SOLOFLOW_BLOCK_PLUGINS=BrokenListener" in caplog.text


def test_several_failing_plugins_are_each_skipped(caplog: pytest.LogCaptureFixture) -> None:
    listener = Listener()

    class AlsoBroken:
        @hookimpl
        def soloflow_step_finished(self, step: StepRecord) -> None:
            raise OSError("disk gone")

    pm = get_plugin_manager(
        load_entrypoints=False, plugins=[listener, AlsoBroken(), BrokenListener()]
    )
    call_hook(pm, "soloflow_step_finished", step=_step())
    assert len(listener.steps) == 1
    assert "'BrokenListener'" in caplog.text and "'AlsoBroken'" in caplog.text


def test_the_built_in_classifier_answers_when_a_user_classifier_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pm = get_plugin_manager(plugins=[BrokenListener()])
    label = call_hook(pm, "soloflow_classify_task", task="draw a diagram of the checkout page")
    assert label == "visual"  # the built-in keyword classifier
    assert (
        "plugin 'BrokenListener' failed in soloflow_classify_task (ValueError: classifier bug)"
        in caplog.text
    )


def test_strict_mode_makes_a_plugin_failure_fatal_and_names_the_plugin() -> None:
    listener = Listener()
    pm = get_plugin_manager(
        load_entrypoints=False, plugins=[listener, BrokenListener()], strict=True
    )
    with pytest.raises(
        PluginError, match=r"plugin 'BrokenListener' failed in soloflow_step_finished"
    ) as info:
        call_hook(pm, "soloflow_step_finished", step=_step())
    assert info.value.plugin == "BrokenListener"
    assert isinstance(info.value.__cause__, RuntimeError)


def test_strict_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOLOFLOW_STRICT_PLUGINS", "1")
    pm = get_plugin_manager(plugins=[BrokenListener()])
    assert pm.strict
    with pytest.raises(PluginError, match="'BrokenListener' failed in soloflow_classify_task"):
        call_hook(pm, "soloflow_classify_task", task="anything")


def test_a_soloflow_error_from_a_plugin_passes_through_unchanged() -> None:
    from soloflow_core import ConfigError

    class Configless:
        @hookimpl
        def soloflow_step_finished(self, step: StepRecord) -> None:
            raise ConfigError("set MY_URL")

    pm = get_plugin_manager(load_entrypoints=False, plugins=[Configless()])
    with pytest.raises(ConfigError, match="set MY_URL"):
        call_hook(pm, "soloflow_step_finished", step=_step())


def test_capture_keeps_the_classifier_and_listeners_when_a_plugin_raises(
    sqlite_store: Store,
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from soloflow_langgraph.testing import ScriptedChatModel

    listener = Listener()
    pm = get_plugin_manager(plugins=[listener, BrokenListener()])
    handler = SoloFlowCallbackHandler(store=sqlite_store, plugin_manager=pm)
    call = {"name": "lookup", "args": {"key": "a"}, "id": "k1", "type": "tool_call"}
    agent = create_agent(
        ScriptedChatModel(
            responses=[AIMessage(content="", tool_calls=[call]), AIMessage(content="done")]
        ),
        tools=[lookup],
    )
    agent.invoke(
        {"messages": [("user", "draw a diagram of the checkout page")]},
        config={"callbacks": [handler]},
    )
    assert len(listener.steps) == 1
    stored = sqlite_store.get_run(handler.last_run.run_id, user_id="default", agent_id="default")
    assert stored.classification == "visual"


def test_flow_runs_and_promotion_keep_their_listeners(sqlite_store: Store) -> None:
    listener = Listener()
    pm = get_plugin_manager(plugins=[listener, BrokenListener()])
    submit_flow(sqlite_store, FLOW, pm=pm, user_id="u", agent_id="a")
    assert listener.promoted == ["Look"]
    with FlowRuntime(
        sqlite_store, tools=[lookup], plugin_manager=pm, user_id="u", agent_id="a"
    ) as rt:
        result = rt.run("Look", {"k": "x"})
    assert result.status == "completed"
    assert [s.call.output for s in listener.steps] == ["value of x", "value of value of x"]


def test_strict_mode_stops_a_flow_run_on_a_plugin_failure(sqlite_store: Store) -> None:
    pm = get_plugin_manager(plugins=[BrokenListener()], strict=True)
    submit_flow(sqlite_store, FLOW, user_id="u", agent_id="a")
    with FlowRuntime(
        sqlite_store, tools=[lookup], plugin_manager=pm, user_id="u", agent_id="a"
    ) as rt:
        outcome: Any
        try:
            outcome = rt.run("Look", {"k": "x"})
        except PluginError as exc:
            outcome = exc
    text = str(outcome) if isinstance(outcome, PluginError) else str(outcome.error)
    assert "'BrokenListener' failed in soloflow_step_finished" in text


class Counting:
    """Two instances of one class: they share their method's code."""

    def __init__(self, fail: bool) -> None:
        self.fail, self.calls = fail, 0

    @hookimpl
    def soloflow_flow_promoted(self, flow: FlowDefinition) -> None:
        self.calls += 1
        if self.fail:
            raise RuntimeError("down")


@pytest.mark.parametrize("failing_first", [True, False])
def test_instances_of_one_class_are_told_apart(failing_first: bool) -> None:
    pm = get_plugin_manager()
    failing, fine = Counting(fail=True), Counting(fail=False)
    for plugin in (failing, fine) if failing_first else (fine, failing):
        pm.register(plugin)
    flow = FlowDefinition(name="f", steps=[FlowStep(id="s", skill_key="lookup")])
    call_hook(pm, "soloflow_flow_promoted", flow=flow)
    # each called exactly once: the failing one is not called again, the other not skipped
    assert (failing.calls, fine.calls) == (1, 1)
