"""AgentDojo tasks as flows: real tools written elsewhere, checked by their own benchmark.

Needs the optional extra: ``pip install "soloflow-engine[benchmarks]"`` (AgentDojo runs
offline; its environments ship inside the package). Importing this package does not import
AgentDojo; the first function that needs it does, and names the extra when it is missing.

- :mod:`.environment` — a task's default environment and its tools as flow executors;
- :mod:`.flows` — a task's reference solution as a flow with templates, and its YAML file;
- :mod:`.scoring` — run a flow through ``compile_flow`` and score it with ``utility``.

``WORKSPACE_TOOLS``, ``TRAVEL_TOOLS``, ``BANKING_TOOLS`` and ``SLACK_TOOLS`` are a suite's
tools on a fresh default environment (made when first read), for the command line (from the
repository root: this harness is not part of the installed package)::

    PYTHONPATH=. soloflow flows validate examples/agentdojo/flows/banking/user_task_3.yaml \
        --tools benchmarks.agentdojo:BANKING_TOOLS
"""

from __future__ import annotations

from typing import Any

from benchmarks.agentdojo.environment import (
    BENCHMARK_VERSION,
    INSTALL_HINT,
    AgentDojoTask,
    AgentDojoTool,
    load_task,
    require_agentdojo,
    tool_output_data,
    tool_output_text,
)
from benchmarks.agentdojo.flows import (
    flow_file_path,
    flow_to_yaml,
    ground_truth_flow,
    write_flow_file,
)
from benchmarks.agentdojo.scoring import (
    TaskFlowResult,
    outputs_as_answer,
    run_task_flow,
    task_inputs,
)

__all__ = [
    "BENCHMARK_VERSION",
    "INSTALL_HINT",
    "AgentDojoTask",
    "AgentDojoTool",
    "TaskFlowResult",
    "flow_file_path",
    "flow_to_yaml",
    "ground_truth_flow",
    "load_task",
    "outputs_as_answer",
    "require_agentdojo",
    "run_task_flow",
    "task_inputs",
    "tool_output_data",
    "tool_output_text",
    "write_flow_file",
]


def __getattr__(name: str) -> Any:
    suite = name.removesuffix("_TOOLS").lower()
    if name.endswith("_TOOLS") and suite in ("workspace", "travel", "banking", "slack"):
        return load_task(suite, "user_task_0").tools()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
