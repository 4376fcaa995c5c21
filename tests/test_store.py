"""The store, on a real SQLite file and on the real PostgreSQL server (the same tests)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from soloflow_core.errors import NotFoundError, SchemaVersionError, StoreError
from soloflow_core.models import (
    FlowCandidate,
    FlowDefinition,
    FlowStep,
    ModelCall,
    TaskRun,
    ToolCall,
    candidate_id_for,
    dedupe_key_for,
)
from soloflow_core.store import Store, default_database_path, resolve_database_url, writer
from soloflow_core.store.database import _MIGRATIONS, migrate
from soloflow_core.store.engine import create_store_engine
from soloflow_core.store.schema import SCHEMA_REVISION
from soloflow_core.store.writer import ModelCallRow, RunRow, ToolCallRow

NS = {"user_id": "alice", "agent_id": "bot"}
OTHER_NAMESPACES = [
    {"user_id": "alice", "agent_id": "other-bot"},
    {"user_id": "bob", "agent_id": "bot"},
]
PLUS_TWO = timezone(timedelta(hours=2))


def make_run(run_id: str, names: tuple[str, ...] = ("a", "b"), **fields: object) -> TaskRun:
    calls = [
        ToolCall(name=n, args={"i": i}, output=f"out{i}", error=(n == "boom"), duration_ms=1.5)
        for i, n in enumerate(names)
    ]
    return TaskRun.model_validate({"run_id": run_id, "tool_calls": calls, **NS, **fields})


def make_flow(name: str = "lookup", skills: tuple[str, ...] = ("a", "b")) -> FlowDefinition:
    steps = [FlowStep(id=f"s{i}", skill_key=s) for i, s in enumerate(skills)]
    return FlowDefinition(name=name, steps=steps)


def make_candidate(sequence: tuple[str, ...] = ("a", "b", "c"), count: int = 3) -> FlowCandidate:
    key = dedupe_key_for(list(sequence))
    return FlowCandidate(
        id=candidate_id_for(NS["user_id"], NS["agent_id"], key),
        **NS,
        tool_sequence=list(sequence),
        occurrence_count=count,
        match_type="exact",
        estimated_token_savings=10.0 * count,
        avg_cost_per_execution=1.0,
        dedupe_key=key,
        proposed_flow=make_flow("-".join(sequence), sequence),
        run_ids=[f"r{i}" for i in range(count)],
    )


def dialect(store: Store) -> str:
    return store.engine.dialect.name


def table_count(store: Store, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


# ---------------------------------------------------------------------- task runs


def test_runs_are_stored_whole_and_read_back_equal(store):
    full = make_run(
        "r1",
        ("a", "boom", "c"),
        task="find order 7",
        success=True,
        cost=0.25,
        tokens=1200,
        model_calls=[
            ModelCall(
                model="m",
                input_tokens=10,
                output_tokens=5,
                total_tokens=15,
                duration_ms=3.0,
                tool_calls_requested=2,
            ),
        ],
        started_at=datetime(2024, 5, 1, 12, 0, tzinfo=PLUS_TWO),
        ended_at=datetime(2024, 5, 1, 10, 1, tzinfo=UTC),
        classification="orders",
        meta={"source": "test", "nested": {"k": [1, 2.5, None]}},
    )
    assert store.add_runs([full, make_run("r2"), make_run("r3", ())]) == 3
    back = store.get_run("r1", **NS)
    assert back == full
    assert back.started_at == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert back.started_at.utcoffset() is not None
    assert store.count_runs(**NS) == 3
    assert [r.run_id for r in store.load_runs(["r3", "nope", "r1"], **NS)] == ["r3", "r1"]


def test_run_ids_already_stored_are_skipped(store):
    assert store.add_run(make_run("r1")) is True
    assert store.add_run(make_run("r1", ("x",))) is False
    assert store.add_runs([make_run("r1"), make_run("r2"), make_run("r2", ("y",))]) == 1
    assert store.count_runs(**NS) == 2
    assert store.get_run("r1", **NS).tool_names == ["a", "b"]
    assert store.get_run("r2", **NS).tool_names == ["a", "b"]


def test_list_runs_is_newest_first_with_limit_and_offset(store):
    store.add_runs([make_run(f"r{i}", task=f"t{i}") for i in range(5)])
    summaries = store.list_runs(**NS)
    assert [s.run_id for s in summaries] == ["r4", "r3", "r2", "r1", "r0"]
    assert summaries[0].tool_count == 2 and summaries[0].task == "t4"
    assert summaries[0].created_at.tzinfo is not None
    assert [s.run_id for s in store.list_runs(**NS, limit=2, offset=1)] == ["r3", "r2"]


def test_iter_sequences_gives_names_and_errors_oldest_first(store):
    store.add_runs([make_run("r0", ("a", "boom")), make_run("r1", ()), make_run("r2", ("c",))])
    seqs = list(store.iter_sequences(**NS))
    assert [(s.run_id, s.names, s.errors) for s in seqs] == [
        ("r0", ("a", "boom"), (False, True)),
        ("r1", (), ()),
        ("r2", ("c",), (False,)),
    ]
    assert [s.run_id for s in store.iter_sequences(**NS, lookback=2)] == ["r1", "r2"]


def _columns_as_sequences(cols) -> list[tuple[object, ...]]:
    """``read_tool_names``'s columns as ``iter_sequences`` gives them, run by run."""
    out = []
    for r in range(cols.run_count):
        lo, hi = int(cols.offsets[r]), int(cols.offsets[r + 1])
        success = {1: True, 0: False, -1: None}[int(cols.success[r])]
        out.append(
            (
                cols.run_ids[r],
                tuple(cols.names[c] for c in cols.codes[lo:hi]),
                tuple(bool(e) for e in cols.errors[lo:hi]),
                success,
            )
        )
    return out


def _mixed_namespaces(store: Store) -> None:
    """Runs of NS interleaved with another namespace's, some failed, empty or unknown."""
    other = OTHER_NAMESPACES[0]
    runs = []
    for i in range(40):
        names = tuple(("a", "b", "boom", "c", "a")[: i % 6])
        success = (True, False, None)[i % 3]
        runs.append(make_run(f"r{i}", names, success=success))
        if i % 4 == 0:
            runs.append(make_run(f"r{i}", ("x", "y"), **{**other, "success": True}))
    store.add_runs(runs)


@pytest.mark.parametrize("calls_per_read", [3, 1 << 18])
def test_read_tool_names_gives_the_sequences_of_iter_sequences(store, monkeypatch, calls_per_read):
    from soloflow_core.store import columns

    monkeypatch.setattr(columns, "_CALLS_PER_READ", calls_per_read)
    _mixed_namespaces(store)
    for lookback in (None, 1, 7, 100):
        want = [
            (s.run_id, s.names, s.errors, s.success)
            for s in store.iter_sequences(**NS, lookback=lookback)
        ]
        cols = store.read_tool_names(**NS, lookback=lookback)
        assert _columns_as_sequences(cols) == want
        assert cols.offsets.dtype == cols.codes.dtype == cols.run_pks.dtype == "int64"
        assert cols.names == list(dict.fromkeys(n for s in want for n in s[1]))
        kept = store.read_tool_names(**NS, lookback=lookback, include_failed=False)
        assert _columns_as_sequences(kept) == [s for s in want if s[3] is not False]
    assert store.read_tool_names(user_id="nobody", agent_id="bot").run_count == 0


def test_read_tool_names_on_sqlite_matches_the_row_by_row_read(sqlite_store, monkeypatch):
    from soloflow_core.store import columns

    monkeypatch.setattr(columns, "_CALLS_PER_READ", 5)
    _mixed_namespaces(sqlite_store)
    quick = sqlite_store.read_tool_names(**NS)
    monkeypatch.setattr(columns, "_sqlite_chunk", lambda *args, **kwargs: None)
    monkeypatch.setattr(columns, "_sqlite_run_columns", lambda *args, **kwargs: None)
    slow = sqlite_store.read_tool_names(**NS)
    for field in ("run_pks", "offsets", "codes", "errors", "success", "cost", "tokens"):
        a, b = getattr(quick, field), getattr(slow, field)
        assert a.dtype == b.dtype, field
        np.testing.assert_array_equal(a, b, err_msg=field)  # NaN equals NaN here
    assert (quick.run_ids, quick.names) == (slow.run_ids, slow.names)


def test_a_missing_run_is_not_found_with_a_hint(store):
    with pytest.raises(NotFoundError, match=r"no task run 'nope' for user 'alice'.*runs list"):
        store.get_run("nope", **NS)


# ---------------------------------------------------------------------- batch atomicity


def install_reject_trigger(store: Store, tool_name: str) -> None:
    """A database trigger that refuses any tool call named ``tool_name``."""
    with store.engine.begin() as conn:
        if dialect(store) == "sqlite":
            conn.execute(
                sa.text(
                    "CREATE TRIGGER sf_test_reject BEFORE INSERT ON sf_tool_calls "
                    f"WHEN NEW.name = '{tool_name}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            )
        else:
            conn.execute(
                sa.text(
                    "CREATE FUNCTION sf_test_reject() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    f"IF NEW.name = '{tool_name}' THEN RAISE EXCEPTION 'refused' "
                    "USING ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$"
                )
            )
            conn.execute(
                sa.text(
                    "CREATE TRIGGER sf_test_reject BEFORE INSERT ON sf_tool_calls "
                    "FOR EACH ROW EXECUTE FUNCTION sf_test_reject()"
                )
            )


def test_a_refused_tool_call_rolls_back_the_whole_batch(store):
    store.add_run(make_run("before"))
    install_reject_trigger(store, "refused_tool")
    batch = [make_run("r1"), make_run("r2", ("a", "refused_tool")), make_run("r3")]
    with pytest.raises(sa.exc.IntegrityError, match="refused"):
        store.add_runs(batch)
    assert store.count_runs(**NS) == 1
    assert table_count(store, "sf_tool_calls") == 2  # only those of "before"
    assert table_count(store, "sf_model_calls") == 0
    assert store.add_runs([make_run("r1"), make_run("r3")]) == 2


def test_a_value_the_database_cannot_hold_rolls_back_the_whole_batch(store):
    if dialect(store) == "postgresql":  # PostgreSQL enforces VARCHAR(512)
        bad = make_run("r2", ("a", "x" * 600))
        expected: type[Exception] = sa.exc.DataError
    else:  # SQLite ignores VARCHAR lengths, but an INTEGER holds at most 64 bits
        bad = make_run("r2", model_calls=[ModelCall(input_tokens=2**70)])
        expected = OverflowError
    with pytest.raises(expected):
        store.add_runs([make_run("r1"), bad, make_run("r3")])
    assert store.count_runs(**NS) == 0
    assert table_count(store, "sf_tool_calls") == 0


def test_one_refused_run_is_rolled_back_whole_and_the_store_stays_usable(store):
    install_reject_trigger(store, "refused_tool")
    with pytest.raises(sa.exc.IntegrityError, match="refused"):
        store.add_run(make_run("bad", ("a", "refused_tool")))
    assert store.count_runs(**NS) == 0
    assert table_count(store, "sf_tool_calls") == 0
    assert store.add_run(make_run("good")) is True
    assert store.add_run(make_run("good")) is False
    assert [r.run_id for r in store.list_runs(**NS)] == ["good"]


def test_a_run_row_is_stored_as_its_task_run(store):
    run = make_run(
        "row",
        ("a", "b"),
        task="t",
        success=True,
        cost=0.5,
        tokens=12,
        classification="lookup",
        started_at=datetime(2024, 5, 1, 12, tzinfo=PLUS_TWO),
        model_calls=[ModelCall(model="m", input_tokens=3, output_tokens=4, total_tokens=7)],
        meta={"k": [1, 2]},
    )
    row = RunRow(
        **{name: getattr(run, name) for name in RunRow.__slots__ if name not in CALL_FIELDS},
        tool_calls=[ToolCallRow(**c.model_dump()) for c in run.tool_calls],
        model_calls=[ModelCallRow(**m.model_dump()) for m in run.model_calls],
    )
    assert row.to_task_run() == run
    assert store.add_run(row) is True and store.add_run(row) is False
    assert store.add_runs([row]) == 0
    assert store.get_run("row", **NS) == run.model_copy(
        update={"started_at": datetime(2024, 5, 1, 10, tzinfo=UTC)}
    )


def test_a_run_rows_parsed_json_is_stored_as_the_generic_writer_stores_it(store):
    """A RunRow's JSON values take pydantic-core's serialiser on SQLite: NaN becomes null and
    NUL is dropped there too, and the values read back are the same."""
    values = {"nan": float("nan"), "nul": "a\x00b", "é": ["\U0001f600", 1e16, -0.0, 2**70]}
    call = ToolCallRow(
        "t", values, values, error=None, duration_ms=None, tool_call_id=None, meta=values
    )
    row = RunRow(
        "r",
        NS["user_id"],
        NS["agent_id"],
        None,
        None,
        None,
        None,
        [call],
        [],
        None,
        None,
        None,
        values,
    )
    expected = {"nan": None, "nul": "ab", "é": ["\U0001f600", 1e16, -0.0, 2**70]}
    assert store.add_runs([row]) == 1
    back = store.get_run("r", **NS)
    assert back.meta == back.tool_calls[0].args == back.tool_calls[0].output == expected
    assert back.tool_calls[0].meta == expected


CALL_FIELDS = ("tool_calls", "model_calls")
TABLE_COLUMNS = {
    "sf_task_runs": "run_id, task, success, cost, tokens, tool_count, model_call_count, "
    "classification, started_at, ended_at, meta",
    "sf_tool_calls": "seq, name, args, output, error, duration_ms, tool_call_id, meta",
    "sf_model_calls": "seq, model, input_tokens, output_tokens, total_tokens, duration_ms, "
    "tool_calls_requested",
}


def stored_rows(store: Store, agent_id: str) -> dict[str, list[tuple[object, ...]]]:
    """Every column SQLite holds for the namespace, as stored (JSON as text, NULLs)."""
    out = {}
    with store.engine.connect() as conn:
        for table, columns in TABLE_COLUMNS.items():
            q = f"SELECT {columns} FROM {table} WHERE agent_id = ? ORDER BY id"
            out[table] = [tuple(r) for r in conn.exec_driver_sql(q, (agent_id,))]
    return out


def test_the_sqlite_fast_writers_store_the_rows_of_the_generic_writer(sqlite_store):
    """``add_runs`` and ``add_run`` on SQLite bind positional tuples through the driver; the
    generic writer (PostgreSQL's) goes through SQLAlchemy. Same rows, byte for byte."""
    odd = {"nan": float("nan"), "nul\x00": "a\x00b", "lone": "x\ud800", "true": 1, "e": "\u00e9"}
    runs = [
        make_run("plain"),
        make_run(
            "odd",
            ("a", "boom"),
            task="t\x00\udcff",
            success=False,
            cost=float("inf"),
            tokens=5,
            classification="c",
            started_at=datetime(2024, 5, 1, 12, tzinfo=PLUS_TWO),
            ended_at=datetime(2024, 5, 1, 13),
            meta=odd,
            model_calls=[ModelCall(), ModelCall(model="m", input_tokens=1, duration_ms=2.0)],
        ),
        make_run(
            "calls",
            tool_calls=[
                ToolCall(name="x", args=odd, output=[1, {"y": None}], tool_call_id="c1"),
                ToolCall(name="y", output=float("nan"), error=None, meta={"m": 1}),
            ],
        ),
    ]
    created = datetime(2024, 1, 1, tzinfo=UTC)

    def moved(agent: str) -> list[TaskRun]:
        return [r.model_copy(update={"agent_id": agent}) for r in runs]

    with sqlite_store.db.write() as conn:
        writer.insert_returning(conn, moved("generic"), created)
    sqlite_store.add_runs(moved("batch"))
    for run in moved("one"):
        sqlite_store.add_run(run)
    generic = stored_rows(sqlite_store, "generic")
    assert len(generic["sf_tool_calls"]) == 6 and len(generic["sf_model_calls"]) == 2
    assert stored_rows(sqlite_store, "batch") == generic
    assert stored_rows(sqlite_store, "one") == generic


# ---------------------------------------------------------------------- namespaces


def fill_namespace(store: Store) -> tuple[str, str]:
    store.add_runs([make_run("r1"), make_run("r2", ("a", "b", "c"))])
    cand = make_candidate()
    store.save_candidates([cand])
    flow = store.register_flow(make_flow(), **NS, source="user-submitted")
    frun = store.start_flow_run(flow, {"x": 1}, **NS)
    store.finish_flow_run(frun, status="completed", outputs={"y": 2})
    return cand.id, flow.name


@pytest.mark.parametrize("other", OTHER_NAMESPACES, ids=["other-agent", "other-user"])
def test_another_namespace_sees_nothing_of_the_first(store, other):
    cand_id, flow_name = fill_namespace(store)
    assert store.count_runs(**other) == 0
    assert store.list_runs(**other) == []
    assert store.load_runs(["r1", "r2"], **other) == []
    assert list(store.iter_sequences(**other)) == []
    assert list(store.iter_sequences(**other, lookback=5)) == []
    assert store.list_candidates(**other) == []
    assert store.list_candidates(**other, status="pending") == []
    assert store.decided_dedupe_keys(**other) == {}
    assert store.list_flows(**other) == []
    assert store.list_flow_runs(**other) == []
    assert store.list_flow_runs(**other, flow_name=flow_name) == []
    with pytest.raises(NotFoundError):
        store.get_run("r1", **other)
    with pytest.raises(NotFoundError):
        store.get_candidate(cand_id, **other)
    with pytest.raises(NotFoundError):
        store.set_candidate_status(cand_id, "rejected", **other)
    with pytest.raises(NotFoundError):
        store.get_flow(flow_name, **other)
    with pytest.raises(NotFoundError):
        store.get_flow(flow_name, **other, version=1)
    # The first namespace still has everything, untouched by the attempts above.
    assert store.count_runs(**NS) == 2
    assert store.get_candidate(cand_id, **NS).status == "pending"
    assert len(store.list_flow_runs(**NS)) == 1


@pytest.mark.parametrize("other", OTHER_NAMESPACES, ids=["other-agent", "other-user"])
def test_the_same_ids_live_independently_in_two_namespaces(store, other):
    fill_namespace(store)
    assert store.add_run(make_run("r1", ("z",), **other)) is True
    assert store.get_run("r1", **other).tool_names == ["z"]
    assert store.get_run("r1", **NS).tool_names == ["a", "b"]
    assert store.register_flow(make_flow(), **other, source="user-submitted").version == 1
    assert store.register_flow(make_flow(), **NS, source="user-submitted").version == 2


# ---------------------------------------------------------------------- candidates


def test_candidates_are_saved_refreshed_and_never_reopened(store):
    cand = make_candidate(count=3)
    store.save_candidates([cand])
    saved = store.get_candidate(cand.id, **NS)
    assert saved.status == "pending" and saved.created_at is not None
    assert saved.model_copy(update={"created_at": None}) == cand

    store.save_candidates([cand.model_copy(update={"occurrence_count": 5})])
    assert store.get_candidate(cand.id, **NS).occurrence_count == 5

    approved = store.set_candidate_status(cand.id, "approved", **NS)
    assert approved.status == "approved"
    store.save_candidates([cand.model_copy(update={"occurrence_count": 9})])
    again = store.get_candidate(cand.id, **NS)
    assert (again.status, again.occurrence_count) == ("approved", 5)
    assert store.decided_dedupe_keys(**NS) == {cand.dedupe_key: "approved"}


def test_candidates_are_listed_by_savings_and_filtered_by_status(store):
    small, big = make_candidate(("a", "b", "c"), 3), make_candidate(("d", "e", "f"), 7)
    store.save_candidates([small, big])
    assert [c.id for c in store.list_candidates(**NS)] == [big.id, small.id]
    store.set_candidate_status(small.id, "rejected", **NS)
    assert [c.id for c in store.list_candidates(**NS, status="pending")] == [big.id]
    assert [c.id for c in store.list_candidates(**NS, status="rejected")] == [small.id]


# ---------------------------------------------------------------------- flows and flow runs


def test_flows_are_versioned_per_name(store):
    first = store.register_flow(make_flow(), **NS, source="user-submitted")
    second = store.register_flow(
        make_flow(skills=("a", "b", "c")), **NS, source="auto-learned", candidate_id="cand_x"
    )
    store.register_flow(make_flow("other"), **NS, source="user-submitted")
    assert (first.version, second.version) == (1, 2)

    latest = store.get_flow("lookup", **NS)
    assert latest.flow == second and latest.flow.version == 2
    assert (latest.source, latest.candidate_id) == ("auto-learned", "cand_x")
    assert latest.created_at.tzinfo is not None
    assert store.get_flow("lookup", **NS, version=1).flow == first
    assert [(r.flow.name, r.flow.version) for r in store.list_flows(**NS)] == [
        ("lookup", 2),
        ("other", 1),
    ]
    with pytest.raises(NotFoundError, match="no flow 'lookup' version 3"):
        store.get_flow("lookup", **NS, version=3)


def test_flow_runs_start_finish_and_list(store):
    lookup, other = make_flow(), make_flow("other")
    r1 = store.start_flow_run(lookup, {"q": "x"}, **NS)
    r2 = store.start_flow_run(other, {}, **NS)
    r3 = store.start_flow_run(lookup, {"q": "y"}, **NS)
    store.finish_flow_run(r1, status="completed", outputs={"answer": [1, 2]})
    store.finish_flow_run(r3, status="failed", error="step s1: boom")

    runs = {r["id"]: r for r in store.list_flow_runs(**NS)}
    assert set(runs) == {r1, r2, r3}
    assert runs[r1]["status"] == "completed" and runs[r1]["outputs"] == {"answer": [1, 2]}
    assert runs[r1]["inputs"] == {"q": "x"} and runs[r1]["ended_at"] is not None
    assert runs[r2]["status"] == "running" and runs[r2]["ended_at"] is None
    assert runs[r3]["error"] == "step s1: boom" and runs[r3]["flow_version"] == 1
    assert {r["id"] for r in store.list_flow_runs(**NS, flow_name="lookup")} == {r1, r3}
    assert len(store.list_flow_runs(**NS, limit=2)) == 2


# ---------------------------------------------------------------------- JSON oddities


class Opaque:
    def __str__(self) -> str:
        return "<opaque>"


def test_json_oddities_are_stored_safely(store):
    run = make_run(
        "odd",
        task="a\x00b\udcff",
        meta={"nan": float("nan"), "keys": {3: "int key"}, "set": {1}},
        tool_calls=[
            ToolCall(
                name="a",
                args={
                    "inf": float("-inf"),
                    "nul\x00key": "v\x00al",
                    "nested": {"deep": [1, {"x": [None, True, 2.5]}]},
                    "when": datetime(2024, 5, 1, tzinfo=UTC),
                    "opaque": Opaque(),
                    "tuple": (1, "two"),
                    "lone": "x\ud800y",
                },
                output=Opaque(),
                meta={"bytes": b"raw"},
            )
        ],
    )
    assert store.add_run(run)
    back = store.get_run("odd", **NS)
    assert back.task == "ab\\udcff"
    assert back.meta == {"nan": None, "keys": {"3": "int key"}, "set": "{1}"}
    call = back.tool_calls[0]
    assert call.args == {
        "inf": None,
        "nulkey": "val",
        "nested": {"deep": [1, {"x": [None, True, 2.5]}]},
        "when": "2024-05-01 00:00:00+00:00",
        "opaque": "<opaque>",
        "tuple": [1, "two"],
        "lone": "x\\ud800y",
    }
    assert call.output == "<opaque>"
    assert call.meta == {"bytes": "b'raw'"}


def test_json_oddities_in_flow_runs(store):
    frun = store.start_flow_run(make_flow(), {"nan": float("nan"), "o": Opaque()}, **NS)
    store.finish_flow_run(frun, status="failed", outputs=[float("inf")], error="bad\x00byte")
    (row,) = store.list_flow_runs(**NS)
    assert row["inputs"] == {"nan": None, "o": "<opaque>"}
    assert row["outputs"] == [None]
    assert row["error"] == "badbyte"


# ---------------------------------------------------------------------- opening, migrating


def test_reopening_a_database_keeps_its_data_and_migrates_nothing(store, db_url):
    store.add_run(make_run("r1"))
    engine = create_store_engine(resolve_database_url(db_url))
    statements: list[str] = []
    sa.event.listen(
        engine, "before_cursor_execute", lambda *args: statements.append(args[2].strip().upper())
    )
    try:
        migrate(engine)
    finally:
        engine.dispose()
    assert statements, "migrate() should at least read the schema revision"
    assert not [s for s in statements if s.split()[0] in {"CREATE", "ALTER", "INSERT", "UPDATE"}]
    with Store.open(db_url) as again:
        assert again.get_run("r1", **NS) == store.get_run("r1", **NS)
        with again.engine.connect() as conn:
            revision = conn.execute(sa.text("SELECT version_num FROM sf_alembic_version"))
            assert revision.scalars().all() == [SCHEMA_REVISION]


def test_an_unknown_schema_revision_is_refused_with_a_clear_message(store, db_url):
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE sf_alembic_version SET version_num = '9999_future'"))
    with pytest.raises(SchemaVersionError) as caught:
        Store.open(db_url)
    message = str(caught.value)
    assert "'9999_future'" in message and f"schema '{SCHEMA_REVISION}'" in message
    assert "newer version" in message and "Upgrade soloflow-engine" in message
    assert isinstance(caught.value, StoreError)


def test_an_unknown_database_kind_is_a_store_error():
    with pytest.raises(StoreError, match="cannot open database 'nosuchdb://"):
        Store.open("nosuchdb://somewhere/db")


def test_sqlite_runs_in_wal_mode(sqlite_store, sqlite_url):
    sqlite_store.add_run(make_run("r1"))
    with sqlite_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    db_file = Path(sa.engine.make_url(sqlite_url).database or "")
    assert db_file.with_name(db_file.name + "-wal").exists()


def test_two_threads_write_one_sqlite_file_at_once(sqlite_url):
    stores = [Store.open(sqlite_url), Store.open(sqlite_url)]
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def writer(k: int) -> None:
        try:
            start.wait()
            for b in range(15):
                runs = [make_run(f"w{k}-{b}-{i}", ("a", "b", "c")) for i in range(20)]
                assert stores[k].add_runs(runs) == 20
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            for _ in range(30):
                stores[0].list_runs(**NS, limit=5)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in (0, 1)]
    threads.append(threading.Thread(target=reader))
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    try:
        assert errors == []
        assert stores[0].count_runs(**NS) == 2 * 15 * 20
        assert sum(len(s.names) for s in stores[1].iter_sequences(**NS)) == 2 * 15 * 20 * 3
    finally:
        for s in stores:
            s.close()


# ---------------------------------------------------------------------- URL resolution


def test_a_bare_path_is_a_sqlite_file_whose_folder_is_created(tmp_path):
    target = tmp_path / "new" / "dir" / "sf.db"
    assert resolve_database_url(str(target)) == f"sqlite:///{target}"
    assert target.parent.is_dir()


def test_a_home_relative_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_database_url("~/x/sf.db") == f"sqlite:///{tmp_path}/x/sf.db"


@pytest.mark.parametrize(
    "url, resolved",
    [
        ("postgresql://u:pw@db.example:5432/sf", "postgresql+psycopg://u:pw@db.example:5432/sf"),
        ("postgres://u@h/sf?sslmode=require", "postgresql+psycopg://u@h/sf?sslmode=require"),
        ("postgresql+psycopg://u@h/sf", "postgresql+psycopg://u@h/sf"),
        ("sqlite:////abs/sf.db", "sqlite:////abs/sf.db"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
    ],
)
def test_urls_resolve_to_their_driver(url, resolved):
    assert resolve_database_url(url) == resolved


def test_the_environment_variable_is_used_when_no_url_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLOFLOW_DATABASE_URL", "postgresql://u@h/from-env")
    assert resolve_database_url() == "postgresql+psycopg://u@h/from-env"
    assert resolve_database_url(str(tmp_path / "given.db")) == f"sqlite:///{tmp_path}/given.db"
    monkeypatch.setenv("SOLOFLOW_DATABASE_URL", str(tmp_path / "env.db"))
    with Store.open() as store:
        store.add_run(make_run("r1"))
    assert (tmp_path / "env.db").is_file()


def test_the_default_database_lives_under_soloflow_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLOFLOW_HOME", str(tmp_path / "sfhome"))
    assert default_database_path() == tmp_path / "sfhome" / "soloflow.db"
    assert resolve_database_url() == f"sqlite:///{tmp_path}/sfhome/soloflow.db"
    with Store.open() as store:
        store.add_run(make_run("r1"))
    assert (tmp_path / "sfhome" / "soloflow.db").is_file()


def test_without_soloflow_home_the_default_follows_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("SOLOFLOW_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_database_path() == tmp_path / "xdg" / "soloflow" / "soloflow.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_database_path() == tmp_path / "home" / ".local/share/soloflow/soloflow.db"


def test_sqlite_synchronous_is_configurable(tmp_path, monkeypatch):
    def level(store: Store) -> int:
        with store.engine.connect() as conn:
            return int(conn.exec_driver_sql("PRAGMA synchronous").scalar())

    assert level(Store.open(f"sqlite:///{tmp_path / 'normal.db'}")) == 1  # NORMAL
    monkeypatch.setenv("SOLOFLOW_SQLITE_SYNCHRONOUS", "full")
    assert level(Store.open(f"sqlite:///{tmp_path / 'full.db'}")) == 2  # FULL: fsync per commit
    monkeypatch.setenv("SOLOFLOW_SQLITE_SYNCHRONOUS", "sometimes")
    with pytest.raises(
        StoreError, match="SOLOFLOW_SQLITE_SYNCHRONOUS='SOMETIMES'.*NORMAL, FULL, EXTRA"
    ):
        Store.open(f"sqlite:///{tmp_path / 'bad.db'}")


def test_a_database_at_revision_0001_upgrades_to_head_and_keeps_its_data(tmp_path):
    from alembic import command
    from alembic.config import Config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_store_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(
            sa.text(
                "INSERT INTO sf_flow_runs (id, user_id, agent_id, flow_name, flow_version, status, started_at) "
                "VALUES ('frun_old', 'u', 'a', 'f', 1, 'completed', '2026-01-01 00:00:00')"
            )
        )
    engine.dispose()
    with Store.open(url) as store:
        with store.engine.connect() as conn:
            assert (
                conn.execute(sa.text("SELECT version_num FROM sf_alembic_version")).scalar()
                == SCHEMA_REVISION
            )
            row = conn.execute(sa.text("SELECT status, cancel_requested FROM sf_flow_runs")).one()
        assert tuple(row) == ("completed", 0)


def test_bare_number_outputs_load_back_as_numbers(store: Store):
    """SQLite's numeric affinity turns a JSON column's ``3`` into the integer 3; loading must
    take it as the decoded value (it used to call ``json.loads`` on it and fail)."""
    run = TaskRun(
        run_id="nums",
        user_id="u-num",
        agent_id="a",
        task="t",
        tool_calls=[
            ToolCall(name="n", args={"x": 1}, output=3),
            ToolCall(name="m", args={}, output=2.5),
            ToolCall(name="k", args={}, output="3"),
            ToolCall(name="z", args={}, output=[1, 2]),
        ],
    )
    store.add_run(run)
    loaded = store.load_runs(["nums"], user_id="u-num", agent_id="a")
    assert [c.output for c in loaded[0].tool_calls] == [3, 2.5, "3", [1, 2]]


@pytest.mark.parametrize("given", ["sqlite:///runs.db", Path("runs.db")])
def test_a_store_made_from_a_url_says_to_open_it(given: object) -> None:
    with pytest.raises(TypeError, match=r"Store\(\) takes an open Database.*Store\.open\("):
        Store(given)  # type: ignore[arg-type]
