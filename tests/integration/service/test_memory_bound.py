"""Memory and storage stay bounded whatever the size of the feed's messages.

A burst waits in the feed queue: rounds whose every event is exactly the contract's
maximum (``MAX_BODY_BYTES``), 2,000 more messages of that size the contract refuses, and
over-size ones: up to the deployed broker's ``max_message_size`` (``MAX_MESSAGE_BYTES``)
and, as a broker left at RabbitMQ's default would let through, beyond it. ``croupier serve``
(its own process) then takes it at its full prefetch, holding 2,000 at once before it
appends anything. Its peak RSS stays under the limit docs/feed.md states; the rounds
settle; every refused body is kept in the ledger and dead-lettered bounded, an over-size
one as its first ``KEPT_BYTES`` with its full size and SHA-256.

A RabbitMQ node configured with deploy/rabbitmq/croupier.conf's ``max_message_size`` takes
a message of ``MAX_MESSAGE_BYTES`` and refuses one byte more.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
import aiormq
import asyncpg
import pytest
from aio_pika.abc import AbstractIncomingMessage
from conftest import rabbitmqctl
from croupier_feeds import RoundFeed, line
from private_services import private_rabbitmq
from service_harness import ServeProcess, eventually, prepare_broker, serve_process

from contract.feed import MAX_BODY_BYTES
from croupier.bus import (
    DEAD_LETTER_QUEUE,
    FEED_QUEUE,
    KEPT_BYTES,
    MAX_MESSAGE_BYTES,
    SHA256_HEADER,
    SIZE_HEADER,
)
from croupier.settlement.settler import REJECTIONS_STREAM
from studio.feed import FeedMessage
from studio.publisher import publish

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"

#: The peak RSS docs/feed.md states for ``croupier serve`` through such a burst.
RSS_LIMIT_MB = 400
PREFETCH = 2000
ROUNDS = 20
MAX_SIZE_REFUSED = 2000
#: Over-size bodies: (size, how many). The last are over the deployed broker's maximum.
OVER_SIZE = ((64 * 1024, 400), (MAX_MESSAGE_BYTES, 24), (8 * MAX_MESSAGE_BYTES, 2))
#: What a kept rejection or dead letter adds to the body it keeps (ids, code, reason).
OVERHEAD = 2048


def padded(event: dict[str, Any]) -> bytes:
    """The event's JSON padded with spaces to exactly the contract's maximum size."""
    text = line(event).encode()
    return text + b" " * (MAX_BODY_BYTES - len(text))


def round_messages(table: str, number: int) -> list[FeedMessage]:
    """A settled round of one player who calls, every event at the maximum size."""
    feed = RoundFeed(table_id=table, round_id=f"r{number}")
    events = [
        feed.opened(),
        feed.bet("a1"),
        feed.hole("As Ad"),
        feed.cards("dealer", "9c 9d"),
        feed.cards("board", "Ah 7c 2d"),
        feed.decide("a1", "flop", "call", "c1", 200),
        feed.cards("board", "Ks 4h"),
        feed.completed(),
    ]
    return [
        FeedMessage(f"{table}.{e['event_type']}", padded(e), e["event_id"], e, table)
        for e in events
    ]


def refused_message(size: int, fill: bytes) -> FeedMessage:
    """A JSON object of exactly ``size`` bytes the contract refuses (no event fields)."""
    head = b'{"pad":"'
    body = head + fill * (size - len(head) - 2) + b'"}'
    return FeedMessage("t-huge.bet.placed", body, str(uuid.uuid4()), None, "t-huge")


def burst() -> tuple[list[FeedMessage], list[FeedMessage]]:
    """The burst in publishing order (rounds spread through it, each in order), and the
    messages of it the contract refuses."""
    refused = [refused_message(MAX_BODY_BYTES, b"m") for _ in range(MAX_SIZE_REFUSED)]
    for size, count in OVER_SIZE:
        refused += [refused_message(size, b"o") for _ in range(count)]
    others = list(refused)
    random.Random(7).shuffle(others)
    rounds = [m for n in range(ROUNDS) for m in round_messages("t-max", n)]
    step = len(others) // len(rounds)
    messages = []
    for index, message in enumerate(rounds):
        messages += [message, *others[index * step : (index + 1) * step]]
    messages += others[len(rounds) * step :]
    return messages, refused


def memory_mb(pid: int, field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (the peak resident) of ``pid``, in MB."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(f"{field}:"):
            return int(row.split()[1]) / 1024
    raise AssertionError(f"no {field} for process {pid}")


async def unacked(url: str) -> int:
    """Feed deliveries in consumers' hands, as the broker counts them."""
    vhost = unquote(urlsplit(url).path.lstrip("/")) or "/"
    out = await asyncio.to_thread(
        rabbitmqctl,
        *("list_queues", "-p", vhost, "name", "messages_unacknowledged"),
        *("--no-table-headers", "--quiet"),
    )
    rows = dict(row.split() for row in out.splitlines() if len(row.split()) == 2)
    return int(rows.get(FEED_QUEUE, 0))


async def settled(database_url: str, refused: int) -> bool:
    """Whether the ledger holds every round and rejection, and the outbox is published."""
    connection = await asyncpg.connect(database_url, timeout=10)
    try:
        closed = await connection.fetchval(
            "SELECT count(*) FROM events WHERE type = 'round.settled'"
        )
        rejected = await connection.fetchval(
            "SELECT count(*) FROM events WHERE stream = $1", REJECTIONS_STREAM
        )
        pending = await connection.fetchval(
            "SELECT count(*) FROM outbox o WHERE NOT EXISTS "
            "(SELECT 1 FROM outbox_published p WHERE p.message_id = o.message_id)"
        )
    finally:
        await connection.close()
    return bool(closed == ROUNDS and rejected == refused and pending == 0)


@pytest.mark.long
async def test_a_burst_of_maximum_and_over_size_messages_at_full_prefetch_stays_bounded(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    messages, refused = burst()
    await prepare_broker(amqp_vhost)
    log = tmp_path / "serve.log"
    with serve_process(postgres_database, amqp_vhost, log) as idle:  # the anchor: idle RSS
        await idle.ready()
        idle_mb = memory_mb(idle.process.pid, "VmRSS")
        idle.process.send_signal(signal.SIGTERM)
        assert await idle.exit_code() == 0

    started = time.monotonic()
    assert await publish(messages, amqp_vhost) == len(messages)
    published = time.monotonic() - started
    # Nothing is appended, so nothing acknowledged, until the broker counts the full
    # prefetch in serve's hand: the events table is locked against inserts from before serve
    # connects (its migrations ran before it was launched) until then.
    holder = await asyncpg.connect(postgres_database, timeout=10)
    try:
        with serve_process(postgres_database, amqp_vhost, log) as served:
            async with holder.transaction():
                await holder.execute("LOCK TABLE events IN SHARE MODE")
                await served.ready()
                ready = time.monotonic()

                async def all_in_hand() -> bool:
                    return await unacked(amqp_vhost) >= PREFETCH

                await eventually(all_in_hand, 60, "the full prefetch in hand", every=0.5)
            peak_mb = await settle(served, postgres_database, len(refused))
            took = time.monotonic() - ready
    finally:
        await holder.close()

    total = sum(len(m.body) for m in messages)
    print(
        f"\n{len(messages):,} messages ({total / 2**20:,.0f} MiB) published in {published:.1f} s"
        f", taken {PREFETCH:,} at once (the prefetch), settled {took:.1f} s after serve was ready"
        f"\ncroupier serve peak RSS {peak_mb:,.0f} MB (idle {idle_mb:,.0f} MB); "
        f"stated limit {RSS_LIMIT_MB} MB"
    )
    assert peak_mb < RSS_LIMIT_MB

    await assert_kept_bounded(postgres_database, refused)
    await assert_dead_letters_bounded(amqp_vhost, refused)


async def settle(served: ServeProcess, database_url: str, refused: int) -> float:
    """Wait until the burst is settled, stop ``serve``: its peak RSS in MB."""
    await eventually(lambda: settled(database_url, refused), 120, "the burst settled", every=0.5)
    peak_mb = memory_mb(served.process.pid, "VmHWM")
    served.process.send_signal(signal.SIGTERM)
    assert await served.exit_code() == 0
    return peak_mb


async def assert_kept_bounded(database_url: str, refused: list[FeedMessage]) -> None:
    """Each refused body is one rejection and one dead letter in the outbox, each at most
    ``KEPT_BYTES`` of the body; an over-size one names the body by size and SHA-256."""
    by_digest = {hashlib.sha256(m.body).hexdigest(): m for m in refused}
    connection = await asyncpg.connect(database_url, timeout=10)
    try:
        kept = await connection.fetch(
            "SELECT key, data::text AS data FROM events WHERE stream = $1", REJECTIONS_STREAM
        )
        letters = await connection.fetch(
            "SELECT body::text AS body FROM outbox WHERE exchange = 'croupier.dead-letter'"
        )
    finally:
        await connection.close()
    assert len(kept) == len(letters) == len(refused)
    for row in kept:
        assert len(row["data"]) <= KEPT_BYTES + OVERHEAD, row["key"]
        data = json.loads(row["data"])
        message = by_digest[row["key"].rpartition(":")[2]]
        assert data["raw"].encode() == message.body[:KEPT_BYTES]
        if len(message.body) > KEPT_BYTES:
            assert data["code"] == "too_large"
            assert (data["size"], data["sha256"]) == (len(message.body), row["key"][-64:])
        else:
            assert data["code"] == "contract" and "size" not in data
    for row in letters:
        assert len(row["body"]) <= KEPT_BYTES + OVERHEAD
        letter = json.loads(row["body"])
        if "size" in letter:
            message = by_digest[letter["sha256"]]
            assert letter["size"] == len(message.body) > KEPT_BYTES
            assert letter["text"].encode() == message.body[:KEPT_BYTES]


async def assert_dead_letters_bounded(url: str, refused: list[FeedMessage]) -> None:
    """What the relay published to ``croupier.dead-letter``: at most ``KEPT_BYTES`` each,
    an over-size one's full size and digest in its headers."""
    sizes = {m.event_id: len(m.body) for m in refused}
    digests = {m.event_id: hashlib.sha256(m.body).hexdigest() for m in refused}
    letters: list[AbstractIncomingMessage] = []
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=500)
        queue = await channel.get_queue(DEAD_LETTER_QUEUE)

        async def take(letter: AbstractIncomingMessage) -> None:
            letters.append(letter)

        async def all_taken() -> bool:
            return len(letters) >= len(refused)

        await queue.consume(take, no_ack=True)
        await eventually(all_taken, 60, "every dead letter")
    finally:
        await connection.close()
    for letter in letters:
        assert len(letter.body) <= KEPT_BYTES
        headers = letter.headers or {}
        size = sizes[str(letter.message_id)]
        if size > KEPT_BYTES:
            assert headers[SIZE_HEADER] == str(size)
            assert headers[SHA256_HEADER] == digests[str(letter.message_id)]
        else:
            assert SIZE_HEADER not in headers
    assert len(letters) == len(refused)


async def test_the_broker_as_deployed_refuses_a_message_over_its_maximum() -> None:
    conf = (DEPLOY / "rabbitmq" / "croupier.conf").read_text().splitlines()
    (limit,) = [row for row in conf if row.startswith("max_message_size")]
    with private_rabbitmq(f"{limit}\n") as broker:
        connection = await aio_pika.connect(broker.url, timeout=30)
        try:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue("sizes", durable=True)
            biggest = aio_pika.Message(b"x" * MAX_MESSAGE_BYTES)
            await channel.default_exchange.publish(biggest, routing_key=queue.name)
            over = aio_pika.Message(b"x" * (MAX_MESSAGE_BYTES + 1))
            with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed, match="max size"):
                await channel.default_exchange.publish(over, routing_key=queue.name)
            channel = await connection.channel()
            declared = await channel.declare_queue("sizes", passive=True)
            assert declared.declaration_result.message_count == 1
        finally:
            await connection.close()
