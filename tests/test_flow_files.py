"""Flow files (JSON and YAML): loading, validation at file and line, `flows validate` / `submit`."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from typer.testing import CliRunner

from soloflow_core.errors import FlowFileError, FlowValidationError
from soloflow_core.flow.loader import load_flow_file, validate_flow_file
from soloflow_core.flow.validate import layers
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_langgraph.cli import app

runner = CliRunner()
TOOLS = "soloflow_langgraph.demo.agent:TOOLS"

GOOD_YAML = """\
name: track order
description: find the customer, then their orders and the shipment
input_schema:
  type: object
  properties:
    email: {type: string}
steps:
  - id: customer
    skill_key: find_customer
    input_map:
      email: "{{_trigger.email}}"
  - id: orders
    skill_key: list_orders
    depends_on: [customer]
    input_map:
      customer_id: "{{customer.customer_id}}"
  - id: notify
    skill_key: notify_customer
    depends_on: [customer]
    input_map:
      customer_id: "{{customer.customer_id}}"
      order_id: O-1
      status: shipped
"""

GOOD = FlowDefinition.model_validate(yaml.safe_load(GOOD_YAML)).model_dump(
    mode="json", exclude_defaults=True
)


def sf(db: str, *args: str, user: str = "u1"):
    return runner.invoke(app, ["--db", db, "--user", user, *args], catch_exceptions=False)


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_load_good_yaml_and_json_give_the_same_flow(tmp_path):
    y = write(tmp_path, "flow.yaml", GOOD_YAML)
    j = write(tmp_path, "flow.json", json.dumps(GOOD, indent=2))
    sniffed = write(tmp_path, "flow.txt", json.dumps(GOOD))  # no known extension: sniffed as JSON
    assert load_flow_file(y) == load_flow_file(j) == load_flow_file(sniffed)
    flow, plan = validate_flow_file(
        y, executors=["find_customer", "list_orders", "notify_customer"]
    )
    assert plan.layers == [["customer"], ["orders", "notify"]] == layers(flow)


def test_layers_names_a_cycle():
    flow = FlowDefinition(
        name="loop",
        steps=[
            FlowStep(id="a", skill_key="x", depends_on=["c"]),
            FlowStep(id="b", skill_key="x", depends_on=["a"]),
            FlowStep(id="c", skill_key="x", depends_on=["b"]),
        ],
    )
    with pytest.raises(FlowValidationError, match="a → b → c → a"):
        layers(flow)


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    path = write(tmp_path, "bad.yml", "name: x\nsteps:\n  - id: a\n   skill_key: b\n")
    with pytest.raises(FlowFileError) as info:
        load_flow_file(path)
    (p,) = info.value.issues
    assert (p.line, p.column, p.path) == (4, 4, None)
    assert "YAML syntax error" in p.message
    assert str(info.value).splitlines()[1].strip().startswith(f"{path}:4:4: YAML syntax error")


def test_json_syntax_error_has_line_and_column(tmp_path):
    path = write(tmp_path, "bad.json", '{\n  "name": "x",\n  "steps": [1,,]\n}\n')
    with pytest.raises(FlowFileError) as info:
        load_flow_file(path)
    (p,) = info.value.issues
    assert (p.line, p.column) == (3, 15) and "JSON syntax error" in p.message


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_type_error_has_field_path_and_line(tmp_path, fmt):
    data = json.loads(json.dumps(GOOD))
    data["steps"][2]["retry_max"] = "three"
    data["steps"][1]["retyr_max"] = 1
    text = yaml.safe_dump(data, sort_keys=False) if fmt == "yaml" else json.dumps(data, indent=2)
    path = write(tmp_path, f"flow.{fmt}", text)
    lines = text.splitlines()
    with pytest.raises(FlowFileError) as info:
        load_flow_file(path)
    by_path = {p.path: p for p in info.value.issues}
    assert set(by_path) == {"steps[2].retry_max", "steps[1].retyr_max"}
    p = by_path["steps[2].retry_max"]
    assert "retry_max" in lines[p.line - 1] and "three" in p.message and "integer" in p.message
    assert lines[p.line - 1][p.column - 1 :].lstrip('"').startswith("retry_max")
    q = by_path["steps[1].retyr_max"]
    assert "retyr_max" in lines[q.line - 1] and "did you mean 'retry_max'" in q.message


def test_missing_field_points_at_its_step(tmp_path):
    path = write(
        tmp_path,
        "flow.yaml",
        """\
        name: f
        steps:
          - id: a
            skill_key: x
          - id: b
            depends_on: [a]
        """,
    )
    with pytest.raises(FlowFileError) as info:
        load_flow_file(path)
    (p,) = info.value.issues
    assert (p.path, p.line) == ("steps[1].skill_key", 5) and "missing; add it" in p.message


def test_duplicate_keys_are_reported(tmp_path):
    path = write(
        tmp_path,
        "flow.json",
        '{"name": "f",\n "name": "g", "steps": [{"id": "a", "skill_key": "x"}]}',
    )
    with pytest.raises(FlowFileError) as info:
        load_flow_file(path)
    (p,) = info.value.issues
    assert (p.path, p.line, p.column) == ("name", 2, 2) and "appears twice" in p.message


def test_dag_reference_template_and_executor_problems_at_their_lines(tmp_path):
    path = write(
        tmp_path,
        "flow.yaml",
        """\
        name: broken
        steps:
          - id: a
            skill_key: find_customer
            depends_on: [c]
          - id: b
            skill_key: list_orders
            depends_on: [a, ghost]
          - id: c
            skill_key: teleport
            depends_on: [b]
            input_map:
              q: "{{nowhere.x}}"
        """,
    )
    with pytest.raises(FlowFileError) as info:
        validate_flow_file(path, executors=["find_customer", "list_orders"])
    got = {(p.path, p.line): p.message for p in info.value.issues}
    assert "dependency cycle: a → b → c → a" in got[("steps[0].depends_on", 5)]
    assert "unknown step 'ghost'" in got[("steps[1].depends_on[1]", 8)]
    assert "names unknown step 'nowhere'" in got[("steps[2].input_map.q", 13)]
    assert "no executor registered for skill_key 'teleport'" in got[("steps[2].skill_key", 10)]
    assert "--tools" in got[("steps[2].skill_key", 10)]


def test_unreadable_and_empty_files(tmp_path):
    with pytest.raises(FlowFileError, match="cannot read the file"):
        load_flow_file(tmp_path / "nope.yaml")
    with pytest.raises(FlowFileError, match="the file is empty"):
        load_flow_file(write(tmp_path, "empty.yaml", "\n"))
    with pytest.raises(FlowFileError, match="must hold one flow"):
        load_flow_file(write(tmp_path, "list.yaml", "- a\n- b\n"))


def test_cli_validate_ok_prints_layers(tmp_path, sqlite_url):
    path = write(tmp_path, "flow.yaml", GOOD_YAML)
    res = sf(sqlite_url, "flows", "validate", str(path), "--tools", TOOLS)
    assert res.exit_code == 0, res.output
    assert "OK: flow 'track order'" in res.stdout
    assert "layer 1: customer" in res.stdout and "layer 2: orders, notify" in res.stdout
    res = sf(sqlite_url, "flows", "validate", str(path), "--tools", TOOLS, "--json")
    report = json.loads(res.stdout)
    assert report["valid"] is True and report["errors"] == []
    assert report["layers"] == [["customer"], ["orders", "notify"]]


def test_cli_validate_unknown_skill_key_without_tools(tmp_path, sqlite_url):
    path = write(tmp_path, "flow.json", json.dumps(GOOD, indent=2))
    res = sf(sqlite_url, "flows", "validate", str(path), "--json")
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    assert report["valid"] is False and report["layers"] == []
    assert {e["path"] for e in report["errors"]} == {f"steps[{i}].skill_key" for i in range(3)}
    assert all(isinstance(e["line"], int) and "--tools" in e["message"] for e in report["errors"])


def test_cli_validate_reports_every_problem(tmp_path, sqlite_url):
    data = json.loads(json.dumps(GOOD))
    data["steps"][0]["depends_on"] = ["notify"]
    data["steps"][2]["input_map"]["status"] = "{{nobody.text}}"
    path = write(tmp_path, "flow.json", json.dumps(data, indent=2))
    res = sf(sqlite_url, "flows", "validate", str(path), "--tools", TOOLS)
    assert res.exit_code == 1
    assert "invalid flow file (2 problems)" in res.stderr
    assert "steps[0].depends_on: dependency cycle: customer → notify → customer" in res.stderr
    assert "steps[2].input_map.status: {{nobody.text}} names unknown step 'nobody'" in res.stderr
    assert f"{path}:" in res.stderr


def test_cli_submit_then_list_and_namespaces(tmp_path, sqlite_url):
    path = write(tmp_path, "flow.yaml", GOOD_YAML)
    res = sf(sqlite_url, "flows", "submit", str(path), "--tools", TOOLS)
    assert res.exit_code == 0, res.output
    assert "registered flow track order version 1" in res.stdout
    res = sf(sqlite_url, "flows", "submit", str(path), "--tools", TOOLS, "--json")
    assert json.loads(res.stdout)["version"] == 2
    (listed,) = json.loads(sf(sqlite_url, "flows", "list", "--json").stdout)
    assert listed["name"] == "track order" and listed["version"] == 2
    assert listed["source"] == "user-submitted" and listed["inputs"] == ["email"]
    assert json.loads(sf(sqlite_url, "flows", "list", "--json", user="u2").stdout) == []
    res = sf(
        sqlite_url,
        "flows",
        "run",
        "track order",
        "--input",
        '{"email": "bob@example.org"}',
        "--tools",
        TOOLS,
    )
    assert res.exit_code == 0, res.output


def test_cli_submit_refuses_an_invalid_file_and_stores_nothing(tmp_path, sqlite_url):
    path = write(
        tmp_path,
        "flow.yaml",
        GOOD_YAML.replace("  - id: notify\n", "  - id: notify\n    retry_max: -1\n"),
    )
    res = sf(sqlite_url, "flows", "submit", str(path), "--tools", TOOLS)
    assert res.exit_code == 1
    assert (
        f"{path}:18:5: steps[2].retry_max: Input should be greater than or equal to 0" in res.stderr
    )
    res = sf(sqlite_url, "flows", "submit", str(path), "--tools", TOOLS, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["errors"][0]["line"] == 18
    res = sf(sqlite_url, "flows", "list", "--json")  # nothing stored: not even a database
    assert res.exit_code == 1 and "no database file" in res.stderr


def test_a_file_of_10k_steps_is_refused_quickly_with_the_limit_and_the_fix(tmp_path):
    steps = [
        {"id": f"s{i}", "skill_key": "t", "depends_on": [f"s{i - 1}"] if i else []}
        for i in range(10_000)
    ]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"name": "huge", "steps": steps}))
    with pytest.raises(FlowFileError) as info:
        validate_flow_file(str(path))
    message = str(info.value)
    assert "10000 steps; a flow may have at most 1000" in message and "map_over" in message
    assert info.value.issues[0].path == "steps"


def test_failure_policy_compensation_and_approval_fields_load_from_yaml(tmp_path):
    path = tmp_path / "book.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: book
        requires_approval: true
        steps:
          - id: hold
            skill_key: hold_seat
            side_effects: true
            compensation:
              skill_key: release_seat
              input_map: {hold_id: "{{hold.id}}"}
          - id: pay
            skill_key: charge
            depends_on: [hold]
            on_failure: compensate
        """)
    )
    flow = load_flow_file(str(path))
    assert flow.requires_approval and flow.steps[1].on_failure == "compensate"
    assert flow.steps[0].compensation.skill_key == "release_seat"
    path.write_text(path.read_text().replace("on_failure: compensate", "on_failure: undo"))
    with pytest.raises(FlowFileError) as info:
        load_flow_file(str(path))
    assert info.value.issues[0].path == "steps[1].on_failure" and info.value.issues[0].line == 13
