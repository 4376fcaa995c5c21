"""Hostile input, timed: what used to hang, beside the code it hung in (same run).

* 32 KB of ``{{``: SoloFlow's one-pass template scanner (``iter_references``) against the
  lazy regex ``\\{\\{(.*?)\\}\\}`` the template language used before (quadratic: every ``{{``
  scans to the end for a ``}}``).
* A 324-byte YAML "billion laughs" file and a 100k-character flow name, through
  ``validate_flow_file`` (refused; the time to the error).
* The extraction pattern ``(x|xx)+y`` on 40 ``x``: Python's ``re`` on 28 ``x`` (it grows
  ×1.6 with every character more) against the flow's time-limited match (``flow/patterns.py``);
  and ``(a|aa)+$``, refused by validation.

Median of ``--repeats`` runs each. Run: ``python benchmarks/bench_hostile_input.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from soloflow_core.errors import FlowFileError, PatternTimeoutError
from soloflow_core.flow.loader import validate_flow_file
from soloflow_core.flow.patterns import pattern_problem, search
from soloflow_core.flow.templates import iter_references

_OLD_TEMPLATE = re.compile(r"\{\{(.*?)\}\}")


def _median(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _refused(path: Path) -> None:
    try:
        validate_flow_file(path)
    except FlowFileError:
        return
    raise AssertionError(f"{path} was accepted")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    text = "{{" * 16_384  # 32 KB
    old = _median(lambda: list(_OLD_TEMPLATE.finditer(text)), args.repeats)
    new = _median(lambda: list(iter_references(text)), args.repeats)
    print(
        f"32 KB of '{{{{': old regex {old * 1000:.0f} ms, scanner {new * 1000:.2f} ms, {old / new:,.0f}x"
    )
    with tempfile.TemporaryDirectory() as tmp:
        laughs = Path(tmp, "lol.yaml")
        laughs.write_text(
            'a: &a ["l","l","l","l","l","l","l","l","l"]\n'
            + "".join(
                f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            )
        )
        t = _median(lambda: _refused(laughs), args.repeats)
        print(f"billion laughs ({laughs.stat().st_size} bytes): refused in {t * 1000:.2f} ms")
        long = Path(tmp, "long.json")
        long.write_text(
            json.dumps({"name": "n" * 100_000, "steps": [{"id": "a", "skill_key": "t"}]})
        )
        t = _median(lambda: _refused(long), args.repeats)
        print(f"100k-character flow name: refused in {t * 1000:.2f} ms")
    _patterns(args.repeats)


def _stopped(rule: dict[str, str], text: str) -> None:
    try:
        search(rule, text, field="extraction.q.pattern")
    except PatternTimeoutError:
        return
    raise AssertionError("the match was not stopped")


def _patterns(repeats: int) -> None:
    slow = re.compile("(?P<v>(x|xx)+y)")
    old = _median(lambda: slow.search("x" * 28), 1)
    new = _median(lambda: _stopped({"pattern": "(x|xx)+y"}, "x" * 40), repeats)
    print(
        f"(x|xx)+y: re on 28 x {old:.1f} s (×1.6 per x more: minutes on 40), stopped on 40 x in {new:.2f} s"
    )
    t = _median(lambda: pattern_problem("(a|aa)+$"), repeats)
    assert pattern_problem("(a|aa)+$") is not None
    print(f"(a|aa)+$: refused by validation in {t:.2f} s")


if __name__ == "__main__":
    main()
