"""What a newcomer hits in the first hour, each pinned: `--tools` that name a file of their
own, Ctrl-C in the middle of an ingest, a ledger in the wrong namespace or the wrong shape, a
PostgreSQL database that does not exist. One clear line each, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soloflow_langgraph.cli import app

runner = CliRunner()
EXE = str(Path(sys.executable).with_name("soloflow"))

TOOLS_PY = '''
from langchain_core.tools import tool


@tool
def find_customer(email: str) -> str:
    """Look up a customer id by email address."""
    return "C-1"


TOOLS = [find_customer]
BY_NAME = {"find_customer": find_customer}
'''

FLOW_YAML = """\
name: lookup
steps:
  - id: step_1
    skill_key: find_customer
    input_map:
      email: "{{_trigger.email}}"
"""


def one_error_line(res, *words: str) -> str:
    assert res.exit_code == 1, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert "Traceback" not in res.output
    return lines[0]


# ------------------------------------------------------------------ --tools


def test_tools_of_a_file_in_the_current_directory_are_found(tmp_path: Path) -> None:
    """`--tools mytools:TOOLS` run where mytools.py is, as `python -m` would find it; a file
    path and a dict of tools work too."""
    (tmp_path / "mytools.py").write_text(TOOLS_PY)
    (tmp_path / "flow.yaml").write_text(FLOW_YAML)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for spec in ("mytools:TOOLS", "./mytools.py:TOOLS", "mytools.py:BY_NAME"):
        proc = subprocess.run(
            [EXE, "flows", "validate", "flow.yaml", "--tools", spec],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (spec, proc.stderr)
        assert proc.stdout.startswith("OK"), proc.stdout


@pytest.mark.parametrize(
    ("source", "attr", "words"),
    [
        ("def broken(:\n", "TOOLS", ["SyntaxError", "line 1"]),
        ("raise RuntimeError('no API key')\n", "TOOLS", ["RuntimeError: no API key", "line 1"]),
        ("import no_such_package_zz\n", "TOOLS", ["no_such_package_zz"]),
        ("TOOLS = 'find_customer'\n", "TOOLS", ["is not a tool"]),
        ("TOOLS = []\n", "TOOLS", ["TOOLS is empty"]),
        ("TOOLS = []\n", "TOLS", ["has no attribute 'TOLS'", "it has: TOOLS"]),
    ],
)
def test_a_bad_tools_module_is_one_error_line(
    tmp_path: Path, source: str, attr: str, words: list[str]
) -> None:
    (tmp_path / "flow.yaml").write_text(FLOW_YAML)
    module = tmp_path / f"tools_{abs(hash(source))}.py"
    module.write_text(source)
    spec = f"{module}:{attr}"
    res = runner.invoke(app, ["flows", "validate", str(tmp_path / "flow.yaml"), "--tools", spec])
    one_error_line(res, repr(spec), *words)


def test_a_tools_spec_naming_nothing_that_exists_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text(FLOW_YAML)
    flow = str(tmp_path / "flow.yaml")
    res = runner.invoke(app, ["flows", "validate", flow, "--tools", "no_such_mod_zz:TOOLS"])
    one_error_line(res, "no module 'no_such_mod_zz'", "PYTHONPATH", "file.py:ATTRIBUTE")
    res = runner.invoke(app, ["flows", "validate", flow, "--tools", "./nowhere/t.py:TOOLS"])
    one_error_line(res, "no file", "nowhere")


# ------------------------------------------------------------------ Ctrl-C during an ingest


def _stored_runs(db: Path) -> int:
    import sqlite3

    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM sf_task_runs").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


def test_ctrl_c_during_an_ingest_says_what_is_kept_and_how_to_go_on(tmp_path: Path) -> None:
    """Click ends a command stopped by Ctrl-C with 130 and not a word; an ingest says that
    the batches written are kept and that running it again writes the rest."""
    ledger = tmp_path / "runs.jsonl"
    total = 100_000
    with ledger.open("w") as f:
        for i in range(total):
            calls = [{"name": "a", "args": {"x": i}}, {"name": "b", "args": {"y": i}}]
            f.write(json.dumps({"run_id": f"r{i}", "task": f"task {i}", "tool_calls": calls}))
            f.write("\n")
    db = tmp_path / "runs.db"
    proc = subprocess.Popen(
        [EXE, "--db", str(db), "ingest", str(ledger)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while _stored_runs(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.skip("the ingest ended before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.startswith("interrupted (Ctrl-C)") and "run the same command again" in err, err
    kept = _stored_runs(db)
    assert 0 < kept < total
    again = subprocess.run(
        [EXE, "--db", str(db), "ingest", str(ledger), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(again.stdout)
    assert report["runs_skipped_existing"] == kept
    assert report["runs_written"] == total - kept and _stored_runs(db) == total


def test_ctrl_c_in_any_command_is_one_line_and_130(tmp_path: Path) -> None:
    """A Ctrl-C that lands while a command works (here `demo`, once it has stored a run)
    prints one line, not nothing."""
    db = tmp_path / "demo.db"
    proc = subprocess.Popen(
        [EXE, "demo", "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while _stored_runs(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.skip("the demo ended before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted (Ctrl-C).", err


# ------------------------------------------------------------------ ingest


def test_ingest_says_which_namespace_to_read_the_runs_back_from(tmp_path: Path) -> None:
    from conftest import TAU_BENCH

    db = str(tmp_path / "runs.db")
    res = runner.invoke(app, ["--db", db, "--user", "ann", "ingest", str(TAU_BENCH)])
    assert res.exit_code == 0, res.output
    assert "namespace --user ann --agent default" in " ".join(res.stdout.split())
    res = runner.invoke(
        app, ["--db", db, "--user", "ann", "ingest", "--keep-namespaces", str(TAU_BENCH)]
    )
    assert res.exit_code == 0, res.output
    assert "--user ann --agent gpt-4o (150)" in " ".join(res.stdout.split())


def test_a_ledger_in_the_wrong_shape_says_how_to_fix_it(tmp_path: Path) -> None:
    """A JSON array, a pretty-printed file and a line cut short are each named for what they
    are, with the fix; json's own "... at at column" is gone."""
    record = {"run_id": "r1", "task": "t", "tool_calls": [{"name": "a"}]}
    (tmp_path / "array.json").write_text(json.dumps([record]))
    (tmp_path / "pretty.json").write_text(json.dumps(record, indent=2))
    cut = json.dumps({"run_id": "r2", "task": "a long task text"})[:-10]
    (tmp_path / "cut.jsonl").write_text(f"{json.dumps(record)}\n{cut}\n")
    (tmp_path / "control.jsonl").write_text('{"run_id": "r3", "task": "\x01"}\n')
    db = str(tmp_path / "runs.db")

    def reasons(name: str) -> list[str]:
        res = runner.invoke(app, ["--db", db, "ingest", str(tmp_path / name), "--json"])
        assert res.exit_code == 0, res.output
        return [e["reason"] for e in json.loads(res.stdout)["bad_lines"]]

    assert "jq -c '.[]'" in reasons("array.json")[0]
    first = reasons("pretty.json")[0]
    assert (
        first.startswith("not a whole JSON record: '{'")
        and "one whole JSON record per line" in first
    )
    (bad,) = reasons("cut.jsonl")
    assert "the line ends before the record does" in bad
    (bad,) = reasons("control.jsonl")
    assert "at at" not in bad and "Invalid control character at column" in bad


def test_ingest_of_a_directory_says_it_is_one(tmp_path: Path) -> None:
    res = runner.invoke(app, ["--db", str(tmp_path / "x.db"), "ingest", str(tmp_path)])
    one_error_line(res, "is a directory", "/*.jsonl")
    assert not (tmp_path / "x.db").exists()


# ------------------------------------------------------------------ the database


def test_a_postgresql_database_that_does_not_exist_says_how_to_create_it(pg_url: str) -> None:
    """The server answers, the database is not there: the driver's words, without
    SQLAlchemy's wrapping, and the command that creates it."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(database="soloflow_no_such_db_zz").render_as_string(False)
    res = runner.invoke(app, ["--db", url, "runs", "list"])
    line = one_error_line(res, 'database "soloflow_no_such_db_zz" does not exist', "createdb")
    assert "sqlalche.me" not in line and "(psycopg." not in line
    from conftest import TAU_BENCH

    res = runner.invoke(app, ["--db", url, "ingest", str(TAU_BENCH)])
    assert "createdb" in res.stderr and res.exit_code == 1


# ------------------------------------------------------------------ flow files


def test_an_unquoted_template_in_yaml_says_to_quote_it(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW_YAML.replace('"{{_trigger.email}}"', "{{_trigger.email}}"))
    res = runner.invoke(app, ["flows", "validate", str(flow)])
    assert res.exit_code == 1
    assert f"{flow}:6:" in res.stderr and "quote the template" in res.stderr, res.stderr


def test_dump_run_of_a_listed_summary_says_how_to_read_the_run(tmp_path: Path) -> None:
    from conftest import TAU_BENCH

    from soloflow_core.ledger import dump_run, ingest
    from soloflow_core.store import Store

    with Store.open(str(tmp_path / "runs.db")) as store:
        ingest(store, [TAU_BENCH], default_user="u", default_agent="a")
        (summary,) = store.list_runs(user_id="u", agent_id="a", limit=1)
        with pytest.raises(TypeError, match=r"RunSummary.*Store\.get_run"):
            dump_run(summary)  # type: ignore[arg-type]
        run = store.get_run(summary.run_id, user_id="u", agent_id="a")
        assert dump_run(run)["run_id"] == summary.run_id


def test_a_flow_run_without_its_tools_is_one_line_naming_them(tmp_path: Path) -> None:
    """`flows run` without --tools (the usual slip): one line with the tools the flow calls
    and the option that provides them, not one paragraph per step."""
    db = str(tmp_path / "x.db")
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW_YAML)
    (tmp_path / "mytools.py").write_text(TOOLS_PY)
    tools = f"{tmp_path / 'mytools.py'}:TOOLS"
    res = runner.invoke(app, ["--db", db, "flows", "submit", str(flow), "--tools", tools])
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, ["--db", db, "flows", "run", "lookup", "--input", '{"email": "a@b.c"}']
    )
    one_error_line(res, "calls find_customer", "known: none", "--tools module:ATTR")


def test_flows_show_never_cuts_the_definition(tmp_path: Path) -> None:
    """A long flow name or template came out cropped at 80 columns when piped."""
    db = str(tmp_path / "x.db")
    long_name = "lookup " + "the customer by their email address " * 4
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW_YAML.replace("name: lookup", f"name: {long_name.strip()}"))
    tools = f"{tmp_path / 'mytools.py'}:TOOLS"
    (tmp_path / "mytools.py").write_text(TOOLS_PY)
    assert (
        runner.invoke(app, ["--db", db, "flows", "submit", str(flow), "--tools", tools]).exit_code
        == 0
    )
    res = runner.invoke(app, ["--db", db, "flows", "show", "lookup"])
    assert res.exit_code == 0, res.output
    definition = json.loads(res.stdout[res.stdout.index("\n{") + 1 :])
    assert definition["name"] == long_name.strip()


# ------------------------------------------------------------------ the namespace options


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--user", "", ["--user", "is empty"]),
        ("--agent", "  ", ["--agent", "is empty"]),
        ("--user", "u" * 256, ["--user", "256 characters", "at most 255"]),
        ("--agent", "bot\x1b[2J", ["--agent", "control character"]),
    ],
)
def test_a_namespace_the_store_cannot_hold_is_a_usage_error(
    tmp_path: Path, option: str, value: str, words: list[str]
) -> None:
    """An unset shell variable (`--user "$USERNAME"`) gave runs an empty user id; one over
    255 characters was stored on SQLite and refused by PostgreSQL."""
    db = tmp_path / "x.db"
    from conftest import TAU_BENCH

    res = runner.invoke(app, ["--db", str(db), option, value, "ingest", str(TAU_BENCH)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.stderr.replace("│", " ").split())
    for w in words:
        assert w in text, (w, text)
    assert not db.exists()


def test_namespace_hints_can_be_pasted_into_a_shell(tmp_path: Path) -> None:
    from conftest import TAU_BENCH

    db = str(tmp_path / "x.db")
    res = runner.invoke(app, ["--db", db, "--user", "émile d", "ingest", str(TAU_BENCH)])
    assert "namespace --user 'émile d' --agent default" in " ".join(res.stdout.split())
    res = runner.invoke(app, ["--db", db, "runs", "list"])
    assert "--user 'émile d' --agent default" in " ".join(res.stderr.split())


# ------------------------------------------------------------------ flows run --input


def test_flows_run_input_from_a_file_and_the_usual_slips(tmp_path: Path) -> None:
    """`--input @in.json` reads the file (as curl does); `--input in.json` and Python's
    single quotes each say how to write it; a huge value is not taken for a file name."""
    db = str(tmp_path / "x.db")
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW_YAML)
    (tmp_path / "mytools.py").write_text(TOOLS_PY)
    tools = f"{tmp_path / 'mytools.py'}:TOOLS"
    assert (
        runner.invoke(app, ["--db", db, "flows", "submit", str(flow), "--tools", tools]).exit_code
        == 0
    )
    given = tmp_path / "in.json"
    given.write_text('{"email": "a@b.c"}')

    def run(value: str):
        return runner.invoke(
            app, ["--db", db, "flows", "run", "lookup", "--input", value, "--tools", tools]
        )

    res = run(f"@{given}")
    assert res.exit_code == 0 and "completed: 'C-1'" in res.stdout, res.output
    one_error_line(run(str(given)), "is not JSON", f"--input @{given}")
    one_error_line(run("{'email': 'a@b.c'}"), "double quotes")
    one_error_line(run(f"@{tmp_path / 'none.json'}"), "cannot read the file")
    one_error_line(run("{" + "x" * 5000), "is not JSON")


# ------------------------------------------------------------------ serve


def test_serve_on_a_port_in_use_is_one_line_and_announces_nothing(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for command in (["serve"], ["mcp", "--http"]):
            res = runner.invoke(app, ["--db", str(tmp_path / "x.db"), *command, "--port", port])
            one_error_line(res, f"cannot listen on 127.0.0.1:{port}", "--port 0")
            assert "SoloFlow" not in res.output


def test_serve_on_port_0_says_the_port_it_got(tmp_path: Path) -> None:
    import httpx

    proc = subprocess.Popen(
        [EXE, "--db", str(tmp_path / "x.db"), "serve", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        port = int(banner.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
        assert port > 0, banner
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, banner
                time.sleep(0.1)
        assert answer.status_code == 200 and "/api/workflows" in answer.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_detect_in_an_empty_namespace_says_where_the_runs_are(tmp_path: Path) -> None:
    from conftest import TAU_BENCH

    db = str(tmp_path / "x.db")
    assert (
        runner.invoke(app, ["--db", db, "--user", "ann", "ingest", str(TAU_BENCH)]).exit_code == 0
    )
    res = runner.invoke(app, ["--db", db, "--user", "anne", "detect"])
    assert res.exit_code == 0 and "no repeated sequence found" in res.stdout
    assert "no task runs in namespace anne/default" in res.stderr
    assert "--user ann --agent default" in res.stderr


def test_rest_a_typo_d_field_of_a_submitted_workflow_names_the_field_meant(
    tmp_path: Path,
) -> None:
    """The API said only "Extra inputs are not permitted" where `flows validate` says
    "did you mean 'depends_on'?"."""
    from fastapi.testclient import TestClient

    from soloflow_core.store import Store
    from soloflow_langgraph.server.api import create_app
    from soloflow_langgraph.server.service import SoloFlowService

    with Store.open(str(tmp_path / "x.db")) as store:
        token = store.create_api_token(user_id="ann", agent_id="bot", scope="write").token
        service = SoloFlowService(store)
        try:
            with TestClient(create_app(service)) as client:
                step = {"id": "a", "skill_key": "find_customer", "depend_on": []}
                answer = client.post(
                    "/api/workflows",
                    headers={"Authorization": f"Bearer {token}"},
                    json={"workflow": {"name": "x", "step": [step], "steps": [step]}},
                )
        finally:
            service.close()
    assert answer.status_code == 422, answer.text
    problems = {p["path"]: p["message"] for p in answer.json()["problems"]}
    assert "did you mean 'depends_on'?" in problems["body.workflow.steps[0].depend_on"]
    assert "did you mean 'steps'?" in problems["body.workflow.step"]
