"""``Store.derived_from_flows``: what every flow of a namespace says (routing's kinds of value),
made once and kept while the namespace's flows stay the same — made again after a new flow, a
new version, a deletion (also one that leaves the count as it was), or a change by another
process's store; namespaces never share it. Both stores."""

from __future__ import annotations

from typing import Any

from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.store.flows import FlowRecord

NS = {"user_id": "u1", "agent_id": "a1"}


def _flow(name: str, pattern: str = r"[A-Z]{3}\d{3}") -> FlowDefinition:
    return FlowDefinition(
        name=name,
        steps=[FlowStep(id="s", skill_key="lookup", input_map={"code": "code"})],
        input_schema={
            "type": "object",
            "properties": {"code": {"type": "string", "examples": ["HAT170"]}},
            "required": ["code"],
        },
        extraction={"code": {"pattern": pattern}},
    )


class Counting:
    """A derivation that counts how often it was made."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self, flows: list[FlowRecord]) -> list[tuple[str, int, Any]]:
        self.made += 1
        return sorted(
            (f.flow.name, f.flow.version or 0, (f.flow.extraction or {})["code"]["pattern"])
            for f in flows
        )


def test_made_once_while_the_flows_stay_the_same(store: Store) -> None:
    derive = Counting()
    assert store.derived_from_flows(derive, **NS) == [] and derive.made == 1
    store.register_flow(_flow("a"), source="learned", **NS)
    first = store.derived_from_flows(derive, **NS)
    assert [x[0] for x in first] == ["a"] and derive.made == 2
    for _ in range(5):
        assert store.derived_from_flows(derive, **NS) == first
    assert derive.made == 2
    # Records changing (confidence, status) do not change definitions: nothing made again.
    store.update_flow_meta("a", confidence=0.9, status="suggestion_only", **NS)
    assert store.derived_from_flows(derive, **NS) == first and derive.made == 2


def test_made_again_after_a_version_a_flow_or_a_deletion(store: Store) -> None:
    derive = Counting()
    store.register_flow(_flow("a"), source="learned", **NS)
    store.register_flow(_flow("b"), source="learned", **NS)
    assert len(store.derived_from_flows(derive, **NS)) == 2
    store.register_flow(_flow("a", r"[A-Z]{2}\d{4}"), source="learned", **NS)  # version 2
    assert (
        "a",
        2,
        r"[A-Z]{2}\d{4}",
    ) in store.derived_from_flows(derive, **NS) and derive.made == 2
    # The newest flow deleted and another registered: as many rows as before.
    store.register_flow(_flow("c"), source="learned", **NS)
    assert [x[0] for x in store.derived_from_flows(derive, **NS)] == ["a", "b", "c"]
    store.delete_flow("c", **NS)
    store.register_flow(_flow("d", r"\d{6}"), source="learned", **NS)
    assert [x[0] for x in store.derived_from_flows(derive, **NS)] == ["a", "b", "d"]
    assert derive.made == 4


def test_a_change_by_another_store_is_seen_and_namespaces_are_apart(
    store: Store, db_url: str
) -> None:
    derive = Counting()
    store.register_flow(_flow("a"), source="learned", **NS)
    assert len(store.derived_from_flows(derive, **NS)) == 1
    other = Store.open(db_url)  # another process's store, as far as this one knows
    try:
        other.register_flow(_flow("b"), source="learned", **NS)
        other.register_flow(_flow("z"), source="learned", user_id="u2", agent_id="a1")
    finally:
        other.close()
    assert [x[0] for x in store.derived_from_flows(derive, **NS)] == ["a", "b"]
    assert [x[0] for x in store.derived_from_flows(derive, user_id="u2", agent_id="a1")] == ["z"]
    assert derive.made == 3
