"""One AgentDojo user task, live: its default environment, its real tools, its own check.

AgentDojo (PyPI ``agentdojo``, an optional extra) is imported lazily, so importing this
module costs nothing and a missing extra is reported by :func:`require_agentdojo` with the
line that installs it.

Example:
    >>> task = load_task("banking", "user_task_3")                        # doctest: +SKIP
    >>> graph = compile_flow(flow, tools=task.tools())                    # doctest: +SKIP
    >>> graph.invoke({"inputs": {}}); task.utility()                       # doctest: +SKIP
    True
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from pydantic import BaseModel

__all__ = [
    "BENCHMARK_VERSION",
    "INSTALL_HINT",
    "AgentDojoTask",
    "AgentDojoTool",
    "load_task",
    "require_agentdojo",
    "tool_output_data",
    "tool_output_text",
]

BENCHMARK_VERSION = "v1.2.2"
"""The AgentDojo benchmark version the flows in ``examples/agentdojo`` were made from."""

INSTALL_HINT = 'pip install "soloflow-engine[benchmarks]"'

_SUITES = ("workspace", "travel", "banking", "slack")


def require_agentdojo(module: str = "agentdojo") -> ModuleType:
    """Import an AgentDojo module, or fail with the command that installs the extra.

    Raises:
        ModuleNotFoundError: AgentDojo is not installed (the message names the extra).
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "agentdojo":
            raise
        raise ModuleNotFoundError(
            f"AgentDojo flows need the optional 'agentdojo' extra, which is not installed; "
            f"install it with: {INSTALL_HINT}",
            name="agentdojo",
        ) from exc


def tool_output_data(value: Any) -> Any:
    """A tool's return value as plain JSON data (pydantic models dumped, dates as text).

    This is what flow steps return: templates such as ``{{step_1.0.id_}}`` walk it.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): tool_output_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [tool_output_data(v) for v in value]
    return value


def tool_output_text(value: Any) -> str:
    """A tool's return value as the agent sees it: AgentDojo's own ``tool_result_to_str`` (YAML)."""
    execution = require_agentdojo("agentdojo.agent_pipeline.tool_execution")
    return str(execution.tool_result_to_str(value))


class AgentDojoTool:
    """One AgentDojo tool bound to a live task environment: a flow step's executor.

    Calls go through AgentDojo's ``FunctionsRuntime`` (argument validation, environment
    dependencies), are recorded as the task's function-call trace, and return
    :func:`tool_output_data` of the result. A tool error is raised (the step fails) rather
    than returned as text, as the agent would see it.
    """

    def __init__(self, task: AgentDojoTask, name: str, description: str = "") -> None:
        self.task, self.name, self.description = task, name, description
        self.__name__ = name

    def __call__(self, *, idempotency_key: str | None = None, **kwargs: Any) -> Any:
        # The flow runtime hands executors that take keyword arguments the step's
        # idempotency key; AgentDojo's tools have no use for it.
        return tool_output_data(self.task.call(self.name, kwargs))

    def __repr__(self) -> str:
        return f"AgentDojoTool({self.task.suite_name}/{self.task.task_id}: {self.name})"


@dataclass(slots=True)
class AgentDojoTask:
    """A user task with a fresh default environment (benign injection defaults), ready to run.

    Attributes are AgentDojo objects (``suite``, ``task``, the environments, the runtime);
    ``calls`` is the trace of every successful tool call, as AgentDojo ``FunctionCall``s.
    """

    suite_name: str
    task_id: str
    version: str
    suite: Any
    task: Any
    pre_environment: Any
    environment: Any
    runtime: Any
    calls: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def prompt(self) -> str:
        """The task text the agent receives."""
        return str(self.task.PROMPT)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self.runtime.functions)

    def tools(self) -> list[AgentDojoTool]:
        """Every tool of the suite, bound to this environment: ``compile_flow(flow, tools=...)``."""
        return [
            AgentDojoTool(self, name, f.description)
            for name, f in sorted(self.runtime.functions.items())
        ]

    def call(self, name: str, args: Mapping[str, Any]) -> Any:
        """Run one tool with AgentDojo's runtime; return its raw result.

        Raises:
            Exception: what the tool raised (AgentDojo's ``ToolNotFoundError`` for an unknown
                name, pydantic's ``ValidationError`` for bad arguments).
        """
        functions = require_agentdojo("agentdojo.functions_runtime")
        # Parallel flow steps share one environment; AgentDojo's tools are not thread-safe.
        with self._lock:
            result, _ = self.runtime.run_function(
                self.environment, name, dict(args), raise_on_error=True
            )
            self.calls.append(functions.FunctionCall(function=name, args=dict(args)))
        return result

    def utility(self, answer: str = "") -> bool:
        """The task's own check, as AgentDojo scores an agent: ``utility_from_traces`` when the
        task defines it, else ``utility``, on the environment before and after the calls.

        Args:
            answer: the agent's final answer text (empty: judge the environment state alone).
        """
        pre, post = self.pre_environment, self.environment
        from_traces = self.task.utility_from_traces(answer, pre, post, list(self.calls))
        if from_traces is not None:
            return bool(from_traces)
        return bool(self.task.utility(answer, pre, post))


def load_task(suite: str, task_id: str, *, version: str = BENCHMARK_VERSION) -> AgentDojoTask:
    """Load ``suite``'s default environment and initialise it for user task ``task_id``.

    Runs offline: the environment is the YAML shipped inside the ``agentdojo`` package.

    Raises:
        ModuleNotFoundError: the ``agentdojo`` extra is not installed.
        KeyError: the suite or task does not exist (the message lists the known ones).
    """
    load_suites = require_agentdojo("agentdojo.task_suite.load_suites")
    functions = require_agentdojo("agentdojo.functions_runtime")
    try:
        task_suite = load_suites.get_suite(version, suite)
    except KeyError:
        raise KeyError(
            f"AgentDojo {version} has no suite {suite!r}; suites: {', '.join(_SUITES)}"
        ) from None
    tasks = task_suite.user_tasks
    if task_id not in tasks:
        raise KeyError(
            f"AgentDojo {version} suite {suite!r} has no user task {task_id!r}; "
            f"tasks: user_task_0 … user_task_{len(tasks) - 1}"
        )
    user_task = tasks[task_id]
    env = user_task.init_environment(task_suite.load_and_inject_default_environment({}))
    return AgentDojoTask(
        suite_name=suite,
        task_id=task_id,
        version=version,
        suite=task_suite,
        task=user_task,
        pre_environment=env.model_copy(deep=True),
        environment=env,
        runtime=functions.FunctionsRuntime(task_suite.tools),
    )


def ground_truth_calls(task: AgentDojoTask) -> list[tuple[str, dict[str, Any]]]:
    """The task's reference solution: ``(tool, arguments)`` per call, from AgentDojo."""
    return [(c.function, dict(c.args)) for c in task.task.ground_truth(task.pre_environment)]
