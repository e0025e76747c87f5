"""``croupier web``: the read-side HTTP service (history API and pages), until SIGTERM.

Configured by ``CROUPIER_DATABASE_URL`` (connect as the read-only role
``croupier_reader``), ``CROUPIER_WEB_PORT``, ``CROUPIER_PLAYER_TOKEN_SECRET`` and/or
``CROUPIER_PLAYER_TOKEN_PUBLIC_KEY`` (with ``CROUPIER_WEB_TOKEN_ISSUER`` and
``_AUDIENCE`` to bind tokens to this service), ``CROUPIER_STAFF_KEYS``,
``CROUPIER_WEB_FRAME_ANCESTORS`` (the game client's origins, which may frame the pages),
``CROUPIER_WEB_SESSION_SECRET`` and ``CROUPIER_STAFF_SSO_PUBLIC_KEY`` (staff sign-in).
``--workers N`` runs N processes sharing the port (each with its own connection pool),
for as many cores; without a configured session secret they share one made at start.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
import uvloop
from fastapi import FastAPI

from croupier.config import Settings, settings
from croupier.errors import CommandError
from croupier.history.app import create_app
from croupier.history.auth import AuthConfigError, Authenticator, load_authenticator, load_pem
from croupier.history.headers import parse_frame_ancestors
from croupier.history.staff import StaffSignIn
from croupier.history.store import HistoryStore, open_store
from croupier.urls import mask_url


@dataclass(frozen=True)
class Access:
    """Whom the service admits and how: tokens, staff sign-in, who may frame the pages."""

    auth: Authenticator
    staff_sign_in: StaffSignIn
    frame_ancestors: tuple[str, ...] = ()


def authenticator(chosen: Settings) -> Authenticator:
    """Whom the service admits, from the settings; a :class:`CommandError` if unusable."""
    secret = chosen.player_token_secret
    try:
        return load_authenticator(
            secret.get_secret_value() if secret else None,
            chosen.player_token_public_key,
            chosen.staff_keys,
            chosen.web_token_issuer,
            chosen.web_token_audience,
        )
    except AuthConfigError as error:
        raise CommandError(str(error), "fix the environment or .env") from None


def access(chosen: Settings) -> Access:
    """The service's :class:`Access` from the settings; a :class:`CommandError` if unusable."""
    auth = authenticator(chosen)
    session = chosen.web_session_secret
    try:
        sso = chosen.staff_sso_public_key
        pem = load_pem(sso, "CROUPIER_STAFF_SSO_PUBLIC_KEY") if sso else None
        sign_in = StaffSignIn(
            auth,
            session.get_secret_value().encode() if session else secrets.token_bytes(32),
            sso_public_key=pem,
            sso_audience=chosen.staff_sso_audience,
        )
    except (AuthConfigError, ValueError) as error:
        raise CommandError(str(error), "fix the environment or .env") from None
    return Access(auth, sign_in, parse_frame_ancestors(chosen.web_frame_ancestors))


def register(subparsers: Any) -> None:
    """Add the ``web`` sub-command."""
    parser = subparsers.add_parser(
        "web",
        description=__doc__,
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument(
        "--workers", type=_workers, default=1, help="processes sharing the port (default 1)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled."""
    chosen = settings()
    access(chosen)  # a configuration error stops the command before any worker starts
    if args.workers > 1 and not chosen.web_session_secret:  # one secret for every worker
        os.environ["CROUPIER_WEB_SESSION_SECRET"] = secrets.token_urlsafe(32)
    print(
        f"croupier web: history on http://{args.host}:{chosen.web_port}/history, staff sign "
        f"in at /staff/login, reading {mask_url(chosen.database_url)}",
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
        store = open_store(chosen.database_url)
        runner.run(serve(store, access(chosen), args.host, chosen.web_port))
    return 0


def application() -> FastAPI:
    """The application as each ``--workers`` process builds it, from the settings."""
    chosen = settings()
    store = open_store(chosen.database_url)
    return application_for(store, access(chosen), on_shutdown=store.close)


def application_for(
    store: HistoryStore,
    chosen: Access,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> FastAPI:
    """The application over ``store`` with ``chosen`` access."""
    return create_app(
        store,
        chosen.auth,
        on_shutdown,
        frame_ancestors=chosen.frame_ancestors,
        staff_sign_in=chosen.staff_sign_in,
    )


def _workers(text: str) -> int:
    count = int(text)
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"workers must be 1..64, got {count}")
    return count


async def serve(store: HistoryStore, chosen: Access, host: str, port: int) -> None:
    """Run the application on ``host:port`` until the server is told to stop."""
    server = web_server(store, chosen, host, port)
    try:
        await server.serve()
    finally:
        await store.close()


def web_server(
    store: HistoryStore, chosen: Access | Authenticator, host: str, port: int
) -> uvicorn.Server:
    """A uvicorn server for the application (``serve()`` it; ``should_exit`` stops it);
    given only an authenticator, staff sessions are signed with a secret made now."""
    if isinstance(chosen, Authenticator):
        chosen = Access(chosen, StaffSignIn(chosen))
    config = uvicorn.Config(
        application_for(store, chosen),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    return uvicorn.Server(config)
