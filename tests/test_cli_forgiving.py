"""The CLI forgives a newcomer: bad input is one clear line, a non-zero exit, and nothing
created or changed; ids and flow names by unique prefix; who holds data is one command away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TAU_BENCH
from typer.testing import CliRunner

from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.cli._resolve import slug

runner = CliRunner()
EXE = str(Path(sys.executable).with_name("soloflow"))


def sf(db: str, *args: str, user: str = "u1", agent: str = "default"):
    return runner.invoke(
        app, ["--db", db, "--user", user, "--agent", agent, *args], catch_exceptions=False
    )


def one_error_line(res, *words: str) -> str:
    assert res.exit_code != 0, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert "Traceback" not in res.output
    return lines[0]


@pytest.fixture
def loaded(db_url: str) -> tuple[str, list[dict]]:
    """tau-bench's 150 runs under u1, and three candidates detected from them."""
    assert sf(db_url, "ingest", str(TAU_BENCH), "--json").exit_code == 0
    res = sf(db_url, "detect", "--json", "--max-candidates", "3")
    return db_url, json.loads(res.stdout)


def unique_prefix(value: str, others: list[str]) -> str:
    for n in range(1, len(value) + 1):
        if sum(o.startswith(value[:n]) for o in others) == 1:
            return value[:n]
    return value


# ------------------------------------------------------------------ the database


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list"],
        ["runs", "show", "r1"],
        ["flows", "list"],
        ["flows", "candidates"],
        ["flows", "approve", "cand_x"],
        ["detect"],
        ["namespaces"],
        ["flows", "status", "frun_x"],
    ],
)
def test_a_read_command_on_a_missing_file_creates_nothing(tmp_path: Path, args: list[str]):
    typo = tmp_path / "demo.dbb"
    res = sf(str(typo), *args)
    one_error_line(res, str(typo), "no database file", "ingest", "demo --db")
    assert not typo.exists() and not list(tmp_path.glob("demo.dbb*"))


def test_a_missing_directory_is_refused_even_for_a_writing_command(tmp_path: Path):
    target = tmp_path / "nonexistent" / "dir" / "x.db"
    for args in (["runs", "list"], ["ingest", str(TAU_BENCH)]):
        res = sf(str(target), *args)
        one_error_line(res, str(target.parent), "does not exist", "mkdir -p")
        res = sf(f"sqlite:///{target}", *args)
        one_error_line(res, str(target.parent), "does not exist")
    assert not (tmp_path / "nonexistent").exists()


def test_an_unsupported_scheme_names_the_supported_ones(tmp_path: Path):
    res = sf("mysql://root:secret@localhost/soloflow", "runs", "list")
    line = one_error_line(res, "'mysql'", "not supported", "sqlite", "postgresql://")
    assert "secret" not in line and "MySQLdb" not in line


def test_the_default_database_is_created_only_by_a_writing_command(tmp_path: Path):
    home = Path(os.environ["SOLOFLOW_HOME"])
    res = runner.invoke(app, ["runs", "list"])
    one_error_line(res, "no database yet at the default location", str(home / "soloflow.db"))
    assert not (home / "soloflow.db").exists()
    res = runner.invoke(app, ["ingest", str(TAU_BENCH), "--json"])
    assert res.exit_code == 0, res.output
    assert (home / "soloflow.db").is_file()


# ------------------------------------------------------------------ namespaces


def test_namespaces_and_the_hint_of_an_empty_listing(loaded):
    db, _ = loaded
    assert sf(db, "ingest", str(TAU_BENCH), user="alice", agent="support-bot").exit_code == 0
    res = sf(db, "namespaces", "--json")
    assert res.exit_code == 0
    rows = {(r["user_id"], r["agent_id"]): r for r in json.loads(res.stdout)}
    assert set(rows) == {("u1", "default"), ("alice", "support-bot")}
    assert rows[("u1", "default")]["runs"] == 150 and rows[("u1", "default")]["candidates"] == 3
    assert rows[("alice", "support-bot")] == {
        "user_id": "alice",
        "agent_id": "support-bot",
        "runs": 150,
        "candidates": 0,
        "flows": 0,
        "flow_runs": 0,
    }
    # The README's namespace is not the CLI's default: an empty listing says where data is.
    res = sf(db, "runs", "list", user="default")
    assert res.exit_code == 0
    assert "no task runs in namespace default/default" in res.stderr
    assert (
        "--user alice --agent support-bot" in res.stderr
        and "--user u1 --agent default" in res.stderr
    )
    # --json stays JSON only, hint or not.
    res = sf(db, "runs", "list", "--json", user="default")
    assert json.loads(res.stdout) == [] and res.stderr == ""


# ------------------------------------------------------------------ ids by prefix


def test_candidates_and_runs_by_unique_prefix_and_ambiguity_listed(loaded):
    db, cands = loaded
    ids = [c["id"] for c in cands]
    # Ambiguous: every candidate starts "cand_"; nothing changes.
    res = sf(db, "flows", "approve", "cand_")
    line = one_error_line(res, "'cand_' is ambiguous", "3 candidates")
    assert all(i in line for i in ids)
    assert {c["status"] for c in json.loads(sf(db, "flows", "candidates", "--json").stdout)} == {
        "pending"
    }
    # Unique prefix: approved.
    short = unique_prefix(ids[0], ids)
    res = sf(db, "flows", "approve", short)
    assert res.exit_code == 0 and "version 1" in res.stdout
    statuses = {
        c["id"]: c["status"] for c in json.loads(sf(db, "flows", "candidates", "--json").stdout)
    }
    assert statuses[ids[0]] == "approved"
    # Unknown: the command's own not-found line.
    one_error_line(sf(db, "flows", "reject", "cand_zzzz"), "no candidate 'cand_zzzz'")
    # Task runs: ids like tau-bench/…; a prefix shared by many is listed, a unique one is shown.
    runs = [
        r["run_id"] for r in json.loads(sf(db, "runs", "list", "--json", "--limit", "200").stdout)
    ]
    one_error_line(
        sf(db, "runs", "show", "tau-bench/"), "is ambiguous", "more than 10", "type more"
    )
    target = sorted(runs)[-1]
    res = sf(db, "runs", "show", unique_prefix(target, runs), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["run_id"] == target
    # Another namespace sees none of it, by prefix or whole.
    one_error_line(sf(db, "runs", "show", target, user="u2"), f"no task run {target!r}")
    one_error_line(sf(db, "flows", "approve", short, user="u2"), f"no candidate {short!r}")


def test_flows_by_name_prefix_any_case_or_slug(loaded):
    db, cands = loaded
    assert sf(db, "flows", "approve", cands[0]["id"]).exit_code == 0
    (flow,) = json.loads(sf(db, "flows", "list", "--json").stdout)
    name = flow["name"]
    assert name.startswith("Auto: ")
    for typed in (name, "auto", "AUTO: " + name[6:12].upper(), slug(name)[:20]):
        res = sf(db, "flows", "show", typed, "--json")
        assert res.exit_code == 0, (typed, res.output)
        assert json.loads(res.stdout)["name"] == name
    assert sf(db, "flows", "approve", cands[1]["id"]).exit_code == 0
    line = one_error_line(
        sf(db, "flows", "show", "auto", "--json"), "flow 'auto' is ambiguous", "2 flows"
    )
    assert name in line
    one_error_line(sf(db, "flows", "show", "nope"), "no flow 'nope'")


def test_candidates_and_flow_runs_are_answered_by_their_own_verbs(loaded):
    db, _ = loaded
    one_error_line(sf(db, "flows", "approve", "frun_0123"), "no candidate 'frun_0123'")
    one_error_line(sf(db, "flows", "runs", "approve", "frun_0123"), "no flow run 'frun_0123'")
    one_error_line(sf(db, "flows", "runs", "reject", "cand_"), "no flow run 'cand_'")


def test_input_that_is_not_json_is_one_line(loaded):
    db, cands = loaded
    assert sf(db, "flows", "approve", cands[0]["id"]).exit_code == 0
    one_error_line(sf(db, "flows", "run", "auto", "--input", "{email: x}"), "--input is not JSON")
    assert sf(db, "flows", "runs", "list", "--json").stdout.strip() == "[]"


# ------------------------------------------------------------------ output


def test_tables_never_cut_ids_at_80_columns(sqlite_url: str):
    assert sf(sqlite_url, "ingest", str(TAU_BENCH)).exit_code == 0
    cands = json.loads(sf(sqlite_url, "detect", "--json", "--max-candidates", "3").stdout)
    env = {**os.environ, "COLUMNS": "80"}
    for args, ids in (
        (["flows", "candidates"], [c["id"] for c in cands]),
        (
            ["runs", "list", "--limit", "5"],
            [
                r["run_id"]
                for r in json.loads(sf(sqlite_url, "runs", "list", "--json", "--limit", "5").stdout)
            ],
        ),
    ):
        proc = subprocess.run(
            [EXE, "--db", sqlite_url, "--user", "u1", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert max(map(len, proc.stdout.splitlines())) <= 80
        for i in ids:
            assert i in proc.stdout, (i, proc.stdout)


def test_candidate_lists_show_every_tool_name_whole_at_80_columns(sqlite_url: str):
    """A narrow terminal gets one block per candidate: the sequence's tool names are never cut
    to "get_user_det…", and a score that rounds to zero is "0", not "-0"."""
    assert sf(sqlite_url, "ingest", str(TAU_BENCH)).exit_code == 0
    env = {**os.environ, "COLUMNS": "80"}
    for args in (
        ["detect", "--include-failed", "--max-candidates", "10"],
        ["flows", "candidates"],
    ):
        proc = subprocess.run(
            [EXE, "--db", sqlite_url, "--user", "u1", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert max(map(len, proc.stdout.splitlines())) <= 80
        assert "…" not in proc.stdout and " -0 " not in proc.stdout, proc.stdout
        cands = json.loads(sf(sqlite_url, "flows", "candidates", "--json").stdout)
        assert cands
        words = set(proc.stdout.split())
        for cand in cands:
            assert cand["id"] in words
            for name in cand["tool_sequence"]:
                assert name in words or f"{name}×n" in words, (name, proc.stdout)


def test_flows_run_json_prints_only_json(sqlite_url: str):
    from soloflow_core.learning.promotion import submit_flow
    from soloflow_core.models import FlowDefinition, FlowStep

    flow = FlowDefinition(
        name="Track → order",
        input_schema={
            "type": "object",
            "properties": {"email": {"type": "string"}},
            "required": ["email"],
        },
        steps=[
            FlowStep(id="c", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"})
        ],
    )
    with Store.open(sqlite_url) as store:
        submit_flow(store, flow, user_id="u1", agent_id="default")
    res = sf(
        sqlite_url,
        "flows",
        "run",
        "track",
        "--input",
        '{"email": "bob@example.org"}',
        "--tools",
        "soloflow_langgraph.demo.agent:TOOLS",
        "--json",
    )
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["status"] == "completed" and result["run_id"].startswith("frun_")
    assert result["flow"] == "Track → order"
    # Flow runs by prefix: unique, then ambiguous once there are two.
    run_id = result["run_id"]
    res = sf(sqlite_url, "flows", "status", run_id[:10], "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["run_id"] == run_id
    again = sf(
        sqlite_url,
        "flows",
        "run",
        "TRACK",
        "--input",
        '{"email": "bob@example.org"}',
        "--tools",
        "soloflow_langgraph.demo.agent:TOOLS",
        "--json",
    )
    assert again.exit_code == 0, again.output
    one_error_line(
        sf(sqlite_url, "flows", "history", "frun_"),
        "flow run 'frun_' is ambiguous",
        run_id,
        json.loads(again.stdout)["run_id"],
    )


def test_version_and_demo_with_its_own_db(tmp_path: Path):
    from soloflow_core import __version__

    proc = subprocess.run([EXE, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"soloflow {__version__}"
    db = tmp_path / "demo.db"
    proc = subprocess.run(
        [EXE, "demo", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    res = sf(str(db), "flows", "list", "--json", user="default")
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 1


def test_ctrl_c_while_the_command_loads_prints_no_traceback(tmp_path: Path):
    """Ctrl-C at any moment of a command's first half second (while it imports LangGraph and
    the stores) ends it with 130 or as the command would have, never with a traceback.

    The moments are counted from when the interpreter has started and reached the console
    script's first import (measured here, on this machine, now): a Ctrl-C inside Python's
    own start-up is Python's to report, not the command's."""
    import signal
    import statistics
    import time

    def started() -> float:
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import soloflow_langgraph.__main__"], check=True)
        return time.perf_counter() - began

    start_up = statistics.median(started() for _ in range(3))
    for delay in (start_up + d for d in (0.0, 0.03, 0.08, 0.18, 0.38)):
        proc = subprocess.Popen(
            [EXE, "--db", f"sqlite:///{tmp_path / 'none.db'}", "flows", "list"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err or _in_python_start_up(err), (delay, err)
        assert proc.returncode in (130, 1, -signal.SIGINT), (delay, proc.returncode, err)


def _in_python_start_up(err: str) -> bool:
    """Whether a traceback is Python's own, from before the command's first line ran: the
    interpreter starting (``site`` reading the ``.pth`` files: no frame of SoloFlow at all),
    the console script importing the entry point (a busy machine started this process slower
    than the start-up measured: the interrupt may land inside the standard library's
    ``typing`` that the package imports first), then the KeyboardInterrupt — and no frame of
    ``main``, where the command's own handling begins."""
    frames = [line for line in err.splitlines() if line.strip().startswith("File ")]
    if frames and err.rstrip().endswith("KeyboardInterrupt"):
        if not any("soloflow" in f for f in frames):  # interpreter start-up: site, .pth files
            return True
    return (
        bool(frames)
        and "bin/soloflow" in frames[0]
        and "from soloflow_langgraph.__main__ import main" in err
        and not any(f.rstrip().endswith(", in main") for f in frames)
        and not any("soloflow_langgraph/cli" in f for f in frames)
        and err.rstrip().endswith("KeyboardInterrupt")
    )


def test_a_traceback_counts_as_start_up_only_before_main():
    head = 'Traceback (most recent call last):\n  File "/v/bin/soloflow", line 3, in <module>\n'
    head += "    from soloflow_langgraph.__main__ import main\n"
    typing = '  File "/py/lib/python3.11/typing.py", line 278, in _collect_parameters\n'
    assert _in_python_start_up(head + "KeyboardInterrupt\n")
    assert _in_python_start_up(head + typing + "KeyboardInterrupt\n")
    site = 'Traceback (most recent call last):\n  File "<frozen importlib._bootstrap_external>"'
    assert _in_python_start_up(site + ", line 1437, in _path_importer_cache\nKeyboardInterrupt\n")
    in_main = '  File "/v/soloflow_langgraph/__main__.py", line 20, in main\n'
    assert not _in_python_start_up(head + in_main + "KeyboardInterrupt\n")
    assert not _in_python_start_up(head + typing + "ValueError: x\n")
