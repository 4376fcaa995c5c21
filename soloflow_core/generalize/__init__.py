"""Generalise: a mined sequence's occurrences become a flow with inputs and data flow.

- :mod:`.align` — a candidate's tool sequence found again in each run;
- :mod:`.arguments` — each argument's source: a constant, an input read from the task, or an
  earlier step's output;
- :mod:`.extraction` — the rules that find an input's value again in a new task text;
- :mod:`.dataflow` — which steps feed which, and which have side effects;
- :mod:`.loops` — a step repeated over a list, as a map step;
- :mod:`.propose` — the flow definition proposed for a candidate.
"""

from soloflow_core.generalize.align import find_occurrence, find_occurrences
from soloflow_core.generalize.arguments import (
    Generalization,
    Occurrence,
    extract_inputs,
    generalize,
)
from soloflow_core.generalize.dataflow import data_dependencies, side_effects_from_calls
from soloflow_core.generalize.propose import FlowProposal, propose, propose_flow

__all__ = [
    "FlowProposal",
    "Generalization",
    "Occurrence",
    "data_dependencies",
    "extract_inputs",
    "find_occurrence",
    "find_occurrences",
    "generalize",
    "propose",
    "propose_flow",
    "side_effects_from_calls",
]
