"""The lookup's in-process index: ranking, cache bound, invalidation by another Store, isolation.

Store tests run on a real SQLite file and on the real PostgreSQL server.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import sqlalchemy as sa

from soloflow_core.memory import ProceduralMemory
from soloflow_core.models import SOURCE_LEARNED, SOURCE_USER, FlowDefinition, FlowStep
from soloflow_core.store import Store
from soloflow_core.store.fulltext import namespace_token, search_terms
from soloflow_core.store.inverted_index import IndexCache, InvertedIndex

NS = {"user_id": "alice", "agent_id": "bot"}
BOB = {"user_id": "bob", "agent_id": "bot"}


def flow(name: str, *tools: str, description: str = "") -> FlowDefinition:
    steps = [FlowStep(id=f"s{i}", skill_key=t) for i, t in enumerate(tools or ("do_it",))]
    return FlowDefinition(name=name, description=description, steps=steps)


def names(matches) -> list[str]:
    return [m.name for m in matches]


# ---------------------------------------------------------------------- the index itself


def test_postings_idf_and_scores_follow_the_texts():
    texts = ["refund order", "order track parcel", "refund invoice order", ""]
    index = InvertedIndex.build(7, texts, ["a", "b", "c", "d"])
    assert index.changes == 7 and len(index) == 4
    assert index.postings("order").tolist() == [0, 1, 2]
    assert index.postings("refund").tolist() == [0, 2] and index.postings("absent").tolist() == []
    assert index.idf("parcel") == pytest.approx(math.log(1 + (4 - 1 + 0.5) / 1.5))
    assert index.idf("absent") == 0.0
    scores = index.score(["refund", "parcel", "absent", "refund"])
    assert scores.terms == ("refund", "parcel", "absent")
    assert scores.scores.tolist() == pytest.approx(
        [index.idf("refund"), index.idf("parcel"), index.idf("refund"), 0.0]
    )
    assert scores.held_terms(1) == ["parcel"] and scores.held_terms(3) == []
    # Best first, ties by position; rows holding no term are never ranked.
    assert index.idf("parcel") > index.idf("refund") and scores.ranked().tolist() == [1, 0, 2]
    assert scores.ranked(1).tolist() == scores.ranked()[:1].tolist()
    assert InvertedIndex.build(0, [], []).score(["x"]).ranked().tolist() == []


def test_the_best_n_are_the_first_n_of_the_whole_order_ties_by_position():
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(30)]
    texts = [" ".join(rng.sample(vocabulary, rng.randint(0, 6))) for _ in range(500)]
    index = InvertedIndex.build(1, texts, list(range(500)))
    query = rng.sample(vocabulary, 5)
    scores = index.score(query)
    idf = {t: index.idf(t) for t in query}
    expected = sorted(
        (i for i, text in enumerate(texts) if set(text.split()) & set(query)),
        key=lambda i: (-sum(idf[t] for t in query if t in texts[i].split()), i),
    )
    assert scores.ranked().tolist() == expected
    for n in (1, 7, 50, 499, 1000):
        assert scores.ranked(n).tolist() == expected[:n]
    for i in expected[:20]:
        assert set(scores.held_terms(i)) == set(query) & set(texts[i].split())
    assert scores.scores.dtype == np.float64


def test_the_cache_keeps_the_most_recently_used_within_its_bound():
    def index(changes: int, rows: int) -> InvertedIndex:
        return InvertedIndex.build(
            changes, ["a b c"] * rows, [None] * rows, rows_nbytes=1000 * rows
        )

    cache = IndexCache(max_bytes=35_000)
    cache.put("n1", index(1, 10))
    cache.put("n2", index(1, 10))
    cache.put("n3", index(1, 10))
    assert len(cache) == 3 and cache.nbytes <= cache.max_bytes
    assert cache.get("n1") is not None  # n1 now most recent: n2 goes first
    cache.put("n4", index(1, 10))
    assert cache.get("n2") is None and {n for n in ("n1", "n3", "n4") if cache.get(n)} == {
        "n1",
        "n3",
        "n4",
    }
    cache.put("big", index(1, 100))  # larger than the bound: kept alone
    assert len(cache) == 1 and cache.get("big") is not None
    assert cache.nbytes == cache.get("big").nbytes  # type: ignore[union-attr]
    newer = index(5, 2)
    cache.put("big", newer)
    cache.put("big", index(4, 2))  # an older read never replaces a newer one
    assert cache.get("big") is newer and cache.nbytes == newer.nbytes
    cache.discard("big")
    assert len(cache) == 0 and cache.nbytes == 0


# ---------------------------------------------------------------------- in a store


def test_candidates_are_the_best_by_the_sum_of_idfs_of_every_term_they_hold(store):
    """The ranking is what the docs say, computed here the slow way over every latest version."""
    rng = random.Random(11)
    verbs, objects, channels = (
        ["refund", "cancel", "track", "send"],
        ["order", "invoice", "parcel"],
        ["email", "sms"],
    )
    for i in range(60):
        v, o, c = rng.choice(verbs), rng.choice(objects), rng.choice(channels)
        store.add_flow_version(
            flow(f"{v} {o} {i}", f"{o}_{v}", description=f"{v} the {o} by {c}"),
            **NS,
            source=SOURCE_LEARNED,
            confidence=rng.uniform(0.5, 1.0),
        )
    store.add_flow_version(
        flow("refund order 0", "x"), **NS, source=SOURCE_LEARNED
    )  # a new version
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT name, search_text FROM sf_flows WHERE user_id = 'alice' AND is_latest")
        ).all()
    texts = {name: set(text.split()) for name, text in rows}
    for task in [
        "refund the order by email",
        "track parcel sms",
        "send an invoice",
        "cancel order 0",
    ]:
        terms = search_terms(task)
        df = {t: sum(t in held for held in texts.values()) for t in terms}
        idf = {t: math.log(1 + (len(texts) - n + 0.5) / (n + 0.5)) for t, n in df.items() if n}
        rank = {
            name: sum(idf.get(t, 0.0) for t in terms if t in held) for name, held in texts.items()
        }
        expected = sorted((n for n in rank if rank[n] > 0), key=lambda n: (-rank[n], n))[:10]
        found = store.find_flow_candidates(terms, **NS, limit=10)
        assert [c.name for c in found] == expected, task
        for c in found:
            assert c.rank == pytest.approx(rank[c.name]) and c.terms == set(terms) & texts[c.name]


def test_the_best_eligible_flows_are_found_however_many_better_ones_are_left_out(store):
    """Flows below the minimum confidence or retired rank first in the index; the lookup reads
    further, a batch a statement, until it has its limit."""
    for i in range(120):
        store.add_flow_version(
            flow(f"unsure {i:03}", "t"),
            **NS,
            source=SOURCE_LEARNED,
            confidence=0.2,
            trigger_keywords=["refund", "order", "damaged"],
        )
    for i in range(8):
        store.add_flow_version(
            flow(f"retired {i}", "t"),
            **NS,
            source=SOURCE_LEARNED,
            trigger_keywords=["refund", "order", "damaged"],
        )
        store.update_flow_meta(f"retired {i}", **NS, status="retired")
    for i in range(6):
        store.add_flow_version(
            flow(f"sure {i}", "t"),
            **NS,
            source=SOURCE_LEARNED,
            confidence=0.9,
            trigger_keywords=["refund", "order"],
        )
    terms = search_terms("refund my damaged order")
    found = store.find_flow_candidates(terms, **NS, min_confidence=0.5, limit=5)
    assert [c.name for c in found] == [f"sure {i}" for i in range(5)]
    assert len(store.find_flow_candidates(terms, **NS, min_confidence=0.5, limit=50)) == 6
    assert len(store.find_flow_candidates(terms, **NS, min_confidence=0.0, limit=500)) == 126
    memory = ProceduralMemory(store)
    assert names(memory.find_workflow("alice", "bot", "refund my damaged order", limit=3)) == [
        "sure 0",
        "sure 1",
        "sure 2",
    ]


def test_every_change_through_another_store_is_seen_by_the_next_lookup(store, db_url):
    memory = ProceduralMemory(store)
    store.add_flow_version(
        flow("Refund order", "refund_payment"),
        **NS,
        source=SOURCE_LEARNED,
        confidence=0.8,
        trigger_keywords=["refund"],
    )
    assert names(memory.find_workflow("alice", "bot", "refund please")) == ["Refund order"]
    cached = store.flow_index_cache().get(namespace_token("alice", "bot"))
    assert cached is not None
    with Store.open(db_url) as other:
        # Register.
        other.add_flow_version(
            flow("Refund invoice", "refund_invoice"),
            **NS,
            source=SOURCE_USER,
            trigger_keywords=["refund", "invoice"],
        )
        assert names(memory.find_workflow("alice", "bot", "refund invoice")) == [
            "Refund invoice",
            "Refund order",
        ]
        # Confidence, either way, and status: read per lookup, no reload needed.
        current = store.flow_index_cache().get(namespace_token("alice", "bot"))
        other.update_flow_meta("Refund order", **NS, confidence=0.3)
        assert names(memory.find_workflow("alice", "bot", "refund please")) == ["Refund invoice"]
        other.update_flow_meta("Refund order", **NS, confidence=0.95)
        assert names(memory.find_workflow("alice", "bot", "refund please")) == [
            "Refund invoice",
            "Refund order",
        ]
        other.update_flow_meta("Refund order", **NS, status="retired")
        assert names(memory.find_workflow("alice", "bot", "refund please", min_confidence=0)) == [
            "Refund invoice"
        ]
        other.update_flow_meta("Refund order", **NS, status="suggestion_only")
        (m,) = [
            x
            for x in memory.find_workflow("alice", "bot", "refund please")
            if x.name == "Refund order"
        ]
        assert m.status == "suggestion_only"
        assert store.flow_index_cache().get(namespace_token("alice", "bot")) is current
        # Keywords.
        other.update_flow_meta("Refund order", **NS, trigger_keywords=["chargeback"])
        assert names(memory.find_workflow("alice", "bot", "chargeback")) == ["Refund order"]
        # A new version: the old one's keywords and tools are gone.
        other.add_flow_version(
            flow("Refund order", "refund_v2"),
            **NS,
            source=SOURCE_USER,
            trigger_keywords=["reimburse"],
        )
        assert memory.find_workflow("alice", "bot", "chargeback") == []
        (m,) = memory.find_workflow("alice", "bot", "reimburse")
        assert (m.version, m.skill_keys, m.source) == (2, ("refund_v2",), SOURCE_USER)
        # Retire (as the outcome rules do) and reindex.
        other.update_flow_meta("Refund invoice", **NS, status="retired")
        assert memory.find_workflow("alice", "bot", "invoice", min_confidence=0) == []
        other.reindex_flows()
        assert names(memory.find_workflow("alice", "bot", "reimburse")) == ["Refund order"]
    assert store.flow_index_cache().get(namespace_token("alice", "bot")) is not cached


def test_the_cache_stays_within_its_bound_and_an_evicted_namespace_is_read_again(store):
    for user in ("u1", "u2", "u3"):
        for i in range(20):
            store.add_flow_version(
                flow(f"{user} flow {i}", "t"),
                user_id=user,
                agent_id="bot",
                source=SOURCE_LEARNED,
                trigger_keywords=[f"{user}word", f"k{i}"],
            )
    memory = ProceduralMemory(store)
    cache = store.flow_index_cache()
    assert names(memory.find_workflow("u1", "bot", "u1word k3"))[0] == "u1 flow 3"
    one = cache.nbytes
    cache.max_bytes = int(2.5 * one)  # room for two namespaces of this size
    for user in ("u2", "u3", "u1", "u2"):
        assert names(memory.find_workflow(user, "bot", f"{user}word k7"))[0] == f"{user} flow 7"
        assert cache.nbytes <= cache.max_bytes and len(cache) <= 2
    assert cache.get(namespace_token("u3", "bot")) is None  # the least recently used went
    assert cache.get(namespace_token("u1", "bot")) is not None


def test_warm_and_evicted_caches_never_show_another_namespaces_flows(store):
    memory = ProceduralMemory(store)
    for ns in (NS, BOB):
        for i in range(5):
            store.add_flow_version(
                flow(f"Refund {i}", "refund_payment"),
                **ns,
                source=SOURCE_LEARNED,
                trigger_keywords=["refund", f"{ns['user_id']}secret"],
            )
    cache = store.flow_index_cache()
    for _ in range(2):  # warm, then after every entry was dropped
        alice = memory.find_workflow("alice", "bot", "refund bobsecret alicesecret")
        bob = memory.find_workflow("bob", "bot", "refund bobsecret alicesecret")
        assert all(
            "alicesecret" in m.matched_terms and "bobsecret" not in m.matched_terms for m in alice
        )
        assert all(
            "bobsecret" in m.matched_terms and "alicesecret" not in m.matched_terms for m in bob
        )
        assert memory.find_workflow("alice", "other-bot", "refund", min_confidence=0) == []
        assert memory.find_workflow("bob", "bot", "alicesecret", min_confidence=0) == []
        cache.max_bytes = 1
    # Same names, same versions: the rows (ids) differ per namespace.
    a = store.find_flow_candidates(["refund"], **NS)
    b = store.find_flow_candidates(["refund"], **BOB)
    assert [c.name for c in a] == [c.name for c in b] and all(
        "alicesecret" not in c.trigger_keywords for c in b
    )


def test_the_word_order_of_a_flows_name_breaks_a_tie_between_equal_matches(store):
    """Both flows hold four of the task's terms, with the same keyword share; the task says
    "review ... schedule", not "send ... schedule" (its "send" belongs to "send Ana a slack
    update")."""
    for verb in ("review", "send"):
        store.add_flow_version(
            flow(f"{verb} weekly schedule via slack", f"{verb}_schedule"),
            **NS,
            source=SOURCE_LEARNED,
            confidence=0.9 if verb == "send" else 0.8,
            trigger_keywords=[verb, "weekly", "schedule", "slack"],
        )
    memory = ProceduralMemory(store)
    task = "please review the schedule (weekly) and send Ana Souza a slack update"
    best, other = memory.find_workflow("alice", "bot", task)
    assert (best.name, other.name) == (
        "review weekly schedule via slack",
        "send weekly schedule via slack",
    )
    assert best.text_score > other.text_score and best.matched_keywords == (
        "review",
        "weekly",
        "schedule",
        "slack",
    )
    # Without the order in the task, the more confident one wins.
    assert names(memory.find_workflow("alice", "bot", "slack weekly schedule send review"))[0] == (
        "send weekly schedule via slack"
    )
