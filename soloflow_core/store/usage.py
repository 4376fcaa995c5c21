"""Reads for a page of flows at a time: their definitions, and what they have served (for
their quality scores, :mod:`soloflow_core.learning.quality`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.models.names import STORED
from soloflow_core.store import schema as t

if TYPE_CHECKING:
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store.database import Database

__all__ = ["MAX_READ_RUNS", "FlowRunSample", "UsageRepository"]

_IN_CHUNK = 500
MAX_READ_RUNS = 500
"""Flow runs read per flow, the newest; what is measured is over these."""


@dataclass(frozen=True, slots=True)
class FlowRunSample:
    """What a quality score reads of one flow run."""

    version: int
    status: str
    started_at: datetime
    ended_at: datetime | None
    inputs: Any


class UsageRepository:
    """What flows' runs used, for the savings reports (``store.usage``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def flow_run_samples(
        self, names: Sequence[str], *, user_id: str, agent_id: str, per_flow: int = MAX_READ_RUNS
    ) -> dict[str, list[FlowRunSample]]:
        """The newest ``per_flow`` runs (every version) of each of the namespace's flows
        ``names``, newest first; one statement per 500 names."""
        c = t.flow_runs.c
        out: dict[str, list[FlowRunSample]] = {}
        ids = list(dict.fromkeys(names))
        with self.db.read() as conn:
            for start in range(0, len(ids), _IN_CHUNK):
                nth = (
                    sa.func.row_number()
                    .over(partition_by=c.flow_name, order_by=(c.started_at.desc(), c.id))
                    .label("nth")
                )
                ranked = (
                    sa.select(
                        c.flow_name,
                        c.flow_version,
                        c.status,
                        c.started_at,
                        c.ended_at,
                        c.inputs,
                        nth,
                    )
                    .where(
                        c.user_id == user_id,
                        c.agent_id == agent_id,
                        c.flow_name.in_(ids[start : start + _IN_CHUNK]),
                    )
                    .subquery()
                )
                q = (
                    sa.select(ranked)
                    .where(ranked.c.nth <= per_flow)
                    .order_by(ranked.c.flow_name, ranked.c.nth)
                )
                for name, version, status, started, ended, inputs, _ in conn.execute(q):
                    out.setdefault(name, []).append(
                        FlowRunSample(
                            version=version,
                            status=status,
                            started_at=started,
                            ended_at=ended,
                            inputs=inputs,
                        )
                    )
        return out

    def flow_definitions(
        self, keys: Sequence[tuple[str, int]], *, user_id: str, agent_id: str
    ) -> dict[tuple[str, int], FlowDefinition]:
        """The definitions of the namespace's flow versions ``keys`` (name, version); unknown
        keys are left out. One statement per 500 names."""
        from soloflow_core.models import FlowDefinition

        c = t.flows.c
        wanted = set(keys)
        names = list(dict.fromkeys(name for name, _ in keys))
        out: dict[tuple[str, int], FlowDefinition] = {}
        with self.db.read() as conn:
            for start in range(0, len(names), _IN_CHUNK):
                q = sa.select(c.name, c.version, c.definition).where(
                    c.user_id == user_id,
                    c.agent_id == agent_id,
                    c.name.in_(names[start : start + _IN_CHUNK]),
                    c.version.in_({v for _, v in wanted}),
                )
                for name, version, definition in conn.execute(q):
                    if (name, version) in wanted:
                        out[(name, version)] = FlowDefinition.model_validate(
                            definition, context=STORED
                        )
        return out
