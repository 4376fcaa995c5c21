"""A scripted chat model: plays the LLM in tests and the demo, with no network.

``create_agent`` needs three things from a model that the stock fakes of ``langchain_core``
do not all give: ``bind_tools`` (it is called on every agent build), non-streaming tool-call
messages that still stream (``GenericFakeChatModel`` cannot stream a tool-call-only message),
and responses that do not silently cycle (``FakeMessagesListChatModel`` does). This model
implements ``_generate`` only, so ``stream``/``astream`` fall back to ``invoke``.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> model = ScriptedChatModel(responses=[AIMessage(content="hello there")])
    >>> model.invoke("hi").usage_metadata["output_tokens"]
    2
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr, model_validator

__all__ = ["ScriptedChatModel"]

Script = Callable[[list[BaseMessage]], AIMessage]


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return len(str(value))


def _estimate_usage(messages: Sequence[BaseMessage], reply: AIMessage) -> dict[str, int]:
    """About four characters per token, as the usual rule of thumb; at least one each way."""
    prompt_chars = 0
    for m in messages:
        prompt_chars += _chars(m.content)
        for call in getattr(m, "tool_calls", None) or ():
            prompt_chars += _chars(call.get("args", {}))
    reply_chars = _chars(reply.content) + sum(_chars(c.get("args", {})) for c in reply.tool_calls)
    inp = max(1, prompt_chars // 4)
    out = max(1, reply_chars // 4)
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies come from a script or a fixed list.

    Give exactly one of:

    - ``script``: a function of the conversation so far returning the next ``AIMessage``;
    - ``responses``: replies consumed in order; asking for one more raises ``RuntimeError``
      (no cycling, so a test that loops more than it should fails loudly).

    Every reply gets ``usage_metadata`` (estimated from character counts) when it has
    none, and a fresh unique ``id``. ``calls`` counts the replies produced.
    """

    script: Script | None = None
    """The next reply as a function of the conversation so far."""
    responses: list[AIMessage] | None = None
    """Fixed replies, consumed in order."""
    model_name: str = "soloflow-scripted"
    """Reported to callbacks as ``ls_model_name``."""
    calls: int = 0
    """How many times the model was called (``_generate`` calls)."""

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _next: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _one_source(self) -> ScriptedChatModel:
        if (self.script is None) == (self.responses is None):
            raise ValueError("ScriptedChatModel needs exactly one of script= or responses=")
        return self

    @property
    def _llm_type(self) -> str:
        return "soloflow-scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Return the model itself: the script decides which tools to call."""
        return self

    def _next_reply(self, messages: list[BaseMessage]) -> AIMessage:
        if self.script is not None:
            reply = self.script(list(messages))
            if not isinstance(reply, AIMessage):
                raise TypeError(
                    f"the ScriptedChatModel script returned {type(reply).__name__}; "
                    "it must return an AIMessage"
                )
            return reply
        assert self.responses is not None
        with self._lock:
            index = self._next
            if index >= len(self.responses):
                raise RuntimeError(
                    f"ScriptedChatModel ran out of responses: call {index + 1} but only "
                    f"{len(self.responses)} were given; add responses or use script="
                )
            self._next = index + 1
        return self.responses[index]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self.calls += 1
        reply = self._next_reply(messages)
        update: dict[str, Any] = {"id": f"sf-{uuid.uuid4().hex}"}
        if reply.usage_metadata is None:
            update["usage_metadata"] = _estimate_usage(messages, reply)
        # A copy: the caller's response objects stay untouched and may be reused.
        reply = reply.model_copy(update=update)
        return ChatResult(generations=[ChatGeneration(message=reply)])
