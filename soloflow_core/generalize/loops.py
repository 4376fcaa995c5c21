"""Loops: a step repeated k times in a row whose argument walks a list of an earlier output.

``get_user_details`` → ``get_reservation_details`` × k, once per id in the user's
``reservations``, becomes one map step (``map_over="{{step_1.reservations}}"``,
``reservation_id="{{_item}}"``), so occurrences with 1 and with 4 repetitions are the same
flow. The walk must cover the whole list (the same items, any order); an agent that looked
at only some of the items did not walk the list, and that occurrence counts against the
loop.

Example:
    >>> walk = find_list_walk(1, occurrences)          # doctest: +SKIP
    >>> walk.map_over, walk.item_template
    ('{{step_1.reservations}}', '{{_item}}')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from soloflow_core.flow.templates import maybe_json
from soloflow_core.generalize.arguments import canonical_json

__all__ = ["ListWalk", "find_list_walk", "step_calls_of"]

_MAX_LISTS = 200
_MAX_DEPTH = 5


@dataclass(frozen=True, slots=True)
class ListWalk:
    """How a repeated step walks an earlier list: the arg ``key`` takes each item's
    ``item_path`` of ``{{step_<source+1>.<list_path>}}``."""

    key: str
    source: int
    list_path: tuple[str, ...]
    item_path: tuple[str, ...]
    holds: int
    """Occurrences in which the walk holds."""
    total: int

    @property
    def map_over(self) -> str:
        return "{{" + ".".join((f"step_{self.source + 1}", *self.list_path)) + "}}"

    @property
    def item_template(self) -> str:
        return "{{" + ".".join(("_item", *self.item_path)) + "}}"

    @property
    def confidence(self) -> float:
        return self.holds / self.total if self.total else 0.0


def step_calls_of(occ: Any, i: int) -> list[tuple[dict[str, Any], Any]]:
    """(args, output) of every call of step ``i`` in an occurrence (one when unknown)."""
    calls = occ.step_calls[i] if len(occ.step_calls) > i else ()
    if calls:
        return [(dict(getattr(c, "args", None) or {}), getattr(c, "output", None)) for c in calls]
    return [(dict(occ.args[i]), occ.outputs[i])]


def _lists(
    value: Any, path: tuple[str, ...] = (), depth: int = 0
) -> list[tuple[tuple[str, ...], list[Any]]]:
    """Every list inside ``value`` (JSON text parsed) with its dotted path."""
    value = maybe_json(value)
    found: list[tuple[tuple[str, ...], list[Any]]] = []
    if isinstance(value, list):
        found.append((path, value))
    if depth >= _MAX_DEPTH:
        return found
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and k and "." not in k and " " not in k:
                found += _lists(v, (*path, k), depth + 1)
    return found[:_MAX_LISTS]


def _item_paths(item: Any) -> list[tuple[str, ...]]:
    item = maybe_json(item)
    if isinstance(item, dict):
        return [
            (k,)
            for k, v in item.items()
            if isinstance(k, str) and "." not in k and not isinstance(v, dict | list)
        ]
    return [()]


def _pick(item: Any, path: tuple[str, ...]) -> Any:
    cur = maybe_json(item)
    for seg in path:
        if not isinstance(cur, dict) or seg not in cur:
            return _Missing
        cur = cur[seg]
    return cur


class _Missing:
    pass


def _walks(values: list[Any], items: list[Any], item_path: tuple[str, ...]) -> bool:
    picked = [_pick(x, item_path) for x in items]
    if any(p is _Missing for p in picked) or len(picked) != len(values):
        return False
    return sorted(map(canonical_json, picked)) == sorted(map(canonical_json, values))


def _output_of(occ: Any, j: int, loops: set[int]) -> Any:
    calls = step_calls_of(occ, j)
    return [out for _, out in calls] if j in loops else calls[-1][1]


def find_list_walk(
    i: int, occurrences: Sequence[Any], *, loops: set[int] | None = None
) -> ListWalk | None:
    """The argument of step ``i`` that walks a list of an earlier output, if one does.

    The walk that holds in the most occurrences wins (ties: the nearest source step, then
    the shortest path). It must hold in every occurrence with two or more calls and in at
    least half of all occurrences; otherwise None.
    """
    loops = loops or set()
    multi = [
        k for k, o in enumerate(occurrences) if len(o.step_calls) > i and len(o.step_calls[i]) > 1
    ]
    probe = multi[0] if multi else 0
    calls = step_calls_of(occurrences[probe], i)
    keys = [k for k in calls[0][0] if all(k in a for a, _ in calls)]
    options: list[tuple[str, int, tuple[str, ...], tuple[str, ...]]] = []
    for key in keys:
        values = [a[key] for a, _ in calls]
        if len(values) > 1 and len(set(map(canonical_json, values))) == 1:
            continue  # the same value every time is not a walk
        for j in range(i - 1, -1, -1):
            for lpath, items in _lists(_output_of(occurrences[probe], j, loops)):
                if not items:
                    continue
                for ipath in _item_paths(items[0]):
                    if _walks(values, items, ipath):
                        options.append((key, j, lpath, ipath))
    best: ListWalk | None = None
    per_occ = [step_calls_of(o, i) for o in occurrences] if options else []
    for key, j, lpath, ipath in options:
        holds = 0
        broken_multi = False
        for k, occ in enumerate(occurrences):
            vals = [a.get(key) for a, _ in per_occ[k]]
            found = _list_at(_output_of(occ, j, loops), lpath)
            ok = found is not None and _walks(vals, found, ipath)
            holds += ok
            broken_multi |= (not ok) and len(vals) > 1
        if broken_multi or holds * 2 < len(occurrences):
            continue
        walk = ListWalk(key, j, lpath, item_path=ipath, holds=holds, total=len(occurrences))
        if best is None or (walk.holds, walk.source, -len(lpath)) > (
            best.holds,
            best.source,
            -len(best.list_path),
        ):
            best = walk
    return best


def _list_at(value: Any, path: tuple[str, ...]) -> list[Any] | None:
    cur = maybe_json(value)
    for seg in path:
        cur = maybe_json(cur)
        if not isinstance(cur, dict) or seg not in cur:
            return None
        cur = cur[seg]
    cur = maybe_json(cur)
    return cur if isinstance(cur, list) else None
