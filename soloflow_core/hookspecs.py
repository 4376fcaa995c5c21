"""Every SoloFlow hook, in lifecycle order.

Hooks take keyword arguments only. A plugin marks its implementations with
``from soloflow_core import hookimpl`` and may accept a subset of a hook's arguments.
The reference with examples is ``docs/hooks.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from soloflow_core._markers import hookspec

if TYPE_CHECKING:
    from soloflow_core.models import FlowDefinition, SoloFlowConfig, StepRecord, TaskRun

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
def soloflow_register_executors(
    register: Callable[[str, Any], None], tools: Sequence[Any]
) -> None:
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


# --------------------------------------------------------------------------- sequential workflow


@hookspec(firstresult=True)
def soloflow_summarize_context(context: str, token_budget: int, purpose: str) -> str | None:
    """Reduce a context to at most ``token_budget`` tokens for an agent of the sequential workflow.

    Called by the sequential workflow (``soloflow_langgraph.sequential``) whenever an agent
    is about to receive a large context: the contracts after the contract writer and after
    each refinement, the auditor's violations before the code generator, and the evaluator's
    feedback before the refiner. Agents receive the summary, never the full context.

    Args:
        context: the full text (often Markdown: headings, bullets, paragraphs).
        token_budget: the most tokens the summary may have.
        purpose: what the text is: ``"contracts"``, ``"violations"`` or ``"feedback"``;
            an implementation may leave this argument out.

    Return value: the summary, or None to let the next plugin decide. Stops at the first
    non-None result; the built-in ``extractive_summarizer`` (deterministic, structure
    preserving) runs last.
    """


@hookspec
def soloflow_token_budget_warning(used: int, budget: int, state: Any) -> None:
    """Called once per workflow when its token use first reaches the warning threshold.

    The sequential workflow warns when ``used`` reaches ``warn_fraction`` (default 0.8) of
    its token budget, and stops with the reason ``"budget_exceeded"`` once ``used`` is past
    ``budget``. Exceptions are logged and swallowed: a warning never stops the workflow.

    Args:
        used: tokens used so far (input + output, from the models' ``usage_metadata``).
        budget: the workflow's token budget.
        state: the workflow's state at that moment, a
            ``soloflow_langgraph.sequential.WorkflowState`` (phases, scores, tokens, cost).

    Return value: ignored (broadcast to every implementation).
    """


@hookspec
def soloflow_register_sequential_agents(register: Callable[[str, Any], None]) -> None:
    """Offer agents for the roles of the sequential workflow.

    Call ``register(role, agent)`` once per role you provide. Roles: ``contract_writer``,
    ``auditor``, ``code_generator``, ``evaluator``, ``refiner``, ``pr_orchestrator``. An agent
    is a LangChain Runnable, a plain callable, a chat model (given the built-in role prompt),
    or a ``ChatModelAgent(model, prompt)``. A role registered twice keeps the first
    registration (user plugins are called before built-in ones, so theirs win). Agents passed
    to ``SequentialWorkflow(agents=...)`` win over registered ones.

    Args:
        register: the registration callback; an unknown role raises ``PluginError``.

    Return value: ignored (every implementation is called).
    """
