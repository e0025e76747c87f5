"""The routed topology on a real RabbitMQ, from the operator's side: the broker definitions
deploy/rabbitmq/definitions.json seeds are accepted by a partitioned instance as they are
and route a new table's events before any instance runs; ``croupier topology --apply``
switches a vhost between the single feed queue and the routed feed without dropping a
message, and back (docs/operations.md, "Switching a vhost to the routed feed"); ``croupier
partitions`` reads each partition's lag off the broker."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import aio_pika
import pytest
from conftest import rabbitmqctl

from croupier.bus import FEED_EXCHANGE, FEED_QUEUE
from croupier.bus.amqp import declare_topology, queue_depths
from croupier.bus.routed import RoutedAmqpBus
from croupier.bus.topology import (
    ROUTED_EXCHANGE,
    TOPOLOGY,
    UNROUTED_QUEUE,
    partition_queue,
    table_binding,
)
from croupier.ledger import open_ledger
from croupier.ledger.partitions import DEFAULT_PARTITIONS, partition_of
from floor.cli import main

pytestmark = pytest.mark.integration

DEFINITIONS = Path(__file__).resolve().parents[3] / "deploy" / "rabbitmq" / "definitions.json"


async def _publish(url: str, *keys: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        feed = await channel.get_exchange(FEED_EXCHANGE)
        for key in keys:
            await feed.publish(aio_pika.Message(b"{}", message_id=key), routing_key=key)
    finally:
        await connection.close()


async def _depths(url: str, *queues: str) -> dict[str, int | None]:
    """Messages ready in each of ``queues``; None for one that does not exist."""
    depths = await queue_depths(url, queues)
    return {name: depth.ready if depth else None for name, depth in depths.items()}


async def _eventually_depths(url: str, expected: dict[str, int | None]) -> None:
    async with asyncio.timeout(30):
        while (found := await _depths(url, *expected)) != expected:
            await asyncio.sleep(0.1)
    assert found == expected


async def test_the_seeded_definitions_are_the_routed_topology_the_service_declares(
    amqp_vhost: str,
) -> None:
    vhost = unquote(amqp_vhost.rsplit("/", 1)[1])
    seeded = json.loads(DEFINITIONS.read_text(encoding="utf-8"))
    # The broker's objects only (users and permissions are the broker's, not a test's).
    objects = {
        kind: [dict(entry, vhost=vhost) for entry in seeded[kind]]
        for kind in ("exchanges", "queues", "bindings")
    }
    # A file of its own in the system's temporary folder, readable by whichever user
    # rabbitmqctl runs as (a pytest tmp_path is private to this user; this rabbitmqctl
    # reads no "-").
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as file:
        json.dump(objects, file)
        file.flush()
        os.chmod(file.name, 0o644)
        await asyncio.to_thread(rabbitmqctl, "import_definitions", file.name)
    names = [queue["name"] for queue in seeded["queues"]]
    await _eventually_depths(amqp_vhost, dict.fromkeys(names, 0))  # the import is asynchronous

    # Before any instance runs, a new table's event waits in the unrouted queue.
    table = "t-seeded"
    await _publish(amqp_vhost, f"{table}.round.opened")
    await _eventually_depths(amqp_vhost, {UNROUTED_QUEUE: 1})

    # A partitioned instance declares its topology over the seeded one without a
    # difference (an exchange with other arguments would close its channel), routes the
    # table to its partition and consumes it there.
    bus = RoutedAmqpBus(amqp_vhost, DEFAULT_PARTITIONS)
    await bus.connect()
    try:
        await bus.assign([partition_of(table, DEFAULT_PARTITIONS)])
        async with asyncio.timeout(30):
            delivered = []
            while not delivered:
                delivered = await bus.next_batch(10, 0.05)
        assert [d.routing_key for d in delivered] == [f"{table}.round.opened"]
        await bus.finish_batch(delivered)
    finally:
        await bus.close()
    await _eventually_depths(amqp_vhost, {UNROUTED_QUEUE: 0})


async def _topology(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    return await _command(capsys, "topology", *args)


async def test_a_vhost_switches_to_the_routed_feed_and_back_without_dropping_a_message(
    amqp_vhost: str, capsys: pytest.CaptureFixture[str]
) -> None:
    count = "4"
    routed = ("routed", "--partitions", count, "--apply", "--amqp", amqp_vhost)
    single = ("single", "--partitions", count, "--apply", "--amqp", amqp_vhost)
    # The single-consumer mode as its instances declared it, one message waiting.
    connection = await aio_pika.connect(amqp_vhost)
    try:
        await declare_topology(await connection.channel(), TOPOLOGY)
    finally:
        await connection.close()
    await _publish(amqp_vhost, "t1.round.opened")
    await _eventually_depths(amqp_vhost, {FEED_QUEUE: 1})

    # To the routed feed: the routed entry bound first, the single queue's entry removed;
    # what the single queue holds is left for its instances to drain.
    switched = await _topology(capsys, *routed)
    assert switched == {
        "mode": "routed",
        "partitions": 4,
        "unbound": [f"{FEED_EXCHANGE} -> {FEED_QUEUE} (#)"],
        "draining": {FEED_QUEUE: 1},
    }
    await _publish(amqp_vhost, "t2.round.opened")
    await _eventually_depths(amqp_vhost, {FEED_QUEUE: 1, UNROUTED_QUEUE: 1})
    again = await _topology(capsys, *routed)  # idempotent
    assert again["draining"] == {FEED_QUEUE: 1}
    await _eventually_depths(amqp_vhost, {FEED_QUEUE: 1, UNROUTED_QUEUE: 1})

    # And back: the single queue bound again, the routed entry removed; what the routed
    # queues hold is left for the partitioned instances to drain.
    back = await _topology(capsys, *single)
    assert back["unbound"] == [f"{FEED_EXCHANGE} -> croupier.feed.in (#)"]
    assert back["draining"] == {UNROUTED_QUEUE: 1}
    await _publish(amqp_vhost, "t3.round.opened")
    await _eventually_depths(amqp_vhost, {FEED_QUEUE: 2, UNROUTED_QUEUE: 1})


async def test_croupier_partitions_shows_each_partition_s_lag_at_the_broker(
    amqp_vhost: str,
    postgres_database: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lag of a partition is what its queue holds ready; a table not bound yet counts as
    unrouted; with no broker named the lag is left out, and a vhost without partition
    queues says so."""
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate(partitions=4)
    ledger_args = ("partitions", "--ledger", postgres_database)
    bare = await _command(capsys, *ledger_args, "--amqp", amqp_vhost)
    assert bare["unrouted"] is None and {row["lag"] for row in bare["leases"]} == {None}

    await _topology(capsys, "routed", "--partitions", "4", "--apply", "--amqp", amqp_vhost)
    connection = await aio_pika.connect(amqp_vhost)
    try:  # two tables bound to their partitions, as the router binds them
        channel = await connection.channel()
        for table in ("t-a", "t-b"):
            queue = await channel.get_queue(partition_queue(partition_of(table, 4), 4))
            await queue.bind(ROUTED_EXCHANGE, table_binding(table))
    finally:
        await connection.close()
    await _publish(amqp_vhost, "t-a.round.opened", "t-a.bet.placed", "t-b.round.opened")
    await _publish(amqp_vhost, "t-new.round.opened")
    expected = Counter({partition_of("t-a", 4): 2})
    expected[partition_of("t-b", 4)] += 1
    async with asyncio.timeout(30):
        while True:
            document = await _command(capsys, *ledger_args, "--amqp", amqp_vhost)
            lags = {row["partition"]: row["lag"] for row in document["leases"]}
            if lags == {p: expected[p] for p in range(4)} and document["unrouted"] == 1:
                break
            await asyncio.sleep(0.1)
    assert {row["consumers"] for row in document["leases"]} == {0}

    code = await asyncio.to_thread(main, [*ledger_args, "--amqp", amqp_vhost])
    text = capsys.readouterr().out
    assert code == 0
    assert "lag: 3 messages ready in partition queues, 1 unrouted" in text
    assert "2 (0 consumers)" in text
    monkeypatch.delenv("CROUPIER_AMQP_URL", raising=False)
    code = await asyncio.to_thread(main, list(ledger_args))
    assert code == 0 and "lag: name the broker with --amqp" in capsys.readouterr().out


async def _command(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = await asyncio.to_thread(main, [*args, "--json"])
    assert code == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document
