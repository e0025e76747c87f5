"""The RabbitMQ bus on its own: pages of results, returns matched to the right messages,
deliveries batched and acknowledged, a consumer that comes back with its channel, and
results too long to frame or over the broker's maximum size refused without closing it.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import aio_pika
import aiormq
import pytest
from service_harness import eventually

from contract.publishing import WRITE_CHUNK
from croupier.bus import (
    FEED_EXCHANGE,
    MAX_MESSAGE_BYTES,
    SETTLEMENTS_EXCHANGE,
    TOO_LONG,
    UNROUTABLE,
    Outgoing,
)
from croupier.bus.amqp import AmqpBus, declare_topology

pytestmark = pytest.mark.integration


def _outgoing(currency: str, n: int) -> Outgoing:
    body = {"message_id": str(uuid.uuid4()), "currency": currency, "n": n}
    return Outgoing(str(body["message_id"]), f"{currency}.player-{n}", body)


async def _bound_queue(url: str, pattern: str) -> tuple[aio_pika.abc.AbstractConnection, str]:
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    await declare_topology(channel)
    queue = await channel.declare_queue(f"test.{uuid.uuid4().hex[:8]}", durable=True)
    await queue.bind(SETTLEMENTS_EXCHANGE, pattern)
    return connection, queue.name


async def _take(url: str, queue_name: str, count: int) -> list[aio_pika.abc.AbstractMessage]:
    connection = await aio_pika.connect(url)
    taken: list[aio_pika.abc.AbstractMessage] = []
    try:
        queue = await (await connection.channel()).get_queue(queue_name)
        while len(taken) < count:
            message = await queue.get(no_ack=True, fail=False, timeout=10)
            if message is None:
                await asyncio.sleep(0.05)
                continue
            taken.append(message)
    finally:
        await connection.close()
    return taken


async def test_a_page_across_writes_reports_exactly_its_unroutable_results(
    amqp_vhost: str,
) -> None:
    connection, queue_name = await _bound_queue(amqp_vhost, "EUR.#")
    bus = AmqpBus(amqp_vhost)
    await bus.connect()
    try:
        # Longer than one write, routable and unroutable results interleaved.
        page = [_outgoing("USD" if n % 7 == 3 else "EUR", n) for n in range(WRITE_CHUNK * 2 + 9)]
        refused = await bus.publish(page)
        assert [r.message_id for r in refused] == [
            m.message_id for m in page if m.routing_key.startswith("USD.")
        ]
        assert {r.kind for r in refused} == {UNROUTABLE}
        routed = [m for m in page if m.routing_key.startswith("EUR.")]
        received = await _take(amqp_vhost, queue_name, len(routed))
        assert [m.message_id for m in received] == [m.message_id for m in routed]
        for message, sent in zip(received, routed, strict=True):
            assert json.loads(message.body) == sent.body
            assert message.content_type == "application/json"
            assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
        # Nothing of the page is left waiting on the channel.
        assert bus._publish_channel is not None
        channel = await bus._publish_channel.get_underlay_channel()
        assert isinstance(channel, aiormq.Channel)
        assert not channel.confirmations and not channel.message_id_delivery_tag
        await bus.publish(routed[:3])  # and the channel goes on
    finally:
        await bus.close()
        await connection.close()


async def test_deliveries_come_in_batches_and_a_batch_is_acknowledged_once(
    amqp_vhost: str,
) -> None:
    bus = AmqpBus(amqp_vhost, prefetch=50)
    await bus.connect()
    publisher = await aio_pika.connect(amqp_vhost)
    try:
        channel = await publisher.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(FEED_EXCHANGE)
        for n in range(120):
            await exchange.publish(
                aio_pika.Message(b"{}", message_id=f"m{n}"), routing_key=f"t.{n}"
            )
        taken: list[str | None] = []
        while len(taken) < 120:
            batch = await bus.next_batch(40, 0.05)
            assert 0 < len(batch) <= 40
            assert [d.tag for d in batch] == sorted(d.tag for d in batch)
            taken += [d.message_id for d in batch]
            await bus.finish_batch(batch)
        assert taken == [f"m{n}" for n in range(120)]  # prefetch 50 only lets it on if acked
    finally:
        await publisher.close()
        await bus.close()


async def test_the_consumer_comes_back_when_its_channel_is_reopened(amqp_vhost: str) -> None:
    bus = AmqpBus(amqp_vhost)
    await bus.connect()
    publisher = await aio_pika.connect(amqp_vhost)
    try:
        assert bus.attached and bus._consume_channel is not None
        robust = bus._consume_channel
        consuming = await robust.get_underlay_channel()
        # Acknowledging an unknown delivery tag makes the broker close the channel.
        await consuming.basic_ack(10_000)

        async def reattached() -> bool:
            return bus.attached and await robust.get_underlay_channel() is not consuming

        await eventually(reattached, 20, "the consumer is subscribed on the reopened channel")
        channel = await publisher.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(FEED_EXCHANGE)
        await exchange.publish(aio_pika.Message(b"{}", message_id="after"), routing_key="t.x")
        batch = await asyncio.wait_for(bus.next_batch(10, 0.01), 10)
        assert [d.message_id for d in batch] == ["after"]
        await bus.finish_batch(batch)
    finally:
        await publisher.close()
        await bus.close()


async def test_a_result_too_long_to_frame_is_refused_and_the_rest_published(
    amqp_vhost: str,
) -> None:
    connection, queue_name = await _bound_queue(amqp_vhost, "#")
    bus = AmqpBus(amqp_vhost)
    await bus.connect()
    try:
        first = _outgoing("EUR", 1)
        page = [first, Outgoing("id-long", "EUR." + "p" * 300, {"n": 0})]
        (refused,) = await bus.publish(page)
        assert (refused.message_id, refused.kind) == ("id-long", TOO_LONG)
        assert "255" in refused.reason
        good = [_outgoing("EUR", n) for n in range(5)]
        assert await asyncio.wait_for(bus.publish(good), 10) == []  # confirms match their tags
        received = await _take(amqp_vhost, queue_name, 1 + len(good))
        assert [m.message_id for m in received] == [m.message_id for m in [first, *good]]
    finally:
        await bus.close()
        await connection.close()


async def test_a_result_over_the_brokers_maximum_is_refused_and_the_rest_published(
    amqp_vhost: str,
) -> None:
    connection, queue_name = await _bound_queue(amqp_vhost, "#")
    bus = AmqpBus(amqp_vhost)
    await bus.connect()
    try:
        before, after = _outgoing("EUR", 1), _outgoing("EUR", 2)
        huge = Outgoing("id-huge", "EUR.p1", {"bets": "b" * MAX_MESSAGE_BYTES})
        (refused,) = await bus.publish([before, huge, after])
        assert (refused.message_id, refused.kind) == ("id-huge", TOO_LONG)
        assert f"{MAX_MESSAGE_BYTES:,}" in refused.reason
        received = await _take(amqp_vhost, queue_name, 2)
        assert [m.message_id for m in received] == [before.message_id, after.message_id]
        assert bus.connected  # the publishing channel stays open
        assert await asyncio.wait_for(bus.publish([_outgoing("EUR", 3)]), 10) == []
    finally:
        await bus.close()
        await connection.close()
