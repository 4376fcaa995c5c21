"""Executors: what runs a flow step, found by the step's ``skill_key``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from soloflow_core.plugins import plugin_errors

if TYPE_CHECKING:
    import pluggy

log = logging.getLogger(__name__)


class ExecutorRegistry:
    """``skill_key`` → executor (a LangChain tool, or a callable taking keyword arguments).

    The first registration of a key wins; later ones are ignored with a debug log, so a
    user's plugin (called before the ``trylast`` built-in ones) overrides built-ins.
    """

    def __init__(self) -> None:
        self._executors: dict[str, Any] = {}

    def register(self, skill_key: str, executor: Any) -> None:
        if not isinstance(skill_key, str) or not skill_key:
            raise ValueError(f"skill_key must be a non-empty string, got {skill_key!r}")
        if not callable(executor) and not hasattr(executor, "invoke"):
            raise TypeError(
                f"executor for {skill_key!r} must be a LangChain tool or a callable, "
                f"got {type(executor).__name__}"
            )
        if skill_key in self._executors:
            log.debug("executor %r already registered; keeping the first", skill_key)
            return
        self._executors[skill_key] = executor

    def get(self, skill_key: str) -> Any | None:
        return self._executors.get(skill_key)

    def __contains__(self, skill_key: object) -> bool:
        return skill_key in self._executors

    def keys(self) -> list[str]:
        return sorted(self._executors)


def build_executor_registry(
    pm: pluggy.PluginManager, *, tools: Sequence[Any] = ()
) -> ExecutorRegistry:
    """Ask every plugin's ``soloflow_register_executors`` for executors.

    Args:
        pm: the plugin manager (the caller's: one manager is passed through every component).
        tools: handed to the hook as ``tools`` (the built-in ``tool_executor`` plugin
            registers each under its name).

    Raises:
        PluginError: a plugin's implementation raised, or registered something that is not
            an executor (names the plugin).
    """
    registry = ExecutorRegistry()
    with plugin_errors(pm, "soloflow_register_executors"):
        pm.hook.soloflow_register_executors(register=registry.register, tools=list(tools))
    return registry


Executor = Callable[..., Any]
