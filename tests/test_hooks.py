"""One test per hook, each named ``test_<hook name>``, and the meta-test that keeps it so.

``test_soloflow_step_finished`` and ``test_soloflow_run_finished`` live in
``tests/test_hook_step_finished.py`` (they need a real agent run).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest
from langchain_core.tools import tool

from soloflow_core import (
    ConfigError,
    FlowCandidate,
    FlowDefinition,
    FlowStep,
    PluginError,
    SoloFlowConfig,
    hookimpl,
    hookspecs,
)
from soloflow_core.flow.executors import build_executor_registry
from soloflow_core.learning.promotion import approve_candidate, submit_flow
from soloflow_core.memory import InMemoryProvider, MemoryRecord, build_memory_registry
from soloflow_core.models.candidates import candidate_id_for, dedupe_key_for
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store
from soloflow_langgraph.sequential import hookspecs as sequential_hookspecs

ROOT = Path(__file__).resolve().parent.parent
USER, AGENT = "u1", "a1"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.fixture
def add_plugin(pm: pluggy.PluginManager) -> Iterator[Callable[[object], object]]:
    """Register temporary plugins on the test's plugin manager; unregistered afterwards."""
    added: list[object] = []

    def add(plugin: object) -> object:
        pm.register(plugin)
        added.append(plugin)
        return plugin

    try:
        yield add
    finally:
        for plugin in added:
            if pm.is_registered(plugin):
                pm.unregister(plugin)


# --------------------------------------------------------------------------- configuration


class ConfigSpy:
    def __init__(self) -> None:
        self.configs: list[SoloFlowConfig] = []

    @hookimpl
    def soloflow_configure(self, config: SoloFlowConfig) -> None:
        self.configs.append(config)


def test_soloflow_configure() -> None:
    config = SoloFlowConfig(user_id=USER, agent_id=AGENT)
    early = ConfigSpy()
    pm = get_plugin_manager(plugins=[early], config=config)
    assert early.configs == [config]

    # Historic: a plugin registered after the manager was built gets the same call at once.
    late = ConfigSpy()
    pm.register(late)
    try:
        assert late.configs == [config]
        assert early.configs == [config]  # not called again
    finally:
        pm.unregister(late)

    default = ConfigSpy()
    get_plugin_manager(load_entrypoints=False, plugins=[default])
    assert default.configs == [SoloFlowConfig()]


# --------------------------------------------------------------------------- classification


class Classifier:
    def __init__(self, label: str | None) -> None:
        self.label = label
        self.seen: list[str] = []

    @hookimpl
    def soloflow_classify_task(self, task: str) -> str | None:
        self.seen.append(task)
        return self.label


def test_soloflow_classify_task(
    pm: pluggy.PluginManager, add_plugin: Callable[[object], object]
) -> None:
    classify = pm.hook.soloflow_classify_task
    # The built-in keyword classifier alone.
    assert classify(task="draw a diagram of the login UI") == "visual"
    assert classify(task="coordinate a team of agents on the release") == "ultrabrain"
    assert classify(task="analyze last week's error logs") == "deep"
    assert classify(task="what time is it in Paris?") == "quick"
    assert classify(task=" ".join(["word"] * 61)) == "deep"
    assert classify(task="   ") is None

    # First result: None passes to the next implementation; a label stops the call.
    task = "please refund invoice 42"
    billing = add_plugin(Classifier("billing"))
    passer = add_plugin(Classifier(None))  # registered last: asked first
    assert classify(task=task) == "billing"  # not the built-in "quick"
    assert passer.seen == [task]
    assert billing.seen == [task]

    urgent = add_plugin(Classifier("urgent"))
    assert classify(task=task) == "urgent"
    assert urgent.seen == [task]
    assert passer.seen == [task] and billing.seen == [task]  # never reached


# --------------------------------------------------------------------------- providers


class NotesProvider(InMemoryProvider):
    def __init__(self, capacity: int = 10) -> None:
        super().__init__()
        self.capacity = capacity


class MyInMemory(InMemoryProvider):
    pass


class MemoryPlugin:
    @hookimpl
    def soloflow_register_memory_providers(self, register: Callable[..., None]) -> None:
        register("notes", NotesProvider)
        register("in-memory", MyInMemory)  # the same name as the built-in: this one wins


def test_soloflow_register_memory_providers(
    pm: pluggy.PluginManager, add_plugin: Callable[[object], object]
) -> None:
    # Built in: in-memory, and the store's tiers (soloflow_plugins.store_memory).
    assert build_memory_registry(pm).names() == ["episodic", "in-memory", "semantic"]

    add_plugin(MemoryPlugin())
    registry = build_memory_registry(pm)
    assert registry.names() == ["episodic", "in-memory", "notes", "semantic"]
    assert type(registry.create("in-memory")) is MyInMemory

    notes = registry.create("notes", capacity=3)
    assert isinstance(notes, NotesProvider) and notes.capacity == 3
    notes.record(MemoryRecord(user_id=USER, agent_id=AGENT, kind="note", text="refund approved"))
    found = notes.search("refund", user_id=USER, agent_id=AGENT)
    assert [r.text for r in found] == ["refund approved"]

    with pytest.raises(ConfigError, match=r"'vector'.*in-memory, notes, semantic"):
        registry.create("vector")


# --------------------------------------------------------------------------- executors


class ExecutorPlugin:
    def __init__(self) -> None:
        self.tools_seen: list[list[Any]] = []

    @hookimpl
    def soloflow_register_executors(
        self, register: Callable[[str, Any], None], tools: list[Any]
    ) -> None:
        self.tools_seen.append(list(tools))
        register("double", lambda n: n * 2)
        register("lookup", lambda key: f"plugin {key}")


class SubsetExecutorPlugin:
    """Takes only ``register``: an implementation may leave hook arguments out."""

    @hookimpl
    def soloflow_register_executors(self, register: Callable[[str, Any], None]) -> None:
        register("shout", lambda text: text.upper())


def test_soloflow_register_executors(
    pm: pluggy.PluginManager, add_plugin: Callable[[object], object]
) -> None:
    built_in = build_executor_registry(pm, tools=[lookup])
    assert built_in.keys() == ["lookup"]
    assert built_in.get("lookup") is lookup

    plugin = add_plugin(ExecutorPlugin())
    add_plugin(SubsetExecutorPlugin())
    registry = build_executor_registry(pm, tools=[lookup])
    assert plugin.tools_seen == [[lookup]]
    assert registry.keys() == ["double", "lookup", "shout"]
    assert registry.get("double")(n=21) == 42
    assert registry.get("shout")(text="hi") == "HI"
    assert registry.get("lookup")(key="k") == "plugin k"  # the user's plugin beat the tool


def test_a_bad_executor_names_its_key(
    pm: pluggy.PluginManager, add_plugin: Callable[[object], object]
) -> None:
    class Bad:
        @hookimpl
        def soloflow_register_executors(self, register: Callable[[str, Any], None]) -> None:
            register("broken", 42)

    add_plugin(Bad())
    # A plugin that registers a non-executor misbehaves: the error names it and the key.
    with pytest.raises(PluginError, match=r"plugin 'Bad' .*TypeError: .*'broken'") as info:
        build_executor_registry(pm)
    assert info.value.plugin == "Bad"
    assert isinstance(info.value.__cause__, TypeError)


# --------------------------------------------------------------------------- promotion


class PromotionSpy:
    def __init__(self) -> None:
        self.flows: list[FlowDefinition] = []

    @hookimpl
    def soloflow_flow_promoted(self, flow: FlowDefinition) -> None:
        self.flows.append(flow)


def _flow(name: str = "order-status") -> FlowDefinition:
    return FlowDefinition(
        name=name,
        input_schema={"type": "object", "properties": {"email": {"type": "string"}}},
        steps=[
            FlowStep(
                id="step_1", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}
            ),
            FlowStep(
                id="step_2",
                skill_key="list_orders",
                depends_on=["step_1"],
                input_map={"customer_id": "{{step_1.customer_id}}"},
            ),
        ],
    )


def _stored_candidate(store: Store, flow: FlowDefinition) -> FlowCandidate:
    sequence = [s.skill_key for s in flow.steps]
    key = dedupe_key_for(sequence)
    cand = FlowCandidate(
        id=candidate_id_for(USER, AGENT, key),
        user_id=USER,
        agent_id=AGENT,
        tool_sequence=sequence,
        occurrence_count=3,
        match_type="exact",
        estimated_token_savings=1200.0,
        avg_cost_per_execution=0.01,
        dedupe_key=key,
        proposed_flow=flow,
        run_ids=["r1", "r2", "r3"],
    )
    store.save_candidates([cand])
    return cand


def test_soloflow_flow_promoted(
    sqlite_store: Store, pm: pluggy.PluginManager, add_plugin: Callable[[object], object]
) -> None:
    spy = add_plugin(PromotionSpy())
    cand = _stored_candidate(sqlite_store, _flow())

    approved = approve_candidate(sqlite_store, cand.id, user_id=USER, agent_id=AGENT, pm=pm)
    assert spy.flows == [approved]
    assert approved.version == 1
    stored = sqlite_store.get_flow(approved.name, user_id=USER, agent_id=AGENT)
    assert stored.flow == spy.flows[0]
    assert stored.candidate_id == cand.id

    submitted = submit_flow(sqlite_store, _flow(), user_id=USER, agent_id=AGENT, pm=pm)
    assert spy.flows == [approved, submitted]
    assert submitted.version == 2

    # Without a plugin manager nothing is announced.
    submit_flow(sqlite_store, _flow("other"), user_id=USER, agent_id=AGENT)
    assert len(spy.flows) == 2


def test_a_failing_flow_promoted_plugin_does_not_undo_the_registration(
    sqlite_store: Store,
    pm: pluggy.PluginManager,
    add_plugin: Callable[[object], object],
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing:
        @hookimpl
        def soloflow_flow_promoted(self, flow: FlowDefinition) -> None:
            raise RuntimeError("webhook down")

    add_plugin(Failing())
    cand = _stored_candidate(sqlite_store, _flow())
    with caplog.at_level(logging.ERROR, logger="soloflow_core.learning.promotion"):
        flow = approve_candidate(sqlite_store, cand.id, user_id=USER, agent_id=AGENT, pm=pm)
    assert "plugin 'Failing' failed in soloflow_flow_promoted" in caplog.text
    assert "webhook down" in caplog.text
    assert sqlite_store.get_flow(flow.name, user_id=USER, agent_id=AGENT).flow == flow
    assert sqlite_store.get_candidate(cand.id, user_id=USER, agent_id=AGENT).status == "approved"


# --------------------------------------------------------------------------- the meta-test


def _hookspecs() -> dict[str, Callable[..., Any]]:
    marker = f"{hookspecs.hookspec.project_name}_spec"
    return {
        name: fn
        for module in (hookspecs, sequential_hookspecs)
        for name, fn in vars(module).items()
        if inspect.isfunction(fn) and hasattr(fn, marker)
    }


def test_every_hook_is_documented_and_tested() -> None:
    specs = _hookspecs()
    assert specs.keys() >= {
        "soloflow_configure",
        "soloflow_step_finished",
        "soloflow_run_finished",
        "soloflow_classify_task",
        "soloflow_register_memory_providers",
        "soloflow_register_executors",
        "soloflow_flow_promoted",
        "soloflow_summarize_context",
        "soloflow_token_budget_warning",
        "soloflow_register_sequential_agents",
    }
    headings = set(re.findall(r"^## (.+?)\s*$", (ROOT / "docs/hooks.md").read_text(), re.M))
    tests = {
        m
        for path in (ROOT / "tests").rglob("*.py")
        for m in re.findall(r"^\s*(?:async\s+)?def (test_\w+)\(", path.read_text(), re.M)
    }
    missing = []
    for name, fn in sorted(specs.items()):
        signature = f"{name}({', '.join(inspect.signature(fn).parameters)})"
        if signature not in headings:
            missing.append(f"docs/hooks.md has no heading '## {signature}'")
        if f"test_{name}" not in tests:
            missing.append(f"no test under tests/ is named 'test_{name}'")
    assert not missing, "\n".join(missing)
