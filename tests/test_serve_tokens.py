"""API tokens: created, verified, listed and revoked in a namespace, stored hashed; the
``soloflow tokens`` commands. Store tests run on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from soloflow_core.errors import ConfigError, NotFoundError
from soloflow_core.store import Store
from soloflow_core.store.tokens import hash_token_secret, parse_token, scope_allows
from soloflow_langgraph.cli import app


def test_a_token_is_shown_once_and_stored_only_as_its_hash(store: Store) -> None:
    issued = store.create_api_token(user_id="ann", agent_id="bot", scope="write", label="ci")
    token_id, secret = parse_token(issued.token) or ("", "")
    assert token_id == issued.record.token_id and len(secret) >= 43  # 256 random bits
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM sf_api_tokens")).mappings().all()
    assert len(rows) == 1
    stored = " ".join(str(v) for v in rows[0].values())
    assert secret not in stored and issued.token not in stored
    assert rows[0]["secret_hash"] == hash_token_secret(secret)
    found = store.verify_api_token(issued.token)
    assert found is not None and (found.user_id, found.agent_id, found.scope, found.label) == (
        "ann",
        "bot",
        "write",
        "ci",
    )


def test_a_wrong_malformed_or_revoked_token_is_refused(store: Store) -> None:
    issued = store.create_api_token(user_id="ann", agent_id="bot")
    token_id, secret = parse_token(issued.token) or ("", "")
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for bad in (
        f"sft_{token_id}_{flipped}",
        f"sft_{'0' * 16}_{secret}",
        "",
        "Bearer x",
        issued.token + "x",
        issued.token.replace("sft_", "sfx_"),
    ):
        assert store.verify_api_token(bad) is None, bad
    revoked = store.revoke_api_token(token_id, user_id="ann", agent_id="bot")
    assert revoked.revoked_at is not None
    assert store.verify_api_token(issued.token) is None
    again = store.revoke_api_token(token_id, user_id="ann", agent_id="bot")
    assert again.revoked_at == revoked.revoked_at  # revoking twice changes nothing


def test_tokens_belong_to_their_namespace(store: Store) -> None:
    ann = store.create_api_token(user_id="ann", agent_id="bot", scope="admin")
    store.create_api_token(user_id="bob", agent_id="bot")
    assert [t.token_id for t in store.list_api_tokens(user_id="ann", agent_id="bot")] == [
        ann.record.token_id
    ]
    with pytest.raises(NotFoundError):  # bob cannot revoke ann's token, and cannot tell it exists
        store.revoke_api_token(ann.record.token_id, user_id="bob", agent_id="bot")
    assert store.verify_api_token(ann.token) is not None


def test_bad_token_settings_name_what_is_wrong(store: Store) -> None:
    with pytest.raises(ConfigError, match="scope 'root' is not one of read, write, admin"):
        store.create_api_token(user_id="ann", agent_id="bot", scope="root")
    with pytest.raises(ConfigError, match="at most 255"):
        store.create_api_token(user_id="ann", agent_id="bot", label="x" * 256)


def test_scopes_are_ordered() -> None:
    assert (
        scope_allows("admin", "write")
        and scope_allows("write", "read")
        and scope_allows("read", "read")
    )
    assert not scope_allows("read", "write") and not scope_allows("write", "admin")
    assert not scope_allows("root", "read")


def test_tokens_commands(db_url: str) -> None:
    runner = CliRunner()
    created = runner.invoke(
        app,
        [
            "--db",
            db_url,
            "tokens",
            "create",
            "--user",
            "ann",
            "--agent",
            "bot",
            "--scope",
            "write",
            "--label",
            "laptop",
        ],
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[0]
    assert token.startswith("sft_") and "not shown again" in created.stderr
    listed = runner.invoke(
        app, ["--db", db_url, "--user", "ann", "--agent", "bot", "tokens", "list", "--json"]
    )
    (row,) = json.loads(listed.stdout)
    assert row["scope"] == "write" and row["label"] == "laptop" and row["revoked_at"] is None
    assert token not in listed.stdout
    revoked = runner.invoke(
        app,
        ["--db", db_url, "tokens", "revoke", row["token_id"], "--user", "ann", "--agent", "bot"],
    )
    assert revoked.exit_code == 0 and f"revoked token {row['token_id']}" in revoked.stdout
    other = runner.invoke(
        app,
        ["--db", db_url, "tokens", "revoke", row["token_id"], "--user", "bob", "--agent", "bot"],
    )
    assert (
        other.exit_code == 1 and f"no API token {row['token_id']!r} for user 'bob'" in other.stderr
    )
    with Store.open(db_url) as store:
        assert store.verify_api_token(token) is None
    bad = runner.invoke(app, ["--db", db_url, "tokens", "create", "--scope", "owner"])
    assert bad.exit_code == 1 and "scope 'owner' is not one of read, write, admin" in bad.stderr


def test_an_error_message_is_printed_as_written(sqlite_url: str) -> None:
    """Square brackets in an error are text, not rich markup (``[api]`` would vanish)."""
    Store.open(sqlite_url).close()
    res = CliRunner().invoke(app, ["--db", sqlite_url, "tokens", "revoke", "[api]"])
    assert res.exit_code == 1 and "no API token '[api]' for user 'default'" in res.stderr
