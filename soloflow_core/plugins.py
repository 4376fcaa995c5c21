"""The plugin manager factory.

Plugins come from the ``soloflow`` entry-point group (built-in ones too) and from the
modules named in ``SOLOFLOW_PLUGINS`` (comma-separated import paths), like pytest's ``-p``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pluggy

from soloflow_core import hookspecs
from soloflow_core._markers import PROJECT_NAME
from soloflow_core.errors import PluginError

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
    pm.hook.soloflow_configure.call_historic(kwargs={"config": config or SoloFlowConfig()})
    return pm
