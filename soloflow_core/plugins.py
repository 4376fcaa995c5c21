"""The plugin manager factory, and the errors of a plugin that misbehaves.

Plugins come from the ``soloflow`` entry-point group (built-in ones too) and from the
modules named in ``SOLOFLOW_PLUGINS`` (comma-separated import paths), like pytest's ``-p``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pluggy

from soloflow_core import hookspecs
from soloflow_core._markers import PROJECT_NAME
from soloflow_core.errors import PluginError, SoloFlowError

if TYPE_CHECKING:
    from soloflow_core.models import SoloFlowConfig

ENV_PLUGINS = "SOLOFLOW_PLUGINS"
ENV_BLOCKED = "SOLOFLOW_BLOCK_PLUGINS"


def _split(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _first_unloaded_entry_point(pm: pluggy.PluginManager) -> str | None:
    """The entry point pluggy stopped at: the first one neither loaded nor blocked."""
    for dist in importlib.metadata.distributions():  # pluggy's own iteration order
        for ep in dist.entry_points:
            if ep.group == PROJECT_NAME and not (pm.get_plugin(ep.name) or pm.is_blocked(ep.name)):
                return ep.name
    return None


def get_plugin_manager(
    *,
    load_entrypoints: bool = True,
    blocked: Iterable[str] = (),
    plugins: Iterable[object] = (),
    config: SoloFlowConfig | None = None,
) -> pluggy.PluginManager:
    """Build a fresh plugin manager (no global state).

    Args:
        load_entrypoints: load the ``soloflow`` entry-point group (built-in plugins included).
        blocked: plugin names not to load (entry-point names or module paths). Names in
            ``SOLOFLOW_BLOCK_PLUGINS`` are blocked too.
        plugins: plugin objects to register in addition (tests, embedding applications).
        config: handed to ``soloflow_configure``; defaults to ``SoloFlowConfig()``.

    Raises:
        PluginError: a module named in ``SOLOFLOW_PLUGINS`` cannot be imported.
    """
    from soloflow_core.models import SoloFlowConfig

    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for name in [*blocked, *_split(os.environ.get(ENV_BLOCKED))]:
        pm.set_blocked(name)
    if load_entrypoints:
        try:
            pm.load_setuptools_entrypoints(PROJECT_NAME)
        except Exception as exc:  # a broken third-party plugin must say which one
            culprit = _first_unloaded_entry_point(pm)
            raise PluginError(
                f"loading the '{PROJECT_NAME}' entry point {culprit or '<unknown>'!r} failed: "
                f"{type(exc).__name__}: {exc}. "
                f"Fix or uninstall it, or block it with {ENV_BLOCKED}={culprit or '<name>'}.",
                plugin=culprit,
            ) from exc
    for path in _split(os.environ.get(ENV_PLUGINS)):
        if pm.is_blocked(path) or pm.get_plugin(path) is not None:
            continue
        try:
            module = importlib.import_module(path)
        except Exception as exc:  # a SyntaxError or a failing import-time line, too
            raise PluginError(
                f"plugin module {path!r} named in {ENV_PLUGINS} cannot be imported: "
                f"{type(exc).__name__}: {exc}",
                plugin=path,
            ) from exc
        if pm.is_registered(module):  # already loaded through its entry point
            continue
        pm.register(module, name=path)
    for plugin in plugins:
        pm.register(plugin)
    with plugin_errors(pm, "soloflow_configure"):
        pm.hook.soloflow_configure.call_historic(kwargs={"config": config or SoloFlowConfig()})
    return pm


def _plugin_label(pm: pluggy.PluginManager, plugin: object) -> str:
    """The plugin's registered name, or its class or module when it was registered unnamed."""
    name = pm.get_name(plugin) or ""
    if name and not name.isdigit():  # pluggy names an unnamed plugin by its id()
        return name
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def failing_plugin(pm: pluggy.PluginManager, hook_name: str, exc: BaseException) -> str | None:
    """The plugin whose implementation of ``hook_name`` raised ``exc`` (the innermost
    implementation on its traceback), or None when no implementation was running."""
    hook = getattr(pm.hook, hook_name, None)
    if hook is None:
        return None
    codes = {
        code: _plugin_label(pm, impl.plugin)
        for impl in hook.get_hookimpls()
        if (code := getattr(impl.function, "__code__", None)) is not None
    }
    culprit = None
    tb = exc.__traceback__
    while tb is not None:
        culprit = codes.get(tb.tb_frame.f_code, culprit)
        tb = tb.tb_next
    return culprit


@contextmanager
def plugin_errors(pm: pluggy.PluginManager, hook_name: str) -> Iterator[None]:
    """Turn an exception raised by a plugin's implementation of ``hook_name`` into a
    :class:`PluginError` that names the plugin. SoloFlow's own errors, and exceptions raised
    outside any implementation, pass through unchanged.

    Example:
        >>> with plugin_errors(pm, "soloflow_register_executors"):
        ...     pm.hook.soloflow_register_executors(register=registry.register, tools=[])
    """
    try:
        yield
    except SoloFlowError:
        raise
    except Exception as exc:
        name = failing_plugin(pm, hook_name, exc)
        if name is None:
            raise
        blockable = pm.get_plugin(name) is not None  # registered under that name
        remedy = f"Fix or uninstall it, or block it with {ENV_BLOCKED}={name}." if blockable else "Fix it."
        raise PluginError(
            f"plugin {name!r} failed in {hook_name}: {type(exc).__name__}: {exc}. {remedy}",
            plugin=name,
        ) from exc
