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
can be measured. The same arguments always give the same ledger. Here each run is planned
(tools, planted steps, errors); :mod:`._synthetic_runs` builds its ``TaskRun`` when it is read.

Example:
    >>> ledger = generate_ledger(runs=200, workflows=3, seed=1)
    >>> len(ledger.runs), [len(w.tools) >= 3 for w in ledger.workflows]
    (200, [True, True, True])
"""

from __future__ import annotations

import gc
import random
from bisect import bisect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

from soloflow_core.models import TaskRun
from soloflow_core.store import RunSequence
from soloflow_core.testing._synthetic_runs import TASK_FIELDS, Call, LazyRuns, run_id, usage_totals

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
CONSTANTS = (("mode", "strict"), ("currency", "USD"), ("limit", 10), ("channel", "web"))
PATH_NAMES = {"id": "id", "data.ref": "ref", "data.amount": "amount", "items[0].id": "item_id"}
OUTPUT_PATHS = tuple(PATH_NAMES)

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
            tokens, cost = usage_totals(seed, i, len(calls)) if usage else (None, None)
            sequences.append(
                RunSequence(
                    run_id=run_id(seed, i),
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
        else LazyRuns(
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
