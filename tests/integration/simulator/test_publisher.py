"""The studio publisher against the real RabbitMQ: what it sends is what a consumer reads."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import aio_pika
import pytest
from conftest import connect_rabbitmq

from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import FeedMessage, simulate
from studio.publisher import EXCHANGE, declare_feed_exchange, publish

pytestmark = pytest.mark.integration


def studio_config(prefix: str, rounds: int = 12, faults: Faults | None = None) -> StudioConfig:
    tables = parse_table_specs(
        ["classic", "progressive:boxes=4", "royal-20", "standard"], players=6, prefix=prefix
    )
    return StudioConfig(tables, rounds=rounds, seed=17, faults=faults or Faults())


@pytest.fixture
async def feed_queue(amqp_vhost: str) -> AsyncIterator[tuple[str, aio_pika.abc.AbstractQueue]]:
    """A unique table-id prefix and a private queue bound to its tables' routing keys."""
    prefix = f"it{uuid.uuid4().hex[:10]}"
    connection = await connect_rabbitmq(amqp_vhost)
    channel = await connection.channel()
    exchange = await declare_feed_exchange(channel)
    queue = await channel.declare_queue(exclusive=True, auto_delete=True)
    for table in studio_config(prefix).tables:
        await queue.bind(exchange, routing_key=f"{table.table_id}.#")
    try:
        yield prefix, queue
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await connection.close()


async def read_back(
    queue: aio_pika.abc.AbstractQueue, count: int
) -> list[aio_pika.abc.AbstractIncomingMessage]:
    received = []
    deadline = time.monotonic() + 30
    while len(received) < count and time.monotonic() < deadline:
        message = await queue.get(fail=False, no_ack=True)
        if message is None:
            await asyncio.sleep(0.05)
            continue
        received.append(message)
    return received


async def test_every_event_arrives_whole_persistent_and_in_order(
    amqp_vhost: str, feed_queue: tuple[str, aio_pika.abc.AbstractQueue]
) -> None:
    prefix, queue = feed_queue
    sent: list[FeedMessage] = list(simulate(studio_config(prefix)))
    assert await publish(sent, amqp_vhost, window=64) == len(sent)
    received = await read_back(queue, len(sent))
    assert len(received) == len(sent), f"{len(received)} of {len(sent)} messages came back"
    assert [m.body for m in received] == [m.body for m in sent]
    for got, message in zip(received, sent, strict=True):
        assert got.exchange == EXCHANGE
        assert got.routing_key == message.routing_key
        assert got.message_id == message.event_id
        assert got.content_type == "application/json"
        assert got.delivery_mode == aio_pika.DeliveryMode.PERSISTENT


async def test_torn_lines_and_redeliveries_go_out_as_the_studio_sent_them(
    amqp_vhost: str, feed_queue: tuple[str, aio_pika.abc.AbstractQueue]
) -> None:
    prefix, queue = feed_queue
    faults = Faults(malformed=0.5, redelivery=0.5)
    sent = list(simulate(studio_config(prefix, rounds=8, faults=faults)))
    assert {m.fault for m in sent} >= {"malformed", "redelivery"}
    await publish(sent, amqp_vhost)
    received = await read_back(queue, len(sent))
    assert [m.body for m in received] == [m.body for m in sent]
    for got, message in zip(received, sent, strict=True):
        assert got.message_id == message.event_id


async def test_rate_limit_paces_the_feed(
    amqp_vhost: str, feed_queue: tuple[str, aio_pika.abc.AbstractQueue]
) -> None:
    prefix, queue = feed_queue
    sent = list(simulate(studio_config(prefix, rounds=2)))[:60]
    started = time.monotonic()
    await publish(sent, amqp_vhost, rate=200)
    assert time.monotonic() - started >= (len(sent) - 1) / 200 * 0.9
    assert len(await read_back(queue, len(sent))) == len(sent)
