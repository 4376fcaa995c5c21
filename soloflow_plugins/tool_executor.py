"""Built-in executor plugin: a flow step's ``skill_key`` resolves to the tool of that name.

The tools are the ones the caller handed to the flow compiler (typically the agent's own
tools), so a learned flow replays exactly the tools the agent used, with no model call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from soloflow_core import hookimpl


@hookimpl(trylast=True)
def soloflow_register_executors(register: Callable[[str, Any], None], tools: Sequence[Any]) -> None:
    for tool in tools:
        name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
        if name:
            register(name, tool)
