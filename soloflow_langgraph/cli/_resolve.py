"""What a person typed → the one id or flow name it means.

Ids are accepted by any unique prefix (``cand_32ca``); a flow by its name, a unique prefix
of it in any case (``auto: find``), or a unique prefix of its slug (``auto-find-customer``,
the name in lower case with every run of other characters made one ``-``). An ambiguous
prefix is an error listing what it matches; an unknown one is left to the command, whose
not-found error names it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from soloflow_core.errors import AmbiguousError

if TYPE_CHECKING:
    from soloflow_core.store.namespaces import IdKind
    from soloflow_langgraph.cli.app import Context

__all__ = ["AmbiguousError", "resolve_flow", "resolve_id", "slug"]

_WHAT = {"run": "task run", "candidate": "candidate", "flow_run": "flow run", "flow": "flow"}
_SHOWN = 10


def _ambiguous(kind: IdKind, typed: str, matches: list[str]) -> AmbiguousError:
    shown = ", ".join(matches[:_SHOWN]) + (", …" if len(matches) > _SHOWN else "")
    return AmbiguousError(
        f"{_WHAT[kind]} {typed!r} is ambiguous: it starts "
        f"{'more than ' if len(matches) > _SHOWN else ''}{len(matches[:_SHOWN])} "
        f"{_WHAT[kind]}s ({shown}); type more of it"
    )


def resolve_id(c: Context, kind: IdKind, typed: str) -> str:
    """The one id of ``kind`` in the namespace that ``typed`` is or starts; ``typed`` itself
    when none does (the command then says it is not found)."""
    matches = c.store().ids_with_prefix(kind, typed, limit=_SHOWN + 1, **c.ns)
    if not matches:
        return typed
    if matches[0] == typed or len(matches) == 1:
        return matches[0]
    raise _ambiguous(kind, typed, matches)


def slug(name: str) -> str:
    """``"Auto: find_customer → list_orders"`` → ``"auto-find-customer-list-orders"``."""
    return re.sub(r"[^0-9a-z]+", "-", name.casefold()).strip("-")


def resolve_flow(c: Context, typed: str) -> str:
    """The one flow name of the namespace that ``typed`` names (see the module)."""
    names = c.store().ids_with_prefix("flow", "", limit=1_000_000, **c.ns)
    if typed in names:
        return typed
    folded = typed.casefold()
    matches = [n for n in names if n.casefold().startswith(folded)]
    if not matches and slug(typed):
        matches = [n for n in names if slug(n).startswith(slug(typed))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        return typed
    raise _ambiguous("flow", typed, matches)
