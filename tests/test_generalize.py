"""Argument-source inference of the foundation's detector."""

from __future__ import annotations

from soloflow_core.generalize.arguments import Occurrence, extract_inputs, generalize


def occ(task: str, args: list[dict], outputs: list) -> Occurrence:
    return Occurrence(task=task, args=args, outputs=outputs)


def test_constant_upstream_task_and_free_sources():
    occs = [
        occ(f"refund order #{n} now", [{"order": n, "mode": "fast"}, {"cid": f"c{n}", "note": f"x{n}y"}],
            [{"customer": {"ids": [f"c{n}"]}}, "done"])
        for n in (11, 22, 33)
    ]
    g = generalize(occs)
    assert g.input_maps[0] == {"order": "{{_trigger.order}}", "mode": "fast"}
    assert g.input_maps[1] == {"cid": "{{step_1.customer.ids.0}}", "note": "{{_trigger.note}}"}
    kinds = {k: s.kind for k, s in g.sources[0].items()} | {k: s.kind for k, s in g.sources[1].items()}
    assert kinds == {"order": "task", "mode": "constant", "cid": "upstream", "note": "free"}
    assert g.input_schema["properties"]["order"]["type"] == "integer"
    assert extract_inputs(g.extraction, "please refund order #44") == {"order": 44}


def test_upstream_preferred_over_task_text():
    occs = [occ(f"look up {v}", [{"q": v}, {"id": v}], [{"id": v}, None]) for v in ("A1", "B2", "C3")]
    g = generalize(occs)
    assert g.input_maps[1] == {"id": "{{step_1.id}}"}


def test_same_value_twice_is_one_input():
    occs = [occ("t", [{"a": v}, {"b": v}], ["x", "y"]) for v in ("p", "q", "r")]
    g = generalize(occs)
    assert g.input_maps == [{"a": "{{_trigger.a}}"}, {"b": "{{_trigger.a}}"}]


def test_outputs_that_are_not_json_or_differ_in_type():
    occs = [occ("t", [{"a": 1}, {"b": v}], [out, None]) for v, out in (("x", "plain text"), ("y", {"k": 1}), ("z", [1]))]
    g = generalize(occs)
    assert g.input_maps[1] == {"b": "{{_trigger.b}}"}
