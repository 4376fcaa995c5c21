"""The checks of a ledger record's fields, shared by both ways a line is read
(:mod:`soloflow_core.ledger.reader`'s checked path and the fast lane of :mod:`._plain`).

Each check returns the value as the run keeps it, or raises a
:class:`~soloflow_core.errors.LedgerError` whose message starts with the field's path
(``tool_calls[3].name: required, a non-empty string (got null)``).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any, NoReturn

from soloflow_core.errors import LedgerError
from soloflow_core.ledger._rows import (
    EXTRA_KEY,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_INT,
    MAX_NAMESPACE,
)
from soloflow_core.models.ledger import ModelCall, TaskRun, ToolCall
from soloflow_core.models.names import CONTROL_CHARACTER

# The store's column widths (MAX_*, in soloflow_core/store/schema.py; a test pins them) are
# defined with the fast lane, which imports nothing of SoloFlow (see _rows): a value
# the database would refuse is reported on its line instead of failing a whole batch.
RUN_FIELDS = frozenset(TaskRun.model_fields)
TOOL_CALL_FIELDS = frozenset(ToolCall.model_fields)
MODEL_CALL_FIELDS = frozenset(ModelCall.model_fields)


class Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = Missing()


class LongNumber:
    """What the checked path reads for an integer of more than :data:`MAX_DIGITS` digits (Python
    refuses to convert it): the field that holds it is then reported by its path."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def read_int(text: str) -> int | LongNumber:
    digits = len(text) - (text[0] == "-")
    return int(text) if digits <= MAX_DIGITS else LongNumber(digits)


TOO_LONG = 10**MAX_DIGITS
"""The smallest integer of more than :data:`MAX_DIGITS` digits."""
SHORT_BITS = TOO_LONG.bit_length() - 8
"""An int of fewer bits is shorter than :data:`TOO_LONG` (the cheap test first)."""


def check_free_form(value: Any, where: str) -> None:
    """Refuse a free-form value the store could not keep whole: arrays and objects nested
    deeper than :data:`MAX_DEPTH`, an integer of more than :data:`MAX_DIGITS` digits.

    Iterative, so that no depth of input exhausts Python's stack here."""
    if not isinstance(value, dict | list):
        check_scalar(value, where)
        return
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise LedgerError(
                f"{where}: arrays and objects nest more than {MAX_DEPTH} deep, the limit "
                f"(at {short_path(path)}); store such a value as a JSON string"
            )
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in children:
            child_path = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
            if isinstance(child, dict | list):
                stack.append((child, child_path, depth + 1))
            else:
                check_scalar(child, child_path)


def short_path(path: str) -> str:
    return path if len(path) <= 80 else path[:40] + "..." + path[-37:]


def check_scalar(value: Any, where: str) -> None:
    if isinstance(value, LongNumber) or (
        type(value) is int and value.bit_length() > SHORT_BITS and abs(value) >= TOO_LONG
    ):
        got = describe(value) if isinstance(value, LongNumber) else "a longer integer"
        fail(
            short_path(where),
            f"an integer may have at most {MAX_DIGITS} digits",
            got=got,
            hint="write such a number as a string",
        )


def describe(value: Any) -> str:
    if value is MISSING:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, LongNumber):
        return f"a number of {value.digits} digits"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {json.dumps(shown)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def fail(
    where: str, expected: str, value: Any = MISSING, *, hint: str = "", got: str = ""
) -> NoReturn:
    message = f"{where}: {expected} (got {got or describe(value)})"
    raise LedgerError(f"{message}; {hint}" if hint else message)


def identifier(value: Any, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        fail(where, "required, a non-empty string", value)
    return checked_identifier(value, where, limit)


def optional_identifier(value: Any, where: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        fail(where, "must be a non-empty string or null", value)
    return checked_identifier(value, where, limit)


def checked_identifier(value: str, where: str, limit: int) -> str:
    if len(value) > limit:
        fail(where, f"at most {limit} characters", got=f"a string of {len(value)} characters")
    if "\x00" in value:
        fail(
            where,
            f"must not contain NUL (\\u0000) characters: one at position {value.index(chr(0))}",
            value,
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            fail(where, "must not contain lone UTF-16 surrogates (\\ud800-\\udfff)", value)
    return value


def namespace(value: Any, where: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        fail(where, "must be a non-empty string, or null for the caller's default", value)
    return printable_name(checked_identifier(value, where, MAX_NAMESPACE), where)


def printable_name(value: str, where: str) -> str:
    """``value`` (a run id, a user or agent id) when it holds no control character (see
    :mod:`soloflow_core.models.names`)."""
    found = CONTROL_CHARACTER.search(value)
    if found is not None:
        fail(
            where,
            f"must not contain control characters (U+0000-U+001F, U+007F-U+009F): "
            f"U+{ord(found.group()):04X} at position {found.start()}",
            value,
            hint="a name or id is one line of printable text: remove the character",
        )
    return value


def optional_text(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        fail(where, "must be a string or null", value)
    return value


def optional_bool(value: Any, where: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        fail(where, "must be true, false or null", value)
    return value


def optional_number(value: Any, where: str, *, minimum: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(where, "must be a number or null", value)
    if minimum is not None and value < minimum:
        fail(where, f"must be at least {minimum:g}", value)
    return float(value)


def count(value: Any, where: str, *, default: int = 0) -> int:
    """A token or call count: a non-negative integer (``12.0`` is accepted as 12)."""
    if value is None:
        return default
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        fail(where, "must be a non-negative integer", value)
    return bounded(value, where)


def bounded(value: int, where: str) -> int:
    if value > MAX_INT:
        fail(where, f"must be at most {MAX_INT}", value)
    return value


def tokens(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return count(value, "tokens")
    if value.get("total_tokens") is not None:
        return count(value["total_tokens"], "tokens.total_tokens")
    if value.get("input_tokens") is not None and value.get("output_tokens") is not None:
        total = count(value["input_tokens"], "tokens.input_tokens") + count(
            value["output_tokens"], "tokens.output_tokens"
        )
        return bounded(total, "tokens")
    fail("tokens", "an object needs total_tokens, or input_tokens and output_tokens", value)


def as_list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        fail(where, "must be an array or null", value)
    return value


def as_object(value: Any, where: str, *, hint: str = "") -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        fail(where, "must be a JSON object or null", value, hint=hint)
    return dict(value)


def optional_datetime(value: Any, where: str) -> datetime | None:
    """An ISO 8601 string; a time without an offset is taken as UTC."""
    if value is None:
        return None
    expected = "must be an ISO 8601 date-time such as 2024-05-01T12:30:00Z, or null"
    if not isinstance(value, str):
        fail(where, expected, value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(where, expected, value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def with_extras(meta: dict[str, Any], extras: dict[str, Any], where: str) -> dict[str, Any]:
    """``meta`` with the unknown fields added; a key ``meta`` already has goes to ``_extra``."""
    for key, value in extras.items():
        if key not in meta:
            meta[key] = value
            continue
        bucket = meta.get(EXTRA_KEY, {})
        if not isinstance(bucket, dict) or key in bucket:
            why = "holds it too" if isinstance(bucket, dict) else "is not an object"
            fail(
                f"{where}.{EXTRA_KEY}.{key}",
                f"no room for the unknown field {key!r}: meta already has that key "
                f"and meta.{EXTRA_KEY} {why}",
                value,
                hint="rename the field or move it into meta yourself",
            )
        meta[EXTRA_KEY] = {**bucket, key: value}
    return meta
