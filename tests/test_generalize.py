"""Argument-source inference of the foundation's detector."""

from __future__ import annotations

from soloflow_core.generalize.arguments import Occurrence, extract_inputs, generalize


def occ(task: str, args: list[dict], outputs: list) -> Occurrence:
    return Occurrence(task=task, args=args, outputs=outputs)


def test_constant_upstream_task_and_free_sources():
    occs = [
        occ(
            f"refund order #{n} now",
            [{"order": n, "mode": "fast"}, {"cid": f"c{n}", "note": note}],
            [{"customer": {"ids": [f"c{n}"]}}, "done"],
        )
        for n, note in ((11, "blue"), (22, "red"), (33, "green"))
    ]
    g = generalize(occs)
    assert g.input_maps[0] == {"order": "{{_trigger.order}}", "mode": "fast"}
    assert g.input_maps[1] == {"cid": "{{step_1.customer.ids.0}}", "note": "{{_trigger.note}}"}
    kinds = {k: s.kind for k, s in g.sources[0].items()} | {
        k: s.kind for k, s in g.sources[1].items()
    }
    assert kinds == {"order": "task", "mode": "constant", "cid": "upstream", "note": "free"}
    assert g.input_schema["properties"]["order"]["type"] == "integer"
    assert extract_inputs(g.extraction, "please refund order #44") == {"order": 44}


def test_upstream_preferred_over_task_text():
    occs = [
        occ(f"look up {v}", [{"q": v}, {"id": v}], [{"id": v}, None]) for v in ("A1", "B2", "C3")
    ]
    g = generalize(occs)
    assert g.input_maps[1] == {"id": "{{step_1.id}}"}


def test_same_value_twice_is_one_input():
    occs = [occ("t", [{"a": v}, {"b": v}], ["x", "y"]) for v in ("p", "q", "r")]
    g = generalize(occs)
    assert g.input_maps == [{"a": "{{_trigger.a}}"}, {"b": "{{_trigger.a}}"}]


def test_outputs_that_are_not_json_or_differ_in_type():
    occs = [
        occ("t", [{"a": 1}, {"b": v}], [out, None])
        for v, out in (("x", "plain text"), ("y", {"k": 1}), ("z", [1]))
    ]
    g = generalize(occs)
    assert g.input_maps[1] == {"b": "{{_trigger.b}}"}


def test_depends_on_from_data_flow_and_read_only_parallelism():
    from soloflow_core.generalize.dataflow import dataflow_depends_on

    maps = [{"q": "{{_trigger.q}}"}, {"q": "{{_trigger.q}}"}, {"a": "{{step_1.id}}"}, {"b": 1}]
    tools = ["get_a", "get_b", "book", "get_c"]
    ro = {"get_a": False, "get_b": False, "get_c": False}
    assert dataflow_depends_on(tools, maps, side_effects=ro) == [
        [],
        [],
        ["step_1", "step_2"],
        ["step_3"],
    ]
    # Unknown tools keep the observed order.
    assert dataflow_depends_on(tools, maps) == [[], ["step_1"], ["step_1", "step_2"], ["step_3"]]
    # All read-only: only data edges remain.
    allro = {t: False for t in tools}
    assert dataflow_depends_on(tools, maps, side_effects=allro) == [[], [], ["step_1"], []]


def test_side_effects_from_call_metadata_make_steps_parallel():
    from soloflow_core.generalize.propose import propose
    from soloflow_core.models import ToolCall

    occs = []
    for n in (1, 2, 3):
        calls = [
            ToolCall(
                name="get_a", args={"x": f"a{n}"}, output={"id": n}, meta={"side_effects": False}
            ),
            ToolCall(name="get_b", args={"y": f"b{n}"}, output="ok", meta={"read_only": True}),
        ]
        occs.append(
            Occurrence(
                task=f"a{n} b{n}",
                args=[c.args for c in calls],
                outputs=[c.output for c in calls],
                step_calls=[[c] for c in calls],
            )
        )
    p = propose(["get_a", "get_b"], occs, observed=3)
    assert [s.depends_on for s in p.flow.steps] == [[], []]


def test_bad_outputs_huge_cyclic_and_nested_args_do_not_crash():
    from soloflow_core.generalize.propose import propose

    cyclic: dict = {"id": "x"}
    cyclic["self"] = cyclic
    huge = "[" + ",".join(['"v"'] * 2_000_000) + "]"  # ~8 MB of JSON text
    occs = [
        occ(
            f"t{n}",
            [{"a": n}, {"b": {"k": [n, {"z": n}]}, "c": f"v{n}"}],
            [cyclic if n % 2 else huge, "not json {"],
        )
        for n in (1, 2, 3)
    ]
    g = generalize(occs)
    assert g.input_maps[1]["b"] == "{{_trigger.b}}"  # a nested object argument is one input
    assert g.input_schema["properties"]["b"]["type"] == "object"
    p = propose(["x", "y"], occs, observed=3)
    assert p.flow.steps[1].input_map["c"] == "{{_trigger.c}}"


def test_misaligned_occurrences_give_a_clear_reason():
    import pytest

    from soloflow_core.errors import SoloFlowError
    from soloflow_core.generalize.propose import propose_flow

    bad = [occ("t", [{"a": 1}], [None]), occ("t", [{"a": 1}, {"b": 2}], [None, None])]
    with pytest.raises(SoloFlowError, match="occurrence 1 has 2 argument sets"):
        generalize(bad)
    flow, conf = propose_flow(["x"], bad, observed=2)
    assert "Arguments not generalised" in flow.description and conf == {}


def test_differing_types_are_left_untyped_with_a_note():
    occs = [occ("t", [{"a": v}], [None]) for v in (1, "two", [3])]
    g = generalize(occs)
    assert "type" not in g.input_schema["properties"]["a"]
    assert any("differ in type" in n for n in g.notes)


def test_canonical_text_is_json_dumps_for_every_kind_of_value():
    """Scalars take a short cut past the JSON encoder; the text must stay the encoder's."""
    import json

    from soloflow_core.generalize.arguments import canonical_json

    values = [
        "",
        "a",
        "é",
        '\u2028\x1f"\\',
        0,
        -5,
        10**30,
        True,
        False,
        None,
        1.5,
        2.0,
        float("nan"),
        float("inf"),
        -0.0,
        [1, "a"],
        {"b": 1, "a": [2, None]},
        (1, 2),
    ]

    class Label(str):
        pass

    values.append(Label("x"))
    for v in values:
        assert canonical_json(v) == json.dumps(v, sort_keys=True, default=str), v
