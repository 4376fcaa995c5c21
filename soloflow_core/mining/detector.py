"""The detector: the whole ledger of a namespace → ranked, generalised flow candidates.

Reads the namespace's tool-name columns from the store (:meth:`Store.read_tool_names`),
mines and ranks them (:func:`soloflow_core.mining.pipeline.mine_ranked`: closed contiguous
patterns in ≥ ``min_occurrences`` distinct runs, chosen by a greedy MDL cover that tolerates
agent noise), drops what is already decided or registered, then loads the runs behind a sample of each
chosen pattern's occurrences (:func:`_evidence_sample`; one read for all the candidates) to
measure its savings from their model calls and to generalise its arguments
(:mod:`soloflow_core.generalize.arguments`). docs/mining.md explains the ranking and its
measured quality.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, cast, overload

import numpy as np

from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.propose import propose_flow
from soloflow_core.mining.options import RankingOptions
from soloflow_core.mining.pipeline import MiningProgress, mine_ranked
from soloflow_core.mining.ranking import with_measured_savings
from soloflow_core.mining.replays import inert_tools, kept_calls, replay_key, without_calls
from soloflow_core.mining.results import PatternOccurrence, RankedPattern
from soloflow_core.models import (
    DetectorConfig,
    FlowCandidate,
    candidate_id_for,
    dedupe_key_for,
)

if TYPE_CHECKING:
    from soloflow_core.models import TaskRun
    from soloflow_core.store import Store, ToolNameColumns
    from soloflow_core.store.columns import EvidenceRun

MAX_EVIDENCE_RUNS = 200
"""Occurrences (so at most this many runs) read per candidate to measure savings and
generalise arguments, evenly spread over its occurrences; support is always counted on
the whole ledger."""
INERT_SAMPLE_RUNS = 200
"""Runs read, evenly spread over the ledger, to find the note-taking tools
(:func:`~soloflow_core.mining.replays.inert_tools`) left out before mining."""
MAX_LISTED_RUN_IDS = 1000
"""``run_ids`` lists at most this many runs (``occurrence_count`` is the full count)."""


def _inside(pattern: tuple[str, ...], flow: tuple[str, ...]) -> bool:
    """True when ``pattern`` is a contiguous part of a registered flow's step sequence."""
    n = len(pattern)
    return any(flow[i : i + n] == pattern for i in range(len(flow) - n + 1))


@dataclass(frozen=True, slots=True)
class _Ledger:
    """The mined columns and, per run, the namespace it came from."""

    columns: ToolNameColumns
    namespace: list[tuple[str, str]]


def _read(
    store: Store,
    scope: Sequence[tuple[str, str]],
    config: DetectorConfig,
    *,
    columns: ToolNameColumns | None = None,
) -> _Ledger:
    from soloflow_core.store import ToolNameColumns

    parts = [
        (
            ns,
            columns
            if columns is not None and ns == scope[0]
            else store.read_tool_names(
                user_id=ns[0], agent_id=ns[1], lookback=config.lookback_limit
            ),
        )
        for ns in scope
    ]
    if len(parts) == 1:
        ns, cols = parts[0]
        return _Ledger(cols, [ns] * cols.run_count)
    # Several namespaces: one vocabulary, runs concatenated in scope order.
    vocab: dict[str, int] = {}
    codes, offsets, namespace = [], [np.zeros(1, np.int64)], []
    base = 0
    for ns, cols in parts:
        remap = np.asarray([vocab.setdefault(n, len(vocab)) for n in cols.names], dtype=np.int64)
        codes.append(remap[cols.codes] if len(cols.codes) else cols.codes)
        offsets.append(cols.offsets[1:] + base)
        base += len(cols.codes)
        namespace += [ns] * cols.run_count
    merged = ToolNameColumns(
        run_pks=np.concatenate([c.run_pks for _, c in parts]),
        run_ids=[r for _, c in parts for r in c.run_ids],
        offsets=np.concatenate(offsets),
        codes=np.concatenate(codes),
        names=list(vocab),
        errors=np.concatenate([c.errors for _, c in parts]),
        success=np.concatenate([c.success for _, c in parts]),
        cost=np.concatenate([c.cost for _, c in parts]),
        tokens=np.concatenate([c.tokens for _, c in parts]),
    )
    return _Ledger(merged, namespace)


def _evidence_sample(pattern: RankedPattern) -> list[PatternOccurrence]:
    """The occurrences whose runs are read for ``pattern``: all of them up to
    :data:`MAX_EVIDENCE_RUNS`, else that many evenly spread (occurrences come in run order,
    so they span the ledger's history).

    Only these are built from the ranking's compact arrays: a pattern of a large ledger has
    thousands of occurrences, and nothing after the ranking needs the others (except to drop
    a swapped occurrence the sample shows to be a different sequence, see :func:`_checked`).
    """
    occurrences = pattern.occurrences
    n = len(occurrences)
    if n <= MAX_EVIDENCE_RUNS:
        return list(occurrences)
    step = n / MAX_EVIDENCE_RUNS
    return [occurrences[int(i * step)] for i in range(MAX_EVIDENCE_RUNS)]


def _evidence(store: Store, ledger: _Ledger, runs: set[int]) -> dict[int, EvidenceRun]:
    """The runs ``runs`` (ledger indices) as the detector reads them, keyed by index: one
    read per namespace (:meth:`Store.read_evidence`)."""
    by_ns: dict[tuple[str, str], list[int]] = {}
    for r in sorted(runs):
        by_ns.setdefault(ledger.namespace[r], []).append(r)
    out: dict[int, EvidenceRun] = {}
    pks = ledger.columns.run_pks
    for (user, agent), idx in by_ns.items():
        loaded = store.read_evidence([int(pks[r]) for r in idx], user_id=user, agent_id=agent)
        for r in idx:
            run = loaded.get(int(pks[r]))
            if run is not None:
                out[r] = run
    return out


def _swap_passes_data(run: EvidenceRun, a: int, b: int) -> bool:
    """Whether data passes between calls ``a`` and ``b`` (either way): then their order
    matters and a swap of them is a different sequence, not noise."""
    from soloflow_core.mining.units import passes_data

    ca, cb = run.tool_calls[a], run.tool_calls[b]
    return passes_data(ca, cb) or passes_data(cb, ca)


def _checked(
    pattern: RankedPattern, sample: list[PatternOccurrence], evidence: dict[int, EvidenceRun]
) -> tuple[RankedPattern, list[PatternOccurrence]]:
    """``pattern`` and ``sample`` without the swapped occurrences (among the sampled ones)
    whose two swapped steps pass data: the ranking sees names only, the runs show the data."""
    bad = set()
    for occ in sample:
        run = evidence.get(occ.run)
        if run is None:
            continue
        for defect in occ.noise:
            if defect.startswith("swap@"):
                j = int(defect[5:])
                sa, sb = occ.spans[j], occ.spans[j + 1]
                if sa and sb and _swap_passes_data(run, sa[1], sb[1]):
                    bad.add(occ)
    if not bad:
        return pattern, sample
    kept = tuple(o for o in pattern.occurrences if o not in bad)
    checked = replace(
        pattern,
        occurrences=kept,
        runs=tuple(sorted({o.run for o in kept})),
        explanation=pattern.explanation
        + f" {len(bad)} swapped occurrence(s) dropped: data passes between the swapped steps.",
    )
    return checked, [o for o in sample if o not in bad]


def _occurrences(
    sample: list[PatternOccurrence], evidence: dict[int, EvidenceRun]
) -> list[Occurrence]:
    """The complete sampled occurrences, as the generaliser reads them."""
    out = []
    for occ in sample:
        run = evidence.get(occ.run)
        calls = occ.calls
        if run is None or any(c is None for c in calls):
            continue
        picked = [run.tool_calls[c] for c in calls if c is not None]
        step_calls = [
            [run.tool_calls[k] for k in range(span[0], span[1] + 1) if not run.tool_calls[k].error]
            or [run.tool_calls[span[1]]]
            for span in occ.spans
            if span is not None
        ]
        out.append(
            Occurrence(
                task=run.task or "",
                args=[c.args for c in picked],
                outputs=[c.output for c in picked],
                step_calls=step_calls,
                asked_at=getattr(run, "started_at", None),
            )
        )
    return out


class _SampleView(Sequence[PatternOccurrence]):
    """All of a pattern's occurrences, iterated as the sample only.

    :func:`with_measured_savings` skips every occurrence whose run it is not given, so
    walking the sample gives the same measure as walking them all, without building
    thousands of occurrences; ``len`` stays the full count that the savings scale to.
    """

    __slots__ = ("_all", "_sample")

    def __init__(self, everything: Sequence[PatternOccurrence], sample: list[PatternOccurrence]):
        self._all, self._sample = everything, sample

    def __len__(self) -> int:
        return len(self._all)

    @overload
    def __getitem__(self, k: int) -> PatternOccurrence: ...
    @overload
    def __getitem__(self, k: slice) -> Sequence[PatternOccurrence]: ...
    def __getitem__(self, k: int | slice) -> PatternOccurrence | Sequence[PatternOccurrence]:
        return self._all[k]

    def __iter__(self) -> Iterator[PatternOccurrence]:
        return iter(self._sample)


def _measured(
    pattern: RankedPattern, sample: list[PatternOccurrence], evidence: dict[int, EvidenceRun]
) -> RankedPattern:
    """:func:`with_measured_savings` over the sampled occurrences' runs."""
    viewed = replace(pattern, occurrences=_SampleView(pattern.occurrences, sample))
    # The evidence runs have what it reads of a TaskRun: model_calls and tool_calls.
    runs = cast("dict[int, TaskRun]", evidence)
    return replace(with_measured_savings(viewed, runs), occurrences=pattern.occurrences)


def _is_exact(pattern: RankedPattern, cols: ToolNameColumns, enough: int) -> bool:
    """Whether at least ``enough`` runs' whole tool sequence is one clean occurrence of the
    pattern (stops reading occurrences once it knows)."""
    if enough <= 0:
        return True
    n = 0
    for occ in pattern.occurrences:
        first, last = occ.spans[0], occ.spans[-1]
        if (
            not occ.noise
            and first is not None
            and last is not None
            and first[0] == 0
            and last[1] == int(cols.offsets[occ.run + 1] - cols.offsets[occ.run]) - 1
        ):
            n += 1
            if n >= enough:
                return True
    return False


def _avg_cost(pattern: RankedPattern, cols: ToolNameColumns) -> float:
    costs = cols.cost[np.asarray(pattern.runs, dtype=np.int64)] if pattern.runs else np.zeros(0)
    known = costs[~np.isnan(costs)]
    return float(known.mean()) if len(known) else 0.0


def _finite(x: float) -> float:
    return round(x, 4) if math.isfinite(x) else 0.0


def _inert(store: Store, ledger: _Ledger) -> set[str]:
    """The note-taking tools of the ledger, judged on up to :data:`INERT_SAMPLE_RUNS` runs."""
    n = ledger.columns.run_count
    if n == 0:
        return set()
    step = max(n / INERT_SAMPLE_RUNS, 1.0)
    picked = {min(int(k * step), n - 1) for k in range(min(n, INERT_SAMPLE_RUNS))}
    return inert_tools(_evidence(store, ledger, picked).values())


def _without_calls(evidence: dict[int, EvidenceRun], drop: set[str]) -> dict[int, EvidenceRun]:
    """The runs as the miner saw them (:func:`kept_calls`)."""
    out = {}
    for r, run in evidence.items():
        calls = run.tool_calls
        keep = kept_calls([c.name for c in calls], [c.error for c in calls], drop)
        out[r] = (
            run
            if all(keep)
            else replace(run, tool_calls=[c for c, k in zip(calls, keep, strict=True) if k])
        )
    return out


def _replays(
    pattern: RankedPattern, sample: list[PatternOccurrence], evidence: dict[int, EvidenceRun]
) -> tuple[int, int]:
    """(distinct pieces of evidence, occurrences read) among the sampled occurrences: those
    that replay one task with the same values count once (:func:`replay_key`)."""
    keys: set[object] = set()
    read = 0
    for k, occ in enumerate(sample):
        run = evidence.get(occ.run)
        if run is None or any(c is None for c in occ.calls):
            continue
        read += 1
        args = [run.tool_calls[c].args for c in occ.calls if c is not None]
        keys.add(replay_key(run.task, args) or k)
    return len(keys), read


def _candidate(
    pattern: RankedPattern,
    sample: list[PatternOccurrence],
    evidence: dict[int, EvidenceRun],
    *,
    cols: ToolNameColumns,
    config: DetectorConfig,
    user_id: str,
    agent_id: str,
    now: datetime,
) -> FlowCandidate | None:
    """The candidate for ``pattern``, or None when too few occurrences survive the check of
    swapped steps against the runs."""
    p, sample = _checked(pattern, sample, evidence)
    if p.support < config.min_occurrences:
        return None
    distinct, read = _replays(p, sample, evidence)
    if read and distinct < read:
        share = distinct / read
        if p.support * share < config.min_occurrences:
            return None
        p = replace(
            p,
            score=p.score * share,
            explanation=p.explanation + f" {read - distinct} of {read} occurrences replay a task "
            "already counted (same task text and values): counted once.",
        )
    p = _measured(p, sample, evidence)
    names = list(p.names)
    key = dedupe_key_for(names)
    flow, confidence = propose_flow(
        names,
        _occurrences(sample, evidence),
        observed=p.support,
        repeated_steps=p.repeated_steps,
        side_effects=config.side_effects or None,
    )
    exact = _is_exact(p, cols, config.min_occurrences)
    return FlowCandidate(
        id=candidate_id_for(user_id, agent_id, key),
        user_id=user_id,
        agent_id=agent_id,
        tool_sequence=names,
        occurrence_count=p.support,
        match_type="exact" if exact else "subsequence",
        estimated_token_savings=_finite(p.estimated_token_savings),
        avg_cost_per_execution=_finite(_avg_cost(p, cols)),
        dedupe_key=key,
        proposed_flow=flow,
        run_ids=[cols.run_ids[r] for r in p.runs[:MAX_LISTED_RUN_IDS]],
        savings_method=p.savings_method,
        created_at=now,
        agent_prompt_hint=(
            f"A deterministic flow '{flow.name}' is available for this pattern. Use "
            f"flow_run('{flow.name}') instead of reasoning through these steps manually."
        ),
        argument_confidence=confidence,
        score_bits=_finite(p.score),
        clean_occurrences=p.clean_occurrences,
        repeated_steps=list(p.repeated_steps),
        lift=_finite(p.lift),
        tokens_saved_per_occurrence=_finite(p.tokens_saved_per_occurrence),
        turns_saved_per_occurrence=_finite(p.turns_saved_per_occurrence),
        explanation=p.explanation,
    )


def detect_candidates(
    store: Store,
    *,
    user_id: str,
    agent_id: str,
    config: DetectorConfig | None = None,
    save: bool = True,
    also_namespaces: Sequence[tuple[str, str]] = (),
    on_progress: MiningProgress | None = None,
    columns: ToolNameColumns | None = None,
) -> list[FlowCandidate]:
    """Mine the namespace's ledger and return the top candidates (stored when ``save``).

    Only (``user_id``, ``agent_id``)'s runs are mined unless ``also_namespaces`` names
    more (an explicit opt-in, for an operator whose agents share workflows); candidates
    always belong to the caller's namespace. A sequence already approved or rejected in the
    namespace is not proposed again, nor is one that lies inside a registered flow
    (learned or user-submitted); a pending candidate is refreshed in place (same id), never
    duplicated.

    ``columns``, when given, are the namespace's as the caller read them with
    ``store.read_tool_names(user_id=..., agent_id=..., lookback=config.lookback_limit)``
    (``soloflow detect`` reads them while it imports this module); they are not read again.
    """
    config = config or DetectorConfig()
    scope: list[tuple[str, str]] = [(user_id, agent_id)]
    for user, agent in also_namespaces:
        if (user, agent) not in scope:
            scope.append((user, agent))
    ledger = _read(store, scope, config, columns=columns)
    inert = _inert(store, ledger)
    ledger = replace(ledger, columns=without_calls(ledger.columns, inert))
    cols = ledger.columns
    decided = {
        k
        for k, s in store.decided_dedupe_keys(user_id=user_id, agent_id=agent_id).items()
        if s != "pending"
    }
    registered = [
        tuple(step.skill_key for step in rec.flow.steps)
        for rec in store.list_flows(user_id=user_id, agent_id=agent_id)
    ]
    tolerate = config.tolerate_noise
    options = RankingOptions(
        include_failed_runs=config.include_failed_runs,
        max_gap=1 if tolerate else 0,
        max_swaps=1 if tolerate else 0,
        allow_truncated=tolerate,
        min_gain_bits=config.min_gain_bits,
    )
    # Decided and registered patterns still take part in the cover (they explain their
    # runs, so their fragments are not proposed instead); they are dropped afterwards.
    # Room for the patterns the runs disqualify (see _candidate) to be replaced too.
    top_k = 2 * config.max_candidates + min(
        len(decided) + len(registered), 4 * config.max_candidates + 20
    )
    ranked = mine_ranked(
        cols,
        min_length=config.min_sequence_length,
        min_support=config.min_occurrences,
        top_k=top_k,
        options=options,
        on_progress=on_progress,
    )
    now = datetime.now(UTC)
    eligible = (
        p
        for p in ranked
        if dedupe_key_for(list(p.names)) not in decided
        and not any(_inside(p.names, flow) for flow in registered)
    )
    out: list[FlowCandidate] = []
    # The runs of all the candidates still wanted are read at once; a pattern the runs
    # disqualify (see _checked) is replaced by the next one, in rank order.
    while len(out) < config.max_candidates:
        batch = list(islice(eligible, config.max_candidates - len(out)))
        if not batch:
            break
        samples = [_evidence_sample(p) for p in batch]
        evidence = _without_calls(
            _evidence(store, ledger, {o.run for sample in samples for o in sample}), inert
        )
        for pattern, sample in zip(batch, samples, strict=True):
            cand = _candidate(
                pattern,
                sample,
                evidence,
                cols=cols,
                config=config,
                user_id=user_id,
                agent_id=agent_id,
                now=now,
            )
            if cand is not None:
                out.append(cand)
    # Replays counted once may lower a pattern's score below the next one's.
    out.sort(key=lambda c: -(c.score_bits or 0.0))
    if save and out:
        store.save_candidates(out)
    return out


__all__ = ["MAX_EVIDENCE_RUNS", "detect_candidates"]
