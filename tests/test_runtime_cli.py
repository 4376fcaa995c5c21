"""Flow runs driven from several processes through the CLI, on a real SQLite file: cancel
from another process, approval across processes, isolation between users.

Each ``soloflow`` call is a real subprocess; the tools (``flowrun_fixtures:TOOLS``) write
their side effects to a log file (see ``flowrun_fixtures``).
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from flowrun_fixtures import (
    APPROVAL_FLOW,
    GATE_ENV,
    LOG_ENV,
    SLEEP_ENV,
    SLOW_FLOW,
    SLOW_STEPS,
    TOOLS,
    log_lines,
    replay_history,
    soloflow_argv,
    subprocess_env,
)

from soloflow_core.models import FlowDefinition
from soloflow_core.store import Store
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

NS = {"user_id": "default", "agent_id": "default"}
TOOLS_ARGS = ("--tools", "flowrun_fixtures:TOOLS")
INPUT = ("--input", '{"seed": "s"}')


@dataclass
class Cli:
    """``soloflow --db <the test's store> ...`` in subprocesses."""

    url: str
    log: Path
    env: dict[str, str]
    store: Store

    def argv(self, *args: str, user: str | None = None) -> list[str]:
        head = ["--db", self.url] + (["--user", user] if user else [])
        return soloflow_argv(*head, *args)

    def __call__(self, *args: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, user=user), capture_output=True, text=True, env=self.env, timeout=120
        )

    def popen(
        self, *args: str, step_sleep: float | None = None, gate: Path | None = None
    ) -> subprocess.Popen[str]:
        env = self.env if step_sleep is None else {**self.env, SLEEP_ENV: str(step_sleep)}
        if gate is not None:
            env = {**env, GATE_ENV: str(gate)}
        return subprocess.Popen(
            self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )

    def effects(self, run_id: str, kind: str = "start") -> list[str]:
        """The step ids of ``run_id`` with a ``kind`` line in the side-effect log, in order."""
        return [
            ln.split()[1].split(":", 1)[1]
            for ln in log_lines(self.log)
            if ln.startswith(kind + " ") and ln.split()[1].startswith(run_id + ":")
        ]

    def status(self, run_id: str) -> dict[str, Any]:
        done = self("flows", "status", run_id, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    log = tmp_path / "effects.log"
    monkeypatch.setenv(LOG_ENV, str(log))  # for runs made in this process
    store = Store.open(url)
    try:
        yield Cli(url, log, subprocess_env(**{LOG_ENV: str(log), SLEEP_ENV: "0.3"}), store)
    finally:
        store.close()


def read_line(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"no line from {proc.args} in {timeout}s")
    return proc.stdout.readline().strip()


def wait_for(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_cancel_from_another_process_stops_the_run_before_its_next_step(cli, tmp_path):
    cli.store.register_flow(FlowDefinition.model_validate(SLOW_FLOW), source="user", **NS)
    # The first step's side effect waits for a gate file, opened once the cancel is recorded:
    # the run is in flight whatever the cancelling command's start-up costs.
    gate = tmp_path / "gate"
    proc = cli.popen("flows", "run", "slow8", *INPUT, *TOOLS_ARGS, step_sleep=0.05, gate=gate)
    try:
        run_id = read_line(proc)
        assert run_id.startswith("frun_")
        wait_for(lambda: cli.effects(run_id), "the first step to start")
        cancel = cli("flows", "cancel", run_id)
        assert cancel.returncode == 0, cancel.stderr
        assert f"{run_id}: cancel requested" in cancel.stdout
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, out
    assert out.startswith("cancelled"), out

    status = cli.status(run_id)
    assert status["state"] == "cancelled" and status["outcome"] == "cancelled", status
    states = {s["step"]: s["state"] for s in status["steps"]}
    started = cli.effects(run_id)
    # The steps that started finished (the one in flight when the cancel came included) ...
    assert started == SLOW_STEPS[: len(started)] and cli.effects(run_id, "done") == started
    assert all(states[s] == "completed" for s in started), states
    # ... and every later one never started and is recorded skipped.
    later = SLOW_STEPS[len(started) :]
    assert later and SLOW_STEPS[-1] in later, f"the run ended before the cancel: {states}"
    assert {s: states.get(s) for s in later} == dict.fromkeys(later, "skipped"), states
    run_state, step_states = replay_history(run_id, cli.store.flow_run_history(run_id, **NS))
    assert run_state == "cancelled" and step_states == states


def test_cancel_of_a_run_whose_process_was_killed_ends_it_at_once(cli):
    cli.store.register_flow(FlowDefinition.model_validate(SLOW_FLOW), source="user", **NS)
    proc = cli.popen("flows", "run", "slow8", *INPUT, *TOOLS_ARGS)
    try:
        run_id = read_line(proc)
        wait_for(lambda: cli.effects(run_id), "the first step to start")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    before = cli.store.get_flow_run(run_id, **NS)
    assert before.state == "running" and [s.state for s in before.steps] == ["running"]

    cancel = cli("flows", "cancel", run_id)
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.strip() == f"{run_id}: cancelled"
    rec = cli.store.get_flow_run(run_id, **NS)
    assert rec.state == "cancelled" and rec.ended_at is not None
    # The step in flight and those never started are all recorded skipped.
    assert {s.step_key: s.state for s in rec.steps} == {k: "skipped" for k in SLOW_STEPS}
    run_state, _ = replay_history(run_id, cli.store.flow_run_history(run_id, **NS))
    assert run_state == "cancelled"
    # It is over: nothing can resume it.
    resume = cli("flows", "resume", run_id, *TOOLS_ARGS)
    assert resume.returncode == 1 and "has ended (cancelled)" in resume.stderr


def test_approval_across_processes(cli, tmp_path):
    flow_file = tmp_path / "refund.yaml"
    flow_file.write_text(yaml.safe_dump(APPROVAL_FLOW, sort_keys=False), encoding="utf-8")
    submit = cli("flows", "submit", str(flow_file), *TOOLS_ARGS)
    assert submit.returncode == 0 and "registered flow refund version 1" in submit.stdout, (
        submit.stderr
    )

    # Two runs, each in its own process: both stop at the gate, exit 0, no side effect.
    runs = [cli.popen("flows", "run", "refund", *INPUT, *TOOLS_ARGS) for _ in range(2)]
    ids = []
    for proc in runs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        ids.append(out.splitlines()[0])
        assert "waiting for approval" in out and f"soloflow flows runs approve {ids[-1]}" in out
    yes, no = ids
    assert log_lines(cli.log) == []

    waiting = cli("flows", "runs", "list", "--waiting", "--json")
    assert waiting.returncode == 0, waiting.stderr
    assert sorted(r["run_id"] for r in json.loads(waiting.stdout)) == sorted(ids)

    approve = cli("flows", "runs", "approve", yes, "--comment", "ok", *TOOLS_ARGS)
    assert approve.returncode == 0, approve.stderr
    assert "completed" in approve.stdout
    assert cli.effects(yes, "done") == ["charge", "notify"]

    # `flows runs reject` takes no --tools (see test_reject_needs_no_tools); the rejection itself,
    # from this process, of a run that another process started:
    rejected = FlowRuntime(cli.store, tools=TOOLS).reject(no, comment="no")
    assert rejected.status == "cancelled" and rejected.outcome == "rejected"
    assert cli.effects(no, "call") == []
    rec = cli.store.get_flow_run(no, **NS)
    assert rec.state == "cancelled" and rec.outcome == "rejected", rec
    states = {s.step_key: s.state for s in rec.steps}
    assert states == {
        "look": "completed",
        "__approval__": "failed",
        "charge": "skipped",
        "notify": "skipped",
    }
    assert cli.store.get_flow_run(yes, **NS).state == "completed"
    assert not any(cli.store.get_flow_run(r, **NS).waiting_for_approval for r in ids)

    # The gate's transitions, from `flows history --json` (the approved run) and the store.
    hist = cli("flows", "history", yes, "--json")
    assert hist.returncode == 0, hist.stderr
    gate = [
        (m["from"], m["to"], m["detail"])
        for m in json.loads(hist.stdout)
        if m["step"] == "__approval__"
    ]
    assert [g[:2] for g in gate] == [
        (None, "pending"),
        ("pending", "ready"),
        ("ready", "running"),
        ("running", "completed"),
    ], gate
    moves = cli.store.flow_run_history(no, **NS)
    gate = [(m.from_state, m.to_state, m.detail) for m in moves if m.step_key == "__approval__"]
    assert gate[-1] == ("running", "failed", "rejected: no"), gate
    for run_id, end in ((yes, "completed"), (no, "cancelled")):
        run_state, _ = replay_history(run_id, cli.store.flow_run_history(run_id, **NS))
        assert run_state == end


def test_another_users_run_is_not_found(cli):
    cli.store.register_flow(FlowDefinition.model_validate(APPROVAL_FLOW), source="user", **NS)
    run_id = (
        FlowRuntime(cli.store, tools=TOOLS).run("refund", {"seed": "s"}).run_id
    )  # waits at the gate

    checks = {
        "status": ("flows", "status", run_id, "--json"),
        "history": ("flows", "history", run_id),
        "cancel": ("flows", "cancel", run_id),
    }
    procs = {
        k: subprocess.Popen(
            cli.argv(*args, user="other"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env,
        )
        for k, args in checks.items()
    }
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (name, out, err)
        assert out == "", (name, out)
        assert f"error: no flow run {run_id!r} for user 'other'" in err, (name, err)
    rec = cli.store.get_flow_run(run_id, **NS)
    assert rec.waiting_for_approval and not rec.cancel_requested  # untouched
    assert cli.status(run_id)["state"] == "running"  # its owner still sees it


def test_reject_needs_no_tools(cli):
    cli.store.register_flow(FlowDefinition.model_validate(APPROVAL_FLOW), source="user", **NS)
    run_id = (
        FlowRuntime(cli.store, tools=TOOLS).run("refund", {"seed": "s"}).run_id
    )  # waits at the gate
    reject = cli("flows", "runs", "reject", run_id, "--comment", "no")
    assert reject.returncode == 0, reject.stderr
    assert f"rejected {run_id}: cancelled" in reject.stdout
    rec = cli.store.get_flow_run(run_id, **NS)
    assert rec.state == "cancelled" and rec.outcome == "rejected"
    assert log_lines(cli.log) == []


PARALLEL_FLOW = {
    "name": "fanout",
    "input_schema": {
        "type": "object",
        "properties": {"seed": {"type": "string"}},
        "required": ["seed"],
    },
    "steps": [
        {
            "id": "a",
            "skill_key": "fx_step",
            "depends_on": [],
            "input_map": {"tag": "a", "parts": ["{{_trigger.seed}}"]},
        },
        *(
            {
                "id": s,
                "skill_key": "fx_step",
                "depends_on": ["a"],
                "input_map": {"tag": s, "parts": ["{{a}}"]},
            }
            for s in ("b", "c", "d")
        ),
        {
            "id": "e",
            "skill_key": "fx_step",
            "depends_on": ["b", "c", "d"],
            "input_map": {"tag": "e", "parts": ["{{b}}", "{{c}}", "{{d}}"]},
        },
    ],
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_during_a_parallel_layer_stops_at_once_and_the_run_resumes(cli, sig):
    cli.store.register_flow(FlowDefinition.model_validate(PARALLEL_FLOW), source="user", **NS)
    proc = cli.popen("flows", "run", "fanout", *INPUT, *TOOLS_ARGS, step_sleep=4.0)
    try:
        run_id = read_line(proc)
        wait_for(lambda: len(cli.effects(run_id)) >= 2, "the parallel layer to start", timeout=60)
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    # Back at once: the parallel calls (4 s each) are abandoned, not waited for.
    assert took < 3.0, took
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "cannot schedule new futures" not in err, err
    assert f"flow run {run_id} stopped" in err and f"soloflow flows resume {run_id}" in err, err
    assert cli.effects(run_id, "done")[:1] == ["a"] and "e" not in cli.effects(run_id)
    # Recorded as interrupted, which `flows status` and `flows runs list` show.
    shown = cli.status(run_id)
    assert (shown["state"], shown["resumable"]) == ("interrupted", True), shown
    moves = [m for m in cli.store.flow_run_history(run_id, **NS) if m.step_key is None]
    assert (moves[-1].from_state, moves[-1].to_state) == ("running", "interrupted")
    assert "stopped by its caller" in (moves[-1].detail or ""), moves[-1]
    listed = json.loads(cli("flows", "runs", "list", "--state", "interrupted", "--json").stdout)
    assert [(r["run_id"], r["resumable"]) for r in listed] == [(run_id, True)]

    resumed = subprocess.run(
        cli.argv("flows", "resume", run_id, *TOOLS_ARGS),
        capture_output=True,
        text=True,
        env={**cli.env, SLEEP_ENV: "0"},
        timeout=120,
    )
    assert resumed.returncode == 0 and "completed" in resumed.stdout, resumed.stderr
    assert cli.status(run_id)["state"] == "completed"
    # Every step's side effect happened once: the interrupted calls' results were recorded
    # (or replayed by their idempotency key), none was done twice.
    done = cli.effects(run_id, "done")
    assert sorted(done) == ["a", "b", "c", "d", "e"], done
