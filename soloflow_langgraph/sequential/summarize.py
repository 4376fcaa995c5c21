"""Summarising a context through the ``soloflow_summarize_context`` hook.

The built-in ``extractive_summarizer`` plugin answers when no other plugin does. A plugin
that calls a chat model is metered like an agent: the hook runs inside a child run that
carries the phase's :class:`~soloflow_langgraph.sequential.budget.UsageMeter`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.runnables import RunnableConfig, RunnableLambda

from soloflow_core.errors import PluginError, SequentialWorkflowError
from soloflow_core.plugins import call_hook
from soloflow_langgraph.sequential.budget import UsageMeter, metered_config
from soloflow_langgraph.sequential.hookspecs import add_sequential_hookspecs

if TYPE_CHECKING:
    import pluggy

__all__ = ["summarize_context"]


def summarize_context(
    pm: pluggy.PluginManager,
    context: str,
    *,
    token_budget: int,
    purpose: str,
    meter: UsageMeter | None = None,
    config: RunnableConfig | None = None,
) -> str:
    """``context`` summarised to ``token_budget`` tokens by the first plugin that answers.

    Raises:
        SequentialWorkflowError: no plugin answered (the built-in one is blocked).
        PluginError: a plugin answered something that is not a string.
    """
    if not context.strip():
        return ""
    add_sequential_hookspecs(pm)

    def call(text: str) -> object:
        return call_hook(
            pm,
            "soloflow_summarize_context",
            context=text,
            token_budget=token_budget,
            purpose=purpose,
        )

    run_name = f"summarize_{purpose}"
    runnable = RunnableLambda(call, name=run_name)
    result = runnable.invoke(context, metered_config(config, meter or UsageMeter(), run_name))
    if result is None:
        raise SequentialWorkflowError(
            f"no plugin answered soloflow_summarize_context for the {purpose}: the built-in "
            "'extractive_summarizer' is blocked and no other plugin implements the hook. "
            "Unblock it (SOLOFLOW_BLOCK_PLUGINS) or install a summariser plugin.",
            phase=run_name,
        )
    if not isinstance(result, str):
        raise PluginError(
            f"a soloflow_summarize_context plugin returned a {type(result).__name__} for the "
            f"{purpose}; it must return a str (or None to pass)",
            plugin=None,
        )
    return result
