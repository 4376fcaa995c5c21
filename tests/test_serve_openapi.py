"""Schemathesis over the REST API's ``/openapi.json``: every route, generated requests, a real
uvicorn server on 127.0.0.1. No answer is a 5xx and every answer matches its documented
status, content type, headers and schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance
from serve_helpers import APPROVAL_FLOW, SLOW_FLOW, TOOLS, learn_demo_flow, live_server, submit

from soloflow_core.store import Store
from soloflow_langgraph.server.api import create_app
from soloflow_langgraph.server.service import SoloFlowService


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A served store holding a learned flow, user flows, runs and a waiting flow run; (base URL, token)."""
    path = Path(tmp_path_factory.mktemp("openapi")) / "soloflow.db"
    store = Store.open(f"sqlite:///{path}")
    service = SoloFlowService(store, tools=TOOLS)
    try:
        learn_demo_flow(store, "ann", "bot")
        submit(store, "ann", "bot", APPROVAL_FLOW)
        submit(store, "ann", "bot", SLOW_FLOW)
        token = store.create_api_token(user_id="ann", agent_id="bot", scope="admin").token
        with live_server(create_app(service)) as url:
            yield url, token
    finally:
        service.close()
        store.close()


CHECKED_BEYOND_SCHEMA = {"POST /api/workflows", "POST /api/flows/{name}/runs"}
"""Operations whose bodies are checked beyond what a schema can say — a submitted flow's DAG,
templates and executors, a run's inputs against the flow's own input schema — and answered
422 with every problem: a schema-valid body may rightly be refused there."""


def test_every_route_answers_within_its_schema(api: tuple[str, str]) -> None:
    """Schemathesis's pytest plugin (``from_fixture``) reads a private attribute pytest 9
    removed, so each operation of the live ``/openapi.json`` runs here as a hypothesis test."""
    url, token = api
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 24  # every route of docs/serve.md is in the document

    for operation in operations:
        excluded = [positive_data_acceptance] if operation.label in CHECKED_BEYOND_SCHEMA else []
        try:
            _check(operation, token, excluded)
        except (
            Exception,
            BaseExceptionGroup,
        ) as exc:  # every operation runs; failures reported together
            failures[operation.label] = f"{type(exc).__name__}: {exc}"[:3000]
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def _check(operation: schemathesis.APIOperation, token: str, excluded: list[Any]) -> None:
    @settings(
        max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(case=operation.as_strategy())
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(
            headers={"Authorization": f"Bearer {token}"}, excluded_checks=excluded
        )

    check()
