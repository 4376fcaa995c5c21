"""Flows found by the words their jobs were asked in, when their index finds none.

A flow's lookup index holds its trigger keywords, name, description and steps
(:func:`~soloflow_core.store.procedural.flow_search_text`); the requests its job was done
for — the runs it was learned from, later agent runs of its sequence, requests the model sent
to it as a tool, a person's confirmed phrasings — are its *evidence*
(:mod:`soloflow_core.store.evidence`). A request worded as they were but sharing no trigger
keyword (``How much have I sent to AT89…?`` for a flow keyed ``payments``, ``get``,
``iban``) would find no flow: no hint, no run, and its own run never taught retrieval.

:func:`find_by_evidence` is :meth:`~soloflow_core.memory.procedural.ProceduralMemory.find_workflow`'s
second tier, asked only when the index finds nothing: the flows whose evidence knows at
least :data:`MIN_KNOWN` of the request's words (read as the routing gate reads them,
:func:`~soloflow_core.memory.reading.read_request`), one of them a word a quarter of the
job's texts hold (:meth:`~soloflow_core.memory.intent.JobEvidence.common`). A match is a
candidate like any other: whether it runs is still the gate's call, against the other
flows found as its rivals.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from soloflow_core.memory.evidence import JobEvidence
from soloflow_core.memory.intent import MAX_REQUEST_CHARS
from soloflow_core.memory.reading import read_request

if TYPE_CHECKING:
    from soloflow_core.memory.procedural import WorkflowMatch
    from soloflow_core.store import Store

__all__ = ["MAX_FLOWS", "MIN_KNOWN", "find_by_evidence"]

MIN_KNOWN = 2
"""Words of the request a flow's evidence must know (one of them common in it)."""
MAX_FLOWS = 64
"""Namespaces with more active flows than this are looked up by their index alone: the
second tier reads every flow's evidence."""


_READ: OrderedDict[bytes, JobEvidence] = OrderedDict()
"""Evidence read, by a digest of its texts (not the texts: 500 of 4,000 characters a flow)."""
_READ_MAX = 256
_LOCK = threading.Lock()


def _evidence(pairs: Sequence[tuple[str, str]]) -> JobEvidence:
    """The evidence of a flow's ``(task, source)`` pairs, read once per distinct set."""
    digest = hashlib.blake2b(digest_size=16)
    for text, source in pairs:
        digest.update(f"{source}\x1f{text}\x1e".encode("utf-8", "surrogatepass"))
    key = digest.digest()
    with _LOCK:
        job = _READ.get(key)
        if job is not None:
            _READ.move_to_end(key)
            return job
    job = JobEvidence.of(
        [x for x, source in pairs if source not in ("flow_tool", "person")],
        hinted=[x for x, source in pairs if source == "flow_tool"],
        confirmed=[x for x, source in pairs if source == "person"],
    )
    with _LOCK:
        _READ[key] = job
        while len(_READ) > _READ_MAX:
            _READ.popitem(last=False)
    return job


def find_by_evidence(
    store: Store,
    context: str,
    *,
    user_id: str,
    agent_id: str,
    available_tools: Collection[str] | None,
    min_confidence: float,
    limit: int,
    include_unavailable: bool = False,
) -> list[WorkflowMatch]:
    """The namespace's latest active or suggested flows whose evidence knows
    :data:`MIN_KNOWN` of ``context``'s words, one of them common in it; best first (the
    share of the request's words known, ties by name). None for a context longer than a
    request (:data:`~soloflow_core.memory.intent.MAX_REQUEST_CHARS`) or a namespace of
    more than :data:`MAX_FLOWS` flows.

    Scores: ``text_score`` is that share; ``score`` is ``0.7 × text + 0.1 × confidence``
    (no tool is named), as :class:`~soloflow_core.memory.procedural.WorkflowMatch`
    documents.
    """
    from soloflow_core.memory.procedural import WorkflowMatch

    if limit <= 0 or len(context) > MAX_REQUEST_CHARS or not context.strip():
        return []
    metas = store.list_flow_meta(
        user_id=user_id, agent_id=agent_id, include_retired=False, limit=MAX_FLOWS + 1
    )
    if len(metas) > MAX_FLOWS:
        return []
    available = None if available_tools is None else set(available_tools)
    metas = [m for m in metas if m.confidence >= min_confidence]
    terms = set(read_request(context).terms)
    if len(terms) < MIN_KNOWN or not metas:
        return []
    texts = store.flow_evidence_sources([m.name for m in metas], user_id=user_id, agent_id=agent_id)
    found = []
    for meta in metas:
        missing = [] if available is None else [k for k in meta.skill_keys if k not in available]
        if missing and not include_unavailable:
            continue
        job = _evidence(texts.get(meta.name) or ())
        known = terms & job.vocabulary
        if len(known) >= MIN_KNOWN and known & job.common():
            found.append((len(known) / len(terms), meta, sorted(known), missing))
    found.sort(key=lambda f: (-f[0], f[1].name))
    return [
        WorkflowMatch(
            name=meta.name,
            version=meta.version,
            source=meta.source,
            status=meta.status,
            confidence=meta.confidence,
            score=round(0.7 * share + 0.1 * meta.confidence, 6),
            text_score=round(share, 6),
            tool_score=0.0,
            matched_keywords=(),
            matched_terms=tuple(known),
            matched_tools=(),
            missing_tools=tuple(missing),
            skill_keys=tuple(meta.skill_keys),
            why=f"the job's requests hold {', '.join(known)}; confidence {meta.confidence:.2f}",
        )
        for share, meta, known, missing in found[:limit]
    ]
