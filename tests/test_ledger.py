"""The ledger format: parsing records, reading files, ingesting into a real store."""

from __future__ import annotations

import copy
import gzip
import json
import tracemalloc
from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import AGENTDOJO, TAU_BENCH
from hypothesis import given, settings
from hypothesis import strategies as st

from soloflow_core.errors import LedgerError
from soloflow_core.ledger import _fields as ledger_fields
from soloflow_core.ledger import _plain as ledger_plain
from soloflow_core.ledger import _rows as ledger_rows
from soloflow_core.ledger import dump_run, ingest, parse_record, read_ledger
from soloflow_core.ledger import reader as ledger
from soloflow_core.models import ModelCall, TaskRun, ToolCall
from soloflow_core.store import Store
from soloflow_core.store import schema as store_schema
from soloflow_core.store.writer import RunRow

DEFAULTS = {"default_user": "me", "default_agent": "my-agent"}
TAU_NS = {"user_id": "me", "agent_id": "gpt-4o"}
DOJO_NS = {"user_id": "me", "agent_id": "ground_truth"}


def parse(obj: dict) -> TaskRun:
    return parse_record(obj, **DEFAULTS)


def write_lines(path: Path, lines: list[str | bytes], *, compress: bool = False) -> Path:
    data = b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n"
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def stored_runs(store: Store, ns: dict[str, str]) -> list[TaskRun]:
    ids = [s.run_id for s in store.iter_sequences(**ns)]
    return store.load_runs(ids, **ns)


# ---------------------------------------------------------------------- the shared data files


def test_tau_bench_ingests_with_the_counts_of_the_data_readme(store):
    report = ingest(store, [TAU_BENCH], **DEFAULTS, keep_namespaces=True)
    assert (report.files, report.lines, report.runs_written) == (1, 150, 150)
    assert (report.runs_skipped_existing, report.errors) == (0, [])

    seqs = list(store.iter_sequences(**TAU_NS))
    assert store.count_runs(**TAU_NS) == len(seqs) == 150
    assert sum(len(s.names) for s in seqs) == 862
    assert len({n for s in seqs for n in s.names}) == 14
    assert sum(sum(s.errors) for s in seqs) == 54
    assert sum(len(s.names) >= 3 for s in seqs) == 100
    assert round(sum(s.success is True for s in seqs) / 150, 2) == 0.42
    # keep_namespaces: the record's agent_id is kept; its null user_id took the caller's default.
    assert store.count_runs(user_id="me", agent_id="my-agent") == 0


def test_by_default_every_run_lands_in_the_callers_namespace(store, tmp_path):
    report = ingest(store, [TAU_BENCH, AGENTDOJO], **DEFAULTS)
    assert report.namespaces == {("me", "my-agent"): 247}
    assert store.count_runs(user_id="me", agent_id="my-agent") == 247
    assert store.count_runs(**TAU_NS) == 0
    run = store.get_run("tau-bench/gpt-4o-airline/task0/trial0", user_id="me", agent_id="my-agent")
    assert run.meta["ledger_agent_id"] == "gpt-4o" and "ledger_user_id" not in run.meta
    # A file cannot write into another user's namespace.
    other = write_lines(
        tmp_path / "x.jsonl", [json.dumps({"run_id": "x", "user_id": "mallory", "agent_id": "a"})]
    )
    ingest(store, [other], **DEFAULTS)
    assert store.count_runs(user_id="mallory", agent_id="a") == 0
    assert store.get_run("x", user_id="me", agent_id="my-agent").meta == {
        "ledger_user_id": "mallory",
        "ledger_agent_id": "a",
    }


def test_agentdojo_ingests_with_the_counts_of_the_data_readme(store):
    report = ingest(store, [AGENTDOJO], **DEFAULTS, keep_namespaces=True)
    assert (report.lines, report.runs_written, report.errors) == (97, 97, [])

    by_suite: dict[str, list[TaskRun]] = defaultdict(list)
    for run in stored_runs(store, DOJO_NS):
        by_suite[run.meta["suite"]].append(run)
    table = {
        suite: (
            len(runs),
            sum(len(r.tool_calls) for r in runs),
            len({n for r in runs for n in r.tool_names}),
            sum(len(r.tool_calls) >= 3 for r in runs),
            sum(r.success is True for r in runs) / len(runs),
            sum(bool(c.error) for r in runs for c in r.tool_calls),
        )
        for suite, runs in by_suite.items()
    }
    assert table == {
        "banking": (16, 33, 8, 3, 1.0, 0),
        "slack": (21, 98, 10, 16, 1.0, 0),
        "travel": (20, 124, 20, 19, 1.0, 0),
        "workspace": (40, 84, 17, 11, 1.0, 0),
    }


def test_both_files_together_match_the_readme_totals(store):
    report = ingest(store, [TAU_BENCH, AGENTDOJO], **DEFAULTS, keep_namespaces=True)
    assert (report.files, report.runs_written) == (2, 247)
    assert report.namespaces == {("me", "gpt-4o"): 150, ("me", "ground_truth"): 97}
    seqs = list(store.iter_sequences(**TAU_NS)) + list(store.iter_sequences(**DOJO_NS))
    assert len(seqs) == 247
    assert sum(len(s.names) for s in seqs) == 1201
    assert len({n for s in seqs for n in s.names}) == 67
    assert sum(len(s.names) >= 3 for s in seqs) == 149
    assert round(sum(s.success is True for s in seqs) / 247, 2) == 0.65


def test_the_store_gives_back_exactly_the_runs_read(store):
    ingest(store, [TAU_BENCH, AGENTDOJO], **DEFAULTS, keep_namespaces=True)
    for path, ns in [(TAU_BENCH, TAU_NS), (AGENTDOJO, DOJO_NS)]:
        read = [run for _, run in read_ledger(path, **DEFAULTS)]
        assert all(isinstance(r, TaskRun) for r in read)
        assert store.load_runs([r.run_id for r in read], **ns) == read


def test_unknown_top_level_fields_of_the_real_files_land_in_meta():
    _, run = next(read_ledger(TAU_BENCH, **DEFAULTS))
    assert isinstance(run, TaskRun)
    assert run.meta["source"] == "tau-bench/gpt-4o-airline"
    assert run.meta["reward"] in (0.0, 1.0) and isinstance(run.meta["llm_turns"], int)
    assert {"domain", "task_id", "trial", "customer_id", "expected_actions"} <= set(run.meta)
    assert "_extra" not in run.meta and run.tokens is None


def test_real_runs_survive_dump_and_parse():
    for path in (TAU_BENCH, AGENTDOJO):
        for _, run in read_ledger(path, **DEFAULTS):
            assert isinstance(run, TaskRun)
            assert parse_record(json.loads(json.dumps(dump_run(run))), **DEFAULTS) == run


# ---------------------------------------------------------------------- bad lines


BROKEN = [
    json.dumps({"run_id": "good-1", "tool_calls": [{"name": "a"}]}),
    "{not json",
    "[1, 2]",
    json.dumps({"task": "no id"}),
    json.dumps({"run_id": "x", "tool_calls": [{"name": "a"}, {"args": {}}]}),
    json.dumps({"run_id": "y", "tool_calls": [{"name": "a", "args": '{"k": 1}'}]}),
    json.dumps({"run_id": "z", "success": "yes"}),
    "   ",
    json.dumps({"run_id": "w", "tokens": "12"}),
    json.dumps({"run_id": "good-2", "user_id": None, "tool_calls": None}),
    json.dumps({"run_id": "v", "model_calls": [{"input_tokens": -1}]}),
    json.dumps({"run_id": "t", "started_at": "yesterday"}),
    b'{"run_id": "\xff\xfe"}',
    json.dumps({"run_id": "s", "tool_calls": [{"name": "a", "error": "no"}]}),
    json.dumps({"run_id": "good-3"}) + "\r",
]
BROKEN_ERRORS = [
    (2, "not valid JSON: Expecting property name enclosed in double quotes at column 2"),
    (3, "a record must be a JSON object {...}, got an array"),
    (4, "run_id: required, a non-empty string (got nothing)"),
    (5, "tool_calls[1].name: required, a non-empty string (got nothing)"),
    (6, 'tool_calls[0].args: must be a JSON object or null (got the string "{\\"k\\": 1}")'),
    (7, 'success: must be true, false or null (got the string "yes")'),
    (9, 'tokens: must be a non-negative integer (got the string "12")'),
    (11, "model_calls[0].input_tokens: must be a non-negative integer (got the number -1)"),
    (12, "started_at: must be an ISO 8601 date-time"),
    (13, "not valid UTF-8 (byte 13 of the line); re-encode the file as UTF-8"),
    (14, 'tool_calls[0].error: must be true, false or null (got the string "no")'),
]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_bad_lines_are_reported_and_every_good_line_kept(store, tmp_path, compress):
    path = write_lines(tmp_path / "mixed.jsonl", BROKEN, compress=compress)
    report = ingest(store, [path], **DEFAULTS)
    assert report.runs_written == 3 and report.lines == len(BROKEN) - 1  # one blank line
    assert report.lines == report.runs_written + report.runs_skipped_existing + len(report.errors)
    assert [(e.line, e.path) for e in report.errors] == [(n, str(path)) for n, _ in BROKEN_ERRORS]
    for error, (line, start) in zip(report.errors, BROKEN_ERRORS, strict=True):
        assert error.reason.startswith(start), error.reason
        assert str(error) == f"{path}:{line}: {error.reason}"
    assert [r.run_id for r in store.list_runs(user_id="me", agent_id="my-agent")] == [
        "good-3",
        "good-2",
        "good-1",
    ]
    assert store.get_run("good-1", user_id="me", agent_id="my-agent").tool_names == ["a"]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"run_id": ""}, 'run_id: required, a non-empty string (got the string "")'),
        ({"run_id": 5}, "run_id: required, a non-empty string (got the number 5)"),
        ({"run_id": None}, "run_id: required, a non-empty string (got null)"),
        ({"run_id": "r" * 513}, "run_id: at most 512 characters (got a string of 513 characters)"),
        ({"run_id": "a\x00b"}, "run_id: must not contain NUL"),
        ({"run_id": "a\ud800"}, "run_id: must not contain lone UTF-16 surrogates"),
        ({"run_id": "r", "user_id": ""}, "user_id: must be a non-empty string, or null"),
        ({"run_id": "r", "agent_id": ["x"]}, "agent_id: must be a non-empty string, or null"),
        ({"run_id": "r", "agent_id": "a" * 256}, "agent_id: at most 255 characters"),
        ({"run_id": "r", "task": 5}, "task: must be a string or null (got the number 5)"),
        ({"run_id": "r", "success": 1}, "success: must be true, false or null (got the number 1)"),
        ({"run_id": "r", "cost": "1.0"}, 'cost: must be a number or null (got the string "1.0")'),
        ({"run_id": "r", "cost": True}, "cost: must be a number or null (got true)"),
        ({"run_id": "r", "tokens": -1}, "tokens: must be a non-negative integer"),
        ({"run_id": "r", "tokens": 1.5}, "tokens: must be a non-negative integer"),
        ({"run_id": "r", "tokens": 2**31}, "tokens: must be at most 2147483647"),
        ({"run_id": "r", "tokens": {"input_tokens": 1}}, "tokens: an object needs total_tokens"),
        ({"run_id": "r", "tokens": {"total_tokens": "9"}}, "tokens.total_tokens: must be a non-"),
        ({"run_id": "r", "tool_calls": {}}, "tool_calls: must be an array or null (got an object)"),
        ({"run_id": "r", "tool_calls": ["a"]}, "tool_calls[0]: must be a JSON object"),
        ({"run_id": "r", "tool_calls": [{"name": "a"}, {"name": ""}]}, "tool_calls[1].name:"),
        ({"run_id": "r", "tool_calls": [{"name": "x" * 513}]}, "tool_calls[0].name: at most 512"),
        (
            {"run_id": "r", "tool_calls": [{"name": "a", "args": "{}"}]},
            'tool_calls[0].args: must be a JSON object or null (got the string "{}"); '
            "decode JSON-encoded arguments first",
        ),
        ({"run_id": "r", "tool_calls": [{"name": "a", "duration_ms": -1}]}, "tool_calls[0].dura"),
        ({"run_id": "r", "tool_calls": [{"name": "a", "tool_call_id": 3}]}, "tool_calls[0].tool_"),
        ({"run_id": "r", "tool_calls": [{"name": "a", "meta": "m"}]}, "tool_calls[0].meta: must"),
        ({"run_id": "r", "model_calls": [{"cost": 1}]}, "model_calls[0].cost: unknown field"),
        ({"run_id": "r", "model_calls": [7]}, "model_calls[0]: must be a JSON object"),
        ({"run_id": "r", "model_calls": [{"model": ""}]}, "model_calls[0].model: must be a non-"),
        ({"run_id": "r", "started_at": "yesterday"}, "started_at: must be an ISO 8601 date-time"),
        ({"run_id": "r", "ended_at": 1714560000}, "ended_at: must be an ISO 8601 date-time"),
        ({"run_id": "r", "classification": "c" * 65}, "classification: at most 64 characters"),
        ({"run_id": "r", "meta": []}, "meta: must be a JSON object or null (got an array)"),
        (["not", "a", "dict"], "record: must be a JSON object {...} (got an array)"),
    ],
)
def test_each_malformed_field_is_named_with_what_to_write_instead(record, message):
    with pytest.raises(LedgerError) as caught:
        parse(record)
    assert caught.value.reason.startswith(message), caught.value.reason
    assert caught.value.path is None and caught.value.line is None


def test_lone_surrogates_are_stored_in_text_and_refused_in_ids(store, tmp_path):
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            '{"run_id": "cut", "task": "x\\ud800", "tool_calls": [{"name": "a", "output": "\\udc80"}]}',
            '{"run_id": "pair", "task": "\\ud83d\\ude00"}',
            '{"run_id": "id\\ud800"}',
        ],
    )
    report = ingest(store, [path], **DEFAULTS)
    assert report.runs_written == 2
    assert [(e.line, e.reason[:48]) for e in report.errors] == [
        (3, "run_id: must not contain lone UTF-16 surrogates ")
    ]
    ns = {"user_id": "me", "agent_id": "my-agent"}
    cut = store.get_run("cut", **ns)
    assert (cut.task, cut.tool_calls[0].output) == ("x\\ud800", "\\udc80")
    assert store.get_run("pair", **ns).task == "\U0001f600"


def test_the_database_refusing_a_run_loses_only_that_run(store, tmp_path):
    """A run the parser accepts but the database refuses (here: a trigger) is reported on its
    line; the other runs of its batch are still written."""
    with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.execute(
                sa.text(
                    "CREATE TRIGGER sf_test_reject BEFORE INSERT ON sf_tool_calls WHEN "
                    "NEW.name = 'refused_tool' BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END"
                )
            )
        else:
            conn.execute(
                sa.text(
                    "CREATE FUNCTION sf_test_reject() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "IF NEW.name = 'refused_tool' THEN RAISE EXCEPTION 'refused by trigger' "
                    "USING ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$"
                )
            )
            conn.execute(
                sa.text(
                    "CREATE TRIGGER sf_test_reject BEFORE INSERT ON sf_tool_calls "
                    "FOR EACH ROW EXECUTE FUNCTION sf_test_reject()"
                )
            )
    path = write_lines(
        tmp_path / "r.jsonl",
        [
            json.dumps({"run_id": "ok-1", "tool_calls": [{"name": "a"}]}),
            json.dumps({"run_id": "bad", "tool_calls": [{"name": "a"}, {"name": "refused_tool"}]}),
            "oops",
            json.dumps({"run_id": "ok-2", "tool_calls": [{"name": "b"}]}),
        ],
    )
    report = ingest(store, [path], **DEFAULTS)
    assert (report.runs_written, report.runs_skipped_existing) == (2, 0)
    assert [e.line for e in report.errors] == [2, 3]
    assert report.errors[0].reason.startswith("the database refused run 'bad': ")
    assert "refused by trigger" in report.errors[0].reason
    ns = {"user_id": "me", "agent_id": "my-agent"}
    assert sorted(r.run_id for r in store.list_runs(**ns)) == ["ok-1", "ok-2"]
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM sf_tool_calls")).scalar_one() == 2


# ---------------------------------------------------------------------- files


def test_gzip_is_detected_by_content_not_by_name(tmp_path):
    lines = [json.dumps({"run_id": f"r{i}"}) for i in range(3)]
    disguised = write_lines(tmp_path / "looks-plain.jsonl", lines, compress=True)
    misnamed = write_lines(tmp_path / "not-really.jsonl.gz", lines)
    for path in (disguised, misnamed):
        assert [(n, r.run_id) for n, r in read_ledger(path, **DEFAULTS)] == [  # type: ignore[union-attr]
            (1, "r0"),
            (2, "r1"),
            (3, "r2"),
        ]


def test_a_truncated_gzip_file_keeps_the_lines_before_the_damage(tmp_path):
    lines = [json.dumps({"run_id": f"r{i}", "task": f"task number {i} " * 20}) for i in range(200)]
    whole = gzip.compress(("\n".join(lines) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    items = list(read_ledger(path, **DEFAULTS))
    *runs, (last_line, damage) = items
    assert runs and all(isinstance(r, TaskRun) for _, r in runs)
    assert [r.run_id for _, r in runs] == [f"r{i}" for i in range(len(runs))]  # type: ignore[union-attr]
    assert isinstance(damage, LedgerError) and damage.line == last_line == len(runs) + 1
    assert "gzip data is truncated or corrupt" in damage.reason


def test_a_bom_crlf_and_blank_lines_are_tolerated_and_lines_keep_their_numbers(tmp_path):
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"run_id": "a"}\r\n\r\n\n{"run_id": "b"}\r\n')
    assert [(n, r.run_id) for n, r in read_ledger(path, **DEFAULTS)] == [(1, "a"), (4, "b")]  # type: ignore[union-attr]


def test_a_missing_file_is_a_ledger_error_and_nothing_is_written(store, tmp_path):
    good = write_lines(tmp_path / "good.jsonl", [json.dumps({"run_id": "r"})])
    with pytest.raises(LedgerError, match="cannot read the file") as caught:
        ingest(store, [good, tmp_path / "missing.jsonl"], **DEFAULTS)
    assert caught.value.path == str(tmp_path / "missing.jsonl")
    assert store.count_runs(user_id="me", agent_id="my-agent") == 0
    with pytest.raises(LedgerError, match="cannot open the file"):
        list(read_ledger(tmp_path / "missing.jsonl", **DEFAULTS))


def test_reading_streams_line_by_line(tmp_path):
    """A 12 MB file is read with a small, flat memory peak: never whole."""
    path = tmp_path / "big.jsonl"
    payload = "x" * 6000
    with path.open("w") as f:
        for i in range(2000):
            f.write(
                json.dumps({"run_id": f"r{i}", "tool_calls": [{"name": "a", "output": payload}]})
            )
            f.write("\n")
    assert path.stat().st_size > 12_000_000
    tracemalloc.start()
    try:
        count = sum(1 for _, r in read_ledger(path, **DEFAULTS) if isinstance(r, TaskRun))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 2000
    assert peak < 1_000_000, peak


# ---------------------------------------------------------------------- ingest


def test_ingesting_twice_writes_nothing_new(store):
    first = ingest(store, [TAU_BENCH], **DEFAULTS, keep_namespaces=True)
    second = ingest(store, [TAU_BENCH], **DEFAULTS, keep_namespaces=True)
    assert (first.runs_written, first.runs_skipped_existing) == (150, 0)
    assert (second.runs_written, second.runs_skipped_existing, second.lines) == (0, 150, 150)
    assert store.count_runs(**TAU_NS) == 150
    assert sum(len(s.names) for s in store.iter_sequences(**TAU_NS)) == 862


def test_a_run_id_repeated_in_the_files_is_written_once(store, tmp_path):
    path = write_lines(
        tmp_path / "dup.jsonl",
        [
            json.dumps({"run_id": "r", "tool_calls": [{"name": "first"}]}),
            json.dumps({"run_id": "r", "tool_calls": [{"name": "second"}]}),
        ],
    )
    report = ingest(store, [path, path], **DEFAULTS)
    assert (report.lines, report.runs_written, report.runs_skipped_existing) == (4, 1, 3)
    assert store.get_run("r", user_id="me", agent_id="my-agent").tool_names == ["first"]


def test_progress_is_reported_in_lines_and_bytes(store, tmp_path):
    calls: list[tuple[int, int, int]] = []
    report = ingest(
        store, [TAU_BENCH, AGENTDOJO], **DEFAULTS, on_progress=lambda *a: calls.append(a)
    )
    total = TAU_BENCH.stat().st_size + AGENTDOJO.stat().st_size
    assert len(calls) >= 2 and calls[-1] == (report.lines, total, total)
    assert all(t == total for _, _, t in calls)
    assert [c[:2] for c in calls] == sorted(c[:2] for c in calls)
    assert any(0 < done < total for _, done, _ in calls)


# ---------------------------------------------------------------------- parse_record details


def test_namespace_defaults_apply_only_to_null_ids():
    assert (parse({"run_id": "r"}).user_id, parse({"run_id": "r"}).agent_id) == ("me", "my-agent")
    run = parse({"run_id": "r", "user_id": None, "agent_id": "bot"})
    assert (run.user_id, run.agent_id) == ("me", "bot")
    run = parse({"run_id": "r", "user_id": "alice", "agent_id": None})
    assert (run.user_id, run.agent_id) == ("alice", "my-agent")


def test_unknown_fields_go_to_meta_without_overwriting_it():
    record = {
        "run_id": "r",
        "source": "s",
        "trial": 9,
        "meta": {"trial": 1, "k": "v"},
        "tool_calls": [{"name": "a", "id": "call_1", "latency": 3, "meta": {"id": "keep"}}],
    }
    before = copy.deepcopy(record)
    run = parse(record)
    assert run.meta == {"trial": 1, "k": "v", "source": "s", "_extra": {"trial": 9}}
    assert run.tool_calls[0].meta == {"id": "keep", "latency": 3, "_extra": {"id": "call_1"}}
    assert record == before  # the input is not modified
    again = parse(dump_run(run))
    assert again == run and again.meta["_extra"] == {"trial": 9}


def test_an_unknown_field_with_no_room_left_in_meta_is_an_error():
    with pytest.raises(LedgerError, match=r"^meta\._extra\.trial: no room for the unknown field"):
        parse({"run_id": "r", "trial": 9, "meta": {"trial": 1, "_extra": {"trial": 2}}})
    with pytest.raises(LedgerError, match=r"^tool_calls\[0\]\.meta\._extra\.id: no room"):
        parse(
            {"run_id": "r", "tool_calls": [{"name": "a", "id": 1, "meta": {"id": 2, "_extra": 3}}]}
        )


@pytest.mark.parametrize(
    "tokens, expected",
    [
        (None, None),
        (42, 42),
        (42.0, 42),
        ({"total_tokens": 30, "input_tokens": 10}, 30),
        ({"input_tokens": 10, "output_tokens": 20}, 30),
        ({"total_tokens": None, "input_tokens": 1, "output_tokens": 2}, 3),
    ],
)
def test_tokens_may_be_a_number_or_a_usage_object(tokens, expected):
    assert parse({"run_id": "r", "tokens": tokens}).tokens == expected


def test_model_calls_and_timestamps():
    run = parse(
        {
            "run_id": "r",
            "model_calls": [
                {"model": "gpt", "input_tokens": 3, "output_tokens": 4, "tool_calls_requested": 1},
                {"total_tokens": 9, "duration_ms": 12},
            ],
            "started_at": "2024-05-01T12:30:00Z",
            "ended_at": "2024-05-01T14:31:00+02:00",
            "classification": "billing",
        }
    )
    assert run.model_calls == [
        ModelCall(
            model="gpt", input_tokens=3, output_tokens=4, total_tokens=7, tool_calls_requested=1
        ),
        ModelCall(total_tokens=9, duration_ms=12.0),
    ]
    assert run.started_at == datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert run.ended_at is not None and run.ended_at.utcoffset() == timedelta(hours=2)
    assert run.ended_at - run.started_at == timedelta(minutes=1)
    assert parse({"run_id": "r", "started_at": "2024-05-01T12:30:00"}).started_at == run.started_at
    assert run.classification == "billing"


def test_limits_match_the_store_columns():
    runs, calls, models = (
        store_schema.task_runs.c,
        store_schema.tool_calls.c,
        store_schema.model_calls.c,
    )
    assert ledger_rows.MAX_RUN_ID == runs.run_id.type.length
    assert ledger_rows.MAX_NAMESPACE == runs.user_id.type.length == runs.agent_id.type.length
    assert ledger_rows.MAX_CLASSIFICATION == runs.classification.type.length
    assert ledger_rows.MAX_TOOL_NAME == calls.name.type.length
    assert ledger_rows.MAX_TOOL_CALL_ID == calls.tool_call_id.type.length
    assert ledger_rows.MAX_MODEL == models.model.type.length
    assert isinstance(runs.tokens.type, sa.Integer) and isinstance(
        models.input_tokens.type, sa.Integer
    )


# ---------------------------------------------------------------------- round trip property

texts = st.text(max_size=12)
identifiers = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=20
)
names = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=20)
"""Run, user and agent ids: no control character (soloflow_core.models.names)."""
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
counts = st.integers(min_value=0, max_value=2**31 - 1)
durations = st.none() | st.floats(min_value=0, allow_nan=False, allow_infinity=False)
timestamps = st.none() | st.datetimes(
    min_value=datetime(1900, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
    ),
)
tool_calls = st.builds(
    ToolCall,
    name=identifiers,
    args=json_objects,
    output=json_values,
    error=st.none() | st.booleans(),
    duration_ms=durations,
    tool_call_id=st.none() | identifiers,
    meta=json_objects,
)
model_calls = st.builds(
    ModelCall,
    model=st.none() | identifiers,
    input_tokens=counts,
    output_tokens=counts,
    total_tokens=counts,
    duration_ms=durations,
    tool_calls_requested=counts,
)
task_runs = st.builds(
    TaskRun,
    run_id=names,
    user_id=names,
    agent_id=names,
    task=st.none() | st.text(max_size=40),
    success=st.none() | st.booleans(),
    cost=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    tokens=st.none() | counts,
    tool_calls=st.lists(tool_calls, max_size=4),
    model_calls=st.lists(model_calls, max_size=2),
    started_at=timestamps,
    ended_at=timestamps,
    classification=st.none() | identifiers,
    meta=json_objects,
)


@settings(max_examples=200, deadline=None)
@given(task_runs)
def test_parse_of_dump_is_the_identity(run):
    record = json.loads(json.dumps(dump_run(run)))
    assert parse_record(record, default_user="x", default_agent="y") == run


# ---------------------------------------------------------------------- the fast lane

# Values of every JSON type, the odd ones included, for any field of a record.
odd_values = st.one_of(
    json_values,
    st.sampled_from([float("nan"), float("inf"), 12.0, -1, 2**31, 2**70, "", "x\x00", True]),
    st.sampled_from(["2024-05-01T12:30:00Z", "2024-05-01", "yesterday", "\ud800", "\U0001f600"]),
)
tool_call_records = st.dictionaries(
    st.sampled_from([*sorted(ledger_fields.TOOL_CALL_FIELDS), "extra"]), odd_values, max_size=8
) | st.builds(lambda c: dump_run(TaskRun(run_id="r", tool_calls=[c]))["tool_calls"][0], tool_calls)
model_call_records = st.dictionaries(
    st.sampled_from([*sorted(ledger_fields.MODEL_CALL_FIELDS), "cost"]),
    odd_values | counts,
    max_size=7,
)
records = st.dictionaries(
    st.sampled_from([*sorted(ledger_fields.RUN_FIELDS), "source", "reward"]),
    odd_values | st.lists(tool_call_records, max_size=3) | st.lists(model_call_records, max_size=2),
    max_size=14,
).map(lambda r: {"run_id": "r1", **r} if "run_id" not in r else r)


def reference(line: bytes) -> TaskRun | str:
    """The checked path: ``json.loads`` then ``parse_record`` (the error text if it fails)."""
    try:
        return parse_record(json.loads(line), **DEFAULTS)
    except LedgerError as exc:
        return exc.reason


@settings(max_examples=200, deadline=None)
@given(st.one_of(records, task_runs.map(dump_run)))
def test_the_fast_lane_reads_what_the_checked_path_reads_or_leaves_the_line_to_it(record):
    line = json.dumps(record).encode()
    fast = ledger_plain.parse_plain(line, **DEFAULTS)
    expected = reference(line)
    if fast is not None:  # repr: NaN is not equal to itself
        assert repr(fast.to_task_run()) == repr(expected)
    try:
        read = ledger.parse_line(line, **DEFAULTS)
    except LedgerError as exc:
        assert exc.reason == expected
    else:
        assert repr(read.to_task_run() if isinstance(read, RunRow) else read) == repr(expected)


@settings(max_examples=100, deadline=None)
@given(task_runs)
def test_the_fast_lane_takes_every_ordinary_record(run):
    line = json.dumps(dump_run(run)).encode()
    fast = ledger_plain.parse_plain(line, **DEFAULTS)
    assert fast is not None and fast.to_task_run() == run


def test_the_real_files_take_the_fast_lane():
    for path in (TAU_BENCH, AGENTDOJO):
        for line in gzip.open(path).read().splitlines():
            fast = ledger_plain.parse_plain(line, **DEFAULTS)
            assert fast is not None and fast.to_task_run() == reference(line)


def test_the_agents_final_answer_is_kept_on_every_path(store, tmp_path):
    """``answer`` through the fast lane (a plain line), the checked path (a line the fast
    lane leaves to it: a count written 12.0) and one run added directly: read back exactly."""
    lines = [
        {"run_id": "plain", "task": "t", "answer": "Your order O-1 is in transit."},
        {"run_id": "checked", "task": "t", "answer": "Sent ✓", "tokens": 12.0},
        {"run_id": "none", "task": "t"},
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    report = ingest(store, [path], default_user="u", default_agent="a")
    assert report.errors == []
    store.add_run(TaskRun(run_id="direct", user_id="u", agent_id="a", answer="Done."))
    runs = store.load_runs(["plain", "checked", "none", "direct"], user_id="u", agent_id="a")
    assert {r.run_id: r.answer for r in runs} == {
        "plain": "Your order O-1 is in transit.",
        "checked": "Sent ✓",
        "none": None,
        "direct": "Done.",
    }
    with pytest.raises(LedgerError, match="answer"):
        parse_record({"run_id": "x", "answer": 42}, default_user="u", default_agent="a")
