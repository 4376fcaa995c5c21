"""Free-form values as the store keeps them: storable text, JSON-safe copies, JSON text.

Private to :mod:`soloflow_core.store` and its callers' writes (``args``, ``output``, ``meta``,
span attributes): what neither database can hold (NUL, lone surrogates, NaN, integers past
Python's 4300-digit limit, nesting deeper than :data:`MAX_JSON_DEPTH`) is rewritten the same
way on every path, and the common case is serialised once, fast.
"""

from __future__ import annotations

import json
import math
from itertools import chain
from typing import Any

from pydantic_core import to_json


def storable_text(value: str) -> str:
    """``value`` without what neither database stores: NUL characters (dropped) and lone
    UTF-16 surrogates, which are not UTF-8 encodable (written as ``\\udXXX`` text)."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    if not value.isascii():  # O(1) in CPython: pure-ASCII text skips the encode below
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


MAX_JSON_DEPTH = 64
"""How deep arrays and objects nest in a stored free-form value (``args``, ``output``,
``meta``); the ledger refuses deeper records by name (``soloflow_core.ledger._rows.MAX_DEPTH``,
equal), a capture's deeper value is cut there (:func:`cut_value`)."""
CUT_MARKER = "[soloflow: cut, nested deeper than 64] "
"""How a cut value starts: the marker, then the first :data:`CUT_TEXT` characters of the cut
part's JSON (or of its ``repr``)."""
CUT_TEXT = 2000
_TOO_LONG = 10**4300
_LONG_INT = "[soloflow: cut, an integer of more than 4300 digits]"


def cut_value(value: Any) -> str:
    """What the store keeps of a value nested deeper than :data:`MAX_JSON_DEPTH`: a string,
    :data:`CUT_MARKER` and the start of the value's text."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(value)
        except (ValueError, RecursionError):
            text = type(value).__name__
    return storable_text(CUT_MARKER + text[:CUT_TEXT])


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A JSON-safe copy: non-JSON values become strings, NaN/inf become None, text is
    made storable (see ``storable_text``), an integer of more than 4300 digits (which Python
    would refuse to write) becomes a marker string, arrays and objects nested deeper than :data:`MAX_JSON_DEPTH` are cut
    (:func:`cut_value`)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value.bit_length() < 14000 or abs(value) < _TOO_LONG else _LONG_INT
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict | list | tuple) and _depth >= MAX_JSON_DEPTH:
        return cut_value(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, _depth + 1) for v in value]
    try:
        return jsonable(json.loads(json.dumps(value, default=str)), _depth)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _refuse(_value: Any) -> Any:
    raise TypeError


# One encoder, built once (json.dumps with options builds one per call): the same text as
# ``json.dumps`` (SQLAlchemy's serializer), but refusing NaN/inf and non-JSON objects, which
# then take the ``jsonable`` path. No cycle check: a cycle ends in RecursionError, also caught.
_encode = json.JSONEncoder(allow_nan=False, default=_refuse, check_circular=False).encode

# In ``json.dumps`` text: a NUL or a UTF-16 surrogate (``storable_text`` rewrites both), or a key
# that was a bool or None (``jsonable`` writes ``str(key)``, json writes ``true``/``null``).
_NEEDS_JSONABLE = ("\\u0000", "\\ud", '"true": ', '"false": ', '"null": ')


def json_text(value: Any) -> str:
    """``json.dumps(jsonable(value))``, fast: what SQLAlchemy would store for ``value`` in
    a JSON column on SQLite, serialised once."""
    if value is None:
        return "null"
    if type(value) is str:
        text = _encode(value)
        if "\\u0000" in text or "\\ud" in text:
            return json.dumps(jsonable(value))
        return text
    if type(value) is dict and not value:
        return "{}"
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(jsonable(value))
    for marker in _NEEDS_JSONABLE:
        if marker in text:
            return json.dumps(jsonable(value))
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and too_deep(value):
        return json.dumps(jsonable(value))
    return text


def too_deep(value: Any) -> bool:
    """Whether arrays and objects (lists, tuples, dicts) nest deeper than
    :data:`MAX_JSON_DEPTH` in ``value``; iterative, so any depth is measured."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list | tuple):
            continue
        if depth >= MAX_JSON_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in item)
    return False


def parsed_json_text(value: Any) -> str:
    """:func:`json_text` of a value a JSON parser returned, in pydantic-core's compact form
    (twice as fast; the same JSON once read back). Only for such values: a datetime, a set
    or a non-text key would be written otherwise than :func:`jsonable` writes it."""
    if value is None:
        return "null"
    if type(value) is dict and not value:
        return "{}"
    text = to_json(value, inf_nan_mode="null").decode()
    if "\\u0000" in text:  # NUL: dropped from text, as storable_text does
        return json_text(value)
    return text


_FLAT = frozenset((str, float, bool, type(None)))
_INT_BOUND = 1 << 63


def _is_flat(value: dict[Any, Any]) -> bool:
    """Whether ``value``'s keys are text and its values text, numbers, booleans or None."""
    for k, v in value.items():
        kind = type(v)
        if type(k) is not str or (
            kind not in _FLAT and (kind is not int or not -_INT_BOUND < v < _INT_BOUND)
        ):
            return False
    return True


def flat_json_text(value: dict[str, Any]) -> str:
    """:func:`json_text` of a dict whose values are text, numbers, booleans or None (span
    attributes), about four times faster: pydantic-core's compact form, the same JSON once read
    back. Any other dict goes through :func:`json_text`."""
    if not _is_flat(value):
        return json_text(value)
    try:
        text = to_json(value, inf_nan_mode="null").decode()
    except ValueError:  # a lone surrogate: json_text writes it as text
        return json_text(value)
    return json_text(value) if "\\u0000" in text else text


_FLAT_OR_INT = _FLAT | {int}


def records_json_text(records: list[list[Any]], dicts: list[dict[str, Any]]) -> str:
    """:func:`json_text` of ``records`` (lists of text, numbers, booleans, None, and the dicts
    ``dicts``: packed spans), fast: pydantic-core's compact form, the same JSON once read back.
    A dict of ``dicts`` holding other than text, numbers, booleans or None by text keys (or an
    integer past 64 bits) sends the whole list through :func:`json_text`."""
    if not set(map(type, chain.from_iterable(dicts))) <= {str}:
        return json_text(records)
    return values_json_text(records, list(chain.from_iterable(map(dict.values, dicts))))


def values_json_text(records: list[Any], values: list[Any]) -> str:
    """:func:`json_text` of ``records`` (lists of text, numbers, booleans and None, whose only
    other values are ``values``, of any type), fast as :func:`records_json_text`: one of
    ``values`` other than text, a number, a boolean or None (or an integer past 64 bits)
    sends the whole list through :func:`json_text`."""
    kinds = set(map(type, values))
    if not kinds <= _FLAT_OR_INT:
        return json_text(records)
    if int in kinds:
        ints = list(filter(int.__instancecheck__, values))
        if not (-_INT_BOUND < min(ints) and max(ints) < _INT_BOUND):
            return json_text(records)
    try:
        text = to_json(records, inf_nan_mode="null").decode()
    except ValueError:  # a lone surrogate: json_text writes it as text
        return json_text(records)
    return json_text(records) if "\\u0000" in text else text
