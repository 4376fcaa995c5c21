"""Token counts as the ledger holds them: whole numbers from 0 to :data:`MAX_TOKENS` (32-bit
integer columns on PostgreSQL), whatever a model reported."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from soloflow_core.ledger._rows import MAX_INT

MAX_TOKENS = MAX_INT
"""The largest token count a ledger row holds: 2**31 - 1."""

logger = logging.getLogger("soloflow_core.ledger")


def token_usage(usage: Any) -> dict[str, Any] | None:
    """A model call's reported usage with its three counts made whole token counts the ledger
    holds (0 to :data:`MAX_TOKENS`): a count that is missing, text, a
    bool, negative, not finite or past the limit is read as 0 (past the limit: the limit), and
    logged once per kind of fault, so a provider's odd figures never cost the run its record
    or its trace. The total is input + output unless a valid one was reported; other keys
    (``input_token_details``...) are kept as they came.

    >>> token_usage({"input_tokens": -5, "output_tokens": 7.0})
    {'input_tokens': 0, 'output_tokens': 7, 'total_tokens': 7}
    """
    if not isinstance(usage, Mapping):
        return None
    out = dict(usage)
    inp = _count(usage.get("input_tokens"), "input_tokens")
    outp = _count(usage.get("output_tokens"), "output_tokens")
    total = _count(usage.get("total_tokens"), "total_tokens") if "total_tokens" in usage else None
    out["input_tokens"], out["output_tokens"] = inp, outp
    out["total_tokens"] = total if total else min(inp + outp, MAX_TOKENS)
    return out


_FAULTS_LOGGED: set[tuple[str, bool]] = set()


def _count(value: Any, key: str) -> int:
    if value is None:
        return 0
    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return min(int(value), MAX_TOKENS)
    past = type(value) is int and value > MAX_TOKENS
    if (key, past) not in _FAULTS_LOGGED:
        _FAULTS_LOGGED.add((key, past))
        logger.warning(
            "SoloFlow capture: a model reported %s=%.40r, %s",
            key,
            value,
            f"past the ledger's limit of {MAX_TOKENS}: read as the limit"
            if past
            else "not a whole token count from 0 up: read as 0",
        )
    return MAX_TOKENS if past else 0
