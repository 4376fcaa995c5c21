"""The ledger: task runs as JSON Lines (gzip too), read and ingested into the store.

The format is documented field by field in ``docs/ledger.md``. A bad line never stops a
read: it becomes a :class:`~soloflow_core.errors.LedgerError` naming the file, the line and
the field at fault, and the good lines around it are kept.

Example:
    >>> report = ingest(store, ["runs.jsonl.gz"], default_user="alice", default_agent="bot")
    >>> report.runs_written, [str(e) for e in report.errors]
"""

from soloflow_core.ledger.ingester import ingest
from soloflow_core.ledger.reader import dump_run, parse_record, read_ledger
from soloflow_core.ledger.report import IngestReport, ProgressCallback
from soloflow_core.ledger.tokens import MAX_TOKENS, token_usage

__all__ = [
    "MAX_TOKENS",
    "IngestReport",
    "ProgressCallback",
    "dump_run",
    "ingest",
    "parse_record",
    "read_ledger",
    "token_usage",
]
