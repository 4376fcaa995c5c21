"""Tools, flows and a fork server for the flow-runtime process tests
(``test_runtime_crash.py``, ``test_runtime_cli.py``).

Subprocesses import this module by name (``--tools flowrun_fixtures:TOOLS``), so the tests
put this directory on ``PYTHONPATH``.

The side-effecting tool, :func:`fx_step`, writes to the file named by ``$FLOWRUN_LOG``
(flushed and fsynced, so a SIGKILL loses nothing written):

- ``call <key>`` on every call;
- ``start <key>`` before its side effect, ``done <key> <result>`` after it.

It is idempotent by key the way a real API is (e.g. Stripe's ``Idempotency-Key``
header): a call with a key whose ``done`` is already recorded returns the recorded result
and makes no new side effect. A call whose earlier attempt died between ``start`` and
``done`` does the side effect (that request never completed on the server's side). So a
step called again writes a second ``call`` line: the tests read "called again" from
``call``/``start`` lines and "side effect duplicated" from ``done`` lines.

``$FLOWRUN_GATE``, when set, names a file each side effect waits for (up to 120 s) before it
finishes: a test holds a run in its first step for as long as it needs, whatever the machine's
speed.

``$FLOWRUN_SLEEP`` is how long a side effect takes: ``"0.3"``, or ``"0.02,0.05"`` for a
duration drawn from that range by a generator seeded with ``$FLOWRUN_SEED`` and the step's
tag (the same for every run of a trial seed, whatever the run id).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

LOG_ENV = "FLOWRUN_LOG"
SLEEP_ENV = "FLOWRUN_SLEEP"
SEED_ENV = "FLOWRUN_SEED"
GATE_ENV = "FLOWRUN_GATE"

_lock = threading.Lock()


def _append(line: str) -> None:
    """Append one line to the side-effect log, durably (parallel steps share the file)."""
    with _lock, open(os.environ[LOG_ENV], "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _recorded(key: str) -> str | None:
    path = Path(os.environ[LOG_ENV])
    if not path.exists():
        return None
    prefix = f"done {key} "
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    return None


def _sleep(tag: str) -> None:
    spec = os.environ.get(SLEEP_ENV, "0")
    lo, _, hi = spec.partition(",")
    seconds = (
        float(lo)
        if not hi
        else random.Random(f"{os.environ.get(SEED_ENV, '0')}:{tag}").uniform(float(lo), float(hi))
    )
    time.sleep(seconds)


def fx_step(tag: str, parts: list[str] | None = None, idempotency_key: str = "") -> str:
    """A side-effecting step: its result is a digest of its tag and its inputs' results, so
    a flow's output depends on every step's output (and not on the run id)."""
    if not idempotency_key:
        raise ValueError("fx_step needs the runtime's idempotency key")
    _append(f"call {idempotency_key}")
    with _lock:
        previous = _recorded(idempotency_key)
    if previous is not None:
        return previous  # the idempotent replay: no new side effect
    _append(f"start {idempotency_key}")
    _sleep(tag)
    gate = os.environ.get(GATE_ENV)
    if gate:
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    result = step_result(tag, parts)
    _append(f"done {idempotency_key} {result}")
    return result


def step_result(tag: str, parts: list[str] | None) -> str:
    return tag + ":" + hashlib.sha256(json.dumps([tag, parts or []]).encode()).hexdigest()[:10]


def fx_read(tag: str) -> str:
    """A read-only step: no side effect, nothing logged."""
    return f"read:{tag}"


TOOLS = [fx_step, fx_read]


def _step(sid: str, deps: list[str], *, tool: str = "fx_step", **extra: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {"tag": sid}
    if tool == "fx_step":
        inputs["parts"] = [f"{{{{{d}}}}}" for d in deps] or ["{{_trigger.seed}}"]
    return {
        "id": sid,
        "skill_key": tool,
        "depends_on": deps,
        "input_map": inputs,
        "retry_max": 0,
        **extra,
    }


def _flow(name: str, steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "steps": steps,
        "input_schema": {
            "type": "object",
            "properties": {"seed": {"type": "string"}},
            "required": ["seed"],
        },
        **extra,
    }


CRASH_DAG = {
    "a": [],
    "b": ["a"],
    "c": ["a"],
    "d": ["a"],
    "e": ["b", "c"],
    "f": ["d"],
    "g": ["e", "f"],
    "h": ["g"],
    "i": ["g"],
    "j": ["h", "i"],
}
"""The 10-step flow of the crash test: three parallel branches after ``a``, two fan-ins
(``e``, ``g``), a second parallel pair (``h``, ``i``) and a last fan-in (``j``)."""


def crash_flow_output(seed: str) -> str:
    """What a run of :data:`CRASH_FLOW` returns, computed without running it."""
    out: dict[str, str] = {}
    for sid, deps in CRASH_DAG.items():  # in dependency order
        out[sid] = step_result(sid, [out[d] for d in deps] or [seed])
    return out["j"]


CRASH_FLOW = _flow("crash10", [_step(s, deps) for s, deps in CRASH_DAG.items()])

SLOW_STEPS = [f"s{k}" for k in range(1, 9)]
SLOW_FLOW = _flow("slow8", [_step(s, SLOW_STEPS[k - 1 : k]) for k, s in enumerate(SLOW_STEPS)])
"""A chain of eight side-effecting steps (run with ``FLOWRUN_SLEEP=0.3``)."""

APPROVAL_FLOW = _flow(
    "refund",
    [
        _step("look", [], tool="fx_read", side_effects=False),
        _step("charge", ["look"]),
        _step("notify", ["charge"]),
    ],
    requires_approval=True,
)
"""A read-only first step, then two side-effecting ones behind the approval gate."""


def log_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# ---------------------------------------------------------------------- fork server
#
# The crash test starts a fresh process for every run and every resume, dozens of times.
# A Python interpreter needs ~1 s of CPU to import LangGraph and SQLAlchemy, so the test
# starts this module once (``python -m flowrun_fixtures serve``) and it forks a child per
# request: a real process with its own pid, its own database connections and nothing of
# another run's state (the server itself opens nothing), which the test SIGKILLs.
#
# Requests, one JSON object per line on stdin:
#   {"op": "run", "db": URL, "flow": NAME, "inputs": {...}, "out": FILE, "env": {...},
#    "pause_after_start": bool}        -> {"pid": PID}
#   {"op": "resume", "db": URL, "run_id": ID, "out": FILE, "env": {...}} -> {"pid": PID}
#   {"op": "wait", "pid": PID}         -> {"pid": PID, "exit": CODE or null, "signal": SIG or null}
# A child's stdout and stderr go to FILE: the run id first (``run``), then the result as
# one JSON line.


def _child(cmd: dict[str, Any]) -> int:
    out = os.open(cmd["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.environ.update(cmd.get("env") or {})
    from soloflow_core.store import Store
    from soloflow_langgraph.runtime.flow_runtime import FlowRuntime

    store = Store.open(cmd["db"])
    runtime = FlowRuntime(store, tools=TOOLS)

    def started(run_id: str) -> None:
        print(run_id, flush=True)
        if cmd.get("pause_after_start"):
            time.sleep(60)  # killed here: before the run's first checkpoint

    if cmd["op"] == "run":
        result = runtime.run(cmd["flow"], cmd["inputs"], on_started=started)
    else:
        result = runtime.resume(cmd["run_id"], force=True)
    print(
        json.dumps({"run_id": result.run_id, "status": result.status, "output": result.output}),
        flush=True,
    )
    store.close()
    return 0 if result.status == "completed" else 1


def serve() -> None:
    import soloflow_core.store  # noqa: F401  (the imports every child needs, paid once)
    import soloflow_langgraph.runtime.flow_runtime  # noqa: F401

    # What was imported stays out of the children's collections: otherwise a child's first
    # full collection walks (and copies, page by page) the whole inherited heap, a pause of
    # 100-400 ms at a point that depends on allocation counts, which skews the kill times.
    gc.freeze()

    def reply(value: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "wait":
            _, status = os.waitpid(cmd["pid"], 0)
            reply(
                {
                    "pid": cmd["pid"],
                    "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                }
            )
            continue
        pid = os.fork()
        if pid == 0:  # the child never returns into the server's loop
            code = 2
            try:
                code = _child(cmd)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        reply({"pid": pid})


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        raise SystemExit("usage: python -m flowrun_fixtures serve")
    serve()


# ---------------------------------------------------------------------- test helpers


def replay_history(run_id: str, history: list[Any]) -> tuple[str | None, dict[str, str]]:
    """Replay a run's recorded transitions through the state machines; the run's last state
    and each step's. Every transition must start where the previous one of the same run or
    step ended, and be one the machine allows (a step's record starts as ``pending``).

    Raises:
        AssertionError | InvalidTransitionError: a gap or an illegal move.
    """
    from soloflow_core.flow.fsm import check_run_transition, check_step_transition

    run_state: str | None = None
    steps: dict[str, str] = {}
    for m in history:
        if m.step_key is None:
            assert m.from_state == run_state, (
                f"run moves from {m.from_state!r} but was {run_state!r}"
            )
            check_run_transition(run_id, m.from_state, m.to_state)
            run_state = m.to_state
            continue
        current = steps.get(m.step_key)
        assert m.from_state == current, (
            f"step {m.step_key!r} moves from {m.from_state!r} but was {current!r}"
        )
        if current is None:
            assert m.to_state == "pending", (
                f"step {m.step_key!r} is first recorded as {m.to_state!r}"
            )
        else:
            check_step_transition(run_id, m.step_key, current, m.to_state)
        steps[m.step_key] = m.to_state
    return run_state, steps


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a test's subprocess: this module importable, plus ``extra``."""
    here = str(Path(__file__).resolve().parent)
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": here if not path else here + os.pathsep + path,
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
        **extra,
    }


def soloflow_argv(*args: str) -> list[str]:
    """The ``soloflow`` console script of this interpreter's environment, with ``args``."""
    script = Path(sys.executable).with_name("soloflow")
    if script.exists():
        return [str(script), *args]
    return [
        sys.executable,
        "-c",
        "import sys; from soloflow_langgraph.cli import main; main(sys.argv[1:])",
        *args,
    ]
