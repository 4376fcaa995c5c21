"""Route hand-written probes (one a line, from a file) in a trained world; print the runs.

Run: python benchmarks/redteam_probe.py --world airline probes.txt [--all]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchmarks.bench_routing as B  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", default="shop")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    B.W = importlib.import_module(B.WORLDS[a.world])
    tmp = Path(tempfile.mkdtemp())
    store = B._trained(f"sqlite:///{tmp / 'trained.db'}")
    _, mw, _ = B._agent(store, learn=False, use_flow_tools=False)
    for f in a.files:
        for line in Path(f).read_text().splitlines():
            if not line.strip() or line.startswith("##"):
                continue
            text = line.replace("\\n", "\n")
            d = mw.route(text)
            if d.run:
                print(f"RUN  {d.run.split('→')[-1].strip()[:28]:<28} {d.inputs}  | {text!r}")
            elif a.all:
                c = d.checks[0] if d.checks else None
                print(f"---  {text!r}  :: {('; '.join(c.reasons))[:200] if c else 'no match'}")


if __name__ == "__main__":
    main()
