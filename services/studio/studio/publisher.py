"""Publish the studio feed to RabbitMQ, as feed.md's transport section states it.

Topic exchange ``studio.feed`` (durable); routing key ``<table_id>.<event_type>``; persistent
messages, ``content_type`` application/json, ``message_id`` = ``event_id``. The channel uses
publisher confirms; messages go out in windows whose confirms are awaited together, which
keeps the broker busy without letting an unconfirmed backlog grow without bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable
from typing import Any

import aio_pika

from studio.message import FeedMessage

EXCHANGE = "studio.feed"
CONTENT_TYPE = "application/json"
DEFAULT_WINDOW = 256


async def declare_feed_exchange(channel: Any) -> Any:
    """Declare (idempotently) the durable topic exchange ``studio.feed``."""
    return await channel.declare_exchange(EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True)


def amqp_message(message: FeedMessage) -> aio_pika.Message:
    """The AMQP message of one feed message: persistent JSON with ``message_id`` = event_id."""
    return aio_pika.Message(
        message.body,
        content_type=CONTENT_TYPE,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=message.event_id,
    )


async def publish(
    messages: Iterable[FeedMessage],
    url: str,
    *,
    window: int = DEFAULT_WINDOW,
    rate: float | None = None,
) -> int:
    """Publish ``messages`` in order to ``studio.feed`` at ``url``; return how many.

    Every message is confirmed by the broker before this returns (a nack or a returned
    message raises). ``rate`` caps the pace in messages per second, for demos.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await declare_feed_exchange(channel)
        return await _publish_all(exchange, messages, window, rate)
    finally:
        await connection.close()


async def _publish_all(
    exchange: Any, messages: Iterable[FeedMessage], window: int, rate: float | None
) -> int:
    pending: list[Awaitable[Any]] = []
    started, sent = time.monotonic(), 0
    for message in messages:
        if rate:
            ahead = started + sent / rate - time.monotonic()
            if ahead > 0:
                await _confirm(pending)
                await asyncio.sleep(ahead)
        pending.append(
            asyncio.ensure_future(exchange.publish(amqp_message(message), message.routing_key))
        )
        sent += 1
        if len(pending) >= window:
            await _confirm(pending)
    await _confirm(pending)
    return sent


async def _confirm(pending: list[Awaitable[Any]]) -> None:
    """Wait for every pending publish's confirm; empty the list."""
    if pending:
        await asyncio.gather(*pending)
        pending.clear()
