"""Publish the studio feed to RabbitMQ, as docs/feed.md's transport section states it.

Topic exchange ``studio.feed`` (durable); routing key ``<table_id>.<event_type>``; persistent
messages, ``content_type`` application/json, ``message_id`` = ``event_id``. The channel uses
publisher confirms. Messages go out in order, each window of them in one socket write
(``contract.publishing``, the path croupier publishes on too); the next window is written
while the broker confirms the previous one, and no more than two windows are ever
unconfirmed. A nack raises.
The studio does not ask for returns: the croupier declares and binds its feed queue, and a
feed nobody has bound a queue for is not the studio's error to report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any, cast

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel

from contract.publishing import Publication, publish_confirmed
from studio.message import FeedMessage

EXCHANGE = "studio.feed"
DEFAULT_WINDOW = 256


class PublishFailed(Exception):
    """The broker did not confirm every message of a window."""


async def declare_feed_exchange(channel: Any) -> Any:
    """Declare (idempotently) the durable topic exchange ``studio.feed``."""
    return await channel.declare_exchange(EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True)


def publication(message: FeedMessage) -> Publication:
    """The AMQP message of one feed message: persistent JSON with ``message_id`` = event_id."""
    return Publication(EXCHANGE, message.routing_key, message.body, message.event_id)


async def publish(
    messages: Iterable[FeedMessage],
    url: str,
    *,
    window: int = DEFAULT_WINDOW,
    rate: float | None = None,
) -> int:
    """Publish ``messages`` in order to ``studio.feed`` at ``url``; return how many.

    Every message is confirmed by the broker before this returns (a nack raises).
    ``rate`` caps the pace in messages per second, for demos.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        await declare_feed_exchange(channel)
        return await publish_on(channel, messages, window=window, rate=rate)
    finally:
        await connection.close()


async def publish_on(
    channel: AbstractChannel,
    messages: Iterable[FeedMessage],
    *,
    window: int = DEFAULT_WINDOW,
    rate: float | None = None,
) -> int:
    """:func:`publish` on an open confirming channel where ``studio.feed`` is declared."""
    underlay = cast(aiormq.Channel, await channel.get_underlay_channel())
    windows = _Windows(underlay)
    batch: list[Publication] = []
    started, sent = time.monotonic(), 0
    try:
        for message in messages:
            if rate:
                ahead = started + sent / rate - time.monotonic()
                if ahead > 0:
                    await windows.send(batch)
                    batch = []
                    await windows.confirm()
                    await asyncio.sleep(ahead)
            batch.append(publication(message))
            sent += 1
            if len(batch) >= window:
                await windows.send(batch)
                batch = []
        await windows.send(batch)
        await windows.confirm()
    finally:
        windows.cancel()
    return sent


class _Windows:
    """At most two windows unconfirmed: sending one waits for the one before it."""

    def __init__(self, channel: aiormq.Channel) -> None:
        self.channel = channel
        self._previous: asyncio.Task[None] | None = None

    async def send(self, batch: list[Publication]) -> None:
        if not batch:
            return
        current = asyncio.create_task(self._confirmed(batch))
        previous, self._previous = self._previous, current
        if previous is not None:
            await previous

    async def confirm(self) -> None:
        previous, self._previous = self._previous, None
        if previous is not None:
            await previous

    def cancel(self) -> None:
        if self._previous is not None:
            self._previous.cancel()

    async def _confirmed(self, batch: list[Publication]) -> None:
        outcomes = await publish_confirmed(self.channel, batch, chunk=len(batch))
        failures = [o for o in outcomes if o is not None]
        if failures:
            raise PublishFailed(f"{len(failures)} of {len(batch)} not confirmed: {failures[0]!r}")
