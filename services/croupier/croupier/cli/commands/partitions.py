"""``croupier partitions``: who owns each partition of the ledger, at which epoch, until when,
its lag, and the instances that share them.

Reads the ledger's ``partition_leases`` and ``instances`` (the database's clock), so it
shows what every instance holds, whichever runs it. A partition's lag is what its feed queue
holds ready at the broker (``--amqp``, default ``CROUPIER_AMQP_URL`` when set; read with
passive declares, which change nothing), beside the queue's consumers; the routed feed's
``croupier.feed.unrouted`` queue is counted too (tables the router has not bound yet). With
no broker named, the lag is left out. A partition is *free* when it has no
owner, *expired* when its owner's lease ran out (the next instance to poll takes it with a
new epoch). The count of partitions was fixed when the ledger was created
(``croupier migrate --partitions``). Exit 0 whatever the leases say.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.config import settings
from croupier.errors import CommandError, ExitCode, reaching

if TYPE_CHECKING:
    from croupier.bus.amqp import QueueDepth


def register(subparsers: Any) -> None:
    """Add the ``partitions`` sub-command."""
    parser = subparsers.add_parser("partitions", description=__doc__)
    add_ledger_argument(parser)
    parser.add_argument(
        "--amqp",
        metavar="URL",
        help="the broker whose partition queues give the lag (default CROUPIER_AMQP_URL, if set)",
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print every partition's lease and lag, and the instances."""
    document = asyncio.run(_read(ledger_of(args)))
    broker = args.amqp or (settings().amqp_url if settings().amqp_configured else None)
    if broker is not None:
        setting = "--amqp" if args.amqp else "CROUPIER_AMQP_URL or --amqp"
        with reaching(broker=broker, broker_setting=setting):
            _add_lag(document, asyncio.run(_depths(broker, document["partitions"])))
    if args.json:
        print_json(document)
        return ExitCode.OK
    print(f"{'partition':>9}  {'owner':<36} {'epoch':>7}  {'expires in':<22} lag")
    for lease in document["leases"]:
        print(
            f"{lease['partition']:>9}  {lease['owner'] or '-':<36} {lease['epoch']:>7}  "
            f"{_expiry(lease):<22} {_lag(lease)}"
        )
    print(f"{'instance':<36} {'seen':>9}  {'partitions':>10}")
    for instance in document["instances"]:
        print(
            f"{instance['id']:<36} {instance['seen_seconds_ago']:>7.1f} s  "
            f"{instance['partitions']:>10}"
        )
    owned = sum(1 for lease in document["leases"] if lease["state"] == "owned")
    live = len(document["instances"])
    print(
        f"{document['partitions']} partitions: {owned} owned, "
        f"{document['partitions'] - owned} free or expired; "
        f"{live} instance{'s' if live != 1 else ''} registered"
    )
    if "unrouted" not in document:
        print("lag: name the broker with --amqp (or CROUPIER_AMQP_URL) to see it")
    elif document["unrouted"] is None:
        print("lag: the broker has no partition queues (a single-queue feed?)")
    else:
        lag = sum(lease["lag"] or 0 for lease in document["leases"])
        print(f"lag: {lag} messages ready in partition queues, {document['unrouted']} unrouted")
    return ExitCode.OK


async def _depths(url: str, partitions: int) -> dict[str, QueueDepth | None]:
    from croupier.bus.amqp import queue_depths
    from croupier.bus.topology import UNROUTED_QUEUE, partition_queue

    names = [partition_queue(p, partitions) for p in range(partitions)]
    return await queue_depths(url, [*names, UNROUTED_QUEUE])


def _add_lag(document: dict[str, Any], depths: dict[str, QueueDepth | None]) -> None:
    """Each lease's ``lag`` and ``consumers`` (None: the broker has no such queue), and the
    document's ``unrouted`` count."""
    from croupier.bus.topology import UNROUTED_QUEUE, partition_queue

    for lease in document["leases"]:
        depth = depths[partition_queue(lease["partition"], document["partitions"])]
        lease["lag"] = depth.ready if depth else None
        lease["consumers"] = depth.consumers if depth else None
    unrouted = depths[UNROUTED_QUEUE]
    document["unrouted"] = unrouted.ready if unrouted else None


def _lag(lease: dict[str, Any]) -> str:
    if "lag" not in lease:
        return "-"
    if lease["lag"] is None:
        return "no queue"
    return f"{lease['lag']} ({lease['consumers']} consumer{'s' if lease['consumers'] != 1 else ''})"


async def _read(url: str) -> dict[str, Any]:
    from croupier.ledger import SchemaBehind

    async with ledger_at(url) as ledger:
        try:
            await ledger.check_schema()
        except SchemaBehind as error:
            raise CommandError(str(error)) from None
        leases = ledger.partition_leases()
        count = await leases.count()
        rows = await leases.leases()
        instances = await leases.instances()
    held = Counter(lease.owner for lease in rows if lease.owner and lease.expires_in > 0)
    return {
        "partitions": count,
        "leases": [
            {
                "partition": lease.partition,
                "owner": lease.owner,
                "epoch": lease.epoch,
                "expires_in_seconds": round(lease.expires_in, 3) if lease.epoch else None,
                "state": (
                    "free"
                    if lease.owner is None
                    else "owned"
                    if lease.expires_in > 0
                    else "expired"
                ),
            }
            for lease in rows
        ],
        "instances": [
            {
                "id": instance.id,
                "seen_seconds_ago": round(instance.seen_ago, 3),
                "partitions": held[instance.id],
            }
            for instance in instances
        ],
    }


def _expiry(lease: dict[str, Any]) -> str:
    if lease["state"] == "free":
        return "free" if lease["epoch"] else "free (never owned)"
    left = lease["expires_in_seconds"]
    return f"{left:.1f} s" if lease["state"] == "owned" else f"expired {-left:.1f} s ago"
