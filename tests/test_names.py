"""Names and ids hold no control character, alike on SQLite and PostgreSQL: a user or agent
id, a run id, a flow name or a candidate id with a NUL, a line feed, a tab or an escape is
refused at every entry (models, store, ledger, CLI, REST) with an error naming the field, the
character and its position. Free text keeps its line feeds and tabs; a NUL in captured text is
dropped on every store, and one in a flow definition refused on every store. Two namespaces
never share a candidate id (its key joins the parts with U+001F, which no id may hold)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from soloflow_core.errors import FlowValidationError, InvalidNameError
from soloflow_core.ledger import ingest
from soloflow_core.mining.detector import detect_candidates
from soloflow_core.models import (
    DetectorConfig,
    FlowDefinition,
    FlowStep,
    TaskRun,
    ToolCall,
    candidate_id_for,
    dedupe_key_for,
)
from soloflow_core.store import Store
from soloflow_langgraph.cli import app

BAD = {
    "\x00": "U+0000, NUL",
    "\n": "U+000A, a line feed",
    "\t": "U+0009, a tab",
    "\x1b": "U+001B, an escape",
    "\x1f": "U+001F, a unit separator",
    "\x7f": "U+007F, a delete",
    "\x85": "U+0085",
}
"""A control character, and how an error calls it."""
NS = {"user_id": "ann", "agent_id": "bot"}


def _flow(name: str = "order status", **fields: Any) -> FlowDefinition:
    return FlowDefinition(name=name, steps=[FlowStep(id="s1", skill_key="lookup")], **fields)


@pytest.mark.parametrize("char", list(BAD))
def test_models_refuse_a_control_character_in_names_and_ids(char: str) -> None:
    bad = f"ab{char}c"
    for make, field in (
        (lambda: TaskRun(run_id="r1", user_id=bad), "user_id"),
        (lambda: TaskRun(run_id="r1", agent_id=bad), "agent_id"),
        (lambda: TaskRun(run_id=bad), "run_id"),
        (lambda: _flow(bad), "name"),
    ):
        with pytest.raises(ValidationError) as info:
            make()
        (problem,) = info.value.errors()
        assert problem["loc"] == (field,)
        assert f"a control character ({BAD[char]}" in problem["msg"]
        assert "at position 2 of" in problem["msg"] and "remove the character" in problem["msg"]


def test_the_store_refuses_a_bad_namespace_or_flow_name_on_every_store(store: Store) -> None:
    """What the models cannot see (bare keyword arguments, a model built without
    validation) the store checks before it writes: the same error on both stores, where
    PostgreSQL alone used to refuse a NUL (with a driver error) and SQLite stored it."""
    unchecked = FlowDefinition.model_construct(**{**dict(_flow()), "name": "a\x00b"})
    attempts = [
        lambda: store.register_flow(unchecked, **NS, source="user-submitted"),
        lambda: store.register_flow(_flow(), user_id="a\x00b", agent_id="bot", source="x"),
        lambda: store.add_flow_version(_flow(), user_id="ann", agent_id="b\nt", source="x"),
        lambda: store.start_flow_run(_flow(), {}, user_id="a\x1bb", agent_id="bot"),
        lambda: store.start_flow_run(_flow(), {}, **NS, run_id="frun_\x00"),
        lambda: store.create_api_token(user_id="ann", agent_id="b\x1fot"),
        lambda: ingest(store, [], default_user="a\tb", default_agent="bot"),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidNameError) as info:
            attempt()
        assert "a control character (U+00" in str(info.value) and info.value.position >= 1
    assert store.namespaces() == []  # nothing was written


def test_free_text_keeps_its_lines_and_drops_nul_alike_on_every_store(store: Store) -> None:
    store.add_run(
        TaskRun(
            run_id="r1",
            task="line one\n\tline two\x00!",
            answer="ok\x00",
            tool_calls=[ToolCall(name="lookup", args={"q": "a\x00b\nc"}, output="x\x00")],
            **NS,
        )
    )
    run = store.get_run("r1", **NS)
    assert run.task == "line one\n\tline two!" and run.answer == "ok"
    assert run.tool_calls[0].args == {"q": "ab\nc"} and run.tool_calls[0].output == "x"
    stored = store.register_flow(_flow(description="two\nlines\tok"), **NS, source="x")
    assert store.get_flow(stored.name, **NS).flow.description == "two\nlines\tok"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"description": "a NUL\x00 here"}, "description"),
        ({"tags": ["fine", "bad\x00"]}, "tags[1]"),
        ({"reply_template": "done\x00"}, "reply_template"),
    ],
)
def test_a_flow_definition_holding_nul_is_refused_on_every_store(
    store: Store, fields: dict[str, Any], field: str
) -> None:
    """A definition is what a person wrote and what runs: it is refused, never changed behind
    their back (PostgreSQL could not store it; SQLite stored it)."""
    with pytest.raises(FlowValidationError) as info:
        store.register_flow(_flow(**fields), **NS, source="user-submitted")
    assert info.value.field == field
    assert f"{field} holds a NUL character (U+0000) at position" in str(info.value)
    with pytest.raises(FlowValidationError):
        step = FlowStep(id="s1", skill_key="lookup", input_map={"q": "x\x00"})
        store.register_flow(FlowDefinition(name="f", steps=[step]), **NS, source="x")
    assert store.list_flows(**NS) == []


def _sf(db_url: str, *args: str, user: str = "ann") -> Any:
    return CliRunner().invoke(app, ["--db", db_url, "--user", user, "--agent", "bot", *args])


def test_cli_refuses_control_characters_in_names(db_url: str, tmp_path: Path) -> None:
    for text, code in (("bad\\0name", "U+0000"), ("bad\\e[31mname", "U+001B")):
        path = tmp_path / "flow.yaml"
        path.write_text(f'name: "{text}"\nsteps:\n  - id: s1\n    skill_key: lookup\n')
        res = _sf(db_url, "flows", "submit", str(path))
        assert res.exit_code == 1, res.output
        said = " ".join(res.output.split())
        assert f"flow.yaml:1:1: name: a control character ({code}" in said, said
        assert "at position 3" in said and "\x1b" not in res.output
    for user in ("ann\nbob", "ann\tbob"):
        res = _sf(db_url, "runs", "list", user=user)
        assert res.exit_code == 2 and "at position 3" in " ".join(res.output.split())
    res = _sf(db_url, "flows", "run", "order\x1b[2Jstatus")  # a lookup finds nothing
    assert res.exit_code == 1 and "\x1b" not in res.output, res.output


def test_rest_refuses_control_characters_in_names(store: Store) -> None:
    from fastapi.testclient import TestClient

    from soloflow_langgraph.server.api import create_app
    from soloflow_langgraph.server.service import SoloFlowService

    token = store.create_api_token(**NS, scope="admin").token
    service = SoloFlowService(store)
    step = {"id": "s1", "skill_key": "lookup"}
    try:
        with TestClient(create_app(service)) as client:
            client.headers["Authorization"] = f"Bearer {token}"
            answers = {
                "body.workflow.name": client.post(
                    "/api/workflows", json={"workflow": {"name": "a\x00b", "steps": [step]}}
                ),
                "body.userId": client.post(
                    "/api/workflows",
                    json={"userId": "a\x1fb", "workflow": {"name": "f", "steps": [step]}},
                ),
                "path.name": client.get("/api/flows/a%1Bb/versions"),
                "path": client.get("/api/flows/a%0Ab/versions"),  # no route matches it
                "query.flow": client.get("/api/flow-runs", params={"flow": "a\x1bb"}),
                "path.run_id": client.get("/api/flow-runs/frun%09x"),
                "path.candidate_id": client.post("/api/candidates/c%00x/approve"),
            }
    finally:
        service.close()
    for path, answer in answers.items():
        assert answer.status_code == 422, (path, answer.text)
        (problem,) = answer.json()["problems"]
        assert problem["path"] == path, answer.text
        assert problem["message"].startswith("a control character (U+00"), answer.text
        assert "at position " in problem["message"], answer.text
    assert store.list_flows(**NS) == []


def test_ingest_refuses_control_characters_in_ids(store: Store, tmp_path: Path) -> None:
    """A ledger's ids, on the fast lane and the checked one, on both stores: the bad line is
    reported (its field, the character, its position), the good ones stored."""
    records = [
        {"run_id": "good", "user_id": "ann", "agent_id": "bot"},
        {"run_id": "r2", "user_id": "ann\x1fbot", "agent_id": "x"},
        {"run_id": "r3", "user_id": "ann", "agent_id": "b\x00t"},
        {"run_id": "r\n4", "user_id": "ann", "agent_id": "bot"},
        {"run_id": "r5", "user_id": "ann", "agent_id": "bot", "bonus": 1, "task": "\x1b"},
    ]
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = ingest(store, [path], default_user="ann", default_agent="bot", keep_namespaces=True)
    assert report.runs_written == 2
    reasons = {e.line: e.reason for e in report.errors}
    assert set(reasons) == {2, 3, 4}
    assert reasons[2].startswith("user_id: must not contain control characters")
    assert "U+001F at position 3" in reasons[2]
    assert reasons[3].startswith("agent_id: must not contain NUL (\\u0000) characters: one at")
    assert "position 1" in reasons[3]
    assert reasons[4].startswith("run_id:") and "U+000A at position 1" in reasons[4]
    assert sorted(r.run_id for r in store.list_runs(**NS)) == ["good", "r5"]
    assert store.get_run("r5", **NS).task == "\x1b"  # free text, kept (escaped when shown)


# ------------------------------------------------------------------ candidate ids


def test_the_separator_of_candidate_ids_cannot_be_forged() -> None:
    key = dedupe_key_for(["a", "b"])
    for user, agent in (("a\x1fb", "c"), ("a", "b\x1fc")):  # the same key text, were it allowed
        with pytest.raises(InvalidNameError):
            candidate_id_for(user, agent, key)
    with pytest.raises(ValidationError):
        TaskRun(run_id="r", user_id="a\x1fb", agent_id="c")


names = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.tuples(names, names),
    st.tuples(names, names),
    st.lists(names, min_size=1, max_size=3),
)
def test_two_namespaces_never_share_a_candidate_id(
    one: tuple[str, str], other: tuple[str, str], tools: list[str]
) -> None:
    key = dedupe_key_for(tools)
    if one != other:
        assert candidate_id_for(*one, key) != candidate_id_for(*other, key)


def test_namespaces_split_differently_get_their_own_candidates(store: Store) -> None:
    """The same runs in "a b"/"c" and in "a"/"b c" (the same text around the separator): each
    namespace's candidate has its own id, both stored."""
    pairs = [("a b", "c"), ("a", "b c"), ("ab", "c"), ("a", "bc")]
    ids = {}
    for user, agent in pairs:
        store.add_runs(
            TaskRun(
                run_id=f"r{i}",
                user_id=user,
                agent_id=agent,
                tool_calls=[ToolCall(name=n) for n in ("find", "check", "book")],
            )
            for i in range(4)
        )
        config = DetectorConfig(min_sequence_length=3, min_occurrences=3)
        (cand,) = detect_candidates(store, user_id=user, agent_id=agent, config=config)
        ids[user, agent] = cand.id
    assert len(set(ids.values())) == len(pairs)
    for (user, agent), cid in ids.items():
        assert store.get_candidate(cid, user_id=user, agent_id=agent).user_id == user


def test_capture_refuses_a_bad_namespace_and_escapes_one_an_invocation_names(
    sqlite_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from soloflow_langgraph import SoloFlowCallbackHandler, SoloFlowMiddleware

    with pytest.raises(InvalidNameError):
        SoloFlowCallbackHandler(store=sqlite_store, user_id="ann\n", agent_id="bot")
    with pytest.raises(InvalidNameError):
        SoloFlowMiddleware(sqlite_store, user_id="ann", agent_id="b\x1bot", tools=[])
    handler = SoloFlowCallbackHandler(store=sqlite_store, **NS)
    agent = create_agent(GenericFakeChatModel(messages=iter([AIMessage("hi")])), tools=[])
    meta = {"soloflow_user_id": "eve\x1b[2J", "soloflow_agent_id": "bot"}
    with caplog.at_level(logging.WARNING, logger="soloflow_langgraph.callbacks"):
        agent.invoke({"messages": [("user", "hello")]}, {"callbacks": [handler], "metadata": meta})
        handler.flush()
    assert "holds a control character" in caplog.text
    (run,) = sqlite_store.list_runs(user_id="eve\\x1b[2J", agent_id="bot")
    assert run.task == "hello"
    assert sqlite_store.list_runs(**NS) == []  # never the handler's own namespace


def test_a_learned_flow_is_named_after_its_tools_with_control_characters_escaped() -> None:
    from soloflow_core.generalize.propose import flow_name_for

    name = flow_name_for(["find\nuser", "book\x1b[2J"])
    assert name == "Auto: find\\nuser → book\\x1b[2J"
    assert _flow(name).name == name  # a valid name


def test_rows_an_older_version_stored_with_control_characters_stay_readable(
    store: Store, db_url: str
) -> None:
    """Names are checked where they enter, not where they are read back: a run whose id and
    tool name an older version stored with an escape character is still loaded (nothing
    recorded is lost), on both stores."""
    import sqlalchemy as sa

    store.add_run(TaskRun(run_id="r1", task="t", tool_calls=[ToolCall(name="find")], **NS))
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE sf_task_runs SET run_id = :v"), {"v": "r\x1b1"})
            conn.execute(sa.text("UPDATE sf_tool_calls SET name = :v"), {"v": "fi\x1bnd"})
    finally:
        engine.dispose()
    (run,) = store.load_runs(["r\x1b1"], **NS)
    assert run.run_id == "r\x1b1" and run.tool_calls[0].name == "fi\x1bnd"
    with pytest.raises(ValidationError, match="U\\+001B"):  # entering again: refused
        TaskRun(run_id="r\x1b1")
