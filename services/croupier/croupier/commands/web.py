"""``croupier web``: the read-side HTTP service (history API and pages), until SIGTERM.

Configured by ``CROUPIER_DATABASE_URL`` (connect as the read-only role
``croupier_reader``), ``CROUPIER_WEB_PORT``, ``CROUPIER_PLAYER_TOKEN_SECRET`` and/or
``CROUPIER_PLAYER_TOKEN_PUBLIC_KEY``, and ``CROUPIER_STAFF_KEYS``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import uvicorn

from croupier.config import settings
from croupier.history.app import create_app
from croupier.history.auth import AuthConfigError, Authenticator, load_authenticator
from croupier.history.store import HistoryStore, open_store
from croupier.logs import configure_logging

DEFAULT_WEB_PORT: Final = 8470


@dataclass(frozen=True)
class WebSettings:
    """Where ``croupier web`` listens and whom it admits."""

    database_url: str
    port: int
    auth: Authenticator

    @classmethod
    def from_env(cls) -> WebSettings:
        """Read the environment; raises ``ValueError`` naming what is wrong."""
        port = os.environ.get("CROUPIER_WEB_PORT", str(DEFAULT_WEB_PORT))
        if not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"CROUPIER_WEB_PORT must be a TCP port number, got {port!r}")
        auth = load_authenticator(
            os.environ.get("CROUPIER_PLAYER_TOKEN_SECRET"),
            os.environ.get("CROUPIER_PLAYER_TOKEN_PUBLIC_KEY"),
            os.environ.get("CROUPIER_STAFF_KEYS"),
        )
        return cls(settings().database_url, int(port), auth)


def register(subparsers: Any) -> None:
    """Add the ``web`` sub-command."""
    parser = subparsers.add_parser(
        "web",
        help="serve game history and round recall over HTTP (read-only)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled; 2 on a configuration error."""
    try:
        settings = WebSettings.from_env()
    except (ValueError, AuthConfigError) as error:
        if args.debug:
            raise
        print(f"croupier web: {error}", file=sys.stderr)
        return 2
    configure_logging()
    print(
        f"croupier web: history on http://{args.host}:{settings.port}/history, "
        f"reading {masked(settings.database_url)}",
        file=sys.stderr,
    )
    asyncio.run(serve(open_store(settings.database_url), settings.auth, args.host, settings.port))
    return 0


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


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
