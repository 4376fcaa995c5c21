"""The routing tests' trained stores (tests/routing_support.py): a test's copy holds every row
training wrote, and what a test writes stays in its copy."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from routing_support import SHOP, Desk, TrainedWorlds, approve, world

from soloflow_core.store import Store


def _row_counts(store: Store) -> dict[str, int]:
    with store.db.read() as conn:
        tables = sa.inspect(conn).get_table_names()
        return {
            t: conn.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar_one() for t in tables
        }


def test_a_copy_holds_what_training_wrote_and_keeps_the_tests_writes(
    trained_store: Callable[[str], Store], trained_worlds: TrainedWorlds, db_url: str
) -> None:
    w = world(SHOP)
    store = trained_store(SHOP)
    with Store.open(trained_worlds.template_url(SHOP, db_url)) as template:
        trained = _row_counts(template)
        assert trained.get("sf_task_runs", 0) > 0 and trained.get("sf_candidates", 0) > 0, trained
        copied = _row_counts(store)
        assert {t: n for t, n in copied.items() if t in trained} == trained
        assert [c.id for c in store.list_candidates(**w.ns)] == [
            c.id for c in template.list_candidates(**w.ns)
        ]
        approve(store, w)
        train = next(r["text"] for r in w.module.load_corpus() if r["split"] == "train")
        try:
            with Desk(store, w) as desk:
                assert desk.ask(train)["calls"] == 0  # a flow ran: rows the template lacks
        finally:
            w.module.EFFECTS.clear()
        assert store.list_flow_runs(**w.ns) and store.list_flow_meta(**w.ns)
        assert template.list_flow_runs(**w.ns) == [] and template.list_flow_meta(**w.ns) == []
        assert _row_counts(template) == trained
