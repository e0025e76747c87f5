"""The bus port: where feed deliveries come from and where settlement results go.

Two adapters implement it: :mod:`croupier.bus.amqp` (RabbitMQ, the live default) and
:mod:`croupier.bus.memory` (in-process, the embedded default), so the demo and the tests run
the very consumer and relay code the service runs.

Topology (declared by the service at start, mirrored in contracts/asyncapi.yaml):
``studio.feed`` topic exchange -> ``croupier.feed`` durable quorum queue (single active
consumer keeps each table's order; a delivery limit; dead-lettering to the
``croupier.dead-letter`` exchange and its queue) and the ``croupier.settlements`` topic
exchange, routed by ``<currency>.<player_id>``.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

FEED_EXCHANGE: Final = "studio.feed"
FEED_QUEUE: Final = "croupier.feed"
DEAD_LETTER_EXCHANGE: Final = "croupier.dead-letter"
DEAD_LETTER_QUEUE: Final = "croupier.dead-letter"
SETTLEMENTS_EXCHANGE: Final = "croupier.settlements"
DELIVERY_LIMIT: Final = 5
REASON_HEADER: Final = "x-croupier-reason"
CODE_HEADER: Final = "x-croupier-code"


T = TypeVar("T")


class Inbox(Generic[T]):
    """Deliveries as they arrive, taken in batches.

    ``take`` waits for one, then for up to ``linger`` seconds more until the batch is full.
    The taker is woken once per batch, not once per delivery.
    """

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._ready = asyncio.Event()
        self._wanted = 1

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        """Hand over one delivery (a broker callback, or the in-process studio)."""
        self._items.append(item)
        if len(self._items) >= self._wanted:
            self._ready.set()

    async def take(self, max_items: int, linger: float) -> list[T]:
        """Wait for one delivery, then take what arrives within ``linger`` s, up to a cap."""
        while not self._items:
            self._wanted = 1
            self._ready.clear()
            await self._ready.wait()
        if len(self._items) < max_items and linger > 0:
            self._wanted = max_items
            self._ready.clear()
            try:
                async with asyncio.timeout(linger):
                    await self._ready.wait()
            except TimeoutError:
                pass
        items = self._items
        return [items.popleft() for _ in range(min(max_items, len(items)))]


class BusError(Exception):
    """The bus could not do what was asked (connection lost, broker refused)."""


class Unroutable(BusError):
    """Messages the broker could not route to any queue: an error, never silence."""

    def __init__(self, message_ids: Sequence[str]) -> None:
        super().__init__(f"unroutable settlement results: {list(message_ids)}")
        self.message_ids = list(message_ids)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One feed message as delivered; ``tag`` orders deliveries and acknowledges them."""

    body: bytes
    tag: int
    routing_key: str
    message_id: str | None = None
    redelivered: bool = False
    handle: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A delivery to park in the dead-letter queue, with why."""

    delivery: Delivery
    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A settlement result to publish."""

    message_id: str
    routing_key: str
    body: Mapping[str, Any]


class FeedSource(ABC):
    """Where feed deliveries come from, in order, until acknowledged."""

    @abstractmethod
    async def next_batch(self, max_messages: int, linger: float) -> list[Delivery]:
        """Wait for at least one delivery, then take what arrives within ``linger`` seconds."""

    @abstractmethod
    async def finish_batch(self, batch: Sequence[Delivery], dead: Sequence[DeadLetter]) -> None:
        """Dead-letter ``dead`` (with their reasons), then acknowledge the whole batch.

        Call only after the ledger commit that covers the batch.
        """

    @abstractmethod
    async def stop_consuming(self) -> None:
        """Take no new deliveries; the ones in hand can still be finished."""

    @property
    @abstractmethod
    def attached(self) -> bool:
        """Whether a consumer is attached and deliveries can flow."""


class SettlementSink(ABC):
    """Where settlement results go: confirmed by the broker, routed or refused."""

    @abstractmethod
    async def publish(self, messages: Sequence[Outgoing]) -> None:
        """Publish and wait for every confirm; raise :class:`Unroutable` for unrouted ones."""


class Bus(FeedSource, SettlementSink):
    """Both sides of one broker connection."""

    @abstractmethod
    async def connect(self) -> None:
        """Connect and declare the topology."""

    @abstractmethod
    async def close(self) -> None:
        """Close the connection."""

    @property
    @abstractmethod
    def connected(self) -> bool:
        """Whether the broker connection is up."""
