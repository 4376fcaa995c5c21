"""Reading the ledger format: JSON Lines (gzip too), one task run per line.

The format is documented field by field in ``docs/ledger.md``. A bad line never stops a
read: it becomes a :class:`~soloflow_core.errors.LedgerError` naming the file, the line and
the field at fault, and the good lines around it are kept.

Example:
    >>> for line, item in read_ledger("runs.jsonl.gz", default_user="alice", default_agent="bot"):
    ...     print(line, item)
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import math
import os
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import pydantic
from pydantic_core import from_json

from soloflow_core.errors import LedgerError
from soloflow_core.ledger._rows import (
    EXTRA_KEY,
    MAX_CLASSIFICATION,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_INT,
    MAX_LINE_BYTES,
    MAX_MODEL,
    MAX_NAMESPACE,
    MAX_RUN_ID,
    MAX_TOOL_CALL_ID,
    MAX_TOOL_NAME,
)
from soloflow_core.models.ledger import ModelCall, TaskRun, ToolCall
from soloflow_core.store.writer import ModelCallRow, RunRow, ToolCallRow

__all__ = ["claim", "dump_run", "parse_line", "parse_record", "read_ledger", "read_records"]

StrPath = str | os.PathLike[str]
_M = TypeVar("_M", bound=pydantic.BaseModel)

# The store's column widths (MAX_*, in soloflow_core/store/schema.py; a test pins them) are
# defined with the fast lane, which imports nothing of SoloFlow (see _rows): a value
# the database would refuse is reported on its line instead of failing a whole batch.
RUN_FIELDS = frozenset(TaskRun.model_fields)
TOOL_CALL_FIELDS = frozenset(ToolCall.model_fields)
MODEL_CALL_FIELDS = frozenset(ModelCall.model_fields)

_GZIP_MAGIC = b"\x1f\x8b"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


class _LongNumber:
    """What the checked path reads for an integer of more than :data:`MAX_DIGITS` digits (Python
    refuses to convert it): the field that holds it is then reported by its path."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _read_int(text: str) -> int | _LongNumber:
    digits = len(text) - (text[0] == "-")
    return int(text) if digits <= MAX_DIGITS else _LongNumber(digits)


_TOO_LONG = 10**MAX_DIGITS
"""The smallest integer of more than :data:`MAX_DIGITS` digits."""
_SHORT_BITS = _TOO_LONG.bit_length() - 8
"""An int of fewer bits is shorter than :data:`_TOO_LONG` (the cheap test first)."""


# ---------------------------------------------------------------------- parse one record


def parse_record(obj: dict[str, Any], *, default_user: str, default_agent: str) -> TaskRun:
    """One ledger record (a decoded JSON object) as a :class:`TaskRun`.

    A null or absent ``user_id`` / ``agent_id`` takes ``default_user`` / ``default_agent``.
    Unknown top-level fields land in ``meta``, unknown tool-call fields in that call's ``meta``
    (under ``meta["_extra"]`` when ``meta`` already has the key).

    Raises:
        LedgerError: the record is malformed; the message starts with the field path at
            fault (``tool_calls[3].name: required, a non-empty string (got null)``).
    """
    if not isinstance(obj, dict):
        _fail("record", "must be a JSON object {...}", obj)
    calls = _list(obj.get("tool_calls"), "tool_calls")
    model_calls = _list(obj.get("model_calls"), "model_calls")
    values = {
        "run_id": _identifier(obj.get("run_id", _MISSING), "run_id", MAX_RUN_ID),
        "user_id": _namespace(obj.get("user_id"), "user_id", default_user),
        "agent_id": _namespace(obj.get("agent_id"), "agent_id", default_agent),
        "task": _optional_text(obj.get("task"), "task"),
        "answer": _optional_text(obj.get("answer"), "answer"),
        "success": _optional_bool(obj.get("success"), "success"),
        "cost": _optional_number(obj.get("cost"), "cost"),
        "tokens": _tokens(obj.get("tokens")),
        "tool_calls": [_tool_call(c, f"tool_calls[{i}]") for i, c in enumerate(calls)],
        "model_calls": [_model_call(c, f"model_calls[{i}]") for i, c in enumerate(model_calls)],
        "started_at": _optional_datetime(obj.get("started_at"), "started_at"),
        "ended_at": _optional_datetime(obj.get("ended_at"), "ended_at"),
        "classification": _optional_identifier(
            obj.get("classification"), "classification", MAX_CLASSIFICATION
        ),
        "meta": _with_extras(
            _object(obj.get("meta"), "meta"),
            {k: v for k, v in obj.items() if k not in RUN_FIELDS},
            "meta",
        ),
    }
    for key, value in obj.items():
        if key == "meta" or key not in RUN_FIELDS:
            _check_free_form(value, key)
    for i, call in enumerate(calls):
        for key, value in call.items():
            if key in _FREE_FORM_CALL_FIELDS or key not in TOOL_CALL_FIELDS:
                _check_free_form(value, f"tool_calls[{i}].{key}")
    # One validation for the whole run, the calls being plain dicts: a model per call costs
    # as much as all the checks above.
    return _build(TaskRun, values, "")


_FREE_FORM_CALL_FIELDS = frozenset(("args", "output", "meta"))


def _check_free_form(value: Any, where: str) -> None:
    """Refuse a free-form value the store could not keep whole: arrays and objects nested
    deeper than :data:`MAX_DEPTH`, an integer of more than :data:`MAX_DIGITS` digits.

    Iterative, so that no depth of input exhausts Python's stack here."""
    if not isinstance(value, dict | list):
        _check_scalar(value, where)
        return
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise LedgerError(
                f"{where}: arrays and objects nest more than {MAX_DEPTH} deep, the limit "
                f"(at {_short(path)}); store such a value as a JSON string"
            )
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in children:
            child_path = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
            if isinstance(child, dict | list):
                stack.append((child, child_path, depth + 1))
            else:
                _check_scalar(child, child_path)


def _short(path: str) -> str:
    return path if len(path) <= 80 else path[:40] + "..." + path[-37:]


def _check_scalar(value: Any, where: str) -> None:
    if isinstance(value, _LongNumber) or (
        type(value) is int and value.bit_length() > _SHORT_BITS and abs(value) >= _TOO_LONG
    ):
        got = _describe(value) if isinstance(value, _LongNumber) else "a longer integer"
        _fail(
            _short(where),
            f"an integer may have at most {MAX_DIGITS} digits",
            got=got,
            hint="write such a number as a string",
        )


def _tool_call(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        _fail(where, "must be a JSON object with at least a name", obj)
    values = {
        "name": _identifier(obj.get("name", _MISSING), f"{where}.name", MAX_TOOL_NAME),
        "args": _object(
            obj.get("args"), f"{where}.args", hint="decode JSON-encoded arguments first"
        ),
        "output": obj.get("output"),
        "error": _optional_bool(obj.get("error"), f"{where}.error"),
        "duration_ms": _optional_number(obj.get("duration_ms"), f"{where}.duration_ms", minimum=0),
        "tool_call_id": _optional_identifier(
            obj.get("tool_call_id"), f"{where}.tool_call_id", MAX_TOOL_CALL_ID
        ),
        "meta": _with_extras(
            _object(obj.get("meta"), f"{where}.meta"),
            {k: v for k, v in obj.items() if k not in TOOL_CALL_FIELDS},
            f"{where}.meta",
        ),
    }
    return values


def _model_call(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        _fail(where, "must be a JSON object", obj)
    unknown = sorted(k for k in obj if k not in MODEL_CALL_FIELDS)
    if unknown:
        _fail(
            f"{where}.{unknown[0]}",
            "unknown field; a model call takes " + ", ".join(sorted(MODEL_CALL_FIELDS)),
            obj[unknown[0]],
            hint="move anything else to the run's meta",
        )
    input_tokens = _count(obj.get("input_tokens"), f"{where}.input_tokens")
    output_tokens = _count(obj.get("output_tokens"), f"{where}.output_tokens")
    total = obj.get("total_tokens")
    values = {
        "model": _optional_identifier(obj.get("model"), f"{where}.model", MAX_MODEL),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": (
            _count(total, f"{where}.total_tokens")
            if total is not None
            else _bounded(input_tokens + output_tokens, f"{where}.total_tokens")
        ),
        "duration_ms": _optional_number(obj.get("duration_ms"), f"{where}.duration_ms", minimum=0),
        "tool_calls_requested": _count(
            obj.get("tool_calls_requested"), f"{where}.tool_calls_requested"
        ),
    }
    return values


def _build(model: type[_M], values: dict[str, Any], where: str) -> _M:
    try:
        return model(**values)
    except pydantic.ValidationError as exc:  # a safety net: the checks above come first
        first = exc.errors()[0]
        path = where
        for part in first["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            else:
                path += f".{part}" if path else str(part)
        raise LedgerError(f"{path or 'record'}: {first['msg']}") from None


# ---------------------------------------------------------------------- field checks


def _describe(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, _LongNumber):
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


def _fail(
    where: str, expected: str, value: Any = _MISSING, *, hint: str = "", got: str = ""
) -> NoReturn:
    message = f"{where}: {expected} (got {got or _describe(value)})"
    raise LedgerError(f"{message}; {hint}" if hint else message)


def _identifier(value: Any, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        _fail(where, "required, a non-empty string", value)
    return _checked_identifier(value, where, limit)


def _optional_identifier(value: Any, where: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        _fail(where, "must be a non-empty string or null", value)
    return _checked_identifier(value, where, limit)


def _checked_identifier(value: str, where: str, limit: int) -> str:
    if len(value) > limit:
        _fail(where, f"at most {limit} characters", got=f"a string of {len(value)} characters")
    if "\x00" in value:
        _fail(where, "must not contain NUL (\\u0000) characters", value)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            _fail(where, "must not contain lone UTF-16 surrogates (\\ud800-\\udfff)", value)
    return value


def _namespace(value: Any, where: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        _fail(where, "must be a non-empty string, or null for the caller's default", value)
    return _checked_identifier(value, where, MAX_NAMESPACE)


def _optional_text(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        _fail(where, "must be a string or null", value)
    return value


def _optional_bool(value: Any, where: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        _fail(where, "must be true, false or null", value)
    return value


def _optional_number(value: Any, where: str, *, minimum: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(where, "must be a number or null", value)
    if minimum is not None and value < minimum:
        _fail(where, f"must be at least {minimum:g}", value)
    return float(value)


def _count(value: Any, where: str, *, default: int = 0) -> int:
    """A token or call count: a non-negative integer (``12.0`` is accepted as 12)."""
    if value is None:
        return default
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail(where, "must be a non-negative integer", value)
    return _bounded(value, where)


def _bounded(value: int, where: str) -> int:
    if value > MAX_INT:
        _fail(where, f"must be at most {MAX_INT}", value)
    return value


def _tokens(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return _count(value, "tokens")
    if value.get("total_tokens") is not None:
        return _count(value["total_tokens"], "tokens.total_tokens")
    if value.get("input_tokens") is not None and value.get("output_tokens") is not None:
        total = _count(value["input_tokens"], "tokens.input_tokens") + _count(
            value["output_tokens"], "tokens.output_tokens"
        )
        return _bounded(total, "tokens")
    _fail("tokens", "an object needs total_tokens, or input_tokens and output_tokens", value)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        _fail(where, "must be an array or null", value)
    return value


def _object(value: Any, where: str, *, hint: str = "") -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail(where, "must be a JSON object or null", value, hint=hint)
    return dict(value)


def _optional_datetime(value: Any, where: str) -> datetime | None:
    """An ISO 8601 string; a time without an offset is taken as UTC."""
    if value is None:
        return None
    expected = "must be an ISO 8601 date-time such as 2024-05-01T12:30:00Z, or null"
    if not isinstance(value, str):
        _fail(where, expected, value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        _fail(where, expected, value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _with_extras(meta: dict[str, Any], extras: dict[str, Any], where: str) -> dict[str, Any]:
    """``meta`` with the unknown fields added; a key ``meta`` already has goes to ``_extra``."""
    for key, value in extras.items():
        if key not in meta:
            meta[key] = value
            continue
        bucket = meta.get(EXTRA_KEY, {})
        if not isinstance(bucket, dict) or key in bucket:
            why = "holds it too" if isinstance(bucket, dict) else "is not an object"
            _fail(
                f"{where}.{EXTRA_KEY}.{key}",
                f"no room for the unknown field {key!r}: meta already has that key "
                f"and meta.{EXTRA_KEY} {why}",
                value,
                hint="rename the field or move it into meta yourself",
            )
        meta[EXTRA_KEY] = {**bucket, key: value}
    return meta


# ---------------------------------------------------------------------- dump


def dump_run(run: TaskRun) -> dict[str, Any]:
    """The ledger record of ``run``: ``parse_record(dump_run(run), ...) == run``.

    Every field is written, the namespace included, so the defaults passed to
    ``parse_record`` do not matter. A naive ``started_at`` / ``ended_at`` comes back as UTC.
    ``args``, ``output`` and ``meta`` are copied as they are: JSON-serialisable for any run
    read from the store.
    """
    record = run.model_dump()
    for key in ("started_at", "ended_at"):
        if record[key] is not None:
            record[key] = record[key].isoformat()
    return record


# ---------------------------------------------------------------------- read a file


def read_ledger(
    path: StrPath, *, default_user: str, default_agent: str
) -> Iterator[tuple[int, TaskRun | LedgerError]]:
    """Stream a ledger file: ``(line number, run or the error of that line)``, line by line.

    Gzip is detected by its magic bytes, whatever the file's name. Blank lines are skipped
    (they still count in line numbers, which start at 1). The file is never held in memory.

    Raises:
        LedgerError: the file cannot be opened (a bad *line* is yielded, not raised).
    """
    for line, item, _ in read_records(path, default_user, default_agent):
        yield line, item.to_task_run() if isinstance(item, RunRow) else item


def _lines(raw: io.BufferedReader, stack: ExitStack) -> Iterator[bytes]:
    """The file's lines, through gzip when the content starts with its magic bytes."""
    if raw.peek(2)[:2] == _GZIP_MAGIC:
        return iter(stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb")))
    return iter(raw)


def read_records(
    path: StrPath, default_user: str, default_agent: str
) -> Iterator[tuple[int, TaskRun | RunRow | LedgerError, int]]:
    """Like :func:`read_ledger`, with how many bytes of the file are read after each line."""
    name = os.fspath(path)
    with ExitStack() as stack:
        try:
            raw = stack.enter_context(open(name, "rb"))
        except OSError as exc:
            raise LedgerError(f"cannot open the file: {exc.strerror}", path=name) from exc
        lines = _lines(raw, stack)
        number = 0
        while True:
            try:
                data = next(lines)
            except StopIteration:
                return
            except (EOFError, OSError, zlib.error) as exc:
                reason = (
                    f"the gzip data is truncated or corrupt ({exc}); the lines before it were read"
                )
                yield number + 1, LedgerError(reason, path=name, line=number + 1), raw.tell()
                return
            number += 1
            if number == 1 and data.startswith(codecs.BOM_UTF8):
                data = data[len(codecs.BOM_UTF8) :]
            if not data.strip():
                continue
            try:
                item: TaskRun | RunRow | LedgerError = parse_line(data, default_user, default_agent)
            except LedgerError as exc:
                item = LedgerError(exc.reason, path=name, line=number)
            yield number, item, raw.tell()


def parse_line(data: bytes, default_user: str, default_agent: str) -> TaskRun | RunRow:
    """One ledger line as a run: the fast lane's :class:`RunRow`, or the checked path's
    :class:`TaskRun`.

    Raises:
        LedgerError: the line is not a valid record, or exceeds a limit (:data:`MAX_LINE_BYTES`,
            :data:`MAX_DEPTH`, :data:`MAX_DIGITS`); the message names the field at fault.
    """
    if len(data) > MAX_LINE_BYTES:
        raise LedgerError(
            f"the line is {len(data):,} bytes; a record may be at most {MAX_LINE_BYTES:,} bytes "
            "(16 MiB): keep large outputs out of the ledger or cut them"
        )
    run = _parse_plain(data, default_user, default_agent)
    if run is not None:
        return run
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerError(
            f"not valid UTF-8 (byte {exc.start + 1} of the line); re-encode the file as UTF-8"
        ) from None
    try:
        obj = json.loads(text, parse_int=_read_int)
    except json.JSONDecodeError as exc:
        raise LedgerError(
            f"not valid JSON: {exc.msg} at column {exc.colno}; "
            "each line must hold one whole JSON object"
        ) from None
    except RecursionError:
        raise LedgerError(
            f"arrays and objects nest more than {MAX_DEPTH} deep, the limit (from column "
            f"{_too_deep_at(text)}); store such a value as a JSON string"
        ) from None
    if not isinstance(obj, dict):
        raise LedgerError(f"a record must be a JSON object {{...}}, got {_describe(obj)}")
    return parse_record(obj, default_user=default_user, default_agent=default_agent)


def _too_deep_at(text: str) -> int:
    """The column (from 1) where the record's JSON passes :data:`MAX_DEPTH` levels inside a
    field (the record's own object and a call's list and object do not count)."""
    depth, in_string, escaped = 0, False, False
    for column, char in enumerate(text, start=1):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH + 3:
                return column
        elif char in "]}":
            depth -= 1
    return 1


# ---------------------------------------------------------------------- the fast lane


def _parse_plain(data: bytes, default_user: str, default_agent: str) -> RunRow | None:
    """The run of a line in the usual shape, or None to leave the line to the checked path
    (``json.loads`` then :func:`parse_record`), which is the reference and words the errors.

    ``pydantic_core.from_json`` reads the line (twice ``json.loads``' speed; same values,
    but it refuses lone surrogates, which then take the checked path); the checks are
    :func:`parse_record`'s, inlined for the calls, and the run comes out as a
    :class:`RunRow`, not as pydantic models (validating those cost more than reading the
    JSON). Anything unusual (a count written ``12.0``, NaN, a field of the wrong type)
    returns None rather than being decided here. A property test keeps the two paths equal.
    """
    try:
        obj = from_json(data)
    except ValueError:
        return None
    if type(obj) is not dict:
        return None
    try:
        run = _plain_run(obj, default_user, default_agent)
        if run is not None and data.count(b"[") + data.count(b"{") > MAX_DEPTH:
            # Deep enough to need a look (brackets in strings count too): the checked path
            # reports the value at fault, if any.
            for key, value in obj.items():
                if key == "meta" or key not in RUN_FIELDS:
                    _check_free_form(value, key)
            for call in run.tool_calls:
                for value in (call.args, call.output, call.meta):
                    _check_free_form(value, "")
        return run
    except (LedgerError, ValueError, TypeError, OverflowError, RecursionError):
        return None


def _plain_run(obj: dict[str, Any], default_user: str, default_agent: str) -> RunRow | None:
    get = obj.get
    calls = get("tool_calls")
    if calls is None:
        calls = []
    elif type(calls) is not list:
        return None
    tool_calls = [_plain_tool_call(c) for c in calls]
    models = get("model_calls")
    if models is None:
        models = []
    elif type(models) is not list:
        return None
    model_calls = [_plain_model_call(m) for m in models]
    task, success, cost = get("task"), get("success"), get("cost")
    if task is not None and type(task) is not str:
        return None
    answer = get("answer")
    if answer is not None and type(answer) is not str:
        return None
    if success is not None and type(success) is not bool:
        return None
    if cost is not None:
        if type(cost) is not float and type(cost) is not int:
            return None
        cost = float(cost)
    meta = get("meta")
    if meta is None:
        meta = {}
    elif type(meta) is not dict:
        return None
    if not obj.keys() <= RUN_FIELDS:
        meta = _with_extras(meta, {k: v for k, v in obj.items() if k not in RUN_FIELDS}, "meta")
    return RunRow(
        run_id=_identifier(get("run_id", _MISSING), "run_id", MAX_RUN_ID),
        user_id=_namespace(get("user_id"), "user_id", default_user),
        agent_id=_namespace(get("agent_id"), "agent_id", default_agent),
        task=task,
        answer=answer,
        success=success,
        cost=cost,
        tokens=_tokens(get("tokens")),
        tool_calls=tool_calls,
        model_calls=model_calls,
        started_at=_optional_datetime(get("started_at"), "started_at"),
        ended_at=_optional_datetime(get("ended_at"), "ended_at"),
        classification=_optional_identifier(
            get("classification"), "classification", MAX_CLASSIFICATION
        ),
        meta=meta,
    )


class _Unusual(ValueError):
    """A value the fast lane leaves to the checked path."""


def _plain_tool_call(c: Any) -> ToolCallRow:
    if type(c) is not dict:
        raise _Unusual
    get = c.get
    name = get("name")
    if type(name) is not str or not name or len(name) > MAX_TOOL_NAME or "\x00" in name:
        raise _Unusual
    args = get("args")
    if args is None:
        args = {}
    elif type(args) is not dict:
        raise _Unusual
    error, duration, call_id, meta = (
        get("error"),
        get("duration_ms"),
        get("tool_call_id"),
        get("meta"),
    )
    if error is not None and type(error) is not bool:
        raise _Unusual
    if duration is not None:
        if (type(duration) is not float and type(duration) is not int) or not duration >= 0:
            raise _Unusual
        duration = float(duration)
    if call_id is not None and (
        type(call_id) is not str
        or not call_id
        or len(call_id) > MAX_TOOL_CALL_ID
        or "\x00" in call_id
    ):
        raise _Unusual
    if meta is None:
        meta = {}
    elif type(meta) is not dict:
        raise _Unusual
    if not c.keys() <= TOOL_CALL_FIELDS:
        extras = {k: v for k, v in c.items() if k not in TOOL_CALL_FIELDS}
        meta = _with_extras(meta, extras, "meta")
    return ToolCallRow(
        name,
        args,
        get("output"),
        error=error,
        duration_ms=duration,
        tool_call_id=call_id,
        meta=meta,
    )


def _plain_model_call(m: Any) -> ModelCallRow:
    if type(m) is not dict or not m.keys() <= MODEL_CALL_FIELDS:
        raise _Unusual
    get = m.get
    model, duration, total = get("model"), get("duration_ms"), get("total_tokens")
    counts: list[Any] = [get("input_tokens"), get("output_tokens"), get("tool_calls_requested")]
    for i, n in enumerate(counts):
        if n is None:
            counts[i] = 0
        elif type(n) is not int or not 0 <= n <= MAX_INT:  # a bool is not an int here
            raise _Unusual
    if total is None:
        total = counts[0] + counts[1]  # absent: the sum, which must fit too
    elif type(total) is not int:
        raise _Unusual
    if not 0 <= total <= MAX_INT:
        raise _Unusual
    if model is not None and (
        type(model) is not str or not model or len(model) > MAX_MODEL or "\x00" in model
    ):
        raise _Unusual
    if duration is not None:
        if (type(duration) is not float and type(duration) is not int) or not duration >= 0:
            raise _Unusual
        duration = float(duration)
    return ModelCallRow(
        model,
        counts[0],
        counts[1],
        total_tokens=total,
        duration_ms=duration,
        tool_calls_requested=counts[2],
    )


# ---------------------------------------------------------------------- namespace


def claim(run: TaskRun | RunRow, user_id: str, agent_id: str) -> TaskRun | RunRow:
    """``run`` moved into the caller's namespace, its own recorded in ``meta``."""
    if run.user_id == user_id and run.agent_id == agent_id:
        return run
    meta = dict(run.meta)
    if run.user_id != user_id:
        meta.setdefault("ledger_user_id", run.user_id)
    if run.agent_id != agent_id:
        meta.setdefault("ledger_agent_id", run.agent_id)
    if isinstance(run, RunRow):  # the fast lane's own object: nobody else holds it
        run.user_id, run.agent_id, run.meta = user_id, agent_id, meta
        return run
    return run.model_copy(update={"user_id": user_id, "agent_id": agent_id, "meta": meta})
