"""Procedural memory in the store: flow versions, their record, and their full-text index.

Each row of ``sf_flows`` is one version of a flow in a (user, agent) namespace. Next to the
definition it keeps what procedural memory needs (schema revision 0003):

- ``is_latest``: the version in use (exactly one per name); only it is searched;
- ``source`` (``auto-learned`` | ``user-submitted``), ``status`` (``active`` |
  ``suggestion_only`` | ``retired``; :mod:`soloflow_core.learning` decides it), ``confidence``
  (0..1), ``success_count``, ``total_executions``, ``last_used``, ``learning`` (JSON state of
  the outcome rules: priors, streaks);
- ``trigger_keywords``: given, or derived (:func:`derive_trigger_keywords`);
- ``skill_keys``: the tools the flow calls; ``search_text``: what the full-text index holds.

Each version has its own record: a new version starts at zero executions. Every method takes
the caller's namespace and never reads another's rows (on SQLite the FTS5 query itself is
restricted to the namespace's token; the lookup's in-process indexes are kept per namespace
and its statements filter on the caller's user and agent).

A lookup (:meth:`~soloflow_core.store.flows.FlowRepository.find_flow_candidates`, in
:mod:`~soloflow_core.store.flow_lookup`) ranks the namespace's latest versions in process
(:func:`~soloflow_core.store.flow_lookup.load_flow_index` reads them into an
:class:`~soloflow_core.store.inverted_index.InvertedIndex`) and reads only the best ones' changing
fields, with the namespace's change counter, in one statement. Every write that changes what
the index holds — a new version (``is_latest`` moves), new trigger keywords, a reindex —
goes through :data:`FLOW_SEARCH`, which raises the counter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

import sqlalchemy as sa

from soloflow_core.errors import FlowValidationError
from soloflow_core.models.flows import SOURCE_USER
from soloflow_core.models.names import STORED, check_name, check_namespace, find_nul
from soloflow_core.store import schema as t
from soloflow_core.store.evidence import MAX_EVIDENCE, insert_evidence
from soloflow_core.store.flow_lookup import FLOW_SEARCH
from soloflow_core.store.fulltext import (
    index_text,
    namespace_token,
    phrase_terms,
    remove_values,
    search_terms,
    stem,
    words,
)
from soloflow_core.store.json_values import storable_text
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from soloflow_core.models import FlowDefinition

FlowStatus = Literal["active", "suggestion_only", "retired"]
FLOW_STATUSES: tuple[str, ...] = get_args(FlowStatus)
DEFAULT_CONFIDENCE = 0.5
"""A learned flow's confidence when its candidate has no replay fidelity (Beta(1, 1)'s mean)."""
USER_CONFIDENCE = 1.0
"""A user-submitted flow's confidence unless given: the person vouches for it."""
MAX_KEYWORDS = 64
MAX_DERIVED_KEYWORDS = 24
MAX_TASK_KEYWORDS = 12
_TASK_RUNS_READ = 50

_BOILERPLATE = frozenset(
    stem(w) for w in ("auto", "generated", "observed", "repetitions", "flow", "offload", "notes")
)
"""Words the generaliser writes into every learned flow's name, description and tags: they
trigger nothing."""
_BOILERPLATE_TAGS = frozenset({"auto-generated", "flow-offload"})


@dataclass(frozen=True, slots=True)
class FlowMeta:
    """One stored flow version's procedural-memory record (its definition: ``get_flow``)."""

    name: str
    version: int
    source: str
    status: str
    confidence: float
    success_count: int
    total_executions: int
    trigger_keywords: tuple[str, ...]
    skill_keys: tuple[str, ...]
    is_latest: bool
    created_at: datetime
    last_used: datetime | None
    candidate_id: str | None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["trigger_keywords"], d["skill_keys"] = list(self.trigger_keywords), list(self.skill_keys)
        return d


@dataclass(frozen=True, slots=True)
class FlowHit:
    """A flow version found by :meth:`~soloflow_core.store.flows.FlowRepository.search_flows`."""

    meta: FlowMeta
    rank: float
    """The database's text rank (BM25 on SQLite, ``ts_rank`` on PostgreSQL): higher is
    better, comparable only within one search."""
    terms: frozenset[str]
    """The terms its index holds."""


# ---------------------------------------------------------------------- keywords and text


def _distinct_words(texts: Iterable[str]) -> list[str]:
    """The words of ``texts`` as written, one per stem, boilerplate and numbers left out."""
    seen: dict[str, str] = {}
    for text in texts:
        for w in words(text):
            s = stem(w)
            if s not in seen and s not in _BOILERPLATE and not w.isdigit():
                seen[s] = w
    return list(seen.values())


def derive_trigger_keywords(
    flow: FlowDefinition, task_keywords: Sequence[str] = (), *, learned: bool = False
) -> list[str]:
    """A flow's trigger keywords when none are given: its tags, then the words of its name,
    description, step names and tools (the generaliser's boilerplate left out), after
    ``task_keywords`` (the words shared by the tasks a learned flow came from); at most
    :data:`MAX_DERIVED_KEYWORDS`. A ``learned`` flow's description is the generaliser's
    (its notes on arguments): it gives no keyword.

    Example:
        >>> derive_trigger_keywords(FlowDefinition(name="Refund order", tags=["billing"],
        ...     steps=[FlowStep(id="s", skill_key="find_order")]))
        ['billing', 'refund', 'order', 'find']
    """
    tags = [
        tag.strip() for tag in flow.tags if tag.strip() and tag.strip() not in _BOILERPLATE_TAGS
    ]
    described = [] if learned else [flow.description]
    words = _distinct_words(
        [flow.name, *described, *(s.name for s in flow.steps), *(s.skill_key for s in flow.steps)]
    )
    return _distinct_keywords([*task_keywords, *tags, *words])[:MAX_DERIVED_KEYWORDS]


def _distinct_keywords(keywords: Iterable[str]) -> list[str]:
    """Stripped, non-empty, one per set of terms (the first spelling kept)."""
    seen: set[tuple[str, ...]] = set()
    out: list[str] = []
    for keyword in keywords:
        keyword = storable_text(keyword.strip())
        key = tuple(sorted(phrase_terms(keyword)))
        if keyword and key and key not in seen:
            seen.add(key)
            out.append(keyword)
    return out


def check_trigger_keywords(keywords: Any) -> list[str]:
    """``keywords`` as stored (stripped, distinct).

    Raises:
        FlowValidationError: not a list of strings that each hold a word, or more than
            :data:`MAX_KEYWORDS`; ``field`` is the keyword's path (``trigger_keywords[2]``).
    """
    if isinstance(keywords, str) or not isinstance(keywords, list | tuple):
        raise FlowValidationError(
            f"trigger_keywords must be a list of strings, got {type(keywords).__name__}",
            field="trigger_keywords",
        )
    if len(keywords) > MAX_KEYWORDS:
        raise FlowValidationError(
            f"trigger_keywords: {len(keywords)} given, at most {MAX_KEYWORDS}; keep the ones a "
            "task would say",
            field="trigger_keywords",
        )
    for i, keyword in enumerate(keywords):
        if not isinstance(keyword, str) or not phrase_terms(keyword):
            raise FlowValidationError(
                f"trigger_keywords[{i}] = {keyword!r}: a keyword must be text holding at least one "
                "word (letters or digits, not only a stop word such as 'the')",
                field=f"trigger_keywords[{i}]",
            )
    return _distinct_keywords(keywords)


def flow_skill_keys(flow: FlowDefinition) -> list[str]:
    """The tools (executors) the flow calls, compensations included, first use first."""
    keys = [s.skill_key for s in flow.steps]
    for s in flow.steps:
        compensation = getattr(s, "compensation", None)
        if compensation is not None:
            keys.append(compensation.skill_key)
    return list(dict.fromkeys(keys))


def flow_search_text(flow: FlowDefinition, trigger_keywords: Sequence[str]) -> str:
    """What the index holds for a flow version: keywords, name, description, tags, steps."""
    parts = [*trigger_keywords, flow.name, flow.description, *flow.tags]
    parts += [f"{s.name} {s.skill_key}" for s in flow.steps]
    return index_text(parts)


def _candidate_tasks(
    conn: Connection, candidate_id: str, user_id: str, *, agent_id: str
) -> tuple[list[tuple[str, str]], float | None]:
    """((run id, task) of a candidate's runs that have a task, newest last; its replay
    fidelity)."""
    c = t.candidates.c
    body = conn.execute(
        sa.select(c.body).where(c.id == candidate_id, c.user_id == user_id, c.agent_id == agent_id)
    ).scalar()
    if not isinstance(body, dict):
        return [], None
    fidelity = body.get("fidelity")
    run_ids = [r for r in body.get("run_ids") or [] if isinstance(r, str)][-MAX_EVIDENCE:]
    tasks: list[tuple[str, str]] = []
    r = t.task_runs.c
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        tasks += [
            (rid, task)
            for rid, task in conn.execute(
                sa.select(r.run_id, r.task).where(
                    r.user_id == user_id, r.agent_id == agent_id, r.run_id.in_(chunk)
                )
            )
            if task
        ]
    return tasks, fidelity if isinstance(fidelity, int | float) else None


def _task_keywords(tasks: Sequence[str]) -> list[str]:
    """The words (values left out: addresses, ids, numbers) at least half of ``tasks`` share,
    each as first written."""
    tasks = list(tasks[:_TASK_RUNS_READ])
    written: dict[str, str] = {}
    for task in tasks:
        for w in words(remove_values(task)):
            written.setdefault(stem(w), w)
    df = Counter(
        term for task in tasks for term in dict.fromkeys(search_terms(remove_values(task)))
    )
    floor = max(2, math.ceil(len(tasks) / 2))
    shared = [
        written.get(w, w)
        for w, n in df.most_common()
        if n >= floor and w not in _BOILERPLATE and not w.isdigit()
    ]
    # most_common keeps first-seen order among equal counts: deterministic.
    return shared[:MAX_TASK_KEYWORDS]


# ---------------------------------------------------------------------- writing


def insert_flow_version(
    conn: Connection,
    flow: FlowDefinition,
    *,
    user_id: str,
    agent_id: str,
    source: str,
    candidate_id: str | None = None,
    confidence: float | None = None,
    trigger_keywords: Sequence[str] | None = None,
) -> FlowDefinition:
    """Store ``flow`` as the next version of its name, in ``conn``'s transaction: it becomes
    the latest (searched) version, with a fresh record; returns it with its version.

    ``confidence`` defaults to 1.0 for a user-submitted flow, else the candidate's replay
    fidelity, else 0.5. ``trigger_keywords`` default to :func:`derive_trigger_keywords` (with
    the words the candidate's runs' tasks share, for a learned flow).

    Raises:
        InvalidNameError: the namespace or the flow's name holds a control character.
    """
    check_namespace(user_id, agent_id)
    check_name(flow.name, "flow name")
    definition = flow.model_dump(mode="json")
    nul = find_nul({"definition": definition, "trigger_keywords": list(trigger_keywords or ())})
    if nul is not None:
        field = nul[0].removeprefix("definition.")
        raise FlowValidationError(
            f"flow {flow.name!r}: {field} holds a NUL character (U+0000) at position {nul[1]}; "
            "no store keeps one (PostgreSQL refuses it): remove it",
            flow=flow.name,
            field=field,
        )
    c = t.flows.c
    same = (c.user_id == user_id, c.agent_id == agent_id, c.name == flow.name)
    latest = conn.execute(sa.select(sa.func.max(c.version)).where(*same)).scalar()
    versioned = flow.model_copy(update={"version": (latest or 0) + 1})
    task_words: list[str] = []
    fidelity = None
    tasks: list[tuple[str, str]] = []
    if candidate_id is not None:
        tasks, fidelity = _candidate_tasks(conn, candidate_id, user_id, agent_id=agent_id)
        task_words = _task_keywords([task for _, task in tasks])
    if confidence is None:
        confidence = (
            USER_CONFIDENCE
            if source == SOURCE_USER
            else (DEFAULT_CONFIDENCE if fidelity is None else float(fidelity))
        )
    check_confidence(confidence)
    keywords = (
        check_trigger_keywords(list(trigger_keywords))
        if trigger_keywords is not None
        else derive_trigger_keywords(versioned, task_words, learned=source != SOURCE_USER)
    )
    text = flow_search_text(versioned, keywords)
    ns = namespace_token(user_id, agent_id)
    previous = [
        (pk, ns, text or "")
        for pk, text in conn.execute(sa.select(c.id, c.search_text).where(*same, c.is_latest))
    ]
    if previous:
        conn.execute(
            sa.update(t.flows).where(c.id.in_([p[0] for p in previous])).values(is_latest=False)
        )
    pk = conn.execute(
        sa.insert(t.flows).values(
            user_id=user_id,
            agent_id=agent_id,
            name=flow.name,
            version=versioned.version,
            source=source,
            candidate_id=candidate_id,
            definition={**definition, "version": versioned.version},
            created_at=now(),
            is_latest=True,
            status="active",
            confidence=confidence,
            success_count=0,
            total_executions=0,
            trigger_keywords=keywords,
            skill_keys=flow_skill_keys(versioned),
            search_text=text,
        )
    ).inserted_primary_key[0]  # type: ignore[index]
    FLOW_SEARCH.remove(conn, previous)
    FLOW_SEARCH.put(conn, int(pk), text, namespace=ns)
    if tasks:
        insert_evidence(
            conn, flow.name, tasks, source="learned", user_id=user_id, agent_id=agent_id
        )
    return versioned


def check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, int | float) and 0.0 <= confidence <= 1.0):
        raise FlowValidationError(
            f"confidence must be a number within [0, 1], got {confidence!r}", field="confidence"
        )


def check_status(status: str) -> None:
    if status not in FLOW_STATUSES:
        raise FlowValidationError(
            f"status {status!r} is not one of {', '.join(FLOW_STATUSES)}", field="status"
        )


META_COLUMNS = (
    t.flows.c.name,
    t.flows.c.version,
    t.flows.c.source,
    t.flows.c.status,
    t.flows.c.confidence,
    t.flows.c.success_count,
    t.flows.c.total_executions,
    t.flows.c.trigger_keywords,
    t.flows.c.skill_keys,
    t.flows.c.is_latest,
    t.flows.c.created_at,
    t.flows.c.last_used,
    t.flows.c.candidate_id,
)


def flow_meta(row: Sequence[Any]) -> FlowMeta:
    (
        name,
        version,
        source,
        status,
        confidence,
        successes,
        executions,
        keywords,
        skills,
        latest,
        created,
        used,
        candidate,
    ) = row[:13]
    return FlowMeta(
        name=name,
        version=version,
        source=source,
        status=status,
        confidence=float(confidence),
        success_count=successes,
        total_executions=executions,
        trigger_keywords=tuple(keywords or ()),
        skill_keys=tuple(skills or ()),
        is_latest=bool(latest),
        created_at=created,
        last_used=used,
        candidate_id=candidate,
    )


def written_meta(meta: FlowMeta, values: dict[str, Any]) -> FlowMeta:
    """``meta`` with the columns ``values`` wrote (``learning`` is not part of it), as a read
    of the row would give them back: a confidence as a float, a time in UTC."""
    kept = {k: v for k, v in values.items() if k in _WRITABLE_META}
    if "confidence" in kept:
        kept["confidence"] = float(kept["confidence"])
    used = kept.get("last_used")
    if used is not None:
        kept["last_used"] = (
            used.replace(tzinfo=UTC) if used.tzinfo is None else used.astimezone(UTC)
        )
    return replace(meta, **kept)


_WRITABLE_META = frozenset(
    {"success_count", "total_executions", "confidence", "status", "last_used"}
)


def reindex_flow_rows(conn: Connection) -> int:
    """:meth:`~soloflow_core.store.flows.FlowRepository.reindex_flows` in ``conn``'s transaction (the migrations use it
    when the tokenizer changes)."""
    from soloflow_core.models import FlowDefinition

    c = t.flows.c
    rows = conn.execute(
        sa.select(
            c.id, c.user_id, c.agent_id, c.definition, c.trigger_keywords, c.is_latest, c.source
        )
    ).all()
    indexed: list[tuple[int, str, str]] = []
    for pk, user, agent, definition, keywords, latest, source in rows:
        flow = FlowDefinition.model_validate(definition, context=STORED)
        if keywords is None:
            keywords = derive_trigger_keywords(flow, learned=source != SOURCE_USER)
        text = flow_search_text(flow, keywords)
        conn.execute(
            sa.update(t.flows).where(c.id == pk).values(search_text=text, trigger_keywords=keywords)
        )
        if latest:
            indexed.append((pk, namespace_token(user, agent), text))
    FLOW_SEARCH.rebuild(conn, indexed)
    return len(indexed)
