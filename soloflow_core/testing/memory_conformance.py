"""A conformance suite any :class:`~soloflow_core.memory.MemoryProvider` can run.

Subclass :class:`MemoryProviderConformance` in a test module (its name must start with
``Test``) and override the ``provider`` fixture; every test then runs against your provider::

    import pytest
    from soloflow_core.testing.memory_conformance import MemoryProviderConformance


    class TestMyProvider(MemoryProviderConformance):
        @pytest.fixture
        def provider(self, tmp_path):
            yield MyProvider(path=tmp_path / "memory")

Each test writes under fresh (user, agent) namespaces, so a provider fixture may share its
storage between tests. Async twins are run with :func:`asyncio.run`: no pytest plugin needed.

What is checked: a recorded item is found by a word of its text, in its namespace only (never
another user's or agent's, however their ids are spelled); ``limit``; best first (more query
words matched ranks higher); empty, whitespace-only and query-syntax queries return a list
without raising; non-English text (accents, Cyrillic, CJK words between spaces, emoji);
a 1 MB query returns in seconds; ``arecord``/``asearch`` agree with their twins.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from soloflow_core.memory.providers import MemoryProvider, MemoryRecord

__all__ = ["MemoryProviderConformance"]

HUGE_QUERY_SECONDS = 10.0
"""A 1 MB query must come back within this (generous: slow CI machines)."""


def _ns() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"user-{tag}", f"agent-{tag}"


def _item(user: str, agent: str, text: str, **data: Any) -> MemoryRecord:
    return MemoryRecord(
        user_id=user,
        agent_id=agent,
        kind="note",
        text=text,
        data=data,
        at=datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    )


def _texts(found: list[MemoryRecord]) -> list[str]:
    return [r.text for r in found]


class MemoryProviderConformance:
    """The tests. Override :meth:`provider`."""

    @pytest.fixture
    def provider(self) -> MemoryProvider:
        raise NotImplementedError(
            "override the `provider` fixture of MemoryProviderConformance to return (or yield) "
            "the MemoryProvider under test"
        )

    def test_a_recorded_item_is_found_by_a_word_of_its_text(self, provider: MemoryProvider) -> None:
        user, agent = _ns()
        item = _item(user, agent, "refund approved for order 1234", order="1234")
        provider.record(item)
        provider.record(_item(user, agent, "password reset link sent"))
        (found,) = provider.search("refund", user_id=user, agent_id=agent)
        assert (found.user_id, found.agent_id, found.kind) == (user, agent, "note")
        assert found.text == item.text
        assert found.data.get("order") == "1234"
        assert found.at == item.at
        assert provider.search("invoice", user_id=user, agent_id=agent) == []

    def test_no_namespace_sees_another_ones_items(self, provider: MemoryProvider) -> None:
        user, agent = _ns()
        provider.record(_item(user, agent, "secret refund for alice"))
        others = [
            (user + "-2", agent),
            (user, agent + "-2"),
            ("", ""),
            (user + "\x1f" + agent, ""),
            (user[:-1], user[-1] + agent),
        ]
        for other_user, other_agent in others:
            for query in ("secret refund", "", "alice"):
                found = provider.search(query, user_id=other_user, agent_id=other_agent)
                assert found == [], (other_user, other_agent, query)
        assert _texts(provider.search("secret", user_id=user, agent_id=agent)) == [
            "secret refund for alice"
        ]

    def test_limit_caps_the_results(self, provider: MemoryProvider) -> None:
        user, agent = _ns()
        for n in range(5):
            provider.record(_item(user, agent, f"shipment {n} delayed"))
        assert len(provider.search("shipment", user_id=user, agent_id=agent, limit=2)) == 2
        assert len(provider.search("shipment", user_id=user, agent_id=agent, limit=10)) == 5
        assert provider.search("shipment", user_id=user, agent_id=agent, limit=0) == []

    def test_more_matched_words_rank_first(self, provider: MemoryProvider) -> None:
        user, agent = _ns()
        provider.record(_item(user, agent, "cancel flight booking today"))
        provider.record(_item(user, agent, "cancel hotel booking today"))
        provider.record(_item(user, agent, "weather forecast today"))
        found = _texts(provider.search("cancel flight", user_id=user, agent_id=agent))
        assert found[0] == "cancel flight booking today"
        assert "weather forecast today" not in found

    def test_empty_and_odd_queries_return_a_list(self, provider: MemoryProvider) -> None:
        user, agent = _ns()
        provider.record(_item(user, agent, "refund approved"))
        for query in ("", "   ", "\n\t", '"refund" OR (NEAR', "*", "!!", "a' OR 1=1 --", "\x00"):
            found = provider.search(query, user_id=user, agent_id=agent, limit=3)
            assert isinstance(found, list) and len(found) <= 3, query
            assert all((r.user_id, r.agent_id) == (user, agent) for r in found), query

    @pytest.mark.parametrize(
        "text, query",
        [
            ("Rückerstattung für Bestellung 77 genehmigt", "rückerstattung"),
            ("заказ отменён клиентом", "заказ"),
            ("查询订单 状态", "查询订单"),
            ("注文 キャンセル 完了", "キャンセル"),
            ("café crème réservé", "réservé"),
            ("deploy 🚀 finished", "deploy"),
        ],
    )
    def test_non_english_text_is_found(
        self, provider: MemoryProvider, text: str, query: str
    ) -> None:
        user, agent = _ns()
        provider.record(_item(user, agent, text))
        provider.record(_item(user, agent, "unrelated english note"))
        assert _texts(provider.search(query, user_id=user, agent_id=agent)) == [text]

    def test_a_one_megabyte_query_returns_in_bounded_time(self, provider: MemoryProvider) -> None:
        user, agent = _ns()
        provider.record(_item(user, agent, "refund approved"))
        query = "refund " + "lorem ipsum dolor sit amet " * 40_000
        assert len(query) > 1_000_000
        started = time.perf_counter()
        found = provider.search(query, user_id=user, agent_id=agent, limit=5)
        assert time.perf_counter() - started < HUGE_QUERY_SECONDS
        assert isinstance(found, list) and len(found) <= 5

    def test_async_twins_agree(self, provider: MemoryProvider) -> None:
        user, agent = _ns()

        async def run() -> tuple[list[MemoryRecord], list[MemoryRecord]]:
            await provider.arecord(_item(user, agent, "parcel tracking number issued"))
            found = await provider.asearch("parcel", user_id=user, agent_id=agent)
            none = await provider.asearch("parcel", user_id=user + "-2", agent_id=agent)
            return found, none

        found, none = asyncio.run(run())
        assert _texts(found) == ["parcel tracking number issued"] and none == []
        assert _texts(provider.search("parcel", user_id=user, agent_id=agent)) == _texts(found)
