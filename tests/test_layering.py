"""The layering: ``soloflow_core`` imports no LangChain/LangGraph; its public API is pinned."""

from __future__ import annotations

import ast
import json
import re
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
    "InvalidNameError",
    "InvalidTransitionError",
    "LedgerError",
    "MissingAgentsError",
    "ModelCall",
    "NotFoundError",
    "PatternTimeoutError",
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


# --------------------------------------------------------------------------- module size

MAX_MODULE_LINES = 600

# Modules over the limit that other engineers are splitting now; the lead drains this list as
# their work is merged. A module leaves it as soon as it fits (the test below fails until it
# does), so the list can only shrink. Nothing is added to it.
OVER_THE_LIMIT_FOR_NOW: frozenset[str] = frozenset()


def _line_counts(root: Path, packages: tuple[str, ...]) -> dict[str, int]:
    """Each module's line count, by its path relative to ``root``."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def _size_problems(counts: dict[str, int], allowed: frozenset[str]) -> list[str]:
    """A line per module over :data:`MAX_MODULE_LINES` not in ``allowed``, and per module of
    ``allowed`` that fits now (or is gone)."""
    problems = [
        f"{path}: {n} lines, over the limit of {MAX_MODULE_LINES}; split it along a seam into "
        "modules of one concept each (helpers they share go in a private module, `_name.py`), "
        "and update every import and the tree in docs/architecture.md"
        for path, n in sorted(counts.items())
        if n > MAX_MODULE_LINES and path not in allowed
    ]
    for path in sorted(allowed):
        n = counts.get(path)
        if n is None or n <= MAX_MODULE_LINES:
            now = "is gone" if n is None else f"has {n} lines"
            problems.append(
                f"{path} {now}: remove it from OVER_THE_LIMIT_FOR_NOW in tests/test_layering.py"
            )
    return problems


def test_every_module_fits_the_line_limit() -> None:
    counts = _line_counts(ROOT, LIBRARY)
    assert "soloflow_core/mining/matching.py" in counts  # the walk saw the library
    problems = _size_problems(counts, OVER_THE_LIMIT_FOR_NOW)
    assert not problems, "\n".join(problems)


def test_the_size_check_sees_a_long_module_and_a_stale_allowance(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (package / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    counts = _line_counts(tmp_path, ("pkg",))
    assert counts == {"pkg/long.py": MAX_MODULE_LINES + 1, "pkg/short.py": MAX_MODULE_LINES}
    problems = _size_problems(counts, frozenset({"pkg/short.py", "pkg/gone.py"}))
    assert [p.split(":")[0].split(" ")[0] for p in problems] == [
        "pkg/long.py",
        "pkg/gone.py",
        "pkg/short.py",
    ]
    assert "pkg/long.py: 601 lines, over the limit of 600; split it" in problems[0]
    assert _size_problems(counts, frozenset({"pkg/long.py"})) == []


# --------------------------------------------------------------------------- the drawn tree

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _drawn_tree(markdown: str) -> dict[str, str]:
    """The paths the tree of docs/architecture.md draws (``soloflow_core/mining/``,
    ``soloflow_langgraph/verify.py``), each with its description."""
    block = markdown.split("## The tree", 1)[1].split("```", 2)[1]
    drawn: dict[str, str] = {}
    parents: list[str] = []
    last = ""
    for line in block.splitlines():
        entry = re.match(r"^( {0,8})(\S+/|\S+\.py)(?:\s{2,}(.*))?$", line)
        if entry:
            depth = len(entry[1]) // 2
            parents = [*parents[:depth], entry[2]]
            last = "".join(parents)
            drawn[last] = entry[3] or ""
        elif line.strip():  # a description carried on to the next line
            drawn[last] += " " + line.strip()
    return drawn


def _named_modules(description: str) -> list[str]:
    """The modules a package's line names: its description without the notes in parentheses,
    split at commas and semicolons."""
    while True:
        plain = re.sub(r"\([^()]*\)", "", description)
        if plain == description:
            break
        description = plain
    return [piece.strip() for piece in re.split(r"[,;]", description) if piece.strip()]


def _tree_problems(root: Path, drawn: dict[str, str]) -> list[str]:
    """What the drawn tree gets wrong about the packages under ``root``."""
    problems = [
        f"{path} is drawn but does not exist" for path in drawn if not (root / path).exists()
    ]
    for path, description in drawn.items():
        folder = root / path
        if not (path.endswith("/") and (folder / "__init__.py").is_file()):
            continue
        children = {
            child.stem: child
            for child in folder.iterdir()
            if (child.suffix == ".py" and child.name != "__init__.py")
            or (child / "__init__.py").is_file()
        }
        public = {name for name in children if not name.startswith("_")}
        if path.count("/") == 1:  # a top-level package: its modules are drawn as lines
            listed = {p[len(path) :].rstrip("/").removesuffix(".py") for p in drawn if p != path}
            listed &= set(children)
            problems += [f"{path}{name}: not drawn" for name in sorted(public - listed)]
            continue
        named = _named_modules(description)
        problems += [
            f"{path}: names {name!r}, which is not one of its modules"
            for name in named
            if name not in children
        ]
        problems += [
            f"{path}{name}: not named on {path}'s line" for name in sorted(public - set(named))
        ]
    return problems


def test_the_architecture_page_draws_the_tree_as_it_is() -> None:
    """Every path drawn exists; each package's line names exactly its modules and
    subpackages (private ones may be left out); every path the page quotes exists."""
    markdown = ARCHITECTURE.read_text()
    drawn = _drawn_tree(markdown)
    assert {"soloflow_core/", "soloflow_core/mining/", "soloflow_langgraph/compile/"} <= set(drawn)
    problems = _tree_problems(
        ROOT, {p: d for p, d in drawn.items() if not p.startswith("benchmarks/")}
    )
    problems += [
        f"`{quoted}` is quoted but does not exist"
        for quoted in re.findall(
            r"`((?:soloflow_core|soloflow_langgraph|soloflow_plugins)/[^`\s]*)`", markdown
        )
        if not (ROOT / quoted).exists()
    ]
    assert not problems, "docs/architecture.md, The tree:\n" + "\n".join(problems)


def test_the_tree_check_sees_a_stale_tree(tmp_path: Path) -> None:
    for name in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/kept.py", "pkg/sub/new.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "pkg" / "sub" / "_private.py").write_text("")
    (tmp_path / "pkg" / "top.py").write_text("")
    markdown = textwrap.dedent(
        """
        ## The tree

        ```
        pkg/                           prose about the package, not checked
          sub/                         kept (a note, with, commas), moved,
                                       _private
          gone.py                      a module that moved away
        ```
        """
    )
    drawn = _drawn_tree(markdown)
    assert drawn["pkg/sub/"] == "kept (a note, with, commas), moved, _private"
    assert _tree_problems(tmp_path, drawn) == [
        "pkg/gone.py is drawn but does not exist",
        "pkg/top: not drawn",
        "pkg/sub/: names 'moved', which is not one of its modules",
        "pkg/sub/new: not named on pkg/sub/'s line",
    ]
