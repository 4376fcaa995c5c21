"""Capture through the middleware's own hooks: no ``config={"callbacks": ...}`` needed.

:class:`HookCapture` drives a :class:`~soloflow_langgraph.callbacks.SoloFlowCallbackHandler`
through its public callback methods, from the hooks of
:class:`~soloflow_langgraph.routing.middleware.SoloFlowMiddleware`: the invocation starts in
``before_agent`` and ends in ``after_agent``; each model call and tool call is reported
around the call it wraps. The run stored is the one the handler would store had it been
passed as a callback. When a SoloFlow handler writing to the same store already follows the
invocation (passed in ``config["callbacks"]``), the hooks record nothing: one run, not two.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langgraph.config import get_config
from langgraph.types import Command

from soloflow_langgraph.callbacks import SoloFlowCallbackHandler

if TYPE_CHECKING:
    from langchain.agents.middleware import ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ToolCallRequest

__all__ = ["HookCapture", "capture_id"]


def _config() -> dict[str, Any]:
    try:
        return dict(get_config())
    except RuntimeError:  # not inside a graph run
        return {}


class HookCapture:
    """One task run per agent invocation, recorded from middleware hooks."""

    def __init__(self, handler: SoloFlowCallbackHandler) -> None:
        self.handler = handler

    def _followed(self, config: dict[str, Any]) -> bool:
        """Whether a SoloFlow handler on the same store already follows this invocation."""
        callbacks = config.get("callbacks")
        handlers = getattr(callbacks, "handlers", callbacks) or []
        return any(
            isinstance(h, SoloFlowCallbackHandler) and h.store is self.handler.store
            for h in handlers
        )

    def start(self, messages: list[Any]) -> str | None:
        """Open the invocation's run; its id, or None when another handler records it."""
        config = _config()
        if self._followed(config):
            return None
        root = uuid.uuid4()
        name = (config.get("metadata") or {}).get("lc_agent_name") or "agent"
        self.handler.on_chain_start(
            {"name": name},
            {"messages": messages},
            run_id=root,
            parent_run_id=None,
            name=name,
            metadata=config.get("metadata"),
        )
        return str(root)

    def finish(self, root: str, messages: list[Any]) -> None:
        self.handler.on_chain_end(
            {"messages": messages}, run_id=uuid.UUID(root), parent_run_id=None
        )

    def fail(self, root: str, error: BaseException) -> None:
        self.handler.on_chain_error(error, run_id=uuid.UUID(root), parent_run_id=None)

    # ------------------------------------------------------------------ around each call

    def model_started(self, root: str, request: ModelRequest[Any]) -> uuid.UUID:
        call = uuid.uuid4()
        model = request.model
        name = getattr(model, "model_name", None) or getattr(model, "model", None)
        self.handler.on_chat_model_start(
            {"name": type(model).__name__},
            [list(request.messages)],
            run_id=call,
            parent_run_id=uuid.UUID(root),
            metadata={"ls_model_name": name} if isinstance(name, str) else None,
        )
        return call

    def model_ended(self, root: str, call: uuid.UUID, response: ModelResponse[Any]) -> None:
        ai = next((m for m in response.result if isinstance(m, AIMessage)), None)
        generations = [[ChatGeneration(message=ai)]] if ai is not None else [[]]
        self.handler.on_llm_end(
            LLMResult(generations=generations),  # type: ignore[arg-type]
            run_id=call,
            parent_run_id=uuid.UUID(root),
        )

    def tool_started(self, root: str, request: ToolCallRequest) -> uuid.UUID:
        call = uuid.uuid4()
        tc = request.tool_call
        args = tc.get("args") or {}
        self.handler.on_tool_start(
            {"name": tc.get("name")},
            str(args),
            run_id=call,
            parent_run_id=uuid.UUID(root),
            inputs=args if isinstance(args, dict) else None,
            tool_call_id=tc.get("id"),
            metadata=getattr(request.tool, "metadata", None),
        )
        return call

    def tool_ended(self, root: str, call: uuid.UUID, response: Any) -> None:
        message = _tool_message(response) if isinstance(response, Command) else response
        self.handler.on_tool_end(message, run_id=call, parent_run_id=uuid.UUID(root))

    def call_failed(self, root: str, call: uuid.UUID, error: BaseException, *, tool: bool) -> None:
        """A model or tool call raised: the call and the invocation end with the error."""
        if tool:
            self.handler.on_tool_error(error, run_id=call, parent_run_id=uuid.UUID(root))
        else:
            self.handler.on_llm_error(error, run_id=call, parent_run_id=uuid.UUID(root))
        self.fail(root, error)


def _tool_message(command: Command[Any]) -> Any:
    """The ToolMessage a ``Command`` returned by a tool call carries, if any."""
    update = command.update if isinstance(command.update, dict) else {}
    messages = update.get("messages") or []
    return next((m for m in messages if getattr(m, "type", None) == "tool"), command)


def capture_id(state: Any) -> str | None:
    """The task run the invocation is captured as, from the state ``before_agent`` wrote."""
    root = state.get("soloflow_capture") if isinstance(state, dict) else None
    return root if isinstance(root, str) else None
