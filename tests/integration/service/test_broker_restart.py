"""RabbitMQ restarts under the running service: it reconnects by itself and loses nothing.

The restart is real (``rabbitmqctl stop_app`` / ``start_app``), which stops every vhost of
the broker for a few seconds; the test keeps it short and always starts the broker again.
A lighter variant only closes the service's connections to its own vhost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from urllib.parse import unquote, urlsplit

import pytest
from aio_pika.exceptions import AMQPError
from conftest import rabbitmqctl
from service_harness import (
    Wallet,
    assert_one_closure_per_round,
    eventually,
    expected_results,
    http_get,
    ledger_events,
    played_tables,
    prepare_broker,
    round_streams,
    serving,
    studio_feed,
)

from croupier.ledger import open_ledger
from croupier.service import Service
from studio.feed import FeedMessage
from studio.publisher import publish

pytestmark = pytest.mark.integration


@pytest.fixture
async def service(amqp_vhost: str, postgres_database: str) -> AsyncIterator[Service]:
    """The service on the test's vhost and database, its probes on a free port."""
    await prepare_broker(amqp_vhost)
    async with open_ledger(postgres_database) as ledger, serving(ledger, amqp_vhost) as running:
        yield running


async def readyz(service: Service) -> tuple[int, str]:
    assert service.http_port
    return await http_get(service.http_port, "/readyz")


async def publish_when_up(messages: Sequence[FeedMessage], url: str, timeout: float = 60) -> None:
    """Publish, retrying while the broker is still coming back."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            assert await publish(messages, url) == len(messages)
            return
        except (OSError, AMQPError, TimeoutError):
            assert time.monotonic() < deadline, "could not publish to the restarted broker"
            await asyncio.sleep(1)


async def restart_broker(while_down: Callable[[], Awaitable[None]]) -> None:
    """Stop the broker's application and start it again, whatever happens in between."""
    try:
        await asyncio.to_thread(rabbitmqctl, "stop_app", timeout=120)
        await while_down()
    finally:
        await asyncio.to_thread(rabbitmqctl, "start_app", timeout=120)
        await asyncio.to_thread(rabbitmqctl, "await_startup", timeout=120)


async def _play_through(
    service: Service, amqp_vhost: str, postgres_database: str, interruption: str, prefix: str
) -> None:
    messages = studio_feed(prefix, 60, seed=31)
    half = len(messages) // 2
    wallet = Wallet(amqp_vhost)

    await publish_when_up(messages[:half], amqp_vhost)
    await wallet.wait_for(expected_results(played_tables(messages[:half])), timeout=60)

    async def ready() -> bool:
        return (await readyz(service))[0] == 200

    async def not_ready() -> bool:
        status, text = await readyz(service)
        return status == 503 and "broker: NOT READY" in text

    if interruption == "restart":
        await restart_broker(lambda: eventually(not_ready, 30, "/readyz says the broker is down"))
    else:
        vhost = unquote(urlsplit(amqp_vhost).path[1:])
        await asyncio.to_thread(rabbitmqctl, "close_all_connections", "-p", vhost, "test")

    await eventually(ready, 90, "the service is ready again after the broker came back")
    await publish_when_up(messages[half:], amqp_vhost)

    tables = played_tables(messages)
    await wallet.wait_for(expected_results(tables), timeout=90)
    assert_one_closure_per_round(await ledger_events(postgres_database), round_streams(tables))


async def test_the_service_recovers_by_itself_from_a_broker_restart(
    service: Service, amqp_vhost: str, postgres_database: str
) -> None:
    await _play_through(service, amqp_vhost, postgres_database, "restart", "restart")


async def test_the_service_recovers_when_the_broker_drops_its_connection(
    service: Service, amqp_vhost: str, postgres_database: str
) -> None:
    await _play_through(service, amqp_vhost, postgres_database, "close", "dropped")
