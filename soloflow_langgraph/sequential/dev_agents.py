"""Scripted agents for dev mode (``soloflow sequential run --dev``) and tests: no LLM.

Each role is a :class:`~soloflow_langgraph.testing.ScriptedChatModel` behind a
:class:`~soloflow_langgraph.sequential.agents.ChatModelAgent`, so dev mode goes through the
real chat-model path: role prompt, JSON answer parsing, ``usage_metadata`` token accounting
(estimated from characters by the scripted model). The answers depend only on what the
agent receives, so a resumed workflow replays the same story:

- the contract writer writes a few sections of contracts for the task;
- the auditor's score in outer iteration *o*, after *i* fixes, is ``audit_scores[o][i]``
  (the last entry repeats);
- the evaluator is satisfied from outer iteration ``evaluator_passes_at`` on;
- the refiner adds the section the evaluator asked for;
- the PR orchestrator "opens" ``dev://pull-request/<n>`` (no pull request is made).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from soloflow_langgraph.sequential.agents import ChatModelAgent
from soloflow_langgraph.testing import ScriptedChatModel

__all__ = ["DEFAULT_AUDIT_SCORES", "dev_agents"]

DEFAULT_AUDIT_SCORES: tuple[tuple[float, ...], ...] = ((0.45, 0.62, 0.86), (0.7, 0.93))
"""Outer iteration 1 needs two fixes; iteration 2 one."""

_ITERATION = re.compile(r"outer (\d+) of \d+, inner (\d+) of \d+")
_TASK = re.compile(r"## Task\n\n(.*?)\n\n## Workspace", re.S)
_SUMMARY = re.compile(
    r"## Contracts \(summary\)\n\n(.*?)(?=\n\n## (?:Last audit|Violations|Evaluator)|\Z)", re.S
)

_CONTRACT_SECTIONS = {
    "Interface": [
        "Every endpoint is described in an OpenAPI document kept next to the code. "
        "Request and response bodies are JSON with snake_case keys.",
        "Errors are returned as problem+json objects with a stable type URI. "
        "A 4xx response never carries a stack trace.",
    ],
    "Behaviour": [
        "The happy path of the task works end to end from a clean checkout. "
        "It is covered by at least one integration test.",
        "Inputs are validated at the boundary. Invalid input yields a 422 with the field path.",
    ],
    "Quality": [
        "Unit tests cover every public function. The suite runs in under a minute.",
        "The code passes the linter and the type checker with no new suppressions.",
    ],
}


def _text(messages: Sequence[BaseMessage]) -> str:
    content = messages[-1].content if messages else ""
    return content if isinstance(content, str) else json.dumps(content)


def _reply(payload: dict[str, Any]) -> AIMessage:
    return AIMessage(content=json.dumps(payload))


def _contracts(task: str) -> str:
    lines = [
        f"# Contracts: {task}",
        "",
        f"The system must do this task: {task}. "
        + "Each section lists rules the auditor checks one by one.",
    ]
    for heading, bullets in _CONTRACT_SECTIONS.items():
        lines += ["", f"## {heading}", ""]
        lines += [f"- {b}" for b in bullets]
    return "\n".join(lines)


def dev_agents(
    *,
    audit_scores: Sequence[Sequence[float]] = DEFAULT_AUDIT_SCORES,
    evaluator_passes_at: int = 2,
) -> dict[str, ChatModelAgent]:
    """A scripted agent for every role (see the module docstring for the story).

    Args:
        audit_scores: per outer iteration, the auditor's score after 0, 1, 2... fixes;
            the last row and the last score of a row repeat.
        evaluator_passes_at: the first outer iteration whose evaluation passes.
    """
    scores = [list(row) for row in audit_scores] or [[1.0]]

    def where(text: str) -> tuple[int, int]:
        m = _ITERATION.search(text)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    def contract_writer(messages: list[BaseMessage]) -> AIMessage:
        m = _TASK.search(_text(messages))
        return _reply({"contracts": _contracts(m.group(1).strip() if m else "the task")})

    def auditor(messages: list[BaseMessage]) -> AIMessage:
        outer, inner = where(_text(messages))
        row = scores[min(max(outer, 1), len(scores)) - 1]
        score = row[min(inner, len(row) - 1)]
        missing = max(0, round((1.0 - score) * 6))
        violations = [f"Contract rule {k + 1} is not met yet." for k in range(missing)]
        return _reply({"compliance_score": score, "violations": violations})

    def code_generator(messages: list[BaseMessage]) -> AIMessage:
        text = _text(messages)
        fixed = text.count("is not met yet")
        return _reply({"summary": f"fixed {fixed} violation(s)", "files_changed": ["app/api.py"]})

    def evaluator(messages: list[BaseMessage]) -> AIMessage:
        outer, _ = where(_text(messages))
        if outer >= evaluator_passes_at:
            return _reply({"satisfied": True, "feedback": "All integration tests pass."})
        return _reply(
            {
                "satisfied": False,
                "feedback": "The integration test for expired sessions fails. The contracts do "
                "not say what happens when a session token expires, so the code never checks it.",
            }
        )

    def refiner(messages: list[BaseMessage]) -> AIMessage:
        text = _text(messages)
        m = _SUMMARY.search(text)
        base = m.group(1).strip() if m else "# Contracts"
        addition = (
            "## Sessions\n\n- A session token expires after 24 hours. "
            "A request with an expired token gets a 401 and must log in again."
        )
        return _reply(
            {"contracts": f"{base}\n\n{addition}", "notes": "added the session expiry contract"}
        )

    def pr_orchestrator(messages: list[BaseMessage]) -> AIMessage:
        outer, _ = where(_text(messages))
        return _reply(
            {
                "pr_url": f"dev://pull-request/{outer}",
                "summary": "dev mode: no pull request was opened",
            }
        )

    scripts = {
        "contract_writer": contract_writer,
        "auditor": auditor,
        "code_generator": code_generator,
        "evaluator": evaluator,
        "refiner": refiner,
        "pr_orchestrator": pr_orchestrator,
    }
    return {
        role: ChatModelAgent(ScriptedChatModel(script=fn, model_name=f"soloflow-dev-{role}"))
        for role, fn in scripts.items()
    }
