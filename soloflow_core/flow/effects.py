"""Whether a tool changes the world, from what its metadata says: the one reading of the
``side_effects`` / ``read_only`` flags that capture, generalisation, compilation and routing
share (docs/flows.md, "Step fields")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["side_effects_of", "tool_side_effects"]


def side_effects_of(metadata: Any) -> bool | None:
    """``metadata["side_effects"]`` when it is a bool, else ``not metadata["read_only"]``
    when that is a bool, else None (unknown: treated as side-effecting by callers).

    Example::

        >>> side_effects_of({"read_only": True})
        False
        >>> side_effects_of({"side_effects": True, "read_only": True})  # side_effects wins
        True
        >>> side_effects_of({"read_only": "yes"}) is None  # only booleans count
        True
    """
    if not isinstance(metadata, Mapping):
        return None
    flag = metadata.get("side_effects")
    if isinstance(flag, bool):
        return flag
    read_only = metadata.get("read_only")
    if isinstance(read_only, bool):
        return not read_only
    return None


def tool_side_effects(tools: Sequence[Any]) -> dict[str, bool]:
    """Tool name → side effects, from each tool's ``metadata`` (a LangChain tool's, or any
    object with ``name`` and ``metadata``); tools that say nothing are left out."""
    out: dict[str, bool] = {}
    for t in tools:
        meta = getattr(t, "metadata", None)
        name = getattr(t, "name", None)
        effects = side_effects_of(meta)
        if isinstance(name, str) and effects is not None:
            out[name] = effects
    return out
