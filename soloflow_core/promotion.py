"""Promotion: a candidate approved (or a flow submitted) becomes a registered flow."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from soloflow_core.errors import SoloFlowError
from soloflow_core.flow.validate import validate_flow
from soloflow_core.models import FlowCandidate, FlowDefinition

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.store import Store

log = logging.getLogger(__name__)

SOURCE_LEARNED = "auto-learned"
SOURCE_USER = "user-submitted"


def _announce(pm: pluggy.PluginManager | None, flow: FlowDefinition) -> None:
    if pm is None or not pm.hook.soloflow_flow_promoted.get_hookimpls():
        return
    try:
        pm.hook.soloflow_flow_promoted(flow=flow)
    except Exception:  # a plugin's failure must not undo a registration already stored
        log.exception("a soloflow_flow_promoted plugin failed for flow %r", flow.name)


def approve_candidate(
    store: Store,
    candidate_id: str,
    *,
    user_id: str,
    agent_id: str,
    pm: pluggy.PluginManager | None = None,
) -> FlowDefinition:
    """Register the candidate's proposed flow and mark the candidate approved.

    Raises:
        NotFoundError: no such candidate in the namespace.
        SoloFlowError: the candidate was already rejected or approved.
        FlowValidationError: the proposed flow is invalid.
    """
    cand: FlowCandidate = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
    if cand.status != "pending":
        raise SoloFlowError(
            f"candidate {candidate_id!r} is already {cand.status}; only pending candidates "
            "can be approved (see `soloflow flows list`)"
        )
    validate_flow(cand.proposed_flow)
    flow = store.register_flow(
        cand.proposed_flow, user_id=user_id, agent_id=agent_id, source=SOURCE_LEARNED,
        candidate_id=cand.id,
    )
    store.set_candidate_status(candidate_id, "approved", user_id=user_id, agent_id=agent_id)
    _announce(pm, flow)
    return flow


def reject_candidate(store: Store, candidate_id: str, *, user_id: str, agent_id: str) -> FlowCandidate:
    """Mark a candidate rejected: its dedupe key is not proposed again."""
    cand = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
    if cand.status == "approved":
        raise SoloFlowError(f"candidate {candidate_id!r} is already approved; it cannot be rejected")
    return store.set_candidate_status(candidate_id, "rejected", user_id=user_id, agent_id=agent_id)


def submit_flow(
    store: Store,
    flow: FlowDefinition,
    *,
    user_id: str,
    agent_id: str,
    pm: pluggy.PluginManager | None = None,
) -> FlowDefinition:
    """Validate and register a user-written flow (the next version of its name)."""
    validate_flow(flow)
    registered = store.register_flow(flow, user_id=user_id, agent_id=agent_id, source=SOURCE_USER)
    _announce(pm, registered)
    return registered
