"""``croupier partitions``: who owns each partition of the ledger, at which epoch, until when,
its open rounds and lag, and the instances that share them.

Reads the ledger's ``partition_leases`` and ``instances`` (the database's clock), so it
shows what every instance holds, whichever runs it. Each partition's open rounds (its
tables' rounds not settled or voided, found as ``croupier rounds --open`` finds them, up to
``OPEN_LIMIT`` in all, without reading their events) and how long the oldest has been open: a round
open far longer than a game lasts is a partition nobody settles, or a feed that stopped
mid-round (``rounds --open`` says what it waits for). A partition's lag is what its feed queue
holds ready at the broker (``--amqp``, default ``CROUPIER_AMQP_URL`` when set; read with
passive declares, which change nothing), beside the queue's consumers; the routed feed's
``croupier.feed.unrouted`` queue is counted too (tables the router has not bound yet). With
no broker named, the lag is left out. A partition is *free* when it has no
owner, *expired* when its owner's lease ran out (the next instance to poll takes it with a
new epoch). The count of partitions was fixed when the ledger was created
(``croupier migrate --partitions``). Exit 0 whatever the leases say.

``--prune-bindings`` removes instead the routed feed's per-table bindings (``<table_id>.#``
from ``croupier.feed.in`` to the table's ``croupier.feed.pNN``, made by the router) of the
tables not seen for ``--older-than`` (default 7d). A table is *seen* when the ledger records
a fact of one of its rounds: its age is that of its latest round fact (``recorded_at``),
read from the whole ledger. Tables the ledger has no round of (every message rejected
before a round opened) are not found, and their bindings stay. The broker cannot list
bindings over AMQP: each stale table's binding is removed whether or not it is still there
(removing an absent one changes nothing). ``--dry-run`` lists them and removes nothing.

Pruning is safe at any age, even of a table that is playing: a binding only decides where
a message published from then on is routed. A message of a table whose binding was removed
falls through to ``croupier.feed.unrouted``; the router binds the table again and
republishes the message to its partition (acknowledged once the broker confirms), even when
it bound that table before (``croupier.bus.routed``), so nothing is lost. Messages of the
table already in its partition queue stay there; those that raced the new binding reach
the queue out of order, and the settler holds a round's events until their ``seq`` gap
fills. Exit 0; 2 when the ledger or the broker cannot be reached, or the vhost has no routed
feed.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    age_text,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.config import settings
from croupier.errors import CommandError, ExitCode, reaching

if TYPE_CHECKING:
    from croupier.bus.amqp import QueueDepth
    from croupier.ledger import Ledger

#: The open rounds read at most (oldest first), as ``croupier rounds --open`` by default.
OPEN_LIMIT = 10_000


def register(subparsers: Any) -> None:
    """Add the ``partitions`` sub-command."""
    parser = subparsers.add_parser("partitions", description=__doc__)
    add_ledger_argument(parser)
    parser.add_argument(
        "--amqp",
        metavar="URL",
        help="the broker whose partition queues give the lag (default CROUPIER_AMQP_URL, if set)",
    )
    parser.add_argument(
        "--prune-bindings",
        action="store_true",
        help="remove the routed feed's bindings of the tables not seen for --older-than",
    )
    parser.add_argument(
        "--older-than",
        type=duration,
        default=duration(DEFAULT_OLDER_THAN),
        metavar="DURATION",
        help=f"with --prune-bindings: not seen for this long, as 90s, 30m, 12h or 7d "
        f"(default {DEFAULT_OLDER_THAN})",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="with --prune-bindings: list, remove nothing"
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


DEFAULT_OLDER_THAN = "7d"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> timedelta:
    """An option type: a whole number of seconds, minutes, hours or days (``90s``, ``7d``)."""
    found = re.fullmatch(r"([0-9]{1,9})([smhd])", text.strip())
    if found is None or int(found[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 30m, 12h, 7d")
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])


def run(args: argparse.Namespace) -> int:
    """Print every partition's lease and lag, and the instances; or prune bindings."""
    if args.prune_bindings:
        return _prune(args)
    if args.dry_run:
        raise CommandError("--dry-run goes with --prune-bindings")
    document = asyncio.run(_read(ledger_of(args)))
    broker = args.amqp or (settings().amqp_url if settings().amqp_configured else None)
    if broker is not None:
        setting = "--amqp" if args.amqp else "CROUPIER_AMQP_URL or --amqp"
        with reaching(broker=broker, broker_setting=setting):
            _add_lag(document, asyncio.run(_depths(broker, document["partitions"])))
    if args.json:
        print_json(document)
        return ExitCode.OK
    print(
        f"{'partition':>9}  {'owner':<36} {'epoch':>7}  {'expires in':<22} {'open rounds':<20} lag"
    )
    for lease in document["leases"]:
        print(
            f"{lease['partition']:>9}  {lease['owner'] or '-':<36} {lease['epoch']:>7}  "
            f"{_expiry(lease):<22} {_open(lease):<20} {_lag(lease)}"
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


def _open(lease: dict[str, Any]) -> str:
    if not lease["open_rounds"]:
        return "none"
    return f"{lease['open_rounds']}, oldest {age_text(lease['oldest_open_seconds'])}"


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
        oldest = await _open_rounds(ledger, count)
    held = Counter(lease.owner for lease in rows if lease.owner and lease.expires_in > 0)
    return {
        "partitions": count,
        "leases": [
            {
                "partition": lease.partition,
                "owner": lease.owner,
                "epoch": lease.epoch,
                "expires_in_seconds": round(lease.expires_in, 3) if lease.epoch else None,
                "open_rounds": len(oldest.get(lease.partition, [])),
                "oldest_open_seconds": (
                    round(max(oldest[lease.partition]), 3) if lease.partition in oldest else None
                ),
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


async def _open_rounds(ledger: Ledger, partitions: int) -> dict[int, list[float]]:
    """How long (seconds) each open round has been open, by its table's partition: the
    open streams and when each began, never the rounds' events."""
    from croupier.ledger.partitions import partition_of
    from croupier.settlement.round import SETTLED, VOIDED
    from croupier.settlement.settler import ROUND_PREFIX, table_of

    streams = await ledger.open_streams(ROUND_PREFIX, (SETTLED, VOIDED), OPEN_LIMIT)
    began = await ledger.first_recorded(streams)
    now = datetime.now(UTC)
    ages: dict[int, list[float]] = {}
    for stream, when in began.items():
        ages.setdefault(partition_of(table_of(stream), partitions), []).append(
            (now - when).total_seconds()
        )
    return ages


def _expiry(lease: dict[str, Any]) -> str:
    if lease["state"] == "free":
        return "free" if lease["epoch"] else "free (never owned)"
    left = lease["expires_in_seconds"]
    return f"{left:.1f} s" if lease["state"] == "owned" else f"expired {-left:.1f} s ago"


def _prune(args: argparse.Namespace) -> int:
    """Remove (or with ``--dry-run`` list) the bindings of the tables not seen lately."""
    from croupier.bus.routed import unbind_tables

    stale = asyncio.run(_stale(ledger_of(args), args.older_than))
    if not args.dry_run:
        broker = args.amqp or settings().amqp_url
        setting = "--amqp" if args.amqp else "CROUPIER_AMQP_URL or --amqp"
        with reaching(broker=broker, broker_setting=setting):
            tables = [t["table_id"] for t in stale["tables"]]
            asyncio.run(unbind_tables(broker, tables, stale["partitions"]))
    stale["dry_run"] = args.dry_run
    if args.json:
        print_json(stale)
        return ExitCode.OK
    verb = "would remove" if args.dry_run else "removed"
    for table in stale["tables"]:
        print(f"{verb} {table['binding']} -> {table['queue']} (last seen {table['last_seen']})")
    print(
        f"{stale['seen']} tables in the ledger, {len(stale['tables'])} not seen since "
        f"{stale['cutoff']}: their bindings {'to remove' if args.dry_run else 'removed'} "
        "(where there were any); a table that plays again is bound again by the router"
    )
    return ExitCode.OK


async def _stale(url: str, older_than: timedelta) -> dict[str, Any]:
    """The tables of the ledger whose latest round fact is older than ``older_than``."""
    from contract.feed import TABLE_ID_PATTERN
    from croupier.bus.topology import partition_queue, table_binding
    from croupier.ledger import SchemaBehind
    from croupier.ledger.chain import format_timestamp
    from croupier.ledger.partitions import partition_of
    from croupier.settlement.settler import ROUND_PREFIX

    async with ledger_at(url) as ledger:
        try:
            await ledger.check_schema()
        except SchemaBehind as error:
            raise CommandError(str(error)) from None
        count = await ledger.partition_leases().count()
        seen = await ledger.last_recorded(ROUND_PREFIX)
    cutoff = datetime.now(UTC) - older_than
    stale = sorted(t for t, at in seen.items() if at < cutoff and re.match(TABLE_ID_PATTERN, t))
    return {
        "partitions": count,
        "older_than_seconds": int(older_than.total_seconds()),
        "cutoff": format_timestamp(cutoff),
        "seen": len(seen),
        "tables": [
            {
                "table_id": table,
                "binding": table_binding(table),
                "queue": partition_queue(partition_of(table, count), count),
                "last_seen": format_timestamp(seen[table]),
            }
            for table in stale
        ],
    }
