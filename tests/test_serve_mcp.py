"""The MCP server, driven by the MCP SDK's own client: over stdio (a real ``soloflow mcp``
subprocess) and over streamable HTTP (a real server on 127.0.0.1), on SQLite and PostgreSQL.
Tools listed and called, runs followed and cancelled, errors as tool errors, tenancy by
token, and a flow promoted during the session appearing in the tool list."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from flowrun_fixtures import soloflow_argv, subprocess_env
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from serve_helpers import APPROVAL_FLOW, SLOW_FLOW, TOOLS, learn_demo_flow, live_server, submit

from soloflow_core.store import Store
from soloflow_langgraph.routing import flow_tool_name
from soloflow_langgraph.server.mcp import BUILTIN_TOOLS, SoloFlowMCP
from soloflow_langgraph.server.service import SoloFlowService

NEW_FLOW = {
    "name": "help search",
    "description": "Search the help center.",
    "steps": [
        {"id": "s", "skill_key": "search_help_center", "input_map": {"query": "{{_trigger.query}}"}}
    ],
}


@dataclass
class Served:
    store: Store
    db_url: str
    learned: str
    """ann's learned flow."""


def _seed(store: Store, db_url: str) -> Served:
    learned = learn_demo_flow(store, "ann", "bot")
    submit(store, "ann", "bot", APPROVAL_FLOW)
    submit(store, "ann", "bot", SLOW_FLOW)
    return Served(store, db_url, learned.name)


@pytest.fixture
def served(db_url: str) -> Iterator[Served]:
    store = Store.open(db_url)
    try:
        yield _seed(store, db_url)
    finally:
        store.close()


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def _names(client: Client) -> set[str]:
    """Every tool, page after page."""
    names: set[str] = set()
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        names |= {t.name for t in page.tools}
        if page.next_cursor is None:
            return names
        cursor = page.next_cursor


async def _tools(client: Client) -> list[Any]:
    out, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        out += page.tools
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


async def _wait_for_end(client: Client, run_id: str) -> dict[str, Any]:
    for _ in range(600):
        status = (await client.call_tool("soloflow_status", {"run_id": run_id})).structured_content
        assert status is not None
        if status["state"] in ("completed", "failed", "cancelled"):
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"flow run {run_id} did not end")


async def _exercise(client: Client, served: Served) -> None:
    """What every transport must do for a namespace holding the seeded flows."""
    names = await _names(client)
    flow_tools = {
        flow_tool_name_of(n) for n in (served.learned, APPROVAL_FLOW["name"], SLOW_FLOW["name"])
    }
    assert names == set(BUILTIN_TOOLS) | flow_tools
    tool = next(t for t in await _tools(client) if t.name == flow_tool_name_of(served.learned))
    assert tool.input_schema["required"] == ["email"] and "find_customer → list_orders" in (
        tool.description or ""
    )

    done = await client.call_tool(tool.name, {"email": "carol@example.net"})
    assert not done.is_error and _text(done) == "notified C-1003 that O-5003 is out for delivery"
    assert done.structured_content is not None and done.structured_content["status"] == "completed"
    status = (
        await client.call_tool("soloflow_status", {"run_id": done.structured_content["run_id"]})
    ).structured_content
    assert status is not None and status["state"] == "completed" and len(status["steps"]) == 4

    slow = await client.call_tool(
        "soloflow_run",
        {"flow": SLOW_FLOW["name"], "inputs": {"text": "hi", "seconds": 1.0}, "wait_seconds": 0.1},
    )
    assert slow.structured_content is not None and slow.structured_content["status"] == "running", (
        _text(slow)
    )
    assert (await _wait_for_end(client, slow.structured_content["run_id"]))["state"] == "completed"

    waiting = await client.call_tool(
        flow_tool_name_of(APPROVAL_FLOW["name"]), {"customer_id": "C-9", "order_id": "O-9"}
    )
    assert (
        waiting.structured_content is not None and waiting.structured_content["status"] == "waiting"
    )
    run_id = waiting.structured_content["run_id"]
    assert "waits for a person's approval" in _text(waiting) and run_id in _text(waiting)
    cancelled = await client.call_tool("soloflow_cancel", {"run_id": run_id})
    assert (
        cancelled.structured_content is not None
        and cancelled.structured_content["state"] == "cancelled"
    )

    listed = (await client.call_tool("soloflow_list", {"limit": 10})).structured_content
    assert listed is not None and {w["name"] for w in listed["workflows"]} >= {
        served.learned,
        SLOW_FLOW["name"],
    }
    assert all(0.0 <= w["quality"]["overall"] <= 1.0 for w in listed["workflows"])
    found = await client.call_tool(
        "soloflow_find", {"task": "Where is my order? My email is dave@example.com"}
    )
    assert (
        found.structured_content is not None
        and found.structured_content["matches"][0]["name"] == served.learned
    )

    missing = await client.call_tool("soloflow_status", {"run_id": "frun_nope"})
    assert missing.is_error and "no flow run 'frun_nope' for user 'ann', agent 'bot'" in _text(
        missing
    )
    bad = await client.call_tool(tool.name, {"email": 42})
    assert bad.is_error and "email" in _text(bad)
    unknown = await client.call_tool("soloflow_nope", {})
    assert unknown.is_error and "unknown tool 'soloflow_nope'" in _text(unknown)
    wrong = await client.call_tool("soloflow_run", {"flow": served.learned, "wait_seconds": -1})
    assert wrong.is_error and "wait_seconds" in _text(wrong)


def flow_tool_name_of(name: str) -> str:
    from soloflow_core.models import FlowDefinition, FlowStep

    return flow_tool_name(FlowDefinition(name=name, steps=[FlowStep(id="s", skill_key="x")]))


async def _promoted_during_the_session(client: Client, served: Served) -> None:
    """A flow submitted through another store (another process's) appears in the tool list,
    announced by a list-changed event; retired, it goes, announced again."""
    async with client.listen(tools_list_changed=True) as events:
        with Store.open(served.db_url) as other:
            submit(other, "ann", "bot", NEW_FLOW)
        await asyncio.wait_for(events.__anext__(), 30)
        assert flow_tool_name_of(NEW_FLOW["name"]) in await _names(client)
        served.store.update_flow_meta(
            NEW_FLOW["name"], user_id="ann", agent_id="bot", status="retired"
        )
        await asyncio.wait_for(events.__anext__(), 30)
        assert flow_tool_name_of(NEW_FLOW["name"]) not in await _names(client)


# --------------------------------------------------------------------------- stdio


def _stdio(db_url: str, *extra: str) -> StdioServerParameters:
    argv = soloflow_argv(
        "--db",
        db_url,
        "--user",
        "ann",
        "--agent",
        "bot",
        "mcp",
        "--tools",
        "serve_helpers:TOOLS",
        "--watch-interval",
        "0.2",
        *extra,
    )
    return StdioServerParameters(command=argv[0], args=argv[1:], env=subprocess_env())


async def test_stdio_server_in_a_subprocess(served: Served, db_url: str) -> None:
    async with Client(_stdio(db_url), read_timeout_seconds=120) as client:
        await _exercise(client, served)
        await _promoted_during_the_session(client, served)


async def test_stdio_tells_a_pre_2026_client_its_tools_changed(served: Served, db_url: str) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            seen.put_nowait(method)

    async with Client(
        _stdio(db_url), mode="legacy", message_handler=on_message, read_timeout_seconds=120
    ) as client:
        assert client.protocol_version < "2026"
        before = await _names(client)
        submit(served.store, "ann", "bot", NEW_FLOW)
        while await asyncio.wait_for(seen.get(), 30) != "notifications/tools/list_changed":
            pass
        assert await _names(client) - before == {flow_tool_name_of(NEW_FLOW["name"])}


# --------------------------------------------------------------------------- streamable HTTP


@dataclass
class HttpServed(Served):
    url: str
    tokens: dict[str, str]


@pytest.fixture
def http_served(db_url: str) -> Iterator[HttpServed]:
    store = Store.open(db_url)
    service = SoloFlowService(store, tools=TOOLS)
    try:
        seeded = _seed(store, db_url)
        submit(
            store,
            "bob",
            "desk",
            {
                "name": "bob flow",
                "steps": [
                    {
                        "id": "s",
                        "skill_key": "search_help_center",
                        "input_map": {"query": "{{_trigger.q}}"},
                    }
                ],
            },
        )
        tokens = {
            who: store.create_api_token(user_id=user, agent_id=agent, scope=scope).token
            for who, user, agent, scope in [
                ("ann", "ann", "bot", "write"),
                ("ann_read", "ann", "bot", "read"),
                ("bob", "bob", "desk", "admin"),
            ]
        }
        server = SoloFlowMCP(service, watch_interval=0.2, tools_page=2)  # three flows: two pages
        with live_server(server.http_app()) as base:
            yield HttpServed(store, db_url, seeded.learned, f"{base}/mcp", tokens)
    finally:
        service.close()
        store.close()


@asynccontextmanager
async def _http_client(served: HttpServed, who: str, **kw: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {served.tokens[who]}"}, timeout=120
    )
    async with http, Client(streamable_http_client(served.url, http_client=http), **kw) as client:
        yield client


async def test_http_server_with_a_bearer_token(http_served: HttpServed) -> None:
    async with _http_client(http_served, "ann") as client:
        first = await client.list_tools()
        assert first.next_cursor is not None and len(first.tools) == len(BUILTIN_TOOLS) + 2
        await _exercise(client, http_served)
        await _promoted_during_the_session(client, http_served)


async def test_http_needs_a_token(http_served: HttpServed) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"Authorization": "Bearer sft_0000000000000000_" + "x" * 43}):
        got = httpx.post(
            http_served.url,
            json=body,
            headers={**headers, "Accept": "application/json, text/event-stream"},
        )
        assert got.status_code == 401, got.text


async def test_http_tenancy_by_token(http_served: HttpServed) -> None:
    async with _http_client(http_served, "ann") as ann:
        ran = await ann.call_tool(
            flow_tool_name_of(http_served.learned), {"email": "alice@example.com"}
        )
        assert ran.structured_content is not None
        run_id = ran.structured_content["run_id"]
    async with _http_client(http_served, "bob") as bob:
        assert await _names(bob) == set(BUILTIN_TOOLS) | {flow_tool_name_of("bob flow")}
        theirs = await bob.call_tool("soloflow_status", {"run_id": run_id})
        missing = await bob.call_tool("soloflow_status", {"run_id": "frun_" + "0" * 32})
        assert theirs.is_error and missing.is_error
        assert _text(theirs).replace(run_id, "<id>") == _text(missing).replace(
            "frun_" + "0" * 32, "<id>"
        )
        cancel = await bob.call_tool("soloflow_cancel", {"run_id": run_id})
        assert cancel.is_error and "no flow run" in _text(cancel)
        other = await bob.call_tool(
            flow_tool_name_of(http_served.learned), {"email": "alice@example.com"}
        )
        assert other.is_error and "unknown tool" in _text(other)
        bob_list = (await bob.call_tool("soloflow_list", {})).structured_content
        assert bob_list is not None and [w["name"] for w in bob_list["workflows"]] == ["bob flow"]
        find = await bob.call_tool(
            "soloflow_find", {"task": "where is my order, email alice@example.com"}
        )
        assert find.structured_content is not None and find.structured_content["matches"] == []
        # ann's list changes are not told to bob: his listen stream stays silent.
        async with bob.listen(tools_list_changed=True) as events:
            submit(http_served.store, "ann", "bot", NEW_FLOW)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(events.__anext__(), 1.5)
    assert (
        http_served.store.get_flow_run(run_id, user_id="ann", agent_id="bot").state == "completed"
    )


async def test_a_read_only_token_sees_and_calls_only_read_tools(http_served: HttpServed) -> None:
    async with _http_client(http_served, "ann_read") as reader:
        assert await _names(reader) == {"soloflow_status", "soloflow_list", "soloflow_find"}
        refused = await reader.call_tool(
            "soloflow_run", {"flow": http_served.learned, "inputs": {"email": "a@b.c"}}
        )
        assert refused.is_error and "scope is 'read'" in _text(refused)
        flow = await reader.call_tool(
            flow_tool_name_of(http_served.learned), {"email": "alice@example.com"}
        )
        assert flow.is_error
    assert http_served.store.list_flow_runs(user_id="ann", agent_id="bot") == []


async def test_http_tells_a_pre_2026_client_its_tools_changed(http_served: HttpServed) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            seen.put_nowait(method)

    async with _http_client(
        http_served, "ann", mode="legacy", message_handler=on_message
    ) as client:
        before = await _names(client)
        submit(http_served.store, "ann", "bot", NEW_FLOW)
        while await asyncio.wait_for(seen.get(), 30) != "notifications/tools/list_changed":
            pass
        assert await _names(client) - before == {flow_tool_name_of(NEW_FLOW["name"])}
