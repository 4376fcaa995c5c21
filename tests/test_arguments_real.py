"""Arguments right on real data (issue 20, part 4): near-constants with outliers, values
read from task texts by their shape, composed strings as templates, YAML outputs searched
and followed, no task-specific constant in a step with side effects."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re

import pytest
from conftest import TAU_BENCH

from soloflow_core.flow.templates import render
from soloflow_core.generalize.align import find_occurrence
from soloflow_core.generalize.arguments import (
    Occurrence,
    extract_inputs,
    generalize,
    learn_extraction,
)
from soloflow_core.generalize.propose import propose
from soloflow_core.generalize.shapes import learn_shape
from soloflow_core.memory.binding import bind_inputs
from soloflow_core.memory.reading import read_request
from soloflow_core.testing.synthetic_ledger import generate_ledger


def _occ(task: str, args: list[dict], outputs: list) -> Occurrence:
    return Occurrence(task=task, args=args, outputs=outputs)


# ------------------------------------------------------------------ near-constants


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_planted_constants_with_outliers_stay_constants(seed):
    """On planted ledgers of other seeds, a planted constant that one occurrence in twelve
    gets wrong is still a constant, and the outlier is reported; the other sources stay
    right."""
    led = generate_ledger(
        runs=300,
        workflows=4,
        seed=seed,
        noise=0.0,
        retry_rate=0.0,
        swap_rate=0.0,
        failed_run_rate=0.0,
        truncate_rate=0.0,
        min_len=3,
        max_len=8,
        planted_fraction=0.9,
    )
    planted_constants = right = total = 0
    for wf in led.workflows:
        occs = []
        for i, lab in enumerate(led.labels):
            if lab.workflow == wf.index and lab.kind == "planted":
                run = led.runs[i]
                o = find_occurrence(
                    run.tool_calls, wf.tools, task=run.task or "", repeated_steps=()
                )
                if o is not None:
                    occs.append(o)
        assert len(occs) >= 12, (seed, wf.index)
        # The agent got each constant wrong once in twelve occurrences.
        for k in range(0, len(occs), 12):
            args = [dict(a) for a in occs[k].args]
            for i, step in enumerate(wf.steps):
                for name, src in step.args:
                    if src.kind == "constant":
                        args[i][name] = "outlier-value"
            occs[k] = dataclasses.replace(occs[k], args=args)
        gen = generalize(occs, side_effects=[not s.read_only for s in wf.steps])
        for i, step in enumerate(wf.steps):
            for name, src in step.args:
                got = gen.sources[i][name]
                total += 1
                if src.kind == "constant":
                    planted_constants += 1
                    assert got.kind == "constant" and gen.input_maps[i][name] == src.value
                    assert name not in gen.input_schema["required"]
                    assert any(
                        n.startswith(f"step_{i + 1}.{name}:")
                        and "outlier-value" in n
                        and "occurrence 1)" in n
                        for n in gen.notes
                    )
                    right += 1
                elif src.kind == "upstream":
                    path = src.path.replace("[0]", ".0")
                    right += gen.input_maps[i][name] == "{{" + f"step_{src.step + 1}.{path}" + "}}"
                else:
                    right += got.kind == "task"
    assert planted_constants > 0
    assert right == total


@pytest.mark.parametrize("seed", [34, 35])
def test_planted_sources_through_the_detector_despite_agent_noise(store, seed):
    """The planted ledger with its agent noise (stray calls, retries, swaps, failed and
    cut-short runs), through the detector: an unrelated call of a step's tool taken for the
    step in one occurrence no longer makes every argument of that step drop out."""
    from soloflow_core.mining.detector import detect_candidates
    from soloflow_core.models import DetectorConfig

    led = generate_ledger(runs=400, workflows=4, seed=seed, min_len=3, max_len=8)
    store.add_runs(list(led.runs))
    effects = {s.tool: not s.read_only for w in led.workflows for s in w.steps}
    config = DetectorConfig(max_candidates=6, side_effects=effects)
    cands = {
        tuple(c.tool_sequence): c
        for c in detect_candidates(
            store, user_id="default", agent_id="default", save=False, config=config
        )
    }
    right = total = 0
    for wf in led.workflows:
        flow = cands[wf.tools].proposed_flow
        for i, step in enumerate(wf.steps):
            for name, src in step.args:
                got = flow.steps[i].input_map.get(name)
                if src.kind == "constant":
                    want = src.value
                elif src.kind == "upstream":
                    want = "{{" + f"step_{src.step + 1}.{src.path.replace('[0]', '.0')}" + "}}"
                else:
                    want = "{{_trigger." + str(got).strip("{}").partition(".")[2] + "}}"
                    assert str(got).strip("{}").partition(".")[2] in flow.extraction
                total += 1
                right += got == want
    assert right == total


def test_a_value_most_occurrences_share_is_not_a_constant_below_the_share():
    occs = [_occ(f"t{k}", [{"mode": "fast" if k < 8 else "slow"}], ["ok"]) for k in range(10)]
    gen = generalize(occs)  # 8 of 10: not enough
    assert gen.input_maps[0] == {"mode": "{{_trigger.mode}}"}
    occs = [_occ(f"t{k}", [{"mode": "fast" if k < 9 else "slow"}], ["ok"]) for k in range(10)]
    gen = generalize(occs)
    assert gen.input_maps[0] == {"mode": "fast"} and gen.sources[0]["mode"].confidence == 0.9
    assert gen.input_schema["required"] == []


# ------------------------------------------------------------------ values by their shape


def test_tau_bench_user_id_is_read_from_the_task_by_its_shape():
    runs = [json.loads(line) for line in gzip.open(TAU_BENCH)]
    with_user = [
        r for r in runs if r["tool_calls"] and r["tool_calls"][0]["name"] == "get_user_details"
    ]
    occs = [
        _occ(r["task"], [r["tool_calls"][0]["args"]], [r["tool_calls"][0]["output"]])
        for r in with_user[:20]
    ]
    gen = generalize(occs)
    assert gen.sources[0]["user_id"].kind == "task"
    rule = gen.extraction["user_id"]
    assert rule["shape"] == "learned" and rule["anchor"] == ""
    # Every task of the file, read by the learned rule, gives that run's user id.
    for r in with_user:
        assert extract_inputs(gen.extraction, r["task"]) == {
            "user_id": r["tool_calls"][0]["args"]["user_id"]
        }
    # A new wording binds it at run time too (the routing gate's binding).
    schema = gen.input_schema
    bound = bind_inputs(
        schema, gen.extraction, read_request("Hi, I'm noah_kim_1234 and I need help")
    )
    assert bound.inputs == {"user_id": "noah_kim_1234"}


def test_learned_shapes():
    assert (
        learn_shape(["mia_li_3668", "aarav_ahmed_6699", "ana_de_la_cruz_1"]) == r"(?:[a-z]+_)+\d+"
    )
    assert learn_shape(["INV-31", "INV-7"]) == r"(?:[A-Z]+\-)+\d+"
    assert learn_shape(["hello", "world"]) is None  # one class of characters says nothing
    assert learn_shape(["ab_12", "AB-12"]) is None  # the values differ in shape
    rule = learn_extraction(
        ["aarav_ahmed_6699", "raj_sanchez_7340"],
        ["You are aarav_ahmed_6699, flying soon", "Your user id is raj_sanchez_7340."],
    )
    assert rule is not None and rule["shape"] == "learned"
    # A shape that finds another value first in one task is no rule.
    assert learn_extraction(["ab_12", "cd_34"], ["ab_12 here", "first xy_99 then cd_34"]) is None


# ------------------------------------------------------------------ composed strings


def test_a_composed_message_becomes_a_template_over_the_upstream_value():
    occs = [
        _occ(
            f"send invoice {n} to {e}",
            [{"id": n}, {"to": e, "body": f"Your invoice: https://x.io/pdf/INV-{n}.pdf"}],
            [{"url": f"https://x.io/pdf/INV-{n}.pdf", "n": n}, "sent"],
        )
        for n, e in ((31, "a@x.io"), (7, "b@y.io"), (58, "c@z.io"))
    ]
    gen = generalize(occs)
    assert gen.input_maps[1]["body"] == "Your invoice: {{step_1.url}}"
    assert gen.sources[1]["body"].kind == "composed"
    assert "body" not in gen.input_schema["properties"]
    assert render(
        gen.input_maps[1]["body"],
        inputs={},
        results={"step_1": {"url": "https://x.io/pdf/INV-9.pdf"}},
    ) == ("Your invoice: https://x.io/pdf/INV-9.pdf")


def test_a_composed_string_over_a_task_input():
    occs = [
        _occ(f"greet {u}", [{"u": u}, {"msg": f"Hello {u}, welcome"}], ["ok", "sent"])
        for u in ("ann_1", "bob_2", "cy_3")
    ]
    gen = generalize(occs)
    assert gen.input_maps[1]["msg"] == "Hello {{_trigger.u}}, welcome"


# ------------------------------------------------------------------ YAML outputs


def _yaml_event(eid: str, place: str) -> str:
    return (
        f"- all_day: false\n  description: Weekly class.\n  end_time: 2024-05-28 19:00:00\n"
        f"  id_: '{eid}'\n  location: {place}\n  participants:\n  - emma@x.com\n"
    )


def test_yaml_outputs_are_searched_and_followed():
    occs = [
        _occ(f"move my {q}", [{"query": q}, {"event_id": eid}], [_yaml_event(eid, place), "done"])
        for q, eid, place in (
            ("yoga", "25", "Hall"),
            ("dentist", "7", "Clinic"),
            ("gym", "31", "Gym"),
        )
    ]
    gen = generalize(occs)
    assert gen.input_maps[1] == {"event_id": "{{step_1.0.id_}}"}
    # The runtime follows the same path into a new YAML answer.
    assert render(gen.input_maps[1], inputs={}, results={"step_1": _yaml_event("99", "Pool")}) == {
        "event_id": "99"
    }
    # Dates stay text (a tool argument stays JSON).
    assert (
        render("{{step_1.0.end_time}}", inputs={}, results={"step_1": _yaml_event("1", "x")})
        == "2024-05-28 19:00:00"
    )


def test_plain_text_is_not_read_as_yaml():
    from soloflow_core.flow.templates import maybe_json

    assert maybe_json("Reservation cancelled.\nThank you") == "Reservation cancelled.\nThank you"
    assert maybe_json("note: one line") == "note: one line"
    assert maybe_json("id: 7\nname: Ann") == {"id": 7, "name": "Ann"}


# ------------------------------------------------------------------ one task, replayed


def test_a_writing_step_takes_no_constant_from_replays_of_one_task():
    task = "cancel reservation ZFA04Y for me"
    occs = [
        _occ(task, [{"user_id": "u_1"}, {"reservation_id": "ZFA04Y"}], [{"ok": 1}, "ok"])
        for _ in range(3)
    ]
    p = propose(
        ["get_user", "cancel_reservation"], occs, observed=3, side_effects={"get_user": False}
    )
    steps = p.flow.steps
    assert steps[0].input_map == {"user_id": "u_1"}  # read-only: a constant is harmless
    assert steps[1].input_map == {"reservation_id": "{{_trigger.reservation_id}}"}
    assert p.flow.extraction["reservation_id"]["pattern"]
    assert extract_inputs(p.flow.extraction, "please cancel reservation QQ11ZZ") == {
        "reservation_id": "QQ11ZZ"
    }
    # Different tasks agreeing on a value make it a constant again.
    occs = [
        _occ(f"task {k}", [{"user_id": "u_1"}, {"reservation_id": "ZFA04Y"}], [{"ok": 1}, "ok"])
        for k in range(3)
    ]
    p = propose(["get_user", "cancel_reservation"], occs, observed=3)
    assert p.flow.steps[1].input_map == {"reservation_id": "ZFA04Y"}


def test_a_value_every_task_names_is_an_input_not_a_constant():
    """One customer's different tasks all naming reservation NQNU5R (τ-bench tasks 26 and
    27): the tasks' value, not the flow's: an input from the task text, in the read-only
    lookup too (its output would feed the cancellation), never a hard-coded code."""
    texts = [
        "You are mia_li_3668. Cancel reservation NQNU5R, the trip is off.",
        "Your user id is mia_li_3668; you want reservation NQNU5R cancelled and refunded.",
        "As mia_li_3668 you ask the agent to cancel NQNU5R because of illness.",
    ]
    occs = [
        _occ(
            t,
            [{"reservation_id": "NQNU5R"}, {"reservation_id": "NQNU5R"}],
            [{"status": "active"}, "ok"],
        )
        for t in texts
    ]
    p = propose(
        ["get_reservation_details", "cancel_reservation"],
        occs,
        observed=3,
        side_effects={"get_reservation_details": False},
    )
    steps = p.flow.steps
    assert steps[0].input_map == {"reservation_id": "{{_trigger.reservation_id}}"}
    assert steps[1].input_map == {"reservation_id": "{{_trigger.reservation_id}}"}
    assert "NQNU5R" not in json.dumps([s.input_map for s in steps])
    assert extract_inputs(p.flow.extraction, "please cancel reservation QQ11ZZ") == {
        "reservation_id": "QQ11ZZ"
    }
    assert any("every task text names it" in n for n in p.notes)
    # A value the texts do not name, or only inside a longer word, stays a constant.
    occs = [
        _occ(t, [{"cabin": "economy"}, {"reservation_id": "NQNU5R"}], [{"ok": 1}, "ok"])
        for t in ("book it", "please book", "booking economyplus")
    ]
    p = propose(["search", "cancel_reservation"], occs, observed=3)
    assert p.flow.steps[0].input_map == {"cabin": "economy"}
    assert p.flow.steps[1].input_map == {"reservation_id": "NQNU5R"}


# ------------------------------------------------------------------ what the miner leaves out


def test_note_taking_tools_and_retried_failures_are_left_out_of_the_ledger(store):
    from soloflow_core.mining.detector import detect_candidates
    from soloflow_core.mining.replays import inert_tools, kept_calls, without_calls
    from soloflow_core.models import TaskRun, ToolCall

    def note(k: int) -> ToolCall:
        return ToolCall(
            name="think", args={"thought": f"the user wants option {k} of the list"}, output=""
        )

    runs = []
    for k in range(4):
        calls = [
            ToolCall(name="find", args={"q": f"q{k}"}, output={"id": f"F{k}"}),
            note(k),
            ToolCall(
                name="book", args={"id": f"F{k}", "pay": 1}, output="Error: amount", error=True
            ),
            ToolCall(name="calc", args={"expression": "2 + 3"}, output="5"),
            ToolCall(name="book", args={"id": f"F{k}", "pay": 5}, output="booked"),
            ToolCall(
                name="notify",
                args={"summary": f"booked flight number {k} for the user"},
                output="Sent",
            ),
        ]
        runs.append(TaskRun(run_id=f"r{k}", task=f"book flight {k}", tool_calls=calls))
    # notify takes free text too, but answers: an action, not a note.
    assert inert_tools(runs) == {"think"}
    assert kept_calls(
        [c.name for c in runs[0].tool_calls], [c.error for c in runs[0].tool_calls], {"think"}
    ) == [True, False, False, True, True, True]
    store.add_runs(runs)
    cols = store.read_tool_names(user_id="default", agent_id="default")
    filtered = without_calls(cols, {"think"})
    assert filtered.offsets.tolist() == [0, 4, 8, 12, 16]
    assert [filtered.names[c] for c in filtered.codes[:4]] == ["find", "calc", "book", "notify"]
    (cand,) = detect_candidates(store, user_id="default", agent_id="default", save=False)
    assert cand.tool_sequence == ["find", "calc", "book", "notify"]
    book = cand.proposed_flow.steps[2]
    assert book.input_map == {"id": "{{step_1.id}}", "pay": 5}


def test_replays_of_one_task_count_once(store):
    from soloflow_core.mining.detector import detect_candidates
    from soloflow_core.models import TaskRun, ToolCall

    def run(rid: str, task: str, rid_value: str) -> TaskRun:
        return TaskRun(
            run_id=rid,
            task=task,
            tool_calls=[
                ToolCall(name="get_user", args={"user_id": "u_1"}, output={"res": [rid_value]}),
                ToolCall(name="get_res", args={"id": rid_value}, output={"id": rid_value}),
                ToolCall(name="cancel", args={"id": rid_value}, output="ok"),
            ],
        )

    # Three trials of one task: one piece of evidence, no candidate.
    store.add_runs([run(f"t{k}", "cancel my trip ZFA04Y", "ZFA04Y") for k in range(3)])
    assert detect_candidates(store, user_id="default", agent_id="default", save=False) == []
    # Two more tasks: three pieces of evidence; the replays are said to count once.
    store.add_runs(
        [run("a", "cancel my trip QQ11ZZ", "QQ11ZZ"), run("b", "cancel trip KL22MN", "KL22MN")]
    )
    (cand,) = detect_candidates(store, user_id="default", agent_id="default", save=False)
    assert "2 of 5 occurrences replay a task already counted" in cand.explanation
    assert cand.proposed_flow.steps[2].input_map == {"id": "{{step_2.id}}"}


# ------------------------------------------------------------------ on a real agent


def test_a_real_agent_s_runs_give_a_flow_that_reads_its_task_and_composes(store, pm):
    """A real ``create_agent`` agent, captured by the handler: the user id stands in its
    requests under varying wording, a tool answers in YAML, the e-mail body is composed of
    a YAML field. The learned flow reads the id from a new wording by its shape, follows the
    YAML answer and composes the body, with no model call."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool

    from soloflow_core.mining.detector import detect_candidates
    from soloflow_langgraph import SoloFlowCallbackHandler, inputs_from_task, run_flow
    from soloflow_langgraph.testing import ScriptedChatModel

    sent: list[dict] = []

    @tool
    def lookup_account(user_id: str) -> str:
        """Find an account."""
        return json.dumps({"account": "ACC-" + user_id.split("_")[-1], "user_id": user_id})

    @tool
    def latest_invoice(account: str) -> str:
        """The account's latest invoice, as YAML."""
        n = account.split("-")[-1]
        return f"invoice:\n  id: INV-{n}\n  url: https://x.io/pdf/INV-{n}.pdf\n  due: 2024-05-28\n"

    @tool
    def send_email(to_user: str, body: str) -> str:
        """Send an e-mail to a user."""
        sent.append({"to_user": to_user, "body": body})
        return "sent"

    def script(messages):
        tool_msgs = [m for m in messages if isinstance(m, ToolMessage)]
        user = re.search(r"[a-z]+_[a-z]+_\d+", messages[0].content).group(0)
        step = len(tool_msgs)
        if step == 0:
            return AIMessage(
                "", tool_calls=[{"name": "lookup_account", "args": {"user_id": user}, "id": "c0"}]
            )
        if step == 1:
            acc = json.loads(tool_msgs[0].content)["account"]
            return AIMessage(
                "", tool_calls=[{"name": "latest_invoice", "args": {"account": acc}, "id": "c1"}]
            )
        if step == 2:
            url = re.search(r"url: (\S+)", tool_msgs[1].content).group(1)
            return AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "send_email",
                        "args": {"to_user": user, "body": f"Your invoice: {url}"},
                        "id": "c2",
                    }
                ],
            )
        return AIMessage("Done.")

    agent = create_agent(
        ScriptedChatModel(script=script), [lookup_account, latest_invoice, send_email]
    )
    handler = SoloFlowCallbackHandler(store=store, user_id="u", agent_id="a", plugin_manager=pm)
    for text in (
        "You are aarav_ahmed_6699. Mail me my invoice.",
        "My user id is raj_sanchez_7340, please send the latest invoice",
        "invoice for mia_li_3668 by e-mail",
    ):
        agent.invoke(
            {"messages": [{"role": "user", "content": text}]}, config={"callbacks": [handler]}
        )
    assert len(sent) == 3
    (cand,) = detect_candidates(store, user_id="u", agent_id="a", save=False)
    flow = cand.proposed_flow
    maps = [s.input_map for s in flow.steps]
    assert maps[1] == {"account": "{{step_1.account}}"}
    # upstream wins over the task text for the address (see generalize)
    assert maps[2] == {
        "to_user": "{{step_1.user_id}}",
        "body": "Your invoice: {{step_2.invoice.url}}",
    }
    assert flow.input_schema["required"] == ["user_id"]
    inputs = inputs_from_task(flow, "Hello, I'm noah_kim_1234 and I need my invoice")
    assert inputs == {"user_id": "noah_kim_1234"}
    result = run_flow(flow, inputs, tools=[lookup_account, latest_invoice, send_email])
    assert result.status == "completed"
    assert sent[-1] == {
        "to_user": "noah_kim_1234",
        "body": "Your invoice: https://x.io/pdf/INV-1234.pdf",
    }


def test_the_ledger_filter_agrees_with_the_per_run_rule(sqlite_store):
    """``without_calls`` on the store's columns (vectorised) keeps exactly the calls
    ``kept_calls`` keeps run by run, on a ledger with retries and failed runs."""
    from soloflow_core.mining.replays import kept_calls, without_calls

    led = generate_ledger(runs=300, workflows=3, seed=5, retry_rate=0.3, failed_run_rate=0.3)
    sqlite_store.add_runs(list(led.runs))
    cols = sqlite_store.read_tool_names(user_id="default", agent_id="default")
    drop = {cols.names[0]}
    filtered = without_calls(cols, drop)
    by_id = {r.run_id: r for r in led.runs}
    retried = 0
    for r, run_id in enumerate(cols.run_ids):
        calls = by_id[run_id].tool_calls
        keep = kept_calls([c.name for c in calls], [c.error for c in calls], drop)
        want = [c.name for c, k in zip(calls, keep, strict=True) if k]
        got = filtered.codes[filtered.offsets[r] : filtered.offsets[r + 1]]
        assert [filtered.names[c] for c in got] == want
        retried += sum(1 for c, k in zip(calls, keep, strict=True) if not k and c.name not in drop)
    assert retried > 20
