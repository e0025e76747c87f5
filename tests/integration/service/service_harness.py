"""What the live-service tests share: a studio feed and what it should settle to, a test
wallet on ``croupier.settlements``, the ledger as the tests read it, and small waits.

The expected results come from the independent reference settlement of the replay tests
(``tests/unit/croupier/test_replay.py``): its own hand evaluator and the rules written out
again, nothing of ``holdem``. This module only turns a studio feed into what happened at each
table, which is what that reference settles.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import asyncpg
from aio_pika.exceptions import AMQPError
from unit.croupier.test_replay import Bet, Result, Table, reference

from croupier.bus import SETTLEMENTS_EXCHANGE
from croupier.bus.amqp import AmqpBus, declare_topology
from croupier.bus.topology import routed_topology
from croupier.ledger import Ledger, RecordedEvent, open_ledger
from croupier.ledger.partitions import partition_of
from croupier.ledger.postgres import (
    PostgresLedger,
    create_database_if_missing,
    ensure_service_role,
)
from croupier.ledger.signing import PRIVATE_KEY_FILE, LedgerKey
from croupier.settlement.results import message_id
from croupier.settlement.round import SETTLED, VOIDED, stream_name
from croupier.settlement.service import Service
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import FeedMessage, simulate

PROGRESSIVE = "casino-holdem/progressive"
WALLET_QUEUE = "test.wallet"

#: Both games, every pay table, shared hands and boxes.
TABLES = (
    "classic:shared=12",
    "royal-20:boxes=5",
    "progressive:shared=12",
    "progressive:boxes=3",
    "standard:shared=12",
    "standard:boxes=4",
)


def studio_feed(
    prefix: str, rounds: int, *, seed: int = 11, void: float = 0.05
) -> list[FeedMessage]:
    """A generated feed of ``rounds`` rounds over :data:`TABLES`, a few of them voided."""
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix=prefix),
        rounds=rounds,
        seed=seed,
        timeout_rate=0.03,
        side_bet_rate=0.4,
        faults=Faults(void=void),
    )
    return list(simulate(config))


# -- what the feed should settle to ---------------------------------------------------------


def played_tables(messages: Iterable[FeedMessage]) -> list[Table]:
    """The rounds the feed closes (completed or voided), in the order it closes them."""
    rounds: dict[tuple[str, str], Table] = {}
    antes: dict[tuple[str, str, str], Bet] = {}
    closed: list[Table] = []
    for message in messages:
        event = message.event
        if event is None:
            continue
        key = (event["table_id"], event["round_id"])
        kind, p = event["event_type"], event["payload"]
        if kind == "round.opened":
            rounds[key] = Table(*key, paytable=p["paytable"], ending="open")
            continue
        t = rounds[key]
        if kind == "bet.placed":
            bet = Bet(p["bet_id"], p["player_id"], p["box"], p["spot"], p["amount"], p["currency"])
            t.bets.append(bet)
            antes[(*key, bet.bet_id)] = bet
        elif kind == "cards.dealt":
            cards = list(p["cards"])
            if p["target"] == "player":
                t.holes[p["box"]] = cards
            elif p["target"] == "dealer":
                t.dealer = cards
            elif p["target"] == "board":
                t.board += cards
        elif kind == "decision.made":
            ante = antes[(*key, p["ante_bet_id"])]
            t.decisions[(ante.bet_id, p["stage"])] = p["action"]
            if p["action"] in ("call", "bet"):
                spot = "call" if p["action"] == "call" else f"{p['stage']}_bet"
                t.plays.append(
                    Bet(p["bet_id"], ante.player, ante.box, spot, p["amount"], ante.currency)
                )
        elif kind in ("round.completed", "round.voided"):
            t.ending = "completed" if kind == "round.completed" else "voided"
            closed.append(t)
    return closed


def expected_results(tables: Sequence[Table]) -> dict[str, Result]:
    """``message_id`` -> that player's bets, ``{bet_id: (spot, stake, returned, outcome)}``.

    Rounds are settled in the order given, which moves the progressive meter as the service
    moves it (one consumer, feed order).
    """
    meters: dict[str, int] = {}
    out: dict[str, Result] = {}
    for t in tables:
        results = reference(t, meters if t.paytable == PROGRESSIVE else {})
        for bet in [*t.bets, *t.plays]:
            key = message_id(t.table_id, t.round_id, bet.player, bet.currency)
            out.setdefault(key, {})[bet.bet_id] = results[bet.bet_id]
    return out


def round_streams(tables: Iterable[Table]) -> set[str]:
    """The ledger streams of ``tables``' rounds."""
    return {stream_name(t.table_id, t.round_id) for t in tables}


# -- the test wallet -------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """One settlement result as a wallet got it."""

    message_id: str
    routing_key: str
    body: dict[str, Any]

    def bets(self) -> Result:
        return {
            b["bet_id"]: (b["spot"], b["stake"], b["returned"], b["outcome"])
            for b in self.body["bets"]
        }


#: The heartbeat of a service run inside the test process. It shares its event loop with the
#: test's own work on a host other tests load too, where a 3 s heartbeat (production's, for
#: a 15 s takeover of a hung instance) had the broker reset a busy but healthy connection.
#: The takeover itself is tested on ``croupier serve`` processes, with production's.
IN_PROCESS_HEARTBEAT = 30


def with_patient_heartbeat(url: str) -> str:
    """``url`` with ``heartbeat=`` :data:`IN_PROCESS_HEARTBEAT`."""
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, f"heartbeat={IN_PROCESS_HEARTBEAT}") if q)
    return urlunsplit(parts._replace(query=query))


@asynccontextmanager
async def serving(
    ledger: Ledger, amqp_url: str, *, max_batch: int = 1000
) -> AsyncIterator[Service]:
    """The service on ``ledger``'s database and the vhost at ``amqp_url``, probes on a free
    port, run as in production: the owner migrates, the service connects as a login role
    with ``croupier_app``'s rights only and signs with a key of its own.

    Stopped (gracefully) on the way out.
    """
    assert isinstance(ledger, PostgresLedger), "the live service runs on PostgreSQL"
    async with (
        service_role(ledger.url) as url,
        open_ledger(url, LedgerKey.generate()) as as_service,
    ):
        bus = AmqpBus(with_patient_heartbeat(amqp_url))
        service = Service(as_service, bus, max_batch=max_batch)
        await service.start(http_host="127.0.0.1", http_port=0)
        try:
            yield service
        finally:
            await service.stop()


async def prepare_broker(url: str) -> None:
    """Declare the service's topology and a durable wallet queue bound to every result.

    Declared up front, so that no result is unroutable before the wallet is bound.
    """
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        await declare_topology(channel)
        settlements = await channel.get_exchange(SETTLEMENTS_EXCHANGE)
        queue = await channel.declare_queue(WALLET_QUEUE, durable=True)
        await queue.bind(settlements, routing_key="#")
    finally:
        await connection.close()


def partitioned_feed(
    prefix: str, rounds: int, *, seed: int, tables: int = 12, more: Sequence[str] = ()
) -> list[FeedMessage]:
    """A feed over ``2 * tables`` tables (``tables`` classic of six shared hands and as many
    standard of three boxes) and the tables ``more`` specifies (e.g. a progressive pool's)."""
    specs = [f"classic*{tables}:shared=6", f"standard*{tables}:boxes=3", *more]
    config = StudioConfig(
        tables=parse_table_specs(specs, prefix=prefix),
        rounds=rounds,
        seed=seed,
        timeout_rate=0.03,
        side_bet_rate=0.4,
        faults=Faults(void=0.05),
    )
    return list(simulate(config))


async def prepare_partitioned(
    database_url: str, amqp_url: str, partitions: int, table_ids: Iterable[str]
) -> None:
    """The ledger at ``database_url`` created and migrated with ``partitions`` partitions
    (``croupier migrate --partitions``), and the routed broker (:func:`prepare_routed_broker`).
    ``table_ids`` must reach every partition."""
    spread = {partition_of(t, partitions) for t in table_ids}
    assert len(spread) == partitions, "the feed should reach every partition"
    await create_database_if_missing(database_url)
    migrate = [sys.executable, "-m", "croupier.cli", "migrate", "--ledger", database_url]
    done = subprocess.run(
        [*migrate, "--partitions", str(partitions)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    await prepare_routed_broker(amqp_url, partitions)


async def prepare_routed_broker(url: str, partitions: int) -> None:
    """Declare the routed topology of ``partitions`` partition queues (what a partitioned
    instance declares) and a durable wallet queue bound to every result."""
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        await declare_topology(channel, routed_topology(partitions))
        settlements = await channel.get_exchange(SETTLEMENTS_EXCHANGE)
        queue = await channel.declare_queue(WALLET_QUEUE, durable=True)
        await queue.bind(settlements, routing_key="#")
    finally:
        await connection.close()


async def leases(database_url: str) -> dict[int, str | None]:
    """Partition -> the instance holding an unexpired lease on it (None: nobody)."""
    connection = await asyncpg.connect(database_url, timeout=10)
    try:
        rows = await connection.fetch(
            "SELECT partition, CASE WHEN expires_at > now() THEN owner END AS owner "
            "FROM partition_leases ORDER BY partition"
        )
    finally:
        await connection.close()
    return {int(r["partition"]): r["owner"] for r in rows}


@dataclass
class Wallet:
    """Takes settlement results off the wallet queue; survives broker restarts (reconnects)."""

    url: str
    received: list[Received] = field(default_factory=list)

    async def drain(self) -> int:
        """Take what the queue holds now; how many (0 if the broker does not answer)."""
        try:
            connection = await aio_pika.connect(self.url, timeout=5)
        except (OSError, AMQPError, TimeoutError):
            return 0
        taken = 0
        try:
            channel = await connection.channel()
            queue = await channel.get_queue(WALLET_QUEUE)
            while (message := await queue.get(no_ack=True, fail=False, timeout=10)) is not None:
                body = json.loads(message.body)
                self.received.append(
                    Received(message.message_id or "", message.routing_key or "", body)
                )
                taken += 1
        except (OSError, AMQPError, TimeoutError):
            pass
        finally:
            await connection.close()
        return taken

    @property
    def unique(self) -> dict[str, Received]:
        """Each result once, by ``message_id`` (what a wallet applies)."""
        return {r.message_id: r for r in self.received}

    def duplicates(self) -> Counter[str]:
        """``message_id`` s received more than once, and how many times."""
        counts = Counter(r.message_id for r in self.received)
        return Counter({k: n for k, n in counts.items() if n > 1})

    async def wait_for(self, message_ids: Iterable[str], timeout: float) -> None:
        """Drain until every id in ``message_ids`` was received; fail after ``timeout``."""
        wanted = set(message_ids)
        deadline = time.monotonic() + timeout
        while True:
            await self.drain()
            missing = wanted - self.unique.keys()
            if not missing:
                return
            assert time.monotonic() < deadline, (
                f"{len(missing)} of {len(wanted)} results did not arrive in {timeout}s"
            )
            await asyncio.sleep(0.25)


# -- the ledger as the tests read it ----------------------------------------------------------


async def ledger_events(url: str) -> list[RecordedEvent]:
    """Every event of the ledger at ``url``, in position order."""
    events: list[RecordedEvent] = []
    async with open_ledger(url) as ledger:
        while page := await ledger.read_all(events[-1].position if events else 0, 5000):
            events += page
    return events


def closures(events: Iterable[RecordedEvent]) -> list[RecordedEvent]:
    """The ``round.settled`` and ``round.voided`` facts."""
    return [e for e in events if e.type in (SETTLED, VOIDED)]


def assert_one_closure_per_round(events: Sequence[RecordedEvent], streams: set[str]) -> None:
    """Exactly one settled or voided fact for each round in ``streams``, and no other."""
    counts = Counter(e.stream for e in closures(events))
    twice = {s: n for s, n in counts.items() if n > 1}
    assert twice == {}, f"rounds closed more than once: {twice}"
    missing, extra = sorted(streams - counts.keys()), sorted(counts.keys() - streams)
    assert not missing and not extra, f"rounds missing {missing[:5]}, unexpected {extra[:5]}"


def assert_postings_balance(events: Iterable[RecordedEvent]) -> None:
    """Each closure's postings sum to zero per currency, players get what was returned."""
    for e in closures(events):
        sums: Counter[str] = Counter()
        for posting in e.data["postings"]:
            sums[posting["currency"]] += posting["amount"]
        assert all(total == 0 for total in sums.values()), (e.stream, sums)
        returned: Counter[tuple[str, str]] = Counter()
        for line in e.data["results"]:
            returned[(line["currency"], f"player:{line['player_id']}")] += line["returned"]
        players = {
            (p["currency"], p["account"]): p["amount"]
            for p in e.data["postings"]
            if p["account"].startswith("player:")
        }
        assert players == dict(returned), e.stream


def ledger_returned(events: Iterable[RecordedEvent]) -> Counter[str]:
    """What the ledger's closures return to players, per currency."""
    total: Counter[str] = Counter()
    for e in closures(events):
        for line in e.data["results"]:
            total[line["currency"]] += line["returned"]
    return total


def wallet_paid(wallet: Wallet) -> Counter[str]:
    """What the wallet applied after deduplicating by ``message_id``, per currency."""
    total: Counter[str] = Counter()
    for r in wallet.unique.values():
        total[r.body["currency"]] += r.body["returned_total"]
    return total


# -- waiting and probing -----------------------------------------------------------------------


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, every: float = 0.2
) -> None:
    """Wait until ``check()`` is true; fail saying ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(every)


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


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample ``name`` in a Prometheus exposition."""
    for row in text.splitlines():
        if row.startswith(f"{name} "):
            return float(row.split()[1])
    raise AssertionError(f"no sample {name} in /metrics")


# -- `croupier serve` as its own process ------------------------------------------------------


def with_user(url: str, user: str) -> str:
    """``url`` with its user replaced (and no password: the test server trusts local users)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@asynccontextmanager
async def service_role(owner_url: str) -> AsyncIterator[str]:
    """The ledger at ``owner_url`` migrated by its owner, and the URL of a fresh login role
    that is a member of ``croupier_app`` only: how the service runs. The role is dropped
    on exit."""
    async with open_ledger(owner_url) as owner:
        await owner.migrate()
    role = f"croupier_test_svc_{uuid.uuid4().hex[:12]}"
    await ensure_service_role(owner_url, role)
    try:
        yield with_user(owner_url, role)
    finally:
        admin = await asyncpg.connect(owner_url, timeout=10)
        try:
            await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        except asyncpg.PostgresError:
            pass  # still connected somewhere: a stray role is harmless
        finally:
            await admin.close()


class ServeProcess:
    """One ``croupier serve`` process, its probe port and its log file.

    Run as in production on the database the owner's ``database_url`` names: migrated by
    the owner (``croupier migrate --service-role``), the process logs in as that service
    role and signs with the key pair beside its log (``service_keys``).
    """

    def __init__(
        self,
        database_url: str,
        amqp_url: str,
        log: Path,
        max_batch: int,
        env: Mapping[str, str] | None = None,
    ) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        env = {
            **os.environ,
            "CROUPIER_DATABASE_URL": prepare_service(database_url),
            "CROUPIER_LEDGER_SIGNING_KEY": str(service_keys(log) / PRIVATE_KEY_FILE),
            "CROUPIER_AMQP_URL": amqp_url,
            "CROUPIER_HTTP_PORT": str(self.port),
            "CROUPIER_LOG_LEVEL": "INFO",
            **(env or {}),
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


def service_keys(log: Path) -> Path:
    """The signing key pair of the services a test runs (beside their logs), made once."""
    keys = log.parent / "keys"
    if not (keys / PRIVATE_KEY_FILE).exists():
        LedgerKey.generate().write(keys)
    return keys


def prepare_service(owner_url: str) -> str:
    """The database created if missing and ``croupier migrate --service-role`` run as the
    owner, as an operator does; the URL the service logs in with, a role named after the
    database (so restarts share it)."""
    with ThreadPoolExecutor(1) as thread:  # the caller's event loop may be running
        thread.submit(asyncio.run, create_database_if_missing(owner_url)).result()
    database = urlsplit(owner_url).path.lstrip("/")
    role = f"croupier_svc_{hashlib.sha256(database.encode()).hexdigest()[:16]}"
    migrate = [sys.executable, "-m", "croupier.cli", "migrate", "--ledger", owner_url]
    done = subprocess.run(
        [*migrate, "--service-role", role], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return with_user(owner_url, role)


@contextmanager
def serve_process(
    database_url: str,
    amqp_url: str,
    log: Path,
    max_batch: int = 1000,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServeProcess]:
    """A ``croupier serve`` process on the database the owner's ``database_url`` names (as
    its service role, signing; ``env`` overrides its variables), killed on the way out if
    the test left it running."""
    served = ServeProcess(database_url, amqp_url, log, max_batch, env)
    try:
        yield served
    finally:
        if served.process.poll() is None:
            os.kill(served.process.pid, signal.SIGCONT)  # if a test left it paused
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
