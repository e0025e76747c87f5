"""``croupier serve`` as its own process: killed mid-stream, started again, stopped gracefully.

SIGKILL leaves whatever it leaves (a batch committed but not acknowledged, results committed
but not published); the next process must settle every round exactly once in the ledger and
publish every result at least once, so that wallets deduplicating by ``message_id`` end up
paying exactly what the ledger returned. SIGTERM finishes and acknowledges the batch in hand
and publishes the outbox: what is left in the feed queue is only work never committed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aio_pika
import asyncpg
import pytest
from aio_pika.abc import AbstractIncomingMessage
from conftest import rabbitmqctl
from service_harness import (
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    closed_rounds,
    closures,
    eventually,
    expected_results,
    ledger_events,
    ledger_returned,
    played_tables,
    prepare_broker,
    round_streams,
    serve_process,
    service_keys,
    studio_feed,
    wallet_paid,
)

from croupier.bus import DEAD_LETTER_EXCHANGE, DEAD_LETTER_QUEUE, FEED_QUEUE, INITIAL_PREFETCH
from croupier.ledger import open_ledger
from croupier.ledger.postgres import APPEND_LOCK
from croupier.ledger.signing import PUBLIC_KEY_FILE, LedgerPublicKey
from croupier.settlement.results import outbox_rule
from studio.publisher import publish

pytestmark = pytest.mark.integration


async def pending_results(database_url: str) -> int:
    async with open_ledger(database_url) as ledger:
        return len(await ledger.pending_outbox(100_000))


@pytest.mark.long
async def test_sigkill_mid_stream_then_restart_settles_every_round_once(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    messages = studio_feed("crash", 150, seed=23)
    tables = played_tables(messages)
    expected = expected_results(tables)
    await prepare_broker(amqp_vhost)
    assert await publish(messages, amqp_vhost) == len(messages)
    wallet = Wallet(amqp_vhost)
    log = tmp_path / "serve.log"

    with serve_process(postgres_database, amqp_vhost, log, max_batch=20) as first:
        await first.ready()
        await eventually(
            lambda: _at_least(postgres_database, 10), 90, "ten rounds settled", every=0.05
        )
        first.process.send_signal(signal.SIGKILL)
        assert await first.exit_code() == -signal.SIGKILL
    killed_at = await closed_rounds(postgres_database)
    assert 0 < killed_at < len(tables), "the kill should land mid-stream"

    with serve_process(postgres_database, amqp_vhost, log) as second:
        await second.ready()
        await wallet.wait_for(expected, timeout=120)
        await eventually(
            lambda: _settled_all(postgres_database, len(tables)), 60, "every round closed"
        )

        async def all_marked() -> bool:
            return await pending_results(postgres_database) == 0

        # What the killed process committed and published without marking it, the new one
        # publishes again once it holds the relay lease (the old holder's term ran out).
        await eventually(all_marked, 60, "every result marked published")
        second.process.send_signal(signal.SIGTERM)
        assert await second.exit_code() == 0, second.tail()
    await wallet.drain()

    events = await ledger_events(postgres_database)
    assert_one_closure_per_round(events, round_streams(tables))
    assert_postings_balance(events)
    unique = wallet.unique
    assert unique.keys() == expected.keys()
    assert {k: r.bets() for k, r in unique.items()} == expected
    # A result published twice is the same message both times: wallets may drop the second.
    for received in wallet.received:
        assert received.body == unique[received.message_id].body
    assert wallet_paid(wallet) == ledger_returned(events)
    assert await pending_results(postgres_database) == 0
    # What the two processes wrote verifies with the public key alone, outbox included.
    public = LedgerPublicKey.from_file(service_keys(log) / PUBLIC_KEY_FILE)
    async with open_ledger(postgres_database) as ledger:
        report = await ledger.verify(
            public_key=public, outbox_rule=outbox_rule, unruled=(DEAD_LETTER_EXCHANGE,)
        )
        assert report.ok, report.summary()


async def _at_least(database_url: str, rounds: int) -> bool:
    return await closed_rounds(database_url) >= rounds


async def _settled_all(database_url: str, rounds: int) -> bool:
    return await closed_rounds(database_url) == rounds


async def test_sigterm_stops_gracefully_and_acknowledges_what_it_committed(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    messages = studio_feed("term", 90, seed=29)
    tables = played_tables(messages)
    await prepare_broker(amqp_vhost)
    assert await publish(messages, amqp_vhost) == len(messages)
    wallet = Wallet(amqp_vhost)

    with serve_process(
        postgres_database, amqp_vhost, tmp_path / "serve.log", max_batch=20
    ) as served:
        await served.ready()
        await eventually(
            lambda: _at_least(postgres_database, 5), 90, "five rounds settled", every=0.05
        )
        served.process.send_signal(signal.SIGTERM)
        assert await served.exit_code() == 0, served.tail()

    events = await ledger_events(postgres_database)
    recorded = {e.data["event"]["event_id"] for e in events if "event" in e.data}
    assert 0 < len(recorded) < len(messages), "the stop should land mid-stream"
    left = await _take_feed_queue(amqp_vhost)
    again = [event_id for event_id in left if event_id in recorded]
    assert again == [], f"{len(again)} committed messages were not acknowledged"
    assert recorded | set(left) == {m.event_id for m in messages}  # nothing lost either
    # The outbox was published before the process exited.
    assert await pending_results(postgres_database) == 0
    # Every result of a round the ledger closed went out.
    closed = {e.stream for e in closures(events)}
    assert closed
    await wallet.wait_for(
        expected_results([t for t in tables if round_streams([t]) <= closed]), timeout=30
    )


async def _take_feed_queue(url: str) -> list[str]:
    """The message ids left in ``croupier.feed``, taken off the queue.

    A quorum queue with a single active consumer refuses ``basic.get``: this consumes.
    """
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(FEED_QUEUE, passive=True)
        count = queue.declaration_result.message_count or 0
        ids: list[str] = []

        async def take(message: AbstractIncomingMessage) -> None:
            ids.append(message.message_id or "")

        await queue.consume(take, no_ack=True)

        async def all_taken() -> bool:
            return len(ids) >= count

        await eventually(all_taken, 30, f"{count} messages taken off {FEED_QUEUE}")
        await asyncio.sleep(0.5)  # and no more than that
        return ids
    finally:
        await connection.close()


@pytest.mark.long
async def test_sigkills_before_the_first_commit_park_nothing(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    """A crash loop before anything commits (the append lock held elsewhere, then SIGKILL,
    seven times) returns the few messages in hand each time and parks none of them."""
    messages = studio_feed("loop", 40, seed=31)
    tables = played_tables(messages)
    await prepare_broker(amqp_vhost)
    assert await publish(messages, amqp_vhost) == len(messages)
    log = tmp_path / "serve.log"
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()  # so that the first process blocks on the lock, not migrating
    blocker = await asyncpg.connect(postgres_database)
    try:
        await blocker.execute("SELECT pg_advisory_lock($1)", APPEND_LOCK)
        for _ in range(7):
            with serve_process(postgres_database, amqp_vhost, log) as doomed:
                await eventually(
                    lambda: _taken(amqp_vhost, len(messages)), 60, "deliveries in hand"
                )
                assert await _unacked(amqp_vhost) <= INITIAL_PREFETCH
                doomed.process.send_signal(signal.SIGKILL)
                assert await doomed.exit_code() == -signal.SIGKILL
        assert await closed_rounds(postgres_database) == 0
    finally:
        await blocker.close()

    wallet = Wallet(amqp_vhost)
    with serve_process(postgres_database, amqp_vhost, log) as survivor:
        await survivor.ready()
        await wallet.wait_for(expected_results(tables), timeout=120)
        # Once it has committed, it consumes under the full prefetch (batches of up to
        # --max-batch, not INITIAL_PREFETCH: a steady feed would outrun it).
        assert await _prefetches(amqp_vhost) == [2000]
        await eventually(
            lambda: _settled_all(postgres_database, len(tables)), 60, "every round closed"
        )
    assert await _queue_length(amqp_vhost, DEAD_LETTER_QUEUE) == 0  # nothing parked
    events = await ledger_events(postgres_database)
    assert_one_closure_per_round(events, round_streams(tables))


async def test_a_port_in_use_exits_before_taking_a_delivery(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    messages = studio_feed("port", 2, seed=37)
    await prepare_broker(amqp_vhost)
    assert await publish(messages, amqp_vhost) == len(messages)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        env_port = str(taken.getsockname()[1])
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "croupier.cli", "serve"],
            env={
                **os.environ,
                "CROUPIER_DATABASE_URL": postgres_database,
                "CROUPIER_AMQP_URL": amqp_vhost,
                "CROUPIER_HTTP_PORT": env_port,
            },
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0
    assert await _redelivered(amqp_vhost) == 0  # never subscribed: no delivery was burnt


async def _listed(url: str, what: str, *columns: str) -> list[list[str]]:
    """``rabbitmqctl list_<what>`` of the URL's vhost: the rows with every column."""
    vhost = unquote(urlsplit(url).path.lstrip("/")) or "/"
    args = (f"list_{what}", "-p", vhost, *columns, "--no-table-headers", "--quiet")
    out = await asyncio.to_thread(rabbitmqctl, *args)
    return [row.split() for row in out.splitlines() if len(row.split()) == len(columns)]


async def _queue_stats(url: str) -> dict[str, dict[str, int]]:
    rows = await _listed(url, "queues", "name", "messages", "messages_unacknowledged")
    return {name: {"messages": int(n), "unacked": int(unacked)} for name, n, unacked in rows}


async def _prefetches(url: str) -> list[int]:
    """The prefetch of each consumer of the feed queue."""
    rows = await _listed(url, "consumers", "queue_name", "prefetch_count")
    return [int(prefetch) for queue, prefetch in rows if queue == FEED_QUEUE]


async def _unacked(url: str) -> int:
    return (await _queue_stats(url))[FEED_QUEUE]["unacked"]


async def _taken(url: str, published: int) -> bool:
    """Whether a consumer has taken some of the ``published`` messages off the feed queue.

    Asked over AMQP (the queue's ready count): polling with ``rabbitmqctl`` starts an Erlang
    VM each time, two seconds apiece.
    """
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(FEED_QUEUE, passive=True)
        return (queue.declaration_result.message_count or 0) < published
    finally:
        await connection.close()


async def _queue_length(url: str, queue: str) -> int:
    return (await _queue_stats(url))[queue]["messages"]


async def _redelivered(url: str) -> int:
    """How many feed messages the broker has delivered before (taken off the queue)."""
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(FEED_QUEUE, passive=True)
        count = queue.declaration_result.message_count or 0
        seen: list[bool] = []

        async def take(message: AbstractIncomingMessage) -> None:
            seen.append(bool(message.redelivered))

        await queue.consume(take, no_ack=True)

        async def all_taken() -> bool:
            return len(seen) >= count

        await eventually(all_taken, 30, f"{count} messages taken off {FEED_QUEUE}")
        return sum(seen)
    finally:
        await connection.close()
