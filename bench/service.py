"""Live service throughput on the real RabbitMQ and PostgreSQL, against a raw baseline.

Every scenario gets a scratch RabbitMQ vhost (``rabbitmqctl``, deleted afterwards) and a
scratch PostgreSQL database (dropped afterwards). Three processes share the machine, as
in production: the system under test, the studio (``studio.publisher``, confirms) and a
wallet (a consumer of ``croupier.settlements`` in this process, which also keeps the time).

1. Raw baseline: an aio-pika consumer with prefetch takes the feed in batches, COPYs the
   bodies into PostgreSQL in one transaction and acknowledges each batch with one
   multiple ack: the pipeline's plumbing with no logic. Queue drained (the anchor): the
   feed is published first, messages/s from when the consumer starts consuming to its last
   ack. While publishing: messages/s from the first publish to the last ack.
2. Croupier end to end: ``croupier.settlement.service.Service`` on the same feed, up to the last
   settlement result the wallet receives. Queue drained, timed like (1) from just before
   the service starts (its ledger already migrated; the broker connection is inside the
   time); its ratio to the anchor is the target. While publishing: from the first publish,
   compared with the anchor and with the raw baseline while publishing.
3. Shared hands of 10,000 and 100,000 players: everything up to ``round.completed`` is
   published and settled first; then the time from publishing ``round.completed`` to the
   wallet receiving the last of its results. Right after ``round.completed`` a one-player
   round of another table is published: the time to its result shows whether other
   tables keep flowing while the large round settles and is relayed.

Also printed for context: the studio publisher alone (no consumer), which bounds the rows
measured while publishing. Figures are the best of ``REPEATS``; targets are printed, not
asserted.
"""

from __future__ import annotations

import asyncio
import functools
import math
import multiprocessing
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext
from multiprocessing.synchronize import Event as MpEvent
from typing import Any, cast
from urllib.parse import quote, urlsplit, urlunsplit

import aio_pika
import aiormq
import asyncpg
from aio_pika.abc import AbstractIncomingMessage
from aiormq.abc import DeliveredMessage

from bench.replay import ADMIN_URL, load_line, postgres_available, scratch_database
from contract.consuming import consume_inline
from contract.frames import install as install_frame_reader
from croupier.bus import FEED_QUEUE, SETTLEMENTS_EXCHANGE, Inbox
from croupier.bus.amqp import AmqpBus, declare_topology
from croupier.ledger import open_ledger
from croupier.ledger.signing import LedgerKey
from croupier.logs import configure_logging
from croupier.scheduling import answer_round_trips_promptly
from croupier.settlement.round import HELD, SETTLED, stream_name
from croupier.settlement.service import Service
from studio import StudioConfig, TableSpec, every_paytable, simulate
from studio.message import FeedMessage
from studio.publisher import declare_feed_exchange, publish_on

AMQP_URL = os.environ.get("CROUPIER_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
SEED = 20240502
FEED_ROUNDS = 700  # about 47,000 messages and 14,000 results
FEED_PLAYERS = 20
#: Players of each shared hand timed, and the seconds its results must take at most.
SHARED_TARGETS = {10_000: 1.0, 100_000: 10.0}
#: Shared hands this large are timed once (publishing their feed takes minutes).
SHARED_ONCE = 50_000
SHARED_PAYTABLE = "casino-holdem/classic"
REPEATS = 2
PREFETCH = 2000
RAW_BATCH = 1000
RAW_LINGER = 0.005
PUBLISH_WINDOW = 256
#: End to end, queue drained, against the raw pipeline: the promise of docs/benchmarks.md.
TARGET_RATIO = 0.8
TIMEOUT = 300.0


@dataclass(frozen=True)
class Workload:
    """A feed and the number of settlement results it must produce."""

    messages: list[FeedMessage]
    results: int


# -- workloads -----------------------------------------------------------------------------


def feed_workload(rounds: int = FEED_ROUNDS, seed: int = SEED) -> Workload:
    """Every pay table, one shared hand of ``FEED_PLAYERS`` per table, no faults."""
    config = StudioConfig(tables=every_paytable(players=FEED_PLAYERS), rounds=rounds, seed=seed)
    messages = list(simulate(config))
    return Workload(messages, _results(messages))


def shared_workload(players: int, seed: int = SEED) -> Workload:
    """One round of ``players`` players on one shared hand."""
    table = TableSpec("bench-shared", SHARED_PAYTABLE, players=players)
    messages = list(simulate(StudioConfig(tables=(table,), rounds=1, seed=seed)))
    return Workload(messages, _results(messages))


def other_table_workload(seed: int = SEED) -> Workload:
    """One round of one player at another table."""
    table = TableSpec("bench-other", SHARED_PAYTABLE, players=1)
    messages = list(simulate(StudioConfig(tables=(table,), rounds=1, seed=seed)))
    return Workload(messages, _results(messages))


def _results(messages: Sequence[FeedMessage]) -> int:
    """One result per player and currency per round."""
    owners = {
        (m.event["round_id"], m.event["payload"]["player_id"], m.event["payload"]["currency"])
        for m in messages
        if m.event is not None and m.event["event_type"] == "bet.placed"
    }
    return len(owners)


# -- scratch infrastructure ----------------------------------------------------------------


@asynccontextmanager
async def scratch_vhost(base_url: str = AMQP_URL) -> AsyncIterator[str]:
    """A new RabbitMQ vhost for the duration (via ``rabbitmqctl``); its AMQP URL."""
    name = f"croupier-bench-{uuid.uuid4().hex[:12]}"
    user = urlsplit(base_url).username or "guest"
    await _rabbitmqctl("add_vhost", name)
    try:
        await _rabbitmqctl("set_permissions", "-p", name, user, ".*", ".*", ".*")
        yield urlunsplit(urlsplit(base_url)._replace(path=f"/{quote(name, safe='')}"))
    finally:
        await _rabbitmqctl("delete_vhost", name)


async def _rabbitmqctl(*args: str) -> None:
    await asyncio.to_thread(
        subprocess.run, ["rabbitmqctl", "-q", *args], check=True, capture_output=True
    )


def rabbitmq_available(base_url: str = AMQP_URL) -> bool:
    """Whether ``rabbitmqctl`` answers (and says how to fix it when not)."""
    try:
        subprocess.run(["rabbitmqctl", "-q", "list_vhosts"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"service: skipped, rabbitmqctl fails ({error}); run `make services`")
        return False
    return True


# -- the processes -------------------------------------------------------------------------


def _publisher(url: str, messages: list[FeedMessage], started: Any) -> None:
    """Child process: publish ``messages`` with confirms; put the first publish's time."""
    asyncio.run(_publish(url, messages, started))


async def _publish(url: str, messages: list[FeedMessage], started: Any) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await declare_feed_exchange(channel)
        started.put(time.monotonic())
        await publish_on(channel, messages, window=PUBLISH_WINDOW)
        started.put(time.monotonic())


def _raw_consumer(amqp_url: str, db_url: str, expected: int, ready: MpEvent, times: Any) -> None:
    """Child process: the raw baseline; puts the times of its start and of its last ack."""
    times.put(asyncio.run(_raw_consume(amqp_url, db_url, expected, ready, times)))


async def _raw_consume(
    amqp_url: str, db_url: str, expected: int, ready: MpEvent, started: Any
) -> float:
    database = await asyncpg.connect(db_url)
    await database.execute("CREATE TABLE raw_feed (tag bigint NOT NULL, body text NOT NULL)")
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        await declare_topology(channel)
        queue = await channel.get_queue(FEED_QUEUE)
        inbox: Inbox[AbstractIncomingMessage] = Inbox()

        async def receive(message: AbstractIncomingMessage) -> None:
            inbox.put(message)

        ready.set()
        started.put(time.monotonic())
        await queue.consume(receive)
        taken = 0
        while taken < expected:
            batch = await inbox.take(RAW_BATCH, RAW_LINGER)
            records = [(m.delivery_tag, m.body.decode()) for m in batch]
            async with database.transaction():
                await database.copy_records_to_table("raw_feed", records=records)
            await batch[-1].ack(multiple=True)
            taken += len(batch)
        finished = time.monotonic()
    await database.close()
    return finished


def _service(amqp_url: str, db_url: str, ready: MpEvent, stop: MpEvent, times: Any) -> None:
    """Child process: ``croupier.settlement.service.Service`` until ``stop`` is set.

    Puts the time just before the service starts (after migrating its ledger).
    """
    configure_logging("WARNING")
    answer_round_trips_promptly()  # as the croupier command does
    asyncio.run(_serve(amqp_url, db_url, ready, stop, times))


async def _serve(amqp_url: str, db_url: str, ready: MpEvent, stop: MpEvent, times: Any) -> None:
    async with open_ledger(db_url, LedgerKey.generate()) as ledger:  # signing, as serve does
        await ledger.migrate()
        service = Service(ledger, AmqpBus(amqp_url))
        times.put(time.monotonic())
        await service.start(http_port=None)
        ready.set()
        await asyncio.to_thread(stop.wait)
        await service.stop()


# -- the wallet ----------------------------------------------------------------------------


@dataclass
class Wallet:
    """Receives settlement results, deduplicating on ``message_id``; notes the last one."""

    expected: int
    seen: set[str] = field(default_factory=set)
    finished: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    #: A table whose results are not counted: when its first one arrived.
    other_table: str | None = None
    other_arrived: float = 0.0

    @property
    def _other(self) -> bytes:
        return f'"table_id":"{self.other_table}"'.encode()

    def receive(self, message: DeliveredMessage) -> None:
        if self.other_table and self._other in message.body:
            self.other_arrived = self.other_arrived or time.monotonic()
            return
        message_id = message.header.properties.message_id
        if message_id and message_id not in self.seen:
            self.seen.add(message_id)
            if len(self.seen) == self.expected:
                self.finished = time.monotonic()
                self.done.set()


@asynccontextmanager
async def wallet_queue(url: str, wallet: Wallet) -> AsyncIterator[aio_pika.abc.AbstractChannel]:
    """A queue bound to every settlement result, consumed by ``wallet``; the channel.

    Consumed on aiormq's channel and read with ``contract.frames``, as the service consumes
    its feed (``consume_inline``): the wallet shares the machine's two cores with the
    service and the broker, and aio-pika's message object and task per delivery cost it as
    much CPU as the service spends on the results; aiormq's frame reading, a third of what
    was left."""
    install_frame_reader()
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        settlements = await channel.get_exchange(SETTLEMENTS_EXCHANGE)
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(settlements, "#")
        underlay = cast(aiormq.Channel, await channel.get_underlay_channel())
        await consume_inline(underlay, queue.name, wallet.receive, no_ack=True)
        yield channel


# -- scenarios -----------------------------------------------------------------------------


def _spawn() -> SpawnContext:
    return multiprocessing.get_context("spawn")


async def _get(queue: Any, timeout: float = TIMEOUT) -> float:
    """The next time a child process put on ``queue``."""
    return float(await asyncio.to_thread(queue.get, True, timeout))


async def publish_all(url: str, messages: list[FeedMessage]) -> tuple[float, float]:
    """Publish ``messages`` from a studio child process; its first and last publish times."""
    ctx = _spawn()
    times = ctx.Queue()
    publisher = ctx.Process(target=_publisher, args=(url, messages, times))
    publisher.start()
    first, last = await _get(times), await _get(times)
    await asyncio.to_thread(publisher.join)
    return first, last


async def publisher_alone(workload: Workload) -> float:
    """Messages/s of the studio publisher into the feed queue, nobody consuming."""
    async with scratch_vhost() as url:
        await _declare(url)
        first, last = await publish_all(url, workload.messages)
    return len(workload.messages) / (last - first)


async def raw_baseline(workload: Workload, *, live: bool) -> float:
    """Messages/s of consume + COPY + multiple ack, up to the last ack.

    ``live``: the feed is published while the consumer runs, timed from the first publish.
    Otherwise the feed is published first and the consumer drains the queue, timed from
    when it starts consuming.
    """
    ctx = _spawn()
    count = len(workload.messages)
    async with scratch_vhost() as url, scratch_database() as db_url:
        ready, consumer_times, publisher_times = ctx.Event(), ctx.Queue(), ctx.Queue()
        consumer = ctx.Process(
            target=_raw_consumer, args=(url, db_url, count, ready, consumer_times)
        )
        publisher = ctx.Process(target=_publisher, args=(url, workload.messages, publisher_times))
        try:
            if not live:
                await _declare(url)
                await publish_all(url, workload.messages)
            consumer.start()
            if not await asyncio.to_thread(ready.wait, 60):
                raise RuntimeError("the baseline consumer did not start")
            if live:
                publisher.start()
                first = await _get(publisher_times)
                await _get(consumer_times)
            else:
                first = await _get(consumer_times)
            finished = await _get(consumer_times)
        finally:
            for process in (publisher, consumer):
                if process.pid is not None:
                    await asyncio.to_thread(process.join, 10)
                    if process.is_alive():
                        process.terminate()
    return count / (finished - first)


async def _declare(url: str) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        await declare_topology(await connection.channel())


@dataclass(frozen=True)
class RunningService:
    """The service's child process: when it started, and its process id."""

    started: float
    pid: int

    def cpu_seconds(self) -> float:
        """User plus system CPU-seconds the service process has used so far (Linux /proc)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@asynccontextmanager
async def running_service(url: str, db_url: str) -> AsyncIterator[RunningService]:
    """The service in a child process on ``url`` and ``db_url``."""
    ctx = _spawn()
    ready, stop, times = ctx.Event(), ctx.Event(), ctx.Queue()
    service = ctx.Process(target=_service, args=(url, db_url, ready, stop, times))
    service.start()
    try:
        if not await asyncio.to_thread(ready.wait, 60):
            raise RuntimeError("the service did not start")
        assert service.pid is not None
        yield RunningService(await _get(times), service.pid)
    finally:
        stop.set()
        await asyncio.to_thread(service.join, 30)
        if service.is_alive():
            service.terminate()


async def end_to_end_live(workload: Workload) -> float:
    """Messages/s from the first publish, made while the service runs, to the last result."""
    ctx = _spawn()
    wallet = Wallet(workload.results)
    async with (
        scratch_vhost() as url,
        scratch_database() as db_url,
        running_service(url, db_url),
        wallet_queue(url, wallet),
    ):
        times = ctx.Queue()
        publisher = ctx.Process(target=_publisher, args=(url, workload.messages, times))
        publisher.start()
        first = await _get(times)
        await asyncio.wait_for(wallet.done.wait(), TIMEOUT)
        await asyncio.to_thread(publisher.join)
    return len(workload.messages) / (wallet.finished - first)


async def end_to_end_drained(workload: Workload) -> float:
    """Messages/s of the service draining a feed published before it starts, to the last result.

    Timed from just before the service starts, like the drained raw baseline.
    """
    wallet = Wallet(workload.results)
    async with scratch_vhost() as url, scratch_database() as db_url:
        await _declare(url)
        async with wallet_queue(url, wallet):
            await publish_all(url, workload.messages)
            async with running_service(url, db_url) as service:
                await asyncio.wait_for(wallet.done.wait(), TIMEOUT)
    return len(workload.messages) / (wallet.finished - service.started)


@dataclass(frozen=True)
class SharedRound:
    """Seconds from publishing a shared hand's ``round.completed`` to its last result,
    and to the result of another table's round published right after it; the service's
    CPU-seconds from that ``round.completed`` to the last result. From the ledger: seconds
    to the settlement fact's ``recorded_at`` (stamped by the service under the append lock,
    before the append's rows are written and committed) and to the last of its results
    marked published (the broker confirmed it; the mark's transaction, by the database's
    clock)."""

    seconds: float
    other_table: float
    cpu: float = math.inf
    stamped: float = math.inf
    confirmed: float = math.inf


async def shared_round(workload: Workload) -> SharedRound:
    """A shared hand's results, timed from publishing its ``round.completed``."""
    last = workload.messages[-1]
    assert last.event is not None and last.event["event_type"] == "round.completed"
    before = workload.messages[:-1]
    stream = stream_name(last.event["table_id"], last.event["round_id"])
    other = other_table_workload()
    first = other.messages[0].event
    assert first is not None
    wallet = Wallet(workload.results, other_table=first["table_id"])
    async with (
        scratch_vhost() as url,
        scratch_database() as db_url,
        running_service(url, db_url) as service,
        wallet_queue(url, wallet),
    ):
        connection = await aio_pika.connect(url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await declare_feed_exchange(channel)
            await publish_on(channel, before, window=PUBLISH_WINDOW)
            await _settled_up_to(db_url, stream, len(before))
            cpu = service.cpu_seconds()
            started, wall = time.monotonic(), time.time()
            await publish_on(channel, [last])
            other_started = time.monotonic()
            await publish_on(channel, other.messages, window=PUBLISH_WINDOW)
            await asyncio.wait_for(wallet.done.wait(), TIMEOUT)
            cpu = service.cpu_seconds() - cpu
            async with asyncio.timeout(TIMEOUT):
                while not wallet.other_arrived:
                    await asyncio.sleep(0.05)
        stamped, confirmed = await _stamped_and_confirmed(db_url, stream)
    return SharedRound(
        wallet.finished - started,
        wallet.other_arrived - other_started,
        cpu,
        stamped - wall,
        confirmed - wall,
    )


async def _stamped_and_confirmed(db_url: str, stream: str) -> tuple[float, float]:
    """When (epoch seconds) the round's settlement fact was stamped (before it was written),
    and when the last of its results was marked published."""
    database = await asyncpg.connect(db_url)
    try:
        position, stamped = await database.fetchrow(
            "SELECT position, extract(epoch FROM recorded_at)::float8 FROM events "
            "WHERE stream = $1 AND type = $2",
            stream,
            SETTLED,
        )
        confirmed = await database.fetchval(
            "SELECT extract(epoch FROM max(p.published_at))::float8 FROM outbox_published p "
            "JOIN outbox o USING (message_id) WHERE o.position = $1",
            position,
        )
        return float(stamped), float(confirmed)
    finally:
        await database.close()


async def _settled_up_to(db_url: str, stream: str, decided: int) -> None:
    """Wait until the round's stream holds ``decided`` facts besides ``feed.held`` ones
    (everything sent is decided: an event that came before its turn is held first, then
    decided, two facts)."""
    database = await asyncpg.connect(db_url)
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                version = await database.fetchval(
                    "SELECT max(version) FROM events WHERE stream = $1", stream
                )
                if (version or 0) >= decided and decided == await database.fetchval(
                    "SELECT count(*) FROM events WHERE stream = $1 AND type <> $2", stream, HELD
                ):
                    return
                await asyncio.sleep(0.05)
    finally:
        await database.close()


# -- report --------------------------------------------------------------------------------


async def _best(scenario: Callable[[Workload], Awaitable[float]], workload: Workload) -> float:
    return max([await scenario(workload) for _ in range(REPEATS)])


async def _fastest_shared(workload: Workload, repeats: int) -> SharedRound:
    """The fastest of ``repeats`` runs; one that gives up after ``TIMEOUT`` is infinite
    (printed as such), so the rest of the table is still printed."""
    rounds = []
    for _ in range(repeats):
        try:
            rounds.append(await shared_round(workload))
        except TimeoutError:
            rounds.append(SharedRound(math.inf, math.inf))
    return min(rounds, key=lambda r: r.seconds)


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if math.isfinite(value) else f"> {TIMEOUT:.0f} s"


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


async def _run() -> None:
    print(load_line())
    if not rabbitmq_available() or not await postgres_available(ADMIN_URL):
        return
    feed = feed_workload()
    print(
        f"feed: {len(feed.messages):,} messages, {feed.results:,} results (seed {SEED}); "
        f"shared hands of {', '.join(f'{n:,}' for n in SHARED_TARGETS)} players "
        f"(those of {SHARED_ONCE:,} or more timed once); best of {REPEATS}"
    )
    publisher = await _best(publisher_alone, feed)
    drained = await _best(functools.partial(raw_baseline, live=False), feed)
    live = await _best(functools.partial(raw_baseline, live=True), feed)
    croupier_drained = await _best(end_to_end_drained, feed)
    croupier_live = await _best(end_to_end_live, feed)
    shared = {}
    for players in SHARED_TARGETS:
        repeats = 1 if players >= SHARED_ONCE else REPEATS
        shared[players] = await _fastest_shared(shared_workload(players), repeats)
    ratio = croupier_drained / drained
    rows = [
        ("studio publisher alone", f"{publisher:,.0f} msg/s", "", "context: bounds live rows"),
        ("raw baseline, queue drained", f"{drained:,.0f} msg/s", "1.00", "anchor"),
        ("raw baseline, while publishing", f"{live:,.0f} msg/s", f"{live / drained:.2f}", ""),
        (
            "croupier end to end, queue drained",
            f"{croupier_drained:,.0f} msg/s",
            f"{ratio:.2f}",
            f">= {TARGET_RATIO:.2f} of the anchor: {_verdict(ratio >= TARGET_RATIO)}",
        ),
        (
            "croupier end to end, while publishing",
            f"{croupier_live:,.0f} msg/s",
            f"{croupier_live / drained:.2f}",
            f"{croupier_live / live:.2f} of the raw baseline while publishing",
        ),
    ]
    for players, target in SHARED_TARGETS.items():
        timed = shared[players]
        rows.append(
            (
                f"shared hand, {players:,} results",
                _seconds(timed.seconds),
                "",
                f"<= {target:g} s: {_verdict(timed.seconds <= target)}; "
                f"service {timed.cpu:.2f} CPU-s meanwhile",
            )
        )
        rows.append(
            (
                "  fact stamped; last confirmed",
                f"{_seconds(timed.stamped)}; {_seconds(timed.confirmed)}",
                "",
                "context: the fact's recorded_at, before its append is written; the last "
                "publish mark",
            )
        )
        rows.append(
            (
                "  another table's round meanwhile",
                _seconds(timed.other_table),
                "",
                "context: published right after round.completed",
            )
        )
    print(f"{'':<38}{'figure':>14}{'ratio':>7}  target")
    for name, figure, ratio_text, goal in rows:
        print(f"{name:<38}{figure:>14}{ratio_text:>7}  {goal}")
    print(load_line())


def run() -> None:
    """Print the service table: baselines, end to end (drained and live), shared hand."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
