"""Role agents: anything the user has (Runnable, function, chat model) → a typed result.

An agent for a role may be:

- a **chat model** (``BaseChatModel``): it gets the built-in role prompt as its system
  message and the rendered :class:`RoleInput` as the human message, and must answer with
  a JSON object (code fences and text around it are tolerated);
- a :class:`ChatModelAgent` ``(model, prompt)``: the same with your own role prompt (the
  answer format is appended to it);
- a **Runnable** (a chain, a ``create_agent`` agent, a compiled graph): invoked with
  :meth:`RoleInput.as_runnable_input` (every field, ``context`` and ``messages``);
- a **callable**: called with the :class:`RoleInput`.

Each may return the role's result model, a dict, a JSON string, a message whose content is
JSON, or an agent state (``{"messages": [...]}``, or its ``structured_response``). Anything
else is an :class:`AgentOutputError` naming the role and what it must return.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, ValidationError

from soloflow_core.errors import (
    AgentError,
    AgentOutputError,
    ConfigError,
    MissingAgentsError,
    PluginError,
    SoloFlowError,
)
from soloflow_core.plugins import plugin_errors
from soloflow_langgraph._messages import message_text
from soloflow_langgraph.sequential.budget import UsageMeter, metered_config
from soloflow_langgraph.sequential.hookspecs import add_sequential_hookspecs
from soloflow_langgraph.sequential.models import RESULT_TYPES, ROLES, RoleInput

if TYPE_CHECKING:
    import pluggy

__all__ = [
    "ANSWER_FORMATS",
    "ROLE_PROMPTS",
    "ChatModelAgent",
    "RoleAgent",
    "as_role_agent",
    "expected_output",
    "parse_role_output",
    "registered_agents",
    "resolve_agents",
]

ROLE_PROMPTS: dict[str, str] = {
    "contract_writer": (
        "You are the contract writer of a software workflow. Write the contracts for the "
        "task: requirements, interfaces and acceptance criteria, as Markdown with headings "
        "and bullet points, each bullet's first sentence stating the rule."
    ),
    "auditor": (
        "You are the auditor. Check the implementation in the workspace against the "
        "contracts summary. Score its compliance from 0 (nothing done) to 1 (every contract "
        "met) and list each violated contract in one sentence."
    ),
    "code_generator": (
        "You are the code generator. Change the implementation in the workspace so that it "
        "fixes the violations listed, and only those."
    ),
    "evaluator": (
        "You are the evaluator. The implementation meets its contracts; judge whether the "
        "work as a whole does the task (run the tests, review the behaviour)."
    ),
    "refiner": (
        "You are the refiner. The implementation meets the contracts but the evaluation "
        "failed, so the contracts are wrong or incomplete. Revise them using the feedback and "
        "return the complete revised contracts."
    ),
    "pr_orchestrator": (
        "You are the PR orchestrator. The work passed evaluation: open a pull request for it."
    ),
}
"""The built-in role prompts (system messages) for chat models."""

ANSWER_FORMATS: dict[str, str] = {
    "contract_writer": '{"contracts": "<the contracts as Markdown>"}',
    "auditor": '{"compliance_score": <number from 0 to 1>, "violations": ["<one sentence>", ...]}',
    "code_generator": '{"summary": "<what you changed>", "files_changed": ["<path>", ...]}',
    "evaluator": '{"satisfied": <true or false>, "feedback": "<why, for the refiner>"}',
    "refiner": '{"contracts": "<the complete revised contracts>", "notes": "<what changed>"}',
    "pr_orchestrator": '{"pr_url": "<the pull request address>", "summary": "<its title>"}',
}
"""The JSON object each role must answer with."""


def expected_output(role: str) -> str:
    """What ``role`` must return, in words (used in error messages)."""
    model = RESULT_TYPES[role]
    fields = ", ".join(
        f"{name}: {getattr(f.annotation, '__name__', None) or f.annotation}"
        + (" (required)" if f.is_required() else "")
        for name, f in model.model_fields.items()
    )
    return f"a {model.__name__} or a JSON object like {ANSWER_FORMATS[role]} ({fields})"


@dataclass(frozen=True, slots=True)
class ChatModelAgent:
    """A chat model with a role prompt: the simplest LLM agent for a role.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> from soloflow_langgraph.testing import ScriptedChatModel
        >>> model = ScriptedChatModel(responses=[AIMessage('{"satisfied": true}')])
        >>> agent = as_role_agent("evaluator", ChatModelAgent(model, "Be strict."))
        >>> agent.run(RoleInput(role="evaluator", task_description="t", workspace="."), UsageMeter())
        EvaluationResult(satisfied=True, feedback='')
    """

    model: BaseChatModel
    prompt: str | None = None
    """The role prompt; default :data:`ROLE_PROMPTS`. The answer format is always appended."""

    def messages(self, inp: RoleInput) -> list[BaseMessage]:
        """The conversation sent to the model for ``inp``."""
        prompt = self.prompt or ROLE_PROMPTS[inp.role]
        system = (
            f"{prompt}\n\nAnswer with only this JSON object, nothing else:\n"
            f"{ANSWER_FORMATS[inp.role]}"
        )
        return [SystemMessage(content=system), HumanMessage(content=inp.render())]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (bare, fenced, or inside prose), else None."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except ValueError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    return None


def _unwrap(value: Any) -> Any:
    """An agent state or a message → what it carries."""
    if isinstance(value, Mapping):
        if value.get("structured_response") is not None:
            return value["structured_response"]
        messages = value.get("messages")
        if isinstance(messages, list):
            ai = [m for m in messages if isinstance(m, AIMessage)]
            if ai:
                return ai[-1]
    return value


def parse_role_output(role: str, value: Any) -> BaseModel:
    """``value`` as ``role``'s result type, or an :class:`AgentOutputError` saying why not."""
    expected = expected_output(role)
    result_type = RESULT_TYPES[role]
    value = _unwrap(value)
    data: Any
    if isinstance(value, result_type):
        return value
    if isinstance(value, BaseMessage | str):  # before BaseModel: messages are models too
        text = message_text(value) if isinstance(value, BaseMessage) else value
        data = _json_object(text)
        if data is None:
            raise AgentOutputError(
                f"the {role} agent answered {text[:200]!r}, which holds no JSON object; "
                f"it must return {expected}",
                role=role,
                expected=expected,
            )
    elif isinstance(value, BaseModel):
        data = value.model_dump()
    elif isinstance(value, Mapping):
        data = dict(value)
    else:
        raise AgentOutputError(
            f"the {role} agent returned a {type(value).__name__}; it must return {expected}",
            role=role,
            expected=expected,
        )
    try:
        return result_type.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
        )
        raise AgentOutputError(
            f"the {role} agent's answer is not a valid {result_type.__name__} ({problems}); "
            f"it must return {expected}",
            role=role,
            expected=expected,
        ) from None


@dataclass(frozen=True, slots=True)
class RoleAgent:
    """One role's agent, adapted: :meth:`run` gives the typed result and meters its tokens."""

    role: str
    runnable: Runnable[Any, Any]
    takes: str
    """What the runnable is invoked with: ``"role_input"`` or ``"dict"``."""

    def run(self, inp: RoleInput, meter: UsageMeter, config: RunnableConfig | None = None) -> Any:
        """Invoke the agent on ``inp``; tokens of every model call below it go to ``meter``."""
        payload = inp if self.takes == "role_input" else inp.as_runnable_input()
        try:
            raw = self.runnable.invoke(payload, metered_config(config, meter, self.role))
        except (GraphBubbleUp, SoloFlowError):
            raise  # LangGraph control flow (interrupt) and errors that already name their cause
        except Exception as exc:
            raise AgentError(
                f"the {self.role} agent raised {type(exc).__name__}: {exc}. The workflow's "
                "checkpoint is kept: fix the cause and resume the same thread id.",
                role=self.role,
            ) from exc
        unwrapped = _unwrap(raw)
        if isinstance(unwrapped, AIMessage):
            meter.add_returned_message(unwrapped)
        return parse_role_output(self.role, raw)


def as_role_agent(role: str, agent: Any) -> RoleAgent:
    """Adapt ``agent`` (chat model, :class:`ChatModelAgent`, Runnable or callable) to ``role``."""
    if role not in RESULT_TYPES:
        raise ConfigError(f"unknown role {role!r}; the roles are: {', '.join(ROLES)}")
    if isinstance(agent, RoleAgent):
        return agent
    if isinstance(agent, BaseChatModel):
        agent = ChatModelAgent(agent)
    if isinstance(agent, ChatModelAgent):
        chain = RunnableLambda(agent.messages, name=f"{role}_prompt") | agent.model
        return RoleAgent(role, chain, "role_input")
    if isinstance(agent, Runnable):
        return RoleAgent(role, agent, "dict")
    if callable(agent):
        return RoleAgent(role, RunnableLambda(agent, name=role), "role_input")
    raise ConfigError(
        f"the agent given for the {role} role is a {type(agent).__name__}; give a chat model, "
        "a ChatModelAgent(model, prompt), a Runnable, or a callable taking a RoleInput"
    )


def registered_agents(pm: pluggy.PluginManager) -> dict[str, Any]:
    """The agents plugins offer through ``soloflow_register_sequential_agents`` (first wins)."""
    add_sequential_hookspecs(pm)
    found: dict[str, Any] = {}

    def register(role: str, agent: Any) -> None:
        if role not in RESULT_TYPES:
            raise PluginError(
                f"a soloflow_register_sequential_agents plugin registered the unknown role "
                f"{role!r}; the roles are: {', '.join(ROLES)}",
                plugin=role,
            )
        found.setdefault(role, agent)

    with plugin_errors(pm, "soloflow_register_sequential_agents"):
        pm.hook.soloflow_register_sequential_agents(register=register)
    return found


def resolve_agents(
    agents: Mapping[str, Any] | None, pm: pluggy.PluginManager | None
) -> dict[str, RoleAgent]:
    """Every role's agent: ``agents`` first, then the plugins'. Raises for missing roles."""
    chosen: dict[str, Any] = dict(registered_agents(pm)) if pm is not None else {}
    chosen.update(agents or {})
    unknown = sorted(set(chosen) - set(ROLES))
    if unknown:
        raise ConfigError(
            f"unknown role(s) {', '.join(map(repr, unknown))}; the roles are: {', '.join(ROLES)}"
        )
    missing = [role for role in ROLES if chosen.get(role) is None]
    if missing:
        raise MissingAgentsError(missing)
    return {role: as_role_agent(role, chosen[role]) for role in ROLES}
