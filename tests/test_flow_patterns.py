"""A flow's regular expressions (``extraction.<input>.pattern``): bounded in size and checked
for catastrophic backtracking when the flow is validated, matched with a time limit when it
runs — no pattern hangs validation, a run, routing or the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soloflow_core.errors import FlowValidationError, PatternTimeoutError
from soloflow_core.flow.patterns import MATCH_TIMEOUT, pattern_problem, pattern_size
from soloflow_core.flow.validate import validate_flow
from soloflow_core.generalize.arguments import extract_inputs
from soloflow_core.memory.binding import bind_inputs
from soloflow_core.memory.reading import read_request
from soloflow_core.models import FlowDefinition
from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.runtime.inputs import inputs_from_task

SLOW_AT_RUN_TIME = "INV-(7|77)+y"
"""Backtracks catastrophically on ``INV-`` and a run of ``7`` (validation tries runs of each
character a pattern names, not that prefix before them)."""
SLOW_TEXT = "INV-" + "7" * 40
STOP_WITHIN = max(2.0, 8 * MATCH_TIMEOUT)
"""What "stops within its limit" allows on this shared 2-core machine (the ``regex``
package checks its timeout as it backtracks, so a match overshoots it a little)."""
VALIDATE_WITHIN = 5.0
"""Validation confirms a suspected pattern with a longer try (``pattern_problem``).

The limits here bound this process's CPU time, not the wall clock: a pattern that hangs burns
CPU, while on a shared 2-core machine the wall clock also counts the other processes' turns
(a CI run with a benchmark beside it took 5.0 s of wall clock for a 0.6 s validation)."""


def _flow(pattern: str, name: str = "lookup") -> FlowDefinition:
    return FlowDefinition.model_validate(
        {
            "name": name,
            "input_schema": {
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
            },
            "steps": [{"id": "a", "skill_key": "t", "input_map": {"q": "{{_trigger.q}}"}}],
            "extraction": {"q": {"pattern": pattern, "anchor": ""}},
        }
    )


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("(a|aa)+$", "backtracks catastrophically"),
        ("(a|a)+$", "backtracks catastrophically"),
        ("(b|bb)+$", "backtracks catastrophically"),  # only on a run of its own letter
        ("(?:a{1000}){1000}", "repeats too much"),
        ("a{1000000000}", "repeats too much"),
        ("((a{100}){100}){100}", "repeats too much"),
        ("(", "not a valid regular expression: missing ) at position 1"),
    ],
)
def test_validation_refuses_a_pattern_that_would_hang_or_blow_up(pattern: str, says: str) -> None:
    start = time.process_time()
    with pytest.raises(FlowValidationError) as info:
        validate_flow(_flow(pattern))
    assert time.process_time() - start < VALIDATE_WITHIN
    assert info.value.field == "extraction.q.pattern"
    assert says in str(info.value), str(info.value)
    if "catastrophically" in says:
        assert "nested or overlapping quantifiers" in str(info.value)


def test_the_classic_nested_quantifier_runs_at_once() -> None:
    # ``re`` would try 2**40 ways; the ``regex`` engine sees there is no match at once.
    flow = _flow("(a+)+$")
    validate_flow(flow)
    start = time.process_time()
    assert extract_inputs(flow.extraction, "a" * 40 + "b") == {}
    assert extract_inputs(flow.extraction, "a" * 40) == {"q": "a" * 40}
    assert time.process_time() - start < 1.0


def test_a_pattern_that_backtracks_at_run_time_stops_within_its_limit() -> None:
    flow = _flow(SLOW_AT_RUN_TIME, name="slow_lookup")
    validate_flow(flow)  # the texts validation tries do not trigger it
    start = time.process_time()
    with pytest.raises(PatternTimeoutError) as info:
        inputs_from_task(flow, SLOW_TEXT)
    assert time.process_time() - start < STOP_WITHIN
    err = info.value
    assert (err.flow, err.field, err.pattern) == (
        "slow_lookup",
        "extraction.q.pattern",
        SLOW_AT_RUN_TIME,
    )
    text = str(err)
    assert "flow 'slow_lookup', field 'extraction.q.pattern'" in text
    assert repr(SLOW_AT_RUN_TIME) in text and "nested or overlapping quantifiers" in text
    assert isinstance(err, FlowValidationError)  # callers that catch bad flows catch it too
    # The same pattern on an ordinary task text is fine.
    assert inputs_from_task(flow, "find INV-77y") == {"q": "INV-77y"}


def test_routing_takes_a_timed_out_pattern_as_a_problem_not_a_hang() -> None:
    flow = _flow(SLOW_AT_RUN_TIME)
    start = time.process_time()
    binding = bind_inputs(flow.input_schema, flow.extraction, read_request(SLOW_TEXT))
    assert time.process_time() - start < STOP_WITHIN
    assert not binding.complete
    assert "extraction.q.pattern" in binding.problems[0]
    assert "ran past" in binding.problems[0]


def test_flows_run_with_such_a_task_is_one_clear_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    with Store.open(url) as store:
        store.register_flow(_flow(SLOW_AT_RUN_TIME), source="user", user_id="u", agent_id="a")
    start = time.process_time()
    res = CliRunner().invoke(
        app,
        ["--db", url, "--user", "u", "--agent", "a", "flows", "run", "lookup", "--task", SLOW_TEXT],
        terminal_width=300,
    )
    assert time.process_time() - start < 5 * STOP_WITHIN
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert "extraction.q.pattern" in res.output and "ran past" in res.output, res.output


def test_flows_validate_names_the_file_field_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text(json.dumps(_flow("(a|aa)+$").model_dump(mode="json")))
    start = time.process_time()
    res = CliRunner().invoke(app, ["flows", "validate", str(path)], terminal_width=300)
    assert time.process_time() - start < 2 * VALIDATE_WITHIN
    assert res.exit_code == 1, res.output
    assert "extraction.q.pattern" in res.output and "catastrophically" in res.output


def test_pattern_size_multiplies_nested_repeats() -> None:
    assert pattern_size(r"\d{4}-\d{2}") == 7
    assert pattern_size(r"(\w{10}-){5}") == 55
    assert pattern_size(r"[a{9}]{3}") == 3  # a brace inside a class is no repeat
    assert pattern_size(r"\p{L}{3}") == 3
    assert pattern_size("(?:a{1000}){1000}") > 1_000_000
    assert pattern_problem(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+") is None
    assert pattern_problem("(?:[a-z]+_)+\\d+") is None  # what learn_shape writes
