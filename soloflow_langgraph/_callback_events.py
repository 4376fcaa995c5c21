"""What LangChain's callback events carry, read into plain values: a root's task and answer,
a tool call's arguments and output, a model call's usage and model, the namespace and side-effect
flags in ``metadata``. Private to :mod:`soloflow_langgraph.callbacks`."""

from __future__ import annotations

import ast
import functools
import json
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from soloflow_core.ledger.tokens import token_usage
from soloflow_core.models import ToolCall
from soloflow_core.models.names import printable
from soloflow_core.plugins import call_hook
from soloflow_core.store.json_values import MAX_JSON_DEPTH, cut_value
from soloflow_langgraph._messages import content_text

if TYPE_CHECKING:
    import pluggy
    from langchain_core.outputs import LLMResult

    from soloflow_core.mining.watch import DetectionWatcher
    from soloflow_core.models import TaskRun
    from soloflow_langgraph._capture_state import ToolCallCapture

logger = logging.getLogger("soloflow_langgraph.callbacks")
_P = ParamSpec("_P")
_H = TypeVar("_H")


def never_raises(
    method: Callable[Concatenate[_H, _P], None],
) -> Callable[Concatenate[_H, _P], None]:
    """Log any error of a callback and return: capture must never break the agent."""

    @functools.wraps(method)
    def guarded(self: _H, *args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception:
            logger.exception("SoloFlow capture: %s failed; the agent goes on", method.__name__)

    return guarded


def error_text(error: BaseException) -> str:
    """How an error is recorded: its type and message."""
    return f"{type(error).__name__}: {error}"


def message_text(content: Any) -> str | None:
    return content_text(content) or None


def human_text(message: Any) -> str | None:
    """The text of ``message`` if it is a human message in any of LangChain's input forms."""
    if isinstance(message, str):
        return message or None
    if isinstance(message, dict):
        if message.get("role") in ("user", "human") or message.get("type") == "human":
            return message_text(message.get("content"))
        return None
    if isinstance(message, tuple | list) and len(message) == 2:
        return message_text(message[1]) if message[0] in ("user", "human") else None
    if getattr(message, "type", None) == "human":
        return message_text(getattr(message, "content", None))
    return None


def first_human(messages: Any) -> str | None:
    if isinstance(messages, str) or not isinstance(messages, list | tuple):
        return human_text(messages)
    for m in messages:
        text = human_text(m)
        if text is not None:
            return text
    return None


def answer_from_outputs(outputs: Any) -> str | None:
    """The final answer of a root's output: its last message, when it is an AI message that
    asks for no tool (a messages state; a bare string output too)."""
    if isinstance(outputs, str):
        return outputs or None
    messages = outputs.get("messages") if isinstance(outputs, dict) else None
    if not isinstance(messages, list | tuple) or not messages:
        return None
    last = messages[-1]
    if getattr(last, "type", None) != "ai" or getattr(last, "tool_calls", None):
        return None
    return message_text(getattr(last, "content", None))


ROUTED_KEYS = {
    "soloflow_flow": "flow",
    "soloflow_flow_version": "version",
    "soloflow_run_id": "flow_run_id",
    "soloflow_status": "status",
}
"""The final message's ``response_metadata`` keys the routing middleware sets when a flow
answered the request, and their names in the run's ``meta["routed"]``."""


def routed_flow(outputs: Any) -> dict[str, Any] | None:
    """The flow that answered a root with no model call (the middleware's routing), as the
    final message's ``response_metadata`` names it; None when the agent answered."""
    messages = outputs.get("messages") if isinstance(outputs, dict) else None
    if not isinstance(messages, list | tuple) or not messages:
        return None
    meta = getattr(messages[-1], "response_metadata", None)
    if not isinstance(meta, dict) or not isinstance(meta.get("soloflow_flow"), str):
        return None
    return {name: meta[key] for key, name in ROUTED_KEYS.items() if key in meta}


def task_from_inputs(inputs: Any) -> str | None:
    """The first human message of a root's input (a messages state, a string, ``{"input"}``)."""
    if isinstance(inputs, dict):
        if "messages" in inputs:
            return first_human(inputs["messages"])
        value = inputs.get("input")
        return value if isinstance(value, str) and value else None
    if isinstance(inputs, str | list | tuple):
        return first_human(inputs)
    return None


def args_from(input_str: str, inputs: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's arguments: ``inputs`` when given (``input_str`` is only ``str(dict)``)."""
    if isinstance(inputs, dict):
        return dict(inputs)
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(input_str)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        break
    return {"input": input_str}


def plain(value: Any, depth: int = 0) -> Any:
    """A JSON-able copy of ``value``: anything JSON cannot hold becomes its ``str``; arrays
    and objects nested deeper than the store keeps are cut (``docs/ledger.md``, Limits)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict | list | tuple) and depth >= MAX_JSON_DEPTH:
        return cut_value(value)
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, depth + 1) for v in value]
    return str(value)


def tool_output(output: Any) -> tuple[Any, bool, str | None]:
    """(output, error reported, tool_call_id): inside agents ``output`` is a ToolMessage."""
    if getattr(output, "type", None) == "tool" and hasattr(output, "tool_call_id"):
        return output.content, getattr(output, "status", None) == "error", output.tool_call_id
    return output, False, None


def model_result(response: LLMResult) -> tuple[dict[str, Any] | None, list[str | None]]:
    """(token usage, ids of the tool calls requested) of a model response; the usage's counts
    as :func:`token_usage` reads them."""
    gens = response.generations[0] if response.generations else []
    message = getattr(gens[0], "message", None) if gens else None
    usage = getattr(message, "usage_metadata", None)
    calls = [c.get("id") for c in getattr(message, "tool_calls", None) or ()]
    if usage is None and isinstance(response.llm_output, dict):  # completion-style LLMs
        legacy = response.llm_output.get("token_usage") or response.llm_output.get("usage")
        if isinstance(legacy, dict):
            usage = {
                "input_tokens": legacy.get("prompt_tokens") or legacy.get("input_tokens"),
                "output_tokens": legacy.get("completion_tokens") or legacy.get("output_tokens"),
                "total_tokens": legacy.get("total_tokens"),
            }
    return token_usage(usage), calls


def response_model(response: LLMResult) -> str | None:
    """The model that answered, as the provider names it (``response_metadata``)."""
    gens = response.generations[0] if response.generations else []
    meta = getattr(getattr(gens[0], "message", None), "response_metadata", None) if gens else None
    if not isinstance(meta, dict):
        return None
    name = meta.get("model_name") or meta.get("model")
    return name if isinstance(name, str) and name else None


EFFECT_KEYS = ("side_effects", "read_only")
USER_KEY, AGENT_KEY = "soloflow_user_id", "soloflow_agent_id"
"""The keys of an invocation's ``metadata`` naming its namespace (one handler, many users)."""


def namespace_of(metadata: Any) -> tuple[str | None, str | None]:
    """(user, agent) from an invocation's ``config["metadata"]``; None where it names none."""
    if not isinstance(metadata, dict):
        return None, None
    user, agent = metadata.get(USER_KEY), metadata.get(AGENT_KEY)
    return _own_id(user, USER_KEY), _own_id(agent, AGENT_KEY)


def _own_id(value: Any, key: str) -> str | None:
    """A namespace part an invocation names; one holding a control character (which no id
    may hold) is kept with the character escaped (``alice\\n``), a namespace of its own, with
    a warning: capture never fails the agent, and never writes into another namespace."""
    if not isinstance(value, str) or not value:
        return None
    shown = printable(value)
    if shown != value:
        logger.warning(
            "SoloFlow capture: metadata %s %r holds a control character; the run is stored "
            "under %r (an id is one line of printable text)",
            key,
            value,
            shown,
        )
    return shown


def effects(metadata: Any) -> dict[str, Any] | None:
    """What a tool's ``metadata`` says that SoloFlow keeps (LangChain hands it to
    ``on_tool_start``): its side-effect flags (e.g. ``StructuredTool(...,
    metadata={"read_only": True})``; the generaliser runs steps of read-only tools in
    parallel), and the flow a flow tool runs (``soloflow_flow``)."""
    if not isinstance(metadata, dict):
        return None
    found: dict[str, Any] = {
        k: metadata[k] for k in EFFECT_KEYS if isinstance(metadata.get(k), bool)
    }
    if isinstance(metadata.get("soloflow_flow"), str):
        found["soloflow_flow"] = metadata["soloflow_flow"]
    return found or None


def tool_call(call: ToolCallCapture) -> ToolCall:
    return ToolCall(
        name=call.name,
        args=plain(call.args),
        output=plain(call.output),
        error=call.error,
        duration_ms=call.duration_ms,
        tool_call_id=call.tool_call_id,
        meta=call.meta or {},
    )


def classify(pm: pluggy.PluginManager, task: str) -> str | None:
    """The ``soloflow_classify_task`` label of ``task``; None when no plugin gives one (a
    failing plugin is logged, never raised)."""
    if not pm.hook.soloflow_classify_task.get_hookimpls():
        return None
    try:
        label = call_hook(pm, "soloflow_classify_task", task=task)
    except Exception:
        logger.exception("SoloFlow capture: a soloflow_classify_task plugin failed")
        return None
    return label if isinstance(label, str) else None


def after_written(pm: pluggy.PluginManager, watcher: DetectionWatcher | None, run: TaskRun) -> None:
    """What follows a run's write: incremental detection, then ``soloflow_run_finished``
    (a failure of either is logged, never raised)."""
    if watcher is not None:
        try:
            watcher.observe(run)
        except Exception:
            logger.exception("SoloFlow capture: incremental detection failed")
    if pm.hook.soloflow_run_finished.get_hookimpls():
        try:
            call_hook(pm, "soloflow_run_finished", run=run)
        except Exception:
            logger.exception("SoloFlow capture: a soloflow_run_finished plugin failed")
