"""What an ingest reports: :class:`IngestReport`, and the progress callback's shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from soloflow_core.errors import LedgerError

__all__ = ["IngestReport", "ProgressCallback"]

ProgressCallback = Callable[[int, int, int], None]
"""Called with ``(lines_done, bytes_done, total_bytes)``."""


@dataclass(slots=True)
class IngestReport:
    """What :func:`ingest` did. ``lines`` counts the non-blank lines read, so
    ``lines == runs_written + runs_skipped_existing + len(errors)``."""

    files: int = 0
    lines: int = 0
    runs_written: int = 0
    runs_skipped_existing: int = 0
    """Runs whose id was already stored in their namespace (or earlier in the same files)."""
    errors: list[LedgerError] = field(default_factory=list)
    """One per bad line, in reading order, each with its file and line number."""
    namespaces: dict[tuple[str, str], int] = field(default_factory=dict)
    """Good runs read per ``(user_id, agent_id)``: where they went. A record's own
    ``agent_id`` (e.g. ``"gpt-4o"``) puts it outside the caller's default namespace."""
