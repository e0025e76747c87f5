"""The history site beside a running service: projections following the ledger, and
``croupier web``, on a thread and event loop of their own (what ``croupier demo`` shows).

Its own loop keeps the pages answering while the service's loop is busy settling a
backlog; it opens its own ledger connections for the same reason. Players sign in with
tokens signed by a secret made for this run, valid for an hour.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote

from croupier.cli.commands.web import web_server
from croupier.history.auth import Authenticator, player_token
from croupier.history.store import open_store
from croupier.ledger import open_ledger
from croupier.projection import open_store as open_read_models
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections

TOKEN_SECONDS: Final = 3600
START_SECONDS: Final = 30.0
#: The read models the pages read. The integrity statistics are CPU work (exact odds per
#: flop): ``croupier project`` follows them in a process of its own, never beside a service.
PAGE_READ_MODELS: Final = ("wagers", "rounds")


@dataclass(frozen=True)
class HistorySite:
    """Where the pages are served, and the secret this run's player tokens are signed with."""

    port: int
    secret: str

    def page_for(self, player_id: str) -> str:
        """The URL of ``player_id``'s history page, with a token valid for an hour."""
        token = player_token(self.secret.encode(), player_id, TOKEN_SECONDS)
        return f"http://127.0.0.1:{self.port}/history?token={quote(token)}"


@dataclass
class _Running:
    """What the site's thread reports back: its port, or why it stopped; how to stop it."""

    ready: threading.Event = field(default_factory=threading.Event)
    port: int | None = None
    error: BaseException | None = None
    stop: Callable[[], None] | None = None


@asynccontextmanager
async def history_site(database_url: str, port: int) -> AsyncIterator[HistorySite]:
    """Follow the ledger at ``database_url`` into the read models and serve the pages on
    ``port`` (0: any free port) until the block ends."""
    secret = secrets.token_urlsafe(32)
    running = _Running()
    thread = threading.Thread(
        target=lambda: asyncio.run(_serve(database_url, port, secret, running)),
        name="history-site",
        daemon=True,
    )
    thread.start()
    await asyncio.to_thread(running.ready.wait, START_SECONDS)
    try:
        if running.error is not None:
            raise running.error
        if running.port is None:
            raise TimeoutError(f"the history site did not start within {START_SECONDS:.0f}s")
        yield HistorySite(running.port, secret)
    finally:
        if running.stop is not None:
            running.stop()
        await asyncio.to_thread(thread.join, START_SECONDS)


async def _serve(database_url: str, port: int, secret: str, running: _Running) -> None:
    try:
        async with open_ledger(database_url) as ledger:
            projector = Projector(
                ledger, open_read_models(ledger), load_projections(PAGE_READ_MODELS)
            )
            await projector.setup()
            stop = asyncio.Event()
            store = open_store(database_url)
            server = web_server(store, Authenticator(secret.encode()), "127.0.0.1", port)
            loop = asyncio.get_running_loop()

            def stopping() -> None:
                server.should_exit = True
                stop.set()

            def stop_from_another_thread() -> None:
                loop.call_soon_threadsafe(stopping)

            running.stop = stop_from_another_thread
            following = asyncio.create_task(projector.follow(stop))
            serving = asyncio.create_task(server.serve())
            while not server.started and not serving.done():
                await asyncio.sleep(0.05)
            if serving.done():
                serving.result()  # raises why it could not start
            running.port = int(server.servers[0].sockets[0].getsockname()[1])
            running.ready.set()
            await serving
            stop.set()
            await following
            await store.close()
    except BaseException as error:
        running.error = error
        raise
    finally:
        running.ready.set()
