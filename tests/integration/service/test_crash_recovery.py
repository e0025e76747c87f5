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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aio_pika
import asyncpg
import pytest
from aio_pika.abc import AbstractIncomingMessage
from service_harness import (
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    closures,
    eventually,
    expected_results,
    http_get,
    ledger_events,
    ledger_returned,
    played_tables,
    prepare_broker,
    round_streams,
    studio_feed,
    wallet_paid,
)

from croupier.bus import FEED_QUEUE
from croupier.ledger import open_ledger
from croupier.round import SETTLED, VOIDED
from studio.publisher import publish

pytestmark = pytest.mark.integration


class Served:
    """One ``croupier serve`` process, its probe port and its log file."""

    def __init__(self, database_url: str, amqp_url: str, log: Path, max_batch: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        env = {
            **os.environ,
            "CROUPIER_DATABASE_URL": database_url,
            "CROUPIER_AMQP_URL": amqp_url,
            "CROUPIER_HTTP_PORT": str(self.port),
            "CROUPIER_LOG_LEVEL": "INFO",
        }
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "croupier.cli", "serve", "--max-batch", str(max_batch)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    async def ready(self, timeout: float = 60) -> None:
        async def answers() -> bool:
            assert self.process.poll() is None, f"croupier serve exited:\n{self.tail()}"
            try:
                return (await http_get(self.port, "/readyz", timeout=5))[0] == 200
            except OSError:
                return False

        await eventually(answers, timeout, "croupier serve is ready")

    async def exit_code(self, timeout: float = 60) -> int:
        try:
            return await asyncio.to_thread(self.process.wait, timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(
                f"croupier serve did not exit in {timeout}s:\n{self.tail()}"
            ) from None


@contextmanager
def serving(database_url: str, amqp_url: str, log: Path, max_batch: int = 1000) -> Iterator[Served]:
    """A ``croupier serve`` process, killed on the way out if the test left it running."""
    served = Served(database_url, amqp_url, log, max_batch)
    try:
        yield served
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(30)


async def closed_rounds(database_url: str) -> int:
    """How many rounds the ledger has settled or voided (0 before its first migration)."""
    connection = await asyncpg.connect(database_url, timeout=10)
    try:
        count = await connection.fetchval(
            "SELECT count(*) FROM events WHERE type = ANY($1::text[])", [SETTLED, VOIDED]
        )
    except asyncpg.UndefinedTableError:
        return 0
    finally:
        await connection.close()
    return int(count)


async def pending_results(database_url: str) -> int:
    async with open_ledger(database_url) as ledger:
        return len(await ledger.pending_outbox(100_000))


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

    with serving(postgres_database, amqp_vhost, log, max_batch=20) as first:
        await first.ready()
        await eventually(
            lambda: _at_least(postgres_database, 10), 90, "ten rounds settled", every=0.05
        )
        first.process.send_signal(signal.SIGKILL)
        assert await first.exit_code() == -signal.SIGKILL
    killed_at = await closed_rounds(postgres_database)
    assert 0 < killed_at < len(tables), "the kill should land mid-stream"

    with serving(postgres_database, amqp_vhost, log) as second:
        await second.ready()
        await wallet.wait_for(expected, timeout=120)
        await eventually(
            lambda: _settled_all(postgres_database, len(tables)), 60, "every round closed"
        )
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
    async with open_ledger(postgres_database) as ledger:
        assert (await ledger.verify()).ok


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

    with serving(postgres_database, amqp_vhost, tmp_path / "serve.log", max_batch=20) as served:
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
