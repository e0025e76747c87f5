"""``croupier topology {single,routed}``: the broker topology of a feed mode, as RabbitMQ
definitions or applied to a vhost to switch it from the other mode.

``single`` is the default mode's (one ``croupier.feed`` queue); ``routed`` the partitioned
mode's (``CROUPIER_PARTITIONED=1``: ``croupier.feed.in``, a queue per partition, the
unrouted queue; docs/scale.md), for the ledger's partition count (read from the ledger
unless ``--partitions`` says it).

Without ``--apply`` it prints the topology as the ``exchanges``, ``queues`` and ``bindings``
of a RabbitMQ definitions file on ``--vhost`` (``rabbitmqctl import_definitions FILE``),
exactly as the service declares them; it connects to nothing but the ledger (routed,
without ``--partitions``).

With ``--apply`` it switches the vhost of ``--amqp`` (default ``CROUPIER_AMQP_URL``) to the
mode: it declares the mode's topology, which binds its entry to ``studio.feed``, and only
then removes the other mode's entry binding (``studio.feed`` to ``croupier.feed``, or to
``croupier.feed.in``), so every message published meanwhile reaches at least one of them;
then it lists the other mode's queues that still hold messages (ready ones: those in an
instance's hands are not counted). Instances of the other mode keep draining those queues;
start instances of the new mode once they are empty and the others stopped
(docs/operations.md, "Switching a vhost to the routed feed"). Idempotent; an instance of the
other mode that reconnects declares its binding again: apply again once they are stopped.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    bounded_int,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.config import settings
from croupier.errors import CommandError, ExitCode, reaching

MODES = ("single", "routed")


def register(subparsers: Any) -> None:
    """Add the ``topology`` sub-command."""
    parser = subparsers.add_parser("topology", description=__doc__)
    parser.add_argument("mode", choices=MODES, help="single: one feed queue; routed: partitions")
    parser.add_argument(
        "--partitions",
        type=bounded_int(1, 4096),
        metavar="P",
        help="the ledger's partition count (default: read from the ledger)",
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--vhost", default="/", help="the vhost the printed definitions name (default: /)"
    )
    parser.add_argument(
        "--apply", action="store_true", help="switch the broker's vhost to this mode"
    )
    parser.add_argument("--amqp", metavar="URL", help="the broker (default CROUPIER_AMQP_URL)")
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the definitions, or apply the mode and say what is left to drain."""
    from croupier.bus.topology import TOPOLOGY, rabbitmq_definitions, routed_topology

    count = 1
    if args.mode == "routed" or args.apply:  # applying single lists the routed queues
        count = args.partitions or asyncio.run(_count(ledger_of(args)))
    if not args.apply:
        topology = routed_topology(count) if args.mode == "routed" else TOPOLOGY
        print_json(rabbitmq_definitions(topology, args.vhost))
        return ExitCode.OK
    broker = args.amqp or settings().amqp_url
    with reaching(
        broker=broker, broker_setting="--amqp" if args.amqp else "CROUPIER_AMQP_URL or --amqp"
    ):
        document = asyncio.run(_apply(broker, args.mode, count))
    if args.json:
        print_json(document)
        return ExitCode.OK
    print(f"{document['mode']} feed declared ({document['partitions']} partitions)")
    for unbound in document["unbound"]:
        print(f"binding removed (where it was): {unbound}")
    draining = document["draining"]
    for name, depth in draining.items():
        print(f"draining {name}: {depth} messages ready")
    if not draining:
        print("nothing left to drain in the other mode's queues")
    return ExitCode.OK


async def _count(url: str) -> int:
    """The ledger's partition count."""
    from croupier.ledger import SchemaBehind

    async with ledger_at(url) as ledger:
        try:
            await ledger.check_schema()
        except SchemaBehind as error:
            raise CommandError(str(error)) from None
        return await ledger.partition_leases().count()


async def _apply(url: str, mode: str, count: int) -> dict[str, Any]:
    """Declare ``mode``'s topology, then unbind the other mode's entry from ``studio.feed``;
    what the other mode's queues still hold."""
    import aio_pika
    import aiormq

    from croupier.bus import FEED_EXCHANGE, FEED_QUEUE
    from croupier.bus.amqp import declare_topology, queue_depths
    from croupier.bus.topology import (
        ROUTED_EXCHANGE,
        TOPOLOGY,
        UNROUTED_QUEUE,
        partition_queue,
        routed_topology,
    )

    routed = routed_topology(count)
    if mode == "routed":
        entry, others = FEED_QUEUE, [FEED_QUEUE]
    else:
        entry = ROUTED_EXCHANGE
        others = [*(partition_queue(p, count) for p in range(count)), UNROUTED_QUEUE]
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        await declare_topology(channel, routed if mode == "routed" else TOPOLOGY)
        feed = await channel.get_exchange(FEED_EXCHANGE)
        try:  # the other mode's entry: a queue (single) or an exchange (routed) on the feed
            bound = await (
                channel.get_queue(entry) if mode == "routed" else channel.get_exchange(entry)
            )
        except aiormq.exceptions.ChannelNotFoundEntity:
            unbound: list[str] = []
        else:
            await bound.unbind(feed, "#")
            unbound = [f"{FEED_EXCHANGE} -> {entry} (#)"]
    finally:
        await connection.close()
    depths = await queue_depths(url, others)
    draining = {name: depth.ready for name, depth in depths.items() if depth and depth.ready}
    return {"mode": mode, "partitions": count, "unbound": unbound, "draining": draining}
