"""Whether a tool changes the world, from what its metadata says: the one reading of the
``side_effects`` / ``read_only`` flags that capture, generalisation, compilation and routing
share (docs/flows.md, "Step fields")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["side_effects_of"]


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
