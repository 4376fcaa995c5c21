"""Learning policy: triggers, configuration, outcomes, promotion routing, capacity, time budget."""

from __future__ import annotations

import shutil
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from soloflow_core.errors import ConfigError
from soloflow_core.learning import (
    FlowStats,
    FlowUsage,
    LearningConfig,
    find_config_file,
    format_duration,
    initial_stats,
    load_learning_config,
    make_room_for_learned_flow,
    may_auto_execute,
    parse_duration,
    promotion_route,
    record_outcome,
    reinstate,
    run_learning,
    should_learn,
)
from soloflow_core.models import ModelCall, TaskRun, ToolCall

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
DEFAULT = LearningConfig()


def timed_run(
    offsets: list[float], *, errors: dict[int, bool] | None = None, success: bool | None = True
) -> TaskRun:
    """A run whose calls start at T0 + offset seconds and last one second each."""
    errors = errors or {}
    calls = [
        ToolCall(
            name=f"t{i + 1}",
            error=errors.get(i, False),
            duration_ms=1000.0,
            meta={"started_at": (T0 + timedelta(seconds=o)).isoformat()},
        )
        for i, o in enumerate(offsets)
    ]
    return TaskRun(
        run_id="r",
        tool_calls=calls,
        success=success,
        started_at=T0,
        ended_at=T0 + timedelta(seconds=(offsets[-1] if offsets else 0) + 5),
    )


def untimed_run(n: int, *, errors: dict[int, bool] | None = None, **kw: object) -> TaskRun:
    errors = errors or {}
    calls = [ToolCall(name=f"t{i + 1}", error=errors.get(i)) for i in range(n)]
    return TaskRun.model_validate({"run_id": "r", "tool_calls": calls, "success": True, **kw})


# --------------------------------------------------------------------------- triggers


def test_all_triggers_hold() -> None:
    d = should_learn(timed_run([0, 10, 20]), DEFAULT)
    assert d and d.learn and d.reasons == () and d.span == (0, 3) and d.notes == ()


def test_too_few_calls() -> None:
    d = should_learn(timed_run([0, 10]), DEFAULT)
    assert not d
    assert d.reasons == ("only 2 consecutive successful tool calls (min_steps_to_learn=3)",)


def test_failed_call_breaks_the_streak() -> None:
    d = should_learn(timed_run([0, 10, 20, 30, 40], errors={2: True}), DEFAULT)
    assert not d
    assert d.reasons == (
        "only 2 consecutive successful tool calls (min_steps_to_learn=3): call 3 (t3) failed",
    )
    ok = should_learn(timed_run([0, 10, 20, 30, 40, 50], errors={1: True}), DEFAULT)
    assert ok and ok.span == (2, 6)


def test_unknown_error_counts_as_success() -> None:
    assert should_learn(untimed_run(3, errors={1: None}), DEFAULT)  # type: ignore[dict-item]


def test_gap_over_the_window_breaks_the_streak() -> None:
    # t2 ends at 11 s, t3 starts 6 min later.
    d = should_learn(timed_run([0, 10, 11 + 360, 11 + 370]), DEFAULT)
    assert not d
    assert d.reasons == (
        "6m gap between call 2 (t2) and call 3 (t3) exceeds learning_window=5m",
        "only 2 consecutive successful tool calls within learning_window=5m (min_steps_to_learn=3)",
    )
    small = LearningConfig(learning_window=180)
    d = should_learn(timed_run([0, 10, 11 + 240, 11 + 250]), small)
    assert d.reasons[0] == "4m gap between call 2 (t2) and call 3 (t3) exceeds learning_window=3m"


def test_gap_within_the_window_and_a_longer_streak_elsewhere() -> None:
    d = should_learn(timed_run([0, 400, 410, 420]), DEFAULT)
    assert d and d.span == (1, 4)


def test_ended_at_in_meta_is_used() -> None:
    run = timed_run([0, 400, 410])
    first = run.tool_calls[0].model_copy(
        update={
            "meta": {
                **run.tool_calls[0].meta,
                "ended_at": (T0 + timedelta(seconds=390)).isoformat(),
            }
        }
    )
    run = run.model_copy(update={"tool_calls": [first, *run.tool_calls[1:]]})
    assert should_learn(run, DEFAULT)


def test_parallel_calls_have_no_gap() -> None:
    assert should_learn(timed_run([0, 0, 0]), DEFAULT)


def test_task_failed() -> None:
    d = should_learn(timed_run([0, 10, 20], success=False), DEFAULT)
    assert d.reasons == ("the task did not complete (success=false)",)


def test_task_not_known_to_complete() -> None:
    d = should_learn(untimed_run(3, success=None), DEFAULT)
    assert d.reasons == (
        "the task is not known to have completed (success and ended_at are unset)",
    )
    assert should_learn(untimed_run(3, success=None, ended_at=T0), DEFAULT)


def test_disabled() -> None:
    d = should_learn(timed_run([0, 10, 20]), LearningConfig(enabled=False))
    assert d.reasons == ("learning is disabled (enabled=false)",)


def test_every_failed_trigger_is_named() -> None:
    d = should_learn(timed_run([0], success=False), LearningConfig(enabled=False))
    assert len(d.reasons) == 3 and not d


def test_min_steps_is_configurable() -> None:
    run = timed_run([0, 10, 20])
    assert not should_learn(run, LearningConfig(min_steps_to_learn=4))
    assert should_learn(timed_run([0, 10]), LearningConfig(min_steps_to_learn=2))


def test_no_timing_at_all_is_noted_not_failed() -> None:
    d = should_learn(untimed_run(3), DEFAULT)
    assert d and any("learning_window not checked" in n for n in d.notes)


def test_short_run_bounds_the_gaps() -> None:
    run = untimed_run(3, started_at=T0, ended_at=T0 + timedelta(minutes=4))
    d = should_learn(run, DEFAULT)
    assert d and d.notes == ()


def test_gaps_estimated_from_model_turns() -> None:
    # Turn 1 asks for 2 calls, the model thinks 400 s, turn 2 asks for 2 more, then answers.
    models = [
        ModelCall(duration_ms=1000, tool_calls_requested=2),
        ModelCall(duration_ms=400_000, tool_calls_requested=2),
        ModelCall(duration_ms=1000, tool_calls_requested=0),
    ]
    run = untimed_run(4, model_calls=models, started_at=T0, ended_at=T0 + timedelta(minutes=7))
    d = should_learn(run, DEFAULT)
    assert not d
    assert (
        d.reasons[0] == "6m40s gap between call 2 (t2) and call 3 (t3) exceeds learning_window=5m"
    )
    assert d.notes == ("gaps between calls estimated from model-call durations",)
    fast = [m.model_copy(update={"duration_ms": 2000}) for m in models]
    assert should_learn(run.model_copy(update={"model_calls": fast}), DEFAULT)


# --------------------------------------------------------------------------- the time budget


def test_learning_timeout_does_not_block() -> None:
    release = threading.Event()

    def slow() -> str:
        release.wait(10.0)
        return "learned"

    began = time.perf_counter()
    attempt = run_learning(slow, LearningConfig.model_validate({"learning_timeout": "100ms"}))
    elapsed = time.perf_counter() - began
    assert attempt.timed_out and attempt.status == "timed_out" and attempt.value is None
    assert elapsed < 5.0  # a blocking wait would take the whole 10 s
    release.set()
    assert attempt.future.result(timeout=5) == "learned"  # it finished in the background


def test_learning_done_and_failed() -> None:
    assert run_learning(lambda: 7, DEFAULT).value == 7

    def broken() -> None:
        raise RuntimeError("boom")

    attempt = run_learning(broken, DEFAULT)
    assert attempt.status == "failed" and isinstance(attempt.error, RuntimeError)


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300.0),
        ("5m", 300.0),
        ("100ms", 0.1),
        ("1.5s", 1.5),
        ("2h", 7200.0),
        ("1m30s", 90.0),
        (" 5 min ", 300.0),
        ("0.25", 0.25),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "five", "5 minutes", "m5", "5m x", "-"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.1, 1.5, 60, 300, 400, 3600, 5400)] == [
        "100ms",
        "1.5s",
        "1m",
        "5m",
        "6m40s",
        "1h",
        "1h30m",
    ]


def test_durations_in_code() -> None:
    assert (
        LearningConfig.model_validate({"learning_window": timedelta(minutes=2)}).learning_window
        == 120.0
    )
    assert LearningConfig.model_validate(
        {"learning_timeout": "250ms"}
    ).learning_timeout == pytest.approx(0.25)
    with pytest.raises(ValidationError):
        LearningConfig(learning_window=0)


# --------------------------------------------------------------------------- configuration


def test_defaults() -> None:
    c = LearningConfig()
    assert c.model_dump() == {
        "enabled": True,
        "min_steps_to_learn": 3,
        "min_success_rate": 0.6,
        "confidence_threshold": 0.8,
        "max_workflows_per_agent": 1000,
        "learning_timeout": 0.1,
        "learning_window": 300.0,
        "auto_execute": False,
        "suggestion_mode": "manual",
    }
    with pytest.raises(ValidationError):
        LearningConfig(unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        c.enabled = False  # type: ignore[misc]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (with .git) and a working directory below it."""
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "src" / "pkg"
    sub.mkdir(parents=True)
    return tmp_path


def test_soloflow_toml_found_upward(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "soloflow.toml").write_text(
        '[learning]\nmin_steps_to_learn = 4\nlearning_window = "2m"\nsuggestion_mode = "hybrid"\n'
    )
    monkeypatch.chdir(project / "src" / "pkg")
    assert find_config_file() == project / "soloflow.toml"
    c = load_learning_config(env={})
    assert (c.min_steps_to_learn, c.learning_window, c.suggestion_mode) == (4, 120.0, "hybrid")


def test_pyproject_variant(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.soloflow.learning]\nauto_execute = true\n'
        "learning_timeout = 0.05\n"
    )
    c = load_learning_config(path=project / "pyproject.toml", env={})
    assert c.auto_execute is True and c.learning_timeout == 0.05
    assert find_config_file(project / "src") == project / "pyproject.toml"


def test_pyproject_without_soloflow_is_skipped_and_search_stops_at_git(tmp_path: Path) -> None:
    (tmp_path / "soloflow.toml").write_text("[learning]\nenabled = false\n")  # above the repo
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_config_file(repo / "src") is None
    (repo / "src" / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.soloflow]\n')
    assert find_config_file(repo / "src") == repo / "src" / "pyproject.toml"
    shutil.rmtree(repo / ".git")
    (repo / "src" / "pyproject.toml").unlink()
    assert find_config_file(repo / "src") == tmp_path / "soloflow.toml"


def test_soloflow_toml_wins_over_pyproject(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.soloflow.learning]\nenabled = false\n")
    (project / "soloflow.toml").write_text("[learning]\nenabled = true\n")
    assert find_config_file(project) == project / "soloflow.toml"


def test_precedence_code_over_env_over_file(project: Path) -> None:
    f = project / "soloflow.toml"
    f.write_text(
        "[learning]\nmin_steps_to_learn = 4\nmin_success_rate = 0.5\nconfidence_threshold = 0.7\n"
    )
    env = {
        "SOLOFLOW_LEARNING_MIN_STEPS_TO_LEARN": "5",
        "SOLOFLOW_LEARNING_MIN_SUCCESS_RATE": "0.4",
        "OTHER": "x",
    }
    c = load_learning_config(path=f, env=env, overrides={"min_steps_to_learn": 6})
    assert c.min_steps_to_learn == 6  # code
    assert c.min_success_rate == 0.4  # environment
    assert c.confidence_threshold == 0.7  # file
    assert c.max_workflows_per_agent == 1000  # default


@pytest.mark.parametrize(
    ("name", "raw", "field", "value"),
    [
        ("ENABLED", "false", "enabled", False),
        ("ENABLED", "1", "enabled", True),
        ("AUTO_EXECUTE", "TRUE", "auto_execute", True),
        ("AUTO_EXECUTE", "0", "auto_execute", False),
        ("LEARNING_WINDOW", "300", "learning_window", 300.0),
        ("LEARNING_WINDOW", "5m", "learning_window", 300.0),
        ("LEARNING_TIMEOUT", "100ms", "learning_timeout", 0.1),
        ("MAX_WORKFLOWS_PER_AGENT", "20", "max_workflows_per_agent", 20),
        ("SUGGESTION_MODE", "automatic", "suggestion_mode", "automatic"),
    ],
)
def test_env_values(name: str, raw: str, field: str, value: object, tmp_path: Path) -> None:
    c = load_learning_config(path=_empty(tmp_path), env={"SOLOFLOW_LEARNING_" + name: raw})
    assert getattr(c, field) == value


def _empty(tmp_path: Path) -> Path:
    f = tmp_path / "soloflow.toml"
    f.write_text("")
    return f


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("MIN_STEPS_TO_LEARN", "4.5", "an integer ≥ 2"),
        ("ENABLED", "maybe", "true or false"),
        ("LEARNING_WINDOW", "soon", "a duration > 0"),
        ("MIN_STEPS_TO_LEARN", "1", "greater than or equal to 2"),
        ("SUGGESTION_MODE", "sometimes", "'manual', 'automatic' or 'hybrid'"),
    ],
)
def test_bad_env_value_names_the_variable(
    name: str, raw: str, expected: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as info:
        load_learning_config(path=_empty(tmp_path), env={"SOLOFLOW_LEARNING_" + name: raw})
    msg = str(info.value)
    assert f"environment variable SOLOFLOW_LEARNING_{name}" in msg and expected in msg


def test_unknown_env_variable(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"SOLOFLOW_LEARNING_MIN_STEPS: unknown setting "
        r"\(did you mean SOLOFLOW_LEARNING_MIN_STEPS_TO_LEARN\?\)",
    ):
        load_learning_config(path=_empty(tmp_path), env={"SOLOFLOW_LEARNING_MIN_STEPS": "4"})


def test_bad_file_value_names_file_key_and_line(tmp_path: Path) -> None:
    f = tmp_path / "soloflow.toml"
    f.write_text(
        "[other]\nmin_success_rate = 2\n\n[learning]\nenabled = true\nmin_success_rate = 1.5\n"
    )
    with pytest.raises(ConfigError) as info:
        load_learning_config(path=f, env={})
    msg = str(info.value)
    assert f"{f}:6: [learning].min_success_rate: invalid value 1.5" in msg
    assert "expected a number between 0 and 1" in msg


def test_bad_pyproject_value(tmp_path: Path) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_text('[tool.soloflow.learning]\nlearning_window = "forever"\n')
    with pytest.raises(
        ConfigError,
        match=r"pyproject.toml:2: \[tool.soloflow.learning\]"
        r".learning_window: invalid value 'forever'",
    ):
        load_learning_config(path=f, env={})


def test_unknown_file_key_lists_valid_keys(tmp_path: Path) -> None:
    f = tmp_path / "soloflow.toml"
    f.write_text("[learning]\nmin_step_to_learn = 4\n")
    with pytest.raises(ConfigError) as info:
        load_learning_config(path=f, env={})
    msg = str(info.value)
    assert (
        f"{f}:2: [learning].min_step_to_learn: unknown setting (did you mean 'min_steps_to_learn'?)"
        in msg
    )
    assert "valid keys of [learning]: enabled, min_steps_to_learn, " in msg


def test_unknown_override() -> None:
    with pytest.raises(ConfigError, match=r"overrides\['auto_exec'\]: unknown setting"):
        load_learning_config(path=None, env={}, overrides={"auto_exec": True})


def test_bad_override_names_the_code() -> None:
    with pytest.raises(
        ConfigError, match=r"overrides\['max_workflows_per_agent'\] \(code\): invalid value 0"
    ):
        load_learning_config(env={}, overrides={"max_workflows_per_agent": 0})


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "soloflow.toml"
    f.write_text("[learning\n")
    with pytest.raises(ConfigError, match=r"soloflow.toml: not valid TOML: .*line 1"):
        load_learning_config(path=f, env={})
    with pytest.raises(ConfigError, match="config file not found"):
        load_learning_config(path=tmp_path / "nope.toml", env={})
    f.write_text("learning = 3\n")
    with pytest.raises(ConfigError, match="learning must be a table"):
        load_learning_config(path=f, env={})


# --------------------------------------------------------------------------- outcomes


def run_outcomes(
    outcomes: str, stats: FlowStats | None = None, config: LearningConfig = DEFAULT
) -> list[FlowStats]:
    """Apply "SSF..." outcomes one by one; every intermediate state."""
    states = [stats or initial_stats()]
    for ch in outcomes:
        states.append(record_outcome(states[-1], ch == "S", config, at=T0))
    return states[1:]


def test_beta_updates_exact() -> None:
    s = run_outcomes("SSF")
    assert [(x.success_count, x.total_executions) for x in s] == [(1, 1), (2, 2), (2, 3)]
    assert [x.confidence for x in s] == [2 / 3, 3 / 4, 3 / 5]
    assert s[-1].last_executed_at == T0 and s[-1].failure_count == 1
    assert s[-1].success_rate == pytest.approx(2 / 3)


def test_prior_from_fidelity() -> None:
    p = initial_stats(fidelity=0.9)
    assert (p.prior_alpha, p.prior_beta) == pytest.approx((4.6, 1.4))
    assert p.confidence == pytest.approx(4.6 / 6)
    assert record_outcome(p, True, DEFAULT, at=T0).confidence == pytest.approx(5.6 / 7)
    assert initial_stats(fidelity=0.5, weight=10).confidence == 0.5
    with pytest.raises(ValueError, match="fidelity"):
        initial_stats(fidelity=1.2)


def test_user_submitted_prior() -> None:
    vouched = initial_stats(user_submitted=True)
    assert (vouched.prior_alpha, vouched.prior_beta, vouched.confidence) == (4.0, 0.0, 1.0)
    assert [x.confidence for x in run_outcomes("SF", vouched)] == [1.0, 5 / 6]
    with pytest.raises(ValueError, match="user-submitted"):
        initial_stats(user_submitted=True, fidelity=0.9)


def test_learning_state_round_trip() -> None:
    stats = run_outcomes("SSF", initial_stats(fidelity=0.9))[-1]
    state = stats.learning_state()
    assert set(state) == {
        "prior_alpha",
        "prior_beta",
        "consecutive_successes",
        "consecutive_failures",
        "agent_successes",
    }
    rebuilt = FlowStats(
        **state,
        success_count=stats.success_count,
        total_executions=stats.total_executions,
        status=stats.status,
        last_executed_at=stats.last_executed_at,
    )
    assert rebuilt == stats


def test_confidence_filled_when_loading() -> None:
    s = FlowStats.model_validate({"success_count": 3, "total_executions": 4})
    assert s.confidence == 4 / 6
    with pytest.raises(ValidationError, match="exceeds total_executions"):
        FlowStats(success_count=5, total_executions=4)


def test_no_demotion_before_five_executions() -> None:
    assert [x.status for x in run_outcomes("FFFF")] == ["active"] * 4


def test_demotion_then_retirement_after_three_more_failures() -> None:
    states = run_outcomes("SSFFF" + "FF" + "F")
    assert [x.status for x in states] == (["active"] * 4 + ["suggestion_only"] * 3 + ["retired"])
    assert states[4].consecutive_failures == 0  # counted anew from the demotion
    assert states[-1].consecutive_failures == 3


def test_retirement_by_low_rate() -> None:
    # Demoted at 0/5; no 3 failures in a row after that. At 9 executions the rate 2/9 is
    # below 0.3 but too few to retire on; at 10 (2/10) it is retired.
    states = run_outcomes("FFFFF" + "SFFSF")
    assert states[4].status == "suggestion_only"
    assert states[8].status == "suggestion_only" and states[8].success_rate == pytest.approx(2 / 9)
    assert states[9].status == "retired" and states[9].consecutive_failures == 1


def test_reactivation_after_recovery() -> None:
    states = run_outcomes("SSFFF" + "SSS")
    # 4/7 < 0.6 stays demoted; 5/8 = 0.625 with 3 successes in a row: active again.
    assert [x.status for x in states[4:]] == [
        "suggestion_only",
        "suggestion_only",
        "suggestion_only",
        "active",
    ]


def test_reactivation_needs_two_successes_in_a_row() -> None:
    # Demoted at 2/5; S brings 3/6 = 0.5; F S S: 5/9 < 0.6; S: 6/10 = 0.6 with a streak: active.
    states = run_outcomes("FFFSS" + "SF" + "SSS")
    assert states[4].status == "suggestion_only"
    assert [x.status for x in states[5:]] == ["suggestion_only"] * 4 + ["active"]


def test_retired_stays_retired_until_reinstated() -> None:
    retired = run_outcomes("FFFFF" + "FFF")[-1]
    assert retired.status == "retired"
    after = run_outcomes("SSSSSSSSSS", retired)[-1]
    assert after.status == "retired" and after.total_executions == 18
    fresh = reinstate(after)
    assert (fresh.status, fresh.total_executions, fresh.confidence) == ("active", 0, 0.5)


def test_min_success_rate_zero_never_demotes() -> None:
    states = run_outcomes("F" * 12, config=LearningConfig(min_success_rate=0))
    assert {x.status for x in states} == {"active"}


@given(st.lists(st.booleans(), max_size=60), st.floats(0, 1), st.floats(0, 50))
def test_confidence_in_unit_interval_and_monotone(
    outcomes: list[bool], fidelity: float, weight: float
) -> None:
    stats = initial_stats(fidelity=fidelity, weight=weight)
    for ok in outcomes:
        nxt = record_outcome(stats, ok, DEFAULT, at=T0)
        assert 0.0 <= nxt.confidence <= 1.0
        # A success never lowers confidence; a failure never raises it.
        assert (nxt.confidence >= stats.confidence) if ok else (nxt.confidence <= stats.confidence)
        stats = nxt


@given(st.integers(0, 100), st.integers(0, 100))
def test_more_successes_more_confidence(successes: int, extra: int) -> None:
    n = successes + extra + 1
    lo = FlowStats(success_count=successes, total_executions=n)
    hi = FlowStats(success_count=successes + 1, total_executions=n)
    assert 0.0 <= lo.confidence < hi.confidence <= 1.0


def test_may_auto_execute() -> None:
    confident = FlowStats(success_count=9, total_executions=9)  # 10/11
    on = LearningConfig(auto_execute=True)
    assert may_auto_execute(confident, on)
    assert not may_auto_execute(confident, DEFAULT)  # auto_execute off
    assert not may_auto_execute(confident.model_copy(update={"status": "suggestion_only"}), on)
    assert not may_auto_execute(FlowStats(success_count=2, total_executions=2), on)  # 0.75
    assert may_auto_execute(FlowStats(success_count=3, total_executions=3), on)  # 0.8 exactly


# --------------------------------------------------------------------------- promotion routing


@pytest.mark.parametrize(
    ("mode", "read_only", "confidence", "fidelity", "route"),
    [
        ("manual", True, 1.0, 1.0, "manual"),
        ("automatic", False, 0.85, 0.95, "auto"),
        ("automatic", True, 0.85, 0.95, "auto"),
        ("automatic", False, 0.75, 0.95, "manual"),
        ("automatic", False, 0.85, 0.85, "manual"),
        ("automatic", False, 0.8, 0.9, "auto"),
        ("automatic", False, None, 0.95, "manual"),
        ("automatic", False, 0.85, None, "manual"),
        ("hybrid", True, 0.85, 0.95, "auto"),
        ("hybrid", False, 0.85, 0.95, "manual"),
        ("hybrid", True, 0.5, 0.95, "manual"),
    ],
)
def test_promotion_route(
    mode: str, read_only: bool, confidence: float | None, fidelity: float | None, route: str
) -> None:
    assert promotion_route(mode, read_only, confidence, fidelity, DEFAULT) == route  # type: ignore[arg-type]


def test_promotion_route_thresholds_and_bad_mode() -> None:
    assert (
        promotion_route("automatic", False, 0.65, 0.95, LearningConfig(confidence_threshold=0.6))
        == "auto"
    )
    assert promotion_route("automatic", False, 0.9, 0.75, DEFAULT, fidelity_threshold=0.7) == "auto"
    with pytest.raises(ValueError, match="suggestion mode"):
        promotion_route("sometimes", False, 1.0, 1.0, DEFAULT)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- capacity


def usage(
    flow_id: str,
    source: str = "auto-learned",
    *,
    status: str = "active",
    confidence: float = 0.5,
    used: int | None = None,
) -> FlowUsage:
    stats = FlowStats(
        confidence=confidence,
        status=status,  # type: ignore[arg-type]
        last_executed_at=None if used is None else T0 + timedelta(days=used),
    )
    return FlowUsage(flow_id, source, stats, registered_at=T0)


def test_room_below_the_limit() -> None:
    d = make_room_for_learned_flow([usage("a")], LearningConfig(max_workflows_per_agent=2))
    assert d and d.evict == ()


def test_evicts_least_recently_used_then_lowest_confidence() -> None:
    flows = [
        usage("recent", used=5, confidence=0.1),
        usage("old-high", used=1, confidence=0.9),
        usage("old-low", used=1, confidence=0.3),
        usage("user", "user-submitted", used=0),
    ]
    d = make_room_for_learned_flow(flows, LearningConfig(max_workflows_per_agent=4))
    assert d.evict == ("old-low",)
    d = make_room_for_learned_flow(flows, LearningConfig(max_workflows_per_agent=2))
    assert d.evict == ("old-low", "old-high", "recent")


def test_retired_and_demoted_go_first() -> None:
    flows = [
        usage("active-old", used=0),
        usage("demoted", status="suggestion_only", used=9),
        usage("retired", status="retired", used=9),
    ]
    d = make_room_for_learned_flow(flows, LearningConfig(max_workflows_per_agent=2))
    assert d.evict == ("retired", "demoted")


def test_user_flows_are_never_evicted() -> None:
    flows = [usage("u1", "user-submitted"), usage("u2", "user-submitted")]
    d = make_room_for_learned_flow(flows, LearningConfig(max_workflows_per_agent=2))
    assert not d and d.evict == () and "user-submitted flows are never evicted" in d.reason
