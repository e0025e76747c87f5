"""The routed feed on its own (``croupier.bus.routed``), on the real RabbitMQ: the router
binds a table seen for the first time to its partition's queue and nothing wider, each
partition is consumed on its own channel, and a partition dropped hands its unacknowledged
deliveries back to the queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aio_pika
import pytest
from conftest import rabbitmqctl

from croupier.bus import FEED_EXCHANGE, Delivery
from croupier.bus.routed import RoutedAmqpBus
from croupier.bus.topology import ROUTED_EXCHANGE, partition_queue
from croupier.ledger.partitions import partition_of

pytestmark = pytest.mark.integration

COUNT = 4


async def _publish(url: str, keys: list[str]) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        feed = await channel.get_exchange(FEED_EXCHANGE)
        for n, key in enumerate(keys):
            await feed.publish(aio_pika.Message(b"{}", message_id=f"m{n}"), routing_key=key)
    finally:
        await connection.close()


def _bindings(url: str) -> set[str]:
    vhost = url.rsplit("/", 1)[1]
    listing = rabbitmqctl("list_bindings", "-p", vhost, "source_name", "routing_key")
    return {
        line.split("\t")[1]
        for line in listing.splitlines()
        if line.startswith(f"{ROUTED_EXCHANGE}\t")
    }


async def _take(bus: RoutedAmqpBus, count: int) -> list[Delivery]:
    taken: list[Delivery] = []
    async with asyncio.timeout(30):
        while len(taken) < count:
            taken += await bus.next_batch(100, 0.05)
    return taken


@asynccontextmanager
async def _two_buses(url: str) -> AsyncIterator[tuple[RoutedAmqpBus, RoutedAmqpBus]]:
    """Two instances' routed feeds on ``url``: one to give partitions up, one to take them."""
    first, second = RoutedAmqpBus(url, COUNT), RoutedAmqpBus(url, COUNT)
    await first.connect()
    await second.connect()
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_new_tables_are_bound_to_their_partition_and_nothing_wider(
    amqp_vhost: str,
) -> None:
    bus = RoutedAmqpBus(amqp_vhost, COUNT)
    await bus.connect()
    try:
        tables = [f"table-{n}" for n in range(12)]
        # A first word that is no table id (a wildcard among them) is never bound: bound as
        # "#.#" it would take every table's events into one partition.
        hostile = ["#.round.opened", "*.bet.placed", "a b.x"]
        await _publish(amqp_vhost, [f"{t}.round.opened" for t in tables] + hostile)
        await bus.assign(range(COUNT))
        delivered = await _take(bus, len(tables) + len(hostile))
        assert _bindings(amqp_vhost) == {f"{t}.#" for t in tables}
        # Each table's message came from its partition's queue, on that partition's channel.
        channels = {p: bus._partitions[p][1] for p in range(COUNT)}
        for delivery in delivered:
            table = delivery.routing_key.split(".", 1)[0]
            if table in tables:
                assert delivery.handle is channels[partition_of(table, COUNT)]
        # The next events of a bound table go straight to its queue (no router on the way).
        await bus.finish_batch(delivered)
        await _publish(amqp_vhost, [f"{t}.bet.placed" for t in tables])
        again = await _take(bus, len(tables))
        assert sorted(d.routing_key for d in again) == sorted(f"{t}.bet.placed" for t in tables)
        await bus.finish_batch(again)
    finally:
        await bus.close()


@pytest.mark.parametrize("given_back", [False, True], ids=["dropped", "given-back-then-dropped"])
async def test_a_dropped_partition_hands_its_deliveries_back_unacknowledged(
    amqp_vhost: str, given_back: bool
) -> None:
    """Dropped (its lease lost, or a batch of it fenced), a partition hands what it holds
    back; so does one given back past the bound whose batch in hand is fenced before the
    next assign: its lease released, none of that batch may be acknowledged here."""
    async with _two_buses(amqp_vhost) as (first, second):
        table = "table-dropped"
        partition = partition_of(table, COUNT)
        await _publish(amqp_vhost, [f"{table}.round.opened", f"{table}.bet.placed"])
        await first.assign([partition])
        in_hand = await _take(first, 2)
        if given_back:
            await first.give_back([partition], within=0.1)  # past the bound: still in hand
        await first.drop([partition])
        assert first.live(in_hand) == [], "deliveries of a dropped partition are not acked here"
        await second.assign([partition])
        taken = await _take(second, 2)
        assert [d.routing_key for d in taken] == [d.routing_key for d in in_hand]
        assert all(d.redelivered for d in taken)
        await second.finish_batch(taken)
        assert second.live(taken) == taken


async def test_a_partition_given_back_waits_for_its_deliveries_in_hand_to_settle(
    amqp_vhost: str,
) -> None:
    """Given back, a partition takes no more deliveries; the call returns once those in
    hand are acknowledged (the batch committed), so none goes back to the broker: the next
    owner gets only what came after. Past the bound, what is still in hand goes back."""
    async with _two_buses(amqp_vhost) as (first, second):
        settled, late = "table-settled", "table-late"
        partitions = {partition_of(t, COUNT) for t in (settled, late)}
        assert len(partitions) == 2, "two tables of two partitions"
        p, q = partition_of(settled, COUNT), partition_of(late, COUNT)
        await _publish(amqp_vhost, [f"{t}.{e}" for t in (settled, late) for e in ("a", "b")])
        await first.assign([p, q])
        in_hand = await _take(first, 4)
        giving = asyncio.create_task(first.give_back([p], within=30))
        await asyncio.sleep(0.3)
        assert not giving.done(), "it waits while deliveries of the partition are in hand"
        await first.finish_each([d for d in in_hand if d.routing_key.startswith(settled)])
        await asyncio.wait_for(giving, 5)
        await _publish(amqp_vhost, [f"{settled}.c"])
        await first.give_back([q], within=0.3)  # its deliveries stay in hand: bounded
        await first.assign([])
        await second.assign([p, q])
        taken = await _take(second, 3)
        assert sorted(d.routing_key for d in taken) == [f"{late}.a", f"{late}.b", f"{settled}.c"]
        assert [d.redelivered for d in taken if d.routing_key.startswith(late)] == [True, True]
        await second.finish_batch(taken)


def test_partition_queues_are_named_for_the_count() -> None:
    assert partition_queue(7, 64) == "croupier.feed.p07"
    assert partition_queue(7, 1000) == "croupier.feed.p007"
