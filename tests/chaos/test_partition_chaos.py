"""The partitioned fleet under faults: every round settled exactly once, whoever held its
partition when.

Three ``croupier serve`` processes in partitioned mode (``CROUPIER_PARTITIONED=1``, a 3 s
lease term) share the 8 partitions of a ledger on a PostgreSQL cluster this test starts
itself, consuming the routed feed (``routed_topology``, declared on a RabbitMQ node of its
own). A studio feed over 24 tables (every partition gets some; shared hands and multi-box
tables; no progressive pool: its awards are shares of a level that instances move in an
order of their own, not the replay's) is published in chunks, and right after each chunk,
while the instances settle it, one fault in a seeded order:

- an instance joins and is SIGKILLed within a second of taking its first partition;
- the instance holding the most partitions is paused (SIGSTOP) for twice the term, then
  resumed: its leases expired and were taken, so it must find them lost or its appends
  fenced (counted on its ``/metrics``), never write;
- the database alone is cut from one instance (its database proxy black-holed) while the
  broker alone is cut from another, for three terms; the first must likewise find its
  partitions gone;
- an instance joins and, as soon as it takes a partition (the others giving back theirs),
  another is stopped with SIGTERM: it must exit 0;
- the private PostgreSQL and RabbitMQ are restarted.

Then the harm table of the chaos suite (``chaos_harness``): lost, doubled, differing from
``croupier replay`` of the same feed in a process of its own, and dead-lettered without a
ledger record, all 0; nothing of the feed, valid through and through, rejected or
quarantined; every round closed exactly once with balanced postings; ``croupier verify``
exits 0; no lease is left held after the last graceful stop. The table shows the
fenced appends and the partitions found lost, summed over every instance's last
``/metrics``: a fenced append is the design at work, a doubled round would be harm.

``make test`` runs the short form; ``make chaos`` sets ``CROUPIER_CHAOS=full`` (five times
the rounds, every fault twice). ``CROUPIER_CHAOS_SEED`` picks the seed.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
from chaos_harness import (
    Fleet,
    Harm,
    in_chunks,
    measure_harm,
    metric_sum,
    publish_retrying,
    received,
    replay_results,
    take_dead_letters,
)
from integration.service.service_harness import (
    ServeProcess,
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    eventually,
    http_get,
    leases,
    ledger_events,
    partitioned_feed,
    played_tables,
    prepare_partitioned,
    round_streams,
)
from private_services import PrivatePostgres, PrivateRabbitMQ, private_postgres, private_rabbitmq

from croupier.bus.topology import UNROUTED_QUEUE, partition_queue
from croupier.ledger.signing import PUBLIC_KEY_FILE
from croupier.settlement.round import REJECTED

pytestmark = pytest.mark.integration
LOGS = Path(tempfile.gettempdir()) / "croupier-partition-chaos-last"

PARTITIONS = 8
TERM = 3.0
ENV = {"CROUPIER_PARTITIONED": "1", "CROUPIER_PARTITION_TERM": str(TERM)}
#: How long a network stays cut: three terms, past the broker's heartbeat timeout too.
CUT_SECONDS = 3 * TERM

JOIN_KILL = "join, SIGKILL within 1 s"
PAUSE = "SIGSTOP for two terms"
CUTS = "database cut from one, broker from another"
TERM_IN_HANDOVER = "SIGTERM during a handover"
DATABASE_RESTART = "PostgreSQL restart"
BROKER_RESTART = "RabbitMQ restart"
FAULTS = (JOIN_KILL, PAUSE, CUTS, TERM_IN_HANDOVER, DATABASE_RESTART, BROKER_RESTART)


@dataclass(frozen=True)
class Scale:
    rounds: int
    #: Tables of each of the two kinds (classic of shared hands, standard of boxes).
    tables: int
    rounds_of_faults: int


SHORT = Scale(rounds=120, tables=12, rounds_of_faults=1)
FULL = Scale(rounds=600, tables=16, rounds_of_faults=2)


def scale() -> Scale:
    return FULL if os.environ.get("CROUPIER_CHAOS") == "full" else SHORT


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[PrivatePostgres, PrivateRabbitMQ]]:
    with private_postgres() as database, private_rabbitmq() as broker:
        yield database, broker


@pytest.mark.long
async def test_partitioned_instances_settle_every_round_once_under_faults(
    private: tuple[PrivatePostgres, PrivateRabbitMQ], tmp_path: Path
) -> None:
    database, broker = private
    size = scale()
    seed = int(os.environ.get("CROUPIER_CHAOS_SEED", "9"))
    rng = random.Random(seed)
    database_url = database.database_url("croupier")
    amqp_url = broker.url

    feed = partitioned_feed("pchaos", size.rounds, seed=seed, tables=size.tables)
    tables = played_tables(feed)
    await prepare_partitioned(database_url, amqp_url, PARTITIONS, {t.table_id for t in tables})
    faults = _faults(size.rounds_of_faults, rng)
    chunks = in_chunks(feed, len(faults) + 1)
    harm = Harm()
    wallet = Wallet(amqp_url)
    fleet = Fleet(database_url, amqp_url, tmp_path, env=ENV)
    chaos = Chaos(fleet, database, broker, harm, rng)

    try:
        await fleet.start(3)
        await eventually(chaos.shared, 60, "each of the three instances holds partitions")
        for index, chunk in enumerate(chunks):
            await publish_retrying(chunk, amqp_url)
            if index < len(faults):  # at once: the instances are settling the chunk
                await chaos.inject(faults[index])
            await wallet.drain()

        replayed = await asyncio.to_thread(replay_results, feed, tmp_path)
        await eventually(lambda: _drained(broker), 300, "every feed queue drained", every=1)
        await received(wallet, replayed.keys(), timeout=180)
        harm.rss_before_kib = max(fleet.rss_ready)
        harm.rss_after_kib = max(fleet.rss_now())
        for instance in fleet.alive():
            await chaos.sample(instance)
            instance.process.send_signal(signal.SIGTERM)
        for instance in fleet.alive():
            assert await instance.exit_code() == 0, instance.tail()
    finally:
        fleet.stop_all()
        shutil.copytree(tmp_path, LOGS, dirs_exist_ok=True)  # the last run's, to read

    events = await ledger_events(database_url)
    parked = await take_dead_letters(amqp_url)
    measure_harm(harm, feed, events, wallet, replayed, parked)
    rejected = [e for e in events if e.type == REJECTED]  # the feed is valid through and through
    harm.seen["rejected or quarantined"] = f"{len(rejected)}"
    harm.notes += [f"rejected {e.data['code']}: {e.data['reason']!s:.160}" for e in rejected[:5]]
    harm.seen["fenced appends seen"] = f"{sum(chaos.fenced.values()):.0f}"
    harm.seen["partitions found lost"] = f"{sum(chaos.lost.values()):.0f}"
    print("\n" + harm.render("partition chaos run"))
    assert sum(harm.faults.values()) == len(faults), harm.faults
    assert harm.rounds_settled == len(tables) and harm.bets_compared > 0, harm.render()
    assert harm.harms() == dict.fromkeys(Harm.HARM, 0), harm.render()
    assert not rejected, harm.render()  # a valid message refused, or settled as a poison one
    assert_one_closure_per_round(events, round_streams(tables))
    assert_postings_balance(events)
    assert set((await leases(database_url)).values()) == {None}, "a lease left held"
    verified = await asyncio.to_thread(_verify, database_url, tmp_path / "keys" / PUBLIC_KEY_FILE)
    assert verified.returncode == 0, f"croupier verify:\n{verified.stdout}\n{verified.stderr}"


def _faults(rounds: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    for _ in range(rounds):
        batch = list(FAULTS)
        rng.shuffle(batch)
        out += batch
    return out


def of(instance: ServeProcess) -> str:
    """The part of an instance id that names its process (``host:pid:random``)."""
    return f":{instance.process.pid}:"


@dataclass
class Chaos:
    """The faults, and what each instance's ``/metrics`` last said of fencing."""

    fleet: Fleet
    database: PrivatePostgres
    broker: PrivateRabbitMQ
    harm: Harm
    rng: random.Random
    #: Per process: fenced appends and partitions found lost, as last sampled.
    fenced: dict[int, float] = field(default_factory=dict)
    lost: dict[int, float] = field(default_factory=dict)

    async def sample(self, instance: ServeProcess) -> float:
        """Sample ``instance``'s fenced appends and lost partitions; their sum so far."""
        pid = instance.process.pid
        fenced = await metric_sum(instance, "croupier_appends_fenced_total{")
        lost = await metric_sum(instance, 'croupier_partition_handovers_total{how="lost"}')
        if fenced >= 0:
            self.fenced[pid] = max(self.fenced.get(pid, 0), fenced)
        if lost >= 0:
            self.lost[pid] = max(self.lost.get(pid, 0), lost)
        return self.fenced.get(pid, 0) + self.lost.get(pid, 0)

    async def held(self) -> dict[int, int]:
        """Per live process: how many partitions it holds unexpired."""
        owners = list((await leases(self.fleet.database_url)).values())
        return {
            i.process.pid: sum(1 for o in owners if o and of(i) in o) for i in self.fleet.alive()
        }

    async def shared(self) -> bool:
        return all(n > 0 for n in (await self.held()).values())

    async def busiest(self, but: ServeProcess | None = None) -> ServeProcess:
        """The live instance holding the most partitions (other than ``but``)."""
        held = await self.held()
        candidates = [i for i in self.fleet.alive() if i is not but]
        return max(candidates, key=lambda i: held.get(i.process.pid, 0))

    async def join(self) -> ServeProcess:
        """A new instance, once it holds a partition (taken from the others' share)."""
        joiner = self.fleet.spawn()

        async def holds() -> bool:
            assert joiner.process.poll() is None, joiner.tail()
            return (await self.held()).get(joiner.process.pid, 0) > 0

        await eventually(holds, 120, "the joining instance takes a partition", every=0.1)
        return joiner

    async def found_fenced(self, victim: ServeProcess, before: float, what: str) -> None:
        async def fenced() -> bool:
            return await self.sample(victim) > before

        await eventually(fenced, 60, f"{what}: partitions found lost or appends fenced")

    async def inject(self, fault: str) -> None:
        self.harm.faults[fault] += 1
        if fault == JOIN_KILL:
            joiner = await self.join()
            await asyncio.sleep(self.rng.uniform(0, 1))
            await self.sample(joiner)
            joiner.process.send_signal(signal.SIGKILL)
            assert await joiner.exit_code() == -signal.SIGKILL
        elif fault == PAUSE:
            victim = await self.busiest()
            before = await self.sample(victim)
            victim.process.send_signal(signal.SIGSTOP)
            try:
                await asyncio.sleep(2 * TERM)
            finally:
                victim.process.send_signal(signal.SIGCONT)
            await self.found_fenced(victim, before, "resumed after SIGSTOP")
        elif fault == CUTS:
            no_database = await self.busiest()
            no_broker = await self.busiest(but=no_database)
            before = await self.sample(no_database)
            self.fleet.cut(no_database, off=True, broker=False)
            self.fleet.cut(no_broker, off=True, database=False)
            try:
                await asyncio.sleep(CUT_SECONDS)
            finally:
                self.fleet.cut(no_database, off=False, broker=False)
                self.fleet.cut(no_broker, off=False, database=False)
            await self.found_fenced(no_database, before, "its database reached again")
        elif fault == TERM_IN_HANDOVER:
            joiner = await self.join()
            leaving = await self.busiest(but=joiner)
            await self.sample(leaving)
            leaving.process.send_signal(signal.SIGTERM)
            assert await leaving.exit_code() == 0, leaving.tail()
        elif fault == DATABASE_RESTART:
            await asyncio.to_thread(self.database.stop)
            await asyncio.sleep(2)
            await asyncio.to_thread(self.database.start)
            connection = await asyncpg.connect(self.database.url, timeout=10)
            await connection.close()
        elif fault == BROKER_RESTART:
            await asyncio.to_thread(self.broker.stop)
            await asyncio.sleep(2)
            await asyncio.to_thread(self.broker.start)
        for instance in self.fleet.alive():
            try:
                await instance.ready(timeout=180)
            except AssertionError as error:
                checks = await _readiness(instance)
                raise AssertionError(f"after {fault}: {error}\n{checks}{instance.tail()}") from None


async def _readiness(instance: ServeProcess) -> str:
    """What ``/readyz`` says of each check (or why it does not answer)."""
    try:
        return (await http_get(instance.port, "/readyz", timeout=5))[1]
    except (OSError, TimeoutError) as error:
        return f"/readyz: {error!r}\n"


async def _drained(broker: PrivateRabbitMQ) -> bool:
    """Whether every partition queue and the unrouted queue is empty (nothing ready or
    unacknowledged)."""
    wanted = {partition_queue(p, PARTITIONS) for p in range(PARTITIONS)} | {UNROUTED_QUEUE}
    listing = await asyncio.to_thread(
        broker.ctl, "list_queues", "-q", "--no-table-headers", "name", "messages"
    )
    counts = dict(row.strip().partition("\t")[::2] for row in listing.splitlines() if row.strip())
    return all(counts.get(name, "").strip() == "0" for name in wanted)


def _verify(database_url: str, public_key: Path) -> subprocess.CompletedProcess[str]:
    """``croupier verify`` of the ledger against the fleet's signing key."""
    command = [sys.executable, "-m", "croupier.cli", "verify", "--ledger", database_url]
    return subprocess.run(
        [*command, "--public-key", str(public_key)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
