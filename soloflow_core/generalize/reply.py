"""The reply a flow gives the user: learned from the agent's own final answers.

When a flow runs in place of the agent, the user should get an answer like the agent's, not
the last tool's raw output. The agent's final answers in the runs a flow was learned from
are texts composed of the flow's values (``"Your order O-5004 is label created (ETA
2026-11-28)."``); :func:`learn_reply_template` finds the template that writes every one of
them from that run's inputs and step outputs (:func:`~soloflow_core.generalize.composed.compose_template`),
e.g. ``"Your order {{step_3.order_id}} is {{step_3.status}} (ETA {{step_3.eta}})."``.

The answers must agree: every answered occurrence is written by the same template. When
they do not (the agent worded each answer its own way), there is no template and the
caller states what was done instead (:func:`describe_run`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soloflow_core.flow.templates import TRIGGER, TemplateError, render
from soloflow_core.generalize.composed import compose_template, leaf_texts

if TYPE_CHECKING:
    from soloflow_core.generalize.arguments import Occurrence
    from soloflow_core.models import FlowDefinition

__all__ = [
    "MIN_ANSWERS",
    "describe_run",
    "learn_flow_reply",
    "learn_reply_template",
    "render_reply",
]

log = logging.getLogger(__name__)

MIN_ANSWERS = 2
"""Final answers needed to learn a reply template."""
_MAX_REPLY_CHARS = 2000


def learn_reply_template(
    answers: Sequence[str | None],
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
) -> str | None:
    """The reply template that writes every occurrence's final answer, or None.

    Args:
        answers: per occurrence, the agent's final answer (None when not recorded).
        inputs: per occurrence, the flow's inputs (what ``{{_trigger.<name>}}`` gives).
        outputs: per occurrence, step id → the step's output.

    Returns:
        A template over ``_trigger`` and the step ids; the answer itself when every
        answer is the same text; None when fewer than :data:`MIN_ANSWERS` occurrences have
        an answer or no one template writes them all.

    Example:
        >>> learn_reply_template(
        ...     ["Sent INV-1 to a@x.io.", "Sent INV-7 to b@y.io."],
        ...     [{"email": "a@x.io"}, {"email": "b@y.io"}],
        ...     [{"step_2": {"id": "INV-1"}}, {"step_2": {"id": "INV-7"}}])
        'Sent {{step_2.id}} to {{_trigger.email}}.'
    """
    rows = [
        (a.strip(), i, o)
        for a, i, o in zip(answers, inputs, outputs, strict=True)
        if isinstance(a, str) and a.strip() and len(a) <= _MAX_REPLY_CHARS
    ]
    if len(rows) < MIN_ANSWERS or len(rows) < len(answers) / 2:
        return None
    texts = [a for a, _, _ in rows]
    if len(set(texts)) == 1:
        return None if "{{" in texts[0] or "}}" in texts[0] else texts[0]
    sources = []
    for _, given, steps in rows:
        values: dict[str, str] = {}
        for ref, text in leaf_texts(TRIGGER, dict(given)):
            values.setdefault(ref, text)
        for step_id, output in steps.items():
            for ref, text in leaf_texts(step_id, output):
                values.setdefault(ref, text)
        sources.append(values)
    return compose_template(texts, sources)


def describe_run(
    flow_name: str, tools: Sequence[str], inputs: Mapping[str, Any], *, output: Any
) -> str:
    """What a flow run did, in one short paragraph, for a flow with no reply template.

    Example:
        >>> describe_run("Invoice by e-mail", ["lookup_account", "send_email"],
        ...              {"email": "a@x.io"}, "sent")
        "Done: I ran the flow 'Invoice by e-mail' (lookup_account → send_email) for email a@x.io. Result: sent"
    """
    given = ", ".join(f"{k} {_short(v)}" for k, v in inputs.items())
    text = f"Done: I ran the flow {flow_name!r} ({' → '.join(tools)})"
    if given:
        text += f" for {given}"
    return f"{text}. Result: {_short(output, 600)}"


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_reply(
    flow: FlowDefinition, inputs: Mapping[str, Any], results: Mapping[str, Any], output: Any
) -> str:
    """The reply to a routed request: the flow's ``reply_template`` rendered over its inputs
    and step outputs, or, without one (or when it cannot be rendered: a field the run's
    outputs lack), :func:`describe_run`."""
    if flow.reply_template:
        try:
            text = render(flow.reply_template, inputs=inputs, results=results)
        except TemplateError as exc:
            log.warning("flow %r: its reply template cannot be rendered (%s)", flow.name, exc)
        else:
            return text if isinstance(text, str) else _short(text, _MAX_REPLY_CHARS)
    return describe_run(flow.name, [s.skill_key for s in flow.steps], inputs, output=output)


def _whole_input(value: Any) -> str | None:
    """The input name when ``value`` is exactly ``{{_trigger.<name>}}``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{{" + TRIGGER + ".") and text.endswith("}}") and text.count("{{") == 1:
            name = text[len(TRIGGER) + 3 : -2].strip()
            return name if name and "." not in name else None
    return None


def learn_flow_reply(
    flow: FlowDefinition, occurrences: Sequence[Occurrence], answers: Sequence[str | None]
) -> str | None:
    """:func:`learn_reply_template` for ``flow`` from its occurrences (aligned step by step
    with its steps) and the agent's final answer in each. None when the occurrences do not
    align with the flow's steps, or no template writes every answer."""
    if len(occurrences) != len(answers) or not occurrences:
        return None
    if any(len(o.args) != len(flow.steps) for o in occurrences):
        return None
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for occ in occurrences:
        given: dict[str, Any] = {}
        steps: dict[str, Any] = {}
        for i, step in enumerate(flow.steps):
            for key, value in step.input_map.items():
                name = _whole_input(value)
                if name is not None and key in occ.args[i]:
                    given.setdefault(name, occ.args[i][key])
            calls = occ.step_calls[i] if len(occ.step_calls) > i else ()
            if step.map_over is not None and calls:
                steps[step.id] = [getattr(c, "output", None) for c in calls]
            else:
                steps[step.id] = occ.outputs[i]
        inputs.append(given)
        outputs.append(steps)
    return learn_reply_template(answers, inputs, outputs)
