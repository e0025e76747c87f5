"""``croupier serve``: the live service on RabbitMQ and PostgreSQL, until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.bus.amqp import AmqpBus
from croupier.config import MAX_BATCH_LIMIT, Settings, settings
from croupier.console import bounded_int
from croupier.errors import reaching
from croupier.ledger import open_ledger
from croupier.ledger.postgres import create_database_if_missing
from croupier.service import Service


def register(subparsers: Any) -> None:
    """Add the ``serve`` sub-command."""
    parser = subparsers.add_parser(
        "serve",
        help="consume the studio feed, settle into the ledger, publish results",
        description="Configured by CROUPIER_DATABASE_URL, CROUPIER_AMQP_URL, CROUPIER_HTTP_PORT, "
        "CROUPIER_LOG_LEVEL, CROUPIER_MAX_BATCH, CROUPIER_HELD_TIMEOUT, CROUPIER_ROUND_TIMEOUT and "
        "CROUPIER_RELAY_LEASE (see `croupier --help`).",
    )
    parser.add_argument(
        "--max-batch",
        type=bounded_int(1, MAX_BATCH_LIMIT),
        default=settings().max_batch,
        help=f"feed messages per ledger transaction, 1..{MAX_BATCH_LIMIT} (CROUPIER_MAX_BATCH)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled."""
    chosen = settings()
    with reaching(ledger=chosen.database_url, broker=chosen.amqp_url):
        asyncio.run(_serve(chosen, args.max_batch))
    return 0


async def _serve(settings: Settings, max_batch: int) -> None:
    if settings.database_url.startswith(("postgresql://", "postgres://")):
        await create_database_if_missing(settings.database_url)
    async with open_ledger(settings.database_url) as ledger:
        service = Service(
            ledger,
            AmqpBus(settings.amqp_url),
            max_batch=max_batch,
            held_timeout=settings.held_timeout,
            round_timeout=settings.round_timeout,
            relay_lease=settings.relay_lease,
        )
        await service.serve_until_signalled(http_port=settings.http_port)
