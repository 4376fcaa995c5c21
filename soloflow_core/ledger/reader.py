"""Reading the ledger format: JSON Lines (gzip too), one task run per line.

The format is documented field by field in ``docs/ledger.md``. A bad line never stops a
read: it becomes a :class:`~soloflow_core.errors.LedgerError` naming the file, the line and
the field at fault, and the good lines around it are kept. A line in the usual shape takes
the fast lane (:mod:`._plain`); the checked path here is the reference and words the errors,
with the field checks of :mod:`._fields`.

Example:
    >>> for line, item in read_ledger("runs.jsonl.gz", default_user="alice", default_agent="bot"):
    ...     print(line, item)
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, TypeVar

import pydantic

from soloflow_core.errors import LedgerError
from soloflow_core.ledger._fields import (
    MISSING,
    MODEL_CALL_FIELDS,
    RUN_FIELDS,
    TOOL_CALL_FIELDS,
    as_list,
    as_object,
    bounded,
    check_free_form,
    count,
    describe,
    fail,
    identifier,
    namespace,
    optional_bool,
    optional_datetime,
    optional_identifier,
    optional_number,
    optional_text,
    printable_name,
    read_int,
    tokens,
    with_extras,
)
from soloflow_core.ledger._plain import parse_plain
from soloflow_core.ledger._rows import (
    MAX_CLASSIFICATION,
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MAX_MODEL,
    MAX_RUN_ID,
    MAX_TOOL_CALL_ID,
    MAX_TOOL_NAME,
)
from soloflow_core.models.ledger import TaskRun
from soloflow_core.store.writer import RunRow

__all__ = ["claim", "dump_run", "parse_line", "parse_record", "read_ledger", "read_records"]

StrPath = str | os.PathLike[str]
_M = TypeVar("_M", bound=pydantic.BaseModel)

_GZIP_MAGIC = b"\x1f\x8b"


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
        fail("record", "must be a JSON object {...}", obj)
    calls = as_list(obj.get("tool_calls"), "tool_calls")
    model_calls = as_list(obj.get("model_calls"), "model_calls")
    values = {
        "run_id": printable_name(
            identifier(obj.get("run_id", MISSING), "run_id", MAX_RUN_ID), "run_id"
        ),
        "user_id": namespace(obj.get("user_id"), "user_id", default_user),
        "agent_id": namespace(obj.get("agent_id"), "agent_id", default_agent),
        "task": optional_text(obj.get("task"), "task"),
        "answer": optional_text(obj.get("answer"), "answer"),
        "success": optional_bool(obj.get("success"), "success"),
        "cost": optional_number(obj.get("cost"), "cost"),
        "tokens": tokens(obj.get("tokens")),
        "tool_calls": [_tool_call(c, f"tool_calls[{i}]") for i, c in enumerate(calls)],
        "model_calls": [_model_call(c, f"model_calls[{i}]") for i, c in enumerate(model_calls)],
        "started_at": optional_datetime(obj.get("started_at"), "started_at"),
        "ended_at": optional_datetime(obj.get("ended_at"), "ended_at"),
        "classification": optional_identifier(
            obj.get("classification"), "classification", MAX_CLASSIFICATION
        ),
        "meta": with_extras(
            as_object(obj.get("meta"), "meta"),
            {k: v for k, v in obj.items() if k not in RUN_FIELDS},
            "meta",
        ),
    }
    for key, value in obj.items():
        if key == "meta" or key not in RUN_FIELDS:
            check_free_form(value, key)
    for i, call in enumerate(calls):
        for key, value in call.items():
            if key in _FREE_FORM_CALL_FIELDS or key not in TOOL_CALL_FIELDS:
                check_free_form(value, f"tool_calls[{i}].{key}")
    # One validation for the whole run, the calls being plain dicts: a model per call costs
    # as much as all the checks above.
    return _build(TaskRun, values, "")


_FREE_FORM_CALL_FIELDS = frozenset(("args", "output", "meta"))


def _tool_call(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        fail(where, "must be a JSON object with at least a name", obj)
    values = {
        "name": identifier(obj.get("name", MISSING), f"{where}.name", MAX_TOOL_NAME),
        "args": as_object(
            obj.get("args"), f"{where}.args", hint="decode JSON-encoded arguments first"
        ),
        "output": obj.get("output"),
        "error": optional_bool(obj.get("error"), f"{where}.error"),
        "duration_ms": optional_number(obj.get("duration_ms"), f"{where}.duration_ms", minimum=0),
        "tool_call_id": optional_identifier(
            obj.get("tool_call_id"), f"{where}.tool_call_id", MAX_TOOL_CALL_ID
        ),
        "meta": with_extras(
            as_object(obj.get("meta"), f"{where}.meta"),
            {k: v for k, v in obj.items() if k not in TOOL_CALL_FIELDS},
            f"{where}.meta",
        ),
    }
    return values


def _model_call(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        fail(where, "must be a JSON object", obj)
    unknown = sorted(k for k in obj if k not in MODEL_CALL_FIELDS)
    if unknown:
        fail(
            f"{where}.{unknown[0]}",
            "unknown field; a model call takes " + ", ".join(sorted(MODEL_CALL_FIELDS)),
            obj[unknown[0]],
            hint="move anything else to the run's meta",
        )
    input_tokens = count(obj.get("input_tokens"), f"{where}.input_tokens")
    output_tokens = count(obj.get("output_tokens"), f"{where}.output_tokens")
    total = obj.get("total_tokens")
    values = {
        "model": optional_identifier(obj.get("model"), f"{where}.model", MAX_MODEL),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": (
            count(total, f"{where}.total_tokens")
            if total is not None
            else bounded(input_tokens + output_tokens, f"{where}.total_tokens")
        ),
        "duration_ms": optional_number(obj.get("duration_ms"), f"{where}.duration_ms", minimum=0),
        "tool_calls_requested": count(
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


# ---------------------------------------------------------------------- dump


def dump_run(run: TaskRun) -> dict[str, Any]:
    """The ledger record of ``run``: ``parse_record(dump_run(run), ...) == run``.

    Every field is written, the namespace included, so the defaults passed to
    ``parse_record`` do not matter. A naive ``started_at`` / ``ended_at`` comes back as UTC.
    ``args``, ``output`` and ``meta`` are copied as they are: JSON-serialisable for any run
    read from the store.
    """
    if not isinstance(run, TaskRun):
        raise TypeError(
            f"dump_run takes a TaskRun, got {type(run).__name__}: Store.list_runs gives "
            "summaries; read whole runs with Store.get_run(run_id, ...) or Store.load_runs"
        )
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
    run = parse_plain(data, default_user, default_agent)
    if run is not None:
        return run
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerError(
            f"not valid UTF-8 (byte {exc.start + 1} of the line); re-encode the file as UTF-8"
        ) from None
    text = text.rstrip("\r\n")
    try:
        obj = json.loads(text, parse_int=read_int)
    except json.JSONDecodeError as exc:
        raise LedgerError(_not_json(text, exc)) from None
    except RecursionError:
        raise LedgerError(
            f"arrays and objects nest more than {MAX_DEPTH} deep, the limit (from column "
            f"{_too_deep_at(text)}); store such a value as a JSON string"
        ) from None
    if not isinstance(obj, dict):
        hint = (
            "; a JSON array of records is not a ledger: write one record per line "
            "(jq -c '.[]' FILE > FILE.jsonl)"
            if isinstance(obj, list)
            else ""
        )
        raise LedgerError(f"a record must be a JSON object {{...}}, got {describe(obj)}{hint}")
    return parse_record(obj, default_user=default_user, default_agent=default_agent)


_ONE_PER_LINE = (
    "a ledger holds one whole JSON record per line (JSON Lines); convert a pretty-printed "
    "file with jq -c . FILE > FILE.jsonl (a JSON array: jq -c '.[]')"
)


def _not_json(text: str, exc: json.JSONDecodeError) -> str:
    """What is wrong with a line that is not JSON, and how to fix it."""
    stripped = text.strip()
    if stripped in ("{", "[", "[{", "}", "]", "},", "}]", "},{") or (
        stripped.startswith('"') and stripped.endswith((",", ":", "{", "["))
    ):  # a piece of a document spread over lines
        return f"not a whole JSON record: {stripped[:40]!r}; {_ONE_PER_LINE}"
    cut = ""
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        cut = " (the line ends before the record does: was it cut short, or split over lines?)"
    # json's messages end in " at" ("Invalid control character at"); the place is added here.
    return (
        f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}{cut}; "
        "each line must hold one whole JSON object"
    )


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
