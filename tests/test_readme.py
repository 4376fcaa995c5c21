"""The README's quick start runs as written: its Python blocks, in order, in one file."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_readme_python_blocks_run_offline_and_print_what_they_say(tmp_path: Path) -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4, "the quick start's blocks are gone from README.md"
    script = tmp_path / "quickstart.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOLOFLOW_")}
    env["SOLOFLOW_HOME"] = str(tmp_path / "home")  # the default database, if anything opens it
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "quickstart.db").is_file()
    # Every `print(...)  # what it prints` says the truth.
    promised = [
        line.split("#", 1)[1].strip()
        for block in blocks
        for line in block.splitlines()
        if line.startswith("print(") and "#" in line
    ]
    assert "model calls: 0" in promised and len(promised) >= 5
    printed = proc.stdout.splitlines()
    for text in promised:
        assert any(text in line for line in printed), (
            f"README promises {text!r}; printed:\n{proc.stdout}"
        )

    # The shell commands that follow, on the database the script left.
    exe = str(Path(sys.executable).with_name("soloflow"))
    commands = [
        shlex.split(line.split("#", 1)[0])
        for line in re.findall(
            r"^soloflow --db quickstart\.db .*$", README.read_text(encoding="utf-8"), re.M
        )
    ]
    assert len(commands) >= 4
    for argv in commands:
        done = subprocess.run(
            [exe, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and done.stdout.strip(), (argv, done.stderr)
        assert "alice" in done.stdout or "graph" in done.stdout or "Auto" in done.stdout, (
            done.stdout
        )
