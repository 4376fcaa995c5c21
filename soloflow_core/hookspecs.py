"""The core's hooks, in lifecycle order.

The sequential workflow's own hooks live with it, in
:mod:`soloflow_langgraph.sequential.hookspecs`, and are added to a plugin manager when the
workflow gets one. Hooks take keyword arguments only. A plugin marks its implementations with
``from soloflow_core import hookimpl`` and may accept a subset of a hook's arguments.
The reference with examples is ``docs/hooks.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from soloflow_core._markers import hookspec

if TYPE_CHECKING:
    from soloflow_core.models import FlowDefinition, SoloFlowConfig, StepRecord, TaskRun
    from soloflow_core.tracing import Span

# --------------------------------------------------------------------------- configuration


@hookspec(historic=True)
def soloflow_configure(config: SoloFlowConfig) -> None:
    """Called once with the process configuration when a plugin manager is created.

    Historic: a plugin registered later still receives the call on registration.

    Args:
        config: the :class:`~soloflow_core.models.SoloFlowConfig` in force.

    Return value: ignored.
    """


# --------------------------------------------------------------------------- capture


@hookspec
def soloflow_step_finished(step: StepRecord) -> None:
    """Called after every captured tool call, and after every step of a flow run.

    Runs on the thread that finished the call (often a worker thread of the agent):
    keep it fast and thread-safe. Exceptions are logged and swallowed.

    Args:
        step: the finished call with its run id, namespace, position and source.

    Return value: ignored (broadcast to every implementation).
    """


@hookspec
def soloflow_run_finished(run: TaskRun) -> None:
    """Called when a top-level invocation ends and its task run has been stored.

    Args:
        run: the complete task run, as written to the ledger.

    Return value: ignored (broadcast to every implementation).
    """


# --------------------------------------------------------------------------- classification


@hookspec(firstresult=True)
def soloflow_classify_task(task: str) -> str | None:
    """Classify a task text into a label (e.g. a discipline: quick, deep, visual, ultrabrain).

    Called for each captured run that has task text.

    Args:
        task: the task text.

    Return value: a label, or None to let the next plugin decide. Stops at the first
    non-None result; the built-in keyword classifier runs last.
    """


# --------------------------------------------------------------------------- providers


@hookspec
def soloflow_register_memory_providers(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Offer memory providers.

    Call ``register(name, factory)`` once per provider; ``factory(**options)`` returns an
    object following :class:`soloflow_core.memory.MemoryProvider`. Configuration picks one
    by name. A name registered twice keeps the first registration (user plugins are called
    before built-in ones, so theirs win).

    Args:
        register: the registration callback.

    Return value: ignored (every implementation is called).
    """


@hookspec
def soloflow_register_executors(register: Callable[[str, Any], None], tools: Sequence[Any]) -> None:
    """Offer executors for flow steps.

    Call ``register(skill_key, tool_or_callable)``: a LangChain tool, or a plain callable
    taking the step's inputs as keyword arguments. A step whose ``skill_key`` matches runs
    it. A key registered twice keeps the first registration (user plugins are called
    before built-in ones, so theirs win).

    Args:
        register: the registration callback.
        tools: the tools the caller handed to the flow compiler (e.g. the agent's tools);
            an implementation may leave this argument out. The built-in ``tool_executor``
            plugin registers each under its ``name``.

    Return value: ignored (every implementation is called).
    """


# --------------------------------------------------------------------------- promotion


@hookspec
def soloflow_flow_promoted(flow: FlowDefinition) -> None:
    """Called after a flow is registered (a candidate approved, or a flow submitted).

    Args:
        flow: the registered definition, with its version.

    Return value: ignored (broadcast to every implementation).
    """


# --------------------------------------------------------------------------- tracing


@hookspec
def soloflow_flow_run_started(run_id: str, flow: FlowDefinition) -> None:
    """Called when a flow run starts, or goes on (resumed, approved), before its first step.

    Args:
        run_id: the flow run's id.
        flow: the definition being run.

    Return value: ignored (broadcast to every implementation).
    """


@hookspec
def soloflow_flow_run_finished(
    run_id: str, flow: FlowDefinition, status: str, spans: Sequence[Span]
) -> None:
    """Called when an invocation of a flow run ends: ``completed``, ``failed``, ``fallback``,
    ``cancelled``, or ``waiting`` (for a person's approval; it goes on later).

    Args:
        run_id: the flow run's id.
        flow: the definition that ran.
        status: how the invocation ended.
        spans: the spans of this invocation, all ended (the flow run's root span first).

    Return value: ignored (broadcast to every implementation).
    """


@hookspec
def soloflow_span_finished(span: Span) -> None:
    """Called when a span ends: an agent run, a model call, a tool call, a flow run, a step, a
    step's attempt, a sequential workflow's run or phase. For exporters written as plugins; runs on
    the thread that ended the span, so keep it fast and thread-safe. Exceptions are logged and swallowed.

    Args:
        span: the ended span, its ``duration_ms``, ``status`` and ``attributes`` set.

    Return value: ignored (broadcast to every implementation).
    """
