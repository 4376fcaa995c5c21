"""The sequential workflow's hooks: summarising a context, a token budget warning, its agents.

They are added to a plugin manager (:func:`add_sequential_hookspecs`) where the workflow gets
one (:class:`~soloflow_langgraph.sequential.workflow.SequentialWorkflow`,
:func:`~soloflow_langgraph.sequential.graph.build_sequential_graph`), so that a plugin
manager that never runs the workflow does not carry them. A plugin may implement them before
they are added (the built-in ``extractive_summarizer`` does): pluggy checks the
implementation against the spec when it arrives. The reference is ``docs/hooks.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from soloflow_core import hookspec

if TYPE_CHECKING:
    import pluggy

__all__ = [
    "add_sequential_hookspecs",
    "soloflow_register_sequential_agents",
    "soloflow_summarize_context",
    "soloflow_token_budget_warning",
]


def add_sequential_hookspecs(pm: pluggy.PluginManager) -> pluggy.PluginManager:
    """Add this module's hook specs to ``pm`` unless it has them already; returns ``pm``."""
    hook = getattr(pm.hook, "soloflow_summarize_context", None)
    if hook is None or hook.spec is None:
        pm.add_hookspecs(sys.modules[__name__])
    return pm


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
