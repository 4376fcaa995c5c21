"""Flow candidates: what the detector proposes from the ledger."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soloflow_core.models.flows import FlowDefinition
from soloflow_core.models.names import Name, check_namespace

CandidateStatus = Literal["pending", "approved", "rejected"]
MatchType = Literal["exact", "subsequence"]

DEDUPE_PREFIX = "flow_offload:"


def dedupe_key_for(tool_sequence: list[str] | tuple[str, ...]) -> str:
    """The design document's dedupe key: ``flow_offload:a→b→c``."""
    return DEDUPE_PREFIX + "→".join(tool_sequence)


def candidate_id_for(user_id: str, agent_id: str, dedupe_key: str) -> str:
    """A stable id: the same pattern in the same namespace always gets the same id, and two
    namespaces never share one: the key joins the parts with U+001F, which neither namespace
    part may hold.

    Raises:
        InvalidNameError: ``user_id`` or ``agent_id`` holds a control character.
    """
    check_namespace(user_id, agent_id)
    digest = hashlib.sha256(f"{user_id}\x1f{agent_id}\x1f{dedupe_key}".encode()).hexdigest()
    return "cand_" + digest[:12]


class FlowCandidate(BaseModel):
    """A repeated tool sequence proposed as a flow."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    user_id: Name
    agent_id: Name
    tool_sequence: list[str]
    occurrence_count: int
    """Distinct task runs that contain the sequence."""
    match_type: MatchType
    """``exact``: the whole tool sequence of at least ``min_occurrences`` runs;
    ``subsequence``: found only inside longer runs."""
    estimated_token_savings: float
    avg_cost_per_execution: float
    dedupe_key: str
    proposed_flow: FlowDefinition
    run_ids: list[str]
    savings_method: str = "design-doc: avg_run_cost * occurrences * 0.95"
    """How ``estimated_token_savings`` was computed."""
    status: CandidateStatus = "pending"
    created_at: datetime | None = None
    agent_prompt_hint: str = ""
    argument_confidence: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per step, per argument: how sure the argument-source inference is (0..1)."""
    score_bits: float | None = None
    """How many bits the pattern saves encoding the ledger when the ranking chose it (the
    ranking's score; see docs/mining.md)."""
    clean_occurrences: int | None = None
    """Occurrences with no tolerated defect (no stray call, swap or cut-short end)."""
    repeated_steps: list[int] = Field(default_factory=list)
    """0-based steps seen as a loop (the same tool several times in a row)."""
    lift: float | None = None
    """Occurrences over what the tools' frequencies alone predict."""
    tokens_saved_per_occurrence: float | None = None
    turns_saved_per_occurrence: float | None = None
    explanation: str = ""
    """Why the pattern was chosen, in words."""
    fidelity: float | None = None
    """Share of held-out occurrences whose every call (name and args) the flow reproduced
    in replay; None until verified (``soloflow flows verify``)."""
    confidence: float | None = None
    """The flow's overall argument confidence: the mean of ``argument_confidence``."""
    divergences: list[dict[str, Any]] = Field(default_factory=list)
    """Calls that diverged in replay (held-out run, step, tool, expected vs. made), for the
    person who decides when fidelity is below the promotion threshold."""
    verified_at: datetime | None = None
    held_out: int | None = None
    """How many held-out occurrences the replay ran (automatic promotion needs at least 3);
    None until verified."""
    arguments_from_recording: int | None = None
    """Arguments the replay took from the recording (free inputs, given as a caller would)."""
    arguments_derived: int | None = None
    """Arguments the replay derived itself: constants, upstream outputs, the task text."""
    verification_note: str = ""
    """How the candidate was verified (occurrences used, held out) or why it could not be."""
