"""Ctrl-C and SIGTERM at random points of flow runs with parallel layers, in real
``soloflow`` subprocesses: the command exits 130 at once, the run is recorded
``interrupted`` (``flows status`` and ``flows runs list`` show it), and ``flows resume``
finishes it with every step's side effect done exactly once — on SQLite and PostgreSQL.
A run whose process was SIGKILLed shows as resumable.

The tools (``flowrun_fixtures:TOOLS``) log their side effects (see ``flowrun_fixtures``).
"""

from __future__ import annotations

import json
import random
import selectors
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowrun_fixtures import (
    CRASH_DAG,
    CRASH_FLOW,
    LOG_ENV,
    SEED_ENV,
    SLEEP_ENV,
    crash_flow_output,
    log_lines,
    replay_history,
    soloflow_argv,
    subprocess_env,
)

from soloflow_core.models import FlowDefinition
from soloflow_core.store import Store

NS = {"user_id": "default", "agent_id": "default"}
TOOLS_ARGS = ("--tools", "flowrun_fixtures:TOOLS")
STEP_SLEEP = "0.05,0.5"
"""How long each side effect takes (drawn per step): the longest call in flight is 0.5 s."""
EXIT_WITHIN = 3.0
"""Per trial, on this shared 2-core machine; the median must be under 1 s."""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = (
        f"sqlite:///{tmp_path / 'interrupt.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    store = Store.open(url)
    store.register_flow(FlowDefinition.model_validate(CRASH_FLOW), source="user", **NS)
    try:
        yield url, store
    finally:
        store.close()


def _env(log: Path, seed: str, sleep: str) -> dict[str, str]:
    return subprocess_env(**{LOG_ENV: str(log), SLEEP_ENV: sleep, SEED_ENV: seed})


def _read_line(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"no line from {proc.args} in {timeout}s")
    return proc.stdout.readline().strip()


def _done(log: Path, run_id: str) -> list[str]:
    """The step ids whose side effect was done for ``run_id``, one per ``done`` line."""
    return [
        ln.split()[1].split(":", 1)[1]
        for ln in log_lines(log)
        if ln.startswith("done ") and ln.split()[1].startswith(run_id + ":")
    ]


def _wait_for_new_start(log: Path, run_id: str, *, seen: int, timeout: float = 60.0) -> None:
    """Wait until a step of ``run_id`` is called (``call`` logged) after the first ``seen``
    lines: an interrupted run always has a step left to call."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(ln.startswith(f"call {run_id}:") for ln in log_lines(log)[seen:]):
            return
        time.sleep(0.02)
    raise AssertionError(f"no step of {run_id} started within {timeout}s")


def _ended_as_signalled(store: Store, run_id: str, err: str, log: Path) -> bool:
    """Whether the run had just completed when the signal came (a race on a loaded machine):
    then the command says so, not "recorded as interrupted", and every step was done once."""
    if store.get_flow_run(run_id, **NS).state != "completed":
        return False
    assert f"flow run {run_id} had already ended (completed)" in err, err
    assert "recorded as interrupted" not in err, err
    assert sorted(_done(log, run_id)) == sorted(CRASH_DAG)
    return True


def _interrupt(
    proc: subprocess.Popen[str], sig: signal.Signals, after: float
) -> tuple[float | None, str]:
    """Send ``sig`` ``after`` seconds from now; the seconds until the process ended (None
    when it had ended before the signal) and its stderr."""
    time.sleep(after)
    if proc.poll() is not None:
        return None, proc.communicate()[1]
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return time.monotonic() - sent, err


def test_ctrl_c_at_random_points_then_resume_finishes_every_run_once(
    store_url: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = store_url
    rng = random.Random(25)
    log = tmp_path / "effects.log"
    exits: list[float] = []
    for trial in range(6):
        seed = f"t{trial}"
        sig = (signal.SIGINT, signal.SIGTERM)[trial % 2]
        proc = subprocess.Popen(
            soloflow_argv(
                "--db",
                url,
                "flows",
                "run",
                "crash10",
                "--input",
                json.dumps({"seed": seed}),
                *TOOLS_ARGS,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(log, seed, STEP_SLEEP),
        )
        run_id = _read_line(proc)
        took, err = _interrupt(proc, sig, rng.uniform(0.0, 1.5))
        if took is None:  # it finished first: nothing to interrupt
            assert proc.returncode == 0, err
            continue
        exits.append(took)
        assert proc.returncode == 130, (trial, err)
        assert took < EXIT_WITHIN, (trial, took)
        assert "Traceback" not in err, err
        if _ended_as_signalled(store, run_id, err, log):
            continue
        assert f"soloflow flows resume {run_id}" in err and "recorded as interrupted" in err, err
        assert store.get_flow_run(run_id, **NS).state == "interrupted"

        # A second interrupt, of the resume this time, in every other trial.
        if trial % 3 == 0:
            again = subprocess.Popen(
                soloflow_argv("--db", url, "flows", "resume", run_id, *TOOLS_ARGS),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(log, seed, STEP_SLEEP),
            )
            # Signal once the resume is at work (a step of the run started), not while the
            # command is still starting up: a loaded machine can take seconds to import.
            _wait_for_new_start(log, run_id, seen=len(log_lines(log)))
            took2, err2 = _interrupt(again, signal.SIGINT, rng.uniform(0.0, 0.5))
            if took2 is not None:
                exits.append(took2)
                assert again.returncode == 130 and "Traceback" not in err2, err2
                if _ended_as_signalled(store, run_id, err2, log):
                    continue
                assert store.get_flow_run(run_id, **NS).state == "interrupted"

        resumed = subprocess.run(
            soloflow_argv("--db", url, "flows", "resume", run_id, *TOOLS_ARGS),
            capture_output=True,
            text=True,
            env=_env(log, seed, "0"),
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert crash_flow_output(seed) in resumed.stdout, resumed.stdout
        rec = store.get_flow_run(run_id, **NS)
        assert rec.state == "completed"
        # Every step's side effect was done once: none lost, none twice.
        assert sorted(_done(log, run_id)) == sorted(CRASH_DAG), (trial, _done(log, run_id))
        run_state, _ = replay_history(run_id, store.flow_run_history(run_id, **NS))
        assert run_state == "completed"
    assert len(exits) >= 3, exits
    assert statistics.median(exits) < 1.0, exits
    print(
        f"\nexit after the signal: median {statistics.median(exits):.3f} s, max {max(exits):.3f} s"
    )


def test_a_sigkilled_run_shows_as_resumable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    log = tmp_path / "effects.log"
    with Store.open(url) as store:
        store.register_flow(FlowDefinition.model_validate(CRASH_FLOW), source="user", **NS)
        proc = subprocess.Popen(
            soloflow_argv(
                "--db", url, "flows", "run", "crash10", "--input", '{"seed": "k"}', *TOOLS_ARGS
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(log, "k", "0.5"),
        )
        run_id = _read_line(proc)
        time.sleep(0.8)
        proc.kill()
        proc.communicate(timeout=60)
        assert store.get_flow_run(run_id, **NS).state == "running"  # nobody could record it

        def sf(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                soloflow_argv("--db", url, *args),
                capture_output=True,
                text=True,
                env=_env(log, "k", "0"),
                timeout=120,
            )

        shown = json.loads(sf("flows", "status", run_id, "--json").stdout)
        assert (shown["state"], shown["resumable"]) == ("running", True)
        assert (
            "is gone); resume it with: soloflow flows resume"
            in sf("flows", "status", run_id).stdout
        )
        listed = json.loads(sf("flows", "runs", "list", "--json").stdout)
        assert [(r["run_id"], r["resumable"]) for r in listed] == [(run_id, True)]
        assert "running (process gone)" in sf("flows", "runs", "list").stdout
        resumed = sf("flows", "resume", run_id, *TOOLS_ARGS)
        assert resumed.returncode == 0 and crash_flow_output("k") in resumed.stdout, resumed.stderr
        assert sorted(_done(log, run_id)) == sorted(CRASH_DAG)


def _chain(name: str) -> FlowDefinition:
    return FlowDefinition.model_validate(
        {
            "name": name,
            "steps": [
                {"id": "a", "skill_key": "first"},
                {"id": "b", "skill_key": "second", "depends_on": ["a"]},
            ],
        }
    )


def test_an_interrupted_invocation_in_process_is_recorded_then_resumed_or_cancelled(
    db_url: str,
) -> None:
    """A ``KeyboardInterrupt`` out of ``FlowRuntime.run`` (here raised by the second step's
    tool, as Ctrl-C would be in the caller) leaves the run ``interrupted``; ``resume`` in the
    same process carries it on without calling the completed step again; ``cancel`` ends
    another such run at once."""
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    calls: list[str] = []
    interrupt = {"on": True}

    def first() -> str:
        calls.append("first")
        return "one"

    def second() -> str:
        calls.append("second")
        if interrupt["on"]:
            raise KeyboardInterrupt
        return "two"

    with Store.open(db_url) as store, FlowRuntime(store, tools=[first, second], **NS) as rt:
        seen: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            rt.run(_chain("chain"), {}, on_started=seen.append)
        rec = rt.status(seen[0])
        assert rec.state == "interrupted"
        last = [m for m in rt.history(seen[0]) if m.step_key is None][-1]
        assert (last.from_state, last.to_state) == ("running", "interrupted")
        assert rt.record_interrupted(seen[0]) is False  # once is enough

        interrupt["on"] = False
        result = rt.resume(seen[0])
        assert (result.status, result.output) == ("completed", "two")
        assert calls == ["first", "second", "second"]  # `first` was not called again
        run_state, _ = replay_history(seen[0], rt.history(seen[0]))
        assert run_state == "completed"

        interrupt["on"] = True
        with pytest.raises(KeyboardInterrupt):
            rt.run(_chain("chain"), {}, on_started=seen.append)
        assert rt.status(seen[1]).state == "interrupted"
        assert rt.cancel(seen[1]).state == "cancelled"


def test_a_run_interrupted_after_its_approval_resumes_without_asking_again(db_url: str) -> None:
    """Approved, then interrupted in a step after the first side effect: ``resume`` neither
    asks for the approval again nor repeats the side effect that was done (issue 20, point 2:
    no side effect twice)."""
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    calls: list[str] = []
    interrupt = {"on": True}

    def look() -> str:
        calls.append("look")
        return "found"

    def charge() -> str:
        calls.append("charge")
        return "charged"

    def notify() -> str:
        calls.append("notify")
        if interrupt["on"]:
            raise KeyboardInterrupt
        return "notified"

    flow = FlowDefinition.model_validate(
        {
            "name": "approve-then-interrupt",
            "requires_approval": True,
            "steps": [
                {"id": "a", "skill_key": "look", "side_effects": False},
                {"id": "b", "skill_key": "charge", "depends_on": ["a"]},
                {"id": "c", "skill_key": "notify", "depends_on": ["b"]},
            ],
        }
    )
    with Store.open(db_url) as store, FlowRuntime(store, tools=[look, charge, notify], **NS) as rt:
        first = rt.run(flow, {})
        assert first.status == "waiting", first
        assert calls == ["look"]
        assert rt.status(first.run_id).waiting_for_approval
        with pytest.raises(KeyboardInterrupt):
            rt.approve(first.run_id)
        assert calls == ["look", "charge", "notify"]
        rec = rt.status(first.run_id)
        assert rec.state == "interrupted" and not rec.waiting_for_approval

        interrupt["on"] = False
        result = rt.resume(first.run_id)
        assert (result.status, result.output) == ("completed", "notified"), result
        assert calls == ["look", "charge", "notify", "notify"]  # charged once, asked once
        gates = [t for t in rt.history(first.run_id) if t.step_key == "__approval__"]
        assert [t.to_state for t in gates].count("running") == 1, gates


_SIGNAL_AFTER_THE_END = """
import sys
from soloflow_core.models import FlowDefinition
from soloflow_core.store import Store
from soloflow_langgraph.cli._flow_runs import interruptible
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

def only() -> str:
    return "done"

flow = FlowDefinition.model_validate({"name": "one", "steps": [{"id": "a", "skill_key": "only"}]})
store = Store.open(sys.argv[1])
rt = FlowRuntime(store, tools=[only], user_id="default", agent_id="default")
result = rt.run(flow, {})
print(result.run_id, result.status, flush=True)
with interruptible(rt, lambda: result.run_id):
    raise KeyboardInterrupt  # Ctrl-C as the command was about to print the result
"""


def test_a_signal_just_after_the_run_ended_says_it_ended(db_url: str, tmp_path: Path) -> None:
    """Ctrl-C that lands after the run completed (but before the command exited) does not
    claim the run was "recorded as interrupted" nor tell the user to resume it."""
    script = tmp_path / "late_signal.py"
    script.write_text(_SIGNAL_AFTER_THE_END)
    proc = subprocess.run(
        [sys.executable, str(script), db_url],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),
    )
    assert proc.returncode == 130, proc.stderr
    run_id, status = proc.stdout.split()
    assert status == "completed"
    assert f"flow run {run_id} had already ended (completed); nothing to resume" in proc.stderr
    assert "recorded as interrupted" not in proc.stderr and "flows resume" not in proc.stderr
    with Store.open(db_url) as store:
        assert store.get_flow_run(run_id, **NS).state == "completed"
