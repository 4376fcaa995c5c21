"""Promotion: a candidate approved (or a flow submitted) becomes a registered flow.

- :func:`approve_candidate` — a person's yes: the flow starts from the approval prior
  (:func:`~soloflow_core.learning.outcomes.initial_stats` with ``approved=True``), whatever
  the replay measured.
- :func:`auto_promote_candidate` — no person: only with a replay fidelity ≥ the threshold
  over at least :data:`~soloflow_core.learning.outcomes.MIN_HELD_OUT` held-out occurrences;
  the flow starts from its fidelity prior.
- :func:`submit_flow` — a flow a person wrote (``user-submitted``).

A learned flow is registered only when it fits ``max_workflows_per_agent``
(:mod:`~soloflow_core.learning.capacity`): learned flows are evicted (deleted) first to
make room; when only user-submitted flows fill the namespace the promotion is refused.
Reference: ``docs/learning.md``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from soloflow_core.errors import PluginError, SoloFlowError
from soloflow_core.flow.validate import validate_flow
from soloflow_core.generalize.flow_calls import flow_occurrences
from soloflow_core.generalize.reply import learn_flow_reply
from soloflow_core.learning.capacity import FlowUsage, make_room_for_learned_flow
from soloflow_core.learning.config import LearningConfig
from soloflow_core.learning.outcomes import (
    DEFAULT_PROMOTION_THRESHOLD,
    MIN_HELD_OUT,
    FlowStats,
    initial_stats,
)
from soloflow_core.learning.records import seed_evidence
from soloflow_core.models import SOURCE_LEARNED, SOURCE_USER, FlowCandidate, FlowDefinition
from soloflow_core.plugins import call_hook

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.store import Store

__all__ = [
    "approve_candidate",
    "auto_promote_candidate",
    "describe_divergences",
    "reject_candidate",
    "submit_flow",
    "with_learned_reply",
]

log = logging.getLogger(__name__)


def _announce(pm: pluggy.PluginManager | None, flow: FlowDefinition) -> None:
    if pm is None or not pm.hook.soloflow_flow_promoted.get_hookimpls():
        return
    try:
        call_hook(pm, "soloflow_flow_promoted", flow=flow)
    except PluginError:  # strict mode: a plugin's failure is fatal
        raise
    except Exception:  # a plugin's failure must not undo a registration already stored
        log.exception("a soloflow_flow_promoted plugin failed for flow %r", flow.name)


def _make_room(
    store: Store, name: str, user_id: str, agent_id: str, config: LearningConfig
) -> None:
    """Evict learned flows so that one more fits ``max_workflows_per_agent``.

    Raises:
        SoloFlowError: only user-submitted flows fill the namespace.
    """
    metas = store.list_flow_meta(user_id=user_id, agent_id=agent_id)
    others = [m for m in metas if m.name != name]  # a new version of a stored flow adds none
    if len(others) < len(metas) or len(others) + 1 <= config.max_workflows_per_agent:
        return
    usage = [
        FlowUsage(
            flow_id=m.name,
            source=m.source,
            registered_at=m.created_at,
            stats=FlowStats.model_validate(
                {
                    "success_count": m.success_count,
                    "total_executions": m.total_executions,
                    "status": m.status,
                    "confidence": m.confidence,
                    "last_executed_at": m.last_used,
                }
            ),
        )
        for m in others
    ]
    decision = make_room_for_learned_flow(usage, config)
    if not decision:
        raise SoloFlowError(f"flow {name!r} not registered: {decision.reason}")
    for evicted in decision.evict:
        store.delete_flow(evicted, user_id=user_id, agent_id=agent_id)
        log.warning("SoloFlow: evicted learned flow %r to make room (%s)", evicted, decision.reason)


_REPLY_RUNS = 20
"""Runs of a candidate read to learn its flow's reply template."""


def with_learned_reply(store: Store, cand: FlowCandidate) -> FlowDefinition:
    """The candidate's flow, with a reply template learned from the agent's final answers in
    its runs (:func:`~soloflow_core.generalize.reply.learn_flow_reply`) unless it has one or
    no template writes them all. The runs are aligned with the flow's steps as replay
    verification aligns them (:func:`~soloflow_core.generalize.flow_calls.flow_occurrences`)."""
    flow = cand.proposed_flow
    if flow.reply_template is not None:
        return flow
    runs = store.load_runs(cand.run_ids[:_REPLY_RUNS], user_id=cand.user_id, agent_id=cand.agent_id)
    answers = {r.run_id: r.answer for r in runs}
    # The calls replay verification judged: each step's run of calls of its tool, less the
    # agent's own calls of that tool (soloflow_core.generalize.flow_calls).
    found, _ = flow_occurrences(runs, flow, tool_sequence=cand.tool_sequence)
    template = learn_flow_reply(flow, [o for _, o in found], [answers.get(rid) for rid, _ in found])
    return flow if template is None else flow.model_copy(update={"reply_template": template})


def _register_learned(
    store: Store,
    cand: FlowCandidate,
    stats: FlowStats,
    *,
    config: LearningConfig,
    pm: pluggy.PluginManager | None,
) -> FlowDefinition:
    proposed = with_learned_reply(store, cand)
    validate_flow(proposed)
    user_id, agent_id = cand.user_id, cand.agent_id
    _make_room(store, proposed.name, user_id=user_id, agent_id=agent_id, config=config)
    flow = store.add_flow_version(
        proposed,
        user_id=user_id,
        agent_id=agent_id,
        source=SOURCE_LEARNED,
        candidate_id=cand.id,
        confidence=stats.confidence,
    )
    store.update_flow_meta(
        flow.name, user_id=user_id, agent_id=agent_id, learning=stats.learning_state()
    )
    seed_evidence(store, flow, user_id=user_id, agent_id=agent_id)
    store.set_candidate_status(cand.id, "approved", user_id=user_id, agent_id=agent_id)
    _announce(pm, flow)
    return flow


def _pending(store: Store, candidate_id: str, user_id: str, agent_id: str) -> FlowCandidate:
    cand: FlowCandidate = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
    if cand.status != "pending":
        raise SoloFlowError(
            f"candidate {candidate_id!r} is already {cand.status}; only pending candidates "
            "can be approved (see `soloflow flows list`)"
        )
    return cand


def approve_candidate(
    store: Store,
    candidate_id: str,
    *,
    user_id: str,
    agent_id: str,
    pm: pluggy.PluginManager | None = None,
    config: LearningConfig | None = None,
) -> FlowDefinition:
    """A person approves: register the candidate's flow, starting from the approval prior,
    and mark the candidate approved.

    Raises:
        NotFoundError: no such candidate in the namespace.
        SoloFlowError: the candidate was already rejected or approved, or there is no room
            (``max_workflows_per_agent``, only user-submitted flows stored).
        FlowValidationError: the proposed flow is invalid.
    """
    cand = _pending(store, candidate_id, user_id=user_id, agent_id=agent_id)
    return _register_learned(
        store, cand, initial_stats(approved=True), config=config or LearningConfig(), pm=pm
    )


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
    config: LearningConfig | None = None,
) -> FlowDefinition:
    """Promote a candidate without a person: only if its replay reproduced ≥ ``threshold``
    of at least :data:`MIN_HELD_OUT` held-out occurrences. The flow starts from its
    fidelity prior (the held-out replays count as that many executions).

    Raises:
        SoloFlowError: not verified, too few held-out occurrences, or below the threshold
            (the message lists the calls that diverged, for a person to approve or reject
            it instead).
    """
    if not 0.0 <= threshold <= 1.0:
        raise SoloFlowError(f"promotion threshold must be within [0, 1], got {threshold!r}")
    cand = _pending(store, candidate_id, user_id=user_id, agent_id=agent_id)
    if cand.fidelity is None:
        raise SoloFlowError(
            f"candidate {candidate_id!r} has no replay fidelity "
            f"({cand.verification_note or 'not verified'}); run `soloflow flows verify "
            f"{candidate_id}` first, or have a person approve it with `soloflow flows approve`"
        )
    held = cand.held_out or 0
    if held < MIN_HELD_OUT:
        raise SoloFlowError(
            f"candidate {candidate_id!r} was replayed on {held} held-out occurrence(s); automatic "
            f"promotion needs at least {MIN_HELD_OUT} (ingest more runs of it, or have a person "
            f"approve it: `soloflow flows approve {candidate_id}`)"
        )
    if cand.fidelity < threshold:
        raise SoloFlowError(
            f"candidate {candidate_id!r} reproduced {cand.fidelity:.0%} of held-out occurrences, "
            f"below the automatic-promotion threshold {threshold:.0%}; a person must approve "
            f"(`soloflow flows approve {candidate_id}`) or reject it. Calls that diverged:\n"
            + describe_divergences(cand)
        )
    stats = initial_stats(fidelity=cand.fidelity, weight=float(held))
    return _register_learned(store, cand, stats, config=config or LearningConfig(), pm=pm)


def reject_candidate(
    store: Store, candidate_id: str, *, user_id: str, agent_id: str
) -> FlowCandidate:
    """Mark a candidate rejected: its dedupe key is not proposed again."""
    cand = store.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)
    if cand.status == "approved":
        raise SoloFlowError(
            f"candidate {candidate_id!r} is already approved; it cannot be rejected"
        )
    return store.set_candidate_status(candidate_id, "rejected", user_id=user_id, agent_id=agent_id)


def submit_flow(
    store: Store,
    flow: FlowDefinition,
    *,
    user_id: str,
    agent_id: str,
    pm: pluggy.PluginManager | None = None,
) -> FlowDefinition:
    """Validate and register a user-written flow (the next version of its name), starting
    from a person's prior (:func:`initial_stats` with ``user_submitted=True``)."""
    validate_flow(flow)
    stats = initial_stats(user_submitted=True)
    registered = store.add_flow_version(
        flow, user_id=user_id, agent_id=agent_id, source=SOURCE_USER, confidence=stats.confidence
    )
    store.update_flow_meta(
        registered.name, user_id=user_id, agent_id=agent_id, learning=stats.learning_state()
    )
    seed_evidence(store, registered, user_id=user_id, agent_id=agent_id)
    _announce(pm, registered)
    return registered
