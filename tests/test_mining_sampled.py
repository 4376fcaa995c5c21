"""The sampled pipeline: the sample's ledger built straight from the columns, the whole one
built and indexed in another thread, and the pair index that finds where patterns start."""

from __future__ import annotations

import time

import numpy as np
import pytest

from soloflow_core.mining import pipeline
from soloflow_core.mining.fast import mine_levels
from soloflow_core.mining.options import RankingOptions
from soloflow_core.mining.pipeline import (
    _column_unit_count,
    _column_units,
    _sample,
    mine_ranked,
    prepare_units,
)
from soloflow_core.mining.positions import CodePositions, PairPositions, positions, scan_starts_many
from soloflow_core.store import RunSequence, ToolNameColumns
from soloflow_core.testing.synthetic_ledger import generate_ledger


def _ledger_runs(runs: int = 2000, seed: int = 4) -> list[RunSequence]:
    """Noisy runs with failed runs, errored calls and token totals on some runs."""
    led = generate_ledger(runs=runs, workflows=8, seed=seed, noise=0.2, names_only=True)
    return [
        RunSequence(s.run_id, s.names, s.errors, s.success, None, 900.0 if i % 3 else None)
        for i, s in enumerate(led.sequences)
    ]


def _columns(runs: list[RunSequence]) -> ToolNameColumns:
    vocab: dict[str, int] = {}
    codes = [vocab.setdefault(n, len(vocab)) for r in runs for n in r.names]
    lengths = [len(r.names) for r in runs]
    return ToolNameColumns(
        run_pks=np.arange(len(runs), dtype=np.int64),
        run_ids=[r.run_id for r in runs],
        offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        codes=np.asarray(codes, dtype=np.int64),
        names=list(vocab),
        errors=np.asarray([bool(e) for r in runs for e in r.errors], dtype=bool),
        success=np.asarray([-1 if r.success is None else int(r.success) for r in runs], np.int8),
        cost=np.full(len(runs), np.nan),
        tokens=np.asarray([np.nan if r.tokens is None else r.tokens for r in runs]),
    )


def _ranking(runs: object, **kw: object) -> list[tuple[object, ...]]:
    # Not the mined pattern's codes: from runs, tools are coded in the kept runs only.
    return [
        (
            r.names,
            r.runs,
            r.score,
            r.pattern.names,
            r.pattern.support,
            r.pattern.exact_support,
            r.clean_occurrences,
            r.lift,
            r.estimated_token_savings,
            r.savings_method,
            r.explanation,
            tuple(r.occurrences),
        )
        for r in mine_ranked(runs, **kw)  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("include_failed", [False, True])
def test_a_sample_of_the_columns_is_the_whole_ledgers_sample(include_failed):
    cols = _columns(_ledger_runs())
    options = RankingOptions(include_failed_runs=include_failed)
    whole = _column_units(cols, options)
    assert _column_unit_count(cols, options) == (len(whole.kept), whole.unit_count)
    sample = _sample(len(whole.kept), whole.unit_count, whole.unit_count // 3)
    direct, restricted = _column_units(cols, options, sample), whole.restricted_to(sample)
    assert 0 < direct.unit_count < whole.unit_count
    for field in direct.__slots__:  # type: ignore[attr-defined]
        a, b = getattr(direct, field), getattr(restricted, field)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), field
        else:
            assert a == b, field


@pytest.mark.parametrize("sample_units", [3000, 6000])
def test_sampled_mining_finds_the_same_from_columns_and_from_runs(sample_units):
    # Columns: the sample is built straight from them, the whole ledger in another thread.
    # Runs: the whole ledger first, then restricted to the sample.
    runs = _ledger_runs()
    cols = _columns(runs)
    assert prepare_units(cols).unit_count > sample_units
    by_columns = _ranking(cols, top_k=8, sample_units=sample_units)
    assert by_columns and by_columns == _ranking(runs, top_k=8, sample_units=sample_units)
    assert by_columns == _ranking(cols, top_k=8, sample_units=sample_units)  # repeatable


@pytest.mark.parametrize("runs_of", [_columns, list])
def test_a_failure_in_the_background_thread_reaches_the_caller(monkeypatch, runs_of):
    def broken(code: object) -> object:
        raise MemoryError("no room for the index")

    monkeypatch.setattr(pipeline, "positions", broken)
    with pytest.raises(MemoryError, match="no room for the index"):
        mine_ranked(runs_of(_ledger_runs()), top_k=5, sample_units=3000)


@pytest.mark.parametrize(
    "options",
    [
        RankingOptions(),
        RankingOptions(max_swaps=0),
        RankingOptions(max_gap=0),
        RankingOptions(max_gap=0, max_swaps=0),
        RankingOptions(collapse_loops=False),
    ],
)
def test_pair_positions_find_the_starts_a_scan_of_code_positions_finds(options):
    ledger = prepare_units(_ledger_runs(1500, seed=7), options)
    rng = np.random.default_rng(2)
    work = ledger.code.copy()
    work[rng.choice(np.flatnonzero(work >= 0), 400, replace=False)] = -2  # some covered
    pats = [rng.integers(0, len(ledger.names), rng.integers(2, 6)) for _ in range(200)]
    pats += [row for lv in mine_levels(ledger.coded(), min_support=2) for row in lv.codes][:100]
    scanned = scan_starts_many(work, pats, options, where=CodePositions(ledger.code))
    paired = PairPositions(ledger.code).starts_many(work, pats, options)
    assert np.array_equal(paired[0], scanned[0]) and np.array_equal(paired[1], scanned[1])
    assert len(paired[0]) > 0


def test_a_ledger_too_big_for_the_pair_index_is_indexed_by_code(monkeypatch):
    code = np.asarray([3, 1, -1, 0, 3, 2, -1, -1], dtype=np.int32)
    assert isinstance(positions(code), PairPositions)
    monkeypatch.setattr("soloflow_core.mining.positions.PAIR_POSITIONS_LIMIT", len(code))
    assert isinstance(positions(code), CodePositions)


def test_sampled_mining_does_not_depend_on_when_the_background_work_ends(monkeypatch):
    cols = _columns(_ledger_runs())
    prompt = _ranking(cols, top_k=8, sample_units=3000)
    real_index, real_indexed = pipeline.ChainIndex, pipeline._indexed

    def late_index(*args: object) -> object:
        time.sleep(0.2)  # the sample is mined long before its index is there
        return real_index(*args)

    def late_whole(build: object) -> object:
        time.sleep(0.2)  # the cover makes its first choices long before the whole is there
        return real_indexed(build)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "ChainIndex", late_index)
    monkeypatch.setattr(pipeline, "_indexed", late_whole)
    assert _ranking(cols, top_k=8, sample_units=3000) == prompt
