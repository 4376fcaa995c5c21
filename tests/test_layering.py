"""The layering: ``soloflow_core`` imports no LangChain/LangGraph; its public API is pinned."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from collections.abc import Container
from pathlib import Path

import soloflow_core

ROOT = Path(__file__).resolve().parent.parent

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
    "AccessDeniedError",
    "AgentError",
    "AgentOutputError",
    "AmbiguousError",
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
    "SkillPackageError",
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
        "soloflow_core.store.facade",
        "soloflow_core.store.migrations.versions.0001_initial",
    } <= set(report["imported"])


def test_the_public_api_is_pinned() -> None:
    assert soloflow_core.__all__ == EXPECTED_ALL
    missing = [name for name in EXPECTED_ALL if not hasattr(soloflow_core, name)]
    assert missing == []


# --------------------------------------------------------------------------- imports between modules

LIBRARY = ("soloflow_core", "soloflow_langgraph", "soloflow_plugins")


def _library_modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name (a package by its ``__init__``)."""
    modules: dict[str, Path] = {}
    for package in LIBRARY:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _source_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``from ... import`` reads."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports run when the module is imported: not those inside functions or classes,
    nor those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                found.append(stmt)
            elif isinstance(stmt, ast.If):
                if not _is_type_checking(stmt.test):
                    walk(stmt.body)
                walk(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                walk(stmt.body)
                for handler in stmt.handlers:
                    walk(handler.body)
                walk(stmt.orelse)
                walk(stmt.finalbody)

    walk(tree.body)
    return found


def _imported_module(name: str, modules: dict[str, Path]) -> str | None:
    """The library module that importing ``name`` runs (``a.b.f`` → ``a.b`` when f is not a
    module), or None outside the library."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _private_imports(
    module: str, is_package: bool, tree: ast.Module, modules: Container[str]
) -> list[tuple[int, str]]:
    """``(line, "from x import _y")`` for each private name ``module`` imports from another
    module (a private *module*, ``from pkg import _impl``, is fine)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _source_module(module, is_package, node)
        if source == module:
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and f"{source}.{alias.name}" not in modules:
                found.append((node.lineno, f"from {source} import {alias.name}"))
    return found


def test_no_module_imports_another_modules_private_name() -> None:
    """Privacy lives in module names (``_packing.py``), not in ``_names`` shared across modules."""
    modules = _library_modules()
    offences = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for module, path in sorted(modules.items())
        for line, text in _private_imports(
            module, path.name == "__init__.py", ast.parse(path.read_text(), str(path)), modules
        )
    ]
    assert offences == []


def test_the_private_import_check_sees_an_offence() -> None:
    source = textwrap.dedent(
        """
        from soloflow_core.mining._packing import pattern_matrix
        from soloflow_core.mining.matching import _hidden, shown
        from . import _packing, _sibling

        def later():
            from soloflow_core.mining import _late
        """
    )
    modules = {"soloflow_core.mining._packing", "soloflow_core.mining.matching"}
    found = _private_imports("soloflow_core.mining.cover", False, ast.parse(source), modules)
    assert found == [
        (3, "from soloflow_core.mining.matching import _hidden"),
        (4, "from soloflow_core.mining import _sibling"),
        (7, "from soloflow_core.mining import _late"),
    ]


def _import_graph() -> dict[str, set[str]]:
    modules = _library_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in _module_level_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                source = _source_module(module, is_package, node)
                names = [f"{source}.{alias.name}" for alias in node.names]
            for name in names:
                target = _imported_module(name, modules)
                if target is not None and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_library_modules() -> None:
    """Module-level imports (not those under ``if TYPE_CHECKING:`` or inside functions)."""
    graph = _import_graph()
    assert "soloflow_langgraph.runtime.flow_runtime" in graph  # the walk saw the library
    assert _cycles(graph) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
