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
import hashlib
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from contract.feed import MAX_BODY_BYTES
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
#: The largest message the broker takes (``max_message_size`` in deploy/rabbitmq/croupier.conf):
#: a result encoded larger is set aside (``too_long``) rather than published, since the
#: broker would close the publishing channel on it.
MAX_MESSAGE_BYTES: Final = 1024 * 1024
#: The bytes of a feed message kept past its arrival: the whole of one the contract allows
#: (at most ``MAX_BODY_BYTES``), the first ``KEPT_BYTES`` of a bigger one, named by its full
#: size and SHA-256 (:class:`Oversize`). So the deliveries in hand hold at most
#: prefetch x ``KEPT_BYTES``, whatever the broker lets through.
KEPT_BYTES: Final = MAX_BODY_BYTES
#: The feed bytes one batch (one ledger transaction) takes at most: 128 messages at the
#: contract's maximum; valid events (well under 2 KiB) still fill a batch of 1,000.
MAX_BATCH_BYTES: Final = 128 * KEPT_BYTES
REASON_HEADER: Final = "x-croupier-reason"
CODE_HEADER: Final = "x-croupier-code"
ORIGINAL_ROUTING_KEY_HEADER: Final = "x-original-routing-key"
#: On the dead letter of an over-size message (which carries its first ``KEPT_BYTES``):
#: the original's size in bytes and its SHA-256 in hex.
SIZE_HEADER: Final = "x-original-size"
SHA256_HEADER: Final = "x-original-sha256"


T = TypeVar("T")


def routed_table(routing_key: str) -> str:
    """The table a feed routing key (``<table_id>.<event_type>``) names: its first word."""
    return routing_key.split(".", 1)[0]


class Inbox(Generic[T]):
    """Deliveries as they arrive, taken in batches.

    ``take`` waits for one, then for up to ``linger`` seconds more until the batch is full:
    ``max_items``, or (given ``weigh``) ``max_weight`` in all. The taker is woken once per
    batch, not once per delivery.
    """

    def __init__(self, weigh: Callable[[T], int] | None = None, max_weight: int = 0) -> None:
        self._items: deque[T] = deque()
        self._ready = asyncio.Event()
        self._wanted = 1
        self._weigh = weigh
        self._max_weight = max_weight
        self._weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        """Hand over one delivery (a broker callback, or the in-process studio)."""
        self._items.append(item)
        if self._weigh is not None:
            self._weight += self._weigh(item)
        if len(self._items) >= self._wanted or self._full():
            self._ready.set()

    def _full(self) -> bool:
        return self._weigh is not None and self._weight >= self._max_weight

    async def take(self, max_items: int, linger: float) -> list[T]:
        """Wait for one delivery, then take what arrives within ``linger`` s, up to a cap."""
        while not self._items:
            self._wanted = 1
            self._ready.clear()
            await self._ready.wait()
        if len(self._items) < max_items and not self._full() and linger > 0:
            self._wanted = max_items
            self._ready.clear()
            try:
                async with asyncio.timeout(linger):
                    await self._ready.wait()
            except TimeoutError:
                pass
        items = self._items
        if self._weigh is None:
            return [items.popleft() for _ in range(min(max_items, len(items)))]
        taken = [items.popleft()]
        weight = self._weigh(taken[0])
        while items and len(taken) < max_items:
            more = self._weigh(items[0])
            if weight + more > self._max_weight:
                break
            taken.append(items.popleft())
            weight += more
        self._weight -= weight
        return taken


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
    routing key or header over AMQP's limits, or a body over ``MAX_MESSAGE_BYTES``) or
    ``nacked`` (the broker refused it).
    """

    message_id: str
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class Oversize:
    """A message over ``MAX_BODY_BYTES``: its full size and SHA-256 (hex), of which only
    the first ``KEPT_BYTES`` were kept."""

    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """One feed message as delivered; ``tag`` orders deliveries and acknowledges them.

    ``oversize`` is set when the message was over ``MAX_BODY_BYTES``: ``body`` is then its
    first ``KEPT_BYTES`` only, never to be parsed (see :func:`delivered`).
    """

    body: bytes
    tag: int
    routing_key: str
    message_id: str | None = None
    redelivered: bool = False
    handle: object = field(default=None, compare=False, repr=False)
    oversize: Oversize | None = None


def feed_inbox() -> Inbox[Delivery]:
    """Where a bus keeps feed deliveries until taken: batches of at most ``MAX_BATCH_BYTES``."""
    return Inbox(lambda delivery: len(delivery.body), MAX_BATCH_BYTES)


def delivered(
    body: bytes,
    tag: int,
    routing_key: str,
    message_id: str | None = None,
    redelivered: bool = False,
    handle: object = None,
) -> Delivery:
    """A feed delivery as kept from the moment it arrives, before anything reads it.

    The size is checked on the raw bytes first: a body over ``MAX_BODY_BYTES`` is kept as
    its first ``KEPT_BYTES`` with its :class:`Oversize` (the rest is dropped here), so no
    code downstream decodes it or holds more of it.
    """
    kept, oversize = keep(body)
    return Delivery(kept, tag, routing_key, message_id, redelivered, handle, oversize)


def keep(body: bytes) -> tuple[bytes, Oversize | None]:
    """What is kept of a feed message: all of it when it is at most ``MAX_BODY_BYTES``
    (checked on the raw bytes, before any decode), else its first ``KEPT_BYTES`` and its
    :class:`Oversize`."""
    if len(body) <= MAX_BODY_BYTES:
        return body, None
    return body[:KEPT_BYTES], Oversize(len(body), hashlib.sha256(body).hexdigest())


@dataclass(frozen=True, slots=True)
class Parked:
    """A copy of a message that reached the dead-letter exchange.

    ``reason`` is the broker's (``x-first-death-reason``: ``delivery_limit``, ``expired``,
    ...) when the broker dead-lettered it, None when Croupier did (it carries
    ``x-croupier-code``, and the ledger has it already). With ``oversize`` the copy was over
    ``MAX_BODY_BYTES`` and ``body`` is its first ``KEPT_BYTES`` only (see :func:`keep`).
    """

    body: bytes
    routing_key: str
    message_id: str | None
    reason: str | None
    queue: str
    count: int
    handle: object = field(default=None, compare=False, repr=False)
    oversize: Oversize | None = None


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
    #: ``body`` as the broker carries it (compact JSON, keys in ``body``'s order, ASCII),
    #: when its writer has it already: the bus then does not encode ``body`` again.
    encoded: bytes | None = None


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

    @abstractmethod
    async def finish_each(self, deliveries: Sequence[Delivery]) -> None:
        """Acknowledge these deliveries one by one, whatever is still in hand before them
        (settled beside a batch taken earlier that is not committed yet); call only after
        the ledger commit that covers them. None of them may be acknowledged already.
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

    def live(self, batch: Sequence[Delivery]) -> list[Delivery]:
        """The deliveries of ``batch`` that can still be acknowledged here: all of them,
        unless the source hands partitions over (:meth:`drop`)."""
        return list(batch)

    async def drop(self, partitions: Collection[int]) -> None:  # noqa: B027 (optional)
        """Stop consuming ``partitions`` (fenced: another instance owns them) and hand their
        unacknowledged deliveries back to the broker. A source of one queue has none."""

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
