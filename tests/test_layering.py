"""The layering: ``soloflow_core`` imports no LangChain/LangGraph; its public API is pinned."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import soloflow_core

# Importing every module of soloflow_core with LangChain and LangGraph made unimportable.
# The Alembic migration environment only runs inside Alembic, so it is exercised by
# migrating a real SQLite database under the same block instead of being imported.
IMPORT_EVERYTHING = textwrap.dedent(
    """
    import importlib
    import importlib.abc
    import json
    import pkgutil
    import sys

    BLOCKED = ("langchain", "langgraph")
    attempts = []


    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.startswith(BLOCKED):
                attempts.append(name)
                raise ImportError(f"soloflow_core must not import {name}")
            return None


    sys.meta_path.insert(0, Block())
    try:
        import langchain_core  # noqa: F401
        block_works = False
    except ImportError:
        block_works = True
    attempts.clear()

    import soloflow_core

    ALEMBIC_ONLY = {"soloflow_core.store.migrations.env"}
    walk_errors = []
    names = [
        info.name
        for info in pkgutil.walk_packages(
            soloflow_core.__path__, "soloflow_core.", onerror=walk_errors.append
        )
    ]
    imported, failed = [], {}
    for name in names:
        if name in ALEMBIC_ONLY:
            continue
        try:
            importlib.import_module(name)
            imported.append(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"

    from soloflow_core.store import Store

    Store.open("sqlite:///" + sys.argv[1]).close()

    print(json.dumps({
        "block_works": block_works,
        "imported": imported,
        "failed": failed,
        "walk_errors": walk_errors,
        "attempts": sorted(set(attempts)),
        "leaked": sorted(m for m in sys.modules if m.startswith(BLOCKED)),
    }))
    """
)

EXPECTED_ALL = [
    "AgentError",
    "AgentOutputError",
    "ConfigError",
    "DetectorConfig",
    "ExecutorNotFoundError",
    "FlowCancelledError",
    "FlowCandidate",
    "FlowDefinition",
    "FlowFileError",
    "FlowFileProblem",
    "FlowRunError",
    "FlowStep",
    "FlowValidationError",
    "InvalidTransitionError",
    "LedgerError",
    "MissingAgentsError",
    "ModelCall",
    "NotFoundError",
    "PluginError",
    "ReplayMiss",
    "SchemaVersionError",
    "SequentialWorkflowError",
    "SoloFlowConfig",
    "SoloFlowError",
    "StepFailedError",
    "StepInputError",
    "StepRecord",
    "StepTimeoutError",
    "StoreError",
    "TaskRun",
    "ToolCall",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
]


def test_soloflow_core_imports_no_langchain_or_langgraph(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING, str(tmp_path / "layering.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["block_works"], "the import blocker did not block langchain_core"
    assert report["failed"] == {}
    assert report["walk_errors"] == []
    assert report["attempts"] == []
    assert report["leaked"] == []
    # The walk really reached the whole package, migrations included.
    assert {
        "soloflow_core.hookspecs",
        "soloflow_core.plugins",
        "soloflow_core.learning.promotion",
        "soloflow_core.flow.executors",
        "soloflow_core.memory.providers",
        "soloflow_core.mining.detector",
        "soloflow_core.store.repository",
        "soloflow_core.store.migrations.versions.0001_initial",
    } <= set(report["imported"])


def test_the_public_api_is_pinned() -> None:
    assert soloflow_core.__all__ == EXPECTED_ALL
    missing = [name for name in EXPECTED_ALL if not hasattr(soloflow_core, name)]
    assert missing == []
