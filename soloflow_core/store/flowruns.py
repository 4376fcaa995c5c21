"""Flow runs in the store: their state, their steps' state, every transition with its time.

The runtime writes here before and after every step call, so what a run did survives a
crash of its process: a step recorded ``completed`` is never called again (its recorded
output is reused), and each step's idempotency key (``<run id>:<step key>``) is stored
before the call is made.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.errors import NotFoundError
from soloflow_core.flow.fsm import (
    RUN_TERMINAL,
    RunState,
    StepState,
    check_run_transition,
)
from soloflow_core.flow.journal import StepJournal
from soloflow_core.store import schema as t
from soloflow_core.store.step_journal import (
    DriverStepJournal,
    JournalSql,
    StoreStepJournal,
    driver_transaction,
    insert_transitions,
    stamper,
)
from soloflow_core.store.writer import json_text, now, storable_text

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from soloflow_core.models import FlowDefinition


@dataclass(frozen=True, slots=True)
class Transition:
    """One recorded state change of a run (``step_key`` None) or of one of its steps."""

    at: datetime
    step_key: str | None
    from_state: str | None
    to_state: str
    detail: str | None


@dataclass(frozen=True, slots=True)
class StepRunRecord:
    step_key: str
    step_id: str
    state: str
    attempts: int
    idempotency_key: str
    output: Any
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class FlowRunRecord:
    """A flow run as stored: its state, inputs, result and steps."""

    id: str
    user_id: str
    agent_id: str
    flow_name: str
    flow_version: int
    state: str
    inputs: Any
    outputs: Any
    error: str | None
    outcome: str | None
    owner: str | None
    cancel_requested: bool
    started_at: datetime
    ended_at: datetime | None
    steps: list[StepRunRecord] = field(default_factory=list)
    definition: dict[str, Any] | None = None
    """The flow definition the run started with (resumed runs use it, registered or not)."""

    @property
    def terminal(self) -> bool:
        return self.state in RUN_TERMINAL

    @property
    def waiting_for_approval(self) -> bool:
        return self.state == RunState.RUNNING and any(
            s.step_key == APPROVAL_STEP and s.state == StepState.RUNNING for s in self.steps
        )


APPROVAL_STEP = "__approval__"
"""The step key of a run's approval gate (see ``FlowDefinition.requires_approval``)."""


class FlowRunStore:
    """The flow-run part of :class:`~soloflow_core.store.Store` (a mixin)."""

    engine: Engine
    _writer: Engine
    _journal: Engine | None = None

    def _journal_engine(self) -> Engine:
        """The engine flow-run records are written through. On PostgreSQL its own pool,
        whose sessions commit with ``synchronous_commit=off`` (see :meth:`JournalSql.build` for
        why that is safe) and skip the pre-ping: two round trips fewer per write."""
        if self.engine.dialect.name != "postgresql":
            return self.engine
        if self._journal is None:
            engine = sa.create_engine(self.engine.url, pool_pre_ping=False, pool_size=4)

            @sa.event.listens_for(engine, "connect")
            def _async_commit(dbapi_conn, _record):  # type: ignore[no-untyped-def]
                with dbapi_conn.cursor() as cur:
                    cur.execute("SET synchronous_commit TO OFF")
                dbapi_conn.commit()

            self._journal = engine
        return self._journal

    def _close_flow_runs(self) -> None:
        if self._journal is not None:
            self._journal.dispose()
            self._journal = None

    # ------------------------------------------------------------------ runs

    def start_flow_run(
        self,
        flow: FlowDefinition,
        inputs: dict[str, Any],
        *,
        user_id: str,
        agent_id: str,
        run_id: str | None = None,
        owner: str | None = None,
    ) -> str:
        """Record a new run, ``draft`` → ``active`` → ``running``; its id."""
        run_id = run_id or "frun_" + uuid.uuid4().hex
        sql = JournalSql.build(self.engine.dialect.name)
        stamp = stamper(self.engine)

        def work(cur: Any) -> None:
            at = stamp(now())
            cur.execute(sql.insert_run, (run_id, user_id, agent_id, flow.name, flow.version, json_text(inputs),
                                         at, at, owner, json_text(flow.model_dump(mode="json"))))
            insert_transitions(cur, sql, [
                (run_id, None, None, RunState.DRAFT.value, at, None),
                (run_id, None, RunState.DRAFT.value, RunState.ACTIVE.value, at, "inputs checked"),
                (run_id, None, RunState.ACTIVE.value, RunState.RUNNING.value, at, owner),
            ])

        driver_transaction(self._journal_engine(), sql, work)
        return run_id

    def finish_flow_run(
        self,
        run_id: str,
        *,
        status: str,
        outputs: Any = None,
        error: str | None = None,
        outcome: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Move the run to the terminal state ``status`` (checked by the state machine).

        Raises:
            NotFoundError: no such run.
            InvalidTransitionError: the run cannot move to ``status``.
        """
        sql = JournalSql.build(self.engine.dialect.name)
        stamp = stamper(self.engine)
        err = None if error is None else storable_text(error)

        def work(cur: Any) -> None:
            cur.execute(sql.run_state, (run_id,))
            row = cur.fetchone()
            if row is None:
                raise NotFoundError(f"no flow run {run_id!r}")
            check_run_transition(run_id, row[0], status)
            at = stamp(now())
            cur.execute(sql.finish_run, (str(status), json_text(outputs), err, outcome, at, at, run_id))
            note = detail or outcome or error
            cur.execute(sql.transition, (run_id, None, row[0], str(status), at,
                                         None if note is None else storable_text(note)))

        # The end of a run commits synchronously: its checkpoints are deleted next.
        driver_transaction(self.engine, sql, work)

    def claim_flow_run(self, run_id: str, *, user_id: str, agent_id: str, owner: str) -> None:
        """Record that process ``owner`` now runs ``run_id`` (a resume)."""
        with self._writer.begin() as conn:
            conn.execute(sa.update(t.flow_runs).where(*self._run_where(run_id, user_id, agent_id))
                         .values(owner=owner, updated_at=now()))

    def request_cancel(self, run_id: str, *, user_id: str, agent_id: str) -> FlowRunRecord:
        """Ask the process running ``run_id`` to stop before its next step."""
        with self._writer.begin() as conn:
            done = conn.execute(sa.update(t.flow_runs).where(*self._run_where(run_id, user_id, agent_id))
                                .values(cancel_requested=True, updated_at=now()))
            if not done.rowcount:
                raise NotFoundError(f"no flow run {run_id!r} for user {user_id!r}, agent {agent_id!r}; "
                                    "`soloflow flows runs` lists them")
        return self.get_flow_run(run_id, user_id=user_id, agent_id=agent_id)

    def cancel_requested(self, run_id: str) -> bool:
        with self.engine.connect() as conn:
            return bool(conn.execute(sa.select(t.flow_runs.c.cancel_requested)
                                     .where(t.flow_runs.c.id == run_id)).scalar())

    @staticmethod
    def _run_where(run_id: str, user_id: str, agent_id: str) -> tuple[Any, ...]:
        c = t.flow_runs.c
        return (c.id == run_id, c.user_id == user_id, c.agent_id == agent_id)

    def get_flow_run(self, run_id: str, *, user_id: str, agent_id: str) -> FlowRunRecord:
        """The run and its steps.

        Raises:
            NotFoundError: no such run in this namespace.
        """
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.flow_runs).where(*self._run_where(run_id, user_id, agent_id))
                               ).mappings().first()
            if row is None:
                raise NotFoundError(f"no flow run {run_id!r} for user {user_id!r}, agent {agent_id!r}; "
                                    "`soloflow flows runs` lists them")
            steps = [
                StepRunRecord(step_key=s["step_key"], step_id=s["step_id"], state=s["state"],
                              attempts=s["attempts"], idempotency_key=s["idempotency_key"],
                              output=s["output"], error=s["error"], started_at=s["started_at"],
                              finished_at=s["finished_at"])
                for s in conn.execute(sa.select(t.flow_step_runs)
                                      .where(t.flow_step_runs.c.run_id == run_id)
                                      .order_by(t.flow_step_runs.c.started_at)).mappings()
            ]
        return FlowRunRecord(
            id=row["id"], user_id=row["user_id"], agent_id=row["agent_id"], flow_name=row["flow_name"],
            flow_version=row["flow_version"], state=row["status"], inputs=row["inputs"],
            outputs=row["outputs"], error=row["error"], outcome=row["outcome"], owner=row["owner"],
            cancel_requested=bool(row["cancel_requested"]), started_at=row["started_at"],
            ended_at=row["ended_at"], steps=steps, definition=row["definition"],
        )

    def flow_run_history(self, run_id: str, *, user_id: str, agent_id: str) -> list[Transition]:
        """Every transition of the run and its steps, oldest first.

        Raises:
            NotFoundError: no such run in this namespace.
        """
        self.get_flow_run(run_id, user_id=user_id, agent_id=agent_id)
        c = t.flow_transitions.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(c.at, c.step_key, c.from_state, c.to_state, c.detail)
                                .where(c.run_id == run_id).order_by(c.id)).all()
        return [Transition(at=r[0], step_key=r[1], from_state=r[2], to_state=r[3], detail=r[4]) for r in rows]

    def list_flow_runs(
        self,
        *,
        user_id: str,
        agent_id: str,
        flow_name: str | None = None,
        state: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        c = t.flow_runs.c
        q = sa.select(t.flow_runs).where(c.user_id == user_id, c.agent_id == agent_id)
        if flow_name is not None:
            q = q.where(c.flow_name == flow_name)
        if state is not None:
            q = q.where(c.status == state)
        q = q.order_by(c.started_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def stale_flow_runs(self, *, older_than: datetime, terminal: bool) -> list[str]:
        """Ids of runs (any namespace; for maintenance) last updated before ``older_than``."""
        c = t.flow_runs.c
        states = [s.value for s in RUN_TERMINAL]
        cond = c.status.in_(states) if terminal else c.status.not_in(states)
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(c.id).where(cond, sa.func.coalesce(c.updated_at, c.started_at)
                                                           < older_than)).scalars())

    def step_journal(self, run_id: str) -> StepJournal:
        """The journal the runtime writes ``run_id``'s steps to: on SQLite and PostgreSQL
        one that talks to the driver directly (see :class:`DriverStepJournal`)."""
        if self.engine.dialect.name in ("sqlite", "postgresql"):
            return DriverStepJournal(self._journal_engine(), run_id)
        return StoreStepJournal(self._writer, self.engine, run_id)


