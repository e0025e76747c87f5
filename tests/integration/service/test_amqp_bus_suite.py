"""The RabbitMQ bus passes the bus suite, on a vhost of its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import aio_pika
import pytest
from bus_suite import BusSuite, Take, Taken

from croupier.bus import DEAD_LETTER_QUEUE, FEED_EXCHANGE, SETTLEMENTS_EXCHANGE, Bus
from croupier.bus.amqp import AmqpBus

pytestmark = pytest.mark.integration


async def _get(url: str, queue_name: str, count: int) -> list[Taken]:
    connection = await aio_pika.connect(url)
    taken: list[Taken] = []
    try:
        queue = await (await connection.channel()).get_queue(queue_name)
        async with asyncio.timeout(20):
            while len(taken) < count:
                message = await queue.get(no_ack=True, fail=False)
                if message is None:
                    await asyncio.sleep(0.05)
                    continue
                headers = {k: str(v) for k, v in (message.headers or {}).items()}
                taken.append(
                    Taken(message.message_id, message.routing_key or "", message.body, headers)
                )
    finally:
        await connection.close()
    return taken


class TestAmqpBus(BusSuite):
    @pytest.fixture
    async def bus(self, amqp_vhost: str) -> AsyncIterator[Bus]:
        bus = AmqpBus(amqp_vhost, prefetch=100)
        await bus.connect()
        yield bus
        await bus.close()

    def _url(self, bus: Bus) -> str:
        assert isinstance(bus, AmqpBus)
        return bus.url

    async def feed(self, bus: Bus, routing_key: str, body: bytes, message_id: str) -> None:
        connection = await aio_pika.connect(self._url(bus))
        try:
            channel = await connection.channel(publisher_confirms=True)
            exchange = await channel.get_exchange(FEED_EXCHANGE)
            message = aio_pika.Message(body, message_id=message_id, content_type="application/json")
            await exchange.publish(message, routing_key=routing_key)
        finally:
            await connection.close()

    async def wallet(self, bus: Bus, pattern: str) -> Take:
        url = self._url(bus)
        connection = await aio_pika.connect(url)
        try:
            channel = await connection.channel()
            queue = await channel.declare_queue(f"wallet.{uuid.uuid4().hex[:8]}", durable=True)
            await queue.bind(SETTLEMENTS_EXCHANGE, pattern)
        finally:
            await connection.close()
        return lambda count: _get(url, queue.name, count)

    async def parked(self, bus: Bus, count: int) -> list[Taken]:
        return await _get(self._url(bus), DEAD_LETTER_QUEUE, count)
