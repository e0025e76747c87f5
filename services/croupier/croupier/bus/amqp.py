"""The RabbitMQ bus: aio-pika's robust connection, aiormq underneath on the hot paths.

aio-pika keeps the connection, the channels, their prefetch and the topology alive across
reconnects. Feed deliveries and published results go through the channels' aiormq layer:
frames are read and a plain delivery's decoded without aiormq's per-frame lock and pamqp's
generic decoder (``contract.frames``, installed when a bus is made), each delivery costs a
plain call from the channel's reader (:func:`consume_inline`) instead of aio-pika's
message object and a task, and a page of results goes out in one socket write
(see :func:`publish_confirmed`) instead of one write and one task per message. Nothing is
weakened on the way: every publish is confirmed by the broker, results are ``mandatory``
and a returned one is reported as :class:`~croupier.bus.Refused` (as is one nacked, too
long to frame, or over the broker's ``max_message_size``: ``MAX_MESSAGE_BYTES``), messages
are persistent with a stable ``message_id``. A feed delivery over the contract's maximum
is cut as it arrives (:func:`~croupier.bus.delivered`), so what waits in the inbox is
bounded by the prefetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast
from urllib.parse import parse_qs, urlsplit, urlunsplit

import aio_pika
import aiormq
import structlog
from aio_pika.abc import AbstractChannel, AbstractRobustChannel, AbstractRobustConnection
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec
from pamqp.common import FieldTable

from contract.consuming import consume_inline
from contract.frames import install as install_frame_reader
from contract.publishing import Publication, publish_confirmed
from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_RECORD_QUEUE,
    FEED_QUEUE,
    INITIAL_PREFETCH,
    MAX_MESSAGE_BYTES,
    NACKED,
    ORIGINAL_ROUTING_KEY_HEADER,
    TOO_LONG,
    UNROUTABLE,
    Bus,
    BusError,
    Delivery,
    Inbox,
    Outgoing,
    Parked,
    Refused,
    delivered,
    feed_inbox,
    keep,
    unframeable,
)
from croupier.bus.topology import TOPOLOGY, Queue, Topology
from croupier.urls import mask_url

log = structlog.get_logger("croupier.bus")
_encode = json.JSONEncoder(separators=(",", ":")).encode


#: The AMQP heartbeat timeout, in seconds. RabbitMQ's default (60 s) left a hung (SIGSTOP)
#: active consumer in place for three minutes; at 3 s the broker drops it after two missed
#: heartbeats and hands the queue to a standby well within 15 s, even on a loaded host.
#: ``?heartbeat=N`` in the URL overrides it.
HEARTBEAT_SECONDS: Final = 3


def with_heartbeat(url: str) -> str:
    """``url`` with ``heartbeat=`` :data:`HEARTBEAT_SECONDS` unless it names one itself."""
    parts = urlsplit(url)
    if "heartbeat" in parse_qs(parts.query):
        return url
    query = "&".join(q for q in (parts.query, f"heartbeat={HEARTBEAT_SECONDS}") if q)
    return urlunsplit(parts._replace(query=query))


class AmqpBus(Bus):
    """Consumes ``croupier.feed`` and publishes to ``croupier.settlements``, with confirms.

    One robust connection with two channels: the consuming channel (prefetch, manual acks)
    and a publishing channel (publisher confirms, mandatory routing). The consumer is
    subscribed on the consuming channel's aiormq channel and subscribed again each time aio-pika
    reopens it. After a reconnect the deliveries still in hand from the closed channel can no
    longer be acknowledged: they are dropped when taken, and the broker delivers them again
    (the ledger makes the second settlement of a message a no-op).
    """

    def __init__(
        self, url: str, *, prefetch: int = 2000, initial_prefetch: int = INITIAL_PREFETCH
    ) -> None:
        install_frame_reader()
        self.url = url
        self.prefetch = prefetch
        self.initial_prefetch = min(initial_prefetch, prefetch)
        self._widened = False
        self._parked: Inbox[Parked] = Inbox()
        self._connection: AbstractRobustConnection | None = None
        self._consume_channel: AbstractRobustChannel | None = None
        self._publish_channel: AbstractChannel | None = None
        self._inbox = feed_inbox()
        self._consuming = False
        self._consumer: tuple[aiormq.Channel, str] | None = None
        self._subscribing = asyncio.Lock()
        self._resubscribing: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        await self.connect_publisher()
        assert self._connection is not None
        consume_channel = await self._connection.channel()
        await consume_channel.set_qos(prefetch_count=self.initial_prefetch)
        await declare_topology(consume_channel)
        self._consume_channel = consume_channel
        record_channel = await self._connection.channel()
        await record_channel.set_qos(prefetch_count=100)
        record = await record_channel.get_queue(DEAD_LETTER_RECORD_QUEUE)
        await record.consume(self._receive_parked)  # a robust consumer: restored on reconnect
        self._consuming = True
        consume_channel.reopen_callbacks.add(self._on_reopen)
        await self._subscribe()

    async def connect_publisher(self) -> None:
        """Connect and open the publishing channel only (to publish, not consume)."""
        try:
            self._connection = await aio_pika.connect_robust(with_heartbeat(self.url))
        except (OSError, aiormq.exceptions.AMQPError) as error:
            raise BusError(f"cannot reach RabbitMQ at {mask_url(self.url)}: {error}") from error
        self._connection.reconnect_callbacks.add(self._on_reconnect)
        self._publish_channel = await self._connection.channel(
            publisher_confirms=True, on_return_raises=True
        )

    async def close(self) -> None:
        self._consuming = False
        if self._resubscribing is not None:
            self._resubscribing.cancel()
        if self._connection is not None:
            await self._connection.close()

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.connected.is_set()

    @property
    def attached(self) -> bool:
        return self.connected and self._consumer is not None and not self._consumer[0].is_closed

    async def widen(self) -> None:
        if self._widened or self._consume_channel is None:
            return
        self._widened = True  # aio-pika restores this prefetch when it reopens the channel
        await self._consume_channel.set_qos(prefetch_count=self.prefetch)
        await self._consume_anew()
        log.info("can append: full prefetch", prefetch=self.prefetch)

    async def _consume_anew(self) -> None:
        """Replace the feed consumer by one under the channel's prefetch as it is now: the
        broker applies a prefetch to consumers that start after it, not to one consuming.
        The new consumer starts before the old one is cancelled. The queue has a single
        active consumer: a standby stays behind the active one, and a lone instance stays
        active; only an active instance with others waiting would hand over, which is
        why this runs once, at start, before traffic (``CroupierService.start``).
        Deliveries in hand are acknowledged on the channel as before."""
        async with self._subscribing:
            if not self._consuming or self._consumer is None:
                return
            channel, old = self._consumer
            self._consumer = (channel, await consume_inline(channel, FEED_QUEUE, self._receive))
            await channel.basic_cancel(old)

    async def stop_consuming(self) -> None:
        self._consuming = False
        async with self._subscribing:
            if self._consumer is not None:
                channel, tag = self._consumer
                self._consumer = None
                if not channel.is_closed:
                    # a connection the broker just dropped delivers nothing more: there is
                    # nothing left to cancel, and the stop goes on to close what is left
                    with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                        await channel.basic_cancel(tag)

    async def _subscribe(self) -> None:
        """Consume the feed queue on the consuming channel as it is now."""
        assert self._consume_channel is not None
        async with self._subscribing:
            if not self._consuming:
                return
            channel = cast(aiormq.Channel, await self._consume_channel.get_underlay_channel())
            if self._consumer is not None and self._consumer[0] is channel:
                return
            self._consumer = (channel, await consume_inline(channel, FEED_QUEUE, self._receive))

    def _on_reopen(self, *_: object) -> None:
        """aio-pika reopened the consuming channel: consume again (in a task, with retries)."""
        if self._resubscribing is None or self._resubscribing.done():
            self._resubscribing = asyncio.create_task(self._resubscribe(), name="resubscribe")

    async def _resubscribe(self) -> None:
        delay = 0.1
        while self._consuming and not self.attached:
            try:
                await self._subscribe()
            except Exception as error:
                log.warning("cannot consume again yet", error=repr(error), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _receive(self, message: DeliveredMessage) -> None:
        self._inbox.put(_delivery(message))  # an over-size body is cut here, as it arrives

    async def _receive_parked(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        parked = as_parked(message)  # an over-size body is cut here, as it arrives
        if isinstance(message, aio_pika.IncomingMessage):
            message.body = b""  # kept to acknowledge it by; its bytes are in ``parked``
        self._parked.put(parked)

    async def next_parked(self, max_messages: int) -> list[Parked]:
        return await self._parked.take(max_messages, 0.05)

    async def finish_parked(self, batch: Sequence[Parked]) -> None:
        for parked in batch:
            message = parked.handle
            assert isinstance(message, aio_pika.abc.AbstractIncomingMessage)
            try:
                await message.ack()
            except (aiormq.exceptions.AMQPError, aio_pika.exceptions.MessageProcessError) as error:
                log.warning("dead-letter copy not acknowledged; it comes again", error=str(error))

    async def _on_reconnect(self, *_: object) -> None:
        log.warning("broker reconnected; deliveries in hand will be redelivered")

    # -- consuming -------------------------------------------------------------------------

    async def next_batch(self, max_messages: int, linger: float) -> list[Delivery]:
        while True:
            batch = await self._inbox.take(max_messages, linger)
            live = [d for d in batch if not cast(aiormq.Channel, d.handle).is_closed]
            if len(live) < len(batch):
                log.warning(
                    "dropped deliveries of a closed channel; the broker delivers them again",
                    dropped=len(batch) - len(live),
                )
            if live:
                return live

    async def finish_batch(self, batch: Sequence[Delivery]) -> None:
        if not batch:
            return
        try:
            channel = batch[-1].handle
            assert isinstance(channel, aiormq.Channel)
            await channel.basic_ack(batch[-1].tag, multiple=True)
        except (aiormq.exceptions.AMQPError, aiormq.exceptions.ChannelInvalidStateError) as error:
            # The ledger has the batch; the broker will redeliver it and it will be a no-op.
            log.warning("batch not acknowledged; it will be redelivered", error=str(error))

    async def finish_each(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            channel = delivery.handle
            assert isinstance(channel, aiormq.Channel)
            try:
                await channel.basic_ack(delivery.tag)
            except (
                aiormq.exceptions.AMQPError,
                aiormq.exceptions.ChannelInvalidStateError,
            ) as error:
                log.warning("delivery not acknowledged; it will be redelivered", error=str(error))

    # -- publishing ------------------------------------------------------------------------

    async def publish(self, messages: Sequence[Outgoing]) -> list[Refused]:
        refused: list[Refused] = []
        sendable: list[Outgoing] = []
        publications: list[Publication] = []
        for message in messages:
            publication = _publication(message)
            too_long = unframeable(message) or _over_maximum(publication)
            if too_long:
                refused.append(Refused(message.message_id, TOO_LONG, too_long))
            else:
                sendable.append(message)
                publications.append(publication)
        try:
            outcomes = await self._publish(publications)
        except (aiormq.exceptions.AMQPError, aiormq.exceptions.ChannelInvalidStateError) as error:
            raise BusError(f"not published: {error!r}") from error
        failures = []
        for message, outcome in zip(sendable, outcomes, strict=True):
            if isinstance(outcome, aiormq.exceptions.PublishError):
                reason = f"no queue is bound for routing key {message.routing_key!r}"
                refused.append(Refused(message.message_id, UNROUTABLE, reason))
            elif isinstance(outcome, aiormq.exceptions.DeliveryError):
                refused.append(Refused(message.message_id, NACKED, "the broker nacked it"))
            elif outcome is not None:
                failures.append(outcome)
        if failures:
            raise BusError(f"{len(failures)} messages not confirmed: {failures[0]!r}")
        return refused

    async def _publish(self, publications: Sequence[Publication]) -> list[BaseException | None]:
        if self._publish_channel is None:
            raise BusError("not connected")
        if not publications:
            return []
        channel = await self._publish_channel.get_underlay_channel()
        return await publish_confirmed(cast(aiormq.Channel, channel), publications)


async def declare_topology(channel: AbstractChannel, topology: Topology = TOPOLOGY) -> None:
    """Declare the exchanges, queues and bindings the service relies on (idempotent)."""
    exchanges = {
        e.name: await channel.declare_exchange(
            e.name, aio_pika.ExchangeType(e.type), durable=True, arguments=dict(e.arguments)
        )
        for e in topology.exchanges
    }
    for link in topology.exchange_bindings:
        await exchanges[link.destination].bind(exchanges[link.source], routing_key=link.routing_key)
    for queue in topology.queues:
        declared = await _declare_queue(channel, queue)
        for binding in topology.bound_to(queue.name):
            await declared.bind(exchanges[binding.exchange], routing_key=binding.routing_key)


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """What a queue holds: messages ready for delivery, and its consumers."""

    ready: int
    consumers: int


async def queue_depths(url: str, names: Sequence[str]) -> dict[str, QueueDepth | None]:
    """Each of the queues ``names`` at the broker at ``url`` (None: no such queue), read with
    passive declares, which change nothing."""
    connection = await aio_pika.connect(url, timeout=30)
    depths: dict[str, QueueDepth | None] = {}
    try:
        channel = await connection.channel()
        for name in names:
            try:
                queue = await channel.declare_queue(name, passive=True)
            except aiormq.exceptions.ChannelNotFoundEntity:  # the broker closed the channel
                depths[name] = None
                channel = await connection.channel()
                continue
            result = queue.declaration_result
            depths[name] = QueueDepth(result.message_count or 0, result.consumer_count or 0)
    finally:
        await connection.close()
    return depths


async def _declare_queue(channel: AbstractChannel, queue: Queue) -> aio_pika.abc.AbstractQueue:
    """A queue; one declared earlier with other arguments is used as it is.

    A quorum queue's arguments cannot change once declared (an older delivery limit, say):
    declaring it again with others fails, so it is then only looked up, with a warning
    saying how to change it (a policy, or a new queue).
    """
    arguments: FieldTable = dict(queue.arguments)
    try:
        return await channel.declare_queue(queue.name, durable=True, arguments=arguments)
    except aiormq.exceptions.ChannelPreconditionFailed as error:
        log.warning(
            "the queue exists with other arguments; using it as it is "
            "(set its delivery-limit with a policy to match)",
            queue=queue.name,
            wanted=arguments,
            error=str(error),
        )
        await channel.reopen()
        return await channel.declare_queue(queue.name, passive=True)


def _publication(message: Outgoing) -> Publication:
    """A result as compact JSON (plain frames); a dead letter as its raw bytes with headers."""
    if message.raw is None:
        body = message.encoded if message.encoded is not None else _encode(message.body).encode()
        return Publication(
            message.exchange, message.routing_key, body, message.message_id, mandatory=True
        )
    headers = dict(message.headers) if message.headers else None
    amqp_id = message.amqp_message_id if message.amqp_message_id is not None else ""
    return Publication(
        message.exchange, message.routing_key, message.raw, amqp_id, headers, mandatory=True
    )


def _over_maximum(publication: Publication) -> str | None:
    """Why the broker would refuse ``publication`` for its size (closing the channel), or
    None."""
    size = len(publication.body)
    if size <= MAX_MESSAGE_BYTES:
        return None
    return f"a body of {size:,} bytes; the broker takes at most {MAX_MESSAGE_BYTES:,}"


def as_parked(message: aio_pika.abc.AbstractIncomingMessage) -> Parked:
    """A dead-letter copy: the broker's reason, or None when Croupier dead-lettered it; a
    body over the contract's maximum kept as a feed delivery's is (:func:`keep`)."""
    headers = message.headers or {}
    deaths = headers.get("x-death")
    death = deaths[0] if isinstance(deaths, list) and deaths and isinstance(deaths[0], dict) else {}
    ours = CODE_HEADER in headers
    broker = headers.get("x-first-death-reason") or death.get("reason")
    reason = None if ours else str(broker or "unknown")
    keys = death.get("routing-keys")
    routing_key = str(
        headers.get(ORIGINAL_ROUTING_KEY_HEADER)
        or (keys[0] if isinstance(keys, list) and keys else "")
        or message.routing_key
        or ""
    )
    body, oversize = keep(message.body)
    return Parked(
        body=body,
        routing_key=routing_key,
        message_id=message.message_id,
        reason=reason,
        queue=str(headers.get("x-first-death-queue") or death.get("queue", "")),
        count=int(str(death.get("count", 1) or 1)),
        handle=message,
        oversize=oversize,
    )


def _delivery(message: DeliveredMessage) -> Delivery:
    delivery = message.delivery
    assert isinstance(delivery, spec.Basic.Deliver)
    return delivered(
        message.body,
        delivery.delivery_tag or 0,
        delivery.routing_key or "",
        message.header.properties.message_id,
        bool(delivery.redelivered),
        message.channel,
    )
