"""Skill packages imported into a namespace: what each brought with it.

``soloflow skills import`` registers a package's flow as a user-submitted flow version and
keeps, beside it, the package's name and digest, the fixtures it replayed and its
provenance (:class:`SkillImport`): exporting that flow version again carries them on, and
its quality score counts the fixtures as verified occurrences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from soloflow_core.store import schema as t
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from soloflow_core.store.database import Database

__all__ = ["SkillImport", "SkillImportRepository"]


@dataclass(frozen=True, slots=True)
class SkillImport:
    """One flow version registered from a skill package."""

    flow_name: str
    flow_version: int
    """The version registered in this namespace."""
    skill_name: str
    package_digest: str
    """SHA-256 of the package's manifest: which package it was, byte for byte."""
    fixtures: list[dict[str, Any]]
    """The recorded occurrences the package carried, each replayed before registration."""
    provenance: dict[str, Any]
    """The package's provenance, with this import appended to its ``imports``."""
    imported_at: datetime


class SkillImportRepository:
    """Which flow versions were imported as skills, and where (``store.skill_imports``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record_skill_import(
        self,
        *,
        user_id: str,
        agent_id: str,
        flow_name: str,
        flow_version: int,
        skill_name: str,
        package_digest: str,
        fixtures: Sequence[dict[str, Any]],
        provenance: dict[str, Any],
    ) -> SkillImport:
        """Keep what the package of flow version ``flow_version`` brought."""
        at = now()
        with self.db.write() as conn:
            conn.execute(
                sa.insert(t.skill_imports).values(
                    user_id=user_id,
                    agent_id=agent_id,
                    flow_name=flow_name,
                    flow_version=flow_version,
                    skill_name=skill_name,
                    package_digest=package_digest,
                    fixtures=list(fixtures),
                    provenance=provenance,
                    imported_at=at,
                )
            )
        return SkillImport(
            flow_name=flow_name,
            flow_version=flow_version,
            skill_name=skill_name,
            package_digest=package_digest,
            fixtures=list(fixtures),
            provenance=provenance,
            imported_at=at,
        )

    def get_skill_import(
        self, flow_name: str, *, user_id: str, agent_id: str, version: int
    ) -> SkillImport | None:
        """What the package of the namespace's flow ``flow_name`` version ``version`` brought;
        None when that version was not imported."""
        return self.skill_imports_for([flow_name], user_id=user_id, agent_id=agent_id).get(
            (flow_name, version)
        )

    def skill_imports_for(
        self, flow_names: Sequence[str], *, user_id: str, agent_id: str
    ) -> dict[tuple[str, int], SkillImport]:
        """The imports of every version of the namespace's flows ``flow_names``, by (name, version)."""
        c = t.skill_imports.c
        names = list(dict.fromkeys(flow_names))
        out: dict[tuple[str, int], SkillImport] = {}
        with self.db.read() as conn:
            for start in range(0, len(names), 500):
                q = sa.select(
                    c.flow_name,
                    c.flow_version,
                    c.skill_name,
                    c.package_digest,
                    c.fixtures,
                    c.provenance,
                    c.imported_at,
                ).where(
                    c.user_id == user_id,
                    c.agent_id == agent_id,
                    c.flow_name.in_(names[start : start + 500]),
                )
                for row in conn.execute(q):
                    out[(row.flow_name, row.flow_version)] = SkillImport(
                        flow_name=row.flow_name,
                        flow_version=row.flow_version,
                        skill_name=row.skill_name,
                        package_digest=row.package_digest,
                        fixtures=list(row.fixtures or []),
                        provenance=dict(row.provenance or {}),
                        imported_at=row.imported_at,
                    )
        return out
