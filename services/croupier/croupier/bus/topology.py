"""The broker topology Croupier relies on, as data: exchanges, queues with their arguments,
and bindings.

The AMQP adapter declares exactly this (``croupier.bus.amqp.declare_topology``); the tests
hold contracts/asyncapi.yaml and deploy/rabbitmq/definitions.json to it. Change it here.
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
class Topology:
    """Exchanges, queues and bindings, in the order they are declared."""

    exchanges: tuple[Exchange, ...]
    queues: tuple[Queue, ...]
    bindings: tuple[Binding, ...]

    def queue(self, name: str) -> Queue:
        """The queue named ``name``."""
        return next(q for q in self.queues if q.name == name)

    def bound_to(self, queue: str) -> list[Binding]:
        """The bindings of ``queue``."""
        return [b for b in self.bindings if b.queue == queue]


TOPOLOGY: Final = Topology(
    exchanges=(
        Exchange(FEED_EXCHANGE),
        Exchange(DEAD_LETTER_EXCHANGE),
        Exchange(SETTLEMENTS_EXCHANGE),
    ),
    queues=(
        # Single active consumer keeps each table's order; a message delivered
        # DELIVERY_LIMIT times is dead-lettered.
        Queue(
            FEED_QUEUE,
            {
                "x-queue-type": "quorum",
                "x-single-active-consumer": True,
                "x-delivery-limit": DELIVERY_LIMIT,
                "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
            },
        ),
        # Every dead letter twice: parked for operators and `croupier redrive`, and a copy
        # the service consumes to record what the broker itself dead-lettered in the ledger.
        Queue(DEAD_LETTER_QUEUE, {"x-queue-type": "quorum"}),
        Queue(
            DEAD_LETTER_RECORD_QUEUE,
            {"x-queue-type": "quorum", "x-single-active-consumer": True},
        ),
    ),
    bindings=(
        Binding(FEED_EXCHANGE, FEED_QUEUE),
        Binding(DEAD_LETTER_EXCHANGE, DEAD_LETTER_QUEUE),
        Binding(DEAD_LETTER_EXCHANGE, DEAD_LETTER_RECORD_QUEUE),
    ),
)
