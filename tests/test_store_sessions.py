"""The store opens its sessions in one place; its facade keeps its repositories' methods."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from soloflow_core.store import Store

STORE = Path(__file__).resolve().parent.parent / "soloflow_core" / "store"
SESSIONS = "database.py"
"""The module of :class:`~soloflow_core.store.database.Database`."""
OWN_SESSIONS = {"migrations/env.py"}
"""Alembic's environment connects only when the ``alembic`` command runs it."""
OPENERS = {"begin", "connect", "raw_connection"}
ENGINES = "engine.py"
"""Builds the engine :class:`~soloflow_core.store.database.Database` opens (no session)."""


def _session_openings(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls that open a connection or transaction: ``x.begin()``, ``x.connect()`` (no
    arguments: a journal's ``begin(step_key, step_id)`` is not one), ``x.raw_connection()``,
    and any ``create_engine(...)`` (a pool of its own)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if (name in OPENERS and not node.args and not node.keywords) or name == "create_engine":
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_only_the_database_module_opens_sessions() -> None:
    offences = [
        f"{path.relative_to(STORE)}:{line}: {text}"
        for path in sorted(STORE.rglob("*.py"))
        if path.name != SESSIONS and str(path.relative_to(STORE)) not in OWN_SESSIONS
        for line, text in _session_openings(ast.parse(path.read_text(), str(path)))
        if not (path.name == ENGINES and text.startswith("sa.create_engine("))
    ]
    assert offences == [], "open sessions through Database (store/database.py)"


def test_the_session_check_sees_an_opening() -> None:
    source = textwrap.dedent(
        """
        with engine.connect() as conn:
            journal.begin("a", "a")
        with self._writer.begin() as conn:
            raw = engine.raw_connection()
        other = sa.create_engine(url)
        with db.read() as conn:
            pass
        """
    )
    assert [line for line, _ in _session_openings(ast.parse(source))] == [2, 4, 5, 6]


def test_the_database_module_is_where_sessions_open() -> None:
    tree = ast.parse((STORE / SESSIONS).read_text())
    assert {text.split("(")[0].rsplit(".", 1)[-1] for _, text in _session_openings(tree)} >= {
        "begin",
        "connect",
        "raw_connection",
    }


DELEGATED = (
    "runs",
    "candidates",
    "flows",
    "flow_runs",
    "tokens",
    "skill_imports",
    "usage",
    "namespace_index",
    "traces",
)
"""The repositories whose methods :class:`Store` keeps by name (``store.memory`` has none)."""


def _public_methods(cls: type) -> dict[str, object]:
    return {
        name: fn
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in {"open", "close"}
    }


def test_the_store_keeps_each_repository_method_by_name_and_signature() -> None:
    store = Store.open("sqlite://")
    try:
        repos = {name: type(getattr(store, name)) for name in DELEGATED}
        owner = {m: r for r, cls in repos.items() for m in _public_methods(cls)}
        facade = _public_methods(Store)
        assert set(facade) == set(owner)
        for name, fn in facade.items():
            theirs = getattr(repos[owner[name]], name)
            assert inspect.signature(fn) == inspect.signature(theirs), name  # type: ignore[arg-type]
        assert store.count_runs(user_id="u", agent_id="a") == 0
        assert store.runs.db is store.db and store.memory.db is store.db
    finally:
        store.close()
