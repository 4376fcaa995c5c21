"""Routing on real traffic: a flow runs with no model call only for its own job.

A real ``create_agent`` agent of the support shop (benchmarks/routing_world.py) learns its
jobs from the blind corpus's training requests; a person approves the flows. Then every near
miss of the corpus — negations, the same address with another intent, the jobs' words with
another intent, bare addresses, empty and non-English text, two requests in one, two
addresses — the near misses a hostile review found (questions about a past refund,
retractions, other people's orders, look-alike addresses…) and hostile requests of our own
must run no flow and cause no side effect; new phrasings of the learned jobs that do run must
do the right job for the right person.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent

from benchmarks import routing_world as W
from soloflow_core.learning import LearningConfig
from soloflow_core.learning.promotion import approve_candidate, submit_flow
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware

USER, AGENT = "shop-user", "shop"
CONFIG = LearningConfig(auto_execute=True, learning_timeout=120, min_steps_to_learn=2)

HOSTILE = [text for text, _ in W.HOSTILE]
"""Requests of our own (the password reset's flow is not approved in these tests)."""


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def _ask(agent: Any, mw: SoloFlowMiddleware, model: W.ShopModel, text: str) -> dict[str, Any]:
    before, effects = model.calls, len(W.EFFECTS)
    result = agent.invoke(
        {"messages": [{"role": "user", "content": text}]}, config={"callbacks": mw.callbacks}
    )
    last = result["messages"][-1]
    return {
        "answer": str(last.content),
        "calls": model.calls - before,
        "flow": last.response_metadata.get("soloflow_flow"),
        "effects": W.EFFECTS[effects:],
    }


def _shop(
    store: Store, *, approve: set[str] | None = None
) -> tuple[Any, SoloFlowMiddleware, W.ShopModel]:
    """The shop agent after its training requests, with the flows a person approved (all the
    learned ones unless ``approve`` names jobs by their effect tool)."""
    mw = SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=CONFIG)
    model = W.shop_model()
    agent = create_agent(model, tools=W.TOOLS, system_prompt="Support.", middleware=[mw])
    for r in W.load_corpus():
        if r["split"] == "train":
            _ask(agent, mw, model, r["text"])
    for cand in store.list_candidates(user_id=USER, agent_id=AGENT):
        if approve is None or cand.tool_sequence[-1] in approve:
            approve_candidate(store, cand.id, user_id=USER, agent_id=AGENT, config=CONFIG)
    mw.close()
    # Built again: its typed flow tools are declared when the agent is built.
    mw = SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=CONFIG)
    model = W.shop_model()
    agent = create_agent(model, tools=W.TOOLS, system_prompt="Support.", middleware=[mw])
    return agent, mw, model


def test_the_learned_jobs_are_flows_with_replies(sqlite_store: Store):
    agent, mw, _ = _shop(sqlite_store)
    try:
        flows = {
            m.skill_keys[-1]: m for m in sqlite_store.list_flow_meta(user_id=USER, agent_id=AGENT)
        }
        assert set(flows) >= {"notify_customer", "refund_order", "send_email"}
        for meta in flows.values():
            flow = sqlite_store.get_flow(meta.name, user_id=USER, agent_id=AGENT).flow
            assert flow.reply_template, meta.name  # the agent answered the same way every time
            # Values, addresses and the generaliser's words are never trigger keywords.
            assert not {"com", "example", "org", "step", "also", "task", "chosen"} & set(
                meta.trigger_keywords
            )
            assert meta.confidence == pytest.approx(5 / 6)  # a person approved: the approval prior
    finally:
        mw.close()


def test_near_misses_and_hostile_requests_run_no_flow(store: Store):
    agent, mw, model = _shop(store, approve={"send_email", "notify_customer", "refund_order"})
    try:
        near = [r["text"] for r in W.load_corpus() if r["split"] == "test" and r["job"] is None]
        near += [r["text"] for r in W.load_review() if r["job"] is None]
        assert len(near) >= 300
        ran: list[tuple[str, Any]] = []
        for text in [*near, *HOSTILE]:
            got = _ask(agent, mw, model, text)
            if got["flow"] is not None or got["effects"] or got["calls"] == 0:
                ran.append((text, got))
        assert ran == []
        assert store.list_flow_runs(user_id=USER, agent_id=AGENT) == []
    finally:
        mw.close()


def test_new_phrasings_that_run_do_the_right_job_for_the_right_person(sqlite_store: Store):
    agent, mw, model = _shop(sqlite_store)
    try:
        served, wrong = 0, []
        paraphrases = [r for r in W.load_corpus() if r["category"] == "paraphrase"]
        for r in paraphrases:
            got = _ask(agent, mw, model, r["text"])
            if got["calls"] != 0:
                continue  # the agent did it (hinted or not): never a wrong effect either
            if W.right_effect(r["job"], r["values"]["email"], got["effects"]):
                served += 1
            else:
                wrong.append((r["text"], got))
        assert wrong == []
        assert served >= 10  # the benchmark measures the share (benchmarks/RESULTS.md)
        # Each job's near-verbatim phrasing with a new address runs with no model call.
        firsts = {}
        for r in paraphrases:
            firsts.setdefault(r["job"], r)
        for job in ("order_status", "refund"):
            assert _ask(agent, mw, model, firsts[job]["text"])["calls"] == 0, firsts[job]["text"]
    finally:
        mw.close()


def test_a_user_submitted_flow_for_the_same_job_outranks_the_learned_one(sqlite_store: Store):
    store = sqlite_store
    agent, mw, model = _shop(store, approve={"notify_customer"})
    learned = store.list_flow_meta(user_id=USER, agent_id=AGENT)[0]
    mine = FlowDefinition(
        name="Shipment update",
        description="Tell a customer where their parcel is.",
        steps=[
            FlowStep(id="c", skill_key="find_customer", input_map={"email": "{{_trigger.email}}"}),
            FlowStep(
                id="o",
                skill_key="list_orders",
                input_map={"customer_id": "{{c.customer_id}}"},
                depends_on=["c"],
            ),
            FlowStep(
                id="t",
                skill_key="track_shipment",
                input_map={"order_id": "{{o.0.order_id}}"},
                depends_on=["o"],
            ),
            FlowStep(
                id="n",
                skill_key="notify_customer",
                depends_on=["t"],
                input_map={
                    "customer_id": "{{c.customer_id}}",
                    "order_id": "{{t.order_id}}",
                    "status": "{{t.status}}",
                },
            ),
        ],
        input_schema={
            "type": "object",
            "properties": {"email": {"type": "string"}},
            "required": ["email"],
        },
        extraction={
            "email": {
                "shape": "email",
                "pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
                "anchor": "",
                "type": "string",
            }
        },
    )
    submit_flow(store, mine, user_id=USER, agent_id=AGENT)
    task = "Where is my order? I'm zed@example.com, please track it"
    matches = ProceduralMemory(store).find_workflow(
        USER, AGENT, task, available_tools=[t.name for t in W.TOOLS]
    )
    by_name = {m.name: m for m in matches}
    # The learned flow's words match the task better: by score alone it would win...
    assert by_name[learned.name].score > by_name["Shipment update"].score
    # ...but a person's flow for the same job (the same tools) comes first, by rule.
    assert matches[0].name == "Shipment update" and learned.name in matches[0].outranks
    mw.close()
    mw = SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=CONFIG)
    try:
        decision = mw.route(task)
        assert decision.run == "Shipment update"
    finally:
        mw.close()


def test_flows_route_explains_each_verdict_without_running(sqlite_store: Store, sqlite_url: str):
    import json

    from typer.testing import CliRunner

    from soloflow_langgraph.cli import app

    _, mw, _ = _shop(sqlite_store, approve={"notify_customer"})
    mw.close()
    W.EFFECTS.clear()  # the training requests' own

    def route(text: str) -> dict[str, Any]:
        res = CliRunner().invoke(
            app,
            [
                "--db",
                sqlite_url,
                "--user",
                USER,
                "--agent",
                AGENT,
                "flows",
                "route",
                text,
                "--json",
            ],
        )
        assert res.exit_code == 0, res.output
        return dict(json.loads(res.stdout))

    yes = route("Where is my order? I'm zed@example.com")
    assert yes["run"] and yes["inputs"] == {"email": "zed@example.com"}
    no = route("Don't track my order, zed@example.com")
    assert no["run"] is None and any("negates" in r for f in no["flows"] for r in f["reasons"])
    assert W.EFFECTS == [] and sqlite_store.list_flow_runs(user_id=USER, agent_id=AGENT) == []


def test_a_person_confirms_a_phrasing_with_flows_evidence(sqlite_store: Store, sqlite_url: str):
    import json

    from typer.testing import CliRunner

    from soloflow_langgraph.cli import app

    agent, mw, model = _shop(sqlite_store, approve={"send_email"})
    try:
        name = next(
            m.name
            for m in sqlite_store.list_flow_meta(user_id=USER, agent_id=AGENT)
            if m.skill_keys[-1] == "send_email"
        )
        request = "Please send me my latest bill, zed@example.com"
        assert mw.route(request).run is None  # 'bill' is no word of the job

        def evidence(*args: str) -> dict[str, Any]:
            res = CliRunner().invoke(
                app,
                ["--db", sqlite_url, "--user", USER, "--agent", AGENT, "flows", "evidence"]
                + [name, *args, "--json"],
            )
            assert res.exit_code == 0, res.output
            return dict(json.loads(res.stdout))

        before = evidence()["evidence"]
        assert {e["source"] for e in before} >= {"learned"}
        got = evidence("--add", "send my latest bill to me")
        assert got["added"] == 1 and got["evidence"][0] == {
            "task": "send my latest bill to me",
            "source": "person",
        }
        assert evidence("--add", "send my latest bill to me")["added"] == 0  # once
        decision = mw.route(request)
        assert decision.run == name and decision.inputs == {"email": "zed@example.com"}
        # a person's word relaxes nothing else: a negation or another action still stops it
        assert mw.route("Please don't send me my latest bill, zed@example.com").run is None
        assert mw.route("Please delete my latest bill, zed@example.com").run is None
        res = CliRunner().invoke(
            app,
            ["--db", sqlite_url, "--user", USER, "--agent", AGENT, "flows", "evidence", name]
            + ["--add", "  "],
        )
        assert res.exit_code == 1 and "--add needs a phrasing" in res.output
        # a phrasing with no word of a job (a bare address, a letter, courtesy) is refused by
        # name, and one too long is refused rather than cut
        for text in ("zed@example.com", "a", "thanks!", "x " * 3000):
            res = CliRunner().invoke(
                app,
                ["--db", sqlite_url, "--user", USER, "--agent", AGENT, "flows", "evidence", name]
                + ["--add", text],
            )
            assert res.exit_code == 1, text
            assert "no word of a job" in res.output or "is over 4,000" in res.output, res.output
        # stored text never drives the terminal: control characters are shown escaped
        assert evidence("--add", "send my bill \x1b[31mnow\x07")["added"] == 1
        res = CliRunner().invoke(
            app,
            ["--db", sqlite_url, "--user", USER, "--agent", AGENT, "flows", "evidence", name],
        )
        assert res.exit_code == 0 and "\x1b" not in res.output and "\x07" not in res.output
        assert "\\x1b[31mnow\\x07" in res.output
    finally:
        mw.close()


def test_a_word_the_model_confirmed_once_is_not_yet_a_word_of_the_job(sqlite_store: Store):
    agent, mw, model = _shop(sqlite_store, approve={"send_email"})
    try:
        name = next(
            m.name
            for m in sqlite_store.list_flow_meta(user_id=USER, agent_id=AGENT)
            if m.skill_keys[-1] == "send_email"
        )
        ns = {"user_id": USER, "agent_id": AGENT}
        request = "Please send me my latest bill, zed@example.com"
        sqlite_store.add_flow_evidence(
            name, [("t1", "send my latest bill please a@x.io")], source="flow_tool", **ns
        )
        assert mw.route(request).run is None  # one hinted text: 'bill' not yet known
        sqlite_store.add_flow_evidence(
            name, [("t2", "can you send the latest bill, b@x.io")], source="flow_tool", **ns
        )
        assert mw.route(request).run == name  # two: known
    finally:
        mw.close()
