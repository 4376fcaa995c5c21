"""An example SoloFlow plugin: one executor and one task classifier.

Installed, it is found through the ``soloflow`` entry-point group (see ``pyproject.toml``);
without installing, ``SOLOFLOW_PLUGINS=soloflow_example_plugin`` loads it from ``sys.path``.
Block it with ``SOLOFLOW_BLOCK_PLUGINS=example`` (its entry-point name).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from soloflow_core import hookimpl

__all__ = ["BILLING", "soloflow_classify_task", "soloflow_register_executors", "word_count"]

BILLING = "billing"
_BILLING_WORDS = re.compile(r"\b(invoices?|refunds?|refunded|billing|charged?)\b", re.I)


def word_count(text: str) -> dict[str, int]:
    """Count the words and lines of ``text``.

    A flow step runs an executor with its ``input_map`` as keyword arguments; the
    returned dict is the step's output, so later steps can use ``{{step_id.words}}``.

    >>> word_count(text="two words")
    {'words': 2, 'lines': 1}
    """
    return {"words": len(text.split()), "lines": len(text.splitlines())}


@hookimpl
def soloflow_register_executors(register: Callable[[str, Any], None]) -> None:
    # This implementation leaves out the hook's ``tools`` argument: pluggy passes an
    # implementation only the arguments it names.
    register("word_count", word_count)


@hookimpl
def soloflow_classify_task(task: str) -> str | None:
    # None lets the next classifier (in the end the built-in keyword one) decide.
    return BILLING if _BILLING_WORDS.search(task) else None
