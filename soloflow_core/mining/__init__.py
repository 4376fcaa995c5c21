"""Mine: repeated tool-call sequences found in the ledger, ranked, proposed as flow candidates.

:func:`detect_candidates` is the stage's entry point (runs in, :class:`FlowCandidate` s out);
:func:`mine_ranked` and :func:`rank_runs` rank patterns without proposing flows;
:class:`DetectionWatcher` detects again as runs arrive. The stages, in order:

- :mod:`.closed`, :mod:`.fast` — closed frequent sequences of integer-coded runs;
- :mod:`.units` — runs as units (a retried call, a loop, is one unit);
- :mod:`.matching` — noise-tolerant occurrences (packed look-ups in :mod:`._packing`);
- :mod:`.positions` — where patterns may start in a ledger too big for the matching index;
- :mod:`.cover` — the greedy cover: the patterns that best compress the ledger;
- :mod:`.growing` — a pattern the cover chooses, grown by the step its occurrences share;
- :mod:`.results` — what a chosen pattern reports and saves;
- :mod:`.pipeline` — mining and ranking together, sampled on a large ledger;
- :mod:`.ranking` — runs ranked end to end, savings measured from full runs;
- :mod:`.detector` — ranked patterns generalised and proposed as flow candidates;
- :mod:`.incremental`, :mod:`.watch` — detection again, as new runs are recorded.

Names are imported when first used, so that capture (which imports :mod:`.watch`) does not
load the miner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "DEFAULT_TOKENS_PER_STEP",
    "DetectionWatcher",
    "IncrementalDetector",
    "MiningProgress",
    "Pattern",
    "PatternOccurrence",
    "RankedPattern",
    "RankingOptions",
    "detect_candidates",
    "mine_closed_patterns",
    "mine_ranked",
    "rank_runs",
    "with_measured_savings",
]

_WHERE = {
    "DEFAULT_TOKENS_PER_STEP": "options",
    "DetectionWatcher": "watch",
    "IncrementalDetector": "incremental",
    "MiningProgress": "pipeline",
    "Pattern": "closed",
    "PatternOccurrence": "results",
    "RankedPattern": "results",
    "RankingOptions": "options",
    "detect_candidates": "detector",
    "mine_closed_patterns": "closed",
    "mine_ranked": "pipeline",
    "rank_runs": "ranking",
    "with_measured_savings": "ranking",
}

if TYPE_CHECKING:
    from soloflow_core.mining.closed import Pattern, mine_closed_patterns
    from soloflow_core.mining.detector import detect_candidates
    from soloflow_core.mining.incremental import IncrementalDetector
    from soloflow_core.mining.options import DEFAULT_TOKENS_PER_STEP, RankingOptions
    from soloflow_core.mining.pipeline import MiningProgress, mine_ranked
    from soloflow_core.mining.ranking import rank_runs, with_measured_savings
    from soloflow_core.mining.results import PatternOccurrence, RankedPattern
    from soloflow_core.mining.watch import DetectionWatcher


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
