"""Hostile stored text and arguments give the CLI one clear line, never a traceback: rich
markup in stored text prints literally, numbers are bounded, nesting and regexes are checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soloflow_core.learning.promotion import submit_flow
from soloflow_core.models import FlowDefinition, FlowStep, TaskRun, ToolCall
from soloflow_core.store import Store
from soloflow_langgraph.cli import app

runner = CliRunner()
MARKUP = "close [/x] then [bold]b[/bold] and [/]"


def sf(db: str, *args: str):
    return runner.invoke(
        app,
        ["--db", db, "--user", "u", "--agent", "a", *args],
        catch_exceptions=False,
        terminal_width=200,  # wide enough that no column folds the text looked for
    )


def test_stored_text_with_markup_prints_literally(store: Store, db_url: str) -> None:
    store.add_run(
        TaskRun(
            run_id="r[/1]",
            user_id="u",
            agent_id="a",
            task=MARKUP,
            success=True,
            tool_calls=[ToolCall(name="tool[/t]", args={"q": "[/q]"}, output="ok")],
        )
    )
    store.add_run(TaskRun(run_id="plain", user_id="u", agent_id="a", task="fine", success=True))
    res = sf(db_url, "runs", "list")
    assert res.exit_code == 0, res.output
    # (the task column may fold at 80 columns: its markup is looked for piece by piece)
    assert all(part in res.output for part in ("[/x]", "[bold]b", "r[/1]", "fine")), res.output
    res = sf(db_url, "runs", "show", "r[/1]")
    assert res.exit_code == 0, res.output
    assert "tool[/t]" in res.output and "[/x]" in res.output
    res = sf(db_url, "runs", "show", "no[/such]")
    assert res.exit_code == 1 and "no[/such]" in res.output and "Traceback" not in res.output


def test_a_flow_named_with_markup_lists_literally(store: Store, db_url: str) -> None:
    flow = FlowDefinition(name="[/weird] flow", steps=[FlowStep(id="a", skill_key="t[/k]")])
    submit_flow(store, flow, user_id="u", agent_id="a")
    for args in (("flows", "list"), ("flows", "show", "[/weird] flow"), ("flows", "runs", "list")):
        res = sf(db_url, *args)
        assert res.exit_code == 0, (args, res.output)
        assert "Traceback" not in res.output
    assert "[/weird] flow" in sf(db_url, "flows", "list").output


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "list", "--limit", "99999999999999999999"),
        ("runs", "list", "--limit", "0"),
        ("flows", "runs", "list", "--limit", "99999999999999999999"),
        ("detect", "--min-occurrences", "99999999999999999999"),
    ],
)
def test_numbers_out_of_range_are_refused_with_exit_2(
    sqlite_url: str, args: tuple[str, ...]
) -> None:
    res = sf(sqlite_url, *args)
    assert res.exit_code == 2, res.output
    assert "Invalid value" in res.output and "Traceback" not in res.output


def test_deeply_nested_input_is_a_clear_error(sqlite_url: str) -> None:
    res = sf(sqlite_url, "flows", "run", "X", "--input", "[" * 50_000 + "]" * 50_000)
    assert res.exit_code == 1
    assert "--input is nested too deeply" in res.output


def test_a_bad_extraction_pattern_fails_validation_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text(
        json.dumps(
            {
                "name": "x",
                "steps": [{"id": "a", "skill_key": "t", "input_map": {"q": "{{_trigger.q}}"}}],
                "extraction": {
                    "q": {"pattern": "(", "anchor": "id"},
                    "r": {"pattern": "a" * 2_000},
                },
            }
        )
    )
    res = runner.invoke(app, ["flows", "validate", str(path)])
    assert res.exit_code == 1, res.output
    assert "extraction.q.pattern: not a valid regular expression" in res.output
    assert "extraction.r.pattern: pattern is 2,000 characters; at most 1,000" in res.output
