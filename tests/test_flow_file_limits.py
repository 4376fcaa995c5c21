"""Flow files that would hang or exhaust memory are refused at once, by name and line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soloflow_core.errors import FlowFileError
from soloflow_core.flow.loader import MAX_DEPTH, validate_flow_file
from soloflow_langgraph.cli import app

LAUGHS = (
    "\n".join(
        ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [
            f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ]
    )
    + "\n"
)


def test_a_billion_laughs_file_is_refused_fast_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "lol.yaml"
    path.write_text(LAUGHS)
    start = time.perf_counter()
    with pytest.raises(FlowFileError) as info:
        validate_flow_file(path)
    assert time.perf_counter() - start < 1.0
    text = str(info.value)
    assert f"{path}:6:" in text and "expands to more than 100,000 values" in text
    res = CliRunner().invoke(app, ["flows", "validate", str(path)])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "expands to more than" in res.output


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "name: aliased\nsteps:\n  - id: a\n    skill_key: t\n    input_map: &m {q: x}\n"
        "  - id: b\n    skill_key: t\n    input_map: *m\n"
    )
    flow, _ = validate_flow_file(path)
    assert flow.steps[1].input_map == {"q": "x"}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("depth", [300, 5_000])
def test_deep_nesting_is_refused(tmp_path: Path, suffix: str, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    path = tmp_path / f"deep{suffix}"
    path.write_text(
        f'{{"name": "d", "steps": [{{"id": "a", "skill_key": "t", "input_map": {{"q": {deep}}}}}]}}'
    )
    start = time.perf_counter()
    with pytest.raises(FlowFileError, match="nest"):
        validate_flow_file(path)
    assert time.perf_counter() - start < 1.0
    assert MAX_DEPTH == 100


def test_a_100k_character_name_is_refused_by_validation_fast(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text(
        json.dumps({"name": "x" * 100_000, "steps": [{"id": "a" * 300, "skill_key": "t"}]})
    )
    start = time.perf_counter()
    with pytest.raises(FlowFileError) as info:
        validate_flow_file(path)
    assert time.perf_counter() - start < 1.0
    text = str(info.value)
    assert "name: String should have at most 1000 characters" in text
    assert "steps[0].id: String should have at most 200 characters" in text
    assert len(text) < 2_000  # the 100k value is not echoed back
