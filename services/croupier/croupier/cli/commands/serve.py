"""``croupier serve``: the live service on RabbitMQ and PostgreSQL, until SIGTERM.

Runs as the least-privileged service role (see ``croupier migrate --service-role``): it
never migrates (a schema behind this build is exit 2, saying to run ``croupier migrate``)
and connects to no other database than its ledger's. It signs the ledger's heads with the
key ``CROUPIER_LEDGER_SIGNING_KEY`` names (``croupier keygen``), and will not run without;
after a key rotation it trusts its predecessors' heads and marks as the keyring
``CROUPIER_LEDGER_KEYRING`` lists them (docs/keys.md). It will not start (exit 2, saying
why) when its key may not append after the ledger's head.

With ``CROUPIER_PARTITIONED=1`` it shares the ledger's partitions with the other instances
so configured (``croupier.settlement.service``; docs/scale.md): the feed is routed by
partition and each instance consumes the queues of the partitions it holds. All instances
of one ledger and vhost must agree on it: the single feed queue and the routed queues are
two topologies, and a message reaches only the one its vhost declares.
"""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from typing import Any

from croupier.bus.amqp import AmqpBus
from croupier.bus.routed import RoutedAmqpBus
from croupier.cli.console import bounded_int, signing_key, signing_keyring
from croupier.config import MAX_BATCH_LIMIT, Settings, settings
from croupier.errors import CommandError, reaching
from croupier.ledger import HeadNotSigned, SchemaBehind, open_ledger
from croupier.ledger.keyring import Keyring
from croupier.ledger.signing import LedgerKey
from croupier.metrics import Metrics
from croupier.settlement.partitions import PartitionOwner
from croupier.settlement.service import Service, run_to_stop


def register(subparsers: Any) -> None:
    """Add the ``serve`` sub-command."""
    parser = subparsers.add_parser(
        "serve",
        description="Configured by CROUPIER_DATABASE_URL (the service role), CROUPIER_AMQP_URL, "
        "CROUPIER_HTTP_PORT, CROUPIER_LOG_LEVEL, CROUPIER_MAX_BATCH, CROUPIER_HELD_TIMEOUT, "
        "CROUPIER_ROUND_TIMEOUT, CROUPIER_RELAY_LEASE, CROUPIER_LEDGER_SIGNING_KEY and, after "
        "a key rotation, CROUPIER_LEDGER_KEYRING (see `croupier --help` and docs/keys.md).",
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
    key = signing_key(chosen.ledger_signing_key, required=True)
    assert key is not None
    keyring = signing_keyring(chosen.ledger_keyring, key)
    with reaching(ledger=chosen.database_url, broker=chosen.amqp_url):
        run_to_stop(_serve(chosen, key, keyring, args.max_batch))
    return 0


async def _serve(
    settings: Settings, key: LedgerKey, keyring: Keyring | None, max_batch: int
) -> None:
    async with open_ledger(settings.database_url, key, keyring) as ledger:
        owner = None
        bus: AmqpBus = AmqpBus(settings.amqp_url)
        if settings.partitioned:
            instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
            term = settings.partition_term
            owner = PartitionOwner(ledger, instance, Metrics(), term=term, poll=min(1.0, term / 3))
            bus = RoutedAmqpBus(settings.amqp_url, count=1)  # the count is read at start
        service = Service(
            ledger,
            bus,
            owner=owner,
            max_batch=max_batch,
            held_timeout=settings.held_timeout,
            round_timeout=settings.round_timeout,
            relay_lease=settings.relay_lease,
        )
        try:
            await service.serve_until_signalled(http_port=settings.http_port)
        except (SchemaBehind, HeadNotSigned) as error:
            raise CommandError(str(error)) from None
