"""``croupier token``: a player's token for the history API, signed with the configured secret.

The token is what the operator's game server hands a player: a JWT, HS256 with
``CROUPIER_PLAYER_TOKEN_SECRET``, ``sub`` the player id, ``exp`` ``--ttl`` seconds from
now, and ``iss`` and ``aud`` when ``CROUPIER_WEB_TOKEN_ISSUER`` and ``_AUDIENCE`` name them;
``croupier web`` admits it until then (:mod:`croupier.history.auth`). For support and
tests; printed on stdout, nothing else.
"""

from __future__ import annotations

import argparse
from typing import Any

from croupier.cli.console import bounded_int
from croupier.errors import CommandError

#: The longest a token may live: a day.
MAX_TTL = 86_400


def register(subparsers: Any) -> None:
    """Add the ``token`` sub-command."""
    parser = subparsers.add_parser(
        "token",
        description="Prints a player's token for the history API (`/history?token=...` or "
        "`Authorization: Bearer ...`), signed with CROUPIER_PLAYER_TOKEN_SECRET.",
    )
    parser.add_argument("--player", required=True, type=_player, help="the player id")
    parser.add_argument(
        "--ttl",
        type=bounded_int(1, MAX_TTL),
        default=3600,
        metavar="SECONDS",
        help="how long the token is valid",
    )
    parser.set_defaults(run=run)


def _player(text: str) -> str:
    from croupier.history.auth import PLAYER_ID_PATTERN

    if not PLAYER_ID_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError("a player id is 1 to 128 printable characters")
    return text


def run(args: argparse.Namespace) -> int:
    """Print the token."""
    from croupier.config import settings
    from croupier.history.auth import AuthConfigError, player_token

    chosen = settings()
    secret = chosen.player_token_secret
    if secret is None:
        raise CommandError(
            "CROUPIER_PLAYER_TOKEN_SECRET is not set",
            "set it (at least 32 bytes) in the environment or .env, as for `croupier web`",
        )
    try:
        token = player_token(
            secret.get_secret_value().encode(),
            args.player,
            args.ttl,
            issuer=chosen.web_token_issuer or None,
            audience=chosen.web_token_audience or None,
        )
    except AuthConfigError as error:
        raise CommandError(str(error), "fix the environment or .env") from None
    print(token)
    return 0
