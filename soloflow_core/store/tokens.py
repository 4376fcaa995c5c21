"""API tokens: bearer tokens for the REST API and the MCP server, one (user, agent) each.

A token reads ``sft_<id>_<secret>``: ``id`` (16 hex digits) is its public part, the key of
its row; ``secret`` holds 256 random bits (:func:`secrets.token_urlsafe`). The store keeps
the SHA-256 of the secret, never the token: with that much entropy a fast hash is as safe
as a slow one, and checking a token costs one primary-key read and one hash. The token
itself is returned once, by :meth:`TokenRepository.create_api_token`.

A token carries a scope: ``read`` (list, show, find, status, history), ``write`` (also
submit, run, approve, reject, cancel, resume, verify, import) or ``admin`` (also manage the
namespace's tokens). :func:`scope_allows` orders them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

import sqlalchemy as sa

from soloflow_core.errors import ConfigError, NotFoundError
from soloflow_core.models.names import check_namespace
from soloflow_core.store import schema as t
from soloflow_core.store.writer import now

if TYPE_CHECKING:
    from collections.abc import Collection

    from soloflow_core.store.database import Database

__all__ = [
    "SCOPES",
    "TOKEN_PREFIX",
    "ApiToken",
    "IssuedToken",
    "TokenScope",
    "TokenRepository",
    "hash_token_secret",
    "parse_token",
    "scope_allows",
]

TokenScope = Literal["read", "write", "admin"]
SCOPES: tuple[str, ...] = get_args(TokenScope)
"""From the least to the most allowed; each allows what the ones before it allow."""
TOKEN_PREFIX = "sft_"
_TOKEN = re.compile(r"^sft_([0-9a-f]{16})_([A-Za-z0-9_-]{32,128})$")
MAX_LABEL = 255


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A stored token, without its secret."""

    token_id: str
    user_id: str
    agent_id: str
    scope: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "token_id": self.token_id,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "scope": self.scope,
            "label": self.label,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just created: its record and the token itself, shown this once."""

    record: ApiToken
    token: str


def hash_token_secret(secret: str) -> str:
    """The SHA-256 (hex) the store keeps of a token's secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_token(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed token; None for anything else."""
    match = _TOKEN.match(token.strip()) if isinstance(token, str) else None
    return None if match is None else (match.group(1), match.group(2))


def scope_allows(scope: str, needed: str) -> bool:
    """Whether a token of ``scope`` may do what needs ``needed`` (read < write < admin)."""
    if scope not in SCOPES or needed not in SCOPES:
        return False
    return SCOPES.index(scope) >= SCOPES.index(needed)


def _record(row: Any) -> ApiToken:
    return ApiToken(
        token_id=row.id,
        user_id=row.user_id,
        agent_id=row.agent_id,
        scope=row.scope,
        label=row.label,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


_COLUMNS = (
    t.api_tokens.c.id,
    t.api_tokens.c.user_id,
    t.api_tokens.c.agent_id,
    t.api_tokens.c.scope,
    t.api_tokens.c.label,
    t.api_tokens.c.created_at,
    t.api_tokens.c.revoked_at,
)


class TokenRepository:
    """API tokens by namespace (``store.tokens``); only a secret's hash is kept."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_api_token(
        self, *, user_id: str, agent_id: str, scope: str = "read", label: str | None = None
    ) -> IssuedToken:
        """A new token for the namespace; the token is in the result and nowhere else.

        Raises:
            ConfigError: an unknown scope, an empty namespace, or a label over 255 characters.
        """
        if scope not in SCOPES:
            raise ConfigError(f"token scope {scope!r} is not one of {', '.join(SCOPES)}")
        if not user_id or not agent_id:
            raise ConfigError("a token needs a user id and an agent id (--user, --agent)")
        check_namespace(user_id, agent_id)
        if label is not None and len(label) > MAX_LABEL:
            raise ConfigError(f"token label: {len(label)} characters, at most {MAX_LABEL}")
        token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        created = now()
        with self.db.write() as conn:
            conn.execute(
                sa.insert(t.api_tokens).values(
                    id=token_id,
                    user_id=user_id,
                    agent_id=agent_id,
                    scope=scope,
                    label=label,
                    secret_hash=hash_token_secret(secret),
                    created_at=created,
                )
            )
        record = ApiToken(
            token_id=token_id,
            user_id=user_id,
            agent_id=agent_id,
            scope=scope,
            label=label,
            created_at=created,
            revoked_at=None,
        )
        return IssuedToken(record=record, token=f"{TOKEN_PREFIX}{token_id}_{secret}")

    def verify_api_token(self, token: str) -> ApiToken | None:
        """The active token ``token`` is, or None (malformed, unknown, revoked, wrong secret).

        The secret's hash is compared in constant time."""
        parsed = parse_token(token)
        if parsed is None:
            return None
        token_id, secret = parsed
        c = t.api_tokens.c
        with self.db.read() as conn:
            row = conn.execute(sa.select(*_COLUMNS, c.secret_hash).where(c.id == token_id)).first()
        if row is None or row.revoked_at is not None:
            return None
        if not hmac.compare_digest(row.secret_hash, hash_token_secret(secret)):
            return None
        return _record(row)

    def active_api_token_ids(self, token_ids: Collection[str]) -> set[str]:
        """Those of ``token_ids`` that are stored and not revoked: for a server that keeps a
        stream open on a token, to end it once the token is revoked."""
        c = t.api_tokens.c
        ids, out = sorted(set(token_ids)), set[str]()
        with self.db.read() as conn:
            for start in range(0, len(ids), 500):
                q = sa.select(c.id).where(
                    c.id.in_(ids[start : start + 500]), c.revoked_at.is_(None)
                )
                out.update(conn.execute(q).scalars())
        return out

    def list_api_tokens(
        self, *, user_id: str, agent_id: str, include_revoked: bool = True
    ) -> list[ApiToken]:
        """The namespace's tokens, oldest first (never their secrets)."""
        c = t.api_tokens.c
        q = sa.select(*_COLUMNS).where(c.user_id == user_id, c.agent_id == agent_id)
        if not include_revoked:
            q = q.where(c.revoked_at.is_(None))
        with self.db.read() as conn:
            return [_record(r) for r in conn.execute(q.order_by(c.created_at, c.id))]

    def revoke_api_token(self, token_id: str, *, user_id: str, agent_id: str) -> ApiToken:
        """Revoke one of the namespace's tokens (at once: the next request with it is refused);
        revoking a revoked token changes nothing.

        Raises:
            NotFoundError: the namespace has no token ``token_id``.
        """
        c = t.api_tokens.c
        where = (c.id == token_id, c.user_id == user_id, c.agent_id == agent_id)
        with self.db.write() as conn:
            conn.execute(
                sa.update(t.api_tokens)
                .where(*where, c.revoked_at.is_(None))
                .values(revoked_at=now())
            )
            row = conn.execute(sa.select(*_COLUMNS).where(*where)).first()
        if row is None:
            raise NotFoundError(
                f"no API token {token_id!r} for user {user_id!r}, agent {agent_id!r}; list them "
                "with `soloflow tokens list`"
            )
        return _record(row)
