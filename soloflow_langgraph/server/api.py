"""The REST API: a FastAPI app over :class:`~soloflow_langgraph.server.service.SoloFlowService`.

``soloflow serve`` runs it with uvicorn; :func:`create_app` builds it for any ASGI server.
Every route under ``/api`` needs ``Authorization: Bearer <token>`` (``soloflow tokens
create``) and answers inside the token's (user, agent) namespace:

- no token, or an unknown, revoked or malformed one → 401 ``Unauthorized``;
- a route given ``user_id``/``agent_id`` (query) or ``userId``/``agentId`` (body) other than
  the token's → 401 ``Unauthorized`` (the learning-service PRD's check);
- an id or name of another namespace → 404, the same answer as for one that does not exist;
- a read-only token asking to submit, run, approve, reject, cancel, resume or verify → 403.

Errors are ``{"error", "detail", "problems"}`` (:class:`~.views.ErrorBody`); invalid input
lists each problem with its field path. The OpenAPI document is at ``/openapi.json``.

When the app shuts down (its lifespan ends: SIGTERM or Ctrl-C to ``soloflow serve``), the flow
runs it started that are still going are recorded ``interrupted``
(:meth:`~soloflow_langgraph.server.service.SoloFlowService.stop_runs`), to be resumed.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from soloflow_core import __version__
from soloflow_core.errors import (
    AccessDeniedError,
    ConfigError,
    FlowValidationError,
    InvalidNameError,
    InvalidTransitionError,
    NotFoundError,
    SoloFlowError,
)
from soloflow_core.models.names import CONTROL_CHARACTER, check_name
from soloflow_langgraph.server.auth import principal_for_token
from soloflow_langgraph.server.principal import Principal
from soloflow_langgraph.server.service import SoloFlowService
from soloflow_langgraph.server.views import ErrorBody

if TYPE_CHECKING:
    from starlette.responses import Response

__all__ = ["ERRORS", "NO_NUL", "Unauthorized", "create_app", "problems_of"]

log = logging.getLogger(__name__)

NO_NUL = r"^[^\x00]*$"
"""The pattern of every id, name and text parameter: no NUL character (PostgreSQL cannot
store one, so such a value is bad input on every store)."""


class Unauthorized(Exception):
    """No usable token, or a request naming another namespace than the token's."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _error(
    status: int,
    kind: str,
    detail: str,
    *,
    problems: Sequence[dict[str, Any]] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=kind, detail=detail, problems=list(problems))
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorBody,
        "description": "No token, a bad one, or a request naming another namespace",
    },
    403: {"model": ErrorBody, "description": "The token's scope does not allow it"},
    404: {"model": ErrorBody, "description": "No such id or name in the token's namespace"},
    409: {
        "model": ErrorBody,
        "description": "Not in a state that allows it (already decided, ended, ...)",
    },
    422: {"model": ErrorBody, "description": "Invalid input: every problem with its field path"},
}
"""The error answers every route documents."""


def _path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(error: dict[str, Any]) -> str:
    """pydantic's message, and for an unknown field of a submitted flow or step the field
    meant (``depend_on``: did you mean ``depends_on``?)."""
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    loc = tuple(error.get("loc", ()))
    if error.get("type") != "extra_forbidden" or loc[:2] != ("body", "workflow"):
        return message
    from soloflow_core.models import FlowDefinition, FlowStep

    inner = loc[2:]
    if len(inner) == 1:
        allowed = list(FlowDefinition.model_fields)
    elif len(inner) == 3 and inner[0] == "steps":
        allowed = list(FlowStep.model_fields)
    else:
        return message
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    hint = f"did you mean {close[0]!r}?" if close else "remove it"
    return f"unknown field {loc[-1]!r}; {hint} (allowed: {', '.join(allowed)})"


def problems_of(
    exc: FlowValidationError, prefix: str = "", steps: Sequence[Any] = ()
) -> list[dict[str, Any]]:
    """Each problem of a flow's validation with its field path (``workflow.steps[1].skill_key``);
    ``steps``: the submitted steps, to turn a step id into its index."""
    index = {s.get("id"): i for i, s in enumerate(steps) if isinstance(s, dict)}
    out = []
    for step, field, message in exc.problems:
        parts = [prefix] if prefix else []
        if step is not None and step in index:
            parts.append(f"steps[{index[step]}]")
        if field:
            parts.append(field)
        out.append(
            {"path": ".".join(parts).replace(".[", "[") or None, "step": step, "message": message}
        )
    return out


def _unstorable(exc: DataError) -> JSONResponse:
    """A value the database cannot hold (PostgreSQL: a NUL character) is in no row: bad
    input, answered alike whoever's id it resembles."""
    reason = str(exc.orig).splitlines()[0] if exc.orig is not None else "a value"
    return _error(422, "Invalid", f"the database cannot hold a value of the request: {reason}")


def _control_in_path(path: str) -> JSONResponse:
    """A path holding a control character: no name or id holds one (the routes' patterns do
    not even match a line feed), so bad input, said so, rather than "no such route"."""
    try:
        check_name(path, "")
    except InvalidNameError as exc:
        problem = {"path": "path", "message": str(exc)}
        return _error(422, "Invalid", f"invalid request: path: {exc}", problems=[problem])
    raise AssertionError("a path with a control character passed check_name")


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(Unauthorized)
    async def unauthorized(_: Request, exc: Unauthorized) -> Response:
        return _error(401, "Unauthorized", exc.detail, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(AccessDeniedError)
    async def forbidden(_: Request, exc: AccessDeniedError) -> Response:
        return _error(403, "Forbidden", str(exc))

    @app.exception_handler(NotFoundError)
    async def not_found(_: Request, exc: NotFoundError) -> Response:
        return _error(404, "Not Found", str(exc))

    @app.exception_handler(FlowValidationError)
    async def invalid_flow(request: Request, exc: FlowValidationError) -> Response:
        steps: Sequence[Any] = getattr(request.state, "submitted_steps", ())
        prefix = getattr(request.state, "flow_prefix", "")
        return _error(422, "Invalid", str(exc), problems=problems_of(exc, prefix, steps))

    @app.exception_handler(ConfigError)
    async def bad_value(_: Request, exc: ConfigError) -> Response:
        return _error(422, "Invalid", str(exc))

    @app.exception_handler(InvalidTransitionError)
    async def conflict(_: Request, exc: InvalidTransitionError) -> Response:
        return _error(409, "Conflict", str(exc))

    @app.exception_handler(SoloFlowError)
    async def refused(_: Request, exc: SoloFlowError) -> Response:
        return _error(409, "Conflict", str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        path = str(request.scope.get("path", ""))  # decoded (request.url quotes it again)
        if exc.status_code == 404 and CONTROL_CHARACTER.search(path):
            return _control_in_path(path)  # no route's pattern matches a line feed
        try:
            kind = HTTPStatus(exc.status_code).phrase
        except ValueError:  # not a status the standard library names
            kind = "Error"
        detail = exc.detail if isinstance(exc.detail, str) else kind
        if exc.status_code == 404:
            detail = "no such route: see /openapi.json (flow names in paths are URL-encoded)"
        return _error(exc.status_code, kind, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        problems = [{"path": _path(e.get("loc", ())), "message": _message(e)} for e in exc.errors()]
        head = "; ".join(f"{p['path']}: {p['message']}" for p in problems[:5])
        return _error(422, "Invalid", f"invalid request: {head}", problems=problems)

    @app.exception_handler(DataError)
    async def unstorable(_: Request, exc: DataError) -> Response:
        return _unstorable(exc)

    @app.exception_handler(Exception)
    async def crashed(_: Request, exc: Exception) -> Response:
        log.exception("the SoloFlow API failed on a request")
        return _error(500, "Internal Server Error", f"{type(exc).__name__}; see the server log")


def create_app(service: SoloFlowService, *, title: str = "SoloFlow") -> FastAPI:
    """The REST API over ``service`` (the caller opens and closes its store)."""
    from soloflow_langgraph.server.routes import build_router

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(service.stop_runs)

    app = FastAPI(
        lifespan=lifespan,
        title=title,
        version=__version__,
        description="Flows SoloFlow learned from agents' tool calls: submit, find, run, approve. "
        "Every route answers inside the bearer token's (user, agent) namespace.",
    )
    bearer = HTTPBearer(auto_error=False, description="An API token from `soloflow tokens create`")

    def principal(credentials: HTTPAuthorizationCredentials | None = Security(bearer)) -> Principal:
        if credentials is None:
            raise Unauthorized(
                "no bearer token: send 'Authorization: Bearer <token>' (`soloflow tokens create`)"
            )
        found = principal_for_token(service.store, credentials.credentials)
        if found is None:
            raise Unauthorized("the bearer token is unknown, revoked or malformed")
        return found

    async def caller(  # no I/O: on the event loop, not a worker thread
        request: Request,
        p: Principal = Depends(principal),
        user_id: str | None = Query(
            None, pattern=NO_NUL, description="When given, must be the token's user (else 401)"
        ),
        agent_id: str | None = Query(
            None, pattern=NO_NUL, description="When given, must be the token's agent (else 401)"
        ),
    ) -> Principal:
        check_named(p, user_id, agent_id)
        # A repeated parameter: every value (FastAPI passes only the last one).
        for user in request.query_params.getlist("user_id"):
            check_named(p, user, None)
        for agent in request.query_params.getlist("agent_id"):
            check_named(p, None, agent)
        return p

    _install_errors(app)
    app.include_router(build_router(service, caller), prefix="/api")

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def check_named(p: Principal, user_id: str | None, agent_id: str | None) -> None:
    """The PRD's check: a user (agent) named in the request must be the token's."""
    if user_id is not None and user_id != p.user_id:
        raise Unauthorized(
            f"the request names user {user_id!r}, but the token is for user {p.user_id!r}"
        )
    if agent_id is not None and agent_id != p.agent_id:
        raise Unauthorized(
            f"the request names agent {agent_id!r}, but the token is for agent {p.agent_id!r}"
        )


__all__ += ["check_named"]
