"""``SequentialWorkflow``: run, watch and resume the two-level agent loop.

Example:
    >>> from soloflow_langgraph.sequential import SequentialWorkflow, dev_agents
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as ws, SequentialWorkflow(ws, dev_agents()) as wf:
    ...     result = wf.run("Create a REST API with authentication")
    >>> result.status, result.reason
    ('success', 'completed')
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langgraph.checkpoint.sqlite import SqliteSaver

from soloflow_core.errors import ConfigError, SequentialWorkflowError
from soloflow_core.models import ModelPrice
from soloflow_core.plugins import get_plugin_manager
from soloflow_core.tracing import PriceTable
from soloflow_langgraph.sequential.agents import resolve_agents
from soloflow_langgraph.sequential.budget import TokenBudget
from soloflow_langgraph.sequential.graph import (
    SequentialSettings,
    build_sequential_graph,
    recursion_limit,
)
from soloflow_langgraph.sequential.hookspecs import add_sequential_hookspecs
from soloflow_langgraph.sequential.models import (
    PhaseRecord,
    TokenPrice,
    WorkflowResult,
    WorkflowState,
)
from soloflow_langgraph.sequential.trace import WorkflowTrace

if TYPE_CHECKING:
    import pluggy
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from soloflow_core.store import Store

__all__ = ["CHECKPOINT_FILE", "PhaseCallback", "SequentialWorkflow"]

CHECKPOINT_FILE = Path(".soloflow") / "sequential.db"
"""The default checkpoint database, relative to the workspace."""

PhaseCallback = Callable[[PhaseRecord, WorkflowState], None]
"""Called after each phase with its record and the state after it (for live views)."""


class SequentialWorkflow:
    """The two-level sequential workflow over a workspace, checkpointed after every phase.

    Args:
        workspace: the directory the agents work in; also holds the default checkpoints.
        agents: ``{role: agent}``; roles left out come from plugins
            (``soloflow_register_sequential_agents``). See
            :mod:`soloflow_langgraph.sequential.agents` for what an agent may be.
        plugin_manager: default ``get_plugin_manager()``.
        max_outer: outer iterations (evaluations) at most.
        max_inner: code generator runs per outer iteration at most.
        token_budget: tokens for the whole workflow; a warning hook as it nears, a hard
            stop past it. None: no budget.
        warn_fraction: the fraction of the budget at which the warning fires.
        contracts_token_budget / violations_token_budget / feedback_token_budget: the sizes
            of the summaries agents receive.
        prices: token prices by model name; ``default_price`` for the others.
        checkpointer: any LangGraph checkpointer; default a ``SqliteSaver`` on
            ``WORKSPACE/.soloflow/sequential.db`` (closed by :meth:`close`).
        durability: LangGraph's durability mode; ``"sync"`` writes each checkpoint before
            the next phase starts, so a killed process loses no finished phase.
        store: where each run's trace (``invoke_workflow`` → phases → model calls) is kept,
            under its thread id in the namespace ``user_id``/``agent_id``
            (``store.get_spans(thread_id, ...)``); None: traced and exported, not stored.
            The store is the caller's (not closed here).

    Raises:
        MissingAgentsError: some roles have no agent (names them).
        ConfigError: a limit or budget is out of range.
    """

    def __init__(
        self,
        workspace: str | Path,
        agents: Mapping[str, Any] | None = None,
        *,
        plugin_manager: pluggy.PluginManager | None = None,
        max_outer: int = 5,
        max_inner: int = 10,
        token_budget: int | None = None,
        warn_fraction: float = 0.8,
        contracts_token_budget: int = 10_000,
        violations_token_budget: int = 5_000,
        feedback_token_budget: int = 5_000,
        prices: Mapping[str, TokenPrice] | None = None,
        default_price: TokenPrice | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        durability: Literal["sync", "async", "exit"] = "sync",
        store: Store | None = None,
        user_id: str = "default",
        agent_id: str = "default",
    ) -> None:
        if max_outer < 1 or max_inner < 1:
            raise ConfigError(
                f"max_outer and max_inner must be at least 1 (got {max_outer}, {max_inner})"
            )
        TokenBudget(token_budget, warn_fraction)  # validates both
        self.workspace = Path(workspace).resolve()
        self.max_outer, self.max_inner, self.token_budget = max_outer, max_inner, token_budget
        self.durability = durability
        self.store, self.user_id, self.agent_id = store, user_id, agent_id
        pm = add_sequential_hookspecs(
            plugin_manager if plugin_manager is not None else get_plugin_manager()
        )
        self.agents = resolve_agents(agents, pm)
        self.pm = pm
        # The workflow's own prices price its model calls' spans too (genai-prices for the rest).
        self.price_table = PriceTable(
            {
                name: ModelPrice(
                    input_per_mtok=p.input_per_million, output_per_mtok=p.output_per_million
                )
                for name, p in (prices or {}).items()
            }
        )
        self._conn: sqlite3.Connection | None = None
        if checkpointer is None:
            self.checkpoint_path: Path | None = self.workspace / CHECKPOINT_FILE
            self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.checkpoint_path), check_same_thread=False)
            checkpointer = SqliteSaver(self._conn)
        else:
            self.checkpoint_path = None
        self.checkpointer: BaseCheckpointSaver[Any] = checkpointer
        settings = SequentialSettings(
            contracts_token_budget=contracts_token_budget,
            violations_token_budget=violations_token_budget,
            feedback_token_budget=feedback_token_budget,
            warn_fraction=warn_fraction,
            prices=dict(prices or {}),
            default_price=default_price or TokenPrice(),
        )
        self.graph = build_sequential_graph(
            self.agents, pm, settings=settings, checkpointer=checkpointer
        )

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the default checkpoint database (a given checkpointer is the caller's)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> SequentialWorkflow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ running

    def _config(self, thread_id: str, max_outer: int, max_inner: int) -> RunnableConfig:
        return {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": recursion_limit(max_outer, max_inner),
        }

    def state(self, thread_id: str) -> WorkflowState | None:
        """The last checkpointed state of ``thread_id``, or None if there is none."""
        snapshot = self.graph.get_state({"configurable": {"thread_id": thread_id}})
        return WorkflowState.model_validate(snapshot.values) if snapshot.values else None

    def latest_thread_id(self) -> str | None:
        """The thread of the most recent checkpoint, or None."""
        for item in self.checkpointer.list(None, limit=1):
            return str(item.config["configurable"]["thread_id"])
        return None

    def run(
        self, task: str, *, thread_id: str | None = None, on_phase: PhaseCallback | None = None
    ) -> WorkflowResult:
        """Run a new workflow for ``task`` to its end.

        Args:
            task: the task description.
            thread_id: the checkpoint thread (default: a new random id); must be new.
            on_phase: called after each phase (live views).

        Raises:
            SequentialWorkflowError: the thread already holds a workflow.
            AgentError: an agent failed; resume the same thread once it is fixed.
        """
        if not task.strip():
            raise SequentialWorkflowError("the task description is empty")
        thread_id = thread_id or uuid.uuid4().hex
        existing = self.state(thread_id)
        if existing is not None:
            raise SequentialWorkflowError(
                f"thread {thread_id!r} already holds a workflow (task "
                f"{existing.task_description[:80]!r}, {existing.status}); resume it with "
                "resume(thread_id) / --resume, or pick a new thread id"
            )
        initial = WorkflowState(
            task_description=task,
            workspace=str(self.workspace),
            max_outer=self.max_outer,
            max_inner=self.max_inner,
            token_budget=self.token_budget,
        )
        config = self._config(thread_id, self.max_outer, self.max_inner)
        return self._drive(initial.model_dump(mode="json"), config, seen=0, on_phase=on_phase)

    def resume(self, thread_id: str, *, on_phase: PhaseCallback | None = None) -> WorkflowResult:
        """Go on with an interrupted workflow from its last finished phase.

        A finished workflow is not run again: its result is returned. The limits stored
        with the workflow apply, not this object's.

        Raises:
            SequentialWorkflowError: there is no workflow with that thread id.
        """
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        snapshot = self.graph.get_state(config)
        if not snapshot.values:
            where = f" in {self.checkpoint_path}" if self.checkpoint_path else ""
            raise SequentialWorkflowError(
                f"no workflow with thread id {thread_id!r}{where}; nothing to resume"
            )
        state = WorkflowState.model_validate(snapshot.values)
        if not snapshot.next:
            return self._result(state, thread_id)
        config = self._config(thread_id, state.max_outer, state.max_inner)
        return self._drive(None, config, seen=len(state.phase_history), on_phase=on_phase)

    def _drive(
        self,
        graph_input: dict[str, Any] | None,
        config: RunnableConfig,
        *,
        seen: int,
        on_phase: PhaseCallback | None,
    ) -> WorkflowResult:
        thread_id = str(config["configurable"]["thread_id"])
        trace = WorkflowTrace(
            thread_id,
            resumed=graph_input is None,
            prices=self.price_table,
            store=self.store,
            user_id=self.user_id,
            agent_id=self.agent_id,
            plugin_manager=self.pm,
        )
        try:
            for values in self.graph.stream(
                graph_input, config, stream_mode="values", durability=self.durability
            ):
                history = values.get("phase_history") or []
                if on_phase is not None and len(history) > seen:
                    state = WorkflowState.model_validate(values)
                    for record in state.phase_history[seen:]:
                        on_phase(record, state)
                seen = len(history)
            snapshot = self.graph.get_state(config)
            state = WorkflowState.model_validate(snapshot.values)
            if snapshot.next or state.status == "running":
                raise SequentialWorkflowError(
                    f"the workflow stopped before its end at {', '.join(snapshot.next) or '?'} "
                    f"(an agent called interrupt()?); resume thread {thread_id!r} to go on",
                    phase=snapshot.next[0] if snapshot.next else None,
                )
        except BaseException as exc:
            trace.finish(None, error=f"{type(exc).__name__}: {exc}")
            raise
        result = self._result(state, thread_id)
        trace.finish(result)
        return result

    @staticmethod
    def _result(state: WorkflowState, thread_id: str) -> WorkflowResult:
        return WorkflowResult(
            status="success" if state.status == "success" else "failed",
            final_state=state,
            total_tokens=state.total_tokens,
            total_cost=state.total_cost,
            reason=state.reason or "completed",
            pr_url=state.pr_url,
            execution_time_seconds=state.execution_time_seconds,
            thread_id=thread_id,
        )
