"""The store: one database, its repositories by concern, and :class:`Store` in front of them.

``Store.open(url)`` opens the :class:`~soloflow_core.store.database.Database` (the one place
that opens connections) and builds a repository per concern on it: ``store.runs``,
``store.candidates``, ``store.flows``, ``store.flow_runs``, ``store.memory``, ``store.tokens``,
``store.skill_imports``, ``store.usage``, ``store.namespace_index``, ``store.traces``. The methods
of :class:`Store` are theirs, by the same name. Every method takes the caller's namespace
(``user_id``, ``agent_id``) and never returns another namespace's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from os import PathLike
from typing import TYPE_CHECKING, Any, TypeVar

from soloflow_core.store.candidates import CandidateRepository
from soloflow_core.store.database import Database
from soloflow_core.store.flowruns import FlowRunRepository
from soloflow_core.store.flows import FlowRepository
from soloflow_core.store.memory_items import MemoryRepository
from soloflow_core.store.namespaces import NamespaceRepository
from soloflow_core.store.runs import RunRepository
from soloflow_core.store.skills import SkillImportRepository
from soloflow_core.store.tokens import TokenRepository
from soloflow_core.store.traces import TraceRepository
from soloflow_core.store.usage import MAX_READ_RUNS, UsageRepository

T = TypeVar("T")

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from soloflow_core.flow.journal import StepJournal
    from soloflow_core.models import FlowCandidate, FlowDefinition, TaskRun
    from soloflow_core.models.traces import Span
    from soloflow_core.store.columns import EvidenceRun, ToolNameColumns
    from soloflow_core.store.evidence import EvidenceSource
    from soloflow_core.store.flow_lookup import LookupCandidate
    from soloflow_core.store.flowruns import FlowRunRecord, Transition
    from soloflow_core.store.flows import FlowRecord
    from soloflow_core.store.inverted_index import IndexCache
    from soloflow_core.store.namespaces import IdKind, NamespaceCounts
    from soloflow_core.store.procedural import FlowHit, FlowMeta
    from soloflow_core.store.runs import RunSequence, RunSummary
    from soloflow_core.store.skills import SkillImport
    from soloflow_core.store.tokens import ApiToken, IssuedToken
    from soloflow_core.store.traces import NamespaceCost
    from soloflow_core.store.usage import FlowRunSample
    from soloflow_core.store.writer import AnyRun


class Store:
    """Runs, candidates, flows and their evidence, flow runs, memory, API tokens, skill
    imports and traces in one database (SQLite or PostgreSQL).

    A method of the store is its repository's (``store.add_runs`` is
    ``store.runs.add_runs``); whoever opens the store closes it.

    Example:
        >>> store = Store.open("sqlite:///:memory:")
        >>> store.add_runs([TaskRun(run_id="r1")])
        1
    """

    def __init__(self, db: Database) -> None:
        if isinstance(db, str | bytes | PathLike):
            raise TypeError(
                f"Store() takes an open Database, not the URL or path {db!r}: "
                f"open the store by URL or path with Store.open({str(db)!r})"
            )
        self.db = db
        self.runs = RunRepository(db)
        self.candidates = CandidateRepository(db)
        self.flows = FlowRepository(db)
        self.flow_runs = FlowRunRepository(db)
        self.memory = MemoryRepository(db)
        self.tokens = TokenRepository(db)
        self.skill_imports = SkillImportRepository(db)
        self.usage = UsageRepository(db)
        self.namespace_index = NamespaceRepository(db)
        self.traces = TraceRepository(db)

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        """Open (and create or migrate) the database at ``url``; see ``resolve_database_url``."""
        return cls(Database.open(url))

    @property
    def engine(self) -> Engine:
        """The database's SQLAlchemy engine (for tools that need one, e.g. LangGraph's
        checkpointers on the same database); the store's own sessions go through ``db``."""
        return self.db.engine

    @property
    def url(self) -> str:
        """The database URL, password masked."""
        return self.db.url

    def close(self) -> None:
        self.flow_runs.close()
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ runs
    def add_runs(self, runs: Iterable[AnyRun]) -> int:
        return self.runs.add_runs(runs)

    def add_run(self, run: AnyRun) -> bool:
        return self.runs.add_run(run)

    def count_runs(self, *, user_id: str, agent_id: str, success: bool | None = None) -> int:
        return self.runs.count_runs(user_id=user_id, agent_id=agent_id, success=success)

    def list_runs(
        self, *, user_id: str, agent_id: str, limit: int = 50, offset: int = 0
    ) -> list[RunSummary]:
        return self.runs.list_runs(user_id=user_id, agent_id=agent_id, limit=limit, offset=offset)

    def get_run(self, run_id: str, *, user_id: str, agent_id: str) -> TaskRun:
        return self.runs.get_run(run_id, user_id=user_id, agent_id=agent_id)

    def load_runs(self, run_ids: Sequence[str], *, user_id: str, agent_id: str) -> list[TaskRun]:
        return self.runs.load_runs(run_ids, user_id=user_id, agent_id=agent_id)

    def task_texts(self, run_ids: Sequence[str], *, user_id: str, agent_id: str) -> dict[str, str]:
        return self.runs.task_texts(run_ids, user_id=user_id, agent_id=agent_id)

    def iter_sequences(
        self, *, user_id: str, agent_id: str, lookback: int | None = None
    ) -> Iterator[RunSequence]:
        return self.runs.iter_sequences(user_id=user_id, agent_id=agent_id, lookback=lookback)

    def read_tool_names(
        self,
        *,
        user_id: str,
        agent_id: str,
        lookback: int | None = None,
        include_failed: bool = True,
    ) -> ToolNameColumns:
        return self.runs.read_tool_names(
            user_id=user_id, agent_id=agent_id, lookback=lookback, include_failed=include_failed
        )

    def read_evidence(
        self, run_pks: Sequence[int], *, user_id: str, agent_id: str
    ) -> dict[int, EvidenceRun]:
        return self.runs.read_evidence(run_pks, user_id=user_id, agent_id=agent_id)

    # ------------------------------------------------------------------ candidates
    def save_candidates(self, candidates: Iterable[FlowCandidate]) -> None:
        return self.candidates.save_candidates(candidates)

    def get_candidate(self, candidate_id: str, *, user_id: str, agent_id: str) -> FlowCandidate:
        return self.candidates.get_candidate(candidate_id, user_id=user_id, agent_id=agent_id)

    def list_candidates(
        self,
        *,
        user_id: str,
        agent_id: str,
        status: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[FlowCandidate]:
        return self.candidates.list_candidates(
            user_id=user_id, agent_id=agent_id, status=status, limit=limit, offset=offset
        )

    def decided_dedupe_keys(self, *, user_id: str, agent_id: str) -> dict[str, str]:
        return self.candidates.decided_dedupe_keys(user_id=user_id, agent_id=agent_id)

    def set_candidate_status(
        self, candidate_id: str, status: str, *, user_id: str, agent_id: str
    ) -> FlowCandidate:
        return self.candidates.set_candidate_status(
            candidate_id, status, user_id=user_id, agent_id=agent_id
        )

    # ------------------------------------------------------------------ flows
    def register_flow(
        self,
        flow: FlowDefinition,
        *,
        user_id: str,
        agent_id: str,
        source: str,
        candidate_id: str | None = None,
    ) -> FlowDefinition:
        return self.flows.register_flow(
            flow, user_id=user_id, agent_id=agent_id, source=source, candidate_id=candidate_id
        )

    def latest_flow_version(self, name: str, *, user_id: str, agent_id: str) -> int | None:
        return self.flows.latest_flow_version(name, user_id=user_id, agent_id=agent_id)

    def get_flow(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> FlowRecord:
        return self.flows.get_flow(name, user_id=user_id, agent_id=agent_id, version=version)

    def list_flows(self, *, user_id: str, agent_id: str) -> list[FlowRecord]:
        return self.flows.list_flows(user_id=user_id, agent_id=agent_id)

    def derived_from_flows(
        self, derive: Callable[[list[FlowRecord]], T], *, user_id: str, agent_id: str
    ) -> T:
        return self.flows.derived_from_flows(derive, user_id=user_id, agent_id=agent_id)

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
        return self.flows.add_flow_version(
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
        return self.flows.get_flow_meta(name, user_id=user_id, agent_id=agent_id, version=version)

    def get_flow_learning(
        self, name: str, *, user_id: str, agent_id: str, version: int | None = None
    ) -> dict[str, Any] | None:
        return self.flows.get_flow_learning(
            name, user_id=user_id, agent_id=agent_id, version=version
        )

    def list_flow_meta(
        self,
        *,
        user_id: str,
        agent_id: str,
        include_retired: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[FlowMeta]:
        return self.flows.list_flow_meta(
            user_id=user_id,
            agent_id=agent_id,
            include_retired=include_retired,
            limit=limit,
            offset=offset,
        )

    def list_flow_versions(self, name: str, *, user_id: str, agent_id: str) -> list[FlowMeta]:
        return self.flows.list_flow_versions(name, user_id=user_id, agent_id=agent_id)

    def search_flows(
        self,
        terms: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        min_confidence: float = 0.0,
        limit: int = 50,
    ) -> list[FlowHit]:
        return self.flows.search_flows(
            terms, user_id=user_id, agent_id=agent_id, min_confidence=min_confidence, limit=limit
        )

    def find_flow_candidates(
        self,
        terms: Sequence[str],
        *,
        user_id: str,
        agent_id: str,
        min_confidence: float = 0.0,
        limit: int = 50,
    ) -> list[LookupCandidate]:
        return self.flows.find_flow_candidates(
            terms, user_id=user_id, agent_id=agent_id, min_confidence=min_confidence, limit=limit
        )

    def flow_index_cache(self) -> IndexCache:
        return self.flows.flow_index_cache()

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
        return self.flows.record_flow_execution(
            name, user_id=user_id, agent_id=agent_id, success=success, version=version, at=at
        )

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
        return self.flows.update_flow_meta(
            name,
            user_id=user_id,
            agent_id=agent_id,
            version=version,
            confidence=confidence,
            status=status,
            trigger_keywords=trigger_keywords,
            learning=learning,
        )

    def change_flow_record(
        self,
        name: str,
        *,
        user_id: str,
        agent_id: str,
        change: Callable[[FlowMeta, dict[str, Any] | None], dict[str, Any]],
    ) -> FlowMeta:
        return self.flows.change_flow_record(
            name, user_id=user_id, agent_id=agent_id, change=change
        )

    def reindex_flows(self) -> int:
        return self.flows.reindex_flows()

    def delete_flow(self, name: str, *, user_id: str, agent_id: str) -> int:
        return self.flows.delete_flow(name, user_id=user_id, agent_id=agent_id)

    def add_flow_evidence(
        self,
        name: str,
        texts: Iterable[tuple[str, str]],
        *,
        source: EvidenceSource,
        user_id: str,
        agent_id: str,
    ) -> int:
        return self.flows.add_flow_evidence(
            name, texts, source=source, user_id=user_id, agent_id=agent_id
        )

    def flow_evidence(
        self, names: Sequence[str], *, user_id: str, agent_id: str
    ) -> dict[str, list[str]]:
        return self.flows.flow_evidence(names, user_id=user_id, agent_id=agent_id)

    def flow_evidence_sources(
        self, names: Sequence[str], *, user_id: str, agent_id: str
    ) -> dict[str, list[tuple[str, str]]]:
        return self.flows.flow_evidence_sources(names, user_id=user_id, agent_id=agent_id)

    # ------------------------------------------------------------------ flow_runs
    def start_flow_run(
        self,
        flow: FlowDefinition,
        inputs: dict[str, Any],
        *,
        user_id: str,
        agent_id: str,
        run_id: str | None = None,
        owner: str | None = None,
        definition_json: str | None = None,
    ) -> str:
        return self.flow_runs.start_flow_run(
            flow,
            inputs,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            owner=owner,
            definition_json=definition_json,
        )

    def start_latest_flow_run(
        self,
        flow: FlowDefinition,
        inputs: dict[str, Any],
        *,
        user_id: str,
        agent_id: str,
        run_id: str | None = None,
        owner: str | None = None,
        definition_json: str | None = None,
    ) -> str | None:
        return self.flow_runs.start_latest_flow_run(
            flow,
            inputs,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            owner=owner,
            definition_json=definition_json,
        )

    def finish_flow_run(
        self,
        run_id: str,
        *,
        status: str,
        outputs: Any = None,
        error: str | None = None,
        outcome: str | None = None,
        detail: str | None = None,
        synchronous: bool = False,
        journal: StepJournal | None = None,
    ) -> None:
        return self.flow_runs.finish_flow_run(
            run_id,
            status=status,
            outputs=outputs,
            error=error,
            outcome=outcome,
            detail=detail,
            synchronous=synchronous,
            journal=journal,
        )

    def claim_flow_run(
        self,
        run_id: str,
        *,
        user_id: str,
        agent_id: str,
        owner: str,
        seen: FlowRunRecord | None = None,
    ) -> None:
        return self.flow_runs.claim_flow_run(
            run_id, user_id=user_id, agent_id=agent_id, owner=owner, seen=seen
        )

    def interrupt_flow_run(
        self, run_id: str, *, user_id: str, agent_id: str, owner: str, detail: str
    ) -> bool:
        return self.flow_runs.interrupt_flow_run(
            run_id, user_id=user_id, agent_id=agent_id, owner=owner, detail=detail
        )

    def request_cancel(self, run_id: str, *, user_id: str, agent_id: str) -> FlowRunRecord:
        return self.flow_runs.request_cancel(run_id, user_id=user_id, agent_id=agent_id)

    def cancel_requested(self, run_id: str) -> bool:
        return self.flow_runs.cancel_requested(run_id)

    def get_flow_run(self, run_id: str, *, user_id: str, agent_id: str) -> FlowRunRecord:
        return self.flow_runs.get_flow_run(run_id, user_id=user_id, agent_id=agent_id)

    def flow_run_history(self, run_id: str, *, user_id: str, agent_id: str) -> list[Transition]:
        return self.flow_runs.flow_run_history(run_id, user_id=user_id, agent_id=agent_id)

    def list_flow_runs(
        self,
        *,
        user_id: str,
        agent_id: str,
        flow_name: str | None = None,
        state: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        return self.flow_runs.list_flow_runs(
            user_id=user_id,
            agent_id=agent_id,
            flow_name=flow_name,
            state=state,
            limit=limit,
            offset=offset,
        )

    def waiting_flow_runs(self, *, user_id: str, agent_id: str) -> list[tuple[str, str]]:
        return self.flow_runs.waiting_flow_runs(user_id=user_id, agent_id=agent_id)

    def stale_flow_runs(self, *, older_than: datetime, terminal: bool) -> list[str]:
        return self.flow_runs.stale_flow_runs(older_than=older_than, terminal=terminal)

    def step_journal(self, run_id: str, *, defer_completions: bool = False) -> StepJournal:
        return self.flow_runs.step_journal(run_id, defer_completions=defer_completions)

    # ------------------------------------------------------------------ tokens
    def create_api_token(
        self, *, user_id: str, agent_id: str, scope: str = "read", label: str | None = None
    ) -> IssuedToken:
        return self.tokens.create_api_token(
            user_id=user_id, agent_id=agent_id, scope=scope, label=label
        )

    def verify_api_token(self, token: str) -> ApiToken | None:
        return self.tokens.verify_api_token(token)

    def list_api_tokens(
        self, *, user_id: str, agent_id: str, include_revoked: bool = True
    ) -> list[ApiToken]:
        return self.tokens.list_api_tokens(
            user_id=user_id, agent_id=agent_id, include_revoked=include_revoked
        )

    def revoke_api_token(self, token_id: str, *, user_id: str, agent_id: str) -> ApiToken:
        return self.tokens.revoke_api_token(token_id, user_id=user_id, agent_id=agent_id)

    def active_api_token_ids(self, token_ids: Collection[str]) -> set[str]:
        return self.tokens.active_api_token_ids(token_ids)

    # ------------------------------------------------------------------ skill_imports
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
        return self.skill_imports.record_skill_import(
            user_id=user_id,
            agent_id=agent_id,
            flow_name=flow_name,
            flow_version=flow_version,
            skill_name=skill_name,
            package_digest=package_digest,
            fixtures=fixtures,
            provenance=provenance,
        )

    def get_skill_import(
        self, flow_name: str, *, user_id: str, agent_id: str, version: int
    ) -> SkillImport | None:
        return self.skill_imports.get_skill_import(
            flow_name, user_id=user_id, agent_id=agent_id, version=version
        )

    def skill_imports_for(
        self, flow_names: Sequence[str], *, user_id: str, agent_id: str
    ) -> dict[tuple[str, int], SkillImport]:
        return self.skill_imports.skill_imports_for(flow_names, user_id=user_id, agent_id=agent_id)

    # ------------------------------------------------------------------ usage
    def flow_run_samples(
        self, names: Sequence[str], *, user_id: str, agent_id: str, per_flow: int = MAX_READ_RUNS
    ) -> dict[str, list[FlowRunSample]]:
        return self.usage.flow_run_samples(
            names, user_id=user_id, agent_id=agent_id, per_flow=per_flow
        )

    def flow_definitions(
        self, keys: Sequence[tuple[str, int]], *, user_id: str, agent_id: str
    ) -> dict[tuple[str, int], FlowDefinition]:
        return self.usage.flow_definitions(keys, user_id=user_id, agent_id=agent_id)

    # ------------------------------------------------------------------ namespace_index
    def namespaces(self) -> list[NamespaceCounts]:
        return self.namespace_index.namespaces()

    def ids_with_prefix(
        self, kind: IdKind, prefix: str, *, user_id: str, agent_id: str, limit: int = 11
    ) -> list[str]:
        return self.namespace_index.ids_with_prefix(
            kind, prefix, user_id=user_id, agent_id=agent_id, limit=limit
        )

    # ------------------------------------------------------------------ traces
    def add_spans(self, run_id: str, spans: Sequence[Span], *, user_id: str, agent_id: str) -> int:
        return self.traces.add_spans(run_id, spans, user_id=user_id, agent_id=agent_id)

    def add_traced_run(self, run: AnyRun, spans: Sequence[Span] = ()) -> bool:
        return self.traces.add_traced_run(run, spans)

    def get_spans(self, run_id: str, *, user_id: str, agent_id: str) -> list[Span]:
        return self.traces.get_spans(run_id, user_id=user_id, agent_id=agent_id)

    def namespace_cost(self, *, user_id: str, agent_id: str) -> NamespaceCost:
        return self.traces.namespace_cost(user_id=user_id, agent_id=agent_id)
