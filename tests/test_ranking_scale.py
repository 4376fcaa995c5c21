"""mine_ranked on bad and large input, and the ranking's quality on synthetic ledgers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from soloflow_core.mining.cover import _Chosen, pattern_gain
from soloflow_core.mining.fast import CodedLedger, mine_coded, mine_levels
from soloflow_core.mining.matching import (
    ChainIndex,
    _Instances,
    leftmost_spans,
    match_pattern,
    match_patterns,
)
from soloflow_core.mining.options import RankingOptions
from soloflow_core.mining.pipeline import _whole_pattern, mine_ranked, prepare_units
from soloflow_core.mining.positions import (
    CodePositions,
    PairPositions,
    scan_starts,
    scan_starts_many,
)
from soloflow_core.mining.units import UnitLedger, prepare_ledger
from soloflow_core.store import RunSequence, ToolNameColumns
from soloflow_core.testing.synthetic_ledger import generate_ledger, score_top_k


def _columns(runs: list[list[str]], success: list[int] | None = None) -> ToolNameColumns:
    vocab: dict[str, int] = {}
    codes = [vocab.setdefault(n, len(vocab)) for run in runs for n in run]
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in runs]))).astype(np.int64)
    n = len(runs)
    return ToolNameColumns(
        run_pks=np.arange(n, dtype=np.int64),
        run_ids=[f"r{i}" for i in range(n)],
        offsets=offsets,
        codes=np.asarray(codes, dtype=np.int64),
        names=list(vocab),
        errors=np.zeros(len(codes), dtype=bool),
        success=np.asarray(success if success is not None else [1] * n, dtype=np.int8),
        cost=np.full(n, np.nan),
        tokens=np.full(n, np.nan),
    )


def _seq(i: int, names: list[str]) -> RunSequence:
    return RunSequence(f"r{i}", tuple(names), (False,) * len(names), True, None, None)


def test_empty_ledger_gives_nothing():
    assert mine_ranked(_columns([])) == []
    assert mine_ranked([]) == []
    assert mine_ranked(_columns([[], []])) == []


def test_a_single_run_gives_nothing():
    assert mine_ranked(_columns([["a", "b", "c"] * 10])) == []


def test_failed_runs_are_left_out_and_indices_stay_the_input_ones():
    runs = [["x", "y"]] + [["a", "b", "c", "d", "e"]] * 12
    success = [1] + [0, 1] * 6
    (top,) = mine_ranked(_columns(runs, success), top_k=1)
    assert top.names == ("a", "b", "c", "d", "e")
    assert top.runs == tuple(range(2, 13, 2))
    assert {o.run for o in top.occurrences} == set(top.runs)


def test_one_run_of_100k_calls_is_mined_without_blowing_up():
    rng = np.random.default_rng(1)
    names = [f"t{i}" for i in rng.integers(0, 50, 100_000)]
    # Min support counts distinct runs: one run cannot support anything.
    assert mine_ranked(_columns([names])) == []
    ledger = prepare_units(_columns([names]))
    assert mine_coded(ledger.coded(), min_support=1, max_length=4)


def test_a_million_distinct_tool_names():
    names = [f"tool_{i}" for i in range(1_000_000)]
    runs = [names[i : i + 1000] for i in range(0, 1_000_000, 1000)]
    assert mine_ranked(_columns(runs)) == []
    # With a repeated workflow on top it is still found, among a million names.
    runs += [["a", "b", "c", "d"]] * 20
    (top,) = mine_ranked(_columns(runs), top_k=1)
    assert top.names == ("a", "b", "c", "d") and top.support == 20


@pytest.mark.parametrize(
    "names",
    [["é", "工具", "🙂", "a\x00b"], ["", " ", "\n", "\u202e"], ["x" * 10_000, "y", "z", "w"]],
)
def test_tool_names_with_any_unicode(names):
    runs = [names + [f"noise{i}"] for i in range(10)]
    (top,) = mine_ranked(_columns(runs), top_k=1, min_length=3)
    assert top.names == tuple(names)
    assert mine_ranked([_seq(i, r) for i, r in enumerate(runs)], top_k=1)[0].names == tuple(names)


def test_columns_and_runs_in_memory_give_the_same_ranking():
    led = generate_ledger(runs=1500, workflows=8, seed=4, noise=0.1, names_only=True)
    seqs = led.sequences
    vocab: dict[str, int] = {}
    codes = [vocab.setdefault(n, len(vocab)) for s in seqs for n in s.names]
    cols = ToolNameColumns(
        run_pks=np.arange(len(seqs)),
        run_ids=[s.run_id for s in seqs],
        offsets=np.concatenate(([0], np.cumsum([len(s.names) for s in seqs]))).astype(np.int64),
        codes=np.asarray(codes, dtype=np.int64),
        names=list(vocab),
        errors=np.asarray([e for s in seqs for e in s.errors], dtype=bool),
        success=np.asarray([-1 if s.success is None else int(s.success) for s in seqs], np.int8),
        cost=np.full(len(seqs), np.nan),
        tokens=np.full(len(seqs), np.nan),
    )
    a = [(r.names, r.runs, r.score) for r in mine_ranked(cols, top_k=8)]
    b = [(r.names, r.runs, r.score) for r in mine_ranked(seqs, top_k=8)]
    assert a == b and len(a) == 8


def test_sampling_counts_the_chosen_patterns_on_the_whole_ledger():
    led = generate_ledger(runs=6000, workflows=10, seed=2, noise=0.1, names_only=True)
    whole = mine_ranked(led.sequences, top_k=10, sample_units=None)
    sampled = mine_ranked(led.sequences, top_k=10, sample_units=8000)
    assert score_top_k([r.names for r in sampled], led.workflows, k=10)[1] >= 0.9
    by_names = {r.names: r for r in whole}
    mined = {p.names: p for p in mine_coded(prepare_units(led.sequences).coded())}
    assert len(set(by_names) & {r.names for r in sampled}) >= 8
    for r in sampled:
        # Supports and occurrences are counted on every run, not only on the sampled ones.
        assert r.pattern.support == mined[r.names].support
        assert r.pattern.exact_support == mined[r.names].exact_support
        if r.names in by_names:
            assert abs(r.support - by_names[r.names].support) <= 0.05 * r.support


def test_occurrences_are_built_on_access_and_compare_like_tuples():
    runs = [["a", "b", "c", "d"]] * 5
    (top,) = mine_ranked(_columns(runs), top_k=1)
    occ = top.occurrences
    assert len(occ) == 5 and occ[-1].run == 4 and occ[1:3] == tuple(occ)[1:3]
    assert occ == tuple(occ) and occ[0].spans == ((0, 0), (1, 1), (2, 2), (3, 3))
    with pytest.raises(IndexError):
        occ[5]


def test_mine_coded_agrees_on_tiny_ledgers():
    seqs = [["a", "b", "a", "b", "c"], ["a", "b", "c"], ["x", "a", "b", "c"]]
    got = {
        (p.names, p.support, p.exact_support)
        for p in mine_coded(CodedLedger.from_sequences(seqs), min_length=2)
    }
    assert got == {(("a", "b", "c"), 3, 1)}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_precision_and_recall_on_the_synthetic_ledger(seed):
    led = generate_ledger(runs=5000, workflows=20, noise=0.1, seed=seed, names_only=True)
    ranked = mine_ranked(led.sequences, top_k=20)
    precision, recall = score_top_k([r.names for r in ranked], led.workflows, k=20)
    assert precision >= 0.9 and recall >= 0.9


# ---------------------------------------------------------------------- the fast paths agree


def _noisy_ledger(seed: int, options: RankingOptions | None = None) -> UnitLedger:
    led = generate_ledger(runs=1500, workflows=8, seed=seed, noise=0.3, names_only=True)
    return prepare_units(led.sequences, options)


@pytest.mark.parametrize(
    "options",
    [
        None,
        RankingOptions(max_swaps=0),
        RankingOptions(max_gap=0, min_truncated_steps=2),
        RankingOptions(max_swaps=2),
        RankingOptions(collapse_loops=False, allow_truncated=False),
    ],
)
def test_matching_many_patterns_at_once_matches_each_alone(options):
    ledger = _noisy_ledger(3, options)
    rng = np.random.default_rng(0)
    work = ledger.code.copy()
    work[rng.choice(np.flatnonzero(work >= 0), 500, replace=False)] = -2  # some covered
    levels = mine_levels(ledger.coded(), min_length=2, min_support=2)
    pats = [row for lv in levels for row in lv.codes][:150]
    index = ChainIndex(ledger.code, ledger.err)
    found, gains = match_patterns(work, ledger, *index.starts_many(pats, ledger.options), pats)
    for pat, occ, gain in zip(pats, found, gains, strict=True):
        # Alone, from every place its first pair occurs (no triple index).
        alone = match_pattern(work, ledger, index.starts(pat, ledger.options), pat=pat)
        assert np.array_equal(occ.pos, alone.pos) and np.array_equal(occ.stray, alone.stray)
        assert np.array_equal(occ.swap_at, alone.swap_at)
        assert np.array_equal(occ.length, alone.length)
        assert gain == pytest.approx(pattern_gain(alone, ledger.bits[pat], ledger.unit_count))


def test_scanning_starts_for_many_patterns_finds_each_ones():
    ledger = _noisy_ledger(4)
    rng = np.random.default_rng(1)
    work = ledger.code.copy()
    work[rng.choice(np.flatnonzero(work >= 0), 500, replace=False)] = -2
    where = CodePositions(ledger.code)
    pats = [rng.integers(0, len(ledger.names), rng.integers(2, 6)) for _ in range(200)]
    starts, which = scan_starts_many(work, pats, ledger.options, where=where)
    for k, pat in enumerate(pats):
        assert np.array_equal(
            starts[which == k], scan_starts(work, pat, ledger.options, where=where)
        )


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)), max_size=80))
def test_leftmost_spans_are_those_a_scan_keeps(spans):
    spans.sort()
    begins = np.asarray([b for b, _ in spans], dtype=np.int64)
    ends = begins + np.asarray([n for _, n in spans], dtype=np.int64)
    kept, edge = [], -1
    for i, (b, e) in enumerate(zip(begins.tolist(), ends.tolist(), strict=True)):
        if b > edge:
            kept.append(i)
            edge = e
    assert np.flatnonzero(leftmost_spans(begins, ends)).tolist() == kept


@pytest.mark.parametrize("options", [None, RankingOptions(include_failed_runs=True)])
def test_runs_with_names_only_give_the_ledger_prepare_ledger_gives(options):
    seqs = generate_ledger(runs=800, workflows=6, seed=5, names_only=True).sequences
    seqs[3] = replace(seqs[3], tokens=1200)
    fast, slow = prepare_units(seqs, options), prepare_ledger(seqs, options)
    for field in UnitLedger.__slots__:
        a, b = getattr(fast, field), getattr(slow, field)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":  # sums in another order
            assert np.allclose(a, b, rtol=1e-12, atol=0, equal_nan=True), field
        elif isinstance(a, np.ndarray):
            assert np.array_equal(a, b), field
        else:
            assert a == b, field


@pytest.mark.parametrize("options", [None, RankingOptions(max_swaps=0), RankingOptions(max_gap=0)])
def test_starts_skip_covered_instances_and_lose_no_match(options):
    ledger = _noisy_ledger(3, options)
    rng = np.random.default_rng(2)
    work = ledger.code.copy()
    taken = rng.choice(np.flatnonzero(work >= 0), 3000, replace=False)
    work[taken] = -2
    index = ChainIndex(ledger.code, ledger.err)
    index.cover(taken)  # as the cover does after a choice
    levels = mine_levels(ledger.coded(), min_length=3, min_support=2)
    pats = [row for lv in levels for row in lv.codes][:150]
    starts, which = index.starts_many(pats, ledger.options)
    untold = ChainIndex(ledger.code, ledger.err).starts_many(pats, ledger.options)[0]
    assert len(starts) < len(untold)  # instances with a covered unit start nothing
    found, gains = match_patterns(work, ledger, starts, cand=which, pats=pats)
    for pat, occ, gain in zip(pats, found, gains, strict=True):
        alone = match_pattern(work, ledger, index.starts(pat, ledger.options), pat=pat)
        assert np.array_equal(occ.pos, alone.pos) and np.array_equal(occ.stray, alone.stray)
        assert np.array_equal(occ.swap_at, alone.swap_at)
        assert np.array_equal(occ.length, alone.length)
        assert gain == pytest.approx(pattern_gain(alone, ledger.bits[pat], ledger.unit_count))


def test_stop_counts_by_table_and_by_search_agree(monkeypatch):
    ledger = _noisy_ledger(4)
    code, err = ledger.code, ledger.err
    w = len(ledger.names)
    before, step = np.divmod(np.arange(w * w), w)
    table = ChainIndex(code, err).stop_counts(before, step)
    monkeypatch.setattr(_Instances, "DENSE", 0)  # as for a vocabulary of thousands of tools
    searched = ChainIndex(code, err).stop_counts(before, step)
    assert np.array_equal(table, searched) and table.sum() > 0
    # And what they count: `step` errored right after `before`, one apart, or swapped.
    a, b, c = code[:-2], code[1:-1], code[2:]
    ok = (a >= 0) & (b >= 0)
    brute = np.zeros(w * w, dtype=np.int64)
    np.add.at(brute, (a * w + b)[ok & err[1:-1]], 1)
    np.add.at(brute, (a * w + c)[ok & (c >= 0) & err[2:]], 1)
    np.add.at(brute, (b * w + a)[ok & err[:-2]], 1)
    assert np.array_equal(table, brute)


@given(
    st.lists(st.lists(st.integers(0, 4), min_size=2, max_size=7), min_size=1, max_size=6),
    st.lists(st.integers(0, 4), min_size=2, max_size=5),
    st.integers(0, 30),
    st.sampled_from([0.25, 0.0, 1.0, -0.5]),
)
def test_chosen_parts_tell_fragments_as_a_scan_does(chosen, pat, usage, slack):
    parts = _Chosen(slack)
    used = []
    for i, codes in enumerate(chosen):
        parts.add(np.asarray(codes, dtype=np.int64), 3 * i + 1)
        used.append((codes, 3 * i + 1))
    n = len(pat)
    inside = [
        u
        for codes, u in used
        if len(codes) > n and any(codes[o : o + n] == pat for o in range(len(codes) - n + 1))
    ]
    expected = any(usage < slack * u for u in inside)
    assert parts.is_fragment(np.asarray(pat, dtype=np.int64), usage) == expected


@pytest.mark.parametrize("index", [CodePositions, PairPositions])
def test_a_pattern_on_the_whole_ledger_is_counted_exactly_from_either_index(index):
    """From its rarest step (CodePositions) or its first pair (PairPositions): the same runs."""
    ledger = _noisy_ledger(5)
    where = index(ledger.code)
    code = ledger.code
    levels = mine_levels(ledger.coded(), min_length=3, min_support=2)
    rng = np.random.default_rng(3)
    pats = [row for lv in levels for row in lv.codes]
    pats = [pats[i] for i in rng.choice(len(pats), 40, replace=False)]
    pats.append(np.asarray([0, 0, 0], dtype=np.int64))  # loops collapsed: never contiguous
    for pat in pats:
        k = len(pat)
        at = np.flatnonzero(code[: len(code) - k] == pat[0])
        for j in range(1, k):
            at = at[code[at + j] == pat[j]]
        mined = _whole_pattern(ledger, pat, where)
        assert mined.support == len(np.unique(ledger.unit_run[ledger.flat_unit[at]]))
        assert mined.exact_support == int(((code[at - 1] < 0) & (code[at + k] < 0)).sum())


def test_savings_say_in_how_many_of_all_occurrences_they_were_measured():
    runs = [
        replace(_seq(i, ["a", "b", "c", "d"]), tokens=1000 if i % 2 else None) for i in range(40)
    ]
    (top,) = mine_ranked(runs, top_k=1)
    assert top.names == ("a", "b", "c", "d")
    assert "in 20 of 40 occurrences" in top.savings_method
    # 1000 tokens over 5 turns (4 calls and the answer): 3 of the pattern's 4 turns saved.
    assert top.tokens_saved_per_occurrence == pytest.approx(600)


def _ranking(cols: ToolNameColumns, **kw: object) -> list[tuple[object, ...]]:
    return [
        (r.names, r.runs, r.score, r.estimated_token_savings, r.explanation, tuple(r.occurrences))
        for r in mine_ranked(cols, **kw)  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("sample_units", [None, 12_000])
def test_int32_index_arrays_rank_as_int64_ones_do(monkeypatch, sample_units):
    # 60k tools seen first: the workflows' codes are above 46,341, so a product of two
    # codes (the pair and triple keys) overflows int32 unless it is widened first.
    led = generate_ledger(runs=3000, workflows=6, seed=9, noise=0.1, names_only=True)
    noise = [[f"once_{i}_{j}" for j in range(6)] for i in range(10_000)]
    runs = noise + [list(s.names) for s in led.sequences]
    cols = _columns(runs)
    ledger = prepare_units(cols)
    assert ledger.code.dtype == np.int32 and ledger.flat_unit.dtype == np.int32
    assert min(ledger.names.index(t) for w in led.workflows for t in w.tools) > 46_341
    narrow = _ranking(cols, top_k=6, sample_units=sample_units)
    monkeypatch.setattr("soloflow_core.mining.units.index_dtype", lambda size: np.int64)
    assert prepare_units(cols).code.dtype == np.int64
    assert narrow == _ranking(cols, top_k=6, sample_units=sample_units)
    assert score_top_k([n for n, *_ in narrow], led.workflows, k=6)[1] >= 0.8


def test_code_positions_keep_the_code_arrays_type():
    code = np.asarray([3, -1, 0, 3, 2, -1, 3, 0, -1, -1], dtype=np.int32)
    where = CodePositions(code)
    assert where.code.dtype == where.pos.dtype == np.int32
    for c in range(5):
        assert where.of(c).tolist() == np.flatnonzero(code == c).tolist()
    wide = CodePositions(code.astype(np.int64))
    assert wide.pos.dtype == np.int64 and wide.pos.tolist() == where.pos.tolist()
