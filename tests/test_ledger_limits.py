"""Ledger limits: one hostile record never costs the good ones (issue 25, point 1)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from soloflow_core.errors import LedgerError
from soloflow_core.ledger import _rows, ingest, parse_record
from soloflow_core.ledger.reader import parse_line
from soloflow_core.models import TaskRun, ToolCall
from soloflow_core.store import Store
from soloflow_core.store.json_values import CUT_MARKER, MAX_JSON_DEPTH, jsonable, too_deep

NS = {"default_user": "me", "default_agent": "bot"}
BIG = "9" * 5000


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def good(i: int) -> str:
    call = {"name": "lookup", "args": {"id": i}, "output": {"rows": [[i, "x"]]}}
    return json.dumps({"run_id": f"good-{i}", "task": "t", "tool_calls": [call]})


# (record, the field path the error names, the words it uses)
HOSTILE = [
    (f'{{"run_id": {BIG}}}', "run_id:", "5000 digits"),
    (f'{{"run_id": "r", "tokens": {BIG}}}', "tokens:", "5000 digits"),
    (f'{{"run_id": "r", "meta": {{"x": [1, {BIG}]}}}}', "meta.x[1]:", "at most 4300 digits"),
    (
        f'{{"run_id": "r", "tool_calls": [{{"name": "t", "args": {{"n": -{BIG}}}}}]}}',
        "tool_calls[0].args.n:",
        "at most 4300 digits",
    ),
    (
        f'{{"run_id": "r", "tool_calls": [{{"name": "t", "output": {nested(65)}}}]}}',
        "tool_calls[0].output:",
        "nest more than 64 deep",
    ),
    (
        f'{{"run_id": "r", "tool_calls": [{{"name": "t", "args": {{"a": {nested(450)}}}}}]}}',
        "tool_calls[0].args:",
        "nest more than 64 deep",
    ),
    (f'{{"run_id": "r", "meta": {{"a": {nested(1000)}}}}}', "", "nest more than 64 deep"),
    (
        f'{{"run_id": "r", "tool_calls": [{{"name": "t", "output": {nested(100_000)}}}]}}',
        "",
        "nest more than 64 deep",
    ),
    (
        '{"run_id": "r", "extra": %s}' % ('{"a":' * 80 + "1" + "}" * 80),
        "extra:",
        "nest more than 64 deep",
    ),
]


def test_the_two_lanes_share_the_stores_limits() -> None:
    assert _rows.MAX_DEPTH == MAX_JSON_DEPTH == 64
    assert _rows.MAX_DIGITS == 4300


@pytest.mark.parametrize("record,where,words", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_record_is_refused_by_name(record: str, where: str, words: str) -> None:
    with pytest.raises(LedgerError) as caught:
        parse_line(record.encode(), "me", "bot")
    assert caught.value.reason.startswith(where) and words in caught.value.reason


def test_a_deep_line_names_the_column_where_it_passes_the_limit() -> None:
    line = f'{{"run_id": "r", "meta": {{"a": {nested(1000)}}}}}'
    with pytest.raises(LedgerError, match=r"from column 9[0-9]\b"):
        parse_line(line.encode(), "me", "bot")


def test_values_at_the_limit_are_kept_whole(db_url: str, tmp_path: Path) -> None:
    line = json.dumps(
        {
            "run_id": "edge",
            "meta": {"n": int("9" * 4300)},
            "tool_calls": [{"name": "t", "output": json.loads(nested(64))}],
        }
    )
    path = tmp_path / "edge.jsonl"
    path.write_text(line + "\n")
    with Store.open(db_url) as store:
        report = ingest(store, [path], **NS)
        assert report.errors == [] and report.runs_written == 1
        run = store.get_run("edge", user_id="me", agent_id="bot")
    assert run.meta["n"] == int("9" * 4300)
    assert run.tool_calls[0].output == json.loads(nested(64))


def test_a_line_longer_than_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from soloflow_core.ledger import reader

    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 100)
    with pytest.raises(LedgerError, match="a record may be at most 100 bytes"):
        parse_line(json.dumps({"run_id": "r", "task": "x" * 200}).encode(), "me", "bot")


def test_every_good_line_around_hostile_ones_is_kept(db_url: str, tmp_path: Path) -> None:
    lines: list[str] = []
    for i, (record, _, _) in enumerate(HOSTILE):
        lines += [good(i), record]
    lines.append(good(len(HOSTILE)))
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with Store.open(db_url) as store:
        report = ingest(store, [path], **NS)
        assert report.runs_written == len(HOSTILE) + 1
        assert [e.line for e in report.errors] == [2 * i + 2 for i in range(len(HOSTILE))]
        assert store.count_runs(user_id="me", agent_id="bot") == len(HOSTILE) + 1
        assert {r.run_id for r in store.list_runs(user_id="me", agent_id="bot")} == {
            f"good-{i}" for i in range(len(HOSTILE) + 1)
        }


def _fuzz_record(rng: random.Random) -> str:
    """A record with one hostile value somewhere: huge numbers, deep nesting, odd types."""
    hostile = rng.choice(
        [
            BIG,
            "-" + BIG,
            nested(rng.randint(65, 3000)),
            '{"a":' * 70 + "1" + "}" * 70,
            "1e999",
            '"\\u0000"',
            '"\\ud800"',
            "[]",
            "{}",
            "null",
            "true",
            "12.0",
            "-1",
            json.dumps("x" * rng.randint(0, 5000)),
            nested(rng.randint(1, 64)),
        ]
    )
    field = rng.choice(
        [
            "run_id",
            "tokens",
            "cost",
            "task",
            "meta",
            "success",
            "extra",
            "tool_calls",
            "args",
            "output",
            "call_meta",
            "duration_ms",
            "name",
        ]
    )
    call = '{{"name": "t", "args": {}, "output": {}, "meta": {}, "duration_ms": {}}}'.format(
        hostile if field == "args" else "{}",
        hostile if field == "output" else "null",
        hostile if field == "call_meta" else "{}",
        hostile if field == "duration_ms" else "1",
    )
    if field == "name":
        call = f'{{"name": {hostile}}}'
    top = {"run_id": f'"fuzz-{rng.randrange(10**9)}"', "tool_calls": f"[{call}]"}
    if field in ("run_id", "tokens", "cost", "task", "meta", "success", "extra", "tool_calls"):
        top[field] = hostile
    return "{" + ", ".join(f'"{k}": {v}' for k, v in top.items()) + "}"


def test_a_fuzz_corpus_of_500_records_never_stops_an_ingest(db_url: str, tmp_path: Path) -> None:
    rng = random.Random(25)
    lines, goods = [], 0
    for i in range(500):
        lines.append(_fuzz_record(rng))
        if i % 5 == 0:
            lines.append(good(i))
            goods += 1
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with Store.open(db_url) as store:
        report = ingest(store, [path], **NS)
        stored = {r.run_id for r in store.list_runs(user_id="me", agent_id="bot", limit=10_000)}
    assert report.lines == len(lines)
    assert report.runs_written + report.runs_skipped_existing + len(report.errors) == len(lines)
    assert {f"good-{i}" for i in range(0, 500, 5)} <= stored
    assert all(e.line is not None and e.reason for e in report.errors)


def test_the_writer_cuts_a_capture_nested_deeper_than_the_limit(db_url: str) -> None:
    deep: object = "leaf"
    for _ in range(600):
        deep = [deep]
    run = TaskRun(
        run_id="deep",
        user_id="me",
        agent_id="bot",
        tool_calls=[ToolCall(name="t", output=deep, args={"n": 10**5000})],
    )
    with Store.open(db_url) as store:
        assert store.add_run(run) is True
        back = store.get_run("deep", user_id="me", agent_id="bot").tool_calls[0]
    level, value = 0, back.output
    while isinstance(value, list):
        level, value = level + 1, value[0]
    assert level == MAX_JSON_DEPTH and value.startswith(CUT_MARKER + "[[[")
    assert "4300 digits" in back.args["n"]
    assert not too_deep(back.output) and jsonable(back.output) == back.output


def test_parse_record_checks_python_values_too() -> None:
    with pytest.raises(LedgerError, match=r"^meta\.n: an integer may have at most 4300 digits"):
        parse_record({"run_id": "r", "meta": {"n": 10**4300}}, **NS)
    assert parse_record({"run_id": "r", "meta": {"n": 10**4300 - 1}}, **NS).meta["n"] > 0
