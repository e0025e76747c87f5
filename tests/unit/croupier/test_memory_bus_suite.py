"""The in-process bus passes the bus suite, as RabbitMQ does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from bus_suite import BusSuite, Take, Taken

from croupier.bus import Bus, Outgoing
from croupier.bus.memory import MemoryBus


def _taken(message: Outgoing) -> Taken:
    body = message.raw if message.raw is not None else json.dumps(message.body).encode()
    message_id = message.amqp_message_id or message.message_id
    return Taken(message_id, message.routing_key, body, dict(message.headers or {}))


async def _first(messages: list[Outgoing], count: int) -> list[Taken]:
    async with asyncio.timeout(10):
        while len(messages) < count:
            await asyncio.sleep(0.01)
    return [_taken(m) for m in messages[:count]]


class TestMemoryBus(BusSuite):
    @pytest.fixture
    async def bus(self) -> AsyncIterator[Bus]:
        bus = MemoryBus()
        await bus.connect()
        yield bus
        await bus.close()

    async def feed(self, bus: Bus, routing_key: str, body: bytes, message_id: str) -> None:
        assert isinstance(bus, MemoryBus)
        await bus.publish_feed(routing_key, body, message_id)

    async def wallet(self, bus: Bus, pattern: str) -> Take:
        assert isinstance(bus, MemoryBus)
        received: list[Outgoing] = []
        bus.subscribe(pattern, received.append)
        return lambda count: _first(received, count)

    async def parked(self, bus: Bus, count: int) -> list[Taken]:
        assert isinstance(bus, MemoryBus)
        return await _first(bus.dead_letters, count)
