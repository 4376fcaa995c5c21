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

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from routing_support import CONFIG, SHOP, Desk, approve, world

from benchmarks import routing_world as W
from soloflow_core.learning.promotion import submit_flow
from soloflow_core.memory.procedural import ProceduralMemory
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_langgraph.routing.middleware import SoloFlowMiddleware

SHOP_WORLD = world(SHOP)
USER, AGENT = SHOP_WORLD.user, SHOP_WORLD.agent
Trained = Callable[[str], Store]

HOSTILE = [text for text, _ in W.HOSTILE]
"""Requests of our own (the password reset's flow is not approved in these tests)."""


@pytest.fixture(autouse=True)
def _effects() -> Iterator[None]:
    W.EFFECTS.clear()
    yield
    W.EFFECTS.clear()


def _shop(store: Store, *, approve_only: set[str] | None = None) -> Desk:
    """The shop agent after its training requests, with the flows a person approved (all the
    learned ones unless ``approve_only`` names jobs by their effect tool)."""
    approve(store, SHOP_WORLD, only=approve_only)
    # Built after the approvals: its typed flow tools are declared when the agent is built.
    return Desk(store, SHOP_WORLD)


def test_the_learned_jobs_are_flows_with_replies(trained_sqlite: Trained):
    sqlite_store = trained_sqlite(SHOP)
    with _shop(sqlite_store):
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


def test_near_misses_and_hostile_requests_run_no_flow(trained_store: Trained):
    store = trained_store(SHOP)
    with _shop(store, approve_only={"send_email", "notify_customer", "refund_order"}) as desk:
        near = [r["text"] for r in W.load_corpus() if r["split"] == "test" and r["job"] is None]
        near += [r["text"] for r in W.load_review() if r["job"] is None]
        assert len(near) >= 300
        ran: list[tuple[str, Any]] = []
        for text in [*near, *HOSTILE]:
            got = desk.ask(text)
            if got["flow"] is not None or got["effects"] or got["calls"] == 0:
                ran.append((text, got))
        assert ran == []
        assert store.list_flow_runs(user_id=USER, agent_id=AGENT) == []


def test_new_phrasings_that_run_do_the_right_job_for_the_right_person(trained_sqlite: Trained):
    with _shop(trained_sqlite(SHOP)) as desk:
        served, wrong = 0, []
        paraphrases = [r for r in W.load_corpus() if r["category"] == "paraphrase"]
        for r in paraphrases:
            got = desk.ask(r["text"])
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
            assert desk.ask(firsts[job]["text"])["calls"] == 0, firsts[job]["text"]


def test_a_user_submitted_flow_for_the_same_job_outranks_the_learned_one(trained_sqlite: Trained):
    store = trained_sqlite(SHOP)
    _shop(store, approve_only={"notify_customer"}).close()
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
    mw = SoloFlowMiddleware(store, user_id=USER, agent_id=AGENT, tools=W.TOOLS, config=CONFIG)
    try:
        decision = mw.route(task)
        assert decision.run == "Shipment update"
    finally:
        mw.close()


def test_flows_route_explains_each_verdict_without_running(
    trained_sqlite: Trained, sqlite_url: str
):
    import json

    from typer.testing import CliRunner

    from soloflow_langgraph.cli import app

    sqlite_store = trained_sqlite(SHOP)
    _shop(sqlite_store, approve_only={"notify_customer"}).close()

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


def test_a_person_confirms_a_phrasing_with_flows_evidence(trained_sqlite: Trained, sqlite_url: str):
    import json

    from typer.testing import CliRunner

    from soloflow_langgraph.cli import app

    sqlite_store = trained_sqlite(SHOP)
    with _shop(sqlite_store, approve_only={"send_email"}) as desk:
        mw = desk.mw
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


def test_a_word_the_model_confirmed_once_is_not_yet_a_word_of_the_job(trained_sqlite: Trained):
    sqlite_store = trained_sqlite(SHOP)
    with _shop(sqlite_store, approve_only={"send_email"}) as desk:
        mw = desk.mw
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
