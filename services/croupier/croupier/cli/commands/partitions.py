"""``croupier partitions``: who owns each partition of the ledger, at which epoch, until when,
and the instances that share them.

Reads the ledger's ``partition_leases`` and ``instances`` only (the database's clock), so it
shows what every instance holds, whichever runs it. A partition is *free* when it has no
owner, *expired* when its owner's lease ran out (the next instance to poll takes it with a
new epoch). The count of partitions was fixed when the ledger was created
(``croupier migrate --partitions``). Exit 0 whatever the leases say.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.errors import CommandError, ExitCode


def register(subparsers: Any) -> None:
    """Add the ``partitions`` sub-command."""
    parser = subparsers.add_parser("partitions", description=__doc__)
    add_ledger_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print every partition's lease and the instances."""
    document = asyncio.run(_read(ledger_of(args)))
    if args.json:
        print_json(document)
        return ExitCode.OK
    print(f"{'partition':>9}  {'owner':<36} {'epoch':>7}  expires in")
    for lease in document["leases"]:
        print(
            f"{lease['partition']:>9}  {lease['owner'] or '-':<36} {lease['epoch']:>7}  "
            f"{_expiry(lease)}"
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
    return ExitCode.OK


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
