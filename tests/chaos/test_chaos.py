"""The money path under hostile input and faults: nothing lost, nothing doubled, nothing
parked unknown to the ledger.

Three ``croupier serve`` processes run on a PostgreSQL cluster and a RabbitMQ node this test
starts itself. A studio feed with the hostile corpus (``hostile.py``) spread through it is
published in chunks; between chunks the suite kills instances before they are ready (a crash
loop with work queued), kills the active one, SIGSTOPs it with two standbys running, cuts its
network (each instance reaches the services through TCP proxies of its own, ``tcp_proxy.py``,
black-holed for 15 s), and restarts PostgreSQL and RabbitMQ. Then it compares: every valid
round closed exactly once, every result received and equal to ``croupier replay`` of the
same valid feed, wallets paid what the ledger returned, and every dead letter known to the
ledger. Rounds that carry a refused message (a bet, a decision or a deal the contract refuses,
inside a shared, multi-box round) are replayed from their feed without it: every other bet
of theirs must be paid the same ("innocent bets harmed"). It prints the table and asserts
every figure of harm is 0.

``make test`` runs the short form; ``make chaos`` sets ``CROUPIER_CHAOS=full`` (more rounds,
a longer crash loop, every fault twice). ``CROUPIER_CHAOS_SEED`` picks the seed.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from chaos_harness import (
    Fleet,
    Harm,
    in_chunks,
    measure_harm,
    publish_retrying,
    received,
    replay_results,
    take_dead_letters,
)
from croupier_feeds import CH_CLASSIC, THP
from hostile import KINDS, corpus, inside_rounds, interleave
from integration.service.service_harness import (
    ServeProcess,
    Wallet,
    eventually,
    http_get,
    ledger_events,
    prepare_broker,
    studio_feed,
)
from private_services import PrivatePostgres, PrivateRabbitMQ, private_postgres, private_rabbitmq

from croupier.bus import FEED_QUEUE

pytestmark = pytest.mark.integration
LOGS = Path(tempfile.gettempdir()) / "croupier-chaos-last"


@dataclass(frozen=True)
class Scale:
    rounds: int
    chunks: int
    kills_before_ready: int
    rounds_of_faults: int
    #: The games of the rounds that carry a refused message (hostile.INSIDE), each kind once.
    inside_games: tuple[tuple[str, str], ...]


SHORT = Scale(
    rounds=48, chunks=6, kills_before_ready=2, rounds_of_faults=1, inside_games=(CH_CLASSIC,)
)
FULL = Scale(
    rounds=300, chunks=12, kills_before_ready=7, rounds_of_faults=2, inside_games=(CH_CLASSIC, THP)
)


def scale() -> Scale:
    return FULL if os.environ.get("CROUPIER_CHAOS") == "full" else SHORT


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[PrivatePostgres, PrivateRabbitMQ]]:
    with private_postgres() as database, private_rabbitmq() as broker:
        yield database, broker


async def _holding(broker: PrivateRabbitMQ, instance: ServeProcess) -> bool:
    """Whether ``instance`` holds unacknowledged feed deliveries (or is ready already)."""
    assert instance.process.poll() is None, instance.tail()
    listing = await asyncio.to_thread(
        broker.ctl, "list_queues", "-q", "--no-table-headers", "name", "messages_unacknowledged"
    )
    for row in listing.splitlines():
        name, _, count = row.strip().partition("\t")
        if name == FEED_QUEUE and count.strip() not in ("", "0"):
            return True
    try:
        return (await http_get(instance.port, "/readyz", timeout=2))[0] == 200
    except (OSError, TimeoutError):
        return False


async def queue_drained(broker: PrivateRabbitMQ) -> bool:
    listing = await asyncio.to_thread(
        broker.ctl, "list_queues", "-q", "--no-table-headers", "name", "messages"
    )
    for row in listing.splitlines():
        name, _, count = row.strip().partition("\t")
        if name == FEED_QUEUE:
            return count.strip() == "0"
    return False


@pytest.mark.long
async def test_nothing_is_lost_doubled_or_parked_unknown_under_hostile_input_and_faults(
    private: tuple[PrivatePostgres, PrivateRabbitMQ], tmp_path: Path
) -> None:
    database, broker = private
    size = scale()
    seed = int(os.environ.get("CROUPIER_CHAOS_SEED", "9"))
    rng = random.Random(seed)
    prefix = f"chaos{seed}"
    database_url = database.database_url("croupier")
    amqp_url = broker.url
    await prepare_broker(amqp_url)

    valid = studio_feed(prefix, size.rounds, seed=seed)
    kinds = list(KINDS)
    hostile = corpus(seed, prefix, kinds)
    inside = inside_rounds(prefix, size.inside_games)
    feed = interleave([*valid, *inside.served], hostile, seed)
    harm = Harm(hostile_kinds=len(kinds), hostile_messages=len(hostile))
    chunks = in_chunks(feed, size.chunks)
    wallet = Wallet(amqp_url)
    fleet = Fleet(database_url, amqp_url, tmp_path)

    try:
        # A crash loop with work queued: instances die before they are ever ready.
        await publish_retrying(chunks[0], amqp_url)
        for _ in range(size.kills_before_ready):
            doomed = fleet.spawn()
            # Killed once it holds deliveries (or is ready), never before it has any work.
            holding = functools.partial(_holding, broker, doomed)
            await eventually(holding, 120, "a delivery in hand", every=0.05)
            doomed.process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(doomed.process.wait, 30)
            harm.faults["SIGKILL before ready"] += 1

        await fleet.start(3)
        faults = _faults(size.rounds_of_faults, rng)
        for index, chunk in enumerate(chunks[1:]):
            await publish_retrying(chunk, amqp_url)
            await wallet.drain()
            if index < len(faults):
                await _inject(faults[index], fleet, database, broker, harm)

        valid_feed = [
            m
            for m in feed
            if (m.fault is None or m.fault not in KINDS) and m.table_id not in inside.tables
        ] + inside.reference
        replayed = await asyncio.to_thread(replay_results, valid_feed, tmp_path)
        await eventually(lambda: queue_drained(broker), 300, "the feed queue drained", every=1)
        await received(wallet, replayed.keys(), timeout=180)
        harm.rss_before_kib = max(fleet.rss_ready)
        harm.rss_after_kib = max(fleet.rss_now())
        for instance in fleet.alive():
            assert instance.process.poll() is None, instance.tail()
    finally:
        fleet.stop_all()
        shutil.copytree(tmp_path, LOGS, dirs_exist_ok=True)  # the last run's, to read

    events = await ledger_events(database_url)
    parked = await take_dead_letters(amqp_url)
    measure_harm(harm, valid_feed, events, wallet, replayed, parked, inside.tables)
    print("\n" + harm.render())
    assert harm.faults, "no fault was injected"
    assert harm.rounds_settled > 0 and harm.bets_compared > 0 and harm.innocent_bets > 0
    assert harm.harms() == dict.fromkeys(Harm.HARM, 0), harm.render()


def _faults(rounds: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    for _ in range(rounds):
        batch = [
            "SIGKILL active",
            "SIGSTOP active",
            "partition active",
            "PostgreSQL restart",
            "RabbitMQ restart",
        ]
        rng.shuffle(batch)
        out += batch
    return out


async def _inject(
    fault: str, fleet: Fleet, database: PrivatePostgres, broker: PrivateRabbitMQ, harm: Harm
) -> None:
    harm.faults[fault] += 1
    if fault == "SIGKILL active":
        victim = await fleet.active()
        victim.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.process.wait, 30)
        await fleet.start(1)  # back to three
    elif fault == "SIGSTOP active":
        victim = await fleet.active()
        victim.process.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(15)
        finally:
            victim.process.send_signal(signal.SIGCONT)
        await victim.ready(timeout=120)
    elif fault == "partition active":
        victim = await fleet.active()
        fleet.cut(victim, off=True)
        try:
            await asyncio.sleep(15)
        finally:
            fleet.cut(victim, off=False)
        await victim.ready(timeout=120)
    elif fault == "PostgreSQL restart":
        await asyncio.to_thread(database.stop)
        await asyncio.sleep(2)
        await asyncio.to_thread(database.start)
        await _database_answers(database)
    elif fault == "RabbitMQ restart":
        await asyncio.to_thread(broker.stop)
        await asyncio.sleep(2)
        await asyncio.to_thread(broker.start)
    for instance in fleet.alive():
        try:
            await instance.ready(timeout=180)
        except AssertionError as error:
            raise AssertionError(f"after {fault}: {error}\n{instance.tail()}") from None


async def _database_answers(database: PrivatePostgres) -> None:
    connection = await asyncpg.connect(database.url, timeout=10)
    await connection.close()
