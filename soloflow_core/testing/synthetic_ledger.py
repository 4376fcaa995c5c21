"""Seeded synthetic ledgers with planted workflows and their ground truth.

A ledger mixes two kinds of runs:

* **planted runs** execute one of ``workflows`` fixed tool sequences (length ``min_len`` to
  ``max_len``; workflow *i* is picked with weight ``1/sqrt(i+1)``) with the noise agents make:
  a stray call between two steps (probability ``noise`` per gap), a step retried after it
  errored (``retry_rate`` per step), two adjacent steps that pass no data swapped
  (``swap_rate`` per run), the run cut short by a failing call (``truncate_rate``; the agent
  reports the failure, so the run still succeeds), or a failed run (``failed_run_rate``: part
  of the workflow, then a few unrelated calls, the last one erroring; ``success=False``).
  Zero to two unrelated calls may come before and after the workflow.
* **background runs** (``1 - planted_fraction`` of the runs) call random tools drawn from a
  Zipf popularity over the vocabulary, so popular tools co-occur by chance.

Every planted step's arguments have a known source: a constant, a field of the task (its
value appears in the task text) or a path into an earlier step's JSON output
(``"id"``, ``"data.ref"``, ``"data.amount"``, ``"items[0].id"``). Each tool call is requested
by its own model turn, plus one final answer turn, with token usage, so what a flow saves
can be measured. The same arguments always give the same ledger.

Example:
    >>> ledger = generate_ledger(runs=200, workflows=3, seed=1)
    >>> len(ledger.runs), [len(w.tools) >= 3 for w in ledger.workflows]
    (200, [True, True, True])
"""

from __future__ import annotations

import gc
import random
from bisect import bisect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal, overload

from soloflow_core.models import TaskRun
from soloflow_core.store import RunSequence

__all__ = [
    "ArgSource",
    "PlantedStep",
    "PlantedWorkflow",
    "RunLabel",
    "SyntheticLedger",
    "generate_ledger",
    "matches_planted",
    "score_top_k",
]

READ_VERBS = ("get", "list", "search", "find", "check", "lookup")
WRITE_VERBS = ("create", "update", "cancel", "send", "book", "refund", "approve", "delete")
NOUNS = (
    "user",
    "order",
    "invoice",
    "flight",
    "hotel",
    "ticket",
    "payment",
    "account",
    "shipment",
    "product",
    "review",
    "email",
    "calendar",
    "contract",
    "report",
    "address",
)
TASK_FIELDS = ("user_id", "order_id", "email", "date", "city", "amount")
CONSTANTS = (("mode", "strict"), ("currency", "USD"), ("limit", 10), ("channel", "web"))
PATH_NAMES = {"id": "id", "data.ref": "ref", "data.amount": "amount", "items[0].id": "item_id"}
OUTPUT_PATHS = tuple(PATH_NAMES)
CITIES = ("Lisbon", "Osaka", "Denver", "Nairobi", "Tallinn", "Quito", "Perth", "Zürich")
MODEL = "synthetic-model"
PRICE_IN, PRICE_OUT = 2.5e-6, 10e-6
"""USD per token, so runs carry a cost like captured runs do."""
_MASK48 = (1 << 48) - 1

ArgKind = Literal["constant", "task", "upstream"]
RunKind = Literal["background", "planted", "truncated", "failed"]


@dataclass(frozen=True, slots=True)
class ArgSource:
    """Where a planted step's argument really comes from."""

    kind: ArgKind
    value: str | int | None = None
    """The constant (kind ``constant``)."""
    field: str | None = None
    """The task field (kind ``task``)."""
    step: int | None = None
    """The earlier step whose output holds the value (kind ``upstream``)."""
    path: str | None = None
    """Where in that output (kind ``upstream``), e.g. ``items[0].id``."""


@dataclass(frozen=True, slots=True)
class PlantedStep:
    """One step of a planted workflow."""

    tool: str
    args: tuple[tuple[str, ArgSource], ...]
    """Argument name and its true source, in call order."""
    read_only: bool
    """True for lookups (get/list/search/...), False for writes."""


@dataclass(frozen=True, slots=True)
class PlantedWorkflow:
    """Ground truth for one planted workflow."""

    index: int
    steps: tuple[PlantedStep, ...]
    task_fields: tuple[str, ...]
    """The task fields its steps read (their values appear in the task text)."""
    intent: str
    weight: float
    """Relative frequency among planted runs."""

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(s.tool for s in self.steps)

    @property
    def independent_pairs(self) -> tuple[int, ...]:
        """Each ``j`` where step ``j + 1`` reads nothing from step ``j`` (they may swap)."""
        return tuple(
            j
            for j in range(len(self.steps) - 1)
            if all(src.step != j for _, src in self.steps[j + 1].args)
        )


@dataclass(frozen=True, slots=True)
class RunLabel:
    """Ground truth for one run."""

    workflow: int | None
    """Index of the planted workflow, None for a background run."""
    kind: RunKind
    noise: tuple[str, ...] = ()
    """What was done to it: ``stray@j`` (after step j), ``retry@j``, ``swap@j``, ``prefix``,
    ``suffix``, ``cut@j``."""


@dataclass(slots=True)
class SyntheticLedger:
    """A generated ledger and its ground truth."""

    workflows: list[PlantedWorkflow]
    labels: list[RunLabel]
    """Per run: which workflow it plants (if any) and the noise applied."""
    sequences: list[RunSequence]
    """Each run as the store's name-and-error view (with tokens and cost unless
    ``names_only`` or ``with_usage=False``)."""
    runs: Sequence[TaskRun]
    """The full task runs, built on access (so 100k runs cost no memory until read); each
    access builds equal, fresh objects. Empty when generated with ``names_only=True``."""


Call = tuple[str, int, bool]  # tool, planted step (-1: not a step), errored


def generate_ledger(
    *,
    runs: int,
    workflows: int,
    seed: int,
    noise: float = 0.1,
    min_len: int = 3,
    max_len: int = 15,
    vocabulary: int | Sequence[str] = 80,
    planted_fraction: float = 0.6,
    retry_rate: float = 0.05,
    swap_rate: float = 0.1,
    failed_run_rate: float = 0.1,
    truncate_rate: float = 0.05,
    zipf_exponent: float = 1.0,
    with_args: bool = True,
    with_usage: bool = True,
    names_only: bool = False,
) -> SyntheticLedger:
    """A seeded ledger of ``runs`` runs with ``workflows`` planted workflows.

    ``vocabulary`` is a number of generated tool names (verb_noun) or the names themselves.
    ``names_only=True`` skips arguments, outputs and usage and fills only ``sequences``
    (fast enough for million-run benchmarks); the tool names are the same as without it.

    Raises:
        ValueError: an argument out of range, named in the message.
    """
    tools = _vocabulary(vocabulary)
    _check(runs, workflows, min_len, max_len=max_len)
    rates = {
        "noise": noise,
        "planted_fraction": planted_fraction,
        "retry_rate": retry_rate,
        "swap_rate": swap_rate,
        "failed_run_rate": failed_run_rate,
        "truncate_rate": truncate_rate,
    }
    for name, value in rates.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {value!r}")
    rng = random.Random(seed)
    planted = _plant(rng, tools, workflows, min_len=min_len, max_len=max_len)
    planner = _Planner(
        rng,
        tools,
        planted,
        zipf_exponent=zipf_exponent,
        noise=noise,
        retry_rate=retry_rate,
        swap_rate=swap_rate,
    )
    labels: list[RunLabel] = []
    plans: list[tuple[list[Call], bool]] = []
    sequences: list[RunSequence] = []
    usage = with_usage and not names_only
    with _gc_paused():
        for i in range(runs):
            if planted and rng.random() < planted_fraction:
                label, calls, success = planner.planted_run(truncate_rate, failed_run_rate)
            else:
                label, calls, success = planner.background_run()
            labels.append(label)
            tokens, cost = _usage_totals(seed, i, len(calls)) if usage else (None, None)
            sequences.append(
                RunSequence(
                    run_id=_run_id(seed, i),
                    names=tuple(c[0] for c in calls),
                    errors=tuple(c[2] for c in calls),
                    success=success,
                    cost=cost,
                    tokens=tokens,
                )
            )
            if not names_only:
                plans.append((calls, success))
    built: Sequence[TaskRun] = (
        ()
        if names_only
        else _LazyRuns(
            seed, plans, labels, workflows=planted, with_args=with_args, with_usage=with_usage
        )
    )
    return SyntheticLedger(workflows=planted, labels=labels, sequences=sequences, runs=built)


@contextmanager
def _gc_paused() -> Iterator[None]:
    # Millions of small acyclic objects: the cycle collector would spend most of the time
    # re-scanning them (measured 3x slower) and finds nothing.
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _run_id(seed: int, i: int) -> str:
    return f"syn-{seed}-{i:07d}"


def _vocabulary(vocabulary: int | Sequence[str]) -> list[str]:
    if isinstance(vocabulary, int):
        if vocabulary < 2:
            raise ValueError(f"vocabulary needs at least 2 tools, got {vocabulary}")
        names = [f"{v}_{n}" for n in NOUNS for v in READ_VERBS + WRITE_VERBS]
        random.Random(0).shuffle(names)
        out = names[:vocabulary]
        out += [f"tool_{i}" for i in range(len(out), vocabulary)]
        return out
    out = list(dict.fromkeys(vocabulary))
    if len(out) < 2 or not all(isinstance(n, str) and n for n in out):
        raise ValueError("vocabulary needs at least 2 distinct non-empty tool names")
    return out


def _check(runs: int, workflows: int, min_len: int, *, max_len: int) -> None:
    if runs < 0 or workflows < 0:
        raise ValueError(f"runs and workflows must be ≥ 0, got {runs} and {workflows}")
    if min_len < 2 or max_len < min_len:
        raise ValueError(f"need 2 ≤ min_len ≤ max_len, got {min_len} and {max_len}")


def _plant(
    rng: random.Random, tools: list[str], count: int, *, min_len: int, max_len: int
) -> list[PlantedWorkflow]:
    out: list[PlantedWorkflow] = []
    seen: set[tuple[str, ...]] = set()
    while len(out) < count:
        length = rng.randint(min_len, max_len)
        seq: list[str] = []
        for _ in range(length):
            seq.append(rng.choice([t for t in tools if not seq or t != seq[-1]]))
        if tuple(seq) in seen:
            continue
        seen.add(tuple(seq))
        fields = rng.sample(TASK_FIELDS, rng.randint(1, 3))
        steps: list[PlantedStep] = []
        for j, tool in enumerate(seq):
            args: list[tuple[str, ArgSource]] = []
            for _ in range(rng.randint(1, 3)):
                roll = rng.random()
                if j > 0 and roll < 0.55:
                    k = j - 1 if rng.random() < 0.6 else rng.randrange(j)
                    path = rng.choice(OUTPUT_PATHS)
                    name = f"{steps[k].tool.partition('_')[2] or 'step'}_{PATH_NAMES[path]}"
                    args.append((name, ArgSource("upstream", step=k, path=path)))
                elif roll < 0.85:
                    f = rng.choice(fields)
                    args.append((f, ArgSource("task", field=f)))
                else:
                    key, value = rng.choice(CONSTANTS)
                    args.append((key, ArgSource("constant", value=value)))
            args = list(dict(args).items())  # one source per argument name
            read_only = tool.split("_", 1)[0] in READ_VERBS
            steps.append(PlantedStep(tool=tool, args=tuple(args), read_only=read_only))
        verb, _, noun = seq[-1].partition("_")
        out.append(
            PlantedWorkflow(
                index=len(out),
                steps=tuple(steps),
                task_fields=tuple(fields),
                intent=f"Please {verb} the {noun or verb}",
                weight=1.0 / (len(out) + 1) ** 0.5,
            )
        )
    return out


class _Planner:
    """Decides each run's calls (tool, planted step, error) from the shared random stream."""

    def __init__(
        self,
        rng: random.Random,
        tools: list[str],
        workflows: list[PlantedWorkflow],
        zipf_exponent: float,
        noise: float,
        retry_rate: float,
        swap_rate: float,
    ) -> None:
        self.random = rng.random
        self.rng = rng
        popular = list(tools)
        rng.shuffle(popular)
        self.popular = popular
        self.cum = list(accumulate(1.0 / (r + 1) ** zipf_exponent for r in range(len(popular))))
        self.workflows = workflows
        self.wf_cum = list(accumulate(w.weight for w in workflows))
        self.noise, self.retry_rate, self.swap_rate = noise, retry_rate, swap_rate

    def _tool(self) -> str:
        """One tool drawn from the Zipf popularity."""
        return self.popular[bisect(self.cum, self.random() * self.cum[-1])]

    def background_run(self) -> tuple[RunLabel, list[Call], bool]:
        rnd = self.random
        n = 1
        while n < 12 and rnd() < 0.78:
            n += 1
        calls = [(self._tool(), -1, rnd() < 0.03) for _ in range(n)]
        return _BACKGROUND, calls, rnd() < 0.9

    def _edge(self, events: list[str], name: str) -> list[Call]:
        roll = self.random()
        n = 0 if roll < 0.5 else 1 if roll < 0.8 else 2
        if n:
            events.append(name)
        return [(self._tool(), -1, False) for _ in range(n)]

    def planted_run(self, cut_rate: float, fail_rate: float) -> tuple[RunLabel, list[Call], bool]:
        rnd, rng = self.random, self.rng
        w = min(bisect(self.wf_cum, rnd() * self.wf_cum[-1]), len(self.workflows) - 1)
        wf = self.workflows[w]
        n = len(wf.steps)
        events: list[str] = []
        order = list(range(n))
        pairs = wf.independent_pairs
        if pairs and rnd() < self.swap_rate:
            j = pairs[int(rnd() * len(pairs))]
            order[j], order[j + 1] = order[j + 1], order[j]
            events.append(f"swap@{j}")
        kind: RunKind = "planted"
        stop = n  # steps executed
        roll = rnd()
        if roll < fail_rate:
            kind, stop = "failed", rng.randint(1, n - 1)
        elif roll < fail_rate + cut_rate:
            kind, stop = "truncated", rng.randint(min(2, n - 1), n - 1) + 1
            events.append(f"cut@{stop - 1}")
        calls = self._edge(events, "prefix")
        for pos in range(stop):
            j = order[pos]
            tool = wf.steps[j].tool
            if kind == "truncated" and pos == stop - 1:
                calls.append((tool, j, True))
                break
            if rnd() < self.retry_rate:
                calls.append((tool, j, True))
                events.append(f"retry@{j}")
            calls.append((tool, j, False))
            if pos < stop - 1 and rnd() < self.noise:
                calls.append((self._tool(), -1, False))
                events.append(f"stray@{j}")
        if kind == "failed":
            wander = [self._tool() for _ in range(rng.randint(1, 3))]
            calls += [(t, -1, i == len(wander) - 1) for i, t in enumerate(wander)]
        elif kind == "planted":
            calls += self._edge(events, "suffix")
        return RunLabel(w, kind, tuple(events)), calls, kind != "failed"


_BACKGROUND = RunLabel(None, "background")


class _LazyRuns(Sequence[TaskRun]):
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
        "run_id": _run_id(seed, i),
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


def _usage_totals(seed: int, i: int, n_calls: int) -> tuple[int, float]:
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


def matches_planted(candidate: Sequence[str], planted: Sequence[str]) -> bool:
    """The issue's rule: the candidate is the planted sequence, or contains it with at most
    one extra step at each end."""
    cand, want = tuple(candidate), tuple(planted)
    extra = len(cand) - len(want)
    if not want or extra < 0 or extra > 2:
        return False
    return any(cand[o : o + len(want)] == want and extra - o <= 1 for o in range(min(extra, 1) + 1))


def score_top_k(
    candidates_sequences: Sequence[Sequence[str]],
    planted: Sequence[PlantedWorkflow | Sequence[str]],
    k: int = 20,
) -> tuple[float, float]:
    """Precision and recall of the first ``k`` candidates against the planted workflows.

    Precision: the share of the (at most ``k``) candidates that match a planted workflow
    (0.0 when there are none). Recall: the share of planted workflows matched by at least
    one of them (1.0 when nothing was planted). Matching: :func:`matches_planted`.
    """
    top = [tuple(c) for c in candidates_sequences[:k]]
    wanted = [p.tools if isinstance(p, PlantedWorkflow) else tuple(p) for p in planted]
    hit = [any(matches_planted(c, w) for w in wanted) for c in top]
    found = [any(matches_planted(c, w) for c in top) for w in wanted]
    precision = sum(hit) / len(top) if top else 0.0
    recall = sum(found) / len(wanted) if wanted else 1.0
    return precision, recall
