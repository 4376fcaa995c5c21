"""MkDocs hook: docs/cli-reference.md gets the CLI reference generated from the typer app.

Typer's own generator (``python -m typer soloflow_langgraph.cli utils docs``) writes it as
Markdown, which becomes part of the page: its code spans stay code and its commands are in the
page's table of contents. A failure fails the build.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

PAGE = "cli-reference.md"
MARKER = "<!-- cli-reference: generated here -->"


def on_page_markdown(markdown: str, *, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise RuntimeError(f"docs/{PAGE}: the line {MARKER!r} is missing")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "typer",
            "soloflow_langgraph.cli",
            "utils",
            "docs",
            "--name",
            "soloflow",
            "--title",
            "soloflow",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or "## `soloflow flows run`" not in done.stdout:
        raise RuntimeError(f"the CLI reference could not be generated:\n{done.stderr}")
    return markdown.replace(MARKER, _one_level_down(done.stdout))


def _one_level_down(text: str) -> str:
    """Typer's page starts at ``#``: its headings go one level down, under the page's title
    (lines inside code fences are left alone)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append("#" + line if line.startswith("#") and not fenced else line)
    return "\n".join(lines)
