"""The plugin manager: entry points, SOLOFLOW_PLUGINS, blocking, and who wins a hook."""

from __future__ import annotations

import importlib
import sys
import textwrap
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

import soloflow_plugins.extractive_summarizer
import soloflow_plugins.keyword_classifier
import soloflow_plugins.store_memory
import soloflow_plugins.tool_executor
from soloflow_core import PluginError, hookimpl
from soloflow_core.flow.executors import build_executor_registry
from soloflow_core.plugins import PROJECT_NAME, get_plugin_manager

EXAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples" / "soloflow-example-plugin"
EXAMPLE_MODULE = "soloflow_example_plugin"
BUILT_INS = {
    "tool_executor": soloflow_plugins.tool_executor,
    "keyword_classifier": soloflow_plugins.keyword_classifier,
    "extractive_summarizer": soloflow_plugins.extractive_summarizer,
    "store_memory": soloflow_plugins.store_memory,
}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def fresh_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Modules imported during the test are forgotten afterwards; no .pyc lands in the tree."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    before = set(sys.modules)
    try:
        yield
    finally:
        for name in set(sys.modules) - before:
            if name.startswith(("sf_test_", EXAMPLE_MODULE)):
                del sys.modules[name]
        importlib.invalidate_caches()


@pytest.fixture
def plugin_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> Callable[[str], str]:
    """Write a module on ``sys.path``; returns its (unique) import name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"sf_test_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        return name

    return write


def _fake_dist(site: Path, name: str, version: str, entry_points: dict[str, str]) -> Path:
    """What ``pip install`` leaves behind, as far as entry points are concerned."""
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    lines = [f"[{PROJECT_NAME}]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    importlib.invalidate_caches()
    return dist_info


@pytest.fixture
def installed_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> dict[str, Any]:
    """The example plugin package, "installed": its source and a dist-info on ``sys.path``.

    The dist-info is written from the package's own pyproject.toml, so the test checks the
    entry point the package really declares.
    """
    project = tomllib.loads((EXAMPLE_DIR / "pyproject.toml").read_text())["project"]
    site = tmp_path / "site-packages"
    _fake_dist(site, project["name"], project["version"], project["entry-points"][PROJECT_NAME])
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    monkeypatch.syspath_prepend(str(site))
    return project


class Classifier:
    def __init__(self, label: str | None) -> None:
        self.label = label

    @hookimpl
    def soloflow_classify_task(self, task: str) -> str | None:
        return self.label


class Executors:
    def __init__(self, **executors: Any) -> None:
        self.executors = executors

    @hookimpl
    def soloflow_register_executors(self, register: Callable[[str, Any], None]) -> None:
        for key, executor in self.executors.items():
            register(key, executor)


# --------------------------------------------------------------------------- built-ins


def test_built_ins_load_through_entry_points() -> None:
    pm = get_plugin_manager()
    loaded = dict(pm.list_name_plugin())
    for name, module in BUILT_INS.items():
        assert loaded[name] is module
    dists = {(plugin, dist.project_name) for plugin, dist in pm.list_plugin_distinfo()}
    assert {(m, "soloflow-engine") for m in BUILT_INS.values()} <= dists
    for hook in (
        pm.hook.soloflow_classify_task,
        pm.hook.soloflow_register_executors,
        pm.hook.soloflow_register_memory_providers,
    ):
        built_in = [i for i in hook.get_hookimpls() if i.plugin in BUILT_INS.values()]
        assert built_in and all(i.trylast for i in built_in), hook.name


def test_no_entry_points_means_no_plugins() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    assert pm.get_plugins() == set()
    assert pm.hook.soloflow_classify_task(task="draw a diagram") is None


@pytest.mark.parametrize("via", ["argument", "environment"])
def test_a_built_in_is_blocked_by_name(via: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if via == "argument":
        pm = get_plugin_manager(blocked=["keyword_classifier"])
    else:
        monkeypatch.setenv("SOLOFLOW_BLOCK_PLUGINS", " keyword_classifier , ")
        pm = get_plugin_manager()
    assert pm.is_blocked("keyword_classifier")
    assert pm.get_plugin("keyword_classifier") is None
    assert pm.get_plugin("tool_executor") is soloflow_plugins.tool_executor
    assert pm.hook.soloflow_classify_task(task="draw a diagram") is None


def test_the_environment_blocks_several(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOLOFLOW_BLOCK_PLUGINS", ",".join(BUILT_INS))
    pm = get_plugin_manager(blocked=["something_else"])
    assert pm.get_plugins() == set()
    assert all(pm.is_blocked(n) for n in ("keyword_classifier", "tool_executor", "something_else"))
    assert build_executor_registry(pm, tools=[lookup]).keys() == []


# --------------------------------------------------------------------------- SOLOFLOW_PLUGINS


PLUGIN_SOURCE = """
    from soloflow_core import hookimpl

    CONFIGS = []

    @hookimpl
    def soloflow_configure(config):
        CONFIGS.append(config)

    @hookimpl
    def soloflow_classify_task(task):
        return "from-env"
"""


def test_soloflow_plugins_loads_a_module(
    plugin_module: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = plugin_module(PLUGIN_SOURCE)
    other = plugin_module("from soloflow_core import hookimpl\n")
    monkeypatch.setenv("SOLOFLOW_PLUGINS", f"{name}, {other}")
    pm = get_plugin_manager()
    module = sys.modules[name]
    assert pm.get_plugin(name) is module
    assert pm.get_plugin(other) is sys.modules[other]
    assert len(module.CONFIGS) == 1
    assert pm.hook.soloflow_classify_task(task="draw a diagram") == "from-env"


def test_a_blocked_soloflow_plugins_module_is_not_even_imported(
    plugin_module: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = plugin_module(PLUGIN_SOURCE)
    monkeypatch.setenv("SOLOFLOW_PLUGINS", name)
    monkeypatch.setenv("SOLOFLOW_BLOCK_PLUGINS", name)
    pm = get_plugin_manager()
    assert pm.get_plugin(name) is None
    assert name not in sys.modules
    assert pm.hook.soloflow_classify_task(task="draw a diagram") == "visual"


def test_a_bad_module_path_is_a_plugin_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOLOFLOW_PLUGINS", "sf_test_no_such_pkg.plugin")
    with pytest.raises(
        PluginError, match=r"'sf_test_no_such_pkg\.plugin'.*SOLOFLOW_PLUGINS"
    ) as info:
        get_plugin_manager()
    assert info.value.plugin == "sf_test_no_such_pkg.plugin"


def test_a_module_failing_at_import_is_a_plugin_error_naming_it(
    plugin_module: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = plugin_module("raise RuntimeError('no API key configured')\n")
    monkeypatch.setenv("SOLOFLOW_PLUGINS", name)
    with pytest.raises(PluginError, match=rf"'{name}'.*RuntimeError: no API key") as info:
        get_plugin_manager()
    assert info.value.plugin == name


def test_a_plugin_failing_in_configure_is_a_plugin_error_naming_it(
    plugin_module: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = plugin_module(
        """
        from soloflow_core import hookimpl

        @hookimpl
        def soloflow_configure(config):
            raise KeyError("api_key")
        """
    )
    monkeypatch.setenv("SOLOFLOW_PLUGINS", name)
    with pytest.raises(
        PluginError, match=rf"plugin '{name}' failed in soloflow_configure: KeyError.*api_key"
    ) as info:
        get_plugin_manager()
    assert info.value.plugin == name
    assert f"SOLOFLOW_BLOCK_PLUGINS={name}" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)


class _FailingExecutors:
    def __init__(self, error: Exception) -> None:
        self.error = error

    @hookimpl
    def soloflow_register_executors(self, register: Callable[[str, Any], None]) -> None:
        register("fine", lambda: "ok")
        raise self.error


def test_a_plugin_failing_to_register_executors_is_a_plugin_error_naming_it() -> None:
    pm = get_plugin_manager(plugins=[_FailingExecutors(RuntimeError("no credentials"))])
    with pytest.raises(
        PluginError, match=r"plugin '_FailingExecutors' failed in soloflow_register_executors"
    ) as info:
        build_executor_registry(pm, tools=[lookup])
    assert info.value.plugin == "_FailingExecutors"
    assert "RuntimeError: no credentials" in str(info.value)


def test_a_soloflow_error_from_a_plugin_passes_through() -> None:
    """A plugin that raises SoloFlow's own errors already says what is wrong."""
    from soloflow_core import ConfigError

    pm = get_plugin_manager(plugins=[_FailingExecutors(ConfigError("set MY_TOOL_URL"))])
    with pytest.raises(ConfigError, match="set MY_TOOL_URL"):
        build_executor_registry(pm)


# --------------------------------------------------------------------------- precedence


def test_a_user_classifier_wins_over_the_built_in() -> None:
    task = "draw a diagram of the checkout page"
    assert get_plugin_manager().hook.soloflow_classify_task(task=task) == "visual"
    pm = get_plugin_manager(plugins=[Classifier("mine")])
    assert pm.hook.soloflow_classify_task(task=task) == "mine"
    # None hands over to the built-in.
    pm = get_plugin_manager(plugins=[Classifier(None)])
    assert pm.hook.soloflow_classify_task(task=task) == "visual"


def test_a_user_plugin_wins_even_when_registered_before_the_built_ins() -> None:
    # pluggy calls later registrations first; only trylast keeps the built-ins behind.
    pm = get_plugin_manager(load_entrypoints=False, plugins=[Classifier("mine")])
    pm.load_setuptools_entrypoints(PROJECT_NAME)
    assert pm.get_plugin("keyword_classifier") is soloflow_plugins.keyword_classifier
    assert pm.hook.soloflow_classify_task(task="draw a diagram") == "mine"


def test_a_user_executor_wins_over_the_tool_executor_for_the_same_key() -> None:
    def my_lookup(key: str) -> str:
        return f"mine: {key}"

    built_in = build_executor_registry(get_plugin_manager(), tools=[lookup])
    assert built_in.get("lookup") is lookup

    mine = Executors(lookup=my_lookup)
    registry = build_executor_registry(get_plugin_manager(plugins=[mine]), tools=[lookup])
    assert registry.get("lookup") is my_lookup

    pm = get_plugin_manager(load_entrypoints=False, plugins=[mine])
    pm.load_setuptools_entrypoints(PROJECT_NAME)
    assert build_executor_registry(pm, tools=[lookup]).get("lookup") is my_lookup


# --------------------------------------------------------------------------- a real package


def test_the_example_plugin_loads_through_real_entry_points(
    installed_example: dict[str, Any],
) -> None:
    assert EXAMPLE_MODULE not in sys.modules
    pm = get_plugin_manager()

    module = sys.modules[EXAMPLE_MODULE]
    assert Path(module.__file__).is_relative_to(EXAMPLE_DIR)
    assert pm.get_plugin("example") is module
    assert (module, installed_example["name"]) in {
        (plugin, dist.project_name) for plugin, dist in pm.list_plugin_distinfo()
    }
    # Its classifier answers first; what it leaves (None) goes to the built-in one.
    assert pm.hook.soloflow_classify_task(task="Refund invoice 42 to the customer") == "billing"
    assert pm.hook.soloflow_classify_task(task="draw a diagram") == "visual"
    # Its executor is registered next to the agent's tools.
    registry = build_executor_registry(pm, tools=[lookup])
    assert registry.keys() == ["lookup", "word_count"]
    assert registry.get("word_count")(text="one two\nthree") == {"words": 3, "lines": 2}


def test_the_example_plugin_is_blocked_by_its_entry_point_name(
    installed_example: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLOFLOW_BLOCK_PLUGINS", "example")
    pm = get_plugin_manager()
    assert pm.get_plugin("example") is None
    assert "word_count" not in build_executor_registry(pm)
    assert pm.hook.soloflow_classify_task(task="Refund invoice 42") == "quick"


def test_an_installed_plugin_also_named_in_soloflow_plugins_loads_once(
    installed_example: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLOFLOW_PLUGINS", EXAMPLE_MODULE)
    pm = get_plugin_manager()
    module = sys.modules[EXAMPLE_MODULE]
    assert [name for name, plugin in pm.list_name_plugin() if plugin is module] == ["example"]


def test_a_broken_entry_point_is_a_plugin_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    site = tmp_path / "site-packages"
    _fake_dist(site, "soloflow-broken-plugin", "1.0", {"broken": "sf_test_missing_module"})
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(PluginError, match=r"'broken'.*SOLOFLOW_BLOCK_PLUGINS=broken") as info:
        get_plugin_manager()
    assert info.value.plugin == "broken"
    # Blocking it by that name is the way out.
    monkeypatch.setenv("SOLOFLOW_BLOCK_PLUGINS", "broken")
    assert get_plugin_manager().get_plugin("keyword_classifier") is not None
