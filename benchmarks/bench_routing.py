"""Routing on requests nobody scripted: no flow runs for a near miss; how many new phrasings
of learned jobs are served with no model call, and rightly.

The world is the support shop of ``routing_world.py`` and its blind corpus (or, with
``--world airline``, the airline desk of ``routing_world_airline.py``; with ``--world bank``,
the banking desk of ``routing_world_bank.py``; with ``--world helpdesk``, the IT helpdesk of
``routing_world_helpdesk.py``; with ``--world workspace``, the calendar/e-mail/files assistant
of ``routing_world_workspace.py``): a real
``create_agent`` agent with ``SoloFlowMiddleware(auto_execute=True)`` does the 32 training
requests (8 per job) while SoloFlow watches; a person approves every flow it proposes. Then:

1. **near misses** — the corpus's 249 requests that ask for none of the jobs (negations,
   the same address with another intent, the jobs' words with another intent, bare
   addresses, empty and non-English text, two requests in one, two addresses), hostile ones
   of our own (``routing_world.HOSTILE``) and the 99 near misses a hostile review found the
   first gate running (``routing_world.REVIEW``): how many ran a flow (each is printed), how
   many side effects;
2. **new phrasings, cold** — the 120 new phrasings of the four jobs with new addresses,
   each in a store whose evidence is the training requests only: the share served with
   zero model calls *and* the right side effect for the right person; wrong effects;
   With ``--why``, the reasons the gate gave the job's flow for each one it missed;
3. **new phrasings, warm** — the same requests as a stream (seeded order): a request the
   flow did not take is done by the agent (which calls the offered flow tool when the
   middleware hints it, as a model would), and its text becomes evidence of the job;
4. **near misses, warm** — the near misses of 1. again, against the store the stream taught.

Side by side, the model calls per request of the agent alone, of the agent with the hinted
flow tool, and of a routed run. Run: ``python benchmarks/bench_routing.py [--db URL]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import time_machine  # noqa: E402
from langchain.agents import create_agent  # noqa: E402

from soloflow_core.learning import LearningConfig  # noqa: E402
from soloflow_core.learning.promotion import approve_candidate  # noqa: E402
from soloflow_core.store import Store  # noqa: E402
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware  # noqa: E402

USER, AGENT = "shop-user", "shop"
WORLDS = {
    "shop": "benchmarks.routing_world",
    "airline": "benchmarks.routing_world_airline",
    "bank": "benchmarks.routing_world_bank",
    "helpdesk": "benchmarks.routing_world_helpdesk",
    "workspace": "benchmarks.routing_world_workspace",
}
W: Any = None
"""The world module (``--world``): its tools, corpus, scripted model and effect log."""


def _config(learn: bool) -> LearningConfig:
    return LearningConfig(
        auto_execute=True, learning_timeout=120, min_steps_to_learn=2, enabled=learn
    )


def _agent(
    store: Store, *, learn: bool, use_flow_tools: bool
) -> tuple[Any, SoloFlowMiddleware, Any]:
    mw = SoloFlowMiddleware(
        store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=_config(learn)
    )
    model = W.agent_model()
    if use_flow_tools:  # the typed flow tool of each job, by the job's last (effect) tool
        for flow_name, tool_name in mw._typed.items():
            meta = store.get_flow_meta(flow_name, user_id=USER, agent_id=AGENT)
            for job, effect in W.EFFECT_TOOL.items():
                if meta.skill_keys and meta.skill_keys[-1] == effect:
                    model.flow_tool_for[job] = tool_name
    agent = create_agent(model, tools=W.TOOLS, system_prompt="Support.", middleware=[mw])
    return agent, mw, model


def _ask(agent: Any, mw: SoloFlowMiddleware, model: Any, text: str) -> dict[str, Any]:
    before, effects = model.calls, len(W.EFFECTS)
    t0 = time.perf_counter()
    out = agent.invoke(
        {"messages": [{"role": "user", "content": text}]}, config={"callbacks": mw.callbacks}
    )
    last = out["messages"][-1]
    return {
        "calls": model.calls - before,
        "flow": last.response_metadata.get("soloflow_flow"),
        "effects": W.EFFECTS[effects:],
        "ms": (time.perf_counter() - t0) * 1000,
    }


def _trained(url: str) -> Store:
    store = Store.open(url)
    agent, mw, model = _agent(store, learn=True, use_flow_tools=False)
    for r in W.load_corpus():
        if r["split"] == "train":
            _ask(agent, mw, model, r["text"])
    mw.close()
    for cand in store.list_candidates(user_id=USER, agent_id=AGENT):
        approve_candidate(store, cand.id, user_id=USER, agent_id=AGENT, config=_config(True))
    return store


def _copy_sqlite(src: Path, dst: Path) -> str:
    import sqlite3

    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return f"sqlite:///{dst}"


def _why(store: Store, mw: SoloFlowMiddleware, r: dict[str, Any], reasons: Counter[str]) -> None:
    """Print the reasons the gate gave the job's own flow for a missed phrasing, and count
    their kinds (the text before a colon or a parenthesis)."""
    effect = W.EFFECT_TOOL[r["job"]]
    checks = {c.name: c for c in mw.route(r["text"]).checks}
    own = [
        c
        for name, c in checks.items()
        if store.get_flow_meta(name, user_id=USER, agent_id=AGENT).skill_keys[-1] == effect
    ]
    why = list(own[0].reasons) if own else ["procedural memory did not find the job's flow"]
    print(f"  miss [{r['job']}] {r['text']}")
    for line in why:
        print(f"      - {line}")
    reasons.update({line.split(":")[0].split(" (")[0] for line in why})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="order of the warm stream")
    parser.add_argument(
        "--why", action="store_true", help="print why the gate declined each missed new phrasing"
    )
    parser.add_argument("--world", choices=sorted(WORLDS), default="shop", help="the world")
    args = parser.parse_args()
    global W
    W = importlib.import_module(WORLDS[args.world])
    with clock(W):
        _measure(args)


def clock(world: Any) -> contextlib.AbstractContextManager[Any]:
    """The world's own clock (its ``CLOCK``, ticking from there) where its dated jobs act on
    days to come; else the real one."""
    day = getattr(world, "CLOCK", None)
    return time_machine.travel(day, tick=True) if day else contextlib.nullcontext()


def _measure(args: argparse.Namespace) -> None:
    corpus = W.load_corpus()
    near = [r["text"] for r in corpus if r["split"] == "test" and r["job"] is None]
    near += [text for text, job in W.HOSTILE if job is None]
    near += [r["text"] for r in W.load_review() if r["job"] is None]
    paraphrases = [r for r in corpus if r["category"] == "paraphrase"]
    tmp = Path(tempfile.mkdtemp())
    trained_db = tmp / "trained.db"
    store = _trained(f"sqlite:///{trained_db}")
    flows = store.list_flow_meta(user_id=USER, agent_id=AGENT)
    print(
        f"learned and approved {len(flows)} flows from {sum(r['split'] == 'train' for r in corpus)} "
        "training requests:"
    )
    for m in flows:
        print(f"  {m.name}  keywords={list(m.trigger_keywords)}")
    store.close()

    # 1. near misses: the learning store as it is (no evidence grows from them: no job is done)
    W.EFFECTS.clear()
    store = Store.open(_copy_sqlite(trained_db, tmp / "near.db"))
    agent, mw, model = _agent(store, learn=True, use_flow_tools=True)
    ran, effects, calls, ms = 0, 0, [], []
    for text in near:
        got = _ask(agent, mw, model, text)
        if got["flow"] is not None or got["calls"] == 0:
            ran += 1
            print(f"  RAN for a near miss ({got['flow']}): {text[:160]!r}")
        effects += sum(bool(e.get("side_effects", True)) for e in got["effects"])
        calls.append(got["calls"])
        ms.append(got["ms"])
    mw.close()
    store.close()
    print(
        f"\nnear misses and unrelated: {len(near)} requests; flows run: {ran}; side effects: "
        f"{effects}; model calls per request median {statistics.median(calls)}; "
        f"agent time median {statistics.median(ms):.1f} ms"
    )

    # 2. cold: each phrasing against the training evidence only
    W.EFFECTS.clear()
    store = Store.open(_copy_sqlite(trained_db, tmp / "cold.db"))
    agent, mw, model = _agent(store, learn=False, use_flow_tools=False)
    cold: Counter[str] = Counter()
    cold_wrong = 0
    alone_calls: list[int] = []
    reasons: Counter[str] = Counter()
    for r in paraphrases:
        got = _ask(agent, mw, model, r["text"])
        routed = got["calls"] == 0
        right = W.served(r, got["effects"])
        cold[r["job"]] += routed and right
        cold_wrong += routed and not right
        if not routed:
            alone_calls.append(got["calls"])
            if args.why:
                _why(store, mw, r, reasons)
    mw.close()
    if args.why:
        print("\nreasons the gate gave for the missed phrasings (each miss counts each once):")
        for reason, n in reasons.most_common():
            print(f"  {n:>3}  {reason}")
    store.close()

    # 3. warm: a stream; the agent's handling of what the flows did not take is evidence
    W.EFFECTS.clear()
    store = Store.open(_copy_sqlite(trained_db, tmp / "warm.db"))
    agent, mw, model = _agent(store, learn=True, use_flow_tools=True)
    stream = list(paraphrases)
    random.Random(args.seed).shuffle(stream)
    warm: Counter[str] = Counter()
    warm_wrong = 0
    thirds: list[list[bool]] = [[], [], []]
    hinted_calls: list[int] = []
    for k, r in enumerate(stream):
        got = _ask(agent, mw, model, r["text"])
        routed = got["calls"] == 0
        right = W.served(r, got["effects"])
        warm[r["job"]] += routed and right
        warm_wrong += routed and not right
        thirds[k * 3 // len(stream)].append(routed and right)
        if not routed and got["flow"] is None and got["calls"] <= 2:
            hinted_calls.append(got["calls"])
    mw.close()
    # 4. the near misses again, against the store the stream taught (its evidence grown)
    agent, mw, model = _agent(store, learn=False, use_flow_tools=True)
    warm_ran = 0
    for text in near:
        got = _ask(agent, mw, model, text)
        if got["flow"] is not None or got["calls"] == 0:
            warm_ran += 1
            print(f"  RAN for a near miss, warm ({got['flow']}): {text[:160]!r}")
    mw.close()
    store.close()
    print(f"\nnear misses against the warm store: {len(near)} requests; flows run: {warm_ran}")

    total = len(paraphrases)
    print(f"\nnew phrasings of learned jobs (new ids): {total}")
    print("  job               cold   warm")
    for job in W.JOBS:
        n = sum(r["job"] == job for r in paraphrases)
        print(f"  {job:<16} {cold[job]:>3}/{n:<3} {warm[job]:>3}/{n:<3}")
    print(
        f"  served with no model call and the right effect: cold {sum(cold.values())}/{total} "
        f"= {sum(cold.values()) / total:.0%}, warm {sum(warm.values())}/{total} = "
        f"{sum(warm.values()) / total:.0%} (by thirds of the stream: "
        + ", ".join(f"{sum(t) / len(t):.0%}" for t in thirds)
        + ")"
    )
    print(f"  wrong effects of routed runs: cold {cold_wrong}, warm {warm_wrong}")
    if alone_calls:
        print(
            f"  model calls per request — agent alone: median {statistics.median(alone_calls)}; "
            f"with the hinted flow tool: median "
            f"{statistics.median(hinted_calls) if hinted_calls else '-'} ({len(hinted_calls)} requests); "
            "routed: 0"
        )


if __name__ == "__main__":
    main()
