"""What serving costs: the REST API and the MCP server against the Python API they call.

REST (``soloflow serve`` in its own process, uvicorn, one worker): with ``--flows`` flows
(10,000) registered in one namespace and ``--clients`` (8) clients at once, each sending
``--requests`` requests over its own keep-alive ``httpx.Client``:

* ``list``: ``GET /api/workflows?limit=50&offset=O`` (each flow with its quality score),
  against ``SoloFlowService.list_workflows`` called by 8 threads of this process — the
  method the route calls; the same seeded offsets on both sides, so both see the same
  mix of cold and warm quality scores (each process caches its own);
* ``list, no quality``: the same with ``quality=false`` (the paged read alone);
* ``start a run``: ``POST /api/flows/echo/runs`` (a one-step flow, its result in the
  answer), against ``FlowRuntime.run("echo", ...)`` on 8 threads — the runtime as the
  service builds it (same store, executors, outcome recording).

MCP: one client calling the ``echo`` flow's own tool ``--calls`` times in a row, over stdio
(``soloflow mcp`` in its own process) and in process (the SDK's in-memory client: the
protocol without a transport), against ``FlowRuntime.run`` in this process — in a namespace
of 21 flows (every active flow is a tool; the REST namespace's 10,000 would be 50 pages of
``tools/list``).

Every side runs in rounds, one block of each per round, and the figures are over all
rounds: p50 and p95 of each request's latency as its client saw it, and the ratio to the
direct call's. The machine is shared and noisy: read the ratios.

Usage::

    python benchmarks/bench_serve.py [--flows 10000] [--clients 8] [--requests 100] [--calls 200]
                                     [--rounds 3] [--db URL] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

ROOT = Path(__file__).resolve().parent.parent


@tool
def bench_echo(text: str) -> str:
    """Return the text."""
    return text


TOOLS = [bench_echo]
"""The executors of the benchmark's flows (``--tools benchmarks.bench_serve:TOOLS``)."""

USER, AGENT = "bench", "serve"
MCP_USER, MCP_AGENT, MCP_FLOWS = "bench", "mcp", 20
"""The MCP client's namespace: ``echo`` and 20 other flows (every active flow is a tool: a
namespace of 10,000 would measure listing them, not a call)."""
ECHO = {
    "name": "echo",
    "description": "Echo a text.",
    "steps": [{"id": "s", "skill_key": "bench_echo", "input_map": {"text": "{{_trigger.text}}"}}],
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def _seed(url: str, flows: int) -> str:
    """``flows`` one-step flows plus ``echo`` in the namespace; a write token."""
    from soloflow_core.memory.procedural import ProceduralMemory
    from soloflow_core.models import FlowDefinition, FlowStep
    from soloflow_core.store import Store

    with Store.open(url) as store:
        have = len(store.list_flow_meta(user_id=USER, agent_id=AGENT))
        start = time.perf_counter()
        for i in range(have, flows):
            flow = FlowDefinition(
                name=f"flow {i:05d}",
                description=f"Bench flow number {i}.",
                steps=[
                    FlowStep(
                        id="s", skill_key="bench_echo", input_map={"text": "{{_trigger.text}}"}
                    )
                ],
            )
            store.add_flow_version(flow, user_id=USER, agent_id=AGENT, source="user-submitted")
        if have < flows:
            print(
                f"registered {flows - have} flows in {time.perf_counter() - start:.1f} s",
                flush=True,
            )
        memory = ProceduralMemory(store)
        memory.submit_workflow(USER, AGENT, ECHO)
        memory.submit_workflow(MCP_USER, MCP_AGENT, ECHO)
        for i in range(MCP_FLOWS):
            memory.submit_workflow(MCP_USER, MCP_AGENT, {**ECHO, "name": f"echo {i}"})
        return store.create_api_token(user_id=USER, agent_id=AGENT, scope="write").token


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _soloflow(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("soloflow")), *args]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def _concurrently(clients: int, requests: int, call: Callable[[int, int], None]) -> list[float]:
    """``call(client, i)`` from ``clients`` threads, ``requests`` each; every call's seconds."""
    times: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(requests):
            t = time.perf_counter()
            call(k, i)
            times[k].append(time.perf_counter() - t)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return [t for ts in times for t in ts]


def _pct(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000
        if len(values) > 1
        else values[0] * 1000
    )


def _row(label: str, served: list[float], direct: list[float]) -> str:
    s50, s95, d50, d95 = _pct(served, 50), _pct(served, 95), _pct(direct, 50), _pct(direct, 95)
    return (
        f"| {label} | {d50:.2f} | {d95:.2f} | {s50:.2f} | {s95:.2f} | {s95 - d95:+.2f} | "
        f"**{s95 / d95:.2f}×** |"
    )


def bench_rest(url: str, token: str, args: argparse.Namespace) -> None:
    import httpx

    from soloflow_core.store import Store
    from soloflow_langgraph.server.principal import Principal
    from soloflow_langgraph.server.service import SoloFlowService

    port = _free_port()
    proc = subprocess.Popen(
        _soloflow(
            "--db",
            url,
            "serve",
            "--port",
            str(port),
            "--tools",
            "benchmarks.bench_serve:TOOLS",
            "--log-level",
            "warning",
        ),
        env=_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    store = Store.open(url)
    service = SoloFlowService(store, tools=TOOLS)
    p = Principal(USER, AGENT, "write")
    runtime = service.runtime(p)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        pages = max(1, (args.flows + 1) // 50)
        offsets = [
            random.Random(7 + k).randrange(pages) * 50
            for k in range(args.clients * args.requests * args.rounds)
        ]
        clients = [
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120)
            for _ in range(args.clients)
        ]
        results: dict[str, tuple[list[float], list[float]]] = {
            k: ([], []) for k in ("list", "noq", "run")
        }
        n = args.requests
        for r in range(args.rounds):

            def off(k: int, i: int, r: int = r) -> int:
                return offsets[(r * args.clients + k) * n + i]

            def http_list(k: int, i: int, quality: bool) -> None:
                got = clients[k].get(
                    "/api/workflows", params={"limit": 50, "offset": off(k, i), "quality": quality}
                )
                assert got.status_code == 200, got.text

            def http_run(k: int, i: int) -> None:
                got = clients[k].post("/api/flows/echo/runs", json={"inputs": {"text": f"{k}-{i}"}})
                assert got.status_code == 200 and got.json()["status"] == "completed", got.text

            def direct_run(k: int, i: int) -> None:
                assert runtime.run("echo", {"text": f"{k}-{i}"}).status == "completed"

            # Warm both sides' connections and caches of the run path, untimed.
            if r == 0:
                http_run(0, 0)
                direct_run(0, 0)
            results["list"][0].extend(
                _concurrently(args.clients, n, lambda k, i: http_list(k, i, True))
            )
            results["list"][1].extend(
                _concurrently(
                    args.clients,
                    n,
                    lambda k, i: service.list_workflows(p, limit=50, offset=off(k, i)),
                )
            )  # noqa: B023
            results["noq"][0].extend(
                _concurrently(args.clients, n, lambda k, i: http_list(k, i, False))
            )
            results["noq"][1].extend(
                _concurrently(
                    args.clients,
                    n,
                    lambda k, i: service.list_workflows(
                        p, limit=50, offset=off(k, i), quality=False
                    ),
                )
            )  # noqa: B023
            results["run"][0].extend(_concurrently(args.clients, max(1, n // 2), http_run))
            results["run"][1].extend(_concurrently(args.clients, max(1, n // 2), direct_run))
            print(f"  REST round {r + 1}/{args.rounds} done", flush=True)
        for c in clients:
            c.close()
    finally:
        proc.terminate()
        proc.wait(60)
        service.close()
        store.close()
    print(
        f"\n### REST: {args.flows} flows, {args.clients} concurrent clients ({args.rounds} rounds)\n"
    )
    print(
        "| operation | direct p50 ms | direct p95 ms | API p50 ms | API p95 ms | p95 overhead ms | p95 ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key, label in (
        ("list", "GET /api/workflows (limit 50, quality)"),
        ("noq", "GET /api/workflows (limit 50, quality=false)"),
        ("run", "POST /api/flows/echo/runs (start a short run)"),
    ):
        print(_row(label, *results[key]))


async def _mcp_calls(client: Any, calls: int) -> list[float]:
    out = []
    for i in range(calls):
        t = time.perf_counter()
        res = await client.call_tool("soloflow_echo", {"text": f"m{i}"})
        out.append(time.perf_counter() - t)
        assert not res.is_error and res.structured_content["status"] == "completed", res
    return out


def bench_mcp(url: str, args: argparse.Namespace) -> None:
    from mcp import Client, StdioServerParameters

    from soloflow_core.store import Store
    from soloflow_langgraph.server.mcp import SoloFlowMCP
    from soloflow_langgraph.server.principal import Principal
    from soloflow_langgraph.server.service import SoloFlowService

    store = Store.open(url)
    service = SoloFlowService(store, tools=TOOLS)
    p = Principal(MCP_USER, MCP_AGENT)
    runtime = service.runtime(p)
    argv = _soloflow(
        "--db",
        url,
        "--user",
        MCP_USER,
        "--agent",
        MCP_AGENT,
        "mcp",
        "--tools",
        "benchmarks.bench_serve:TOOLS",
    )
    stdio, inproc, direct = [], [], []

    async def run() -> None:
        server = SoloFlowMCP(service, principal=p)
        async with (
            Client(
                StdioServerParameters(command=argv[0], args=argv[1:], env=_env()),
                read_timeout_seconds=300,
            ) as over_stdio,
            Client(server.server) as in_process,
        ):
            await _mcp_calls(over_stdio, 5)
            await _mcp_calls(in_process, 5)
            for r in range(args.rounds):
                stdio.extend(await _mcp_calls(over_stdio, args.calls))
                inproc.extend(await _mcp_calls(in_process, args.calls))
                for i in range(args.calls):
                    t = time.perf_counter()
                    assert runtime.run("echo", {"text": f"d{i}"}).status == "completed"
                    direct.append(time.perf_counter() - t)
                print(f"  MCP round {r + 1}/{args.rounds} done", flush=True)

    try:
        asyncio.run(run())
    finally:
        service.close()
        store.close()
    print(
        f"\n### MCP: a flow tool call against FlowRuntime.run ({args.rounds} × {args.calls} calls, one client)\n"
    )
    print(
        "| transport | direct p50 ms | direct p95 ms | MCP p50 ms | MCP p95 ms | p50 overhead ms | p50 ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, served in (("stdio (`soloflow mcp`)", stdio), ("in process (no transport)", inproc)):
        s50, d50 = _pct(served, 50), _pct(direct, 50)
        print(
            f"| {label} | {d50:.2f} | {_pct(direct, 95):.2f} | {s50:.2f} | {_pct(served, 95):.2f} | "
            f"{s50 - d50:+.2f} | **{s50 / d50:.2f}×** |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--flows", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=100, help="Per client per round.")
    parser.add_argument("--calls", type=int, default=200, help="MCP calls per round.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--db", default=None, help="A store URL (default: a SQLite file in a temporary directory)."
    )
    parser.add_argument(
        "--quick", action="store_true", help="1,000 flows, 20 requests, 50 calls, 1 round."
    )
    args = parser.parse_args()
    if args.quick:
        args.flows, args.requests, args.calls, args.rounds = 1000, 20, 50, 1
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'serve.db'}"
        print(
            f"store {url.split('@')[-1]}; {args.flows} flows; python {sys.version.split()[0]}",
            flush=True,
        )
        token = _seed(url, args.flows)
        bench_rest(url, token, args)
        bench_mcp(url, args)


if __name__ == "__main__":
    main()
