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

A lookup (:meth:`ProceduralStore.find_flow_candidates`, in
:mod:`~soloflow_core.store.flow_lookup`) ranks the namespace's latest versions in process
(:func:`~soloflow_core.store.flow_lookup.load_flow_index` reads them into an
:class:`~soloflow_core.store.fulltext.InvertedIndex`) and reads only the best ones' changing
fields, with the namespace's change counter, in one statement. Every write that changes what
the index holds — a new version (``is_latest`` moves), new trigger keywords, a reindex —
goes through :data:`FLOW_SEARCH`, which raises the counter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

import sqlalchemy as sa

from soloflow_core.errors import FlowValidationError, NotFoundError
from soloflow_core.models.flows import SOURCE_USER
from soloflow_core.store import schema as t
from soloflow_core.store.evidence import MAX_EVIDENCE, insert_evidence
from soloflow_core.store.flow_lookup import FLOW_SEARCH, LookupCandidate, find_candidates
from soloflow_core.store.fulltext import (
    IndexCache,
    index_text,
    namespace_token,
    phrase_terms,
    remove_values,
    search_terms,
    stem,
    words,
)
from soloflow_core.store.writer import now, storable_text

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

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
    """A flow version found by :meth:`ProceduralStore.search_flows`."""

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
    """
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
    _check_confidence(confidence)
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
            definition=versioned.model_dump(mode="json"),
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


def _check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, int | float) and 0.0 <= confidence <= 1.0):
        raise FlowValidationError(
            f"confidence must be a number within [0, 1], got {confidence!r}", field="confidence"
        )


def _check_status(status: str) -> None:
    if status not in FLOW_STATUSES:
        raise FlowValidationError(
            f"status {status!r} is not one of {', '.join(FLOW_STATUSES)}", field="status"
        )


_META_COLUMNS = (
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


def _meta(row: Sequence[Any]) -> FlowMeta:
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


class ProceduralStore:
    """Procedural-memory methods of :class:`~soloflow_core.store.Store` (a mixin)."""

    engine: Engine
    _writer: Engine

    if TYPE_CHECKING:  # FlowRunStore's, on Store

        def _journal_engine(self) -> Engine: ...

    def add_flow_version(
        self,
        flow: FlowDefinition,
        *,
        user_id: str,
        agent_id: str,
        source: str,
        candidate_id: str | None = None,
        confidence: float | None = None,
        trigger_keywords: Sequence[str] | None = None,
    ) -> FlowDefinition:
        """``register_flow`` with the procedural-memory fields given (see
        :func:`insert_flow_version`). No validation of the flow itself: callers validate."""
        with self._writer.begin() as conn:
            return insert_flow_version(
                conn,
                flow,
                user_id=user_id,
                agent_id=agent_id,
                source=source,
                candidate_id=candidate_id,
                confidence=confidence,
                trigger_keywords=trigger_keywords,
            )

    def get_flow_meta(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> FlowMeta:
        """The record of the flow's ``version`` (default: the latest).

        Raises:
            NotFoundError: no such flow (version) in the namespace.
        """
        c = t.flows.c
        q = sa.select(*_META_COLUMNS).where(
            c.user_id == user_id, c.agent_id == agent_id, c.name == name
        )
        q = q.where(c.version == version) if version is not None else q.where(c.is_latest)
        with self.engine.connect() as conn:
            row = conn.execute(q.limit(1)).first()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}; list flows with `soloflow flows list`"
            )
        return _meta(row)

    def get_flow_learning(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> dict[str, Any] | None:
        """The ``learning`` JSON of the flow's ``version`` (default: the latest): the outcome
        rules' state (prior, streaks) written by :meth:`update_flow_meta`; None when unset.

        Raises:
            NotFoundError: no such flow (version) in the namespace.
        """
        c = t.flows.c
        q = sa.select(c.learning).where(
            c.user_id == user_id, c.agent_id == agent_id, c.name == name
        )
        q = q.where(c.version == version) if version is not None else q.where(c.is_latest)
        with self.engine.connect() as conn:
            row = conn.execute(q.limit(1)).first()
        if row is None:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}; list flows with `soloflow flows list`"
            )
        return row[0] if isinstance(row[0], dict) else None

    def list_flow_meta(
        self,
        *,
        user_id: str,
        agent_id: str,
        include_retired: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[FlowMeta]:
        """The latest version of each flow in the namespace, by name (``limit`` of them from
        ``offset`` when given)."""
        c = t.flows.c
        q = sa.select(*_META_COLUMNS).where(
            c.user_id == user_id, c.agent_id == agent_id, c.is_latest
        )
        if not include_retired:
            q = q.where(c.status != "retired")
        q = q.order_by(c.name, c.version).limit(limit).offset(offset or None)
        with self.engine.connect() as conn:
            return [_meta(r) for r in conn.execute(q)]

    def list_flow_versions(self, name: str, *, user_id: str, agent_id: str) -> list[FlowMeta]:
        """Every stored version of the flow, newest first.

        Raises:
            NotFoundError: no flow of that name in the namespace.
        """
        c = t.flows.c
        q = (
            sa.select(*_META_COLUMNS)
            .where(c.user_id == user_id, c.agent_id == agent_id, c.name == name)
            .order_by(c.version.desc())
        )
        with self.engine.connect() as conn:
            rows = [_meta(r) for r in conn.execute(q)]
        if not rows:
            raise NotFoundError(
                f"no flow {name!r} for user {user_id!r}, agent {agent_id!r}; list flows with "
                "`soloflow flows list`"
            )
        return rows

    def search_flows(
        self,
        terms: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        min_confidence: float = 0.0,
        limit: int = 50,
    ) -> list[FlowHit]:
        """The namespace's latest, non-retired flow versions whose index holds any of ``terms``
        (from :func:`~soloflow_core.store.fulltext.search_terms`; the ones most of the
        namespace's flows hold are left out, see :meth:`FullTextIndex.prune`) and whose
        confidence is at least ``min_confidence``; best text rank first, at most ``limit``."""
        if not terms or limit <= 0:
            return []
        c = t.flows.c
        ns = namespace_token(user_id, agent_id)
        with self.engine.connect() as conn:
            terms = FLOW_SEARCH.prune(conn, terms, namespace=ns)
            if not terms:
                return []
            m = FLOW_SEARCH.match(conn.dialect.name, t.flows, terms, namespace=ns, top=4 * limit)
            source = t.flows if m.target is None else t.flows.join(m.target, m.onclause)
            q = (
                sa.select(*_META_COLUMNS, c.search_text, m.rank.label("rank"))
                .select_from(source)
                .where(
                    m.where,
                    c.user_id == user_id,
                    c.agent_id == agent_id,
                    c.is_latest,
                    c.status != "retired",
                    c.confidence >= min_confidence,
                )
                .order_by(sa.desc("rank"), c.name)
                .limit(limit)
            )
            return [
                FlowHit(
                    meta=_meta(row),
                    rank=float(row[-1] or 0.0),
                    terms=frozenset((row[-2] or "").split()),
                )
                for row in conn.execute(q)
            ]

    def find_flow_candidates(
        self,
        terms: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        min_confidence: float = 0.0,
        limit: int = 50,
    ) -> list[LookupCandidate]:
        """The namespace's latest, non-retired flow versions whose index holds any of ``terms``
        (from :func:`~soloflow_core.store.fulltext.search_terms`; every term counts) and whose
        confidence is at least ``min_confidence``: the ``limit`` best by text rank (see
        :attr:`~soloflow_core.store.flow_lookup.LookupCandidate.rank`; ties by name), best first.
        One statement per lookup.

        The namespace's index is kept in process (an :class:`InvertedIndex` in an
        :class:`IndexCache`) and ranked there; the statement reads the best flows' confidence,
        status and latest flag by id, and the namespace's change counter. When another writer
        (this process or another) changed the namespace's index since it was read, the index
        is read again and the lookup runs again. Confidence and status changes need no
        invalidation: they are read each time.
        """
        engine = self.engine if self.engine.dialect.name == "sqlite" else self._journal_engine()
        return find_candidates(
            engine,
            self.flow_index_cache(),
            terms,
            user_id=user_id,
            agent_id=agent_id,
            min_confidence=min_confidence,
            limit=limit,
        )

    def flow_index_cache(self) -> IndexCache:
        """This store's lookup indexes (see :meth:`find_flow_candidates`)."""
        cache: IndexCache | None = getattr(self, "_flow_indexes", None)
        if cache is None:
            cache = self._flow_indexes = IndexCache()
        return cache

    def record_flow_execution(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        success: bool,
        version: int | None = None,
        at: datetime | None = None,
    ) -> FlowMeta:
        """Count one execution of the flow's ``version`` (default: the latest): ``total_executions``
        + 1, ``success_count`` + 1 when ``success``, ``last_used`` = ``at`` (default: now).
        Confidence and status are the outcome rules' to change (:meth:`update_flow_meta`)."""
        c = t.flows.c
        where = [c.user_id == user_id, c.agent_id == agent_id, c.name == name]
        where.append(c.version == version if version is not None else c.is_latest)
        with self._writer.begin() as conn:
            done = conn.execute(
                sa.update(t.flows)
                .where(*where)
                .values(
                    total_executions=c.total_executions + 1,
                    success_count=c.success_count + (1 if success else 0),
                    last_used=at or now(),
                )
            ).rowcount
        if not done:
            raise NotFoundError(
                f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                f"{user_id!r}, agent {agent_id!r}"
            )
        return self.get_flow_meta(name, user_id=user_id, agent_id=agent_id, version=version)

    def update_flow_meta(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        version: int | None = None,
        confidence: float | None = None,
        status: str | None = None,
        trigger_keywords: Sequence[str] | None = None,
        learning: dict[str, Any] | None = None,
    ) -> FlowMeta:
        """Set the given fields of the flow's ``version`` (default: the latest); new trigger
        keywords are re-indexed at once.

        Raises:
            FlowValidationError: confidence outside [0, 1], an unknown status, bad keywords.
            NotFoundError: no such flow (version) in the namespace.
        """
        values: dict[str, Any] = {}
        if confidence is not None:
            _check_confidence(confidence)
            values["confidence"] = float(confidence)
        if status is not None:
            _check_status(status)
            values["status"] = status
        if learning is not None:
            values["learning"] = learning
        keywords = (
            None if trigger_keywords is None else check_trigger_keywords(list(trigger_keywords))
        )
        c = t.flows.c
        where = [c.user_id == user_id, c.agent_id == agent_id, c.name == name]
        where.append(c.version == version if version is not None else c.is_latest)
        with self._writer.begin() as conn:
            row = conn.execute(
                sa.select(c.id, c.definition, c.is_latest, c.search_text).where(*where)
            ).first()
            if row is None:
                raise NotFoundError(
                    f"no flow {name!r}{'' if version is None else f' version {version}'} for user "
                    f"{user_id!r}, agent {agent_id!r}"
                )
            if keywords is not None:
                from soloflow_core.models import FlowDefinition

                flow = FlowDefinition.model_validate(row.definition)
                values["trigger_keywords"] = keywords
                values["search_text"] = flow_search_text(flow, keywords)
            if values:
                conn.execute(sa.update(t.flows).where(c.id == row.id).values(**values))
            if keywords is not None and row.is_latest:
                ns = namespace_token(user_id, agent_id)
                FLOW_SEARCH.remove(conn, [(row.id, ns, row.search_text or "")])
                FLOW_SEARCH.put(conn, row.id, values["search_text"], namespace=ns)
        return self.get_flow_meta(name, user_id=user_id, agent_id=agent_id, version=version)

    def change_flow_record(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        change: Callable[[FlowMeta, dict[str, Any] | None], dict[str, Any]],
    ) -> FlowMeta:
        """Read the latest version's record and ``learning`` state, and write the columns
        ``change(meta, learning)`` returns (``success_count``, ``total_executions``,
        ``confidence``, ``status``, ``learning``, ``last_used``), in one transaction with the
        row locked (``BEGIN IMMEDIATE`` on SQLite, ``FOR UPDATE`` on PostgreSQL): concurrent
        outcomes of one flow, from any process, are never lost. Returns the record written.

        Raises:
            NotFoundError: no such flow in the namespace.
            FlowValidationError: ``change`` gave a confidence or status out of range.
        """
        c = t.flows.c
        allowed = {
            "success_count",
            "total_executions",
            "confidence",
            "status",
            "learning",
            "last_used",
        }
        with self._writer.begin() as conn:
            q = sa.select(*_META_COLUMNS, c.learning, c.id).where(
                c.user_id == user_id, c.agent_id == agent_id, c.name == name, c.is_latest
            )
            if conn.dialect.name == "postgresql":
                q = q.with_for_update()
            row = conn.execute(q).first()
            if row is None:
                raise NotFoundError(
                    f"no flow {name!r} for user {user_id!r}, agent {agent_id!r}; "
                    "list flows with `soloflow flows list`"
                )
            meta = _meta(row)
            learning = row[13] if isinstance(row[13], dict) else None
            values = change(meta, learning)
            unknown = set(values) - allowed
            if unknown:
                raise ValueError(f"change_flow_record cannot set {', '.join(sorted(unknown))}")
            if "confidence" in values:
                _check_confidence(values["confidence"])
            if "status" in values:
                _check_status(values["status"])
            conn.execute(sa.update(t.flows).where(c.id == row[14]).values(**values))
        return self.get_flow_meta(name, user_id=user_id, agent_id=agent_id)

    def reindex_flows(self) -> int:
        """Recompute every flow version's ``search_text`` from its definition and keywords,
        and rebuild the full-text index (every namespace: an operator's repair). Returns
        how many latest versions are indexed."""
        with self._writer.begin() as conn:
            return reindex_flow_rows(conn)

    def delete_flow(self, name: str, *, user_id: str, agent_id: str) -> int:
        """Delete every version of the flow ``name`` and its evidence (the flow runs stay, as
        history). Returns how many versions were deleted; 0 when there is none."""
        c, e = t.flows.c, t.flow_evidence.c
        with self._writer.begin() as conn:
            rows = [
                (pk, namespace_token(user_id, agent_id), text or "")
                for pk, text, latest in conn.execute(
                    sa.select(c.id, c.search_text, c.is_latest).where(
                        c.user_id == user_id, c.agent_id == agent_id, c.name == name
                    )
                )
                if latest
            ]
            FLOW_SEARCH.remove(conn, rows)
            deleted = conn.execute(
                sa.delete(t.flows).where(
                    c.user_id == user_id, c.agent_id == agent_id, c.name == name
                )
            ).rowcount
            conn.execute(
                sa.delete(t.flow_evidence).where(
                    e.user_id == user_id, e.agent_id == agent_id, e.flow_name == name
                )
            )
        return int(deleted or 0)


def reindex_flow_rows(conn: Connection) -> int:
    """:meth:`ProceduralStore.reindex_flows` in ``conn``'s transaction (the migrations use it
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
        flow = FlowDefinition.model_validate(definition)
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
