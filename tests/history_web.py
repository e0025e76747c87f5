"""A PostgreSQL ledger with the history rounds settled in it, and clients of ``croupier web``.

Test modules import the ``web`` fixture (as ``web_fixture``) from here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import jwt
import pytest
from history_rounds import boxes_round, settle, shared_round, voided_round
from integration.conftest import scratch_database

from croupier.history.app import create_app
from croupier.history.auth import Authenticator, StaffKey, key_digest
from croupier.history.store import HistoryStore, open_store
from croupier.history.viewer import Grant
from croupier.ledger import Ledger, open_ledger

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

    def as_player(self, player_id: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {player_token(player_id)}"}

    @staticmethod
    def as_support() -> dict[str, str]:
        return {"X-Staff-Key": SUPPORT_KEY}

    @staticmethod
    def as_compliance() -> dict[str, str]:
        return {"X-Staff-Key": COMPLIANCE_KEY}


@pytest.fixture(name="web", scope="module")
async def web_fixture() -> AsyncIterator[Web]:
    """The three history rounds settled in PostgreSQL; the app reading them (per module)."""
    async with scratch_database() as postgres_database, open_ledger(postgres_database) as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round(), voided_round()])
        store = open_store(postgres_database)
        app = create_app(store, authenticator())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
            yield Web(ledger, store, client, postgres_database)
        await store.close()


Headers = Callable[[str], dict[str, str]]
