"""Procedural memory: which stored flow fits a task, and flows a person submits.

:meth:`ProceduralMemory.find_workflow` is the lookup the design document calls
``findWorkflow(userId, agentId, context)``; :meth:`ProceduralMemory.submit_workflow` is its
``submitUserWorkflow``. Both work inside one (user, agent) namespace; see ``docs/memory.md``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from soloflow_core.errors import FlowValidationError, PluginError
from soloflow_core.flow.loader import validate_flow_file
from soloflow_core.flow.validate import validate_flow
from soloflow_core.memory.by_evidence import find_by_evidence
from soloflow_core.models import SOURCE_LEARNED, SOURCE_USER, FlowDefinition
from soloflow_core.plugins import call_hook
from soloflow_core.store.fulltext import identifiers, phrase_terms, scan_window, tokenize, top_terms
from soloflow_core.store.procedural import USER_CONFIDENCE, check_trigger_keywords

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.store import Store
    from soloflow_core.store.flow_lookup import LookupCandidate
    from soloflow_core.store.procedural import FlowMeta

__all__ = ["DEFAULT_MIN_CONFIDENCE", "ProceduralMemory", "WorkflowMatch"]

log = logging.getLogger(__name__)

DEFAULT_MIN_CONFIDENCE = 0.5
"""Flows below this confidence are not returned: their record says they fail as often as
they work. (The design document recalls at 0.7 and auto-suggests at 0.8; pass those to be
stricter — whether to run a match unasked is :mod:`soloflow_core.learning`'s call.)"""
TEXT_WEIGHT, TOOL_WEIGHT, CONFIDENCE_WEIGHT = 0.7, 0.2, 0.1
"""How :attr:`WorkflowMatch.score` combines text, tool-signature match and confidence."""
RANK_WEIGHT, KEYWORD_WEIGHT, ORDER_WEIGHT = 0.45, 0.45, 0.1
"""How :attr:`WorkflowMatch.text_score` combines the relative text rank, the share of
trigger keywords found and the share of the name's word pairs found in order."""
ORDER_WINDOW = 2
"""Two words of a flow's name at most this far apart make a pair; the context holds the pair
when the first comes before the second, at most this many terms later."""
_CANDIDATES = 50
"""Flows read from the index per lookup (at least; ``8 × limit`` when larger), best text
rank first, before ranking."""


@dataclass(frozen=True, slots=True)
class WorkflowMatch:
    """A stored flow that fits the context, and why."""

    name: str
    version: int
    source: str
    """``auto-learned`` or ``user-submitted``."""
    status: str
    """``active`` or ``suggestion_only`` (retired flows are never returned)."""
    confidence: float
    score: float
    """``0.7 × text + 0.2 × tools + 0.1 × confidence``, in [0, 1]."""
    text_score: float
    """``0.45 × rank + 0.45 × keywords + 0.1 × order``: the text rank relative to the best
    candidate's, the share of the flow's trigger keywords found in the context, and the share
    of the word pairs of its name (at most :data:`ORDER_WINDOW` apart) that the context holds
    in the same order as near (a one-word name: whether the context holds it). The text rank is the
    sum of the inverse document frequencies
    (in the namespace) of the context's terms the flow's index holds."""
    tool_score: float
    """Share of the flow's tools (``skill_key``s) named in the context."""
    matched_keywords: tuple[str, ...]
    matched_terms: tuple[str, ...]
    """The context's terms the flow's index holds."""
    matched_tools: tuple[str, ...]
    missing_tools: tuple[str, ...] = ()
    """Tools the flow calls that are not in ``available_tools`` (only with
    ``include_unavailable=True``; otherwise such flows are left out)."""
    outranks: tuple[str, ...] = ()
    """Auto-learned flows placed below this user-submitted one by the precedence rule."""
    skill_keys: tuple[str, ...] = ()
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(slots=True, eq=False)
class _Scored:
    flow: LookupCandidate
    score: float
    text: float
    tools: float
    keywords: list[str]
    keyword_terms: frozenset[str]
    terms: list[str]
    tools_named: list[str]
    missing: list[str]
    outranks: list[str] = field(default_factory=list)


def ordered_pairs(tokens: Sequence[str], window: int = ORDER_WINDOW) -> set[tuple[str, str]]:
    """The pairs of different terms of ``tokens`` (in order) whose second comes after the
    first, at most ``window`` terms later.

    Example:
        >>> sorted(ordered_pairs(["refund", "damaged", "order"], 1))
        [('damaged', 'order'), ('refund', 'damaged')]
    """
    return {(a, b) for i, a in enumerate(tokens) for b in tokens[i + 1 : i + 1 + window] if a != b}


@lru_cache(maxsize=65_536)
def _name_pairs(name: str) -> frozenset[tuple[str, str]]:
    return frozenset(ordered_pairs(phrase_terms(name)))


def _order_share(name: str, pairs: set[tuple[str, str]], query: set[str]) -> float:
    """The share of the word pairs of ``name`` (see :data:`ORDER_WINDOW`) found in ``pairs``;
    for a name of one term, whether the context holds it."""
    own = _name_pairs(name)
    if own:
        return len(own & pairs) / len(own)
    return 1.0 if query.issuperset(phrase_terms(name)) and phrase_terms(name) else 0.0


def _score(
    flow: LookupCandidate,
    best_rank: float,
    query: set[str],
    *,
    named: set[str],
    available: set[str] | None,
    said: dict[str, bool],
    pairs: set[tuple[str, str]],
) -> _Scored:
    """``said`` memoizes, for one lookup, whether the context holds every term of a keyword."""
    keywords = []
    for k in flow.trigger_keywords:
        found = said.get(k)
        if found is None:
            found = said[k] = bool(ts := phrase_terms(k)) and query.issuperset(ts)
        if found:
            keywords.append(k)
    coverage = len(keywords) / len(flow.trigger_keywords) if flow.trigger_keywords else 0.0
    relative = flow.rank / best_rank if best_rank > 0 else 1.0
    text = (
        RANK_WEIGHT * min(max(relative, 0.0), 1.0)
        + KEYWORD_WEIGHT * coverage
        + ORDER_WEIGHT * _order_share(flow.name, pairs, query)
    )
    tools_named = [k for k in flow.skill_keys if k.lower() in named]
    tools = len(tools_named) / len(flow.skill_keys) if flow.skill_keys else 0.0
    missing = [] if available is None else [k for k in flow.skill_keys if k not in available]
    score = TEXT_WEIGHT * text + TOOL_WEIGHT * tools + CONFIDENCE_WEIGHT * flow.confidence
    return _Scored(
        flow=flow,
        score=round(score, 6),
        text=round(text, 6),
        tools=round(tools, 6),
        keywords=keywords,
        keyword_terms=frozenset(chain.from_iterable(map(phrase_terms, keywords))),
        terms=sorted(flow.terms),
        tools_named=tools_named,
        missing=missing,
    )


def same_job(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two flows' tools (``skill_keys``) are the same set: the same job, done the same
    way (a refund and a shipment notice that share their look-ups are two jobs).

    Example:
        >>> same_job(["find", "send"], ["send", "find"]), same_job(["find", "send"], ["find", "refund"])
        (True, False)
    """
    return bool(a) and set(a) == set(b)


def _covers(user: _Scored, learned: _Scored) -> bool:
    """Whether a user-submitted flow is for a learned flow's job: they use the same tools
    (:func:`same_job`), or the user flow answers every trigger of the learned one that the
    context holds."""
    if same_job(user.flow.skill_keys, learned.flow.skill_keys):
        return True
    return bool(learned.keyword_terms) and learned.keyword_terms <= user.keyword_terms


def _rank_with_precedence(scored: list[_Scored]) -> list[_Scored]:
    """By score (ties by name), then each user-submitted flow, best first, moves just above
    the highest-placed auto-learned flow it covers (see :meth:`ProceduralMemory.find_workflow`)."""
    order = sorted(scored, key=lambda s: (-s.score, s.flow.name))
    for user in [s for s in order if s.flow.source == SOURCE_USER]:
        here = order.index(user)
        covered = [
            i
            for i, s in enumerate(order[:here])
            if s.flow.source == SOURCE_LEARNED and _covers(user, s)
        ]
        if covered:
            user.outranks = [order[i].flow.name for i in covered]
            order.insert(covered[0], order.pop(here))
    return order


def _why(s: _Scored) -> str:
    parts = []
    if s.keywords:
        parts.append("keywords " + ", ".join(s.keywords))
    if s.terms:
        parts.append("text " + ", ".join(s.terms[:12]) + (" …" if len(s.terms) > 12 else ""))
    if s.tools_named:
        parts.append("tools named " + ", ".join(s.tools_named))
    parts.append(f"confidence {s.flow.confidence:.2f}")
    if s.outranks:
        parts.append("user-submitted, ranked above learned " + ", ".join(s.outranks))
    if s.missing:
        parts.append("missing tools " + ", ".join(s.missing))
    return "; ".join(parts)


def _match(s: _Scored) -> WorkflowMatch:
    meta = s.flow
    return WorkflowMatch(
        name=meta.name,
        version=meta.version,
        source=meta.source,
        status=meta.status,
        confidence=meta.confidence,
        score=s.score,
        text_score=s.text,
        tool_score=s.tools,
        matched_keywords=tuple(s.keywords),
        matched_terms=tuple(s.terms),
        matched_tools=tuple(s.tools_named),
        missing_tools=tuple(s.missing),
        outranks=tuple(s.outranks),
        skill_keys=meta.skill_keys,
        why=_why(s),
    )


def _loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _definition(flow: FlowDefinition | Mapping[str, Any]) -> FlowDefinition:
    if isinstance(flow, FlowDefinition):
        return flow
    try:
        return FlowDefinition.model_validate(flow)
    except ValidationError as exc:
        problems: list[tuple[str | None, str | None, str]] = [
            (None, _loc(e["loc"]) or None, e["msg"]) for e in exc.errors()
        ]
        name = flow.get("name") if isinstance(flow.get("name"), str) else None
        lines = [f"{p or '(flow)'}: {m}" for _, p, m in problems]
        head = "invalid flow" if len(lines) == 1 else f"invalid flow ({len(lines)} problems)"
        raise FlowValidationError(
            (f"flow {name!r}: " if name else "") + head + ":\n  " + "\n  ".join(lines),
            flow=name,
            field=problems[0][1],
            problems=problems,
        ) from None


class ProceduralMemory:
    """Stored flows as procedural memory: find the one for a task, submit your own.

    Example:
        >>> memory = ProceduralMemory(Store.open("sqlite:///sf.db"))
        >>> memory.submit_workflow("alice", "bot", "refund.yaml", trigger_keywords=["refund"])
        >>> [m.name for m in memory.find_workflow("alice", "bot", "Refund order 1234, please")]
        ['Refund order']
    """

    def __init__(self, store: Store, *, pm: pluggy.PluginManager | None = None) -> None:
        self.store = store
        self.pm = pm

    def find_workflow(
        self,
        user_id: str,
        agent_id: str,
        context: str,
        *,
        available_tools: Collection[str] | None = None,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        limit: int = 5,
        include_unavailable: bool = False,
        by_evidence: bool = True,
    ) -> list[WorkflowMatch]:
        """The namespace's flows that fit ``context`` (a task, or a whole conversation), best
        first. Never raises on odd text: empty, any language, 1 MB, query-syntax look-alikes.

        Candidates are the latest, non-retired versions with confidence ≥ ``min_confidence``
        whose index holds any term of the context (words; bigrams for scripts without
        spaces; a context longer than 64 KiB is read by its first and last 32 KiB): the 50
        (or ``8 × limit``) best by text rank — the sum of the namespace's BM25 inverse
        document frequencies of the context's terms they hold, ranked in the process's
        lookup index, one statement per lookup
        (:meth:`~soloflow_core.store.Store.find_flow_candidates`). Each is scored
        ``0.7 × text + 0.2 × tools + 0.1 × confidence`` (see :class:`WorkflowMatch`).

        Precedence of user-submitted flows, by rule: a user-submitted flow U that matches is
        ranked above every auto-learned flow L for the same job, whatever their scores —
        the same job when they use the same tools (:func:`same_job`), or when ``T(L)`` is non-empty and
        ``T(L) ⊆ T(U)``, ``T(F)`` being the terms of F's trigger keywords the context
        contains in full (U answers every trigger of L the context holds). Otherwise the
        order is by score, ties by name. ``score`` is reported before this reordering.

        When the index finds no flow, and ``by_evidence``, the flows whose jobs were asked
        in the context's words are the matches
        (:func:`~soloflow_core.memory.by_evidence.find_by_evidence`: two words the job's
        requests hold, one of them common in them).

        Args:
            available_tools: the agent's tools. When given, a flow calling any other tool is
                left out, or, with ``include_unavailable``, returned with ``missing_tools``.
            min_confidence: leave out flows below it.
            limit: at most this many matches.
            by_evidence: look at the jobs' requests when the index finds nothing.
        """
        if limit <= 0 or not isinstance(context, str):
            return []
        tokens = tokenize(scan_window(context))
        terms = top_terms(tokens)
        found = (
            self.store.find_flow_candidates(
                terms,
                user_id=user_id,
                agent_id=agent_id,
                min_confidence=min_confidence,
                limit=max(_CANDIDATES, 8 * limit),
            )
            if terms
            else []
        )
        if not found:
            if not by_evidence:
                return []
            return find_by_evidence(
                self.store,
                context,
                user_id=user_id,
                agent_id=agent_id,
                available_tools=available_tools,
                min_confidence=min_confidence,
                limit=limit,
                include_unavailable=include_unavailable,
            )
        available = None if available_tools is None else set(available_tools)
        named = identifiers(context)
        best = max(f.rank for f in found)
        query = set(terms)
        said: dict[str, bool] = {}
        pairs = ordered_pairs([t for t in tokens if t in query])
        scored = [
            _score(f, best, query, named=named, available=available, said=said, pairs=pairs)
            for f in found
        ]
        if not include_unavailable:
            scored = [s for s in scored if not s.missing]
        return [_match(s) for s in _rank_with_precedence(scored)[:limit]]

    async def afind_workflow(
        self,
        user_id: str,
        agent_id: str,
        context: str,
        *,
        available_tools: Collection[str] | None = None,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        limit: int = 5,
        include_unavailable: bool = False,
        by_evidence: bool = True,
    ) -> list[WorkflowMatch]:
        return await asyncio.to_thread(
            self.find_workflow,
            user_id,
            agent_id,
            context,
            available_tools=available_tools,
            min_confidence=min_confidence,
            limit=limit,
            include_unavailable=include_unavailable,
            by_evidence=by_evidence,
        )

    def submit_workflow(
        self,
        user_id: str,
        agent_id: str,
        flow: FlowDefinition | Mapping[str, Any] | str | os.PathLike[str],
        *,
        trigger_keywords: Sequence[str] | None = None,
        confidence: float = USER_CONFIDENCE,
        executors: Collection[str] | None = None,
    ) -> FlowDefinition:
        """Validate a person's flow and store it as the next version of its name, source
        ``user-submitted``. ``flow`` is a definition, its fields (a mapping), or the path of
        a JSON or YAML flow file. Keywords default to the derived ones (tags, name,
        description, step names, tools).

        Raises:
            FlowValidationError: the flow is malformed (every problem with its field path,
                ``steps[1].skill_key``), its DAG or templates are invalid, a ``skill_key`` is
                not in ``executors`` (when given), or the keywords or confidence are invalid.
                ``FlowFileError`` (a subclass) for a file: with lines and columns. Nothing is
                stored then.
        """
        if isinstance(flow, str | os.PathLike):
            definition, _ = validate_flow_file(Path(flow), executors=executors)
        else:
            definition = _definition(flow)
            validate_flow(definition, executors=executors)
        keywords = None if trigger_keywords is None else check_trigger_keywords(trigger_keywords)
        registered = self.store.add_flow_version(
            definition,
            user_id=user_id,
            agent_id=agent_id,
            source=SOURCE_USER,
            confidence=confidence,
            trigger_keywords=keywords,
        )
        self._announce(registered)
        return registered

    async def asubmit_workflow(
        self,
        user_id: str,
        agent_id: str,
        flow: FlowDefinition | Mapping[str, Any] | str | os.PathLike[str],
        *,
        trigger_keywords: Sequence[str] | None = None,
        confidence: float = USER_CONFIDENCE,
        executors: Collection[str] | None = None,
    ) -> FlowDefinition:
        return await asyncio.to_thread(
            self.submit_workflow,
            user_id,
            agent_id,
            flow,
            trigger_keywords=trigger_keywords,
            confidence=confidence,
            executors=executors,
        )

    def versions(self, user_id: str, agent_id: str, name: str) -> list[FlowMeta]:
        """Every stored version of a flow, newest first (``NotFoundError`` when none)."""
        return self.store.list_flow_versions(name, user_id=user_id, agent_id=agent_id)

    def _announce(self, flow: FlowDefinition) -> None:
        if self.pm is None or not self.pm.hook.soloflow_flow_promoted.get_hookimpls():
            return
        try:
            call_hook(self.pm, "soloflow_flow_promoted", flow=flow)
        except PluginError:  # strict mode: a plugin's failure is fatal
            raise
        except Exception:  # a plugin's failure must not undo a registration already stored
            log.exception("a soloflow_flow_promoted plugin failed for flow %r", flow.name)
