"""The MCP server: SoloFlow's flows as tools, on the official ``mcp`` SDK.

Tools, for the caller's (user, agent) namespace:

- ``soloflow_run`` (a flow, its inputs or a task text → its result, or its run id when it
  waits for approval or outlives ``wait_seconds``), ``soloflow_status``, ``soloflow_list``,
  ``soloflow_cancel``, ``soloflow_find`` (the flows that fit a task text);
- every **active** flow as its own tool, named ``soloflow_<flow name>`` (as
  :func:`~soloflow_langgraph.routing.flow_tool_name`; a name taken by another tool gets
  ``_2``, ``_3``…), described from the flow (its description, its steps, its quality), whose
  input schema is the flow's.

The tool list is the namespace's: it changes when flows are promoted, submitted or retired
— here or in any other process on the same store, seen by a watch of the store every
``watch_interval`` seconds — and the server tells its clients (``notifications/tools/
list_changed``: on a ``subscriptions/listen`` stream for 2026-07-28 clients, on the
connection's standalone stream for earlier ones), each only about its own namespace and only
while its token is active (:mod:`~soloflow_langgraph.server.mcp_listeners`).

Over stdio the namespace is the command's ``--user``/``--agent``; over streamable HTTP it is
the bearer token's (``soloflow tokens create``), and a read-only token sees and may call only
the tools that change nothing. A failure is an MCP tool error carrying the reason, never a
crashed server.

The low-level ``mcp.server.lowlevel.Server`` is used rather than ``MCPServer``: the tool list
is computed per caller and per moment, where ``MCPServer`` keeps one static list per server.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soloflow_core import __version__
from soloflow_core.errors import AccessDeniedError, SoloFlowError
from soloflow_core.flow.validate import validate_flow
from soloflow_core.models.names import Name
from soloflow_core.store.tokens import scope_allows
from soloflow_langgraph.routing.tools import flow_args_schema, flow_tool_name
from soloflow_langgraph.server.auth import principal_of_access_token
from soloflow_langgraph.server.driver import DEFAULT_WAIT, MAX_WAIT
from soloflow_langgraph.server.mcp_listeners import (
    Connections,
    Listener,
    NamespaceBus,
    current_listener,
)
from soloflow_langgraph.server.principal import Principal
from soloflow_langgraph.server.service import SoloFlowService
from soloflow_langgraph.server.views import FindMatchView, FlowRunView, RunOutcomeView, WorkflowPage

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from starlette.applications import Starlette

    from soloflow_core.models import FlowDefinition
    from soloflow_core.store.procedural import FlowMeta

__all__ = ["BUILTIN_TOOLS", "SoloFlowMCP"]

log = logging.getLogger(__name__)

DEFAULT_WATCH_INTERVAL = 1.0
"""Seconds between two looks at the store for flows promoted, submitted or retired."""
MAX_SESSIONS_KEPT = 1000
TOOLS_PAGE = 200
"""Flow tools per ``tools/list`` page; a client follows ``nextCursor`` for the rest."""


# --------------------------------------------------------------------------- the fixed tools


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunArgs(_Args):
    flow: Name = Field(min_length=1, description="The flow's name (soloflow_list, soloflow_find)")
    inputs: dict[str, Any] = Field(default_factory=dict, description="The flow's inputs")
    task: str | None = Field(
        default=None, description="A task text: missing inputs are recovered from it"
    )
    wait_seconds: float = Field(
        default=DEFAULT_WAIT,
        ge=0.0,
        le=MAX_WAIT,
        description="Seconds to wait for the result before answering with the run id",
    )


class RunIdArgs(_Args):
    run_id: Name = Field(min_length=1, description="A flow run id (frun_…)")


class ListArgs(_Args):
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0)


class FindArgs(_Args):
    task: str = Field(min_length=1, description="The task (or conversation) to find flows for")
    limit: int = Field(default=5, ge=1, le=50)
    tools: list[str] | None = Field(
        default=None, description="The tools you have: flows calling others are left out"
    )


class FindResult(BaseModel):
    matches: list[FindMatchView]


@dataclass(frozen=True, slots=True)
class _Builtin:
    description: str
    args: type[_Args]
    output: type[BaseModel]
    scope: str


BUILTIN_TOOLS: dict[str, _Builtin] = {
    "soloflow_run": _Builtin(
        description="Run a registered SoloFlow flow (no model call). Returns its result; when it waits for "
        "a person's approval or runs longer than wait_seconds, its run_id — follow it with soloflow_status.",
        args=RunArgs,
        output=RunOutcomeView,
        scope="write",
    ),
    "soloflow_status": _Builtin(
        description="A flow run's state, outcome and steps.",
        args=RunIdArgs,
        output=FlowRunView,
        scope="read",
    ),
    "soloflow_list": _Builtin(
        description="The registered flows of this namespace, with their record and quality score.",
        args=ListArgs,
        output=WorkflowPage,
        scope="read",
    ),
    "soloflow_cancel": _Builtin(
        description="Cancel a flow run: a running one stops before its next step.",
        args=RunIdArgs,
        output=FlowRunView,
        scope="write",
    ),
    "soloflow_find": _Builtin(
        description="The flows that fit a task, best first (text, tools named, confidence; ties by quality).",
        args=FindArgs,
        output=FindResult,
        scope="read",
    ),
}


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(mode="serialization")


def _flow_input_schema(flow: FlowDefinition) -> dict[str, Any]:
    """The flow's own input schema; derived from its templates when it declares none."""
    schema = flow.input_schema
    if isinstance(schema, dict) and schema.get("type") == "object":
        return schema
    return flow_args_schema(flow).model_json_schema(by_alias=True)


def _flow_description(flow: FlowDefinition, meta: FlowMeta, quality: float | None) -> str:
    tool = {s.id: s.skill_key for s in flow.steps}
    layers = [[tool[step] for step in layer] for layer in validate_flow(flow).layers]
    path = " → ".join(
        layer[0] if len(layer) == 1 else "(" + ", ".join(layer) + ")" for layer in layers
    )
    text = f"Runs SoloFlow flow {flow.name!r}: {path}; the same steps every time, no model call."
    if flow.description.strip():
        text = flow.description.strip() + "\n" + text
    text += (
        f" Confidence {meta.confidence:.2f}"
        + (f", quality {quality:.2f}" if quality is not None else "")
        + "."
    )
    return text if len(text) <= 1024 else text[:1023] + "…"


# --------------------------------------------------------------------------- the server


class SoloFlowMCP:
    """The MCP server over ``service``.

    Args:
        service: what the tools do.
        principal: the namespace of a stdio server (``--user``/``--agent``, scope ``admin``);
            None over HTTP, where each request's bearer token gives it.
        watch_interval: seconds between two looks at the store for changed flows.
        tools_page: flow tools per ``tools/list`` page.
    """

    def __init__(
        self,
        service: SoloFlowService,
        *,
        principal: Principal | None = None,
        watch_interval: float = DEFAULT_WATCH_INTERVAL,
        tools_page: int = TOOLS_PAGE,
    ) -> None:
        self.service = service
        self.principal = principal
        self.watch_interval = watch_interval
        self.tools_page = tools_page
        self.bus = NamespaceBus()
        self._listen = ListenHandler(self.bus)
        self._connections = Connections(keep=MAX_SESSIONS_KEPT)
        self._seen: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._names: dict[tuple[str, str], dict[str, str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.server: Server[dict[str, Any]] = Server(
            "soloflow",
            version=__version__,
            title="SoloFlow",
            instructions="Deterministic flows SoloFlow learned from agents' tool calls: find one for a "
            "task (soloflow_find), run it (its own tool, or soloflow_run), follow a run (soloflow_status).",
            lifespan=self._lifespan,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._on_listen,
        )
        service.on_flows_changed(self._changed_here)

    # ------------------------------------------------------------------ who asks

    def _who(self, ctx: ServerRequestContext[Any, Any]) -> Principal:
        if self.principal is not None:
            return self.principal
        found = principal_of_access_token(get_access_token())
        if found is None:  # the HTTP app requires a token before any request reaches here
            raise AccessDeniedError("no bearer token", scope="none", needed="read")
        return found

    def _remember(self, ctx: ServerRequestContext[Any, Any], p: Principal) -> None:
        """Keep the connection of a pre-2026 client, to tell it when its tools change."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        request = ctx.request
        headers = getattr(request, "headers", None)
        key = (headers.get("mcp-session-id") if headers is not None else None) or "stdio"
        self._connections.remember(
            (p.user_id, p.agent_id), key, session=ctx.session, token_id=p.token_id
        )

    # ------------------------------------------------------------------ tools

    def _catalog(self, p: Principal) -> list[tuple[str, FlowMeta, FlowDefinition]]:
        """Every flow tool of the namespace now, (tool name, record, definition), by flow name;
        a write token's only (blocking: a worker thread)."""
        if not scope_allows(p.scope, "write"):
            return []
        taken = set(BUILTIN_TOOLS)
        out = []
        for meta, flow in self.service.active_flows(p):
            base = name = flow_tool_name(flow)
            k = 2
            while name in taken:
                name, k = f"{base[:60]}_{k}", k + 1
            taken.add(name)
            out.append((name, meta, flow))
        self._names[(p.user_id, p.agent_id)] = {name: meta.name for name, meta, _ in out}
        return out

    def _tools(
        self, p: Principal, cursor: str | None
    ) -> tuple[list[types.Tool], str | None, list[FlowMeta]]:
        """One page of the namespace's tools (the fixed ones on the first), the next page's
        cursor, and every active flow's record."""
        catalog = self._catalog(p)
        try:
            start = int(cursor or 0)
        except ValueError:
            raise SoloFlowError(
                f"tools/list: cursor {cursor!r} is not one this server gave"
            ) from None
        tools: list[types.Tool] = []
        if start == 0:
            tools += [
                types.Tool(
                    name=name,
                    description=spec.description,
                    input_schema=_schema(spec.args),
                    output_schema=_schema(spec.output),
                    annotations=types.ToolAnnotations(read_only_hint=spec.scope == "read"),
                )
                for name, spec in BUILTIN_TOOLS.items()
                if scope_allows(p.scope, spec.scope)
            ]
        page = catalog[start : start + self.tools_page]
        scores = self.service.qualities(p, [meta for _, meta, _ in page])
        for name, meta, flow in page:
            quality = scores[(meta.name, meta.version)]
            tools.append(
                types.Tool(
                    name=name,
                    title=flow.name,
                    description=_flow_description(flow, meta, quality.overall),
                    input_schema=_flow_input_schema(flow),
                    output_schema=_schema(RunOutcomeView),
                    annotations=types.ToolAnnotations(title=flow.name, read_only_hint=False),
                    _meta={
                        "soloflow/flow": flow.name,
                        "soloflow/version": flow.version,
                        "soloflow/quality": quality.as_dict(),
                    },
                )
            )
        more = start + self.tools_page < len(catalog)
        return (
            tools,
            (str(start + self.tools_page) if more else None),
            [meta for _, meta, _ in catalog],
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        p = self._who(ctx)
        self._remember(ctx, p)
        cursor = params.cursor if params is not None else None
        tools, next_cursor, metas = await anyio.to_thread.run_sync(self._tools, p, cursor)
        self._seen.setdefault((p.user_id, p.agent_id), self._signature_of(metas))
        return types.ListToolsResult(tools=tools, next_cursor=next_cursor)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            p = self._who(ctx)
            self._remember(ctx, p)
            result = await anyio.to_thread.run_sync(
                self._call, p, params.name, dict(params.arguments or {})
            )
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()
            )
            return _error(f"invalid arguments for {params.name}: {problems}")
        except SoloFlowError as exc:
            return _error(str(exc))
        except Exception as exc:  # never a crashed server: the reason, and the trace in the log
            log.exception("SoloFlow MCP tool %r failed", params.name)
            return _error(f"{params.name} failed: {type(exc).__name__}: {exc}")
        data = result.model_dump(mode="json", by_alias=True)
        if isinstance(result, RunOutcomeView):
            if result.status == "failed":
                return _error(_run_text(result))
            text = _run_text(result)
        else:
            text = json.dumps(data, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=data,
            is_error=False,
        )

    def _call(self, p: Principal, name: str, arguments: dict[str, Any]) -> BaseModel:
        svc = self.service
        spec = BUILTIN_TOOLS.get(name)
        if spec is not None:
            p.require(spec.scope, f"call {name}")
            args = spec.args.model_validate(arguments)
            if isinstance(args, RunArgs):
                return svc.start_run(
                    p, args.flow, args.inputs, task=args.task, wait=args.wait_seconds
                )
            if isinstance(args, ListArgs):
                return svc.list_workflows(p, limit=args.limit, offset=args.offset)
            if isinstance(args, FindArgs):
                return FindResult(
                    matches=svc.find_flows(p, args.task, tools=args.tools, limit=args.limit)
                )
            assert isinstance(args, RunIdArgs)
            return (
                svc.cancel_run(p, args.run_id)
                if name == "soloflow_cancel"
                else svc.run_status(p, args.run_id)
            )
        flow = self._flow_of_tool(p, name)
        if flow is None:
            raise SoloFlowError(
                f"unknown tool {name!r}: list the tools again (flows are promoted and retired "
                "while you are connected)"
            )
        p.require("write", f"run flow {flow!r}")
        return svc.start_run(p, flow, arguments, wait=DEFAULT_WAIT)

    def _flow_of_tool(self, p: Principal, tool: str) -> str | None:
        """The flow a flow tool runs: as last listed; else as the tools are now."""
        name = self._names.get((p.user_id, p.agent_id), {}).get(tool)
        if name is not None:
            return name
        return next((meta.name for t, meta, _ in self._catalog(p) if t == tool), None)

    # ------------------------------------------------------------------ list changes

    async def _on_listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        p = self._who(ctx)
        ns = (p.user_id, p.agent_id)
        if ns not in self._seen:
            metas = await anyio.to_thread.run_sync(self._active_metas, p)
            self._seen[ns] = self._signature_of(metas)
        listener = Listener(ns, p.token_id, anyio.CancelScope())
        assert listener.scope is not None
        reset = current_listener.set(listener)
        try:
            with listener.scope:
                return await self._listen(ctx, params)
        finally:
            current_listener.reset(reset)
        raise MCPError(INVALID_REQUEST, "the API token of this stream was revoked")

    def _active_metas(self, p: Principal) -> list[FlowMeta]:
        return [
            m
            for m in self.service.store.list_flow_meta(include_retired=False, **p.ns)
            if m.status == "active"
        ]

    @staticmethod
    def _signature_of(metas: list[FlowMeta]) -> tuple[Any, ...]:
        return tuple(sorted((m.name, m.version, m.status) for m in metas))

    def _watched(self) -> set[tuple[str, str]]:
        return self.bus.namespaces() | self._connections.namespaces()

    async def end_revoked(self) -> None:
        """End the listen streams, and forget the connections, whose API token is revoked:
        they hear of no change from now on."""
        tokens = self.bus.token_ids() | self._connections.token_ids()
        if not tokens:
            return
        try:
            active = await anyio.to_thread.run_sync(
                self.service.store.tokens.active_api_token_ids, tokens
            )
        except Exception:  # a store hiccup: look again next time
            log.warning("SoloFlow MCP: could not read the listeners' tokens", exc_info=True)
            return
        if revoked := tokens - active:
            self.bus.end(revoked)
            self._connections.drop(revoked)

    async def _watch(self) -> None:
        """Every ``watch_interval`` seconds: the active flows of each namespace someone
        listens to; a change is told to that namespace's clients."""
        while True:
            await anyio.sleep(self.watch_interval)
            await self.end_revoked()
            for ns in self._watched():
                try:
                    metas = await anyio.to_thread.run_sync(self._active_metas, Principal(*ns))
                except Exception:  # a store hiccup: look again next time
                    log.warning(
                        "SoloFlow MCP: could not read the flows of %s/%s", *ns, exc_info=True
                    )
                    continue
                signature = self._signature_of(metas)
                if self._seen.get(ns) != signature:
                    self._seen[ns] = signature
                    await self.notify(ns)

    def _changed_here(self, user_id: str, agent_id: str) -> None:
        """The service changed a namespace's flows (in this process): tell its clients now."""
        loop = self._loop
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self._recheck((user_id, agent_id)), loop)

    async def _recheck(self, ns: tuple[str, str]) -> None:
        metas = await anyio.to_thread.run_sync(self._active_metas, Principal(*ns))
        self._seen[ns] = self._signature_of(metas)
        await self.notify(ns)

    async def notify(self, ns: tuple[str, str]) -> None:
        """Tell the namespace's clients that its tool list changed."""
        self._names.pop(ns, None)
        await self.end_revoked()  # a token revoked since the last look hears nothing
        await self.bus.publish_to(ns, ToolsListChanged())
        for session in self._connections.of(ns):
            await session.send_tool_list_changed()  # best effort: never raises

    @asynccontextmanager
    async def _lifespan(self, _: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        self._loop = asyncio.get_running_loop()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            try:
                yield {}
            finally:
                self._listen.close()
                tg.cancel_scope.cancel()
                self._loop = None

    # ------------------------------------------------------------------ transports

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.initialization_options())

    def http_app(
        self, *, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp"
    ) -> Starlette:
        """The streamable-HTTP ASGI app; every request needs a bearer token."""
        from mcp.server.auth.settings import AuthSettings

        from soloflow_langgraph.server.auth import StoreTokenVerifier

        return self.server.streamable_http_app(
            streamable_http_path=path,
            host=host,
            auth=AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=None),  # type: ignore[arg-type]
            token_verifier=StoreTokenVerifier(self.service.store),
        )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _run_text(r: RunOutcomeView) -> str:
    """What a model reads of a run: its output, or what happened and what to do next."""
    if r.status == "completed":
        text = _as_text(r.output)
        if r.errors:
            text += (
                "\n(steps that failed and were skipped: "
                + "; ".join(f"{k}: {v}" for k, v in r.errors.items())
                + ")"
            )
        return text
    if r.status == "waiting":
        question = r.interrupt.get("question") if isinstance(r.interrupt, dict) else None
        return (
            f"flow run {r.run_id} of {r.flow!r} waits for a person's approval"
            + (f" ({question})" if question else "")
            + f": `soloflow flows runs approve {r.run_id}`; follow it with soloflow_status."
        )
    if r.status == "running":
        return (
            f"flow run {r.run_id} of {r.flow!r} is still running; follow it with soloflow_status."
        )
    if r.status == "fallback":
        return (
            r.handoff
            or f"flow {r.flow!r} handed the task back: results so far {_as_text(r.results)}"
        )
    if r.status == "cancelled":
        return f"flow run {r.run_id} of {r.flow!r} was cancelled" + (
            f": {r.error}" if r.error else ""
        )
    where = f" at step {r.failed_step!r}" if r.failed_step else ""
    return f"flow {r.flow!r} failed{where} (run {r.run_id}): {r.error or _as_text(r.errors)}"


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
