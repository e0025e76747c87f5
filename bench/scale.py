"""Scaling out: 1, 2 and 4 ``croupier serve`` processes draining one routed backlog.

What is measured, on the real RabbitMQ and PostgreSQL of this machine:

- **The backlog.** A studio feed of at least ``MESSAGES`` messages (200,000;
  ``CROUPIER_BENCH_SCALE_MESSAGES`` for a smaller run) over :data:`TABLE_SPECS`: 64 tables
  of both games (Casino Hold'em and Texas Hold'em Plus), shared hands and multi-box tables,
  and progressive tables whose pool (one meter per pay table and currency) is shared across
  tables that land in different partitions. No faults, no timeouts: every round closes.
- **Each N** (1, 2, 4; ``CROUPIER_BENCH_SCALE_INSTANCES``): a fresh scratch vhost and a fresh
  scratch database, migrated by its owner with the partitions a ledger is created with (64)
  and a service role for the instances. The routed topology is declared, every table of the
  backlog bound to its partition queue (what the router does for a table it sees first), and
  the same backlog published through ``studio.feed`` as the studio publishes it (confirms);
  the publish is checked to have left every message in a partition queue and none
  unrouted. A wallet queue is bound to ``croupier.settlements`` first. Then N ``croupier serve``
  processes (``CROUPIER_PARTITIONED=1``, each its own instance id and probe port, sharing one
  signing key) are started together, and timed from just before the first is started to the
  wallet holding every expected settlement result (deduplicated on ``message_id``; expected:
  one per player and currency of each round, as the service tests count them).
- **CPU.** User plus system CPU-seconds of each ``serve`` process from ``/proc/<pid>/stat``
  (process CPU, not wall time: on 2 cores, 4 instances share them), read at the last
  result, summed over the instances, per 1,000 backlog messages: C(N). Its start-up (CPU
  used by when ``/readyz`` first answers) is included, and also printed apart, with C(N)
  and E(N) without it for context (what draining costs). Efficiency
  ``E(N) = C(1) / C(N)``. The database's CPU: the PostgreSQL server's own processes and
  the backends of the scratch database (``pg_stat_activity``), from ``/proc``
  over the same interval (a backend that ended before the last result is not counted); the
  broker's: every ``beam.smp`` process (the whole broker, so anything else on it counts too).
- **Balance.** Feed messages each instance consumed, read from its own
  ``croupier_events_consumed_total`` on ``/metrics`` at the last result: max over mean.
  For context, from the same ``/metrics``: messages per batch, partitions taken, released
  and lost, fenced appends, the seconds the ledger's append lock was held (summed over the
  instances: the share of the drain its one writer was busy, and the rate at which it would
  be busy all the time); and the load average as the instances start and at the end.
- **Correctness**, printed per N: every round of the backlog closed exactly once in the
  ledger and none other; the wallet received exactly the expected results; no message
  dead-lettered; nothing in the ``rejections`` stream that the single-instance run did not
  also reject (by event id).
- **The anchors**: ``bench.service``'s raw pipeline (consume + COPY + multiple ack), queue
  drained, on its own feed, in the same sitting; and the machine's own E(N)
  (:func:`machine_efficiency`): the same pure Python work (deciding a fixed feed) done by
  one process alone and by N at once, so that E(N) can be read against what sharing the
  cores costs any process here.

Targets are printed beside the figures (E(2) >= 0.9, E(4) >= 0.8, balance <= 1.5), never
asserted. Scratch vhosts, databases and service roles are dropped afterwards; the ``serve``
processes are always killed.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import asyncpg
from aio_pika.abc import AbstractIncomingMessage

from bench.replay import (
    ADMIN_URL,
    decide_only,
    load_line,
    make_feed,
    postgres_available,
    scratch_database,
)
from bench.service import (
    feed_workload,
    rabbitmq_available,
    raw_baseline,
    scratch_vhost,
)
from croupier.bus import DEAD_LETTER_QUEUE, SETTLEMENTS_EXCHANGE
from croupier.bus.amqp import declare_topology
from croupier.bus.topology import (
    ROUTED_EXCHANGE,
    UNROUTED_QUEUE,
    partition_queue,
    routed_topology,
    table_binding,
)
from croupier.ledger.partitions import partition_of
from croupier.ledger.signing import PRIVATE_KEY_FILE, LedgerKey
from croupier.settlement.results import message_id
from croupier.settlement.round import SETTLED, VOIDED, stream_name
from floor.fleet import free_port, serve_partitioned
from studio.config import StudioConfig, TableSpec, parse_table_specs
from studio.feed import FeedMessage, simulate
from studio.publisher import declare_feed_exchange, publish_on

MESSAGES = int(os.environ.get("CROUPIER_BENCH_SCALE_MESSAGES", "200000"))
INSTANCES = tuple(
    int(n) for n in os.environ.get("CROUPIER_BENCH_SCALE_INSTANCES", "1,2,4").split(",")
)
SEED = 20261204
#: 64 tables: both games, shared hands and boxes, two progressive pools' worth of tables
#: (shared hands and boxes) feeding the one progressive meter per currency.
TABLE_SPECS = (
    "classic*16:shared=40",
    "royal-20*12:boxes=7",
    "progressive*10:shared=30",
    "progressive*6:boxes=5",
    "standard*14:shared=40",
    "standard*6:boxes=6",
)
SIDE_BET_RATE = 0.4
PUBLISH_WINDOW = 512
#: Seconds for the instances to drain the backlog before the run is given up.
TIMEOUT = 1800.0
TARGETS = {2: 0.9, 4: 0.8}
TARGET_BALANCE = 1.5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- the backlog ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Backlog:
    """A feed, the rounds it closes and the settlement results it must produce."""

    messages: list[FeedMessage]
    tables: frozenset[str]
    rounds: frozenset[str]
    results: frozenset[str]


def build_backlog(messages: int = MESSAGES, seed: int = SEED) -> Backlog:
    """At least ``messages`` feed messages over :data:`TABLE_SPECS`, whole rounds only."""
    tables = parse_table_specs(list(TABLE_SPECS), prefix="scale")
    pilot = list(simulate(_config(tables, 2 * len(tables), seed)))
    rounds = max(1, math.ceil(messages / (len(pilot) / (2 * len(tables))) * 1.02))
    while len(feed := list(simulate(_config(tables, rounds, seed)))) < messages:
        rounds = math.ceil(rounds * 1.05)
    return backlog_of(feed)


def _config(tables: tuple[TableSpec, ...], rounds: int, seed: int) -> StudioConfig:
    return StudioConfig(
        tables=tables,
        rounds=rounds,
        seed=seed,
        side_bet_rate=SIDE_BET_RATE,
    )


def backlog_of(feed: list[FeedMessage]) -> Backlog:
    """The rounds ``feed`` closes and its results: one per player and currency of each
    closed round (how the service tests count them, ``service_harness.expected_results``)."""
    closed: set[tuple[str, str]] = set()
    owners: set[tuple[str, str, str, str]] = set()
    for m in feed:
        event = m.event
        if event is None:
            continue
        key = (event["table_id"], event["round_id"])
        if event["event_type"] == "bet.placed":
            payload = event["payload"]
            owners.add((*key, payload["player_id"], payload["currency"]))
        elif event["event_type"] in ("round.completed", "round.voided"):
            closed.add(key)
    return Backlog(
        feed,
        frozenset(m.event["table_id"] for m in feed if m.event is not None),
        frozenset(stream_name(t, r) for t, r in closed),
        frozenset(message_id(t, r, p, c) for t, r, p, c in owners if (t, r) in closed),
    )


# -- /proc ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User plus system CPU-seconds of process ``pid`` so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def processes_named(name: str) -> dict[int, float]:
    """Process id -> CPU-seconds of every process whose command is ``name``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as comm:
                if comm.read().strip() != name:
                    continue
        except OSError:
            continue
        found[int(entry)] = cpu_seconds(int(entry))
    return found


async def database_pids(admin_url: str, database: str) -> set[int]:
    """The server's own processes and the backends of ``database``."""
    admin = await asyncpg.connect(admin_url, timeout=10)
    try:
        rows = await admin.fetch(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = $1 OR backend_type <> 'client backend'",
            database,
        )
    finally:
        await admin.close()
    return {int(r["pid"]) for r in rows}


# -- the instances -------------------------------------------------------------------------


@dataclass
class Instance:
    """One ``croupier serve`` process, its probe port, its log, and the CPU it had used by
    the time it first answered ``/readyz``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    startup_cpu: float = math.nan

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


def start_instance(database_url: str, amqp_url: str, key: Path, log: Path) -> Instance:
    """``croupier serve`` in the partitioned mode, as the service role of ``database_url``."""
    port = free_port()
    return Instance(serve_partitioned(database_url, amqp_url, key, port, log), port, log)


@contextmanager
def instances_killed(started: list[Instance]) -> Iterator[list[Instance]]:
    """``started`` (filled by the caller), every one killed on the way out if still running."""
    try:
        yield started
    finally:
        for instance in started:
            if instance.process.poll() is None:
                instance.process.kill()
            instance.process.wait(30)


async def stop_instances(started: Sequence[Instance], timeout: float = 60) -> None:
    """SIGTERM each, then wait for them to exit (killed after ``timeout``)."""
    for instance in started:
        if instance.process.poll() is None:
            instance.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for instance in started:
        try:
            await asyncio.to_thread(instance.process.wait, max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            instance.process.kill()


async def http_get(port: int, path: str, timeout: float = 10) -> tuple[int, str]:
    """(status, body) of ``GET path`` on 127.0.0.1:``port``."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            await writer.drain()
            response = await reader.read()
        finally:
            writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


async def note_ready(instance: Instance, timeout: float = 120) -> None:
    """Wait for ``/readyz`` to answer 200; note the CPU the process had used by then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if instance.process.poll() is not None:
            raise RuntimeError(f"croupier serve exited:\n{instance.tail()}")
        try:
            if (await http_get(instance.port, "/readyz", timeout=5))[0] == 200:
                instance.startup_cpu = cpu_seconds(instance.process.pid)
                return
        except (OSError, TimeoutError, IndexError, ValueError):
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError(f"croupier serve not ready in {timeout:.0f} s:\n{instance.tail()}")


def metric_sum(text: str, name: str) -> float:
    """The sum of the samples of ``name`` in a Prometheus exposition: every label set, or
    the one named (``name`` written with its labels, ``x_total{how="taken"}``)."""
    total = 0.0
    for row in text.splitlines():
        key = row.rsplit(" ", 1)[0]
        if key == name or (not name.endswith("}") and key.startswith(f"{name}{{")):
            total += float(row.rsplit(" ", 1)[1])
    return total


@dataclass(frozen=True)
class Scraped:
    """What one instance's ``/metrics`` said at the last result."""

    consumed: float
    batches: float
    taken: float
    released: float
    lost: float
    fenced: float
    lost_races: float
    lock_held: float

    @classmethod
    def of(cls, text: str) -> Scraped:
        handovers = "croupier_partition_handovers_total"
        return cls(
            consumed=metric_sum(text, "croupier_events_consumed_total"),
            batches=metric_sum(text, "croupier_batch_messages_count"),
            taken=metric_sum(text, f'{handovers}{{how="taken"}}'),
            released=metric_sum(text, f'{handovers}{{how="released"}}'),
            lost=metric_sum(text, f'{handovers}{{how="lost"}}'),
            fenced=metric_sum(text, "croupier_appends_fenced_total"),
            lost_races=metric_sum(text, 'croupier_batch_retries_total{reason="lost_race"}'),
            lock_held=metric_sum(text, "croupier_append_lock_held_seconds_total"),
        )


# -- the wallet ----------------------------------------------------------------------------


@dataclass
class Wallet:
    """Settlement results by ``message_id``; set ``done`` once every expected one is in."""

    expected: frozenset[str]
    seen: set[str] = field(default_factory=set)
    received: int = 0
    finished: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self, message: AbstractIncomingMessage) -> None:
        self.received += 1
        if message.message_id and message.message_id not in self.seen:
            self.seen.add(message.message_id)
            if not self.done.is_set() and self.expected <= self.seen:
                self.finished = time.monotonic()
                self.done.set()


# -- one run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checks:
    """What a run's ledger and wallet hold against what the backlog should settle to."""

    closed_twice: int
    rounds_missing: int
    rounds_unexpected: int
    results_missing: int
    results_unexpected: int
    dead_lettered: int
    rejected: frozenset[str]

    def problems(self, rejected_alone: frozenset[str] | None) -> list[str]:
        """What is wrong, in words; empty when the run settled the backlog correctly.
        ``rejected_alone``: what the single-instance run rejected (None: this is it)."""
        found = [
            f"{n} {what}"
            for n, what in (
                (self.closed_twice, "rounds closed more than once"),
                (self.rounds_missing, "rounds not closed"),
                (self.rounds_unexpected, "unexpected rounds closed"),
                (self.results_missing, "results missing at the wallet"),
                (self.results_unexpected, "unexpected results at the wallet"),
                (self.dead_lettered, "messages dead-lettered"),
            )
            if n
        ]
        extra = self.rejected - (rejected_alone or frozenset())
        if rejected_alone is not None and extra:
            found.append(f"{len(extra)} rejected that one instance did not reject")
        return found


@dataclass(frozen=True)
class Run:
    """One N: seconds to the last result, each instance's CPU and messages, the database's
    and broker's CPU over the drain, and the checks."""

    instances: int
    messages: int
    seconds: float
    instance_cpu: tuple[float, ...]
    startup_cpu: tuple[float, ...]
    scraped: tuple[Scraped, ...]
    database_cpu: float
    broker_cpu: float
    #: The 1-minute load average as the instances started, and at the last result.
    load: tuple[float, float]
    checks: Checks

    @property
    def consumed(self) -> tuple[float, ...]:
        """Feed messages each instance consumed (its ``croupier_events_consumed_total``)."""
        return tuple(s.consumed for s in self.scraped)

    def per_thousand(self, cpu: float) -> float:
        return cpu * 1000 / self.messages

    @property
    def cpu(self) -> float:
        """C(N): instance CPU-seconds per 1,000 backlog messages, summed over instances."""
        return self.per_thousand(sum(self.instance_cpu))

    @property
    def drain_cpu(self) -> float:
        """C(N) without the instances' start-up (CPU used by when each first answered
        ``/readyz``): what draining costs, for capacity planning."""
        return self.per_thousand(sum(self.instance_cpu) - sum(self.startup_cpu))

    @property
    def balance(self) -> float:
        """Messages consumed per instance, max over mean."""
        mean = sum(self.consumed) / len(self.consumed)
        return max(self.consumed) / mean if mean else math.inf


@asynccontextmanager
async def service_role(admin_url: str) -> AsyncIterator[str]:
    """A login role name for the instances (``migrate --service-role`` makes it); dropped
    afterwards (after the scratch database that holds its grants)."""
    role = f"croupier_bench_svc_{uuid.uuid4().hex[:12]}"
    try:
        yield role
    finally:
        admin = await asyncpg.connect(admin_url, timeout=10)
        try:
            await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        finally:
            await admin.close()


def with_user(url: str, user: str) -> str:
    """``url`` with its user replaced and no password (the local server trusts local users)."""
    parts = urlsplit(url)
    netloc = f"{user}@{parts.hostname or '127.0.0.1'}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def migrate(owner_url: str, role: str) -> None:
    """``croupier migrate --service-role``, as the owner, with the default partitions."""
    service = ["--service-role", role]
    done = subprocess.run(
        [sys.executable, "-m", "croupier.cli", "migrate", "--ledger", owner_url, *service],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"croupier migrate failed: {done.stderr}")


async def partition_count(owner_url: str) -> int:
    connection = await asyncpg.connect(owner_url, timeout=10)
    try:
        return int(await connection.fetchval("SELECT count FROM ledger_partitions"))
    finally:
        await connection.close()


async def prepublish(url: str, backlog: Backlog, count: int) -> None:
    """The routed topology of ``count`` partitions, every table of ``backlog`` bound to its
    partition queue (as the router binds a new table), and the backlog published to
    ``studio.feed`` with confirms. Checked: every message in a partition queue."""
    connection = await aio_pika.connect(url, timeout=30)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await declare_topology(channel, routed_topology(count))
        for table in sorted(backlog.tables):
            queue = await channel.get_queue(
                partition_queue(partition_of(table, count), count), ensure=False
            )
            await queue.bind(ROUTED_EXCHANGE, table_binding(table))
        await declare_feed_exchange(channel)
        await publish_on(channel, backlog.messages, window=PUBLISH_WINDOW)
        queued = 0
        for partition in range(count):
            declared = await channel.declare_queue(partition_queue(partition, count), passive=True)
            queued += declared.declaration_result.message_count or 0
        unrouted = await channel.declare_queue(UNROUTED_QUEUE, passive=True)
    if unrouted.declaration_result.message_count or queued != len(backlog.messages):
        raise RuntimeError(
            f"published {len(backlog.messages):,}, {queued:,} in the partition queues, "
            f"{unrouted.declaration_result.message_count} unrouted"
        )


async def check_ledger(owner_url: str, amqp_url: str, backlog: Backlog, wallet: Wallet) -> Checks:
    """Compare the ledger and the wallet with what ``backlog`` should settle to."""
    connection = await asyncpg.connect(owner_url, timeout=10)
    try:
        rows = await connection.fetch(
            "SELECT stream, count(*) AS n FROM events WHERE type = ANY($1::text[]) GROUP BY stream",
            [SETTLED, VOIDED],
        )
        rejected = await connection.fetch(
            "SELECT data::jsonb ->> 'event_id' AS event_id, key FROM events "
            "WHERE stream = 'rejections'"
        )
    finally:
        await connection.close()
    closed = {r["stream"]: int(r["n"]) for r in rows}
    amqp = await aio_pika.connect(amqp_url, timeout=30)
    async with amqp:
        channel = await amqp.channel()
        letters = await channel.declare_queue(DEAD_LETTER_QUEUE, passive=True)
        dead = letters.declaration_result.message_count or 0
    return Checks(
        closed_twice=sum(1 for n in closed.values() if n > 1),
        rounds_missing=len(backlog.rounds - closed.keys()),
        rounds_unexpected=len(closed.keys() - backlog.rounds),
        results_missing=len(backlog.results - wallet.seen),
        results_unexpected=len(wallet.seen - backlog.results),
        dead_lettered=dead,
        rejected=frozenset(r["event_id"] or r["key"] for r in rejected),
    )


@dataclass(frozen=True)
class Services:
    """Where the scratch vhosts and databases come from, and the PostgreSQL superuser URL
    that drops the service roles and reads ``pg_stat_activity``."""

    admin_url: str = ADMIN_URL
    vhost: Callable[[], AbstractAsyncContextManager[str]] = scratch_vhost
    database: Callable[[], AbstractAsyncContextManager[str]] = scratch_database


async def run_instances(backlog: Backlog, n: int, services: Services | None = None) -> Run:
    """Drain ``backlog``, pre-published, with ``n`` ``croupier serve`` processes."""
    services = services or Services()
    admin_url = services.admin_url
    wallet = Wallet(backlog.results)
    with tempfile.TemporaryDirectory(prefix="croupier-bench-scale-") as folder:
        workdir = Path(folder)
        LedgerKey.generate().write(workdir / "keys")
        key = workdir / "keys" / PRIVATE_KEY_FILE
        async with (
            service_role(admin_url) as role,
            services.vhost() as url,
            services.database() as owner_url,
        ):
            await asyncio.to_thread(migrate, owner_url, role)
            count = await partition_count(owner_url)
            connection = await aio_pika.connect(url, timeout=30)
            async with connection:
                channel = await connection.channel()
                await declare_topology(channel, routed_topology(count))
                settlements = await channel.get_exchange(SETTLEMENTS_EXCHANGE)
                queue = await channel.declare_queue(exclusive=True)
                await queue.bind(settlements, "#")
                await prepublish(url, backlog, count)
                await queue.consume(wallet.receive, no_ack=True)
                database = urlsplit(owner_url).path.lstrip("/")
                postgres_before = processes_named("postgres")
                broker_before = processes_named("beam.smp")
                started: list[Instance] = []
                with instances_killed(started):
                    load = os.getloadavg()[0]
                    began = time.monotonic()
                    for i in range(n):
                        log = workdir / f"serve-{i}.log"
                        started.append(start_instance(with_user(owner_url, role), url, key, log))
                    await asyncio.gather(*(note_ready(s) for s in started))
                    await _drained(wallet, started)
                    instance_cpu = tuple(cpu_seconds(s.process.pid) for s in started)
                    ours = await database_pids(admin_url, database)
                    postgres_after = processes_named("postgres")
                    broker_after = processes_named("beam.smp")
                    load_after = os.getloadavg()[0]
                    scraped = []
                    for s in started:
                        _, text = await http_get(s.port, "/metrics")
                        scraped.append(Scraped.of(text))
                    await stop_instances(started)
                checks = await check_ledger(owner_url, url, backlog, wallet)
    return Run(
        instances=n,
        messages=len(backlog.messages),
        seconds=wallet.finished - began,
        instance_cpu=instance_cpu,
        startup_cpu=tuple(s.startup_cpu for s in started),
        scraped=tuple(scraped),
        database_cpu=sum(
            cpu - postgres_before.get(pid, 0.0)
            for pid, cpu in postgres_after.items()
            if pid in ours
        ),
        broker_cpu=sum(cpu - broker_before.get(pid, 0.0) for pid, cpu in broker_after.items()),
        load=(load, load_after),
        checks=checks,
    )


async def _drained(wallet: Wallet, started: Sequence[Instance]) -> None:
    """Wait for the wallet to hold every expected result; fail on an instance's exit."""
    deadline = time.monotonic() + TIMEOUT
    while not wallet.done.is_set():
        for s in started:
            if s.process.poll() is not None:
                raise RuntimeError(f"croupier serve exited:\n{s.tail()}")
        if time.monotonic() > deadline:
            missing = len(wallet.expected - wallet.seen)
            raise TimeoutError(f"{missing:,} results still missing after {TIMEOUT:.0f} s")
        with suppress(TimeoutError):
            await asyncio.wait_for(wallet.done.wait(), 1.0)


# -- the machine's own anchor -------------------------------------------------------------


#: Rounds of ``bench.replay``'s feed each process decides for the machine's anchor (about
#: two CPU-seconds on a fast core).
MACHINE_ROUNDS = 1_100


def machine_efficiency(
    instances: Sequence[int] = INSTANCES, rounds: int = MACHINE_ROUNDS
) -> dict[int, float]:
    """N -> the machine's own E(N): CPU-seconds a process takes to decide a fixed feed
    (``bench.replay``'s deciding alone: pure Python, no broker, no database) alone, over the
    mean of the same with N processes deciding it at once. What sharing these cores costs
    any Python work, apart from Croupier's."""
    alone = _decide_at_once(1, rounds)
    return {n: alone / (alone if n == 1 else _decide_at_once(n, rounds)) for n in instances}


def _decide_at_once(n: int, rounds: int) -> float:
    """The mean CPU-seconds of ``n`` processes, started together, each deciding the feed.

    Each is a fresh interpreter in the project's root (nothing inherited from this one but
    the environment): it builds the feed, says ``ready``, waits for ``go`` and prints what
    deciding cost it. One that dies says nothing, and the anchor fails at once."""
    root = Path(__file__).resolve().parents[1]
    code = f"from bench.scale import decide_when_told; decide_when_told({rounds})"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        for _ in range(n)
    ]
    try:
        said = [_line(worker) for worker in workers]
        if said != [b"ready"] * n:
            raise RuntimeError(f"a process of the machine anchor did not start: {said}")
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            worker.stdin.flush()
        spent = [float(_line(worker) or "nan") for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait(30)
    if not all(math.isfinite(cpu) for cpu in spent):
        raise RuntimeError("a process of the machine anchor died while deciding")
    return sum(spent) / n


def _line(worker: subprocess.Popen[bytes]) -> bytes:
    assert worker.stdout is not None
    return worker.stdout.readline().strip()


def decide_when_told(rounds: int) -> None:
    """One process of the machine anchor: build the feed, say ``ready``, wait for ``go`` on
    standard input, decide the feed and print its CPU-seconds."""
    feed = make_feed(rounds)
    print("ready", flush=True)
    sys.stdin.readline()
    _, cpu = asyncio.run(decide_only(feed))
    print(cpu, flush=True)


# -- the report ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """Every run, and whether each settled the backlog correctly."""

    backlog: int
    tables: int
    results: int
    runs: tuple[Run, ...]

    def problems(self) -> dict[int, list[str]]:
        """N -> what was wrong in its run (empty lists: all correct)."""
        alone = next((r.checks.rejected for r in self.runs if r.instances == 1), None)
        return {
            r.instances: r.checks.problems(None if r.instances == 1 else alone) for r in self.runs
        }

    @property
    def correct(self) -> bool:
        return not any(self.problems().values())


async def measure(
    messages: int = MESSAGES, instances: Sequence[int] = INSTANCES, services: Services | None = None
) -> Report:
    """Build the backlog and drain it with each number of ``instances``, in order."""
    backlog = build_backlog(messages)
    runs = []
    for n in instances:
        runs.append(await run_instances(backlog, n, services))
    return Report(len(backlog.messages), len(backlog.tables), len(backlog.results), tuple(runs))


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def print_report(
    report: Report, anchor: float | None, machine: Mapping[int, float] | None = None
) -> None:
    """The table of figures, targets beside them, the machine's own E(N) (``machine``, from
    :func:`machine_efficiency`) and the correctness checks."""
    print(
        f"backlog: {report.backlog:,} messages over {report.tables} tables, "
        f"{report.results:,} settlement results (seed {SEED})"
    )
    if anchor is not None:
        print(f"raw pipeline anchor (bench.service, queue drained): {anchor:,.0f} msg/s")
    one = next((r for r in report.runs if r.instances == 1), None)
    print(
        f"{'N':>2} {'CPU-s/1k':>9} {'E(N)':>6} {'balance':>8} {'db CPU-s/1k':>12} "
        f"{'broker/1k':>10} {'msg/s':>8} {'startup CPU-s':>14}  targets"
    )
    for run in report.runs:
        efficiency = one.cpu / run.cpu if one else math.nan
        targets = []
        if run.instances in TARGETS:
            target = TARGETS[run.instances]
            targets.append(f"E >= {target}: {_verdict(efficiency >= target)}")
        if run.instances > 1:
            targets.append(
                f"balance <= {TARGET_BALANCE}: {_verdict(run.balance <= TARGET_BALANCE)}"
            )
        print(
            f"{run.instances:>2} {run.cpu:>9.3f} {efficiency:>6.2f} {run.balance:>8.2f} "
            f"{run.per_thousand(run.database_cpu):>12.3f} "
            f"{run.per_thousand(run.broker_cpu):>10.3f} "
            f"{run.messages / run.seconds:>8,.0f} {sum(run.startup_cpu):>14.2f}  "
            + "; ".join(targets)
        )
        batches = sum(s.batches for s in run.scraped)
        print(
            f"   per instance: CPU-s {', '.join(f'{c:.1f}' for c in run.instance_cpu)}; "
            f"messages {', '.join(f'{c:,.0f}' for c in run.consumed)}"
        )
        drain_efficiency = one.drain_cpu / run.drain_cpu if one else math.nan
        print(
            f"   without start-up (context): CPU-s/1k {run.drain_cpu:.3f}, "
            f"E(N) {drain_efficiency:.2f}"
        )
        print(
            f"   {run.seconds:.1f} s to the last result; "
            f"{sum(run.consumed) / batches if batches else math.nan:,.0f} messages per batch; "
            f"partitions taken {sum(s.taken for s in run.scraped):.0f}, "
            f"released {sum(s.released for s in run.scraped):.0f}, "
            f"lost {sum(s.lost for s in run.scraped):.0f}; "
            f"fenced appends {sum(s.fenced for s in run.scraped):.0f}; "
            f"lost races {sum(s.lost_races for s in run.scraped):.0f}; "
            f"load average {run.load[0]:.1f} -> {run.load[1]:.1f}"
        )
        held = sum(s.lock_held for s in run.scraped)
        busy = held / run.seconds
        print(
            f"   append lock held {held:.1f} s, {busy:.0%} of the drain: the one writer "
            f"would be busy all the time at about {run.messages / run.seconds / busy:,.0f} "
            "msg/s (context)"
            if busy
            else "   append lock: not reported"
        )
    if machine:
        print(
            "the machine's own E(N), deciding alone with N processes at once (context: what "
            "sharing these cores costs any Python work): "
            + ", ".join(f"E({n}) {e:.2f}" for n, e in sorted(machine.items()))
        )
    for n, found in report.problems().items():
        run = next(r for r in report.runs if r.instances == n)
        rejected = f"{len(run.checks.rejected)} rejected"
        print(
            f"correctness N={n}: "
            + ("passed" if not found else "FAILED: " + "; ".join(found))
            + f" (every round closed once, every result at the wallet, {rejected})"
        )
    print("correctness: " + ("passed" if report.correct else "FAILED"))


async def _run() -> None:
    print(load_line())
    if not rabbitmq_available() or not await postgres_available(ADMIN_URL):
        return
    anchor = await raw_baseline(feed_workload(), live=False)
    machine = await asyncio.to_thread(machine_efficiency)
    report = await measure()
    print_report(report, anchor, machine)
    print(load_line())


def run() -> None:
    """Print the scale table: C(N), E(N), balance, database and broker CPU, per N."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
