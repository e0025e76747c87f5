"""A PostgreSQL ledger with the history rounds settled in it, and clients of ``croupier web``.

Test modules import the ``web`` fixture (as ``web_fixture``) from here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt
import pytest
from fastapi import FastAPI
from history_rounds import boxes_round, jackpot_round, settle, shared_round, voided_round
from integration.conftest import connect_postgres, scratch_database

from croupier.history.app import create_app
from croupier.history.auth import Authenticator, StaffKey, key_digest
from croupier.history.store import HistoryStore, open_store
from croupier.history.viewer import Grant
from croupier.ledger import Ledger, open_ledger
from croupier.projection import open_store as open_store_for
from croupier.projection.postgres import READER_ROLE
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections

SECRET = "a test secret of thirty-two bytes or more, for HS256"
SUPPORT_KEY = "support-key-0123456789"
COMPLIANCE_KEY = "compliance-key-0123456789"


def player_token(player_id: str, *, expires_in: int = 300, secret: str = SECRET) -> str:
    """A token as the operator's game server issues it."""
    claims = {"sub": player_id, "exp": int(time.time()) + expires_in}
    return jwt.encode(claims, secret, algorithm="HS256")


def authenticator() -> Authenticator:
    """Players with SECRET; a support key and a compliance key, default roles."""
    return Authenticator(
        SECRET.encode(),
        staff_keys=(
            StaffKey("desk-1", "support", bytes.fromhex(key_digest(SUPPORT_KEY))),
            StaffKey("audit-1", "compliance", bytes.fromhex(key_digest(COMPLIANCE_KEY))),
        ),
        roles={"support": frozenset(), "compliance": frozenset(Grant)},
    )


@dataclass
class Web:
    """The application over a scratch ledger, with a way to ask as each kind of caller."""

    ledger: Ledger
    store: HistoryStore
    client: httpx.AsyncClient
    url: str
    projector: Projector
    app: FastAPI

    def as_player(self, player_id: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {player_token(player_id)}"}

    @staticmethod
    def as_support() -> dict[str, str]:
        return {"X-Staff-Key": SUPPORT_KEY}

    @staticmethod
    def as_compliance() -> dict[str, str]:
        return {"X-Staff-Key": COMPLIANCE_KEY}


@pytest.fixture(name="web", scope="module", params=["postgres", "sqlite"])
async def web_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Web]:
    """The history rounds settled and projected; the app reading them (one per module).

    On PostgreSQL the app connects as a login role that is only a member of
    ``croupier_reader``; on SQLite it opens the ledger file read-only.
    """
    if request.param == "postgres":
        async with scratch_database() as url, _web(url) as web:
            yield web
    else:
        path = tmp_path_factory.mktemp("history") / "ledger.sqlite"
        async with _web(f"sqlite:///{path}") as web:
            yield web


@asynccontextmanager
async def _web(url: str) -> AsyncIterator[Web]:
    async with open_ledger(url) as ledger, AsyncExitStack() as stack:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round(), voided_round(), jackpot_round()])
        projector = Projector(ledger, open_store_for(ledger), load_projections())
        await projector.setup()  # makes croupier_reader on PostgreSQL
        await projector.catch_up()
        postgres = url.startswith("postgresql://")
        reader_url = await stack.enter_async_context(reader_role(url)) if postgres else url
        store = open_store(reader_url)
        app = create_app(store, authenticator())
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
                yield Web(ledger, store, client, reader_url, projector, app)
        finally:
            await store.close()


@asynccontextmanager
async def reader_role(url: str) -> AsyncIterator[str]:
    """A login role in ``croupier_reader`` only; yields ``url`` connecting as it."""
    name = f"croupier_web_{uuid.uuid4().hex[:10]}"
    admin = await connect_postgres(url)
    try:
        await admin.execute(f"CREATE ROLE {name} LOGIN IN ROLE {READER_ROLE}")
    finally:
        await admin.close()
    try:
        parts = urlsplit(url)
        yield urlunsplit(parts._replace(netloc=f"{name}@{parts.hostname}:{parts.port}"))
    finally:
        admin = await connect_postgres(url)
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name
            )
            await admin.execute(f"DROP ROLE IF EXISTS {name}")
        finally:
            await admin.close()
