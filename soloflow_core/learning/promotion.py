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


DEFAULT_PROMOTION_THRESHOLD = 0.9
"""Automatic promotion needs at least this replay fidelity (``soloflow flows verify``)."""


def describe_divergences(cand: FlowCandidate, limit: int = 5) -> str:
    """The calls that diverged in replay, one per line, for the person who decides."""
    lines = []
    for d in cand.divergences[:limit]:
        where = f"{d.get('occurrence')}: {d.get('step') or '-'} {d.get('tool') or ''}".rstrip()
        if d.get("kind") == "unexpected":
            lines.append(f"{where}: made {d.get('made')!r}, recorded {d.get('expected')!r}")
        elif d.get("kind") == "missing":
            lines.append(f"{where}: recorded call {d.get('expected')!r} was not made")
        else:
            lines.append(f"{where}: {d.get('message')}")
    more = len(cand.divergences) - limit
    return "\n".join(lines + ([f"... and {more} more"] if more > 0 else []))


def auto_promote_candidate(
    store: Store,
    candidate_id: str,
    *,
    user_id: str,
    agent_id: str,
    threshold: float = DEFAULT_PROMOTION_THRESHOLD,
    pm: pluggy.PluginManager | None = None,
) -> FlowDefinition:
    """Promote a candidate without a person, only if its replay fidelity ≥ ``threshold``.

    Raises:
        SoloFlowError: not verified yet, or below the threshold (the message lists the
            calls that diverged, for a person to approve or reject it instead).
    """
    if not 0.0 <= threshold <= 1.0:
        raise SoloFlowError(f"promotion threshold must be within [0, 1], got {threshold!r}")
    cand = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
    if cand.fidelity is None:
        raise SoloFlowError(
            f"candidate {candidate_id!r} has no replay fidelity "
            f"({cand.verification_note or 'not verified'}); run `soloflow flows verify "
            f"{candidate_id}` first, or have a person approve it with `soloflow flows approve`")
    if cand.fidelity < threshold:
        raise SoloFlowError(
            f"candidate {candidate_id!r} reproduced {cand.fidelity:.0%} of held-out occurrences, "
            f"below the automatic-promotion threshold {threshold:.0%}; a person must approve "
            f"(`soloflow flows approve {candidate_id}`) or reject it. Calls that diverged:\n"
            + describe_divergences(cand))
    return approve_candidate(store, candidate_id, user_id=user_id, agent_id=agent_id, pm=pm)


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
