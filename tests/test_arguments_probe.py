"""Argument sources on the traps of the blind probe (benchmarks/argprobe.py): which words
introduce a task's value, and when a usual value is no constant."""

from __future__ import annotations

from soloflow_core.generalize.arguments import Occurrence, generalize
from soloflow_core.generalize.extraction import extract_value, learn_extraction


def test_two_accounts_of_one_shape_are_found_by_their_words_not_their_place():
    accounts = [("A100", "B200", 25), ("A101", "B201", 40), ("A102", "B202", 15)]
    tasks = [f"Move {n} from {a} to {b}" for a, b, n in accounts]
    source = learn_extraction([a for a, _, _ in accounts], tasks)
    target = learn_extraction([b for _, b, _ in accounts], tasks)
    assert source is not None and target is not None
    assert (source["anchor"], target["anchor"]) == ("from", "to")
    # The next task names them the other way round: the money still leaves A106.
    rephrased = "Move 45 to B206 from A106"
    assert extract_value(source, rephrased) == "A106"
    assert extract_value(target, rephrased) == "B206"


def test_a_value_the_task_names_twice_takes_the_word_every_task_shares():
    users = ["ann", "cid", "dee", "fay"]
    payees = ["bob", "cid", "eve", "fay"]  # cid and fay pay themselves
    tasks = [f"Pay 50 to {p} from {u}'s account" for u, p in zip(users, payees, strict=True)]
    rule = learn_extraction(users, tasks)
    assert rule is not None and rule["anchor"] == "from"
    assert extract_value(rule, "Pay 9 to lea from kim's account") == "kim"


def test_two_words_introduce_a_value_when_one_word_introduces_two():
    rows = [(250, 1234, 5678), (80, 2222, 3333), (1000, 4444, 5555)]
    tasks = [f"Transfer {n} from account {a} to account {b}" for n, a, b in rows]
    rule = learn_extraction([str(b) for _, _, b in rows], tasks)
    assert rule is not None and rule["anchor"] == "to account"
    assert extract_value(rule, "Transfer 300 from account 1357 to account 2468") == "2468"


def test_an_international_phone_number_is_read_from_the_task():
    phones = ["+15550001", "+447700900123", "+33612345678"]
    tasks = [f"Text a login code to {p}" for p in phones]
    rule = learn_extraction(phones, tasks)
    assert rule is not None and rule["shape"] == "phone"
    assert extract_value(rule, "Text a login code to +4915112345678 please") == "+4915112345678"


def _payments(currencies: list[str]) -> list[Occurrence]:
    return [
        Occurrence(
            task=f"Send {10 * k} {c} from account A{k}"
            if c != "EUR"
            else f"Send {10 * k} from A{k}",
            args=[{"account": f"A{k}"}, {"amount": 10 * k, "currency": c}],
            outputs=[{"id": f"ID{k}"}, {"ok": True}],
        )
        for k, c in enumerate(currencies, start=1)
    ]


def test_a_usual_value_is_no_constant_when_a_task_asks_for_another():
    g = generalize(_payments(["EUR"] * 9 + ["USD"]), side_effects=[False, True])
    assert g.input_maps[1]["currency"] == "{{_trigger.currency}}"
    assert g.sources[1]["currency"].kind == "free"
    assert any("asks for its own ('USD')" in n for n in g.notes)


def test_an_unasked_outlier_still_leaves_a_constant():
    occs = [
        Occurrence(
            task=f"Find the {w} memo and open it",
            args=[{"query": w, "page_size": 20 if k == 3 else 50}],
            outputs=[{"hits": []}],
        )
        for k, w in enumerate(
            ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "iota", "mu", "nu"]
        )
    ]
    g = generalize(occs, side_effects=[False])
    assert g.input_maps[0]["page_size"] == 50
    assert g.sources[0]["page_size"].kind == "constant"


def test_a_list_item_the_task_names_is_read_from_the_task_not_its_index():
    # Each task names the order to cancel; it was the newest (first) order every time.
    lists = [("O-19", ["O-19", "O-11"]), ("O-28", ["O-28"]), ("O-37", ["O-37", "O-30"])]
    occs = [
        Occurrence(
            task=f"Cancel order {o} for me",
            args=[{"user": "ann"}, {"order_id": o}],
            outputs=[{"orders": [{"id": x} for x in orders]}, {"ok": True}],
        )
        for o, orders in lists
    ]
    g = generalize(occs, side_effects=[False, True])
    assert g.input_maps[1]["order_id"] == "{{_trigger.order_id}}"
    assert extract_value(g.extraction["order_id"], "Cancel order O-61 for me") == "O-61"


def test_a_list_item_no_task_names_is_still_read_from_the_list():
    occs = [
        Occurrence(
            task="Cancel my latest order",
            args=[{"user": u}, {"order_id": o}],
            outputs=[{"orders": [{"id": o}, {"id": "O-1"}]}, {"ok": True}],
        )
        for u, o in (("ann", "O-19"), ("bob", "O-28"), ("cid", "O-37"))
    ]
    g = generalize(occs, side_effects=[False, True])
    assert g.input_maps[1]["order_id"] == "{{step_1.orders.0.id}}"
