"""Flow candidates in the store: what the detector proposes, and the decision taken on each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.errors import NotFoundError
from soloflow_core.models import FlowCandidate
from soloflow_core.models.names import STORED
from soloflow_core.store import schema as t
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from soloflow_core.store.database import Database


class CandidateRepository:
    """Flow candidates by namespace (``store.candidates``); a decided candidate is never
    reopened."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def save_candidates(self, candidates: Iterable[FlowCandidate]) -> None:
        """Insert new candidates; refresh pending ones; never reopen a decided one."""
        stamp = now()
        with self.db.write() as conn:
            for cand in candidates:
                body = cand.model_dump(mode="json")
                existing = conn.execute(
                    sa.select(t.candidates.c.status).where(t.candidates.c.id == cand.id)
                ).scalar()
                if existing is None:
                    conn.execute(
                        sa.insert(t.candidates).values(
                            id=cand.id,
                            user_id=cand.user_id,
                            agent_id=cand.agent_id,
                            dedupe_key=cand.dedupe_key,
                            status=cand.status,
                            occurrence_count=cand.occurrence_count,
                            estimated_token_savings=cand.estimated_token_savings,
                            body=body,
                            created_at=stamp,
                            updated_at=stamp,
                        )
                    )
                elif existing == "pending":
                    conn.execute(
                        sa.update(t.candidates)
                        .where(t.candidates.c.id == cand.id)
                        .values(
                            occurrence_count=cand.occurrence_count,
                            estimated_token_savings=cand.estimated_token_savings,
                            body=body,
                            updated_at=stamp,
                        )
                    )

    def _candidate_from_row(self, row: Any) -> FlowCandidate:
        body = dict(row["body"])
        body["status"] = row["status"]
        body["created_at"] = row["created_at"]
        return FlowCandidate.model_validate(body, context=STORED)

    def get_candidate(self, candidate_id: str, *, user_id: str, agent_id: str) -> FlowCandidate:
        c = t.candidates.c
        with self.db.read() as conn:
            row = (
                conn.execute(
                    sa.select(t.candidates).where(
                        c.id == candidate_id, c.user_id == user_id, c.agent_id == agent_id
                    )
                )
                .mappings()
                .first()
            )
        if row is None:
            raise NotFoundError(
                f"no candidate {candidate_id!r} for user {user_id!r}, agent {agent_id!r}; "
                "run `soloflow detect` to list candidates"
            )
        return self._candidate_from_row(row)

    def list_candidates(
        self,
        *,
        user_id: str,
        agent_id: str,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[FlowCandidate]:
        """The namespace's candidates, largest estimated savings first (``limit`` of them
        from ``offset`` when given)."""
        c = t.candidates.c
        q = sa.select(t.candidates).where(c.user_id == user_id, c.agent_id == agent_id)
        if status is not None:
            q = q.where(c.status == status)
        q = q.order_by(c.estimated_token_savings.desc(), c.id).limit(limit).offset(offset or None)
        with self.db.read() as conn:
            return [self._candidate_from_row(r) for r in conn.execute(q).mappings()]

    def decided_dedupe_keys(self, *, user_id: str, agent_id: str) -> dict[str, str]:
        """dedupe key → status, for every candidate already stored in the namespace."""
        c = t.candidates.c
        q = sa.select(c.dedupe_key, c.status).where(c.user_id == user_id, c.agent_id == agent_id)
        with self.db.read() as conn:
            return {k: s for k, s in conn.execute(q)}

    def set_candidate_status(
        self, candidate_id: str, status: str, *, user_id: str, agent_id: str
    ) -> FlowCandidate:
        cand = self.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
        with self.db.write() as conn:
            conn.execute(
                sa.update(t.candidates)
                .where(t.candidates.c.id == candidate_id)
                .values(status=status, updated_at=now())
            )
        return cand.model_copy(update={"status": status})
