"""The history site beside a running service: projections following the ledger, and
``croupier web`` in the same process (what ``croupier demo`` shows its players).

Players sign in with tokens signed by a secret made for this run, valid for an hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

import jwt

from croupier.commands.web import web_server
from croupier.history.auth import Authenticator
from croupier.history.store import open_store
from croupier.ledger import Ledger
from croupier.projection import open_store as open_read_models
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections

TOKEN_SECONDS: Final = 3600


@dataclass(frozen=True)
class HistorySite:
    """Where the pages are served, and the secret this run's player tokens are signed with."""

    port: int
    secret: str

    def page_for(self, player_id: str) -> str:
        """The URL of ``player_id``'s history page, with a token valid for an hour."""
        claims = {"sub": player_id, "exp": int(time.time()) + TOKEN_SECONDS}
        token = jwt.encode(claims, self.secret, algorithm="HS256")
        return f"http://127.0.0.1:{self.port}/history?token={quote(token)}"


@asynccontextmanager
async def history_site(ledger: Ledger, database_url: str, port: int) -> AsyncIterator[HistorySite]:
    """Follow the ledger into the read models and serve the pages on ``port`` (0: any)."""
    projector = Projector(ledger, open_read_models(ledger), load_projections())
    await projector.setup()
    stop = asyncio.Event()
    following = asyncio.create_task(projector.follow(stop))
    secret = secrets.token_urlsafe(32)
    store = open_store(database_url)
    server = web_server(store, Authenticator(secret.encode()), "127.0.0.1", port)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()  # raises why it could not start
            await asyncio.sleep(0.05)
        bound = server.servers[0].sockets[0].getsockname()[1]
        yield HistorySite(int(bound), secret)
    finally:
        server.should_exit = True
        stop.set()
        with contextlib.suppress(Exception):
            await serving
        await following
        await store.close()
