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

from soloflow_core.errors import InvalidTransitionError, NotFoundError
from soloflow_core.flow.fsm import (
    RUN_TERMINAL,
    RunState,
    StepState,
    check_run_transition,
)
from soloflow_core.flow.journal import StepJournal
from soloflow_core.models.names import check_name, check_namespace
from soloflow_core.store import schema as t
from soloflow_core.store.driver_journal import (
    PG_COMPLETE_THEN_FINISH,
    DriverStepJournal,
    pg_complete_then_finish_params,
)
from soloflow_core.store.flowrun_statements import (
    FROM_RUNNING,
    PG_FINISH,
    STARTED,
    NewRun,
    history_query,
    pg_start,
    sqlite_start,
)
from soloflow_core.store.journal_io import (
    JournalSql,
    driver_statement,
    driver_transaction,
    release_sqlite_writer,
    stamper,
)
from soloflow_core.store.json_values import json_text, storable_text
from soloflow_core.store.step_journal import StoreStepJournal
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store.database import Database


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
    updated_at: datetime | None = None
    """When the run's row last changed (a claim, a cancel request, its end): what
    :meth:`FlowRunRepository.claim_flow_run` compares to tell whether another process got there first."""

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


class FlowRunRepository:
    """Flow runs, their steps and transitions (``store.flow_runs``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def close(self) -> None:
        """Give the journal's SQLite write connection back to the pool."""
        release_sqlite_writer(self.db.engine)

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
        definition_json: str | None = None,
    ) -> str:
        """Record a new run, ``draft`` → ``active`` → ``running``; its id.
        ``definition_json``: ``flow`` as JSON text, when the caller has it at hand."""
        started = self._start_run(
            flow,
            inputs,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            owner=owner,
            definition_json=definition_json,
            if_latest=False,
        )
        assert started is not None
        return started

    def start_latest_flow_run(
        self,
        flow: FlowDefinition,
        inputs: dict[str, Any],
        *,
        user_id: str,
        agent_id: str,
        run_id: str | None = None,
        owner: str | None = None,
        definition_json: str | None = None,
    ) -> str | None:
        """:meth:`start_flow_run` if ``flow`` is still the newest registered version of its
        name in the namespace (checked in the same statement); None, recording nothing, if a
        newer one exists."""
        return self._start_run(
            flow,
            inputs,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            owner=owner,
            definition_json=definition_json,
            if_latest=True,
        )

    def _start_run(
        self,
        flow: FlowDefinition,
        inputs: dict[str, Any],
        *,
        user_id: str,
        agent_id: str,
        run_id: str | None,
        owner: str | None,
        definition_json: str | None,
        if_latest: bool,
    ) -> str | None:
        check_namespace(user_id, agent_id)
        if run_id is not None:
            check_name(run_id, "flow run id")
        run = NewRun(
            flow=flow,
            inputs=inputs,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id or "frun_" + uuid.uuid4().hex,
            owner=owner,
            definition=definition_json or json_text(flow.model_dump(mode="json")),
            if_latest=if_latest,
        )
        dialect = self.db.dialect
        if dialect == "postgresql":
            statement, params = pg_start(run)
            rows = driver_statement(self.db.journal(), statement, params)
            return run.run_id if rows else None
        work = sqlite_start(run, stamper(self.db.engine))
        return (
            run.run_id
            if driver_transaction(self.db.journal(), JournalSql.build(dialect), work)
            else None
        )

    def finish_flow_run(
        self,
        run_id: str,
        *,
        status: str,
        outputs: Any = None,
        error: str | None = None,
        outcome: str | None = None,
        detail: str | None = None,
        synchronous: bool = False,
        journal: StepJournal | None = None,
    ) -> None:
        """Move the run to the terminal state ``status`` (checked by the state machine).

        ``journal``: the run's journal; the completions it holds back are written first, in
        the same transaction (on PostgreSQL, for one deferred completion, the same statement).

        ``synchronous``: write through the main pool instead of the journal's (both commit
        synchronously; kept for callers that pass it).

        Raises:
            NotFoundError: no such run.
            InvalidTransitionError: the run cannot move to ``status``.
        """
        sql = JournalSql.build(self.db.dialect)
        stamp = stamper(self.db.engine)
        err = None if error is None else storable_text(error)
        note = detail or outcome or error
        note_text = None if note is None else storable_text(note)
        deferring = journal if isinstance(journal, DriverStepJournal) else None
        if journal is not None and deferring is None:
            journal.flush()
        db = self.db if synchronous else self.db.journal()
        if self.db.dialect == "postgresql" and str(status) in FROM_RUNNING:
            # The usual end (running → terminal) in one statement; anything else is checked below.
            at = now()
            one = deferring.take_one_deferred() if deferring is not None else None
            if deferring is not None and one is not None:
                step_key, text, when = one
                try:
                    completed, ended = driver_statement(
                        db,
                        PG_COMPLETE_THEN_FINISH,
                        pg_complete_then_finish_params(
                            run_id,
                            step_key,
                            text=text,
                            when=when,
                            status=str(status),
                            outputs=json_text(outputs),
                            error=err,
                            outcome=outcome,
                            note=note_text,
                        ),
                    )[0]
                except BaseException:
                    deferring.give_back(step_key, text, when)
                    raise
                if not completed:
                    deferring.give_back(step_key, text, when)  # the checked path below records it
                elif ended:
                    return
            elif (deferring is None or not deferring.has_deferred()) and driver_statement(
                db,
                PG_FINISH,
                (
                    str(status),
                    json_text(outputs),
                    err,
                    outcome,
                    at,
                    at,
                    run_id,
                    str(status),
                    at,
                    note_text,
                ),
            ):
                return

        def work(cur: Any) -> None:
            cur.execute(sql.run_state, (run_id,))
            row = cur.fetchone()
            if row is None:
                raise NotFoundError(f"no flow run {run_id!r}")
            check_run_transition(run_id, row[0], status)
            at = stamp(now())
            cur.execute(
                sql.finish_run, (str(status), json_text(outputs), err, outcome, at, at, run_id)
            )
            cur.execute(sql.transition, (run_id, None, row[0], str(status), at, note_text))

        if deferring is None:
            driver_transaction(db, sql, work)
        else:  # its deferred completions are given back if this fails
            deferring.transact(db, deferring.with_deferred(work))

    def claim_flow_run(
        self,
        run_id: str,
        *,
        user_id: str,
        agent_id: str,
        owner: str,
        seen: FlowRunRecord | None = None,
    ) -> None:
        """Record that process ``owner`` now runs ``run_id`` (a resume, an approval, a reject
        or a cancel of a run no process drives). With ``seen`` — the record the caller decided
        on — only if the run's row has not changed since (same owner, same ``updated_at``, same
        state): of two processes answering or resuming the same run at once, one wins. A run
        ``seen`` interrupted moves back to running (the transition recorded with the claim).

        Raises:
            InvalidTransitionError: with ``seen``, another process claimed, cancelled or ended
                the run first.
        """
        c = t.flow_runs.c
        where = list(self._run_where(run_id, user_id, agent_id))
        taken_up = seen is not None and seen.state == RunState.INTERRUPTED
        if seen is not None:
            where += [
                c.status == (RunState.INTERRUPTED if taken_up else RunState.RUNNING).value,
                c.owner.is_not_distinct_from(seen.owner),
                c.updated_at.is_not_distinct_from(seen.updated_at),
            ]
        at = now()
        values: dict[str, Any] = {"owner": owner, "updated_at": at}
        if taken_up:  # interrupted → running, recorded with the claim
            values["status"] = RunState.RUNNING.value
        with self.db.write() as conn:
            done = conn.execute(sa.update(t.flow_runs).where(*where).values(**values))
            if taken_up and done.rowcount:
                conn.execute(
                    sa.insert(t.flow_transitions).values(
                        run_id=run_id,
                        from_state=RunState.INTERRUPTED.value,
                        to_state=RunState.RUNNING.value,
                        at=at,
                        detail=f"taken up by {owner}",
                    )
                )
        if seen is not None and not done.rowcount:
            raise InvalidTransitionError(
                f"flow run {run_id!r} changed since it was read: another process resumed, approved, rejected "
                f"or cancelled it at the same moment; `soloflow flows status {run_id}` shows where it is",
                run_id=run_id,
            )

    def interrupt_flow_run(
        self, run_id: str, *, user_id: str, agent_id: str, owner: str, detail: str
    ) -> bool:
        """Record that process ``owner`` stopped driving ``run_id`` (Ctrl-C, SIGTERM): running
        → interrupted, with ``detail`` in the transition. Only a running run that ``owner``
        drives moves; False, writing nothing, for any other (already interrupted, ended,
        claimed by another process)."""
        c = t.flow_runs.c
        at = now()
        with self.db.write() as conn:
            done = conn.execute(
                sa.update(t.flow_runs)
                .where(
                    *self._run_where(run_id, user_id, agent_id),
                    c.status == RunState.RUNNING.value,
                    c.owner == owner,
                )
                .values(status=RunState.INTERRUPTED.value, updated_at=at)
            )
            if not done.rowcount:
                return False
            conn.execute(
                sa.insert(t.flow_transitions).values(
                    run_id=run_id,
                    from_state=RunState.RUNNING.value,
                    to_state=RunState.INTERRUPTED.value,
                    at=at,
                    detail=storable_text(detail),
                )
            )
        return True

    def request_cancel(self, run_id: str, *, user_id: str, agent_id: str) -> FlowRunRecord:
        """Ask the process running ``run_id`` to stop before its next step."""
        with self.db.write() as conn:
            done = conn.execute(
                sa.update(t.flow_runs)
                .where(*self._run_where(run_id, user_id, agent_id))
                .values(cancel_requested=True, updated_at=now())
            )
            if not done.rowcount:
                raise NotFoundError(
                    f"no flow run {run_id!r} for user {user_id!r}, agent {agent_id!r}; "
                    "`soloflow flows runs` lists them"
                )
        return self.get_flow_run(run_id, user_id=user_id, agent_id=agent_id)

    def cancel_requested(self, run_id: str) -> bool:
        with self.db.read() as conn:
            return bool(
                conn.execute(
                    sa.select(t.flow_runs.c.cancel_requested).where(t.flow_runs.c.id == run_id)
                ).scalar()
            )

    @staticmethod
    def _run_where(run_id: str, user_id: str, agent_id: str) -> tuple[Any, ...]:
        c = t.flow_runs.c
        return (c.id == run_id, c.user_id == user_id, c.agent_id == agent_id)

    def get_flow_run(self, run_id: str, *, user_id: str, agent_id: str) -> FlowRunRecord:
        """The run and its steps.

        Raises:
            NotFoundError: no such run in this namespace.
        """
        with self.db.read() as conn:
            row = (
                conn.execute(
                    sa.select(t.flow_runs).where(*self._run_where(run_id, user_id, agent_id))
                )
                .mappings()
                .first()
            )
            if row is None:
                raise NotFoundError(
                    f"no flow run {run_id!r} for user {user_id!r}, agent {agent_id!r}; "
                    "`soloflow flows runs` lists them"
                )
            steps = [
                StepRunRecord(
                    step_key=s["step_key"],
                    step_id=s["step_id"],
                    state=s["state"],
                    attempts=s["attempts"],
                    idempotency_key=s["idempotency_key"],
                    output=s["output"],
                    error=s["error"],
                    started_at=s["started_at"],
                    finished_at=s["finished_at"],
                )
                for s in conn.execute(
                    sa.select(t.flow_step_runs)
                    .where(t.flow_step_runs.c.run_id == run_id)
                    .order_by(t.flow_step_runs.c.started_at)
                ).mappings()
            ]
        return FlowRunRecord(
            id=row["id"],
            user_id=row["user_id"],
            agent_id=row["agent_id"],
            flow_name=row["flow_name"],
            flow_version=row["flow_version"],
            state=row["status"],
            inputs=row["inputs"],
            outputs=row["outputs"],
            error=row["error"],
            outcome=row["outcome"],
            owner=row["owner"],
            cancel_requested=bool(row["cancel_requested"]),
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            steps=steps,
            definition=row["definition"],
            updated_at=row["updated_at"],
        )

    def flow_run_history(self, run_id: str, *, user_id: str, agent_id: str) -> list[Transition]:
        """Every transition of the run and its steps, oldest first.

        Raises:
            NotFoundError: no such run in this namespace.
        """
        self.get_flow_run(run_id, user_id=user_id, agent_id=agent_id)
        with self.db.read() as conn:
            rows = conn.execute(history_query(run_id)).all()
        out: list[Transition] = []
        for at, step_key, old, new, detail in rows:
            if old is None and new == RunState.RUNNING:  # a start or a begin, stored as one row
                chain = (
                    [None, RunState.DRAFT.value, RunState.ACTIVE.value, new]
                    if step_key is None
                    else [None, StepState.PENDING.value, StepState.READY.value, new]
                )
                notes = [None, STARTED if step_key is None else None, detail]
                out += [
                    Transition(at=at, step_key=step_key, from_state=a, to_state=b, detail=note)
                    for a, b, note in zip(chain, chain[1:], notes, strict=False)
                ]
                continue
            out.append(
                Transition(at=at, step_key=step_key, from_state=old, to_state=new, detail=detail)
            )
        return out

    def list_flow_runs(
        self,
        *,
        user_id: str,
        agent_id: str,
        flow_name: str | None = None,
        state: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """The namespace's flow runs, newest first: ``limit`` of them from ``offset``."""
        c = t.flow_runs.c
        q = sa.select(t.flow_runs).where(c.user_id == user_id, c.agent_id == agent_id)
        if flow_name is not None:
            q = q.where(c.flow_name == flow_name)
        if state is not None:
            q = q.where(c.status == state)
        q = q.order_by(c.started_at.desc(), c.id).limit(limit).offset(offset or None)
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def waiting_flow_runs(self, *, user_id: str, agent_id: str) -> list[tuple[str, str]]:
        """(run id, flow name) of the namespace's runs that wait for a person's approval,
        oldest first."""
        r, s = t.flow_runs.c, t.flow_step_runs.c
        q = (
            sa.select(r.id, r.flow_name)
            .join(t.flow_step_runs, s.run_id == r.id)
            .where(
                r.user_id == user_id,
                r.agent_id == agent_id,
                r.status == RunState.RUNNING,
                s.step_key == APPROVAL_STEP,
                s.state == StepState.RUNNING,
            )
            .order_by(r.started_at)
        )
        with self.db.read() as conn:
            return [(str(rid), str(name)) for rid, name in conn.execute(q)]

    def stale_flow_runs(self, *, older_than: datetime, terminal: bool) -> list[str]:
        """Ids of runs (any namespace; for maintenance) last updated before ``older_than``."""
        c = t.flow_runs.c
        states = [s.value for s in RUN_TERMINAL]
        cond = c.status.in_(states) if terminal else c.status.not_in(states)
        with self.db.read() as conn:
            return list(
                conn.execute(
                    sa.select(c.id).where(
                        cond, sa.func.coalesce(c.updated_at, c.started_at) < older_than
                    )
                ).scalars()
            )

    def step_journal(self, run_id: str, *, defer_completions: bool = False) -> StepJournal:
        """The journal the runtime writes ``run_id``'s steps to: on SQLite and PostgreSQL
        one that talks to the driver directly (see :class:`DriverStepJournal`).

        ``defer_completions``: a step's completion is written with the run's next journal
        write (the next step's begin, in one transaction) instead of on its own — one
        write per step instead of two. The caller must call ``flush()`` when the run stops
        and ``recovered()`` on resume for steps whose output the checkpoint holds; the
        :class:`~soloflow_langgraph.runtime.flow_runtime.FlowRuntime` does both. Ignored on other
        databases."""
        if self.db.dialect in ("sqlite", "postgresql"):
            return DriverStepJournal(self.db.journal(), run_id, defer_completions=defer_completions)
        return StoreStepJournal(self.db, run_id)
