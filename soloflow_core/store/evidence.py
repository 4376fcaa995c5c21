"""The task texts each flow's job is known by (schema revision 0006, ``sf_flow_evidence``).

Routing compares a request with these texts before a flow may run without the model
(:mod:`soloflow_core.memory.intent`). A flow's evidence is, per flow *name* in a (user,
agent) namespace:

- ``learned``: the task texts of the runs its candidate was learned from (written when the
  candidate is registered);
- ``agent_run``: later agent runs that did the flow's sequence themselves and succeeded;
- ``flow_tool``: requests for which the agent's model chose to call the flow as a tool;
- ``person``: phrasings a person confirmed (``soloflow flows evidence NAME --add TEXT``).

At most :data:`MAX_EVIDENCE` later texts are kept per flow (the newest), besides the ones it
was learned from and a person's; one per run id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import sqlalchemy as sa

from soloflow_core.store import schema as t
from soloflow_core.store.json_values import storable_text
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "MAX_EVIDENCE",
    "EvidenceSource",
    "insert_evidence",
    "read_evidence",
]

EvidenceSource = Literal["learned", "agent_run", "flow_tool", "person"]
MAX_EVIDENCE = 500
"""Task texts kept per flow (the newest)."""
MAX_EVIDENCE_CHARS = 4000
"""A longer task text is kept by its first this-many characters."""


def insert_evidence(
    conn: Connection,
    name: str,
    texts: Iterable[tuple[str, str]],
    *,
    source: EvidenceSource,
    user_id: str,
    agent_id: str,
) -> int:
    """Add ``(run_id, task)`` pairs to the evidence of flow ``name``, in ``conn``'s
    transaction; a run already there is left as it is. Returns how many were added."""
    c = t.flow_evidence.c
    ns = (c.user_id == user_id, c.agent_id == agent_id, c.flow_name == name)
    wanted = {rid: task for rid, task in texts if rid and isinstance(task, str) and task.strip()}
    if not wanted:
        return 0
    have = set(conn.execute(sa.select(c.run_id).where(*ns, c.run_id.in_(list(wanted)))).scalars())
    at = now()
    rows = [
        {
            "user_id": user_id,
            "agent_id": agent_id,
            "flow_name": name,
            "run_id": rid,
            "task": storable_text(task[:MAX_EVIDENCE_CHARS]),
            "source": source,
            "added_at": at,
        }
        for rid, task in wanted.items()
        if rid not in have
    ]
    if rows:
        conn.execute(sa.insert(t.flow_evidence), rows)
        # The texts it was learned from stay; later ones are kept newest first.
        later = (*ns, c.source.not_in(("learned", "person")))
        keep = (
            sa.select(c.id)
            .where(*later)
            .order_by(c.id.desc())
            .limit(MAX_EVIDENCE)
            .scalar_subquery()
        )
        conn.execute(sa.delete(t.flow_evidence).where(*later, c.id.not_in(keep)))
    return len(rows)


def read_evidence(
    conn: Connection, names: Sequence[str], *, user_id: str, agent_id: str
) -> dict[str, list[tuple[str, str]]]:
    """Flow name → its evidence's ``(task text, source)`` pairs, newest first (every name of
    ``names`` is a key)."""
    out: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
    if not names:
        return out
    c = t.flow_evidence.c
    q = (
        sa.select(c.flow_name, c.task, c.source)
        .where(c.user_id == user_id, c.agent_id == agent_id, c.flow_name.in_(list(names)))
        .order_by(c.id.desc())
    )
    for name, task, source in conn.execute(q):
        out[name].append((task, source))
    return out
