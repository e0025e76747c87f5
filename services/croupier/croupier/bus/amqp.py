"""The RabbitMQ bus (aio-pika, robust connection): the live service's feed and results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import aio_pika
import aiormq
import structlog
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractRobustConnection,
)

from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_EXCHANGE,
    DEAD_LETTER_QUEUE,
    DELIVERY_LIMIT,
    FEED_EXCHANGE,
    FEED_QUEUE,
    REASON_HEADER,
    SETTLEMENTS_EXCHANGE,
    Bus,
    BusError,
    DeadLetter,
    Delivery,
    Outgoing,
    Unroutable,
    take_batch,
)

log = structlog.get_logger("croupier.bus")
_PERSISTENT = aio_pika.DeliveryMode.PERSISTENT


class AmqpBus(Bus):
    """Consumes ``croupier.feed`` and publishes to ``croupier.settlements``, with confirms.

    One robust connection with two channels: the consuming channel (prefetch, manual acks)
    and a publishing channel (publisher confirms, mandatory routing). After a reconnect the
    deliveries still in hand from the closed channel can no longer be acknowledged: they are
    dropped when taken, and the broker delivers them again (the ledger makes the second
    settlement of a message a no-op). The restored consumer keeps delivering to the same
    inbox, so deliveries it made before the reconnect callback ran are kept.
    """

    def __init__(self, url: str, *, prefetch: int = 2000) -> None:
        self.url = url
        self.prefetch = prefetch
        self._connection: AbstractRobustConnection | None = None
        self._consume_channel: AbstractChannel | None = None
        self._publish_channel: AbstractChannel | None = None
        self._settlements: AbstractExchange | None = None
        self._dead_letters: AbstractExchange | None = None
        self._inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self._consumer_tag: str | None = None
        self._queue: Any = None

    async def connect(self) -> None:
        try:
            self._connection = await aio_pika.connect_robust(self.url)
        except (OSError, aiormq.exceptions.AMQPError) as error:
            raise BusError(f"cannot reach RabbitMQ at {self.url}: {error}") from error
        self._connection.reconnect_callbacks.add(self._on_reconnect)
        self._consume_channel = await self._connection.channel()
        await self._consume_channel.set_qos(prefetch_count=self.prefetch)
        self._publish_channel = await self._connection.channel(
            publisher_confirms=True, on_return_raises=True
        )
        await declare_topology(self._consume_channel)
        self._settlements = await self._publish_channel.get_exchange(SETTLEMENTS_EXCHANGE)
        self._dead_letters = await self._publish_channel.get_exchange(DEAD_LETTER_EXCHANGE)
        self._queue = await self._consume_channel.get_queue(FEED_QUEUE)
        self._consumer_tag = await self._queue.consume(self._receive, no_ack=False)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.connected.is_set()

    @property
    def attached(self) -> bool:
        return self.connected and self._consumer_tag is not None

    async def stop_consuming(self) -> None:
        if self._queue is not None and self._consumer_tag is not None:
            tag, self._consumer_tag = self._consumer_tag, None
            await self._queue.cancel(tag)

    async def _on_reconnect(self, *_: object) -> None:
        log.warning("broker reconnected; deliveries in hand will be redelivered")

    async def _receive(self, message: AbstractIncomingMessage) -> None:
        await self._inbox.put(message)

    # -- consuming -------------------------------------------------------------------------

    async def next_batch(self, max_messages: int, linger: float) -> list[Delivery]:
        while True:
            batch = await take_batch(self._inbox, max_messages, linger)
            live = [message for message in batch if _acknowledgeable(message)]
            if len(live) < len(batch):
                log.warning(
                    "dropped deliveries of a closed channel; the broker delivers them again",
                    dropped=len(batch) - len(live),
                )
            if live:
                return [_delivery(message) for message in live]

    async def finish_batch(self, batch: Sequence[Delivery], dead: Sequence[DeadLetter]) -> None:
        if not batch:
            return
        try:
            if dead:
                await self._dead_letter(dead)
            last = batch[-1].handle
            assert isinstance(last, aio_pika.IncomingMessage)
            await last.ack(multiple=True)
        except (aiormq.exceptions.AMQPError, aiormq.exceptions.ChannelInvalidStateError) as error:
            # The ledger has the batch; the broker will redeliver it and it will be a no-op.
            log.warning("batch not acknowledged; it will be redelivered", error=str(error))

    async def _dead_letter(self, dead: Sequence[DeadLetter]) -> None:
        assert self._dead_letters is not None
        await asyncio.gather(
            *(
                self._dead_letters.publish(
                    aio_pika.Message(
                        letter.delivery.body,
                        message_id=letter.delivery.message_id,
                        content_type="application/json",
                        delivery_mode=_PERSISTENT,
                        headers={
                            REASON_HEADER: letter.reason[:4000],
                            CODE_HEADER: letter.code,
                            "x-original-routing-key": letter.delivery.routing_key,
                        },
                    ),
                    routing_key=letter.delivery.routing_key or "unroutable",
                )
                for letter in dead
            )
        )

    # -- publishing ------------------------------------------------------------------------

    async def publish(self, messages: Sequence[Outgoing]) -> None:
        if self._settlements is None:
            raise BusError("not connected")
        outcomes = await asyncio.gather(
            *(self._publish_one(self._settlements, m) for m in messages), return_exceptions=True
        )
        unrouted = [
            m.message_id
            for m, outcome in zip(messages, outcomes, strict=True)
            if isinstance(outcome, aiormq.exceptions.DeliveryError)
        ]
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if unrouted:
            raise Unroutable(unrouted)
        if failures:
            raise BusError(f"{len(failures)} results not confirmed: {failures[0]!r}")

    @staticmethod
    async def _publish_one(exchange: AbstractExchange, message: Outgoing) -> None:
        await exchange.publish(
            aio_pika.Message(
                json.dumps(message.body, separators=(",", ":")).encode(),
                message_id=message.message_id,
                content_type="application/json",
                delivery_mode=_PERSISTENT,
            ),
            routing_key=message.routing_key,
            mandatory=True,
        )


async def declare_topology(channel: AbstractChannel) -> None:
    """Declare the exchanges and queues the service relies on (idempotent)."""
    feed = await channel.declare_exchange(FEED_EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True)
    dead = await channel.declare_exchange(
        DEAD_LETTER_EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True
    )
    await channel.declare_exchange(SETTLEMENTS_EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True)
    queue = await channel.declare_queue(
        FEED_QUEUE,
        durable=True,
        arguments={
            "x-queue-type": "quorum",
            "x-single-active-consumer": True,
            "x-delivery-limit": DELIVERY_LIMIT,
            "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
        },
    )
    await queue.bind(feed, routing_key="#")
    parked = await channel.declare_queue(
        DEAD_LETTER_QUEUE, durable=True, arguments={"x-queue-type": "quorum"}
    )
    await parked.bind(dead, routing_key="#")


def _acknowledgeable(message: AbstractIncomingMessage) -> bool:
    """Whether the channel the message came on is still open (else it cannot be acked)."""
    try:
        return not message.channel.is_closed
    except aiormq.exceptions.ChannelInvalidStateError:
        return False


def _delivery(message: AbstractIncomingMessage) -> Delivery:
    return Delivery(
        body=message.body,
        tag=message.delivery_tag or 0,
        routing_key=message.routing_key or "",
        message_id=message.message_id,
        redelivered=bool(message.redelivered),
        handle=message,
    )
