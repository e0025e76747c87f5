"""``croupier serve``: the live service on RabbitMQ and PostgreSQL, until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.bus.amqp import AmqpBus
from croupier.config import Settings, configure_logging
from croupier.ledger import open_ledger
from croupier.ledger.postgres import create_database_if_missing
from croupier.service import Service


def register(subparsers: Any) -> None:
    """Add the ``serve`` sub-command."""
    parser = subparsers.add_parser(
        "serve",
        help="consume the studio feed, settle into the ledger, publish results",
        description="Configured by CROUPIER_DATABASE_URL, CROUPIER_AMQP_URL, CROUPIER_HTTP_PORT.",
    )
    parser.add_argument("--max-batch", type=int, default=1000, help="deliveries per transaction")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until signalled."""
    configure_logging()
    asyncio.run(_serve(Settings.from_env(), args.max_batch))
    return 0


async def _serve(settings: Settings, max_batch: int) -> None:
    if settings.database_url.startswith(("postgresql://", "postgres://")):
        await create_database_if_missing(settings.database_url)
    async with open_ledger(settings.database_url) as ledger:
        service = Service(ledger, AmqpBus(settings.amqp_url), max_batch=max_batch)
        await service.serve_until_signalled(http_port=settings.http_port)
