"""SoloFlow's errors.

Every error names the thing at fault and says how to fix it::

    SoloFlowError
    ├── ConfigError            bad configuration value (names the setting)
    ├── PluginError            a plugin failed to load or misbehaved (names the plugin)
    ├── StoreError             the database could not be opened or used
    │   └── SchemaVersionError the database schema is from another SoloFlow version
    ├── LedgerError            a ledger line could not be read (file and line)
    ├── FlowValidationError    a flow definition is invalid (flow, step, field path)
    ├── ExecutorNotFoundError  a step's skill_key has no registered executor (flow, step)
    ├── NotFoundError          a run, candidate or flow id does not exist in this namespace
    └── FlowRunError           a flow run failed (flow, step, cause)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "ExecutorNotFoundError",
    "FlowRunError",
    "FlowValidationError",
    "LedgerError",
    "NotFoundError",
    "PluginError",
    "SchemaVersionError",
    "SoloFlowError",
    "StoreError",
]


class SoloFlowError(Exception):
    """Base of every error SoloFlow raises on purpose."""


class ConfigError(SoloFlowError):
    """A configuration value is missing or invalid."""


class PluginError(SoloFlowError):
    """A plugin could not be loaded, or broke a hook's contract."""

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class StoreError(SoloFlowError):
    """The store could not be opened or a query failed."""


class SchemaVersionError(StoreError):
    """The database was written by a SoloFlow whose schema this one does not know."""


class LedgerError(SoloFlowError):
    """A ledger record is malformed. Carries the file and line number."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.line = line
        self.reason = message


class FlowValidationError(SoloFlowError):
    """A flow definition is invalid.

    Attributes:
        flow: the flow's name.
        step: the id of the step at fault, if one is.
        field: the dotted path of the field at fault, if one is.
        problems: every problem found, each a ``(step, field, message)`` tuple.
    """

    def __init__(
        self,
        message: str,
        *,
        flow: str | None = None,
        step: str | None = None,
        field: str | None = None,
        problems: list[tuple[str | None, str | None, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.flow = flow
        self.step = step
        self.field = field
        self.problems = problems or [(step, field, message)]


class ExecutorNotFoundError(FlowValidationError):
    """A step names a ``skill_key`` that no plugin or tool registered."""


class NotFoundError(SoloFlowError):
    """An id or name does not exist in the caller's (user, agent) namespace."""


class FlowRunError(SoloFlowError):
    """A flow run failed at a step."""

    def __init__(
        self, message: str, *, flow: str | None = None, step: str | None = None, cause: Any = None
    ) -> None:
        super().__init__(message)
        self.flow = flow
        self.step = step
        self.cause = cause
