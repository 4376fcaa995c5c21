"""The fast lane of :func:`~soloflow_core.ledger.reader.parse_line`: a line in the usual shape
read by ``pydantic_core`` straight into a :class:`~soloflow_core.store.writer.RunRow`.

Anything unusual is left to the checked path (:func:`~soloflow_core.ledger.reader.parse_record`),
which is the reference and words the errors; a property test keeps the two paths equal.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from soloflow_core.errors import LedgerError
from soloflow_core.ledger._fields import (
    MISSING,
    MODEL_CALL_FIELDS,
    RUN_FIELDS,
    TOOL_CALL_FIELDS,
    check_free_form,
    identifier,
    namespace,
    optional_datetime,
    optional_identifier,
    printable_name,
    tokens,
    with_extras,
)
from soloflow_core.ledger._rows import (
    MAX_CLASSIFICATION,
    MAX_DEPTH,
    MAX_INT,
    MAX_MODEL,
    MAX_RUN_ID,
    MAX_TOOL_CALL_ID,
    MAX_TOOL_NAME,
)
from soloflow_core.store.writer import ModelCallRow, RunRow, ToolCallRow

__all__ = ["parse_plain"]


def parse_plain(data: bytes, default_user: str, default_agent: str) -> RunRow | None:
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
                    check_free_form(value, key)
            for call in run.tool_calls:
                for value in (call.args, call.output, call.meta):
                    check_free_form(value, "")
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
        meta = with_extras(meta, {k: v for k, v in obj.items() if k not in RUN_FIELDS}, "meta")
    return RunRow(
        run_id=printable_name(identifier(get("run_id", MISSING), "run_id", MAX_RUN_ID), "run_id"),
        user_id=namespace(get("user_id"), "user_id", default_user),
        agent_id=namespace(get("agent_id"), "agent_id", default_agent),
        task=task,
        answer=answer,
        success=success,
        cost=cost,
        tokens=tokens(get("tokens")),
        tool_calls=tool_calls,
        model_calls=model_calls,
        started_at=optional_datetime(get("started_at"), "started_at"),
        ended_at=optional_datetime(get("ended_at"), "ended_at"),
        classification=optional_identifier(
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
        meta = with_extras(meta, extras, "meta")
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
