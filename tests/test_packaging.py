"""What the published package promises: one version, its licence, a user install without the
dev toolchain. (.ci/run builds the sdist and the wheel and runs the demo from the wheel.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_is_written_once() -> None:
    project = PROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PROJECT["tool"]["hatch"]["version"]["path"] == "soloflow_core/__init__.py"


def test_the_licence_ships() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "SoloFlow contributors" in text
    assert PROJECT["project"]["license"] == "MIT"
    assert PROJECT["project"]["license-files"] == ["LICENSE"]
    assert "LICENSE" in PROJECT["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]


def test_a_user_install_pulls_no_dev_tools() -> None:
    extras = PROJECT["project"]["optional-dependencies"]
    assert "dev" not in extras
    everything = [
        *PROJECT["project"]["dependencies"],
        *(r for reqs in extras.values() for r in reqs),
    ]
    for tool in ("pytest", "mypy", "ruff", "hypothesis", "schemathesis"):
        assert not any(r.startswith(tool) for r in everything), tool
    assert not any(r.startswith("agentdojo") for r in PROJECT["project"]["dependencies"])
    assert extras["benchmarks"] and all("==" not in r for r in extras["benchmarks"])
    assert any(r.startswith("pytest") for r in PROJECT["dependency-groups"]["dev"])


def test_the_index_page_has_what_it_needs() -> None:
    project = PROJECT["project"]
    assert len(project["classifiers"]) >= 5 and project["keywords"]
    assert {"Homepage", "Documentation", "Changelog", "Issues"} <= set(project["urls"])
