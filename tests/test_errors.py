"""``soloflow_core.errors``: the tree its docstring draws is the tree of its classes."""

from __future__ import annotations

import importlib
import pkgutil
import re

import soloflow_core
import soloflow_langgraph
import soloflow_plugins
from soloflow_core import errors
from soloflow_core.errors import SoloFlowError

_BRANCH = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)")


def drawn_tree(doc: str) -> dict[str, str]:
    """``{class name: parent name}`` as the docstring's drawing has them."""
    lines = doc.splitlines()
    top = next(i for i, line in enumerate(lines) if line.strip() == "SoloFlowError")
    margin = lines[top].index("SoloFlowError")
    parents: dict[str, str] = {}
    path = ["SoloFlowError"]
    for line in lines[top + 1 :]:
        match = _BRANCH.match(line[margin:])
        if match is None:
            break
        depth = len(match["indent"]) // 4 + 1
        del path[depth:]
        parents[match["name"]] = path[-1]
        path.append(match["name"])
    return parents


LIBRARY = ("soloflow_core.", "soloflow_langgraph.", "soloflow_plugins.")
ALEMBIC_ONLY = {"soloflow_core.store.migrations.env"}


def import_the_library() -> None:
    """Every module of the three packages, so that every subclass they define exists."""
    for package in (soloflow_core, soloflow_langgraph, soloflow_plugins):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name not in ALEMBIC_ONLY:
                importlib.import_module(info.name)


def class_tree(base: type) -> dict[str, str]:
    """``{class name: parent name}`` for every subclass of ``base`` the library defines."""
    parents: dict[str, str] = {}
    for sub in base.__subclasses__():
        if sub.__module__.startswith(LIBRARY):
            parents[sub.__name__] = base.__name__
            parents.update(class_tree(sub))
    return parents


def test_the_drawn_tree_is_the_class_tree() -> None:
    import_the_library()
    assert errors.__doc__ is not None
    assert drawn_tree(errors.__doc__) == class_tree(SoloFlowError)


def test_every_error_lives_in_errors_and_is_exported() -> None:
    import_the_library()
    for name in class_tree(SoloFlowError):
        cls = getattr(errors, name)
        assert cls.__module__ == "soloflow_core.errors", name
        assert name in errors.__all__ and name in soloflow_core.__all__, name
        assert getattr(soloflow_core, name) is cls


def test_the_drawing_is_read_as_drawn() -> None:
    doc = """Errors::

        SoloFlowError
        ├── A          first
        │   └── B      under A
        │       └── C  under B
        └── D          last

    After the tree.
    """
    assert drawn_tree(doc) == {"A": "SoloFlowError", "B": "A", "C": "B", "D": "SoloFlowError"}
