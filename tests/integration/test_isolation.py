"""The test harness touches only what it creates, and says exactly what is missing."""

from __future__ import annotations

import asyncio

import aio_pika
import pytest
from aio_pika.exceptions import AMQPError
from conftest import (
    POSTGRES_URL,
    connect_postgres,
    scratch_database,
    scratch_vhost,
    with_database,
)
from yarl import URL

pytestmark = pytest.mark.integration


async def test_a_missing_database_is_named_with_the_command_that_creates_it() -> None:
    url = with_database(POSTGRES_URL, "croupier_no_such_database")
    with pytest.raises(pytest.fail.Exception) as failed:
        await connect_postgres(url)
    message = str(failed.value)
    assert "answers but has no database 'croupier_no_such_database'" in message
    assert "createdb -h " in message and "unreachable" not in message


async def test_a_scratch_database_is_dropped_afterwards() -> None:
    async with scratch_database() as url:
        name = url.rsplit("/", 1)[1]
        connection = await connect_postgres(url)
        await connection.close()
    admin = await connect_postgres()
    try:
        assert not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
    finally:
        await admin.close()


async def test_what_a_test_publishes_goes_with_its_vhost() -> None:
    async with scratch_vhost() as url:
        name = url.rsplit("/", 1)[1]
        async with await aio_pika.connect(url) as connection:
            channel = await connection.channel()
            await channel.declare_queue("croupier.feed", durable=True)
            await channel.default_exchange.publish(
                aio_pika.Message(b"{}"), routing_key="croupier.feed"
            )
            await asyncio.sleep(0.2)
            held = await channel.declare_queue("croupier.feed", passive=True)
            assert held.declaration_result.message_count == 1
    # Made and closed here rather than by aio_pika.connect: a connection that failed and is
    # collected outside the event loop warns "coroutine 'Connection.close' was never awaited".
    refused = aio_pika.Connection(URL(url))
    try:
        with pytest.raises(AMQPError, match=r"Connection\.Close"):  # gone, and all it held
            await refused.connect(timeout=10)
    finally:
        await refused.close()
    assert name.startswith("croupier-test-")
