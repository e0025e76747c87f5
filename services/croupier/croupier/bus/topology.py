"""The broker topology Croupier relies on, as data: exchanges, queues with their arguments,
and bindings.

The AMQP adapter declares exactly this (``croupier.bus.amqp.declare_topology``); the tests
hold contracts/asyncapi.yaml and deploy/rabbitmq/definitions.json to it. Change it here.

``TOPOLOGY`` is the single-instance default: one feed queue. :func:`routed_topology` is the
feed routed by partition (``CROUPIER_PARTITIONED=1``, docs/scale.md): ``studio.feed`` is bound
whole to ``croupier.feed.in``, where one binding per known table (``<table_id>.#``, made by
the router, ``croupier.bus.routed``) leads to its partition's queue ``croupier.feed.pNN``; a
table not bound yet falls through the alternate exchange into ``croupier.feed.unrouted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from croupier.bus import (
    DEAD_LETTER_EXCHANGE,
    DEAD_LETTER_QUEUE,
    DEAD_LETTER_RECORD_QUEUE,
    DELIVERY_LIMIT,
    FEED_EXCHANGE,
    FEED_QUEUE,
    SETTLEMENTS_EXCHANGE,
)


@dataclass(frozen=True, slots=True)
class Exchange:
    """A durable exchange."""

    name: str
    type: str = "topic"
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Queue:
    """A durable queue and the arguments it is declared with."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Binding:
    """``queue`` receives what ``exchange`` routes with ``routing_key``."""

    exchange: str
    queue: str
    routing_key: str = "#"


@dataclass(frozen=True, slots=True)
class ExchangeBinding:
    """Exchange ``destination`` receives what ``source`` routes with ``routing_key``."""

    source: str
    destination: str
    routing_key: str = "#"


@dataclass(frozen=True, slots=True)
class Topology:
    """Exchanges, queues and bindings, in the order they are declared (exchange to exchange
    bindings after the exchanges, before the queues)."""

    exchanges: tuple[Exchange, ...]
    queues: tuple[Queue, ...]
    bindings: tuple[Binding, ...]
    exchange_bindings: tuple[ExchangeBinding, ...] = ()

    def queue(self, name: str) -> Queue:
        """The queue named ``name``."""
        return next(q for q in self.queues if q.name == name)

    def bound_to(self, queue: str) -> list[Binding]:
        """The bindings of ``queue``."""
        return [b for b in self.bindings if b.queue == queue]


#: Arguments of a feed queue: single active consumer keeps each table's order; a message
#: delivered DELIVERY_LIMIT times is dead-lettered.
FEED_QUEUE_ARGUMENTS: Final[Mapping[str, Any]] = {
    "x-queue-type": "quorum",
    "x-single-active-consumer": True,
    "x-delivery-limit": DELIVERY_LIMIT,
    "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
}

#: Where every feed message goes in the routed topology; tables are bound here.
ROUTED_EXCHANGE: Final = "croupier.feed.in"
#: The alternate exchange of ``croupier.feed.in``, and its queue: tables not bound yet.
UNROUTED_EXCHANGE: Final = "croupier.feed.unrouted"
UNROUTED_QUEUE: Final = "croupier.feed.unrouted"

#: Every dead letter twice, in either topology: parked for operators and `croupier redrive`,
#: and a copy the service consumes to record what the broker itself dead-lettered in the
#: ledger.
_DEAD_LETTER_QUEUES: Final = (
    Queue(DEAD_LETTER_QUEUE, {"x-queue-type": "quorum"}),
    Queue(DEAD_LETTER_RECORD_QUEUE, {"x-queue-type": "quorum", "x-single-active-consumer": True}),
)
_DEAD_LETTER_BINDINGS: Final = (
    Binding(DEAD_LETTER_EXCHANGE, DEAD_LETTER_QUEUE),
    Binding(DEAD_LETTER_EXCHANGE, DEAD_LETTER_RECORD_QUEUE),
)


def partition_queue(partition: int, count: int) -> str:
    """The feed queue of ``partition`` of ``count``: ``croupier.feed.p07`` (at least two
    digits, as many as the highest partition needs)."""
    width = max(2, len(str(count - 1)))
    return f"{FEED_QUEUE}.p{partition:0{width}d}"


def table_binding(table_id: str) -> str:
    """The binding key on ``croupier.feed.in`` that leads ``table_id``'s events to its
    partition (the studio's routing keys are ``<table_id>.<event_type>``)."""
    return f"{table_id}.#"


def routed_topology(count: int) -> Topology:
    """The feed routed by partition over ``count`` partitions; results and dead letters as in
    :data:`TOPOLOGY`. Per-table bindings are not part of it: the router makes them."""
    if count < 1:
        raise ValueError(f"a ledger has at least one partition, not {count}")
    return Topology(
        exchanges=(
            Exchange(FEED_EXCHANGE),
            Exchange(UNROUTED_EXCHANGE, "fanout"),
            Exchange(ROUTED_EXCHANGE, arguments={"alternate-exchange": UNROUTED_EXCHANGE}),
            Exchange(DEAD_LETTER_EXCHANGE),
            Exchange(SETTLEMENTS_EXCHANGE),
        ),
        exchange_bindings=(ExchangeBinding(FEED_EXCHANGE, ROUTED_EXCHANGE),),
        queues=(
            *(Queue(partition_queue(p, count), FEED_QUEUE_ARGUMENTS) for p in range(count)),
            # One router at a time; a message it cannot route comes back and is
            # dead-lettered after DELIVERY_LIMIT tries like a feed message.
            Queue(UNROUTED_QUEUE, FEED_QUEUE_ARGUMENTS),
            *_DEAD_LETTER_QUEUES,
        ),
        bindings=(Binding(UNROUTED_EXCHANGE, UNROUTED_QUEUE), *_DEAD_LETTER_BINDINGS),
    )


def rabbitmq_definitions(topology: Topology, vhost: str = "/") -> dict[str, list[dict[str, Any]]]:
    """``topology`` as the ``exchanges``, ``queues`` and ``bindings`` of a RabbitMQ definitions
    file on ``vhost`` (``rabbitmqctl import_definitions``, ``load_definitions``): exactly what
    :func:`croupier.bus.amqp.declare_topology` declares, so that a broker seeded with it
    accepts the service's own declarations (an exchange declared again with other arguments
    closes the channel). deploy/rabbitmq/definitions.json holds the routed topology."""
    return {
        "exchanges": [
            {
                "name": e.name,
                "vhost": vhost,
                "type": e.type,
                "durable": True,
                "auto_delete": False,
                "internal": False,
                "arguments": dict(e.arguments),
            }
            for e in topology.exchanges
        ],
        "queues": [
            {
                "name": q.name,
                "vhost": vhost,
                "durable": True,
                "auto_delete": False,
                "arguments": dict(q.arguments),
            }
            for q in topology.queues
        ],
        "bindings": [
            *(
                {
                    "source": link.source,
                    "vhost": vhost,
                    "destination": link.destination,
                    "destination_type": "exchange",
                    "routing_key": link.routing_key,
                    "arguments": {},
                }
                for link in topology.exchange_bindings
            ),
            *(
                {
                    "source": b.exchange,
                    "vhost": vhost,
                    "destination": b.queue,
                    "destination_type": "queue",
                    "routing_key": b.routing_key,
                    "arguments": {},
                }
                for b in topology.bindings
            ),
        ],
    }


TOPOLOGY: Final = Topology(
    exchanges=(
        Exchange(FEED_EXCHANGE),
        Exchange(DEAD_LETTER_EXCHANGE),
        Exchange(SETTLEMENTS_EXCHANGE),
    ),
    queues=(Queue(FEED_QUEUE, FEED_QUEUE_ARGUMENTS), *_DEAD_LETTER_QUEUES),
    bindings=(Binding(FEED_EXCHANGE, FEED_QUEUE), *_DEAD_LETTER_BINDINGS),
)
