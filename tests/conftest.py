"""Shared fixtures: real SQLite files, the real PostgreSQL server, fresh plugin managers."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from routing_support import TrainedWorlds

from soloflow_core.plugins import get_plugin_manager
from soloflow_core.store import Store

# A test run started in the background by a non-interactive shell (`cmd &`, nohup) inherits
# SIGINT ignored, and so would every process it starts: the Ctrl-C tests would see their
# signal vanish. Put Python's own handler back, as an interactive terminal has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

DATA = Path(__file__).parent / "data"
TAU_BENCH = DATA / "tau_bench_gpt-4o_airline_trials0-2.jsonl.gz"
AGENTDOJO = DATA / "agentdojo_ground_truth_v1.2.2.jsonl.gz"

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
PG_URL = os.environ.get("SOLOFLOW_TEST_POSTGRES_URL", DEFAULT_PG_URL)
REQUIRE_PG = os.environ.get("SOLOFLOW_REQUIRE_POSTGRES") == "1"


def _pg_driver_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def _pg_reachable() -> str | None:
    """None if the server answers, else the reason it does not."""
    try:
        engine = sa.create_engine(_pg_driver_url(PG_URL), connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:  # any driver or connection failure means "not here"
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


_PG_PROBLEM: str | None | bool = False


def pg_problem() -> str | None:
    global _PG_PROBLEM
    if _PG_PROBLEM is False:
        _PG_PROBLEM = _pg_reachable()
    return _PG_PROBLEM  # type: ignore[return-value]


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards.

    Skipped (with the reason) when no server answers at $SOLOFLOW_TEST_POSTGRES_URL, unless
    SOLOFLOW_REQUIRE_POSTGRES=1 (as in CI), where that is a failure.
    """
    problem = pg_problem()
    if problem:
        if REQUIRE_PG:
            pytest.fail(
                f"PostgreSQL required (SOLOFLOW_REQUIRE_POSTGRES=1) but {PG_URL}: {problem}"
            )
        pytest.skip(f"no PostgreSQL server at {PG_URL} ({problem}); set SOLOFLOW_TEST_POSTGRES_URL")
    schema = "sf_test_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(_pg_driver_url(PG_URL))
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'soloflow.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a real SQLite file and on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'soloflow.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store.open(db_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    s = Store.open(sqlite_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="session")
def trained_worlds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainedWorlds]:
    """The routing worlds' agents trained once per store kind (tests/routing_support.py)."""
    worlds = TrainedWorlds(tmp_path_factory.mktemp("trained"), pg_url=PG_URL)
    try:
        yield worlds
    finally:
        worlds.close()


def _trained_at(worlds: TrainedWorlds, url: str) -> Iterator[Callable[[str], Store]]:
    opened: list[Store] = []

    def open_trained(world: str) -> Store:
        assert not opened, "one trained store per test"
        opened.append(worlds.store(world, url))
        return opened[0]

    try:
        yield open_trained
    finally:
        for s in opened:
            s.close()


@pytest.fixture
def trained_store(trained_worlds: TrainedWorlds, db_url: str) -> Iterator[Callable[[str], Store]]:
    """``trained_store(world)``: a copy of the world's trained store at ``db_url`` (both
    kinds), the test's own; closed afterwards."""
    yield from _trained_at(trained_worlds, db_url)


@pytest.fixture
def trained_sqlite(
    trained_worlds: TrainedWorlds, sqlite_url: str
) -> Iterator[Callable[[str], Store]]:
    """``trained_sqlite(world)``: a copy of the world's trained store at ``sqlite_url``."""
    yield from _trained_at(trained_worlds, sqlite_url)


@pytest.fixture
def pm():
    """A fresh plugin manager with the built-in plugins (no global state)."""
    return get_plugin_manager()


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the user's real embedded database or plugin settings."""
    monkeypatch.setenv("SOLOFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SOLOFLOW_DATABASE_URL", raising=False)
    monkeypatch.delenv("SOLOFLOW_PLUGINS", raising=False)
    monkeypatch.delenv("SOLOFLOW_BLOCK_PLUGINS", raising=False)
