"""Every user's data is theirs alone, attacked from outside: a real REST server and a real MCP
server on 127.0.0.1, driven by httpx and the MCP SDK's client, on SQLite and PostgreSQL.

bob (his own admin token) goes after alice's ids and names bent every way (case, spaces,
encoded slashes, dot segments, look-alike characters, truncation), her token bent every way,
her user named twice in a query, her MCP session, and — once her token is revoked — her open
listen streams. Each answer must be the one a missing object gets, and nothing of hers may
change. (``test_serve_api.py`` pins the plain id of every route.)
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from serve_helpers import APPROVAL_FLOW, TOOLS, learn_demo_flow, live_server, submit

from soloflow_core.store import Store
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.server.api import create_app
from soloflow_langgraph.server.mcp import SoloFlowMCP
from soloflow_langgraph.server.service import SoloFlowService

BOB_FLOW: dict[str, Any] = {
    "name": "bob flow",
    "steps": [
        {"id": "s", "skill_key": "search_help_center", "input_map": {"query": "{{_trigger.q}}"}}
    ],
}
MISSING = {
    "cand": "cand_000000000000",
    "frun": "frun_" + "0" * 32,
    "run": "00000000-0000-0000-0000-000000000000",
    "flow": "no such flow",
}


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


# How bob bends an id or a name (the result goes into a URL path as is).
BENT: list[Callable[[str], str]] = [
    str.upper,
    lambda i: quote(i + " "),
    lambda i: "%20" + quote(i),
    lambda i: quote(i) + "%00",
    lambda i: quote(i) + "%2F",
    lambda i: "x%2F..%2F" + quote(i),
    lambda i: "..%2F" + quote(i),
    lambda i: quote(_fullwidth(i)),
    lambda i: quote(i[:-1]),
    lambda i: quote(i + "'--"),
]


@dataclass
class World:
    url: str
    store: Store
    tokens: dict[str, str]
    ids: dict[str, str]
    """alice's: cand, frun (waiting for approval), run (a captured run), flow (hers only)."""

    def client(self, who: str | None = "bob", token: str | None = None) -> httpx.Client:
        token = token if token is not None else (self.tokens[who] if who else None)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def _seed(store: Store) -> tuple[dict[str, str], dict[str, str]]:
    learned = learn_demo_flow(store, "alice", "bot")
    submit(store, "alice", "bot", APPROVAL_FLOW)
    submit(store, "bob", "bot", BOB_FLOW)  # the same agent id as alice's: only the user differs
    with FlowRuntime(store, tools=TOOLS, user_id="alice", agent_id="bot") as runtime:
        waiting = runtime.run(APPROVAL_FLOW["name"], {"customer_id": "C-1", "order_id": "O-1"})
    (cand,) = store.list_candidates(user_id="alice", agent_id="bot")
    ids = {
        "cand": cand.id,
        "frun": str(waiting.run_id),
        "run": store.list_runs(user_id="alice", agent_id="bot", limit=1)[0].run_id,
        "flow": APPROVAL_FLOW["name"],
        "learned": learned.name,
    }
    tokens = {
        who: store.create_api_token(user_id=who, agent_id="bot", scope="admin").token
        for who in ("alice", "bob")
    }
    return ids, tokens


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    store = Store.open(db_url)
    service = SoloFlowService(store, tools=TOOLS)
    try:
        ids, tokens = _seed(store)
        with live_server(create_app(service)) as url:
            yield World(url, store, tokens, ids)
    finally:
        service.close()
        store.close()


def _alice(store: Store) -> dict[str, Any]:
    """What bob must not be able to change of alice's."""
    ns = {"user_id": "alice", "agent_id": "bot"}
    return {
        "flows": [
            (m.name, m.version, m.status, m.total_executions) for m in store.list_flow_meta(**ns)
        ],
        "candidates": [(c.id, c.status) for c in store.list_candidates(**ns)],
        "runs": sorted((r["id"], r["status"]) for r in store.list_flow_runs(limit=100, **ns)),
        "waiting": [
            store.get_flow_run(r["id"], **ns).waiting_for_approval
            for r in store.list_flow_runs(limit=100, **ns)
        ],
        "tokens": [(t.token_id, t.revoked_at) for t in store.list_api_tokens(**ns)],
    }


def _answer(response: httpx.Response, *names: str) -> tuple[int, str]:
    """Status and body (and redirect target), each name in it replaced by ``<id>``, and the
    position of a bad character in it (the caller's own input's length) by ``<n>``."""
    text = response.text + response.headers.get("location", "")
    for name in sorted(names, key=len, reverse=True):
        for form in (name, name.upper(), _fullwidth(name), quote(name), name[:-1]):
            text = text.replace(form, "<id>")
    return response.status_code, re.sub(r"at position \d+ of", "at position <n> of", text)


ID_ROUTES = [
    ("GET", "/api/candidates/{cand}"),
    ("POST", "/api/candidates/{cand}/approve"),
    ("POST", "/api/candidates/{cand}/reject"),
    ("GET", "/api/flow-runs/{frun}"),
    ("GET", "/api/flow-runs/{frun}/history"),
    ("POST", "/api/flow-runs/{frun}/approve"),
    ("POST", "/api/flow-runs/{frun}/cancel"),
    ("GET", "/api/runs/{run}"),
    ("GET", "/api/runs/{run}/trace"),
    ("GET", "/api/flows/{flow}"),
    ("GET", "/api/flows/{flow}/versions"),
    ("GET", "/api/flows/{flow}/stats"),
    ("POST", "/api/flows/{flow}/runs"),
]


def test_a_bent_id_or_name_of_another_user_is_answered_as_a_missing_one(world: World) -> None:
    before = _alice(world.store)
    with world.client("bob") as bob:
        for method, route in ID_ROUTES:
            kind = route.split("{")[1].split("}")[0]
            theirs, missing = world.ids[kind], MISSING[kind]
            for bend in BENT:
                path = route.replace("{" + kind + "}", "{}")
                body = {} if method == "POST" and "/cancel" not in path else None
                got = bob.request(method, path.format(bend(theirs)), json=body)
                none = bob.request(method, path.format(bend(missing)), json=body)
                assert got.status_code in (404, 307, 422), (route, bend(theirs), got.text)
                assert _answer(got, theirs) == _answer(none, missing), (route, bend(theirs))
    assert _alice(world.store) == before


def test_the_namespace_is_the_token_s_whatever_the_request_names(world: World) -> None:
    before = _alice(world.store)
    with world.client("bob") as bob:
        # A repeated user_id/agent_id: every value must be the token's (not only the last).
        for query in (
            "user_id=alice&user_id=bob",
            "user_id=bob&user_id=alice",
            "agent_id=other&agent_id=bot",
        ):
            got = bob.get(f"/api/workflows?{query}")
            assert got.status_code == 401 and got.json()["error"] == "Unauthorized", query
        assert bob.get("/api/workflows?user_id=bob&user_id=bob").status_code == 200
        # Headers and other parameters naming alice change nothing.
        got = bob.get(
            "/api/workflows?user=alice&userId=alice",
            headers={"X-User-Id": "alice", "X-Forwarded-User": "alice"},
        )
        assert [w["name"] for w in got.json()["workflows"]] == ["bob flow"]
        extra = bob.post(
            f"/api/flows/{quote(BOB_FLOW['name'])}/runs",
            json={"inputs": {"q": "x"}, "user_id": "alice"},
        )
        assert extra.status_code == 422
        for body in ({"user_id": "alice"}, {"userId": "alice", "scope": "admin"}):
            assert bob.post("/api/tokens", json=body).status_code == 422  # no token for alice
        # alice's flow names, run filters and task texts find nothing of hers.
        assert bob.get("/api/flow-runs", params={"flow": world.ids["flow"]}).json()["items"] == []
        # A NUL (which PostgreSQL cannot store) is bad input on every store, never a crash.
        for got in (
            bob.get("/api/flow-runs", params={"flow": "a\x00"}),
            bob.get(f"/api/flow-runs/{world.ids['frun']}%00"),
            bob.post(f"/api/flows/{quote(world.ids['flow'])}%00/runs", json={}),
        ):
            assert got.status_code == 422 and got.json()["error"] == "Invalid", got.text
        named = bob.post("/api/workflows", json={"workflow": {**BOB_FLOW, "name": "a\x00"}})
        assert named.status_code == 422, named.text  # no name holds a control character
        assert named.json()["problems"][0]["path"] == "body.workflow.name", named.text
        assert bob.get("/api/flows", params={"text": world.ids["learned"]}).json() == []
        # bob registering a name of alice's starts his own version 1; hers is untouched.
        sub = bob.post("/api/workflows", json={"workflow": {**APPROVAL_FLOW}})
        assert sub.status_code == 201 and sub.json()["workflow"]["version"] == 1, sub.text
        mine = bob.get(f"/api/flows/{quote(world.ids['flow'])}/versions").json()["items"]
        assert [v["version"] for v in mine] == [1]
    assert _alice(world.store) == before


def _help_flow(name: str, description: str) -> dict[str, Any]:
    return {**BOB_FLOW, "name": name, "description": description}


def test_what_bob_finds_does_not_depend_on_alice_s_flows(world: World) -> None:
    """Search statistics (term counts, inverse document frequencies) are the namespace's:
    alice's flows sharing bob's words change nothing in his scores."""
    submit(world.store, "bob", "bot", _help_flow("refund parcel", "refund a damaged parcel"))
    submit(world.store, "bob", "bot", _help_flow("track parcel", "track where a parcel is"))
    with world.client("bob") as bob:
        query = {"text": "refund my damaged parcel please", "min_confidence": 0}
        before = bob.get("/api/flows", params=query)
        assert before.status_code == 200 and len(before.json()) == 2
        for i in range(20):
            words = "refund damaged goods" + " parcel" * (i % 3)
            submit(world.store, "alice", "bot", _help_flow(f"alice refund {i}", words))
        assert bob.get("/api/flows", params=query).text == before.text


def test_another_agent_of_the_same_user_is_another_namespace(world: World) -> None:
    token = world.store.create_api_token(user_id="alice", agent_id="desk", scope="admin").token
    with world.client(token=token) as desk:
        for kind, route in (("frun", "/api/flow-runs/{}"), ("cand", "/api/candidates/{}")):
            got, none = (
                desk.get(route.format(world.ids[kind])),
                desk.get(route.format(MISSING[kind])),
            )
            assert _answer(got, world.ids[kind]) == _answer(none, MISSING[kind])
            assert got.status_code == 404
        assert desk.get("/api/workflows").json()["workflows"] == []
        assert desk.get("/api/runs").json()["items"] == []


def test_only_the_exact_token_is_accepted(world: World) -> None:
    token = world.tokens["alice"]
    bent = [
        token.upper(),
        token[:-1],
        token + "x",
        token[:-1] + ("A" if token[-1] != "A" else "B"),
        token.replace("sft_", "SFT_"),
        token.replace("sft_", "sft_0"),
        f"{token} {token}",
        f"{world.tokens['bob']} {token}",
        token.split("_")[0] + "_" + token.split("_")[1],  # the public id alone
    ]
    for value in bent:
        with world.client(token=value) as client:
            got = client.get("/api/workflows")
            assert got.status_code == 401, value
            assert got.json()["error"] == "Unauthorized"
    for query in ("access_token", "token", "bearer"):
        got = httpx.get(f"{world.url}/api/workflows", params={query: token})
        assert got.status_code == 401, query
    revoked = world.store.create_api_token(user_id="alice", agent_id="bot", scope="admin")
    world.store.revoke_api_token(revoked.record.token_id, user_id="alice", agent_id="bot")
    with world.client(token=revoked.token) as client:
        assert client.get("/api/workflows").status_code == 401


# --------------------------------------------------------------------------- MCP


@dataclass
class McpWorld:
    url: str
    store: Store
    tokens: dict[str, str]
    ids: dict[str, str]


@pytest.fixture
def mcp_world(db_url: str) -> Iterator[McpWorld]:
    store = Store.open(db_url)
    service = SoloFlowService(store, tools=TOOLS)
    try:
        ids, tokens = _seed(store)
        server = SoloFlowMCP(service, watch_interval=0.1)
        with live_server(server.http_app()) as base:
            yield McpWorld(f"{base}/mcp", store, tokens, ids)
    finally:
        service.close()
        store.close()


@asynccontextmanager
async def _client(url: str, token: str, **kw: Any) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), **kw) as client:
        yield client


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_mcp_another_user_s_session_and_flows_are_as_missing(mcp_world: McpWorld) -> None:
    w = mcp_world
    async with httpx.AsyncClient(timeout=60) as http:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "alice", "version": "1"},
            },
        }
        opened = await http.post(
            w.url, json=init, headers={**JSON, "Authorization": f"Bearer {w.tokens['alice']}"}
        )
        session = opened.headers["mcp-session-id"]
        answers = []
        for sid in (session, "0" * 32):  # alice's session, then one that does not exist
            got = await http.post(
                w.url,
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
                headers={
                    **JSON,
                    "Authorization": f"Bearer {w.tokens['bob']}",
                    "mcp-session-id": sid,
                    "mcp-protocol-version": "2025-06-18",
                },
            )
            answers.append((got.status_code, got.text))
        assert answers[0] == answers[1] and answers[0][0] == 404, answers

    async with _client(w.url, w.tokens["bob"]) as bob:
        tools = {t.name for t in (await bob.list_tools()).tools}
        assert tools & {"soloflow_notify_after_approval"} == set()
        for bend in (str, str.upper, lambda n: n + " ", lambda n: " " + n, _fullwidth):
            theirs = await bob.call_tool(
                "soloflow_run", {"flow": bend(w.ids["flow"]), "inputs": {"customer_id": "C"}}
            )
            none = await bob.call_tool(
                "soloflow_run", {"flow": bend(MISSING["flow"]), "inputs": {"customer_id": "C"}}
            )
            assert theirs.is_error and none.is_error
            assert _text(theirs).replace(bend(w.ids["flow"]), "<id>") == _text(none).replace(
                bend(MISSING["flow"]), "<id>"
            )
        for kind in ("frun",):
            for tool in ("soloflow_status", "soloflow_cancel"):
                theirs = await bob.call_tool(tool, {"run_id": w.ids[kind].upper()})
                none = await bob.call_tool(tool, {"run_id": MISSING[kind].upper()})
                assert theirs.is_error and none.is_error
                assert _text(theirs).replace(w.ids[kind].upper(), "<id>") == _text(none).replace(
                    MISSING[kind].upper(), "<id>"
                )
    frun = w.store.get_flow_run(w.ids["frun"], user_id="alice", agent_id="bot")
    assert frun.waiting_for_approval and not frun.cancel_requested


async def test_mcp_a_revoked_token_s_listen_stream_hears_no_more(mcp_world: McpWorld) -> None:
    w = mcp_world
    issued = w.store.create_api_token(user_id="alice", agent_id="bot", scope="write")
    async with _client(w.url, issued.token) as alice:
        await alice.list_tools()
        async with alice.listen(tools_list_changed=True) as events:
            w.store.revoke_api_token(issued.record.token_id, user_id="alice", agent_id="bot")
            await asyncio.sleep(0.5)  # the server's watch looks every 0.1 s
            submit(w.store, "alice", "bot", {**BOB_FLOW, "name": "alice's new flow"})
            heard: list[Any] = []

            async def drain() -> None:
                async for event in events:
                    heard.append(event)

            try:
                await asyncio.wait_for(drain(), 2.0)
            except TimeoutError:
                pass
            except Exception:  # the stream ended: what the server does for a revoked token
                pass
            assert heard == [], heard


async def test_mcp_a_revoked_token_s_legacy_connection_is_told_nothing(
    mcp_world: McpWorld,
) -> None:
    w = mcp_world
    issued = w.store.create_api_token(user_id="alice", agent_id="bot", scope="write")
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            seen.put_nowait(method)

    async with _client(w.url, issued.token, mode="legacy", message_handler=on_message) as alice:
        await alice.list_tools()
        submit(w.store, "alice", "bot", {**BOB_FLOW, "name": "first new flow"})
        while await asyncio.wait_for(seen.get(), 30) != "notifications/tools/list_changed":
            pass  # told while the token is active
        w.store.revoke_api_token(issued.record.token_id, user_id="alice", agent_id="bot")
        await asyncio.sleep(0.5)
        submit(w.store, "alice", "bot", {**BOB_FLOW, "name": "second new flow"})
        with pytest.raises(TimeoutError):
            while await asyncio.wait_for(seen.get(), 2.0) != "notifications/tools/list_changed":
                pass
