"""Ledger lines as the SQLite store's rows: the fast lane of :func:`~soloflow_core.ledger.ingest`.

A line in the usual shape is decoded by ``msgspec`` into typed structs, checked, and turned
into the parameter tuples that :func:`soloflow_core.store.writer.insert_sqlite_bulk` hands
to the sqlite3 driver's ``executemany``. ``args`` and ``output`` are never decoded: their
exact JSON text (``msgspec.Raw``, which msgspec still checks to be well-formed JSON) is
stored as it is, so neither is built as Python objects nor serialised again.

Anything unusual (a field of the wrong type, an unknown field in a call, a count written
``12.0``, an escaped NUL, a lone surrogate, non-UTF-8 bytes...) is *deferred*: the line goes
back to :mod:`soloflow_core.ledger.reader`'s checked path, which decides it and words the error.
This lane never reports an error itself, so the messages stay those of the checked path.

The module imports only the standard library and msgspec, nothing of SoloFlow:
:mod:`soloflow_core.ledger.reader` takes the column limits (``MAX_*``) from here.

Row layouts (the first element is the line's ordinal, see :data:`Chunk`)::

    run:   (ordinal, run_id, user_id, agent_id, task|0, success 1/0/2, cost|NaN, tokens,
            tool_count, model_call_count, classification|0, started|0, ended|0, meta_json,
            answer|0)
    call:  (ordinal, user_id, agent_id, seq, name, args_json, output_json, error 1/0/2,
            duration_ms|NaN, tool_call_id|0, meta_json|"null")
    model: (ordinal, user_id, agent_id, seq, model|0, input_tokens, output_tokens,
            total_tokens, duration_ms|NaN, tool_calls_requested)
"""

from __future__ import annotations

import codecs
import gzip
import io
import re
import zlib
from collections.abc import Generator, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, cast

import msgspec
from msgspec import Meta, Raw, Struct

from soloflow_core.models.names import CONTROL_CHARACTER

MAX_RUN_ID = 512
MAX_NAMESPACE = 255
MAX_TOOL_NAME = 512
MAX_TOOL_CALL_ID = 255
MAX_MODEL = 255
MAX_CLASSIFICATION = 64
MAX_INT = 2**31 - 1
"""Token counts are 32-bit integer columns on PostgreSQL."""
MAX_DEPTH = 64
"""How deep arrays and objects may nest in a free-form value (``args``, ``output``, ``meta``, an
unknown field): ``{"a": [1]}`` is 2 deep. The store writes deeper values of a capture cut at this
depth (``soloflow_core.store.json_values.MAX_JSON_DEPTH``, a test pins the two equal)."""
MAX_LINE_BYTES = 16 << 20
"""The longest ledger line (one record) read: 16 MiB."""
MAX_DIGITS = 4300
"""The most digits an integer may have: Python's default limit for converting text to int
(``sys.get_int_max_str_digits``), which every later reading of the stored JSON meets."""

RUN_KEYS = frozenset(
    (
        "run_id",
        "user_id",
        "agent_id",
        "task",
        "answer",
        "success",
        "cost",
        "tokens",
        "tool_calls",
        "model_calls",
        "started_at",
        "ended_at",
        "classification",
        "meta",
    )
)
""":class:`~soloflow_core.models.TaskRun`'s fields (a test pins them)."""
EXTRA_KEY = "_extra"
"""Where an unknown field goes when ``meta`` already has a key of that name."""

CHUNK_LINES = 1000
"""Lines per chunk: the unit of progress."""

_GZIP_MAGIC = b"\x1f\x8b"
_READ_BUFFER = 1 << 20
_NUL_ESCAPE = b"\\u0000"
_NULL = Raw(b"null")
_BOOL = {True: 1, False: 0, None: 2}
_NAN = float("nan")


# msgspec checks the types and bounds in C; a value outside them defers the line.
_Count = Annotated[int, Meta(ge=0, le=MAX_INT)]
_Duration = Annotated[float, Meta(ge=0)]


def _name(limit: int) -> Any:
    return Annotated[str, Meta(min_length=1, max_length=limit)]


class _ToolCall(Struct, forbid_unknown_fields=True):
    name: _name(MAX_TOOL_NAME)  # type: ignore[valid-type]
    args: Raw = _NULL
    output: Raw = _NULL
    error: bool | None = None
    duration_ms: _Duration | None = None
    tool_call_id: _name(MAX_TOOL_CALL_ID) | None = None  # type: ignore[valid-type]
    meta: dict[str, Any] | None = None


class _ModelCall(Struct, forbid_unknown_fields=True):
    model: _name(MAX_MODEL) | None = None  # type: ignore[valid-type]
    input_tokens: _Count | None = None
    output_tokens: _Count | None = None
    total_tokens: _Count | None = None
    duration_ms: _Duration | None = None
    tool_calls_requested: _Count | None = None


class _Run(Struct):
    run_id: _name(MAX_RUN_ID)  # type: ignore[valid-type]
    user_id: _name(MAX_NAMESPACE) | None = None  # type: ignore[valid-type]
    agent_id: _name(MAX_NAMESPACE) | None = None  # type: ignore[valid-type]
    task: str | None = None
    answer: str | None = None
    success: bool | None = None
    cost: float | None = None
    tokens: _Count | dict[str, Any] | None = None
    tool_calls: list[_ToolCall] | None = None
    model_calls: list[_ModelCall] | None = None
    started_at: str | None = None
    ended_at: str | None = None
    classification: _name(MAX_CLASSIFICATION) | None = None  # type: ignore[valid-type]
    meta: dict[str, Any] | None = None


class _RunNoExtras(_Run, forbid_unknown_fields=True):
    pass


_DECODE_PLAIN = msgspec.json.Decoder(_RunNoExtras).decode
_DECODE_RUN = msgspec.json.Decoder(_Run).decode
_DECODE_FIELDS = msgspec.json.Decoder(dict[str, Raw]).decode
_DECODE_ANY = msgspec.json.Decoder().decode
_ENCODE = msgspec.json.Encoder().encode


class _Unusual(Exception):
    """The line goes to the checked path."""


# ---------------------------------------------------------------------- one line


class Rows:
    """The rows of the lines read so far (see the module docstring for their layout)."""

    __slots__ = ("runs", "calls", "models", "namespaces")

    def __init__(self) -> None:
        self.runs: list[tuple[Any, ...]] = []
        self.calls: list[tuple[Any, ...]] = []
        self.models: list[tuple[Any, ...]] = []
        self.namespaces: dict[tuple[str, str], int] = {}


def add_line(
    rows: Rows, ordinal: int, data: bytes, *, user: str, agent: str, keep_namespaces: bool
) -> bool:
    """Append the rows of ``data`` (one ledger line) to ``rows``; False, and nothing
    appended, when the line is left to the checked path.

    ``user``/``agent`` are the caller's namespace; without ``keep_namespaces`` the run is
    claimed for it, as :func:`soloflow_core.ledger.ingest` does.
    """
    if _NUL_ESCAPE in data or len(data) > MAX_LINE_BYTES:
        return False
    if not data.isascii():
        try:
            data.decode("utf-8")  # msgspec does not check the bytes inside args/output
        except UnicodeDecodeError:
            return False
    try:
        run = _decode(data)
        return _add_run(rows, ordinal, run, user=user, agent=agent, keep_namespaces=keep_namespaces)
    except (_Unusual, msgspec.MsgspecError, ValueError, TypeError, OverflowError, RecursionError):
        return False


_LONG_NUMBER = re.compile(f"(?<![0-9])[0-9]{{{MAX_DIGITS + 1}}}")
"""More than :data:`MAX_DIGITS` digits in a row (a match starts only where a run of digits does,
so the search stays linear)."""


def _long_number(raw: str) -> bool:
    """Whether the JSON text ``raw`` may hold an integer of more than :data:`MAX_DIGITS` digits
    (digits in strings count too: the line is then left to the checked path)."""
    if len(raw) <= MAX_DIGITS or sum(map(raw.count, _DIGITS)) <= MAX_DIGITS:
        return False  # too few digits in all (ten C scans, cheaper than one regex search)
    return _LONG_NUMBER.search(raw) is not None


_DIGITS = "0123456789"


def _shallow(raw: str) -> bool:
    """True when the JSON text ``raw`` cannot nest deeper than :data:`MAX_DEPTH`: it opens fewer
    arrays and objects than that (brackets inside strings count too, so this bounds the
    depth from above). A value it cannot vouch for defers its line to the checked path,
    which measures the depth exactly."""
    return raw.count("[") + raw.count("{") <= MAX_DEPTH


# Decoders for records with unknown top-level fields (they go to ``meta``), one per set of
# such fields seen, each field kept as its JSON text: the τ-bench files carry ``source`` and
# ``reward`` on every line, which would otherwise take a second pass over the line.
_ABSENT = Raw(b"")
_SHAPES: dict[frozenset[str], tuple[Any, tuple[str, ...]]] = {}
_MAX_SHAPES = 32
_last_shape: tuple[Any, tuple[str, ...]] = (_DECODE_PLAIN, ())


def _decode(data: bytes) -> _Run:
    global _last_shape
    decode, extra_keys = _last_shape
    try:
        run = decode(data)
    except msgspec.ValidationError:
        run, extras = _decode_any_shape(data)
    else:
        extras = {}
        for i, key in enumerate(extra_keys):
            raw = getattr(run, f"x{i}")
            if raw is not _ABSENT:
                extras[key] = _DECODE_ANY(raw)
    if extras:
        run.meta = _with_extras({} if run.meta is None else run.meta, extras)
    return cast("_Run", run)


def _decode_any_shape(data: bytes) -> tuple[_Run, dict[str, Any]]:
    """The run, and its unknown top-level fields decoded, through a second pass."""
    global _last_shape
    try:
        return _DECODE_PLAIN(data), {}
    except msgspec.ValidationError:
        pass
    run = _DECODE_RUN(data)  # raises again if the fault was not an unknown top-level field
    fields = _DECODE_FIELDS(data)
    # In the order of the shapes' fields (sorted), whichever way a line is decoded.
    extras = {k: _DECODE_ANY(fields[k]) for k in sorted(fields) if k not in RUN_KEYS}
    if not extras:
        raise _Unusual
    keys = frozenset(extras)
    shape = _SHAPES.get(keys)
    if shape is None and len(_SHAPES) < _MAX_SHAPES:
        names = tuple(sorted(keys))
        columns = [(f"x{i}", Raw, _ABSENT) for i in range(len(names))]
        rename = {f"x{i}": key for i, key in enumerate(names)}
        struct = msgspec.defstruct(
            "_RunWithExtras",
            columns,
            bases=(_RunNoExtras,),
            forbid_unknown_fields=True,
            rename=rename,
        )
        shape = _SHAPES[keys] = (msgspec.json.Decoder(struct).decode, names)
    if shape is not None:
        _last_shape = shape
    return run, extras


def _with_extras(meta: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with the unknown fields added (see ``soloflow_core.ledger._fields.with_extras``)."""
    for key, value in extras.items():
        if key not in meta:
            meta[key] = value
            continue
        bucket = meta.get(EXTRA_KEY, {})
        if type(bucket) is not dict or key in bucket:
            raise _Unusual  # the checked path words this error
        meta[EXTRA_KEY] = {**bucket, key: value}
    return meta


def _add_run(
    rows: Rows, ordinal: int, run: _Run, *, user: str, agent: str, keep_namespaces: bool
) -> bool:
    run_id = run.run_id
    own_user = user if run.user_id is None else run.user_id
    own_agent = agent if run.agent_id is None else run.agent_id
    if CONTROL_CHARACTER.search(f"{run_id}{own_user}{own_agent}") is not None:
        raise _Unusual  # the checked path names the field and the character
    meta = {} if run.meta is None else run.meta
    if keep_namespaces:
        user, agent = own_user, own_agent
    elif own_user != user or own_agent != agent:
        if own_user != user:
            meta.setdefault("ledger_user_id", own_user)
        if own_agent != agent:
            meta.setdefault("ledger_agent_id", own_agent)
    calls = [] if run.tool_calls is None else run.tool_calls
    models = [] if run.model_calls is None else run.model_calls
    call_rows = [_call_row(ordinal, user, agent, seq=i, c=c) for i, c in enumerate(calls)]
    model_rows = [_model_row(ordinal, user, agent, seq=i, m=m) for i, m in enumerate(models)]
    task, cost = run.task, run.cost
    classification = run.classification
    run_row = (
        ordinal,
        run_id,
        user,
        agent,
        0 if task is None else task,
        _BOOL[run.success],
        _NAN if cost is None or cost - cost != 0 else cost,
        _tokens(run.tokens),
        len(call_rows),
        len(model_rows),
        0 if classification is None else classification,
        _stamp(run.started_at),
        _stamp(run.ended_at),
        _meta_text(meta),
        0 if run.answer is None else run.answer,
    )
    rows.runs.append(run_row)
    rows.calls += call_rows
    if model_rows:
        rows.models += model_rows
    key = (user, agent)
    rows.namespaces[key] = rows.namespaces.get(key, 0) + 1
    return True


def _meta_text(meta: dict[str, Any]) -> str:
    text = _ENCODE(meta).decode()
    if not _shallow(text):
        raise _Unusual
    return text


def _call_row(ordinal: int, user: str, agent: str, *, seq: int, c: _ToolCall) -> tuple[Any, ...]:
    args = str(c.args, "utf-8")
    output = str(c.output, "utf-8")
    if (
        not _shallow(args)
        or (output[0] in "[{" and not _shallow(output))
        or _long_number(args)
        or (output[0] != '"' and _long_number(output))
    ):
        raise _Unusual
    if args[0] != "{":
        if args != "null":
            raise _Unusual
        args = "{}"
    d, call_id, meta = c.duration_ms, c.tool_call_id, c.meta
    return (
        ordinal,
        user,
        agent,
        seq,
        c.name,
        args,
        output,
        _BOOL[c.error],
        _NAN if d is None else d,
        0 if call_id is None else call_id,
        _meta_text(meta) if meta else "null",
    )


def _model_row(ordinal: int, user: str, agent: str, *, seq: int, m: _ModelCall) -> tuple[Any, ...]:
    n_in, n_out, total, d, model = (
        m.input_tokens or 0,
        m.output_tokens or 0,
        m.total_tokens,
        m.duration_ms,
        m.model,
    )
    if total is None:
        total = n_in + n_out
        if total > MAX_INT:
            raise _Unusual
    return (
        ordinal,
        user,
        agent,
        seq,
        0 if model is None else model,
        n_in,
        n_out,
        total,
        _NAN if d is None else d,
        m.tool_calls_requested or 0,
    )


def _count(n: int) -> int:
    if not 0 <= n <= MAX_INT:
        raise _Unusual
    return n


def _tokens(value: int | dict[str, Any] | None) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        return value  # bounded by its type
    assert isinstance(value, dict)
    total, n_in, n_out = (value.get(k) for k in ("total_tokens", "input_tokens", "output_tokens"))
    if total is not None:
        if type(total) is not int:
            raise _Unusual
        return _count(total)
    if type(n_in) is not int or type(n_out) is not int:
        raise _Unusual
    return _count(_count(n_in) + _count(n_out))


def _stamp(value: str | None) -> str | int:
    """An ISO 8601 time as the store writes it on SQLite (UTC, naive taken as UTC), or 0."""
    if value is None:
        return 0
    d = datetime.fromisoformat(value)
    if d.tzinfo is not None:
        d = d.astimezone(UTC)
    return (
        f"{d.year:04d}-{d.month:02d}-{d.day:02d} "
        f"{d.hour:02d}:{d.minute:02d}:{d.second:02d}.{d.microsecond:06d}"
    )


# ---------------------------------------------------------------------- files to chunks

Chunk = tuple[Any, ...]
"""``("rows", file_index, first_ordinal, lines, runs, calls, models, namespaces, deferred,
bytes_read)``: the non-blank lines ``first_ordinal, first_ordinal + 1, ...`` of one file
(``lines`` holds their line numbers), the rows of those read here, ``deferred`` the
``(ordinal, line bytes)`` of the others; or ``("broken", file_index, ordinal, line, reason,
bytes_read)``: the gzip stream ends there; or ``("unreadable", file_index, reason)``."""


def read_chunks(
    files: list[str],
    user: str,
    agent: str,
    *,
    keep_namespaces: bool,
    chunk_lines: int | None = None,
) -> Generator[Chunk, None, None]:
    """The files' lines, read and turned into rows chunk by chunk (see :data:`Chunk`)."""
    chunk_lines = chunk_lines or CHUNK_LINES
    ordinal = 0
    for file_index, name in enumerate(files):
        try:
            # A large buffer: lines of a few kB would otherwise cost a read() each.
            raw = io.BufferedReader(io.FileIO(name), _READ_BUFFER)
        except OSError as exc:
            yield ("unreadable", file_index, f"cannot open the file: {exc.strerror}")
            return
        with raw:
            gz = raw.peek(2)[:2] == _GZIP_MAGIC
            lines: Iterator[bytes] = iter(gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw)
            number = 0
            while True:
                rows, numbers, deferred = Rows(), [], []
                first = ordinal + 1
                try:
                    for data in lines:
                        number += 1
                        if number == 1 and data.startswith(codecs.BOM_UTF8):
                            data = data[len(codecs.BOM_UTF8) :]
                        if data[:1] != b"{" and not data.strip():  # strip() copies the line
                            continue
                        ordinal += 1
                        numbers.append(number)
                        if not add_line(
                            rows,
                            ordinal,
                            data,
                            user=user,
                            agent=agent,
                            keep_namespaces=keep_namespaces,
                        ):
                            deferred.append((ordinal, data))
                        if len(numbers) >= chunk_lines:
                            break
                except (EOFError, OSError, zlib.error) as exc:
                    if numbers:
                        yield _rows(
                            file_index,
                            first,
                            numbers,
                            rows=rows,
                            deferred=deferred,
                            position=raw.tell(),
                        )
                    reason = (
                        f"the gzip data is truncated or corrupt ({exc}); "
                        "the lines before it were read"
                    )
                    ordinal += 1
                    yield ("broken", file_index, ordinal, number + 1, reason, raw.tell())
                    break
                if not numbers:
                    break
                yield _rows(
                    file_index, first, numbers, rows=rows, deferred=deferred, position=raw.tell()
                )


def _rows(
    file_index: int,
    first: int,
    numbers: list[int],
    *,
    rows: Rows,
    deferred: list[tuple[int, bytes]],
    position: int,
) -> Chunk:
    return (
        "rows",
        file_index,
        first,
        numbers,
        rows.runs,
        rows.calls,
        rows.models,
        rows.namespaces,
        deferred,
        position,
    )
