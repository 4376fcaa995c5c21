"""SoloFlow's errors: every error SoloFlow raises on purpose is one of these.

Every error names the thing at fault and says how to fix it::

    SoloFlowError
    ├── ConfigError                  bad configuration value (names the setting)
    │   └── InvalidNameError         a name or id holds a control character (field, position)
    ├── PluginError                  a plugin failed to load or misbehaved (names the plugin)
    ├── StoreError                   the database could not be opened or used
    │   └── SchemaVersionError       the database schema is from another SoloFlow version
    ├── LedgerError                  a ledger line could not be read (file and line)
    ├── FlowValidationError          a flow definition is invalid (flow, step, field path)
    │   ├── FlowFileError            a flow file is invalid (file, line, column, field path)
    │   ├── ExecutorNotFoundError    a step's skill_key has no registered executor (flow, step)
    │   └── PatternTimeoutError      a flow's regular expression ran past its time limit (field, pattern)
    ├── NotFoundError                a run, candidate or flow id does not exist in this namespace
    ├── AmbiguousError               an id or flow name prefix matches several (lists them)
    ├── ReplayMiss                   a replayed flow made a call that is not in the recording
    ├── FlowRunError                 a flow run failed (flow, step, cause)
    │   ├── StepTimeoutError         a step's attempt ran over its timeout_seconds
    │   ├── StepInputError           a step's inputs could not be rendered (never retried)
    │   ├── StepFailedError          a step failed after its retries (on_failure: stop)
    │   └── FlowCancelledError       the run was cancelled (soloflow flows cancel)
    ├── InvalidTransitionError       a flow run or step state change the state machine forbids
    ├── AccessDeniedError            an API token's scope does not allow the act (its scope, the one needed)
    ├── SkillPackageError            a skill package is refused (package, file, every problem)
    └── SequentialWorkflowError      the sequential workflow cannot start or go on (phase)
        ├── MissingAgentsError       roles with no agent (names every missing role)
        └── AgentError               an agent raised (names the role; the cause is chained)
            └── AgentOutputError     an agent returned something unusable (role, expected)

A test checks this drawing against the classes. A sequential agent error leaves the
workflow's last checkpoint in place: fix the cause and resume the same thread id to go on from
the phase that failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AccessDeniedError",
    "AgentError",
    "AgentOutputError",
    "AmbiguousError",
    "ConfigError",
    "ExecutorNotFoundError",
    "FlowCancelledError",
    "FlowFileError",
    "FlowFileProblem",
    "FlowRunError",
    "FlowValidationError",
    "InvalidNameError",
    "InvalidTransitionError",
    "LedgerError",
    "MissingAgentsError",
    "NotFoundError",
    "PatternTimeoutError",
    "PluginError",
    "ReplayMiss",
    "SchemaVersionError",
    "SequentialWorkflowError",
    "SkillPackageError",
    "SoloFlowError",
    "StepFailedError",
    "StepInputError",
    "StepTimeoutError",
    "StoreError",
]


class SoloFlowError(Exception):
    """Base of every error SoloFlow raises on purpose."""


class ConfigError(SoloFlowError):
    """A configuration value is missing or invalid."""


class InvalidNameError(ConfigError, ValueError):
    """A name or id (a user or agent id, a run id, a flow name...) holds a control character.

    Attributes:
        field: what the value is (``user_id``, ``flow name``).
        position: where the first control character is, counting from 0.
        character: that character.
    """

    def __init__(self, message: str, *, field: str, position: int, character: str) -> None:
        super().__init__(message)
        self.field = field
        self.position = position
        self.character = character


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


@dataclass(frozen=True, slots=True)
class FlowFileProblem:
    """One problem of a flow file, where it stands."""

    path: str | None
    """The field's path (``steps[2].retry_max``); None for the file as a whole."""
    line: int | None
    """1-based line of the field (or of the syntax error), when it could be found."""
    column: int | None
    """1-based column, with ``line``."""
    message: str
    """What is wrong and how to fix it."""

    def format(self, file: str) -> str:
        where = file
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class FlowFileError(FlowValidationError):
    """A flow file (JSON or YAML) cannot be read, parsed or validated.

    Attributes:
        file: the file's path.
        line: the first problem's line, if known.
        issues: every problem, each with its field path and line.
    """

    def __init__(
        self, file: str, issues: list[FlowFileProblem], *, flow: str | None = None
    ) -> None:
        head = (
            "invalid flow file"
            if len(issues) == 1
            else f"invalid flow file ({len(issues)} problems)"
        )
        message = head + ":\n  " + "\n  ".join(p.format(file) for p in issues)
        super().__init__(
            message,
            flow=flow,
            field=issues[0].path if issues else None,
            problems=[(None, p.path, p.message) for p in issues],
        )
        self.file = file
        self.issues = issues
        self.line = issues[0].line if issues else None


class ExecutorNotFoundError(FlowValidationError):
    """A step names a ``skill_key`` that no plugin or tool registered.

    Attributes:
        skill_keys: the keys no executor was found for, in step order.
        registered: the keys that have one.
    """

    def __init__(
        self,
        message: str,
        *,
        flow: str | None = None,
        step: str | None = None,
        field: str | None = None,
        problems: list[tuple[str | None, str | None, str]] | None = None,
        skill_keys: list[str] | None = None,
        registered: list[str] | None = None,
    ) -> None:
        super().__init__(message, flow=flow, step=step, field=field, problems=problems)
        self.skill_keys = skill_keys or []
        self.registered = registered or []


class PatternTimeoutError(FlowValidationError):
    """A regular expression of a flow (``extraction.<input>.pattern``) ran past its time
    limit on a text: it backtracks catastrophically and must be rewritten.

    Attributes:
        pattern: the regular expression.
        field: its path in the flow (``extraction.email.pattern``).
    """

    def __init__(self, message: str, *, pattern: str, field: str, flow: str | None = None) -> None:
        super().__init__(message, flow=flow, field=field)
        self.pattern = pattern


class NotFoundError(SoloFlowError):
    """An id or name does not exist in the caller's (user, agent) namespace."""


class AmbiguousError(SoloFlowError):
    """A prefix that more than one id or flow name starts with: the message lists them."""


class ReplayMiss(SoloFlowError):
    """A replayed flow made a call that is not in the recording it is checked against."""


class FlowRunError(SoloFlowError):
    """A flow run failed at a step."""

    def __init__(
        self, message: str, *, flow: str | None = None, step: str | None = None, cause: Any = None
    ) -> None:
        super().__init__(message)
        self.flow = flow
        self.step = step
        self.cause = cause


class StepTimeoutError(FlowRunError):
    """A step's attempt ran over the step's ``timeout_seconds``."""


class StepInputError(FlowRunError):
    """A step's inputs could not be rendered (never retried)."""


class StepFailedError(FlowRunError):
    """A step failed after its retries and its ``on_failure`` is ``stop``."""


class FlowCancelledError(FlowRunError):
    """The run was cancelled while it ran."""


class InvalidTransitionError(SoloFlowError):
    """A flow run or step was asked to change state in a way the state machine forbids."""

    def __init__(self, message: str, *, run_id: str | None = None, step: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step


class AccessDeniedError(SoloFlowError):
    """An API token's scope does not allow what it asked (a read-only token asked to run,
    approve, cancel or submit).

    Attributes:
        scope: the token's scope.
        needed: the scope the act needs.
    """

    def __init__(self, message: str, *, scope: str, needed: str) -> None:
        super().__init__(message)
        self.scope = scope
        self.needed = needed


class SkillPackageError(SoloFlowError):
    """A skill package cannot be imported (or exported); nothing was registered.

    Attributes:
        package: the package's directory.
        problems: every problem, each a ``(file, message)`` tuple; ``file`` is the package
            file at fault (``flow.json``, ``fixtures/0001.json``) or None for the package.
    """

    def __init__(self, package: str, problems: Sequence[tuple[str | None, str]]) -> None:
        self.package = package
        self.problems = list(problems)
        lines = [f"{file}: {message}" if file else message for file, message in self.problems]
        head = (
            "skill package refused"
            if len(lines) == 1
            else f"skill package refused ({len(lines)} problems)"
        )
        super().__init__(f"{package}: {head}:\n  " + "\n  ".join(lines))


class SequentialWorkflowError(SoloFlowError):
    """The sequential workflow cannot start or go on.

    Attributes:
        phase: the phase (node) at fault, when there is one.
    """

    def __init__(self, message: str, *, phase: str | None = None) -> None:
        super().__init__(message)
        self.phase = phase


class MissingAgentsError(SequentialWorkflowError):
    """Some roles have no agent.

    Attributes:
        roles: the roles with no agent, in workflow order.
    """

    def __init__(self, roles: Sequence[str]) -> None:
        self.roles = list(roles)
        super().__init__(
            f"no agent for the role(s) {', '.join(self.roles)} of the sequential workflow. "
            "Pass them as SequentialWorkflow(agents={role: agent}), register them from a plugin "
            "with the soloflow_register_sequential_agents hook (register(role, agent)), "
            "or use the scripted dev agents (`soloflow sequential run --dev`)."
        )


class AgentError(SequentialWorkflowError):
    """An agent raised an exception while it ran.

    Attributes:
        role: the role whose agent failed.
    """

    def __init__(self, message: str, *, role: str) -> None:
        super().__init__(message, phase=role)
        self.role = role


class AgentOutputError(AgentError):
    """An agent returned something that is not its role's result.

    Attributes:
        role: the role whose agent misbehaved.
        expected: a description of what the role must return.
    """

    def __init__(self, message: str, *, role: str, expected: str) -> None:
        super().__init__(message, role=role)
        self.expected = expected
