"""Two ``croupier serve`` instances share the partitions of a routed feed
(``CROUPIER_PARTITIONED=1``) on the real RabbitMQ and PostgreSQL.

The feed of many tables reaches the partition queues through the router (every table is new
to the broker), both instances take half of the ledger's partitions and consume their
queues, then one is killed (SIGKILL) mid-stream. Its partitions must be taken by the other
within the lease term plus 5 s, and every round of the feed must be settled exactly once,
its results published to the wallet, with nothing lost and nothing settled twice. Ten
tables share a progressive pool across partitions held by both instances: the pool's meter
moves in one recorded order, each movement on from the last (a meter's stream versions are
checked by the ledger under its append lock; the instance that loses a race for the next
version forgets its cached level and decides its batch again). An owner paused between
committing a large shared hand and publishing its results leaves them to the instance
that takes its partitions, which publishes them soon after the term.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import asyncpg
import pytest
from conftest import rabbitmqctl
from service_harness import (
    ServeProcess,
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    closed_rounds,
    eventually,
    expected_results,
    http_get,
    leases,
    ledger_events,
    ledger_returned,
    partitioned_feed,
    played_tables,
    prepare_partitioned,
    round_streams,
    serve_process,
    wallet_paid,
)
from unit.croupier.test_replay import Table

from croupier.bus.topology import ROUTED_EXCHANGE
from croupier.ledger import RecordedEvent
from croupier.ledger.partitions import partition_of
from croupier.reports.audit import BooksAudit
from croupier.settlement.meters import METER_MOVED
from croupier.settlement.round import SETTLED, stream_name
from studio.config import StudioConfig, TableSpec
from studio.feed import FeedMessage, simulate
from studio.publisher import publish

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("takeover")]

PARTITIONS = 8
TERM = 3.0
#: What the design allows for a killed instance's partitions to be taken: the term + 5 s.
TAKEOVER_SECONDS = TERM + 5.0


#: The progressive tables share one pool per currency across partitions (and instances).
PROGRESSIVE = "progressive*10:shared=4"


def many_tables_feed(rounds: int) -> list[FeedMessage]:
    """A feed over 34 tables, ten of them sharing a progressive pool (in five of the eight
    partitions: each instance's half holds some)."""
    return partitioned_feed("route", rounds, seed=41, more=[PROGRESSIVE])


def of(served: ServeProcess) -> str:
    """The part of an instance id that names its process (``host:pid:random``)."""
    return f":{served.process.pid}:"


ENV = {"CROUPIER_PARTITIONED": "1", "CROUPIER_PARTITION_TERM": str(TERM)}


async def prepare(database_url: str, amqp_url: str, table_ids: set[str]) -> None:
    """The ledger migrated with :data:`PARTITIONS` partitions, and the routed broker."""
    await prepare_partitioned(database_url, amqp_url, PARTITIONS, table_ids)


async def shares(database_url: str, a: ServeProcess, b: ServeProcess) -> Counter[str | None]:
    """How many partitions ``a`` and ``b`` hold unexpired (None: nobody)."""
    return Counter(
        "a" if o and of(a) in o else "b" if o and of(b) in o else None
        for o in (await leases(database_url)).values()
    )


async def assert_settled_once(
    database_url: str, tables: list[Table], wallet: Wallet
) -> list[RecordedEvent]:
    """Every round closed once, postings balanced, the wallet paid what the ledger returned;
    nothing refused (no message dead-lettered, nothing fenced quarantined); and the graceful
    stops released every lease at once. The ledger's events, read."""
    events = await ledger_events(database_url)
    assert_one_closure_per_round(events, round_streams(tables))
    assert_postings_balance(events)
    assert wallet.unique.keys() == expected_results(tables).keys()
    assert wallet_paid(wallet) == ledger_returned(events)
    rejected = [e for e in events if e.stream == "rejections"]
    assert rejected == [], rejected[:3]
    assert set((await leases(database_url)).values()) == {None}
    return events


def assert_pools_continuous(events: list[RecordedEvent], tables: list[Table]) -> None:
    """The progressive pool, moved by rounds of tables in different partitions (settled by
    both instances), moves on from its last level at every movement, in one recorded order,
    and each movement's parts add up (contributions, awards, reseeds)."""
    progressive = {t.table_id for t in tables if "progressive" in t.paytable}
    # Fewer partitions without a progressive table than either instance's half: each
    # instance settles some of the pool's tables.
    pooled = {partition_of(t, PARTITIONS) for t in progressive}
    assert PARTITIONS - len(pooled) < PARTITIONS // 2, pooled
    movements = [e for e in events if e.type == METER_MOVED]
    assert len(movements) >= len(progressive), "every progressive table's rounds moved the pool"
    audit = BooksAudit()
    audit.read(events)
    assert audit.report.ok, audit.report.problems[:5]
    for stream in {e.stream for e in movements}:
        versions = [e.version for e in movements if e.stream == stream]
        assert versions == list(range(1, len(versions) + 1)), stream


HALVES = Counter({"a": PARTITIONS // 2, "b": PARTITIONS // 2})


@dataclass
class MidStream:
    """Two instances sharing the partitions, a quarter of the feed settled, the rest being
    published."""

    database: str
    messages: list[FeedMessage]
    tables: list[Table]
    wallet: Wallet
    a: ServeProcess
    b: ServeProcess
    publishing: asyncio.Task[int]

    async def shared(self) -> bool:
        return await _halves(self.database, self.a, self.b)


async def _halves(database_url: str, a: ServeProcess, b: ServeProcess) -> bool:
    return await shares(database_url, a, b) == HALVES


@asynccontextmanager
async def mid_stream(database_url: str, amqp_url: str, tmp_path: Path) -> AsyncIterator[MidStream]:
    """The feed of :func:`many_tables_feed` reaching two partitioned instances that hold half
    the partitions each, yielded once a quarter of its rounds are settled."""
    messages = many_tables_feed(160)
    tables = played_tables(messages)
    await prepare(database_url, amqp_url, {t.table_id for t in tables})
    wallet = Wallet(amqp_url)
    with (
        serve_process(database_url, amqp_url, tmp_path / "a.log", 50, ENV) as a,
        serve_process(database_url, amqp_url, tmp_path / "b.log", 50, ENV) as b,
    ):
        await a.ready()
        await b.ready()
        await eventually(
            lambda: _halves(database_url, a, b), 30, "each instance holds half the partitions"
        )
        publishing = asyncio.create_task(publish(messages, amqp_url))
        await eventually(
            lambda: _at_least(database_url, len(tables) // 4), 120, "a quarter settled"
        )
        yield MidStream(database_url, messages, tables, wallet, a, b, publishing)


async def test_two_instances_share_partitions_and_a_killed_ones_move_within_the_term(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    async with mid_stream(postgres_database, amqp_vhost, tmp_path) as stream:
        messages, tables, wallet = stream.messages, stream.tables, stream.wallet
        a, b, publishing = stream.a, stream.b, stream.publishing
        table_ids = {t.table_id for t in tables}
        assert await stream.shared(), "both instances should still share the partitions"
        a.process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        assert await a.exit_code() == -signal.SIGKILL
        settled_at_kill = await closed_rounds(postgres_database)
        assert settled_at_kill < len(tables), "the kill should land mid-stream"

        async def all_to_b() -> bool:
            owners = (await leases(postgres_database)).values()
            return all(o is not None and of(b) in o for o in owners)

        await eventually(all_to_b, TAKEOVER_SECONDS, "b holds every partition", every=0.1)
        moved = time.monotonic() - killed
        assert moved <= TAKEOVER_SECONDS, moved
        print(f"partitions moved {moved:.2f} s after the kill (term {TERM} s)")
        assert await publishing == len(messages)
        await eventually(
            lambda: _settled_all(postgres_database, len(tables)), 120, "every round closed"
        )
        await wallet.wait_for(expected_results(tables).keys(), timeout=60)
        b.process.send_signal(signal.SIGTERM)
        assert await b.exit_code() == 0, b.tail()
    await wallet.drain()

    assert_pools_continuous(await assert_settled_once(postgres_database, tables, wallet), tables)
    # None is left unrouted: the router bound every table of the feed.
    assert await _bound_tables(amqp_vhost) >= len(table_ids)


async def _bound_tables(url: str) -> int:
    """How many tables are bound on ``croupier.feed.in``."""
    vhost = unquote(urlsplit(url).path.lstrip("/"))
    listing = rabbitmqctl("list_bindings", "-p", vhost, "source_name", "routing_key")
    return sum(1 for line in listing.splitlines() if line.startswith(f"{ROUTED_EXCHANGE}\t"))


async def _at_least(database_url: str, rounds: int) -> bool:
    return await closed_rounds(database_url) >= rounds


async def _settled_all(database_url: str, rounds: int) -> bool:
    return await closed_rounds(database_url) == rounds


async def test_a_paused_owner_loses_its_partitions_and_hands_its_deliveries_over(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    """SIGSTOP one instance mid-stream for longer than the term: the other takes its
    partitions; resumed, the paused one finds them lost (or its batch in hand fenced), hands
    its deliveries back to the broker unacknowledged, and quarantines nothing."""
    async with mid_stream(postgres_database, amqp_vhost, tmp_path) as stream:
        messages, tables, wallet = stream.messages, stream.tables, stream.wallet
        a, b, publishing = stream.a, stream.b, stream.publishing
        os.kill(a.process.pid, signal.SIGSTOP)
        try:

            async def all_to_b() -> bool:
                return await shares(postgres_database, a, b) == Counter({"b": PARTITIONS})

            await eventually(all_to_b, TAKEOVER_SECONDS, "b holds every partition", every=0.1)
        finally:
            os.kill(a.process.pid, signal.SIGCONT)
        # Resumed, a finds its partitions lost and takes its share again; the rounds of
        # what it had in hand are settled by whichever instance holds them then.
        assert await publishing == len(messages)
        await eventually(
            lambda: _settled_all(postgres_database, len(tables)), 120, "every round closed"
        )
        await wallet.wait_for(expected_results(tables).keys(), timeout=60)

        async def found_gone() -> bool:
            # A renewal sent just before the pause may answer after it: then the loss shows
            # at the next renewal, a third of the term later, not at once.
            _, text = await http_get(a.port, "/metrics", timeout=5)
            lost = _sample(text, 'croupier_partition_handovers_total{how="lost"}')
            fenced = sum(
                float(row.split()[1])
                for row in text.splitlines()
                if row.startswith("croupier_appends_fenced_total{")
            )
            return lost + fenced > 0

        await eventually(found_gone, 30, "the paused instance finds its partitions gone")
        for served in (a, b):
            served.process.send_signal(signal.SIGTERM)
            assert await served.exit_code() == 0, served.tail()
    await wallet.drain()

    assert_pools_continuous(await assert_settled_once(postgres_database, tables, wallet), tables)


def _sample(text: str, name: str) -> float:
    for row in text.splitlines():
        if row.startswith(f"{name} "):
            return float(row.split()[1])
    return 0.0


#: Players of the shared hand whose results a paused owner leaves: more than a relay
#: publishes in the moment between its commit and the pause.
LEFT_PLAYERS = 10_000
#: The relay lease: its holder would wait two of these (its writer grace) before publishing
#: another writer's results, longer than the test waits for them.
LONG_RELAY_LEASE = 30.0


async def test_a_paused_owners_unpublished_results_go_out_from_its_partitions_new_owner(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    """The owner of a table settles a shared hand of 10,000 players and is paused (SIGSTOP)
    as soon as the settlement is committed, most of its results unpublished. The instance
    that takes its partitions publishes them soon after the term, well before the relay
    lease's holder would (two leases of 30 s); every result once."""
    table = "leftover-hand"
    config = StudioConfig(
        tables=(TableSpec(table, "casino-holdem/classic", players=LEFT_PLAYERS),),
        rounds=1,
        seed=43,
    )
    messages = list(simulate(config))
    tables = played_tables(messages)
    (played,) = tables
    fillers = (f"filler-{n}" for n in range(10_000))
    spread = {partition_of(table, PARTITIONS): table}
    while len(spread) < PARTITIONS:
        filler = next(fillers)
        spread.setdefault(partition_of(filler, PARTITIONS), filler)
    await prepare(postgres_database, amqp_vhost, set(spread.values()))
    wallet = Wallet(amqp_vhost)
    env = {**ENV, "CROUPIER_RELAY_LEASE": str(LONG_RELAY_LEASE)}
    with (
        serve_process(postgres_database, amqp_vhost, tmp_path / "a.log", 1000, env) as a,
        serve_process(postgres_database, amqp_vhost, tmp_path / "b.log", 1000, env) as b,
    ):
        await a.ready()
        await b.ready()
        await eventually(lambda: _halves(postgres_database, a, b), 30, "half the partitions each")
        owner_id = (await leases(postgres_database))[partition_of(table, PARTITIONS)]
        owner, heir = (a, b) if owner_id and of(a) in owner_id else (b, a)
        await publish(messages, amqp_vhost)
        stream = stream_name(table, played.round_id)
        database = await asyncpg.connect(postgres_database)
        try:
            while not await database.fetchval(
                "SELECT position FROM events WHERE stream = $1 AND type = $2", stream, SETTLED
            ):
                await asyncio.sleep(0.005)
            os.kill(owner.process.pid, signal.SIGSTOP)
            paused = time.monotonic()
            try:
                left = await database.fetchval(
                    "SELECT count(*) FROM outbox o JOIN events e USING (position) "
                    "WHERE e.stream = $1 AND NOT EXISTS "
                    "(SELECT 1 FROM outbox_published p WHERE p.message_id = o.message_id)",
                    stream,
                )
                # How many depends on how soon the pause lands; any at all tell the ways apart.
                assert left > 0, "the owner published every result before its pause"
                await wallet.wait_for(expected_results(tables).keys(), timeout=40)
                arrived = time.monotonic() - paused
                print(f"{left:,} results left unpublished; all at the wallet {arrived:.1f} s on")
                assert arrived < 2 * LONG_RELAY_LEASE
            finally:
                os.kill(owner.process.pid, signal.SIGCONT)
        finally:
            await database.close()
        for served in (owner, heir):
            served.process.send_signal(signal.SIGTERM)
            assert await served.exit_code() == 0, served.tail()
    await wallet.drain()
    await assert_settled_once(postgres_database, tables, wallet)
