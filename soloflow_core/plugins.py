"""The plugin manager factory, and the errors of a plugin that misbehaves.

Plugins come from the ``soloflow`` entry-point group (built-in ones too) and from the
modules named in ``SOLOFLOW_PLUGINS`` (comma-separated import paths), like pytest's ``-p``.

A plugin that raises in a broadcast or first-result hook is isolated (:func:`call_hook`): the
failure is logged with the plugin's name and the other implementations still run. With
``SOLOFLOW_STRICT_PLUGINS=1`` or ``get_plugin_manager(strict=True)`` it is a
:class:`PluginError` instead.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pluggy

from soloflow_core import hookspecs
from soloflow_core._markers import PROJECT_NAME
from soloflow_core.errors import PluginError, SoloFlowError

if TYPE_CHECKING:
    from soloflow_core.models import SoloFlowConfig

ENV_PLUGINS = "SOLOFLOW_PLUGINS"
ENV_BLOCKED = "SOLOFLOW_BLOCK_PLUGINS"
ENV_STRICT = "SOLOFLOW_STRICT_PLUGINS"

log = logging.getLogger(__name__)


class SoloFlowPluginManager(pluggy.PluginManager):
    """A pluggy plugin manager that knows whether plugin errors are fatal.

    Attributes:
        strict: a plugin raising in a hook called through :func:`call_hook` raises
            :class:`PluginError` instead of being logged and skipped.
    """

    def __init__(self, project_name: str, *, strict: bool = False) -> None:
        super().__init__(project_name)
        self.strict = strict


def _strict_from_env() -> bool:
    return os.environ.get(ENV_STRICT, "").strip().lower() in {"1", "true", "yes", "on"}


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
    strict: bool = False,
) -> SoloFlowPluginManager:
    """Build a fresh plugin manager (no global state).

    Args:
        load_entrypoints: load the ``soloflow`` entry-point group (built-in plugins included).
        blocked: plugin names not to load (entry-point names or module paths). Names in
            ``SOLOFLOW_BLOCK_PLUGINS`` are blocked too.
        plugins: plugin objects to register in addition (tests, embedding applications).
        config: handed to ``soloflow_configure``; defaults to ``SoloFlowConfig()``.
        strict: make a plugin's failure in an isolated hook fatal (a :class:`PluginError`)
            instead of logged; ``SOLOFLOW_STRICT_PLUGINS=1`` turns it on too. For tests.

    Raises:
        PluginError: a module named in ``SOLOFLOW_PLUGINS`` cannot be imported.
    """
    from soloflow_core.models import SoloFlowConfig

    pm = SoloFlowPluginManager(PROJECT_NAME, strict=strict or _strict_from_env())
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


def _failing_impl(hook: Any, exc: BaseException) -> pluggy.HookImpl | None:
    """The implementation of ``hook`` that raised ``exc``: the innermost one on its traceback.

    Two plugins that are instances of one class share their method's code: the frame's own
    first argument (``self``) tells which instance was running."""
    impls = [
        impl
        for impl in hook.get_hookimpls()
        if getattr(impl.function, "__code__", None) is not None
    ]
    culprit = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        for impl in impls:
            if impl.function.__code__ is not frame.f_code:
                continue
            owner = getattr(impl.function, "__self__", None)
            first = frame.f_code.co_varnames[0] if frame.f_code.co_argcount else None
            if owner is None or first is None or frame.f_locals.get(first) is owner:
                culprit = impl
                break
        tb = tb.tb_next
    return culprit


def failing_plugin(pm: pluggy.PluginManager, hook_name: str, exc: BaseException) -> str | None:
    """The plugin whose implementation of ``hook_name`` raised ``exc`` (the innermost
    implementation on its traceback), or None when no implementation was running."""
    hook = getattr(pm.hook, hook_name, None)
    if hook is None:
        return None
    impl = _failing_impl(hook, exc)
    return None if impl is None else _plugin_label(pm, impl.plugin)


def is_strict(pm: pluggy.PluginManager) -> bool:
    """Whether a plugin's failure in :func:`call_hook` is fatal for ``pm``."""
    return (isinstance(pm, SoloFlowPluginManager) and pm.strict) or _strict_from_env()


def call_hook(pm: pluggy.PluginManager, hook_name: str, /, **kwargs: Any) -> Any:
    """Call hook ``hook_name`` so that one failing plugin does not silence the others.

    The hook is called as pluggy calls it (wrappers once, in the usual order). When an
    implementation raises, the failure is logged with the plugin's name and the
    implementations after it are called in turn, so a first-result hook still gets its
    answer and every broadcast listener still hears the call (wrappers, which saw the
    failure, do not wrap the rest). In strict mode
    (:func:`is_strict`) the failure is a :class:`PluginError` naming the plugin instead.
    SoloFlow's own errors, and exceptions raised outside any implementation, pass through.

    Returns:
        What pluggy returns: the first result, or the list of results. After a failure the
        list holds the results of the implementations called after the failing one.

    Example:
        >>> call_hook(pm, "soloflow_classify_task", task="refund my order")
    """
    return _call_isolated(pm, hook_name, getattr(pm.hook, hook_name), kwargs=kwargs, removed=[])


def _call_isolated(
    pm: pluggy.PluginManager,
    hook_name: str,
    hook: Any,
    *,
    kwargs: dict[str, Any],
    removed: list[object],
) -> Any:
    """Call ``hook``; on a plugin's failure, call the implementations after it, leaving out
    ``removed`` (those that already ran or failed, and the wrappers)."""
    try:
        return hook(**kwargs)
    except SoloFlowError:
        raise
    except Exception as exc:
        impl = _failing_impl(hook, exc)
        if impl is None:
            raise
        name = _plugin_label(pm, impl.plugin)
        if is_strict(pm):
            raise PluginError(
                f"plugin {name!r} failed in {hook_name}: {type(exc).__name__}: {exc}. "
                f"Fix it, or block it with {ENV_BLOCKED}={name}.",
                plugin=name,
            ) from exc
        log.error(
            "plugin %r failed in %s (%s: %s); the other plugins still run. Fix it, or block "
            "it with %s=%s.",
            name,
            hook_name,
            type(exc).__name__,
            exc,
            ENV_BLOCKED,
            name,
            exc_info=exc,
        )
        impls = hook.get_hookimpls()
        order = [i for i in reversed(impls) if not (i.wrapper or i.hookwrapper)]
        if impl not in order:  # a wrapper failed: what ran inside it cannot be told apart
            return None
        done = order[: order.index(impl) + 1]
        if len(done) == len(order):
            return None
        # The wrappers have seen this call (and its failure): the rest runs without them.
        removed = [
            *removed,
            *(i.plugin for i in impls if i.wrapper or i.hookwrapper),
            *(i.plugin for i in done),
        ]
        rest = pm.subset_hook_caller(hook_name, remove_plugins=removed)
        return _call_isolated(pm, hook_name, rest, kwargs=kwargs, removed=removed)


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
        remedy = (
            f"Fix or uninstall it, or block it with {ENV_BLOCKED}={name}."
            if blockable
            else "Fix it."
        )
        raise PluginError(
            f"plugin {name!r} failed in {hook_name}: {type(exc).__name__}: {exc}. {remedy}",
            plugin=name,
        ) from exc
