"""Errors of the sequential workflow; all are :class:`soloflow_core.errors.SoloFlowError`::

    SoloFlowError
    └── SequentialWorkflowError      the workflow cannot start or go on (names the phase)
        ├── MissingAgentsError       roles with no agent (names every missing role)
        ├── AgentError               an agent raised (names the role; the cause is chained)
        └── AgentOutputError         an agent returned something unusable (role, expected)

An agent error leaves the workflow's last checkpoint in place: fix the cause and resume the
same thread id to go on from the phase that failed.
"""

from __future__ import annotations

from collections.abc import Sequence

from soloflow_core.errors import SoloFlowError

__all__ = ["AgentError", "AgentOutputError", "MissingAgentsError", "SequentialWorkflowError"]


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
