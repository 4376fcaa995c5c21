"""The routing tests' trained agents: each world's real ``create_agent`` agent after its
training requests, learned once per world and store kind and copied for every test.

A world is a module of ``benchmarks`` (``routing_world``: the support shop,
``routing_world_airline``: the airline desk) with its tools, its scripted model and its corpus.
:class:`TrainedWorlds` runs the training requests of a world once on a SQLite file and once
in a PostgreSQL schema of its own (the template), then hands each test a copy: the SQLite file
copied with SQLite's backup API, the PostgreSQL schema's rows copied into the test's fresh
schema. No test sees another's writes; the templates are never written after training.
"""

from __future__ import annotations

import importlib
import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from langchain.agents import create_agent

from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import approve_candidate
from soloflow_core.store import Store
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware

SHOP = "benchmarks.routing_world"
AIRLINE = "benchmarks.routing_world_airline"
BANK = "benchmarks.routing_world_bank"
HELPDESK = "benchmarks.routing_world_helpdesk"
WORKSPACE = "benchmarks.routing_world_workspace"
WORLDS = (SHOP, AIRLINE)
"""The worlds, sorted (the order the parametrised tests run them in). The bank world
(:data:`BANK`), the IT helpdesk (:data:`HELPDESK`) and the workspace (:data:`WORKSPACE`) are
trained on demand, by the tests that name them."""

CONFIG = LearningConfig(auto_execute=True, learning_timeout=120, min_steps_to_learn=2)


@dataclass(frozen=True)
class World:
    """A world's module and the namespace its agent learns in."""

    module: ModuleType
    user: str
    agent: str
    prompt: str

    @property
    def ns(self) -> dict[str, str]:
        return {"user_id": self.user, "agent_id": self.agent}


_NAMESPACES = {
    SHOP: ("shop-user", "shop", "Support."),
    AIRLINE: ("airline-user", "airline", "Airline."),
    BANK: ("bank-user", "bank", "Bank."),
    HELPDESK: ("helpdesk-user", "helpdesk", "IT helpdesk."),
    WORKSPACE: ("workspace-user", "workspace", "Workspace assistant."),
}


def world(name: str) -> World:
    user, agent, prompt = _NAMESPACES[name]
    return World(importlib.import_module(name), user, agent, prompt)


class Desk:
    """A world's agent on a store, with its flow tools declared from the flows the store
    holds when it is built; :meth:`close` closes its middleware."""

    def __init__(self, store: Store, w: World) -> None:
        self.world = w
        self.mw = SoloFlowMiddleware(store, tools=w.module.TOOLS, config=CONFIG, **w.ns)
        self.model = w.module.agent_model()
        self.agent = create_agent(
            self.model, tools=w.module.TOOLS, system_prompt=w.prompt, middleware=[self.mw]
        )

    def ask(self, text: str) -> dict[str, Any]:
        """One request through the agent: its answer, the model calls it took, the flow
        that ran (or None) and the side effects it caused (what it added to ``EFFECTS``)."""
        effects_of: list[dict[str, Any]] = self.world.module.EFFECTS
        before, effects = self.model.calls, len(effects_of)
        result = self.agent.invoke(
            {"messages": [{"role": "user", "content": text}]},
            config={"callbacks": self.mw.callbacks},
        )
        last = result["messages"][-1]
        return {
            "answer": str(last.content),
            "calls": self.model.calls - before,
            "flow": last.response_metadata.get("soloflow_flow"),
            "effects": effects_of[effects:],
        }

    def close(self) -> None:
        self.mw.close()

    def __enter__(self) -> Desk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def approve(store: Store, w: World, *, only: Iterable[str] | None = None) -> None:
    """A person approves the learned flows: all, or those whose last tool is in ``only``."""
    keep = None if only is None else set(only)
    for cand in store.list_candidates(**w.ns):
        if keep is None or cand.tool_sequence[-1] in keep:
            approve_candidate(store, cand.id, config=CONFIG, **w.ns)


def desk_checks(
    store: Store, w: World, *, genuine: list[str], found: list[str], asked: int = 3
) -> list[str]:
    """On a trained ``store`` with every flow approved: each ``genuine`` request routes to a
    flow and the first runs with no model call and a side effect; the ``found`` near misses
    that would run a flow are returned (the first ``asked`` go through the agent too, and
    must reach the model with no flow run)."""
    approve(store, w)
    w.module.EFFECTS.clear()
    try:
        with Desk(store, w) as desk:
            for text in genuine:
                d = desk.mw.route(text)
                assert d.run is not None, (text, d.checks[0].reasons if d.checks else None)
            got = desk.ask(genuine[0])
            assert got["calls"] == 0 and got["flow"] is not None and got["effects"]
            ran = [text for text in found if desk.mw.route(text).run is not None]
            for text in found[:asked]:
                got = desk.ask(text)
                assert got["flow"] is None and got["calls"] > 0, text
            return ran
    finally:
        w.module.EFFECTS.clear()


def train(store: Store, w: World) -> None:
    """The world's agent answers its training requests on ``store`` (learning as it goes)."""
    try:
        with Desk(store, w) as desk:
            for r in w.module.load_corpus():
                if r["split"] == "train":
                    desk.ask(r["text"])
    finally:
        w.module.EFFECTS.clear()  # the training's own


def _pg_driver_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1].split("?", 1)[0]


def _schema_of(url: str) -> str:
    """The schema of a URL made by the ``pg_url`` fixture (``options=-csearch_path%3D…``)."""
    return url.rsplit("search_path%3D", 1)[1].split("&", 1)[0]


class TrainedWorlds:
    """Each world trained once per store kind (on first use), copied for each test."""

    def __init__(self, root: Path, *, pg_url: str) -> None:
        self._root = root
        self._pg_url = pg_url
        self._sqlite: dict[str, Path] = {}
        self._pg: dict[str, str] = {}
        self._schemas: list[str] = []

    def store(self, name: str, url: str) -> Store:
        """A store at ``url`` (a SQLite file not yet there, or an empty PostgreSQL schema
        made by the ``pg_url`` fixture) holding what world ``name`` learned in training."""
        if url.startswith("sqlite"):
            _copy_sqlite(self._sqlite_template(name), Path(url.split(":///", 1)[1]))
        else:
            Store.open(url).close()  # the schema's tables, as migrations make them
            _copy_schema(self._pg_url, source=self._pg_template(name), target=_schema_of(url))
        return Store.open(url)

    def template_url(self, name: str, url: str) -> str:
        """The URL of world ``name``'s template of the kind of ``url`` (to read, not write)."""
        if url.startswith("sqlite"):
            return f"sqlite:///{self._sqlite_template(name)}"
        return self._schema_url(self._pg_template(name))

    def _schema_url(self, schema: str) -> str:
        sep = "&" if "?" in self._pg_url else "?"
        return f"{self._pg_url}{sep}options=-csearch_path%3D{schema}"

    def _sqlite_template(self, name: str) -> Path:
        if name not in self._sqlite:
            path = self._root / f"{name.rsplit('.', 1)[1]}-{uuid.uuid4().hex[:8]}.db"
            with Store.open(f"sqlite:///{path}") as store:
                train(store, world(name))
            self._sqlite[name] = path
        return self._sqlite[name]

    def _pg_template(self, name: str) -> str:
        if name not in self._pg:
            schema = "sf_trained_" + uuid.uuid4().hex[:12]
            engine = sa.create_engine(_pg_driver_url(self._pg_url))
            try:
                with engine.begin() as conn:
                    conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            finally:
                engine.dispose()
            self._schemas.append(schema)  # dropped by close(), trained or not
            with Store.open(self._schema_url(schema)) as store:
                train(store, world(name))
            self._pg[name] = schema
        return self._pg[name]

    def close(self) -> None:
        """Drop the PostgreSQL templates."""
        if not self._schemas:
            return
        engine = sa.create_engine(_pg_driver_url(self._pg_url))
        try:
            with engine.begin() as conn:
                for schema in self._schemas:
                    conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        finally:
            engine.dispose()
        self._schemas.clear()
        self._pg.clear()


def _copy_sqlite(template: Path, target: Path) -> None:
    """The template file and its LangGraph checkpoint file (if training made one)."""
    assert not target.exists(), target
    for suffix in ("", "-checkpoints"):
        src = template.with_name(f"{template.stem}{suffix}{template.suffix}")
        if not src.exists():
            continue
        dst = target.with_name(f"{target.stem}{suffix}{target.suffix}")
        with sqlite3.connect(src) as source, sqlite3.connect(dst) as copy:
            source.backup(copy)
        source.close()
        copy.close()


def _copy_schema(pg_url: str, *, source: str, target: str) -> None:
    """Every row of ``source``'s tables into ``target``'s (tables ``target`` lacks, such as
    LangGraph's checkpoint tables, made like ``source``'s), sequences moved past the rows."""
    engine = sa.create_engine(_pg_driver_url(pg_url))
    try:
        with engine.begin() as conn:
            insp = sa.inspect(conn)
            have = set(insp.get_table_names(schema=target))
            conn.execute(sa.text("SET LOCAL session_replication_role = replica"))  # no FK checks
            if have:
                conn.execute(sa.text("TRUNCATE " + ", ".join(f'"{target}"."{t}"' for t in have)))
            for table in insp.get_table_names(schema=source):
                src, dst = f'"{source}"."{table}"', f'"{target}"."{table}"'
                if table not in have:
                    conn.execute(sa.text(f"CREATE TABLE {dst} (LIKE {src} INCLUDING ALL)"))
                cols = ", ".join(f'"{c}"' for c in _stored_columns(conn, source, table))
                conn.execute(
                    sa.text(
                        f"INSERT INTO {dst} ({cols}) OVERRIDING SYSTEM VALUE SELECT {cols} FROM {src}"
                    )
                )
                for col in insp.get_columns(table, schema=target):
                    seq = conn.execute(
                        sa.text("SELECT pg_get_serial_sequence(:t, :c)"),
                        {"t": dst, "c": col["name"]},
                    ).scalar()
                    if seq is None:
                        continue
                    assert seq.startswith(f'"{target}".') or seq.startswith(f"{target}."), seq
                    conn.execute(
                        sa.text(
                            f'SELECT setval(:s, COALESCE((SELECT max("{col["name"]}") FROM {dst}), 0) + 1, false)'
                        ),
                        {"s": seq},
                    )
    finally:
        engine.dispose()


def _stored_columns(conn: sa.Connection, schema: str, table: str) -> list[str]:
    """The columns of a table that hold values (not generated ones), in order."""
    rows = conn.execute(
        sa.text(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = :s "
            "AND table_name = :t AND is_generated = 'NEVER' ORDER BY ordinal_position"
        ),
        {"s": schema, "t": table},
    )
    return [r[0] for r in rows]
