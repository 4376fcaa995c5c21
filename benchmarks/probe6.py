"""Route the probe6 hand-written probes (``benchmarks/data/probe6_probes.json``) in each
trained world, cold (the training evidence only) and warm (after the world's new phrasings
ran as a stream, as in ``bench_routing.py``); print every probe that ran a flow.

Run: python benchmarks/probe6.py [--world shop|airline|bank] [--all]; with ``--probes
benchmarks/data/probe11_probes.json``, the 909 near misses and 40 genuine requests of a later
blind probe of all five worlds (those it marked debatable are counted apart); with
``benchmarks/data/probe13_probes.json``, the 446 near misses (245 harmful, 201 debatable) a
fourth blind probe found running on 2026-11-29; with ``benchmarks/data/probe14_probes.json``,
the 205 (57 harmful, 148 debatable) a fifth found running the same day; with
``benchmarks/data/probe15_probes.json``, the 124 (84 harmful, 40 debatable) of a sixth;
with ``benchmarks/data/probe16_probes.json``, the 63 (49 harmful, 14 debatable) a seventh
found in the standing-order and file-sharing bindings; with
``benchmarks/data/probe17_probes.json``, the 61 (44 harmful, 17 debatable) an eighth found;
later files (``probe19``…``probe22``) hold what later blind probes found running, the same
way (``probe22_probes.json`` also lists, under ``refused``, genuine requests it saw declined).
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchmarks.bench_routing as B  # noqa: E402
from soloflow_core.store import Store  # noqa: E402

PROBES = Path(__file__).parent / "data" / "probe6_probes.json"


def _bound_right(inputs: dict[str, Any], values: dict[str, Any]) -> bool:
    return all(_same(inputs.get(k), v) for k, v in values.items() if k in inputs)


def _same(got: Any, want: Any) -> bool:
    """Equal as text, or as numbers (an amount bound as 130.0 is the probe's ``"130"``)."""
    if str(got) == str(want):
        return True
    try:
        return float(got) == float(want)
    except (TypeError, ValueError):
        return False


def _route(mw: Any, probes: list[dict[str, Any]], label: str, show_all: bool) -> Counter[str]:
    n: Counter[str] = Counter()
    for p in probes:
        d = mw.route(p["text"])
        ran = d.run is not None
        genuine = p["job"] is not None
        kind = "genuine" if genuine else "debatable" if p.get("debatable") else "near"
        n[f"{kind} ran"] += ran
        n[kind] += 1
        if genuine and ran and not _bound_right(d.inputs, p["values"]):
            n["genuine wrong inputs"] += 1
            print(f"  {label} WRONG INPUTS {d.inputs} | {p['text']!r}")
        if ran and kind == "near":
            print(
                f"  {label} RAN [{p['kind']}] {d.run.split('→')[-1].strip()[:24]} {d.inputs} | {p['text'][:160]!r}"
            )
        elif show_all and genuine and not ran:
            why = "; ".join(d.checks[0].reasons)[:200] if d.checks else "no match"
            print(f"  {label} miss [{p['job']}] {p['text']!r} :: {why}")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", choices=sorted(B.WORLDS), action="append")
    ap.add_argument("--all", action="store_true", help="also print the missed genuine probes")
    ap.add_argument("--probes", type=Path, default=PROBES, help="a probes file (JSON)")
    a = ap.parse_args()
    probes = json.loads(a.probes.read_text())["probes"]
    for world in a.world or sorted(B.WORLDS):
        B.W = importlib.import_module(B.WORLDS[world])
        mine = [p for p in probes if p["world"] == world]
        tmp = Path(tempfile.mkdtemp())
        B._trained(f"sqlite:///{tmp / 'trained.db'}").close()
        print(f"== {world}: {len(mine)} probes")
        store = Store.open(B._copy_sqlite(tmp / "trained.db", tmp / "cold.db"))
        _, mw, _ = B._agent(store, learn=False, use_flow_tools=False)
        cold = _route(mw, mine, "cold", a.all)
        mw.close()
        store.close()
        store = Store.open(B._copy_sqlite(tmp / "trained.db", tmp / "warm.db"))
        agent, mw, model = B._agent(store, learn=True, use_flow_tools=True)
        stream = [r for r in B.W.load_corpus() if r["category"] == "paraphrase"]
        random.Random(1).shuffle(stream)
        for r in stream:
            B._ask(agent, mw, model, r["text"])
        warm = _route(mw, mine, "warm", a.all)
        mw.close()
        store.close()
        for label, c in (("cold", cold), ("warm", warm)):
            print(
                f"  {label}: near misses run {c['near ran']}/{c['near']}, genuine run "
                f"{c['genuine ran']}/{c['genuine']} (wrong inputs {c['genuine wrong inputs']})"
                + (
                    f", debatable run {c['debatable ran']}/{c['debatable']}"
                    if c["debatable"]
                    else ""
                )
            )


if __name__ == "__main__":
    main()
