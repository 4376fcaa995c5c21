"""No private or undocumented API of another library in the packages (the project's rule):
no ``from <library> import _name``, no import of a library's ``_private`` module, no
``<library name>._attribute``, and none of CPython's ``json.encoder`` internals.

A documented name that happens to start with ``_`` is listed in :data:`DOCUMENTED`, with where
it is documented.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("soloflow_core", "soloflow_langgraph", "soloflow_plugins")

DOCUMENTED = {
    "_thread",  # https://docs.python.org/3/library/_thread.html
    "os._exit",  # https://docs.python.org/3/library/os.html#os._exit
}


def _is_ours(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def offences(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, text)`` for each use of another library's private or undocumented API."""
    found: list[tuple[int, str]] = []
    library_names: dict[str, str] = {}  # a name bound by an import of a library → its origin
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_ours(alias.name):
                    continue
                library_names[alias.asname or alias.name.split(".")[0]] = alias.name
                if any(map(_private, alias.name.split("."))) and alias.name not in DOCUMENTED:
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_ours(node.module) or node.module == "__future__":
                continue
            if node.module == "json.encoder" or any(map(_private, node.module.split("."))):
                found.append((node.lineno, f"from {node.module} import ..."))
            for alias in node.names:
                library_names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if _private(alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain: list[str] = [node.attr]
        base: ast.expr = node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in library_names:
            continue
        dotted = ".".join([library_names[base.id], *reversed(chain)])
        if dotted in DOCUMENTED:
            continue
        if _private(node.attr) or dotted == "json.encoder":
            found.append((node.lineno, dotted))
    return sorted(set(found))


def test_no_private_api_of_another_library() -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in offences(ast.parse(path.read_text(), str(path)))
    ]
    assert problems == []


def test_the_check_sees_each_kind_of_offence() -> None:
    source = textwrap.dedent(
        """
        import json
        import os
        import _thread
        import langgraph._internal._config as cfg
        from http import HTTPStatus
        from json.encoder import encode_basestring_ascii
        from pydantic._internal import _model_construction
        from langgraph.pregel import _algo, Pregel
        from soloflow_core.store import _private_but_ours

        json.encoder.c_make_encoder
        HTTPStatus._value2member_map_
        os._exit(1)
        self._mine
        Pregel._secret
        """
    )
    assert offences(ast.parse(source)) == [
        (5, "import langgraph._internal._config"),
        (7, "from json.encoder import ..."),
        (8, "from pydantic._internal import ..."),
        (8, "from pydantic._internal import _model_construction"),
        (9, "from langgraph.pregel import _algo"),
        (12, "json.encoder"),
        (13, "http.HTTPStatus._value2member_map_"),
        (16, "langgraph.pregel.Pregel._secret"),
    ]
