"""The REST API on a real uvicorn server on 127.0.0.1, driven by httpx, on SQLite and
PostgreSQL: tenancy route by route with two namespaces' tokens, the PRD's user check, scopes,
and what each route does."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from flowrun_fixtures import soloflow_argv, subprocess_env
from serve_helpers import (
    APPROVAL_FLOW,
    SLOW_FLOW,
    TOOLS,
    free_port,
    learn_demo_flow,
    live_server,
    submit,
)

from soloflow_core.store import Store
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.server.api import create_app
from soloflow_langgraph.server.service import SoloFlowService


@dataclass
class World:
    """Two namespaces on one served store: ann/bot (with everything) and bob/desk."""

    url: str
    store: Store
    tokens: dict[str, str]
    ids: dict[str, str]
    """ann's ids: flow, candidate, frun (waiting for approval), done (a completed flow run),
    run (a captured run), token (ann's read token's id)."""

    def client(self, who: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    store = Store.open(db_url)
    service = SoloFlowService(store, tools=TOOLS)
    try:
        learned = learn_demo_flow(store, "ann", "bot")
        submit(store, "ann", "bot", APPROVAL_FLOW)
        submit(store, "ann", "bot", SLOW_FLOW)
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
        with FlowRuntime(store, tools=TOOLS, user_id="ann", agent_id="bot") as runtime:
            waiting = runtime.run(APPROVAL_FLOW["name"], {"customer_id": "C-1", "order_id": "O-1"})
            done = runtime.run(learned.name, {"email": "alice@example.com"})
        assert (waiting.status, done.status) == ("waiting", "completed")
        tokens = {
            "ann": store.create_api_token(user_id="ann", agent_id="bot", scope="write").token,
            "ann_read": store.create_api_token(user_id="ann", agent_id="bot", scope="read").token,
            "ann_admin": store.create_api_token(user_id="ann", agent_id="bot", scope="admin").token,
            "bob": store.create_api_token(user_id="bob", agent_id="desk", scope="admin").token,
        }
        ann_read = store.verify_api_token(tokens["ann_read"])
        assert ann_read is not None
        (cand,) = store.list_candidates(user_id="ann", agent_id="bot")
        ids = {
            "flow": learned.name,
            "candidate": cand.id,
            "frun": str(waiting.run_id),
            "done": str(done.run_id),
            "run": store.list_runs(user_id="ann", agent_id="bot", limit=1)[0].run_id,
            "token": ann_read.token_id,
        }
        with live_server(create_app(service)) as url:
            yield World(url, store, tokens, ids)
    finally:
        service.close()
        store.close()


# (method, path, body) of every route that takes an id; {x} is ann's id of kind x.
ID_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/flows/{flow}", None),
    ("GET", "/api/flows/{flow}/versions", None),
    ("GET", "/api/flows/{flow}/stats", None),
    ("POST", "/api/flows/{flow}/runs", {"inputs": {"email": "bob@example.org"}}),
    ("GET", "/api/candidates/{candidate}", None),
    ("POST", "/api/candidates/{candidate}/verify", {}),
    ("POST", "/api/candidates/{candidate}/approve", None),
    ("POST", "/api/candidates/{candidate}/reject", None),
    ("GET", "/api/flow-runs/{frun}", None),
    ("GET", "/api/flow-runs/{frun}/history", None),
    ("POST", "/api/flow-runs/{frun}/approve", {}),
    ("POST", "/api/flow-runs/{frun}/reject", {}),
    ("POST", "/api/flow-runs/{frun}/cancel", None),
    ("POST", "/api/flow-runs/{frun}/resume", {}),
    ("GET", "/api/runs/{run}", None),
    ("GET", "/api/runs/{run}/trace", None),
    ("POST", "/api/tokens/{token}/revoke", None),
]
LIST_ROUTES = [
    "/api/workflows",
    "/api/candidates",
    "/api/flow-runs",
    "/api/runs",
    "/api/tokens",
    "/api/flows?text=where+is+my+order+email+notify+customer",
]
WRITE_ROUTES = [(m, p, b) for m, p, b in ID_ROUTES if m == "POST" and "/tokens/" not in p] + [
    (
        "POST",
        "/api/workflows",
        {"workflow": {"name": "x", "steps": [{"id": "s", "skill_key": "find_customer"}]}},
    )
]
MISSING = {
    "flow": "no such flow",
    "candidate": "cand_000000000000",
    "frun": "frun_" + "0" * 32,
    "done": "frun_" + "1" * 32,
    "run": "no-such-run",
    "token": "0" * 16,
}


def _fill(path: str, ids: dict[str, str]) -> tuple[str, str | None]:
    """The path with ids filled in (URL-encoded), and the id used."""
    kind = re.search(r"\{(\w+)\}", path)
    if kind is None:
        return path, None
    value = ids[kind.group(1)]
    return path.replace(kind.group(0), httpx.URL("/" + value).raw_path.decode()[1:]), value


def _call(
    client: httpx.Client, method: str, path: str, body: dict[str, Any] | None
) -> httpx.Response:
    return (
        client.request(method, path, json=body)
        if body is not None
        else client.request(method, path)
    )


def _snapshot(store: Store) -> dict[str, Any]:
    """What bob must not be able to change of ann's."""
    ns = {"user_id": "ann", "agent_id": "bot"}
    return {
        "flows": [
            (m.name, m.version, m.status, m.total_executions) for m in store.list_flow_meta(**ns)
        ],
        "candidates": [(c.id, c.status, c.fidelity) for c in store.list_candidates(**ns)],
        "flow_runs": sorted((r["id"], r["status"]) for r in store.list_flow_runs(limit=100, **ns)),
        "tokens": [(t.token_id, t.revoked_at) for t in store.list_api_tokens(**ns)],
    }


def test_every_route_with_an_id_answers_another_namespace_as_if_it_did_not_exist(
    world: World,
) -> None:
    before = _snapshot(world.store)
    with world.client("bob") as bob, world.client("ann_admin") as ann:
        for method, path, body in ID_ROUTES:
            theirs, their_id = _fill(path, world.ids)
            missing, missing_id = _fill(path, MISSING)
            got, none = _call(bob, method, theirs, body), _call(bob, method, missing, body)
            assert got.status_code == none.status_code == 404, (path, got.text, none.text)
            assert got.headers["content-type"] == none.headers["content-type"]
            # The same answer, the id aside: nothing tells an existing id from a missing one.
            assert got.text.replace(str(their_id), "<id>") == none.text.replace(
                str(missing_id), "<id>"
            ), path
            if method == "GET":  # the ids are real: ann reads each of them
                assert _call(ann, method, theirs, body).status_code == 200, path
    assert _snapshot(world.store) == before


def test_lists_hold_only_the_namespace_s_own_items(world: World) -> None:
    with world.client("bob") as bob, world.client("ann_admin") as ann:
        for path in LIST_ROUTES:
            mine, theirs = ann.get(path), bob.get(path)
            assert mine.status_code == theirs.status_code == 200, (path, theirs.text)
            text = theirs.text
            for value in world.ids.values():
                assert value not in text, (path, value)
            assert any(v in mine.text for v in world.ids.values()), path
        names = [w["name"] for w in bob.get("/api/workflows").json()["workflows"]]
        assert names == ["bob flow"]


def test_a_request_naming_another_user_or_agent_is_unauthorized(world: World) -> None:
    """The PRD's check, on every route: the user (and agent) named must be the token's."""
    with world.client("ann_admin") as ann:
        for method, path, body in [
            *ID_ROUTES,
            *[("GET", p, None) for p in LIST_ROUTES],
            *WRITE_ROUTES[-1:],
        ]:
            filled, _ = _fill(path, world.ids)
            sep = "&" if "?" in filled else "?"
            for query in ("user_id=bob", "agent_id=desk"):
                got = _call(ann, method, f"{filled}{sep}{query}", body)
                assert got.status_code == 401 and got.json()["error"] == "Unauthorized", (
                    path,
                    query,
                    got.text,
                )
        named = ann.post(
            "/api/workflows",
            json={
                "userId": "bob",
                "agentId": "bot",
                "workflow": {
                    "name": "sneaky",
                    "steps": [{"id": "s", "skill_key": "find_customer"}],
                },
            },
        )
        assert named.status_code == 401 and "names user 'bob'" in named.json()["detail"]
        assert ann.get("/api/workflows?user_id=ann&agent_id=bot").status_code == 200
    assert all(
        m.name != "sneaky" for m in world.store.list_flow_meta(user_id="bob", agent_id="bot")
    )


def test_a_read_only_token_cannot_change_anything(world: World) -> None:
    before = _snapshot(world.store)
    with world.client("ann_read") as reader, world.client("ann") as writer:
        for method, path, body in WRITE_ROUTES:
            got = _call(reader, method, _fill(path, world.ids)[0], body)
            assert got.status_code == 403 and got.json()["error"] == "Forbidden", (path, got.text)
            assert "scope is 'read'" in got.json()["detail"]
        for method, path in [
            ("GET", "/api/tokens"),
            ("POST", "/api/tokens"),
            ("POST", f"/api/tokens/{world.ids['token']}/revoke"),
        ]:
            assert _call(writer, method, path, None).status_code == 403, path  # admin only
        assert reader.get(f"/api/flow-runs/{world.ids['frun']}").status_code == 200
    assert _snapshot(world.store) == before


def test_no_token_or_a_bad_one_is_unauthorized_everywhere(world: World) -> None:
    revoked = world.store.create_api_token(user_id="ann", agent_id="bot", scope="admin")
    world.store.revoke_api_token(revoked.record.token_id, user_id="ann", agent_id="bot")
    world.tokens["revoked"] = revoked.token
    world.tokens["forged"] = world.tokens["ann_admin"][:-4] + "abcd"
    for who in (None, "revoked", "forged"):
        with world.client(who) as client:
            for method, path, body in [
                *ID_ROUTES,
                *[("GET", p, None) for p in LIST_ROUTES],
                *WRITE_ROUTES,
            ]:
                got = _call(client, method, _fill(path, world.ids)[0], body)
                assert got.status_code == 401, (who, path, got.text)
                assert got.headers["www-authenticate"] == "Bearer"


def test_submitting_a_workflow_validates_it_like_flows_submit(world: World) -> None:
    with world.client("ann") as ann:
        bad = ann.post(
            "/api/workflows",
            json={
                "workflow": {
                    "name": "broken",
                    "steps": [
                        {
                            "id": "a",
                            "skill_key": "find_customer",
                            "input_map": {"email": "{{_trigger.email}}"},
                        },
                        {"id": "b", "skill_key": "wire_money", "depends_on": ["a"]},
                        {"id": "c", "skill_key": "list_orders", "depends_on": ["zz"]},
                    ],
                }
            },
        )
        assert bad.status_code == 422, bad.text
        paths = {p["path"]: p["message"] for p in bad.json()["problems"]}
        assert (
            "no executor registered for skill_key 'wire_money'"
            in paths["body.workflow.steps[1].skill_key"]
        )
        assert "unknown step 'zz'" in paths["body.workflow.steps[2].depends_on[0]"]
        typed = ann.post(
            "/api/workflows",
            json={"workflow": {"name": "typed", "steps": [{"id": "a", "skill_key": 7}]}},
        )
        assert typed.status_code == 422
        assert [p["path"] for p in typed.json()["problems"]] == ["body.workflow.steps[0].skill_key"]
        assert all(
            m.name not in ("broken", "typed")
            for m in world.store.list_flow_meta(user_id="ann", agent_id="bot")
        )
        ok = ann.post(
            "/api/workflows",
            json={
                "userId": "ann",
                "agentId": "bot",
                "triggerKeywords": ["lookup"],
                "workflow": {
                    "name": "lookup",
                    "steps": [
                        {
                            "id": "a",
                            "skill_key": "find_customer",
                            "input_map": {"email": "{{_trigger.email}}"},
                        }
                    ],
                },
            },
        )
        assert ok.status_code == 201, ok.text
        body = ok.json()
        assert body["success"] is True and body["workflow"]["source"] == "user-submitted"
        assert body["workflow"]["inputs"] == ["email"] and body["workflow"]["trigger_keywords"] == [
            "lookup"
        ]
        assert 0.0 <= body["workflow"]["quality"]["overall"] <= 1.0


def test_lists_are_paginated(world: World) -> None:
    with world.client("ann") as ann:
        names: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = ann.get(
                "/api/workflows", params={"limit": 1, "offset": offset, "quality": False}
            ).json()
            assert len(page["workflows"]) <= 1 and page["workflows"][0]["quality"] is None
            names += [w["name"] for w in page["workflows"]]
            offset = page["next_offset"]
        assert names == sorted(
            m.name for m in world.store.list_flow_meta(user_id="ann", agent_id="bot")
        )
        runs = ann.get("/api/runs", params={"limit": 2, "offset": 1}).json()
        assert len(runs["items"]) == 2 and runs["next_offset"] == 3
        assert ann.get("/api/flow-runs", params={"limit": 0}).status_code == 422


def test_a_flow_run_answers_its_result_or_its_id_while_it_runs(world: World) -> None:
    with world.client("ann") as ann:
        done = ann.post(
            f"/api/flows/{world.ids['flow']}/runs",
            json={"task": "Order status? My email is bob@example.org"},
        )
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed" and "C-1002" in done.json()["output"]
        slow = ann.post(
            "/api/flows/slow echo/runs",
            json={"inputs": {"text": "hi", "seconds": 1.5}, "wait_seconds": 0.1},
        )
        assert slow.status_code == 202 and slow.json()["status"] == "running", slow.text
        run_id = slow.json()["run_id"]
        deadline = time.monotonic() + 60
        while (state := ann.get(f"/api/flow-runs/{run_id}").json()["state"]) not in (
            "completed",
            "failed",
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert state == "completed"
        history = ann.get(f"/api/flow-runs/{run_id}/history").json()["items"]
        assert history[-1]["to"] == "completed" and {"at", "step", "from", "to", "detail"} == set(
            history[0]
        )
        first = ann.get(f"/api/flow-runs/{run_id}/history", params={"limit": 2}).json()
        assert first["items"] == history[:2] and first["next_offset"] == 2
        bad = ann.post(f"/api/flows/{world.ids['flow']}/runs", json={"inputs": {"email": 5}})
        assert bad.status_code == 422 and bad.json()["problems"][0]["path"] == "body.inputs.email"


def test_approval_reject_cancel_and_resume(world: World) -> None:
    with world.client("ann") as ann:
        approved = ann.post(f"/api/flow-runs/{world.ids['frun']}/approve", json={"comment": "ok"})
        assert approved.status_code == 200 and approved.json()["status"] == "completed", (
            approved.text
        )
        again = ann.post(f"/api/flow-runs/{world.ids['frun']}/approve", json={})
        assert again.status_code == 409 and "does not wait for approval" in again.json()["detail"]
        second = ann.post(
            f"/api/flows/{APPROVAL_FLOW['name']}/runs",
            json={"inputs": {"customer_id": "C-2", "order_id": "O-2"}},
        ).json()
        assert second["status"] == "waiting"
        rejected = ann.post(
            f"/api/flow-runs/{second['run_id']}/reject", json={"comment": "no"}
        ).json()
        assert rejected["status"] == "cancelled"
        third = ann.post(
            f"/api/flows/{APPROVAL_FLOW['name']}/runs",
            json={"inputs": {"customer_id": "C-3", "order_id": "O-3"}},
        ).json()
        cancelled = ann.post(f"/api/flow-runs/{third['run_id']}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        ended = ann.post(f"/api/flow-runs/{world.ids['done']}/resume", json={})
        assert ended.status_code == 409 and "has ended" in ended.json()["detail"]


def test_flows_candidates_and_captured_runs(world: World) -> None:
    with world.client("ann") as ann:
        shown = ann.get(f"/api/flows/{world.ids['flow']}").json()
        assert shown["definition"]["name"] == world.ids["flow"] and shown["mermaid"].startswith(
            "---"
        )
        assert shown["workflow"]["quality"]["evidence"]["verified_occurrences"] == 5
        assert (
            ann.get(f"/api/flows/{world.ids['flow']}/versions").json()["items"][0]["version"] == 1
        )
        stats = ann.get(f"/api/flows/{world.ids['flow']}/stats").json()
        assert stats["agent"]["runs"] == 5 and stats["saved_per_run"]["model_calls"] == 5.0
        found = ann.get(
            "/api/flows", params={"text": "Where is my order? email dave@example.com"}
        ).json()
        assert found[0]["name"] == world.ids["flow"] and found[0]["quality"] is not None
        cand = ann.get(f"/api/candidates/{world.ids['candidate']}").json()
        assert cand["status"] == "approved" and cand["fidelity"] == 1.0
        assert ann.post(f"/api/candidates/{world.ids['candidate']}/approve").status_code == 409
        verified = ann.post(
            f"/api/candidates/{world.ids['candidate']}/verify", json={"promote": True}
        ).json()
        assert (
            verified["passes"] is True and verified["promoted"] is None
        )  # decided candidates stay decided
        trace = ann.get(f"/api/runs/{world.ids['run']}/trace").json()
        kinds = [s["kind"] for s in trace["spans"]]
        assert kinds == ["model", "tool"] * 4 + ["model"]
        assert [s["name"] for s in trace["spans"] if s["kind"] == "tool"] == [
            "find_customer",
            "list_orders",
            "track_shipment",
            "notify_customer",
        ]
        run = ann.get(f"/api/runs/{world.ids['run']}").json()
        assert len(run["tool_calls"]) == 4 and len(run["model_calls"]) == 5


def test_tokens_routes_for_an_admin_token(world: World) -> None:
    with world.client("ann_admin") as admin:
        created = admin.post("/api/tokens", json={"scope": "read", "label": "dashboard"})
        assert created.status_code == 201
        token = created.json()["token"]
        listed = admin.get("/api/tokens").json()["items"]
        assert created.json()["token_id"] in [t["token_id"] for t in listed]
        assert all(t["token"] is None for t in listed)
        with httpx.Client(base_url=world.url, headers={"Authorization": f"Bearer {token}"}) as new:
            assert new.get("/api/workflows").status_code == 200
            assert (
                admin.post(f"/api/tokens/{created.json()['token_id']}/revoke").json()["revoked_at"]
                is not None
            )
            assert new.get("/api/workflows").status_code == 401
        assert admin.post("/api/tokens", json={"scope": "root"}).status_code == 422


def test_the_openapi_document_declares_the_bearer_token(world: World) -> None:
    doc = httpx.get(f"{world.url}/openapi.json").json()
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert {
        "/api/workflows",
        "/api/flows/{name}",
        "/api/flow-runs/{run_id}",
        "/api/runs/{run_id}/trace",
        "/api/candidates/{candidate_id}",
    } <= set(doc["paths"])


def test_soloflow_serve_runs_the_api_in_its_own_process(sqlite_url: str) -> None:
    with Store.open(sqlite_url) as store:
        submit(store, "ann", "bot", SLOW_FLOW)
        token = store.create_api_token(user_id="ann", agent_id="bot", scope="write").token
    port = free_port()
    proc = subprocess.Popen(
        soloflow_argv(
            "--db",
            sqlite_url,
            "serve",
            "--port",
            str(port),
            "--tools",
            "serve_helpers:TOOLS",
            "--log-level",
            "warning",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stderr.read() if proc.stderr else ""
            )
            time.sleep(0.1)
        headers = {"Authorization": f"Bearer {token}"}
        ran = httpx.post(
            f"{base}/api/flows/slow echo/runs", json={"inputs": {"text": "hey"}}, headers=headers
        )
        assert ran.status_code == 200 and ran.json()["output"] == "hey"
        assert (
            httpx.get(f"{base}/api/workflows", headers=headers).json()["workflows"][0]["name"]
            == "slow echo"
        )
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), err  # uvicorn hands the SIGINT back after a graceful stop
    assert "Traceback" not in err and f"SoloFlow API on http://127.0.0.1:{port}/api" in err


@pytest.mark.parametrize("command", [["serve"], ["mcp"], ["mcp", "--http"]])
def test_without_the_api_extra_the_commands_say_what_to_install(
    command: list[str], sqlite_url: str
) -> None:
    code = (
        "import sys; sys.modules['fastapi'] = None; sys.modules['mcp'] = None\n"
        "from soloflow_langgraph.cli import main\n"
        f"main(['--db', {sqlite_url!r}, *{command!r}])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'soloflow-engine[api]'" in lines[0], proc.stderr
    assert "fastapi, mcp not installed" in lines[0]
