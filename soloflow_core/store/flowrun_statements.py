"""The statements of :mod:`~soloflow_core.store.flowruns` that start and end a run in one
round trip, and the query that reads a run's history back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.flow.fsm import RUN_TERMINAL, RunState, StepState
from soloflow_core.store import schema as t
from soloflow_core.store.journal_io import JournalSql, insert_transitions
from soloflow_core.store.json_values import json_text
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from soloflow_core.models import FlowDefinition


_RUN_COLUMNS = (
    "INSERT INTO sf_flow_runs (id, user_id, agent_id, flow_name, flow_version, status, inputs, "
    "started_at, updated_at, owner, definition, cancel_requested) "
)
_NEWEST = (
    "WHERE NOT EXISTS (SELECT 1 FROM sf_flows WHERE user_id = {0} AND agent_id = {0} AND name = {0} "
    "AND version > {0})"
)
_PG_RUN_TRANSITIONS = (
    "INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, detail) "
    "SELECT run.id, NULL, NULL, 'running', %s, CAST(%s AS text) FROM run RETURNING 1"
)
"""A run's start — none → draft → active (inputs checked) → running (by its owner) — as one
row; :meth:`~soloflow_core.store.flowruns.FlowRunRepository.flow_run_history` lists it as
the three (no other move goes from nothing to ``running``)."""
STARTED = "inputs checked"
_PG_RUN_VALUES = (
    "%s, %s, %s, %s, %s, 'running', CAST(%s AS jsonb), %s, %s, %s, CAST(%s AS jsonb), FALSE"
)
_PG_START = (
    f"WITH run AS ({_RUN_COLUMNS}VALUES ({_PG_RUN_VALUES}) RETURNING id) {_PG_RUN_TRANSITIONS}"
)
"""A new run and its first three transitions in one statement (PostgreSQL)."""
_PG_START_LATEST = (
    f"WITH run AS ({_RUN_COLUMNS}SELECT {_PG_RUN_VALUES} {_NEWEST.format('%s')} RETURNING id) "
    f"{_PG_RUN_TRANSITIONS}"
)
"""The same, only while no newer version of the flow is registered."""
_SQLITE_START_LATEST = (
    f"{_RUN_COLUMNS}SELECT ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, FALSE {_NEWEST.format('?')}"
)

FROM_RUNNING = frozenset(str(s) for s in RUN_TERMINAL)

PG_FINISH = (
    "WITH up AS (UPDATE sf_flow_runs SET status = %s, outputs = CAST(%s AS jsonb), error = %s, outcome = %s, "
    "ended_at = %s, updated_at = %s WHERE id = %s AND status = 'running' RETURNING id) "
    "INSERT INTO sf_flow_transitions (run_id, step_key, from_state, to_state, at, detail) "
    "SELECT id, NULL, 'running', %s, %s, %s FROM up RETURNING 1"
)
"""running → a terminal state in one statement (PostgreSQL); no rows when the run was not
running, and the checked path runs."""


@dataclass(frozen=True, slots=True)
class NewRun:
    """What the statement that records a new run writes."""

    flow: FlowDefinition
    inputs: dict[str, Any]
    user_id: str
    agent_id: str
    run_id: str
    owner: str | None
    definition: str
    if_latest: bool
    """Only while no newer version of the flow is registered."""

    def newest(self) -> tuple[Any, ...]:
        return (
            (self.user_id, self.agent_id, self.flow.name, self.flow.version)
            if self.if_latest
            else ()
        )

    def columns(self, at: Any) -> tuple[Any, ...]:
        return (
            self.run_id,
            self.user_id,
            self.agent_id,
            self.flow.name,
            self.flow.version,
            json_text(self.inputs),
            at,
            at,
            self.owner,
            self.definition,
        )


def pg_start(run: NewRun) -> tuple[str, tuple[Any, ...]]:
    """The statement (PostgreSQL) that records a new run, with its parameters; it returns a
    row when it did."""
    at = now()
    return (_PG_START_LATEST if run.if_latest else _PG_START), (
        *run.columns(at),
        *run.newest(),
        at,
        run.owner,
    )


def sqlite_start(run: NewRun, stamp: Callable[[datetime], Any]) -> Callable[[Any], bool]:
    """What records a new run on SQLite, in the open transaction: its row and its start's
    transition; whether it did (not when ``if_latest`` and a newer version is registered)."""
    sql = JournalSql.build("sqlite")

    def work(cur: Any) -> bool:
        at = stamp(now())
        cur.execute(
            _SQLITE_START_LATEST if run.if_latest else sql.insert_run,
            (*run.columns(at), *run.newest()),
        )
        if cur.rowcount != 1:
            return False
        insert_transitions(
            cur, sql, [(run.run_id, None, None, RunState.RUNNING.value, at, run.owner)]
        )
        return True

    return work


def history_query(run_id: str) -> sa.Select[Any]:
    """A run's transitions, oldest first: the stored rows and the moves its steps' rows stand
    for (a step's usual begin and completion, see migration 0005), in order of their place
    ``(pos, ord)`` — a stored row's is ``(id, 0)`` — which is given when the move is written,
    so the order never depends on a clock and a history only grows at its end."""
    c, s = t.flow_transitions.c, t.flow_step_runs.c
    null, zero = sa.null(), sa.literal(0)
    stored = sa.select(
        c.at.label("at"),
        c.step_key,
        c.from_state,
        c.to_state,
        c.detail,
        c.id.label("pos"),
        zero.label("ord"),
        c.id.label("n"),
    ).where(c.run_id == run_id)
    begins = sa.select(
        s.begun_at,
        s.step_key,
        sa.cast(null, sa.String),
        sa.literal(StepState.RUNNING.value),
        sa.cast(null, sa.Text),
        s.begun_pos,
        sa.func.coalesce(s.begun_ord, 0),
        zero,
    ).where(s.run_id == run_id, s.begun_at.is_not(None))
    completions = sa.select(
        s.done_at,
        s.step_key,
        sa.literal(StepState.RUNNING.value),
        sa.literal(StepState.COMPLETED.value),
        sa.cast(null, sa.Text),
        sa.func.coalesce(s.done_pos, s.completed_seq),
        sa.func.coalesce(s.done_ord, 0),
        zero,
    ).where(s.run_id == run_id, s.done_at.is_not(None))
    both = sa.union_all(stored, begins, completions).subquery()
    b = both.c
    return sa.select(b.at, b.step_key, b.from_state, b.to_state, b.detail).order_by(
        b.pos, b.ord, b.n
    )
