"""A fuzz corpus of hostile input: flow files, CLI arguments, tool outputs and stored text
shown by the CLI. Every case ends in a result or one of SoloFlow's errors (a clear line from
the CLI, exit 1 or 2): no traceback, and no case over 5 s. The corpus is generated from a
fixed seed, so a failure names a case that can be run again."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from soloflow_core.errors import SoloFlowError
from soloflow_core.flow.loader import validate_flow_file
from soloflow_core.flow.templates import TemplateError, render
from soloflow_core.generalize.arguments import Occurrence
from soloflow_core.generalize.propose import propose
from soloflow_core.models import TaskRun, ToolCall
from soloflow_core.store import Store
from soloflow_langgraph.cli import app

SEED = 25
CATASTROPHIC_PATTERNS = [
    "(a+)+$",
    "(a|aa)+$",
    "(a|a)+$",
    "(\\w+\\s?)+$",
    "(x|xx)+y",
    "(?:a{1000}){1000}",
    "((a{100}){100}){100}",
    "(.*a){25}",
    "^(([a-z])+.)+[A-Z]([a-z])+$",
]
"""Patterns that backtrack catastrophically or compile to huge programs (issue 25)."""
CASE_LIMIT_S = 5.0
"""CPU seconds one case may take (the process's own, :func:`time.process_time`): a
catastrophic pattern or a huge expansion burns CPU for minutes; other processes' load on a
shared machine does not count."""
runner = CliRunner()

NASTY_TEXT = [
    "[/x]",
    "[/]",
    "[bold]b[/bold]",
    "[link=file:///etc/passwd]x[/link]",
    "[[/",
    "]]]",
    "\\[/x]",
    "{{",
    "}}",
    "{{step_1.v}}",
    "{{'{{'}}",
    "{{_trigger}}",
    "{{" * 2_000,
    "\x00",
    "\x1b[31mred\x1b[0m",
    "\u202etxt",
    "😀" * 50,
    "\r\n",
    "%s%n",
    "' OR 1=1 --",
    "<script>",
    "a" * 20_000,
    "-" * 3,
    "--help",
    "9" * 5_000,
    "-1e400",
    "NaN",
    "null",
    "[" * 3_000,
    "{" * 3_000,
    "\ud7ff",
    "\t",
    " ",
]


def _rng() -> random.Random:
    return random.Random(SEED)


def _timed(case: str, fn: Callable[[], Any], took: list[tuple[float, str]]) -> Any:
    start = time.process_time()
    try:
        return fn()
    finally:
        took.append((time.process_time() - start, case))


# ---------------------------------------------------------------- flow files


def _step(rng: random.Random, i: int) -> dict[str, Any]:
    step: dict[str, Any] = {"id": f"s{i}", "skill_key": rng.choice(["t", "x" * 600, "[/k]", ""])}
    step["input_map"] = {
        "q": rng.choice([*NASTY_TEXT, "{{_trigger.q}}", f"{{{{s{i - 1}.v}}}}", 1e308, -(2**70)])
    }
    if i and rng.random() < 0.5:
        step["depends_on"] = [rng.choice([f"s{i - 1}", f"s{i}", "nope", 3])]
    if rng.random() < 0.2:
        step["retry_max"] = rng.choice([-1, "three", 10**30, None])
    if rng.random() < 0.2:
        step["map_over"] = rng.choice(["{{s0.items}}", "{{", "x"])
    return step


def _flow_texts() -> Iterator[tuple[str, str, bytes]]:
    rng = _rng()
    laughs = 'a: &a ["l","l","l","l","l","l","l","l","l"]\n' + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    fixed = {
        "laughs.yaml": laughs,
        "laughs_in_map.yaml": "name: x\nsteps:\n  - id: a\n    skill_key: t\n    input_map:\n      "
        + laughs.replace("\n", "\n      "),
        "python_tag.yaml": "!!python/object/apply:os.system ['echo hi']\n",
        "tag2.yaml": "name: !!python/name:os.system\nsteps: []\n",
        "bad_utf8.yaml": "name: \xff\xfe",
        "empty.json": "",
        "deep.yaml": "[" * 2_000 + "]" * 2_000,
        "deep.json": "[" * 200_000,
        "self_alias.yaml": "&a [*a]\n",
        "tabs.yaml": "name:\tx\n\tsteps: [",
        "nul.json": '{"name": "\\u0000"}',
        "long_name.json": json.dumps(
            {"name": "n" * 100_000, "steps": [{"id": "a", "skill_key": "t"}]}
        ),
        "big_int.json": '{"name": "x", "version": ' + "9" * 5_000 + ', "steps": []}',
        "templates.json": json.dumps(
            {
                "name": "x",
                "steps": [{"id": "a", "skill_key": "t", "input_map": {"q": "{{" * 16_384}}],
            }
        ),
        "regex.json": json.dumps(
            {
                "name": "x",
                "steps": [{"id": "a", "skill_key": "t"}],
                "extraction": {"q": {"pattern": "(", "anchor": 3}},
            }
        ),
        **{
            f"regex_{i}.json": json.dumps(
                {
                    "name": "x",
                    "steps": [{"id": "a", "skill_key": "t"}],
                    "extraction": {"q": {"pattern": p}},
                }
            )
            for i, p in enumerate(CATASTROPHIC_PATTERNS)
        },
    }
    for name, text in fixed.items():
        yield (
            name,
            name.rsplit(".", 1)[1],
            text.encode("utf-8", "surrogatepass") if name != "bad_utf8.yaml" else b"name: \xff\xfe",
        )
    for n in range(220):
        flow: dict[str, Any] = {
            "name": rng.choice(["ok", *NASTY_TEXT[:12]]),
            "steps": [_step(rng, i) for i in range(rng.randint(0, 4))],
        }
        if rng.random() < 0.3:
            flow["extraction"] = {
                "q": {
                    "pattern": rng.choice(
                        ["(", "[a-", "a{99999999999}", "(?P<v>x)", "x" * 1_500, "\\"]
                    )
                }
            }
        if rng.random() < 0.2:
            flow[rng.choice(["unknown", "steps", "input_schema"])] = rng.choice(
                [None, 5, "x", {"type": "nope"}]
            )
        if rng.random() < 0.5:
            text = json.dumps(flow)
            if rng.random() < 0.3:
                cut = rng.randint(0, len(text))
                text = text[:cut] + rng.choice(["", "}", "\x00", "]]]"]) + text[cut:]
            yield f"gen{n}.json", "json", text.encode("utf-8", "surrogatepass")
        else:
            import yaml

            text = (
                yaml.safe_dump(flow, allow_unicode=True)
                if rng.random() < 0.8
                else "name: [&x a, *x, *y]\n"
            )
            yield f"gen{n}.yaml", "yaml", text.encode("utf-8", "surrogatepass")


FLOW_CASES = list(_flow_texts())


def test_hostile_flow_files(tmp_path: Path) -> None:
    took: list[tuple[float, str]] = []
    for name, suffix, data in FLOW_CASES:
        path = tmp_path / f"{name.rsplit('.', 1)[0]}.{suffix}"
        path.write_bytes(data)
        try:
            _timed(name, lambda p=path: validate_flow_file(p), took)
        except SoloFlowError as exc:
            assert str(exc).strip(), name
            assert len(str(exc)) < 20_000, (
                f"{name}: the error echoes the input ({len(str(exc))} chars)"
            )
    slowest = max(took)
    assert slowest[0] < CASE_LIMIT_S, slowest


# ---------------------------------------------------------------- CLI arguments


def _cli_cases() -> list[list[str]]:
    rng = _rng()
    commands = [
        ["runs", "list", "--limit"],
        ["runs", "show"],
        ["flows", "show"],
        ["flows", "runs", "list", "--limit"],
        ["flows", "status"],
        ["flows", "run"],
        ["detect", "--min-length"],
        ["detect", "--lookback"],
        ["flows", "approve"],
        ["flows", "validate"],
        ["memory", "search"],
        ["flows", "route"],
        ["flows", "resume"],
        ["flows", "cancel"],
        ["runs", "list", "--user"],
    ]
    values = [
        *NASTY_TEXT[:30],
        "99999999999999999999",
        "-5",
        "0",
        "1.5",
        "inf",
        "-0",
        "1e999",
        "/dev/null",
        ".",
    ]
    cases = [[*c, v] for c in commands for v in rng.sample(values, 8)]
    cases += [
        ["flows", "run", "X", "--input", v]
        for v in (
            "[" * 50_000,
            "[" * 50_000 + "]" * 50_000,
            '{"a": ' * 10_000,
            "1e999999",
            '"x"',
            "[]",
            "{]",
            "\x00",
        )
    ]
    return cases


CLI_CASES = _cli_cases()


def test_hostile_cli_arguments(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in {tuple(a[:-1]) for a in CLI_CASES}:  # imports done once, outside the timings
        runner.invoke(app, ["--db", sqlite_url, *args, "x"])
    took: list[tuple[float, str]] = []
    for args in CLI_CASES:
        res = _timed(
            repr(args)[:80], lambda a=args: runner.invoke(app, ["--db", sqlite_url, *a]), took
        )
        shown = f"{args!r:.120}: exit {res.exit_code}: {res.output[-400:]}"
        assert res.exception is None or isinstance(res.exception, SystemExit), shown + repr(
            res.exception
        )
        assert res.exit_code in (0, 1, 2), shown
        assert "Traceback" not in res.output, shown
    slowest = max(took)
    assert slowest[0] < CASE_LIMIT_S, slowest


# ---------------------------------------------------------------- tool outputs


def _outputs() -> list[Any]:
    rng = _rng()
    deep: Any = "x"
    for _ in range(900):
        deep = {"v": deep}
    outs: list[Any] = [
        deep,
        json.dumps({"v": 1}) * 1000,
        "[" * 5_000,
        "{" * 5_000 + "}",
        "9" * 5_000,
        '{"v": ' + "9" * 5_000 + "}",
        None,
        1e308,
        float("nan"),
        [None] * 10_000,
        {"": {"": 1}},
        "\x00" * 100,
        "{{step_1.v}}",
        {"v": "{{" * 5_000},
    ]
    outs += [rng.choice(NASTY_TEXT) + rng.choice(["", '{"v": 1}', "]"]) for _ in range(86)]
    return outs


OUTPUTS = _outputs()


def test_hostile_tool_outputs_in_templates_and_generalisation() -> None:
    took: list[tuple[float, str]] = []
    paths = ["{{step_1}}", "{{step_1.v}}", "{{step_1.v.v.v}}", "{{step_1.0}}", "a {{step_1.v}} b"]
    for n, out in enumerate(OUTPUTS):
        for tmpl in paths:
            try:
                _timed(
                    f"render {n} {tmpl}",
                    lambda o=out, t=tmpl: render(t, inputs={}, results={"step_1": o}),
                    took,
                )
            except TemplateError:
                pass
        occs = [
            Occurrence(
                task=f"do {k}",
                args=[{"q": f"q{k}"}, {"x": out if k else "{{step_1.v}}"}],
                outputs=[out, out],
            )
            for k in range(3)
        ]
        _timed(f"propose {n}", lambda o=occs: propose(["a", "b"], o, observed=3), took)
    slowest = max(took)
    assert slowest[0] < CASE_LIMIT_S, slowest


# ---------------------------------------------------------------- stored text shown by the CLI


def test_hostile_stored_text_shown_by_the_cli(sqlite_url: str) -> None:
    rng = _rng()
    ids = []
    with Store.open(sqlite_url) as store:
        for n in range(100):
            text = rng.choice(NASTY_TEXT).replace("\x00", "") or "x"
            run_id = f"r{n}{rng.choice(['', '[/x]', '[b]'])}"
            store.add_run(
                TaskRun(
                    run_id=run_id,
                    user_id="u",
                    agent_id="a",
                    task=text[:5_000],
                    success=True,
                    tool_calls=[
                        ToolCall(name=f"t{text[:40]}", args={"q": text[:200]}, output=text[:200])
                    ],
                )
            )
            ids.append(run_id)
    took: list[tuple[float, str]] = []
    base = ["--db", sqlite_url, "--user", "u", "--agent", "a"]
    for args in [
        ["runs", "list", "--limit", "1000"],
        ["detect"],
        *(["runs", "show", i] for i in ids),
    ]:
        res = _timed(repr(args), lambda a=args: runner.invoke(app, [*base, *a]), took)
        assert res.exit_code == 0 and res.exception is None, (
            f"{args}: {res.output[-400:]} {res.exception!r}"
        )
    slowest = max(took)
    assert slowest[0] < CASE_LIMIT_S, slowest


def test_the_corpus_holds_at_least_500_cases() -> None:
    total = len(FLOW_CASES) + len(CLI_CASES) + len(OUTPUTS) + 100
    assert total >= 500, total
