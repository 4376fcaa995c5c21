"""Which flow, if any, runs for a request with no model call — and why not the others.

:func:`decide_route` takes the flows that procedural memory found for a request (its hint
candidates) and keeps the one that may run unasked. A flow may run only when all hold:

1. it is ``active`` and its record allows it (:func:`~soloflow_core.learning.may_auto_execute`:
   ``auto_execute`` on, confidence ≥ ``confidence_threshold``);
2. the request is its job (:func:`~soloflow_core.memory.intent.judge_intent` against the
   flow's evidence: the task texts of its runs and a person's confirmed phrasings; a
   user-submitted flow's own name, description and trigger keywords; requests the model
   sent to the offered flow tool, whose words count once two of them hold them; when that
   declines it, against the texts it was learned from alone, so that what the job's later
   runs add never takes back what those allowed — the other jobs' whole evidence stays
   the rivals'), or it is worded, values aside, as a request the job was done for (a run's
   text or a phrasing a person confirmed; not a hinted request) and as none another
   matched job was (:func:`~soloflow_core.memory.evidence.phrasing`);
3. every required input is bound from the request itself, its shape, type and learned
   bounds checked, not of the shape of another kind of value the namespace's flows take
   (a flight number as a reservation code), and no value of the request is left unused
   (:func:`~soloflow_core.memory.binding.bind_inputs`), and the job's own verb does not take
   as its whole object a value of an input the job's requests never act on (``cancel
   mia_li_3668 for reservation …``).

A flow's *key words* (:func:`key_words`) are the words that tell its job from the other
matching jobs; the request must hold one. When several flows pass, the same job (the same
tools that change the world, :func:`job_tools`) keeps the user-submitted flow, then the
best-scored; different jobs are ambiguous and none runs. Every flow's verdict and
reasons are kept (:class:`RouteDecision`), for logs and ``soloflow flows route``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soloflow_core.learning.outcomes import FlowStats, may_auto_execute
from soloflow_core.memory.binding import ValueKind, bind_inputs, phrase_words, value_kinds
from soloflow_core.memory.evidence import phrasing
from soloflow_core.memory.forms import acted_values
from soloflow_core.memory.intent import (
    IntentVerdict,
    JobEvidence,
    Verdict,
    judge_intent,
    tool_actions,
)
from soloflow_core.memory.reading import ACTION_STEMS, RequestText, read_request
from soloflow_core.models import SOURCE_USER

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.memory.procedural import WorkflowMatch
    from soloflow_core.models import FlowDefinition
    from soloflow_core.store import Store
    from soloflow_core.store.flows import FlowRecord

__all__ = ["KEY_RATIO", "FlowCheck", "RouteDecision", "decide_route", "job_tools", "key_words"]


@dataclass(frozen=True, slots=True)
class FlowCheck:
    """One flow's verdict for a request."""

    name: str
    verdict: Verdict
    """``run`` (may run unasked), ``hint`` (offer it to the model) or ``none``."""
    score: float
    inputs: dict[str, Any] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()
    """Why it may not run (empty when it may)."""


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """What :func:`decide_route` decided."""

    run: str | None
    """The flow to run with no model call, or None."""
    inputs: dict[str, Any]
    """Its inputs, bound from the request."""
    checks: tuple[FlowCheck, ...]
    """Every candidate's verdict, in the order given."""
    reason: str
    """One line: why this flow, or why none."""


def _declared(flow: FlowDefinition, keywords: Sequence[str]) -> list[str]:
    return [flow.name, flow.description, *keywords, *flow.tags]


def _kinds_of(flows: list[FlowRecord]) -> list[ValueKind]:
    return value_kinds((f.flow.input_schema, f.flow.extraction) for f in flows)


def decide_route(
    store: Store,
    request: str | RequestText,
    matches: Sequence[WorkflowMatch],
    *,
    user_id: str,
    agent_id: str,
    config: LearningConfig,
    definition: Callable[[str], FlowDefinition],
    stats: Callable[[str], FlowStats],
) -> RouteDecision:
    """The flow among ``matches`` that may run for ``request`` with no model call (see the
    module docstring), with every candidate's verdict.

    Args:
        matches: procedural memory's matches for the request (best first).
        definition: a flow's definition by name.
        stats: a flow's outcome record by name.
    """
    read = request if isinstance(request, RequestText) else read_request(request)
    if not matches:
        return RouteDecision(run=None, inputs={}, checks=(), reason="no flow matches the request")
    names = [m.name for m in matches]
    texts = store.flow_evidence_sources(names, user_id=user_id, agent_id=agent_id)
    evidence: dict[str, JobEvidence] = {}
    first_runs: dict[str, tuple[list[str], list[str], bool]] = {}  # texts learned from
    for m in matches:
        user = m.source == SOURCE_USER
        declared: list[str] = []
        if user:  # a person's own words for the job
            keywords = store.get_flow_meta(
                m.name, user_id=user_id, agent_id=agent_id
            ).trigger_keywords
            declared = _declared(definition(m.name), keywords)
        pairs = texts.get(m.name, [])
        evidence[m.name] = JobEvidence.of(
            [x for x, source in pairs if source not in ("flow_tool", "person")],
            declared,
            user_submitted=user,
            hinted=[x for x, source in pairs if source == "flow_tool"],
            confirmed=[x for x, source in pairs if source == "person"],
        )
        first_runs[m.name] = ([x for x, s in pairs if s == "learned"], declared, user)
    jobs = {m.name: job_tools(definition(m.name)) for m in matches}
    checks: list[FlowCheck] = []
    runnable: list[tuple[WorkflowMatch, FlowCheck]] = []
    kinds: list[ValueKind] | None = None
    for m in matches:
        flow = definition(m.name)
        job = evidence[m.name]
        judged = _judge(m.name, job, read, evidence=evidence, jobs=jobs, flow=flow)
        learned_from, declared, user = first_runs[m.name]
        if judged.verdict != "run" and len(learned_from) < job.texts:
            # The job's evidence grows with the agent's own runs of it; that must not make
            # the gate decline what the runs the flow was learned from let run. (What other
            # jobs learn still counts: their grown evidence is the rivals'.)
            alone = JobEvidence.of(learned_from, declared, user_submitted=user)
            first = _judge(m.name, alone, read, evidence=evidence, jobs=jobs, flow=flow)
            if first.verdict == "run":
                judged, job = first, alone
        if judged.verdict != "run" and _worded_as_done(m.name, read, evidence=evidence, jobs=jobs):
            judged = IntentVerdict(verdict="run", score=1.0, known=read.terms)
        reasons = list(judged.reasons)
        inputs: dict[str, Any] = {}
        if m.status != "active":
            reasons.append(f"the flow is {m.status}")
        elif not may_auto_execute(stats(m.name), config):
            reasons.append(
                "its record does not allow running unasked (auto_execute off, "
                f"confidence below {config.confidence_threshold}, or its last "
                "executions failed)"
            )
        if judged.verdict == "run":
            if kinds is None:  # every kind of value the namespace's flows take, once
                kinds = store.derived_from_flows(_kinds_of, user_id=user_id, agent_id=agent_id)
            binding = bind_inputs(flow.input_schema, flow.extraction, read, kinds=kinds)
            reasons += binding.problems or _acts_on_another(
                read, flow=flow, inputs=binding.inputs, job=job
            )
            inputs = binding.inputs
        kind: Verdict = "run" if not reasons else ("none" if judged.verdict == "none" else "hint")
        check = FlowCheck(
            name=m.name,
            verdict=kind,
            score=judged.score,
            inputs=inputs if kind == "run" else {},
            reasons=tuple(reasons),
        )
        checks.append(check)
        if kind == "run":
            runnable.append((m, check))
    if not runnable:
        best = checks[0]
        return RouteDecision(
            run=None,
            inputs={},
            checks=tuple(checks),
            reason=f"no flow may run unasked; {best.name!r}: {'; '.join(best.reasons)}",
        )
    chosen = _choose(runnable, jobs)
    if chosen is None:
        listed = ", ".join(repr(c.name) for _, c in runnable)
        return RouteDecision(
            run=None,
            inputs={},
            checks=tuple(checks),
            reason=f"the request fits several jobs ({listed}): the model decides",
        )
    m, check = chosen
    return RouteDecision(
        run=m.name,
        inputs=check.inputs,
        checks=tuple(checks),
        reason=f"the request is {m.name!r}'s job",
    )


def _judge(
    name: str,
    job: JobEvidence,
    read: RequestText,
    *,
    evidence: dict[str, JobEvidence],
    jobs: dict[str, frozenset[str]],
    flow: FlowDefinition,
) -> IntentVerdict:
    """:func:`judge_intent` of the request for flow ``name`` against ``job`` (its evidence),
    the other matched jobs (``evidence``, every matched flow's) its rivals."""
    rivals = [evidence[o] for o in evidence if o != name and jobs[o] != jobs[name]]
    others: set[str] = set().union(*(r.common() for r in rivals)) if rivals else set()
    return judge_intent(
        job,
        read,
        keys=key_words(job, rivals),
        other_jobs=others,
        own_actions=tool_actions(jobs[name]),
        data=phrase_words(flow.input_schema, flow.extraction, read),
    )


def _worded_as_done(
    name: str,
    read: RequestText,
    *,
    evidence: dict[str, JobEvidence],
    jobs: dict[str, frozenset[str]],
) -> bool:
    """Whether the request is worded as one the job was done for (a run's text or a
    phrasing a person confirmed, values aside: :func:`~soloflow_core.memory.evidence.phrasing`)
    and as none another matched job was: the job known by enough texts, two words at least
    besides the values, the job's own action not negated."""
    job = evidence[name]
    if not job.enough or len(read.terms) < 2:
        return False
    if set(read.negated) & (tool_actions(jobs[name]) | job.familiar_actions()):
        return False  # a run the agent did though the request said not to teaches nothing
    worded = phrasing(read.text)
    rivals = (evidence[o] for o in evidence if o != name and jobs[o] != jobs[name])
    return worded in job.phrasings and not any(worded in r.phrasings for r in rivals)


KEY_RATIO = 3.0
"""A key word is held by at least this many times as large a share of the job's texts as of
any other job's."""


def key_words(job: JobEvidence, rivals: Sequence[JobEvidence]) -> frozenset[str]:
    """The words that tell ``job`` from the ``rivals`` (the other jobs a request matched):
    familiar in its texts (two of them and a tenth), and held by at least :data:`KEY_RATIO`
    times as large a share of them as of any rival's texts; a person's declared words no
    rival holds commonly.

    Example:
        >>> refund = JobEvidence.of(["refund my latest order"] * 3 + ["refund order"])
        >>> status = JobEvidence.of(["where is my order"] * 4)
        >>> sorted(key_words(refund, [status])), sorted(key_words(status, [refund]))
        (['latest', 'refund'], ['is', 'where'])
    """

    def share(e: JobEvidence, w: str) -> float:
        return e.df.get(w, 0) / e.texts if e.texts else 0.0

    floor = max(2, 0.1 * job.texts)
    keys = {
        w
        for w, n in job.df.items()
        if n >= floor
        and share(job, w) >= KEY_RATIO * max((share(r, w) for r in rivals), default=0.0)
    }
    taken = set().union(*(r.common() for r in rivals)) if rivals else set()
    return frozenset(keys | (job.declared - taken))


def _acts_on_another(
    read: RequestText, *, flow: FlowDefinition, inputs: dict[str, Any], job: JobEvidence
) -> list[str]:
    """Why the job's own verb acts on another input than the job's: a value its verb takes
    as its whole object (``cancel mia_li_3668 for reservation …``) is bound to an input the
    job's requests never name by a noun they act on (its labels: ``user``, ``account``;
    they cancel a ``reservation``)."""
    verbs = job.held_by_most() & ACTION_STEMS
    if not job.targets or not verbs:
        return []
    out: list[str] = []
    for verb, value in acted_values(read.normalized or read.text, read.values, verbs=verbs):
        for name, bound in inputs.items():
            rule = flow.extraction.get(name) or {}
            labels = rule.get("labels") or () if isinstance(rule, dict) else ()
            nouns = {t for w in labels for t in read_request(str(w)).terms}
            if str(bound) == value and nouns and not nouns & set(job.targets):
                out.append(
                    f"its action ({verb}) is done to {value!r}, the {name}: the job's "
                    f"requests {verb} a {', '.join(sorted(job.targets))}"
                )
    return out


def job_tools(flow: FlowDefinition) -> frozenset[str]:
    """What a flow *does*: the tools of its steps that may change the world (``side_effects``
    not False), or all its tools when every step is known to be read-only. Two flows do the
    same job when these are the same."""
    effects = frozenset(s.skill_key for s in flow.steps if s.side_effects is not False)
    return effects or frozenset(s.skill_key for s in flow.steps)


def _choose(
    runnable: list[tuple[WorkflowMatch, FlowCheck]], jobs: dict[str, frozenset[str]]
) -> tuple[WorkflowMatch, FlowCheck] | None:
    """One flow when the runnable ones do one job: user-submitted first, then the best score;
    None when they do different jobs."""
    first = jobs[runnable[0][0].name]
    if any(jobs[m.name] != first for m, _ in runnable[1:]):
        return None
    return min(runnable, key=lambda mc: (mc[0].source != SOURCE_USER, -mc[1].score, mc[0].name))
