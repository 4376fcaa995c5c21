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
from collections.abc import Mapping, Sequence
from typing import Any

from soloflow_core.flow.templates import TRIGGER
from soloflow_core.generalize.composed import compose_template, leaf_texts

__all__ = ["MIN_ANSWERS", "describe_run", "learn_reply_template"]

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
        return texts[0].replace("{{", "{{'{{'}}")
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
    flow_name: str, tools: Sequence[str], inputs: Mapping[str, Any], output: Any
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
