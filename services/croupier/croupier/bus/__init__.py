"""The bus port: where feed deliveries come from and where settlement results go.

Two adapters implement it: :mod:`croupier.bus.amqp` (RabbitMQ, the live default) and
:mod:`croupier.bus.memory` (in-process, the embedded default), so the demo and the tests run
the very consumer and relay code the service runs. Both pass one test suite
(``tests/bus_suite.py``): order, batching, routing, refusals and dead-letter headers.

Topology (``croupier.bus.topology``, declared by the service at start, mirrored in
contracts/asyncapi.yaml):
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

from contract.publishing import SHORTSTR_MAX

FEED_EXCHANGE: Final = "studio.feed"
#: A copy of every dead letter, for the recorder that keeps the broker's in the ledger.
DEAD_LETTER_RECORD_QUEUE: Final = "croupier.dead-letter.record"
FEED_QUEUE: Final = "croupier.feed"
DEAD_LETTER_EXCHANGE: Final = "croupier.dead-letter"
DEAD_LETTER_QUEUE: Final = "croupier.dead-letter"
SETTLEMENTS_EXCHANGE: Final = "croupier.settlements"
#: Deliveries of one message before the broker dead-letters it. Well above a crash loop's
#: usual length, since each crash returns every message in hand (see INITIAL_PREFETCH).
DELIVERY_LIMIT: Final = 20
#: Deliveries in hand until the service has shown it can append (the ledger's append lock
#: taken and released); then the full prefetch. A process that crashes before it can
#: append (bad configuration, the lock held elsewhere, a port in use) burns delivery
#: attempts of this many messages only.
INITIAL_PREFETCH: Final = 10
REASON_HEADER: Final = "x-croupier-reason"
CODE_HEADER: Final = "x-croupier-code"
ORIGINAL_ROUTING_KEY_HEADER: Final = "x-original-routing-key"


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


#: Why a message could not be published (the label of ``croupier_results_set_aside_total``).
UNROUTABLE: Final = "unroutable"
TOO_LONG: Final = "too_long"
NACKED: Final = "nacked"


@dataclass(frozen=True, slots=True)
class Refused:
    """A message the broker will not take as it is: publishing it again cannot help.

    ``kind``: ``unroutable`` (no queue is bound for its routing key), ``too_long`` (a
    routing key or header over AMQP's limits) or ``nacked`` (the broker refused it).
    """

    message_id: str
    kind: str
    reason: str


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
class Parked:
    """A copy of a message that reached the dead-letter exchange.

    ``reason`` is the broker's (``x-first-death-reason``: ``delivery_limit``, ``expired``,
    ...) when the broker dead-lettered it, None when Croupier did (it carries
    ``x-croupier-code``, and the ledger has it already).
    """

    body: bytes
    routing_key: str
    message_id: str | None
    reason: str | None
    queue: str
    count: int
    handle: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message to publish: a settlement result (``body``), or a dead letter (``raw``).

    Published persistent and ``mandatory``, with ``message_id`` as the AMQP message id
    (``amqp_message_id`` when that differs, as a dead letter keeps the original's).
    """

    message_id: str
    routing_key: str
    body: Mapping[str, Any]
    exchange: str = SETTLEMENTS_EXCHANGE
    raw: bytes | None = None
    headers: Mapping[str, str] | None = None
    amqp_message_id: str | None = None


def unframeable(message: Outgoing) -> str | None:
    """Why ``message`` cannot be framed at all (a short string over AMQP's limit), or None."""
    for name, value in (
        ("routing key", message.routing_key),
        ("message_id", message.amqp_message_id or message.message_id),
    ):
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > SHORTSTR_MAX:
            return f"{name} of {size} bytes; AMQP allows at most {SHORTSTR_MAX}: {value[:40]!r}..."
    return None


class FeedSource(ABC):
    """Where feed deliveries come from, in order, until acknowledged."""

    @abstractmethod
    async def next_batch(self, max_messages: int, linger: float) -> list[Delivery]:
        """Wait for at least one delivery, then take what arrives within ``linger`` seconds."""

    @abstractmethod
    async def finish_batch(self, batch: Sequence[Delivery]) -> None:
        """Acknowledge the whole batch; call only after the ledger commit that covers it.

        Rejected messages are not dead-lettered here: the commit wrote their dead letters
        to the outbox, and the relay publishes them like results.
        """

    async def widen(self) -> None:  # noqa: B027 (optional: most sources need nothing)
        """The service has shown it can append: take deliveries at the full prefetch (a
        source holds ``INITIAL_PREFETCH`` until then)."""

    async def next_parked(self, max_messages: int) -> list[Parked]:
        """Copies of dead letters to record, at least one (none ever, by default)."""
        await asyncio.Event().wait()
        return []

    async def finish_parked(self, batch: Sequence[Parked]) -> None:  # noqa: B027 (optional)
        """Acknowledge copies once the ledger has them."""

    @abstractmethod
    async def stop_consuming(self) -> None:
        """Take no new deliveries; the ones in hand can still be finished."""

    @property
    @abstractmethod
    def attached(self) -> bool:
        """Whether a consumer is attached and deliveries can flow."""


class SettlementSink(ABC):
    """Where settlement results and dead letters go: confirmed by the broker, or refused."""

    @abstractmethod
    async def publish(self, messages: Sequence[Outgoing]) -> list[Refused]:
        """Publish and wait for every confirm; the messages the broker refused, in order.

        Raises :class:`BusError` when the broker could not be asked (connection or channel
        down): then nothing is known about the page and all of it is to be sent again.
        """


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
