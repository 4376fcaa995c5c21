"""No call in the packages passes more than three positional arguments to a function or class
of the packages: a record with more than three fields, or a call with more than three
arguments, is built with keywords (docs/architecture.md, "Rules the tests keep").

Calls to other libraries (``sa.select(a, b, c, d)``, ``cur.execute(...)``) are theirs to
design and are not checked. A call is the packages' when it names a module-level function or
class defined in them (``finish_moves(...)``, ``Transition(...)``) or a method through
``self``/``cls`` (``self._drive(...)``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("soloflow_core", "soloflow_langgraph", "soloflow_plugins")
MAX_POSITIONAL = 3


def _modules() -> dict[str, ast.Module]:
    return {
        str(f.relative_to(ROOT)): ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        for pkg in PACKAGES
        for f in sorted((ROOT / pkg).rglob("*.py"))
        if "migrations" not in f.parts
    }


def _defined(trees: dict[str, ast.Module]) -> tuple[set[str], set[str]]:
    """Names of the module-level functions and classes, and of the methods, in the packages."""
    top: set[str] = set()
    methods: set[str] = set()
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                top.add(node.name)
            if isinstance(node, ast.ClassDef):
                methods.update(
                    n.name
                    for n in node.body
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                )
    return top, methods


def _offences(trees: dict[str, ast.Module]) -> list[tuple[str, int, str, int]]:
    top, methods = _defined(trees)
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            positional = sum(1 for a in node.args if not isinstance(a, ast.Starred))
            if positional <= MAX_POSITIONAL:
                continue
            fn = node.func
            ours = (isinstance(fn, ast.Name) and fn.id in top) or (
                isinstance(fn, ast.Attribute)
                and isinstance(fn.value, ast.Name)
                and fn.value.id in ("self", "cls")
                and fn.attr in methods
            )
            if ours:
                found.append((path, node.lineno, ast.unparse(fn), positional))
    return found


def test_no_call_passes_more_than_three_positional_arguments() -> None:
    found = _offences(_modules())
    lines = [
        f"{path}:{line}: {name}(...) with {n} positional arguments; pass the rest by keyword"
        for path, line, name, n in found
    ]
    assert not found, "\n".join(lines)


def test_the_check_finds_a_positional_call_and_passes_a_keyword_one() -> None:
    bad = ast.parse(
        "def f(a, b, c, d): ...\nf(1, 2, 3, 4)\nf(1, 2, 3, d=4)\nimport x\nx.g(1, 2, 3, 4)\n"
    )
    assert [(line, name, n) for _, line, name, n in _offences({"m.py": bad})] == [(2, "f", 4)]
