"""The closed-pattern miner against brute-force enumeration."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from soloflow_core.mining.closed import mine_closed_patterns


def brute_force(
    seqs: list[list[str]], min_length: int, min_support: int
) -> dict[tuple[str, ...], set[int]]:
    support: dict[tuple[str, ...], set[int]] = {}
    for r, seq in enumerate(seqs):
        for i in range(len(seq)):
            for j in range(i + min_length, len(seq) + 1):
                support.setdefault(tuple(seq[i:j]), set()).add(r)
    frequent = {p: s for p, s in support.items() if len(s) >= min_support}

    def contains(big: tuple[str, ...], small: tuple[str, ...]) -> bool:
        n = len(small)
        return any(big[k : k + n] == small for k in range(len(big) - n + 1))

    return {
        p: s
        for p, s in frequent.items()
        if not any(len(q) > len(p) and contains(q, p) and t == s for q, t in frequent.items())
    }


ledgers = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=0, max_size=9), min_size=0, max_size=9
)


@given(ledgers, st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=4))
@settings(max_examples=400, deadline=None)
def test_matches_brute_force(seqs, min_length, min_support):
    expected = brute_force(seqs, min_length, min_support)
    got = mine_closed_patterns(seqs, min_length=min_length, min_support=min_support)
    assert {p.names: set(p.runs) for p in got} == expected
    for p in got:
        for r, pos in zip(p.runs, p.first_positions, strict=True):
            n = len(p.names)
            assert tuple(seqs[r][pos : pos + n]) == p.names
            assert all(tuple(seqs[r][k : k + n]) != p.names for k in range(pos))
        assert set(p.exact_runs) == {r for r in p.runs if tuple(seqs[r]) == p.names}


def test_repetition_inside_one_run_counts_once():
    seqs = [["a", "b", "c", "a", "b", "c"], ["x"], ["y"]]
    assert mine_closed_patterns(seqs, min_length=3, min_support=2) == []
    got = mine_closed_patterns(seqs, min_length=3, min_support=1)
    assert [p.names for p in got] == [("a", "b", "c", "a", "b", "c")]


def test_sub_pattern_reported_only_when_its_support_differs():
    seqs = [["s", "r", "v", "w"]] * 3 + [["r", "v", "w", "t"]]
    got = {p.names: p.support for p in mine_closed_patterns(seqs, min_length=3, min_support=3)}
    assert got == {("s", "r", "v", "w"): 3, ("r", "v", "w"): 4}


def test_empty_and_tiny_inputs():
    assert mine_closed_patterns([], min_length=3, min_support=3) == []
    assert mine_closed_patterns([["a", "b"]], min_length=3, min_support=1) == []


def test_unicode_names():
    seqs = [["読む", "書く", "🚀"]] * 3
    (p,) = mine_closed_patterns(seqs)
    assert p.names == ("読む", "書く", "🚀") and p.exact_runs == (0, 1, 2)


# ---------------------------------------------------------------------- the numpy miner

from soloflow_core.mining.fast import CodedLedger, mine_closed_patterns_fast, mine_coded  # noqa: E402


@given(ledgers, st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=4))
@settings(max_examples=400, deadline=None)
def test_fast_miner_matches_brute_force(seqs, min_length, min_support):
    expected = brute_force(seqs, min_length, min_support)
    got = mine_closed_patterns_fast(seqs, min_length=min_length, min_support=min_support)
    assert {p.names: set(p.runs) for p in got} == expected
    assert got == mine_closed_patterns(seqs, min_length=min_length, min_support=min_support)


def test_fast_miner_compact_results_and_exact_support():
    seqs = [["a", "b", "c"]] * 3 + [["x", "a", "b", "c"]]
    (p,) = mine_coded(CodedLedger.from_sequences(seqs))
    assert (p.names, p.support, p.exact_support) == (("a", "b", "c"), 4, 3)


def test_fast_miner_caps_pattern_length():
    seqs = [["a"] * 500] * 3
    got = mine_coded(CodedLedger.from_sequences(seqs), max_length=20)
    assert [(len(p.names), p.truncated) for p in got] == [(20, True)]


def test_fast_miner_many_distinct_names_and_empty_runs():
    seqs = [[f"t{i}" for i in range(r * 1000, r * 1000 + 1000)] for r in range(50)] + [[]] * 5
    assert mine_coded(CodedLedger.from_sequences(seqs)) == []
    assert mine_coded(CodedLedger.from_sequences([])) == []
