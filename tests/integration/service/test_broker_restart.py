"""RabbitMQ restarts under the running service: it reconnects by itself and loses nothing.

The broker is a private node the test starts itself (``private_services``), never the
developer's: the restart is real (``rabbitmqctl stop`` of the node, then a new start of it
on the same ports and mnesia). A lighter variant only closes the service's connections.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest
from aio_pika.exceptions import AMQPError
from private_services import PrivateRabbitMQ
from service_harness import (
    TABLES,
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
from croupier.settlement.deadletters import DEAD_LETTERED
from croupier.settlement.round import REJECTED
from croupier.settlement.service import Service
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import FeedMessage, simulate
from studio.publisher import publish

pytestmark = [pytest.mark.integration, pytest.mark.long]


@pytest.fixture
async def service(
    private_rabbitmq: PrivateRabbitMQ, postgres_database: str
) -> AsyncIterator[Service]:
    """The service on the private broker and the test's database, probes on a free port."""
    await prepare_broker(private_rabbitmq.url)
    async with (
        open_ledger(postgres_database) as ledger,
        serving(ledger, private_rabbitmq.url) as running,
    ):
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


async def restart_broker(
    broker: PrivateRabbitMQ, while_down: Callable[[], Awaitable[None]]
) -> None:
    """Stop the node and start it again, whatever happens in between."""
    try:
        await asyncio.to_thread(broker.stop)
        await while_down()
    finally:
        await asyncio.to_thread(broker.start)


async def _play_through(
    service: Service,
    broker: PrivateRabbitMQ,
    postgres_database: str,
    interruption: str,
    prefix: str,
) -> None:
    amqp_vhost = broker.url
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
        await restart_broker(
            broker, lambda: eventually(not_ready, 30, "/readyz says the broker is down")
        )
    else:
        await asyncio.to_thread(broker.ctl, "close_all_connections", "-p", "/", "test")

    await eventually(ready, 90, "the service is ready again after the broker came back")
    await publish_when_up(messages[half:], amqp_vhost)

    tables = played_tables(messages)
    await wallet.wait_for(expected_results(tables), timeout=90)
    assert_one_closure_per_round(await ledger_events(postgres_database), round_streams(tables))


async def test_the_service_recovers_by_itself_from_a_broker_restart(
    service: Service, private_rabbitmq: PrivateRabbitMQ, postgres_database: str
) -> None:
    await _play_through(service, private_rabbitmq, postgres_database, "restart", "restart")


async def test_the_service_recovers_when_the_broker_drops_its_connection(
    service: Service, private_rabbitmq: PrivateRabbitMQ, postgres_database: str
) -> None:
    await _play_through(service, private_rabbitmq, postgres_database, "close", "dropped")


def _counted(service: Service, metric: str) -> float:
    """The sum over labels of one of the service's counters."""
    counter = getattr(service.metrics, metric)
    return sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total"))


async def test_rejections_counted_are_the_rejections_recorded_after_a_broker_restart(
    service: Service, private_rabbitmq: PrivateRabbitMQ, postgres_database: str
) -> None:
    """Torn lines, wrong calls and late bets; the broker restarts while they are consumed,
    and the studio sends the whole feed again after: every rejection the ledger records is
    counted once, none that it already held is counted again."""
    url = private_rabbitmq.url
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix="rejects"),
        rounds=30,
        seed=13,
        faults=Faults(malformed=0.3, wrong_call=0.2, late_bet=0.2, redelivery=0.2),
    )
    messages = list(simulate(config))
    wallet = Wallet(url)
    await publish_when_up(messages, url)

    async def not_ready() -> bool:
        status, text = await readyz(service)
        return status == 503 and "broker: NOT READY" in text

    async def ready() -> bool:
        return (await readyz(service))[0] == 200

    await restart_broker(private_rabbitmq, lambda: eventually(not_ready, 30, "broker down"))
    await eventually(ready, 90, "the service is ready again after the broker came back")
    await publish_when_up(messages, url)  # everything again, torn lines included
    await wallet.wait_for(expected_results(played_tables(messages)), timeout=120)

    async def all_consumed() -> bool:
        return _counted(service, "consumed") >= 2 * len(messages)

    await eventually(all_consumed, 60, "every message consumed twice")
    recorded = [
        e for e in await ledger_events(postgres_database) if e.type in (REJECTED, DEAD_LETTERED)
    ]
    assert len(recorded) > 10, "the feed has rejections to count"
    assert _counted(service, "rejected") == len(recorded)
