"""How a synthetic ledger's runs are built: each planned run becomes a full ``TaskRun`` when read.

The plans (which tools, which planted step, which call errs) come from
:mod:`soloflow_core.testing.synthetic_ledger`; here each gets its arguments (from its planted
step's true sources), outputs and model turns with token usage, deterministically per run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

from soloflow_core.models import TaskRun

if TYPE_CHECKING:
    from soloflow_core.testing.synthetic_ledger import ArgSource, PlantedWorkflow, RunLabel

__all__ = ["TASK_FIELDS", "Call", "LazyRuns", "run_id", "usage_totals"]

TASK_FIELDS = ("user_id", "order_id", "email", "date", "city", "amount")
CITIES = ("Lisbon", "Osaka", "Denver", "Nairobi", "Tallinn", "Quito", "Perth", "Zürich")
MODEL = "synthetic-model"
PRICE_IN, PRICE_OUT = 2.5e-6, 10e-6
"""USD per token, so runs carry a cost like captured runs do."""
_MASK48 = (1 << 48) - 1


Call = tuple[str, int, bool]  # tool, planted step (-1: not a step), errored


def run_id(seed: int, i: int) -> str:
    return f"syn-{seed}-{i:07d}"


class LazyRuns(Sequence[TaskRun]):
    """The ledger's TaskRuns, each built from its plan when read."""

    def __init__(
        self,
        seed: int,
        plans: list[tuple[list[Call], bool]],
        labels: list[RunLabel],
        workflows: list[PlantedWorkflow],
        with_args: bool,
        with_usage: bool,
    ) -> None:
        self._seed, self._plans, self._labels, self._workflows = seed, plans, labels, workflows
        self._with_args, self._with_usage = with_args, with_usage

    def __len__(self) -> int:
        return len(self._plans)

    @overload
    def __getitem__(self, index: int) -> TaskRun: ...

    @overload
    def __getitem__(self, index: slice) -> list[TaskRun]: ...

    def __getitem__(self, index: int | slice) -> TaskRun | list[TaskRun]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]  # IndexError and negative indices as a list has them
        calls, success = self._plans[i]
        w = self._labels[i].workflow
        wf = self._workflows[w] if w is not None else None
        return _materialise(
            self._seed,
            i,
            calls,
            success=success,
            wf=wf,
            with_args=self._with_args,
            with_usage=self._with_usage,
        )


def _run_rng(seed: int, i: int, stream: int = 0) -> random.Random:
    """Run ``i``'s own random stream (0: arguments and outputs, 1: token usage)."""
    return random.Random(((seed * 1_000_003 + i) << 1) | stream)


def _ids(base: int, start: int, n: int) -> list[str]:
    """``n`` distinct random-looking ids: a counter scrambled by an odd multiplier modulo
    2**48 (a bijection, so ids never collide)."""
    return [f"{((base + k) * 0x9E3779B97F4A7C15) & _MASK48:012x}" for k in range(start, start + n)]


def _materialise(
    seed: int,
    i: int,
    calls: list[Call],
    *,
    success: bool,
    wf: PlantedWorkflow | None,
    with_args: bool,
    with_usage: bool,
) -> TaskRun:
    """Arguments, outputs and model turns for one planned run (deterministic per run)."""
    rng = _run_rng(seed, i)
    rnd = rng.random
    base = (seed * (1 << 32) + i * 4096) & _MASK48
    fields = wf.task_fields if wf else tuple(rng.sample(TASK_FIELDS, 2))
    values = _task_values(rnd, fields, _ids(base, 0, len(fields))) if with_args else {}
    intent = wf.intent if wf else "Please help with my account"
    task = intent + ": " + "; ".join(f"{k} {v}" for k, v in values.items())
    outputs: dict[int, Any] = {}
    queries = list(values.values()) or ["help"]
    tool_calls: list[dict[str, Any]] = []
    next_id = len(fields)
    for tool, step, error in calls:
        record: dict[str, Any] = {"name": tool, "error": error}
        if with_args:
            if step >= 0 and wf is not None:
                args = {name: _resolve(src, values, outputs) for name, src in wf.steps[step].args}
            else:
                args = {"query": queries[int(rnd() * len(queries))]}
            if error:
                output: Any = f"Error: {tool} failed"
            else:
                a, b, c = _ids(base, next_id, 3)
                next_id += 3
                output = {
                    "id": tool[:3] + "_" + a,
                    "status": "ok",
                    "data": {"ref": "ref_" + b, "amount": 1 + int(rnd() * 999)},
                    "items": [{"id": "it_" + c}],
                }
                if step >= 0:
                    outputs[step] = output
            record["args"] = args
            record["output"] = output
        tool_calls.append(record)
    body: dict[str, Any] = {
        "run_id": run_id(seed, i),
        "task": task,
        "success": success,
        "tool_calls": tool_calls,
    }
    if with_usage:
        turns = _turns(seed, i, len(calls))
        body["model_calls"] = [
            {
                "model": MODEL,
                "input_tokens": inp,
                "output_tokens": out,
                "total_tokens": inp + out,
                "tool_calls_requested": 1 if t < len(calls) else 0,
            }
            for t, (inp, out) in enumerate(turns)
        ]
        body["tokens"], body["cost"] = _totals(turns)
    # One validation of the whole nested run is the fast way to build it.
    return TaskRun.model_validate(body)


def _task_values(rnd: Callable[[], float], fields: Sequence[str], ids: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f, uid in zip(fields, ids, strict=True):
        if f == "user_id":
            values[f] = "user_" + uid
        elif f == "order_id":
            values[f] = "ORD-" + uid.upper()
        elif f == "email":
            values[f] = f"m{uid}@example.com"
        elif f == "date":
            values[f] = f"2024-{1 + int(rnd() * 12):02d}-{1 + int(rnd() * 28):02d}"
        elif f == "city":
            values[f] = CITIES[int(rnd() * len(CITIES))]
        else:
            values[f] = 20 + int(rnd() * 4980)
    return values


def _turns(seed: int, i: int, n_calls: int) -> list[tuple[int, int]]:
    """(input, output) tokens of each model turn: one per tool call, then the final answer;
    the context grows by ~220 tokens a turn. Its own random stream, so the run's totals are
    known without building the run."""
    rnd = _run_rng(seed, i, 1).random
    return [
        (
            900 + 220 * t + int(rnd() * 200),
            25 + int(rnd() * 65) if t < n_calls else 60 + int(rnd() * 190),
        )
        for t in range(n_calls + 1)
    ]


def _totals(turns: list[tuple[int, int]]) -> tuple[int, float]:
    tokens = sum(a + b for a, b in turns)
    return tokens, round(sum(a * PRICE_IN + b * PRICE_OUT for a, b in turns), 6)


def usage_totals(seed: int, i: int, n_calls: int) -> tuple[int, float]:
    return _totals(_turns(seed, i, n_calls))


def _resolve(src: ArgSource, values: dict[str, Any], outputs: dict[int, Any]) -> Any:
    if src.kind == "constant":
        return src.value
    if src.kind == "task":
        return values.get(src.field or "")
    out = outputs.get(src.step if src.step is not None else -1)
    for part in (src.path or "").replace("[0]", ".0").split("."):
        if isinstance(out, dict):
            out = out.get(part)
        elif isinstance(out, list) and part.isdigit() and out:
            out = out[int(part)]
        else:
            return None
    return out
