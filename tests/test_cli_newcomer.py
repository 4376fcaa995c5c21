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
