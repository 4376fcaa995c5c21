"""The text of a LangChain message: the one reading that capture, routing and the sequential
workflow share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["content_text", "message_text", "task_of"]


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string as it is; of a list of content blocks,
    the string blocks and the ``{"type": "text"}`` blocks' ``text``, joined (images, tool
    calls and reasoning blocks are not text); "" for anything else.

    Example::

        >>> content_text(["Hello, ", {"type": "text", "text": "Ann"}, {"type": "image_url"}])
        'Hello, Ann'
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        )
    return ""


def message_text(message: Any) -> str:
    """:func:`content_text` of ``message.content`` (a ``BaseMessage`` or anything with one)."""
    return content_text(getattr(message, "content", None))


def task_of(messages: Sequence[Any]) -> tuple[str, int]:
    """(the first human message's text, how many human messages there are)."""
    humans = [m for m in messages if getattr(m, "type", None) == "human"]
    if not humans:
        return "", 0
    return message_text(humans[0]), len(humans)
