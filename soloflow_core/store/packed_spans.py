"""A run's spans kept in one row: the root span's own columns, and the spans under it packed
in one JSON text (``sf_spans.descendants``, migration 0009).

A captured agent run's trace (``invoke_agent`` → ``chat`` / ``execute_tool``) is written this
way: one row per run instead of one per span. The text is a JSON array: first the attribute
key lists the spans use (each once), then one array per span,
``[span_id, parent_id, name, kind, start_us, duration_ms, status, error, keys, *values]``:
``parent_id`` null for the root span, ``start_us`` the microseconds from the root span's start,
``keys`` the index of its attributes' key list, then their values in that order (a span's trace
id is the root's). Read back, the spans are exactly those written, in the same order.

A trace made in this form to begin with (:class:`PackedSpans`) is written without making a
:class:`~soloflow_core.tracing.Span` of each of its spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from itertools import chain
from operator import itemgetter
from typing import Any, overload

from soloflow_core.store.json_values import records_json_text, values_json_text
from soloflow_core.tracing.spans import Span

__all__ = ["PackedSpans", "pack_descendants", "packable", "unpack_descendants"]

_US = timedelta(microseconds=1)
VALUES = 9
"""Where a packed span's attribute values start in its array."""
_values_of = itemgetter(slice(VALUES, None))


def packable(spans: Sequence[Span]) -> bool:
    """Whether ``spans`` are one root span (the first, without a parent) and spans of its
    trace under it: what :func:`pack_descendants` keeps in the root's row."""
    if isinstance(spans, PackedSpans):
        return bool(spans.records)
    if len(spans) < 2 or spans[0].parent is not None:
        return False
    trace_id = spans[0].trace_id
    return all(s.trace_id == trace_id and s.parent is not None for s in spans[1:])


def pack_descendants(root: Span, spans: Sequence[Span]) -> str:
    """``spans`` (the root's descendants, in start order) as the text of the root's row's
    ``descendants`` column."""
    start, root_id = root.start, root.id
    shapes: dict[tuple[str, ...], int] = {}
    records: list[list[Any]] = [[]]
    for s in spans:
        attrs = s.attributes
        keys = tuple(attrs)
        shape = shapes.setdefault(keys, len(shapes))
        records.append(
            [
                s.id,
                None if s.parent == root_id else s.parent,
                s.name,
                s.kind,
                (s.start - start) // _US,
                s.duration_ms,
                s.status,
                s.error,
                shape,
                *attrs.values(),
            ]
        )
    records[0] = [list(k) for k in shapes]
    return records_json_text(records, [s.attributes for s in spans])


def unpack_descendants(root: Span, text: str | None) -> list[Span]:
    """The spans :func:`pack_descendants` packed under ``root`` (as read back), in order."""
    if not text:
        return []
    shapes, *packed = json.loads(text)
    return _unpacked(root, shapes, packed)


def _unpacked(root: Span, shapes: Sequence[Sequence[str]], packed: list[list[Any]]) -> list[Span]:
    start: datetime = root.start
    trace_id, root_id = root.trace_id, root.id
    return [
        Span(
            trace_id=trace_id,
            id=r[0],
            parent=root_id if r[1] is None else r[1],
            name=r[2],
            kind=r[3],
            start=start + timedelta(microseconds=r[4]),
            duration_ms=r[5],
            status=r[6],
            error=r[7],
            attributes=dict(zip(shapes[r[8]], r[VALUES:], strict=True)),
        )
        for r in packed
    ]


class PackedSpans(Sequence[Span]):
    """A root span and its descendants in the packed form (one array per descendant, as in
    the module's text, attribute key lists as tuples): what the store writes as one row, made
    into :class:`~soloflow_core.tracing.Span` objects only when read as a sequence.

    Args:
        root: the trace's root span (no parent).
        shapes: the attribute key lists the descendants use, in the order first used.
        records: one array per descendant, in start order.
    """

    __slots__ = ("_spans", "records", "root", "shapes")

    def __init__(
        self, root: Span, *, shapes: list[tuple[str, ...]], records: list[list[Any]]
    ) -> None:
        self.root = root
        self.shapes = shapes
        self.records = records
        self._spans: list[Span] | None = None

    def text(self) -> str:
        """The descendants as :func:`pack_descendants` writes them (the same text)."""
        values = list(chain.from_iterable(map(_values_of, self.records)))
        return values_json_text([list(self.shapes), *self.records], values)

    def _made(self) -> list[Span]:
        if self._spans is None:
            self._spans = [self.root, *_unpacked(self.root, self.shapes, self.records)]
        return self._spans

    def __len__(self) -> int:
        return 1 + len(self.records)

    @overload
    def __getitem__(self, index: int) -> Span: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Span]: ...
    def __getitem__(self, index: int | slice) -> Span | Sequence[Span]:
        return self._made()[index]

    def __iter__(self) -> Iterator[Span]:
        return iter(self._made())
