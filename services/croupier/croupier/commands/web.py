"""``croupier web``: the read-side HTTP service (history API and pages), until SIGTERM.

Configured by ``CROUPIER_DATABASE_URL`` (connect as the read-only role
``croupier_reader``), ``CROUPIER_WEB_PORT``, ``CROUPIER_PLAYER_TOKEN_SECRET`` and/or
``CROUPIER_PLAYER_TOKEN_PUBLIC_KEY``, and ``CROUPIER_STAFF_KEYS``. ``--workers N`` runs N
processes sharing the port (each with its own connection pool), for as many cores.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import uvicorn
import uvloop
from fastapi import FastAPI

from croupier.config import Settings, settings
from croupier.errors import CommandError
from croupier.history.app import create_app
from croupier.history.auth import AuthConfigError, Authenticator, load_authenticator
from croupier.history.store import HistoryStore, open_store
from croupier.urls import mask_url


def authenticator(chosen: Settings) -> Authenticator:
    """Whom the service admits, from the settings; a :class:`CommandError` if unusable."""
    secret = chosen.player_token_secret
    try:
        return load_authenticator(
            secret.get_secret_value() if secret else None,
            chosen.player_token_public_key,
            chosen.staff_keys,
        )
    except AuthConfigError as error:
        raise CommandError(str(error), "fix the environment or .env") from None


def register(subparsers: Any) -> None:
    """Add the ``web`` sub-command."""
    parser = subparsers.add_parser(
        "web",
        help="serve game history and round recall over HTTP (read-only)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument(
        "--workers", type=_workers, default=1, help="processes sharing the port (default 1)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled."""
    chosen = settings()
    auth = authenticator(chosen)
    print(
        f"croupier web: history on http://{args.host}:{chosen.web_port}/history, "
        f"reading {mask_url(chosen.database_url)}",
        file=sys.stderr,
    )
    if args.workers > 1:
        uvicorn.run(
            f"{__name__}:application",
            factory=True,
            workers=args.workers,
            host=args.host,
            port=chosen.web_port,
            loop="uvloop",
            http="httptools",
            log_config=None,
            access_log=False,
            server_header=False,
        )
        return 0
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(open_store(chosen.database_url), auth, args.host, chosen.web_port))
    return 0


def application() -> FastAPI:
    """The application as each ``--workers`` process builds it, from the settings."""
    chosen = settings()
    store = open_store(chosen.database_url)
    return create_app(store, authenticator(chosen), on_shutdown=store.close)


def _workers(text: str) -> int:
    count = int(text)
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"workers must be 1..64, got {count}")
    return count


async def serve(store: HistoryStore, auth: Authenticator, host: str, port: int) -> None:
    """Run the application on ``host:port`` until the server is told to stop."""
    server = web_server(store, auth, host, port)
    try:
        await server.serve()
    finally:
        await store.close()


def web_server(store: HistoryStore, auth: Authenticator, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server for the application (``serve()`` it; ``should_exit`` stops it)."""
    config = uvicorn.Config(
        create_app(store, auth),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    return uvicorn.Server(config)
