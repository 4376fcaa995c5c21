"""Built-in task classifier: the architecture's discipline routing by keywords.

Labels: ``visual`` (images, UI), ``ultrabrain`` (multi-agent coordination),
``deep`` (analysis, research, multi-step work) and ``quick`` (everything else).
A user's ``soloflow_classify_task`` runs first; this one answers last.
"""

from __future__ import annotations

import re

from soloflow_core import hookimpl

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "visual",
        re.compile(
            r"\b(image|picture|photo|diagram|chart|plot|screenshot|ui|design|draw|render)s?\b", re.I
        ),
    ),
    (
        "ultrabrain",
        re.compile(r"\b(multi[- ]agent|coordinate|orchestrat\w*|delegate|team of agents)\b", re.I),
    ),
    (
        "deep",
        re.compile(
            r"\b(analy[sz]\w*|research|investigat\w*|compare|audit|refactor|debug|plan|architect\w*|evaluat\w*)\b",
            re.I,
        ),
    ),
]
_LONG_TASK_WORDS = 60


def classify(task: str) -> str:
    """The discipline of ``task``."""
    for label, pattern in _PATTERNS:
        if pattern.search(task):
            return label
    return "deep" if len(task.split()) > _LONG_TASK_WORDS else "quick"


@hookimpl(trylast=True)
def soloflow_classify_task(task: str) -> str | None:
    if not task or not task.strip():
        return None
    return classify(task)
