"""A pattern the cover chooses is grown by the step its noisy occurrences share
(soloflow_core/mining/growing.py).

The miner proposes only what ``min_support`` runs hold exactly; a long workflow with a stray
call somewhere in most runs is held exactly by too few, and only a part of it was found (the
misses of benchmarks/bench_seeds.py: 9–15-step workflows without their first or last steps).
"""

from __future__ import annotations

import random

import pytest

from soloflow_core.mining.options import RankingOptions
from soloflow_core.mining.pipeline import mine_ranked
from soloflow_core.store import RunSequence
from soloflow_core.testing.synthetic_ledger import generate_ledger, matches_planted

WORKFLOW = [f"step{k}" for k in range(10)]


def _seq(i: int, names: list[str]) -> RunSequence:
    return RunSequence(
        run_id=f"r{i}",
        names=tuple(names),
        errors=(False,) * len(names),
        success=True,
        cost=None,
        tokens=None,
    )


def _with_stray(i: int, gap: int, workflow: list[str]) -> list[str]:
    return [*workflow[:gap], f"stray{i % 7}", *workflow[gap:]]


def _background(rng: random.Random, n: int) -> list[RunSequence]:
    return [_seq(1000 + i, [f"t{rng.randrange(15)}" for _ in range(6)]) for i in range(n)]


def test_a_workflow_no_three_runs_hold_exactly_is_found_whole():
    """Two runs hold the ten steps exactly; eighteen more hold them with one stray call, two
    at each gap. Nine-step parts are held exactly by four runs each: before, the top pattern
    was one of them (the workflow without its first or last step)."""
    runs = [_seq(i, WORKFLOW) for i in range(2)]
    runs += [_seq(10 + i, _with_stray(i, 1 + i % 9, WORKFLOW)) for i in range(18)]
    runs += _background(random.Random(0), 40)
    (top, *_) = mine_ranked(runs, min_length=3, min_support=3, top_k=3)
    assert list(top.names) == WORKFLOW
    assert top.support == 20
    assert top.pattern.support == 2  # runs holding it exactly: fewer than min_support


def test_occurrences_lacking_the_new_step_count_as_cut_short():
    """Of twenty runs, three stop one step early: the step is still the workflow's (before:
    growing by it lost three whole occurrences, which outweighed the step)."""
    runs = [_seq(i, _with_stray(i, 1 + i % 9, WORKFLOW)) for i in range(17)]
    runs += [_seq(50 + i, _with_stray(i, 2 + i, WORKFLOW[:-1])) for i in range(3)]
    runs += [_seq(90 + i, WORKFLOW) for i in range(2)]
    runs += _background(random.Random(1), 40)
    (top, *_) = mine_ranked(runs, min_length=3, min_support=3, top_k=3)
    assert list(top.names) == WORKFLOW


def test_a_step_many_occurrences_lack_is_not_added():
    """A tool after the workflow in 13 of its 22 runs is no step of it, though it would
    compress the ledger: the shorter pattern would not be a fragment of the longer (the
    occurrences without it are over a quarter of those with it, ``fragment_slack``)."""
    runs = [_seq(i, [*_with_stray(i, 1 + i % 9, WORKFLOW), "extra"]) for i in range(13)]
    runs += [_seq(50 + i, _with_stray(i, 1 + i % 9, WORKFLOW)) for i in range(7)]
    runs += [_seq(90 + i, WORKFLOW) for i in range(2)]
    runs += _background(random.Random(2), 40)
    ranked = mine_ranked(runs, min_length=3, min_support=3, top_k=3)
    assert list(ranked[0].names) == WORKFLOW


def test_a_popular_tool_met_by_chance_is_not_added():
    """The most common background tool often stands next to the workflow by chance."""
    rng = random.Random(3)
    runs = []
    for i in range(30):
        before = ["popular"] if rng.random() < 0.5 else [f"t{rng.randrange(15)}"]
        runs.append(_seq(i, [*before, *_with_stray(i, 1 + i % 9, WORKFLOW)]))
    runs += [
        _seq(500 + i, ["popular" if rng.random() < 0.5 else f"t{rng.randrange(15)}"] * 1 + ["x"])
        for i in range(40)
    ]
    runs += [_seq(90 + i, WORKFLOW) for i in range(3)]
    ranked = mine_ranked(runs, min_length=3, min_support=3, top_k=3)
    assert list(ranked[0].names) == WORKFLOW


NOISY = {"max_len": 8, "noise": 0.3, "retry_rate": 0.15, "swap_rate": 0.3}
NOISY |= {"failed_run_rate": 0.2, "truncate_rate": 0.1}


@pytest.mark.parametrize(
    ("seed", "settings"),
    [
        (119, {"runs": 500, "workflows": 5}),  # generate_ledger's defaults: up to 15 steps
        (121, {"runs": 500, "workflows": 5}),
        (127, {"runs": 700, "workflows": 8, "max_len": 12, "planted_fraction": 0.45}),
        (116, {"runs": 600, "workflows": 4, **NOISY}),
        (124, {"runs": 600, "workflows": 4, **NOISY}),
    ],
)
def test_planted_workflows_of_noisy_seeds_are_found_whole(seed, settings):
    """Seeds of benchmarks/bench_seeds.py (its first two thirds of the runs, as it mines)
    whose longest workflows were found cut: each is found whole now."""
    led = generate_ledger(seed=seed, names_only=True, **settings)
    k = len(led.workflows)
    runs = led.sequences[: 2 * len(led.sequences) // 3]
    ranked = mine_ranked(runs, min_length=3, min_support=3, top_k=k, options=RankingOptions())
    for wf in led.workflows:
        assert any(matches_planted(p.names, wf.tools) for p in ranked), wf.tools
