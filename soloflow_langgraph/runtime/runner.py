"""Run a registered flow once: inputs checked, every step reported, the run recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from soloflow_core.errors import FlowRunError
from soloflow_core.models import FlowDefinition
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.runtime.results import FlowRunResult

if TYPE_CHECKING:
    import pluggy
    from langchain_core.runnables import RunnableConfig

    from soloflow_core.flow.executors import ExecutorRegistry
    from soloflow_core.store import Store

__all__ = ["run_flow"]


def run_flow(
    flow: FlowDefinition,
    inputs: dict[str, Any],
    *,
    tools: Sequence[Any] = (),
    plugin_manager: pluggy.PluginManager | None = None,
    registry: ExecutorRegistry | None = None,
    store: Store | None = None,
    user_id: str = "default",
    agent_id: str = "default",
    raise_on_failure: bool = False,
    config: RunnableConfig | None = None,
) -> FlowRunResult:
    """Run ``flow`` once with no model call; recorded (and durable) in ``store`` when given.

    A shortcut for ``FlowRuntime(store, ...).run(flow, inputs, config=config)``; a flow that
    ``requires_approval`` returns with status ``waiting``. ``config``'s callbacks, tags and
    metadata reach every step's tool.

    Raises:
        FlowValidationError: the flow or the inputs are invalid (nothing is run).
        FlowRunError: with ``raise_on_failure``, the run did not complete.
    """
    checkpointer: Any = None if store is not None or flow.requires_approval else False
    with FlowRuntime(
        store,
        tools=tools,
        plugin_manager=plugin_manager,
        registry=registry,
        user_id=user_id,
        agent_id=agent_id,
        checkpointer=checkpointer,
    ) as runtime:
        result = runtime.run(flow, inputs, config=config)
    if raise_on_failure and result.status not in ("completed", "waiting"):
        raise FlowRunError(
            f"flow {flow.name!r} {result.status} at step {result.failed_step!r}: {result.error}",
            flow=flow.name,
            step=result.failed_step,
        )
    return result
