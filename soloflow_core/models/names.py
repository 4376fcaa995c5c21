"""Names and ids: one line of text that every store holds and every terminal prints as it is.

A user or agent id, a run id, a flow name or a candidate id holds no control character
(Unicode category Cc: U+0000–U+001F, U+007F–U+009F): PostgreSQL cannot store a NUL at all
(SQLite can, so the same name would work on one store and not the other), a line feed or a
tab breaks the CLI's tables, and an escape (U+001B) rewrites what the terminal shows. The
namespace's parts are also joined with U+001F into the key of a candidate's id
(:func:`~soloflow_core.models.candidate_id_for`), which stays unambiguous only while neither
part holds one. Free text (a task, a description, an answer) keeps its line feeds and tabs;
a NUL in it is dropped on every store (``soloflow_core.store.json_values.storable_text``).

Example:
    >>> check_name("alice", "user_id")
    'alice'
    >>> check_name("ali\\nce", "user_id")
    Traceback (most recent call last):
    ...
    soloflow_core.errors.InvalidNameError: user_id: a control character (U+000A, a line feed) ...
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationInfo

from soloflow_core.errors import InvalidNameError

__all__ = [
    "CONTROL_CHARACTER",
    "NAME_PATTERN",
    "Name",
    "check_name",
    "check_namespace",
    "find_nul",
    "printable",
]

CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""What no name or id may hold: the C0 and C1 control characters and DEL."""

_CALLED = {
    "\x00": "NUL",
    "\t": "a tab",
    "\n": "a line feed",
    "\r": "a carriage return",
    "\x1b": "an escape",
    "\x1f": "a unit separator",
    "\x7f": "a delete",
}


def check_name(value: str, field: str) -> str:
    """``value`` when it holds no control character.

    Raises:
        InvalidNameError: naming ``field``, the first control character and its position.
    """
    found = CONTROL_CHARACTER.search(value)
    if found is None:
        return value
    char, at = found.group(), found.start()
    called = _CALLED.get(char)
    code = f"U+{ord(char):04X}" + (f", {called}" if called else "")
    shown = value if len(value) <= 60 else value[:57] + "..."
    raise InvalidNameError(
        f"{field + ': ' if field else ''}a control character ({code}) at position {at} of "
        f"{shown!r}; a name or id is one line of printable text: remove the character, or "
        "write a space or '-' in its place",
        field=field,
        position=at,
        character=char,
    )


def check_namespace(user_id: str, agent_id: str) -> None:
    """Both parts of a namespace, checked by :func:`check_name`."""
    check_name(user_id, "user_id")
    check_name(agent_id, "agent_id")


def find_nul(value: Any, path: str = "") -> tuple[str, int] | None:
    """Where the first NUL of a JSON-like ``value`` (dicts, lists, text) is: the dotted path
    of the text holding it (``steps[0].input_map.q``; a key's path ends with the key) and
    its position in that text; None when there is none."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return at, item.index("\x00")
        elif isinstance(item, dict):
            for k, v in reversed(item.items()):
                key = f"{at}.{k}" if at else str(k)
                if isinstance(k, str) and "\x00" in k:
                    return key, k.index("\x00")
                stack.append((key, v))
        elif isinstance(item, list | tuple):
            stack.extend((f"{at}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def printable(text: str) -> str:
    """``text`` with each control character written as its escape (``\\n``, ``\\x1b``): a
    name made of other names (a learned flow's, of its tools') that is always valid."""
    if CONTROL_CHARACTER.search(text) is None:
        return text
    return CONTROL_CHARACTER.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


STORED: dict[str, Any] = {"soloflow_stored": True}
"""The validation context of what the store reads back (``model_validate(x,
context=STORED)``): a name is checked where it enters, not again where it is read, so a row
an older version stored with a control character stays readable (nothing recorded is lost)."""


def _checked(value: str, info: ValidationInfo) -> str:
    if info.context and info.context.get("soloflow_stored"):
        return value
    return check_name(value, "")  # pydantic names the field (its path) itself


NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
""":data:`CONTROL_CHARACTER` refused, as a JSON Schema ``pattern`` (ECMA-262)."""


class _NameSchema:
    """Writes :data:`NAME_PATTERN` into a name's JSON Schema (an API's OpenAPI document), so
    that a client reading it knows what :func:`check_name` refuses; the check itself stays
    the validator's (its message names the character and its position)."""

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        out = handler(schema)
        out.setdefault("pattern", NAME_PATTERN)
        return out


Name = Annotated[str, AfterValidator(_checked), _NameSchema()]
"""A ``str`` field of a model that is a name or id (see :func:`check_name`)."""
