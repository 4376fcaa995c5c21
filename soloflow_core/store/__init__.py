"""Store: SQLite (WAL) embedded, PostgreSQL by URL; the same code for both.

``Store.open(url)`` opens (and migrates) the database; :class:`Store` holds every read and
write of runs, candidates, flows, flow runs, memory, API tokens, skill imports and traces,
through one repository per concern (``store.runs``, ``store.flows``, ``store.flow_runs`` …).
The records below are what its methods return.
"""

from soloflow_core.store.columns import ToolNameColumns
from soloflow_core.store.engine import default_database_path, resolve_database_url
from soloflow_core.store.facade import Store
from soloflow_core.store.flowruns import FlowRunRecord, StepRunRecord, Transition
from soloflow_core.store.flows import FlowRecord
from soloflow_core.store.procedural import FlowHit, FlowMeta
from soloflow_core.store.runs import RunSequence, RunSummary
from soloflow_core.store.skills import SkillImport
from soloflow_core.store.tokens import ApiToken, IssuedToken
from soloflow_core.store.traces import NamespaceCost

__all__ = [
    "ApiToken",
    "FlowHit",
    "FlowMeta",
    "FlowRecord",
    "FlowRunRecord",
    "IssuedToken",
    "NamespaceCost",
    "RunSequence",
    "RunSummary",
    "SkillImport",
    "StepRunRecord",
    "Store",
    "ToolNameColumns",
    "Transition",
    "default_database_path",
    "resolve_database_url",
]
