"""The main job: the live service and a studio playing tables, side by side.

On the local RabbitMQ and PostgreSQL when both answer (or as configured), else on the
in-process bus and the embedded SQLite ledger: the same service code either way. A demo
wallet takes every settlement result, deduplicating on ``message_id``, and the closing
summary reconciles what it was paid against the ledger. The wallet writes its transaction
log (stakes debited, results credited, voids refunded; misbehaving on request), and the
demo ends with ``croupier reconcile``'s summary of that log against its part of the ledger.

Embedded, every run starts a new ledger (:data:`DEMO_LEDGER`, replaced), so a rerun takes as
long as the first and the ledger on disk stays the size of one run; the wallet log is
replaced too. Progress comes at least every second from start to end (``croupier demo``
prints through :class:`floor.steady.SteadyOutput`), and the
commands it prints run as printed (the program's path, the ledger's ``--ledger``). Then,
when someone is at a terminal, it keeps serving the game-history pages until Ctrl-C;
otherwise (CI, a pipe) it exits after its summary.

The demo is also a smoke test: it exits 1 and lists the rounds when any round the ledger
closed was not paid in full, when the wallets and the ledger disagree, or when a round stays
open without a fault the studio injected into it; open rounds are listed in every case.
Every run deals under its own table ids, so runs in one ledger never share an event id.

With ``instances`` above 1 the service is a fleet of partitioned ``croupier serve`` processes
instead (:mod:`floor.fleet`): live only, never embedded; it prints each instance's
partitions and settled messages as it goes, stops them gracefully, and fails the run when
one does not exit 0 or leaves a lease held. With ``kill_one`` it publishes half the feed,
kills the instance holding the most partitions once that half is settled, then publishes
the rest, which the others settle once they have taken its partitions.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import aio_pika
import asyncpg
from aio_pika.abc import AbstractIncomingMessage

from croupier.bus import FEED_QUEUE, SETTLEMENTS_EXCHANGE, Bus, Outgoing
from croupier.bus.memory import MemoryBus
from croupier.bus.topology import UNROUTED_QUEUE, partition_queue
from croupier.cli.console import program
from croupier.config import Settings, settings
from croupier.errors import START_SERVICES, CommandError, reaching
from croupier.history.site import history_site
from croupier.ledger import Ledger, open_ledger
from croupier.ledger.signing import PRIVATE_KEY_FILE, LedgerKey
from croupier.projection import open_store
from croupier.reconcile import Reconciliation, Summary, resolve_period
from croupier.reconcile.report import write_human
from croupier.settlement.facts import Closing, closing
from croupier.settlement.round import SETTLED, VOIDED
from croupier.settlement.service import Service
from croupier.urls import host_port, mask_url
from floor.fleet import Fleet, check_vhost, fleet_broker
from holdem import load_paytable
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import simulate
from studio.message import FeedMessage
from studio.publisher import publish
from studio.wallet import WalletFaults, WalletLog

DEMO_KEY_FOLDER = Path("var/demo-keys")
#: The embedded ledger: a new one every run.
DEMO_LEDGER = Path("var/demo.sqlite")
DEMO_TABLES = (
    "classic:shared=40",
    "royal-20:boxes=7",
    "progressive:shared=40",
    "standard:shared=40",
)
#: Copies of the demo's tables a fleet plays (24 tables): each instance's share of the
#: partitions holds some of them.
FLEET_TABLE_COPIES = 6
Say = Callable[[str], None]
RoundKey = tuple[str, str]  # (table_id, round_id)
#: Where the demo's wallet writes its transaction log unless told otherwise (replaced).
WALLET_LOG = Path("var/demo-wallet.csv")
#: Rounds listed in full at most; the count is always given.
LISTED = 20


@dataclass
class Wallet:
    """The demo's wallets: each result of this run's tables applied once, redeliveries ignored."""

    tables: str
    paid: Counter[str] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    rounds: set[tuple[str, str]] = field(default_factory=set)
    by_round: dict[RoundKey, Counter[str]] = field(default_factory=dict)
    duplicates: int = 0
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    log: WalletLog | None = None

    def credit(self, result: Outgoing) -> None:
        """Apply one result (a repeated ``message_id`` is ignored)."""
        table_id = str(result.body["table_id"])
        if not table_id.startswith(self.tables):
            return
        if self.log is not None:
            self.log.credit(result.body)
        if result.message_id in self.seen:
            self.duplicates += 1
            return
        self.seen.add(result.message_id)
        key = (table_id, str(result.body["round_id"]))
        self.rounds.add(key)
        currency, returned = str(result.body["currency"]), int(result.body["returned_total"])
        self.paid[currency] += returned
        self.by_round.setdefault(key, Counter())[currency] += returned


@dataclass
class GameTotals:
    """Ledger totals of one game."""

    rounds: int = 0
    voided: int = 0
    bets: int = 0
    wagered: Counter[str] = field(default_factory=Counter)
    returned: Counter[str] = field(default_factory=Counter)


def reachable(url: str, default_port: int) -> bool:
    """Whether something listens at the URL's host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 1
        ):
            return True
    except OSError:
        return False


async def run_demo(
    rounds: int,
    seed: int | None,
    say: Say,
    *,
    embedded: bool = False,
    wallet_log: Path | None = None,
    wallet_faults: WalletFaults | None = None,
    serve_until_stopped: bool | None = None,
    rest: Callable[[], None] = lambda: None,
    instances: int = 1,
    kill_one: bool = False,
) -> int:
    """Play ``rounds`` rounds through the service (``instances`` partitioned processes when
    above 1); print progress and a summary. Then keep serving the history pages until
    Ctrl-C when ``serve_until_stopped`` (default: when standard input is a terminal),
    calling ``rest`` first."""
    chosen = settings()
    broker = chosen.amqp_url
    if instances > 1:
        broker = fleet_broker(chosen)
        _check_fleet_services(chosen, broker, instances)
        live = True
    else:
        live = not embedded and _live_available(chosen)
    if not live and (chosen.database_configured or chosen.amqp_configured) and not embedded:
        raise _configured_but_down(chosen)
    if serve_until_stopped is None:
        serve_until_stopped = sys.stdin is not None and sys.stdin.isatty()
    run_id = secrets.token_hex(3)
    config = StudioConfig(
        tables=parse_table_specs(
            list(DEMO_TABLES) * (1 if instances == 1 else FLEET_TABLE_COPIES),
            prefix=f"demo-{run_id}",
        ),
        rounds=rounds,
        seed=secrets.randbits(32) if seed is None else seed,
        timeout_rate=0.02,
        side_bet_rate=0.3,
        faults=Faults(void=0.01, duplicate_card=0.003, redelivery=0.01, wrong_call=0.003),
    )
    messages = list(simulate(config))
    fleet: Fleet | None = None
    bus: Bus | None = None
    if instances > 1:
        await check_vhost(broker)
        ledger, url = await _fleet_ledger(chosen, broker, instances, say)
        fleet = Fleet(instances, url, broker, _signing_key_file(chosen))
    else:
        ledger, bus, url = await _infrastructure(live, chosen, say)
    log_path = wallet_log or WALLET_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    wallet = Wallet(f"demo-{run_id}-", log=WalletLog(log_path, wallet_faults, seed=config.seed))
    fleet_ok = True
    async with ledger:
        await ledger.migrate()
        start = await ledger.last_position()
        service = None if bus is None else Service(ledger, bus)
        try:
            if service is not None:
                await service.start(http_port=_free_port(chosen.http_port))
                say(f"metrics on http://127.0.0.1:{service.http_port}/metrics")
            else:
                assert fleet is not None
                await _start_fleet(fleet, say)
            async with history_site(url, _free_port(chosen.web_port)) as site:
                player = _a_player(config)
                page = site.page_for(player)
                say(f"game history of {player}: {page}")
                try:
                    closed = await _play(
                        config, messages, ledger, bus, broker, wallet, start, say, fleet, kill_one
                    )
                finally:
                    if service is not None:
                        await service.stop()
                    else:
                        assert fleet is not None
                        fleet_ok = await _stop_fleet(fleet, ledger, say)
                # the commands it prints name the demo's ledger unless it is the configured one
                on_ledger = "" if url == chosen.database_url else f" --ledger {url}"
                reconciled = await _reconcile(
                    ledger, start, messages, wallet, log_path, on_ledger, say
                )
                say(_summary(closed.totals, wallet))
                audit = Audit(
                    dealt_rounds(messages),
                    closed.returned,
                    wallet.by_round,
                    closed.closures,
                    frozenset(closed.unbalanced),
                )
                for line in audit.report():
                    say(line)
                if not fleet_ok:
                    say("demo: FAILED: the instances did not all stop cleanly (see above)")
                if serve_until_stopped:
                    say(f"\nthe game history stays up at {page}")
                    say("press Ctrl-C to stop the demo")
                    rest()
                    await _until_interrupted()
                    say("demo stopped")
        finally:
            if fleet is not None:
                fleet.kill_all()
    return 0 if audit.ok and reconciled and fleet_ok else 1


async def _start_fleet(fleet: Fleet, say: Say) -> None:
    """Start the instances and wait until each is ready."""
    fleet.start()
    for instance in fleet.instances:
        say(
            f"instance {instance.name}: croupier serve (pid {instance.process.pid}), metrics "
            f"on http://127.0.0.1:{instance.port}/metrics, log {instance.log}"
        )
    await fleet.ready()
    say(f"{fleet.count} instances ready; each takes its share of the partitions")


async def _stop_fleet(fleet: Fleet, ledger: Ledger, say: Say) -> bool:
    """Stop the instances gracefully and check that they released every lease; whether
    all went well. Says what each held at most and settled."""
    say("stopping the instances (SIGTERM)")
    codes = await fleet.stop()
    held, unowned = await fleet.holdings(ledger)
    ok = True
    for instance in fleet.instances:
        end = "killed midway" if instance.killed else f"stopped, exit {codes[instance.name]}"
        ok = ok and (instance.killed or codes[instance.name] == 0)
        say(
            f"fleet: {instance.name} held up to {instance.most} partitions, settled "
            f"{instance.settled:,} messages, {end}"
        )
    still = sum(held[i.name] for i in fleet.instances if not i.killed)
    say(f"fleet: leases held after the stop {still}, partitions without a lease {unowned}")
    return ok and still == 0


async def _until_interrupted() -> None:
    """Wait for Ctrl-C (SIGINT) or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


class _Ticker:
    """Says how far a step has come, at most every ``every`` seconds."""

    def __init__(self, say: Say, every: float = 1.0) -> None:
        self.say = say
        self.every = every
        self.step = ""
        self.status = ""
        self.started = self.shown = time.perf_counter()

    def begin(self, step: str) -> None:
        self.step, self.status = step, ""
        self.started = self.shown = time.perf_counter()
        self.say(f"  {step} ...")

    def update(self, status: str, *, now: bool = False) -> None:
        self.status = status
        if now or time.perf_counter() - self.shown >= self.every:
            self._show()

    def _show(self) -> None:
        self.shown = time.perf_counter()
        status = f": {self.status}" if self.status else ""
        self.say(f"  {self.step}{status} ({self.shown - self.started:.1f}s)")


async def _reconcile(
    ledger: Ledger,
    start: int,
    messages: list[FeedMessage],
    wallet: Wallet,
    path: Path,
    on_ledger: str,
    say: Say,
) -> bool:
    """Write the stakes the game server debited, then reconcile the log against this run's
    positions of the ledger: whether it matched. ``on_ledger`` is the ``--ledger`` option
    of the commands it prints (empty for the configured ledger).

    A wager the service rejected is not debited (the game server refuses it), unless the
    wallet misbehaves so on request.
    """
    assert wallet.log is not None
    say("\nreconciling the wallet's log against the ledger")
    ticker = _Ticker(say)
    ticker.begin("wagers read model")
    head = await Reconciliation.prepare_ledger(
        ledger,
        lambda p: ticker.update(f"{p.position - start:,}/{p.target - start:,} events"),
    )
    store = open_store(ledger)
    async with store.session() as session:
        rows = await session.fetch(
            "SELECT event_id FROM rejected_wagers WHERE position > ?", (start,)
        )
    rejected = {event_id for (event_id,) in rows}
    for message in messages:
        wallet.log.debit(message, rejected=message.event_id in rejected)
    wallet.log.close()
    say(f"  wallet transaction log: {path}")
    for planted in wallet.log.planted:
        where = planted.message_id or "/".join(planted.wager or ())
        say(f"  the wallet misbehaved on request: {planted.fault} ({where})")
    period = await resolve_period(ledger, head, positions=(start + 1, head))
    async with store.session() as session:
        reconciliation = Reconciliation(session, Summary(period, 0))
        staged = 0

        def advance(rows: int) -> None:
            nonlocal staged
            staged += rows
            ticker.update(f"{staged:,} wallet rows")

        ticker.begin("comparing")
        summary = await reconciliation.run_file(path, advance)
        ticker.update(f"{staged:,} wallet rows", now=True)
        croupier = program()
        say(
            f"reconciliation ({croupier} reconcile{on_ledger} --wallet {path} "
            f"--positions {start + 1}:{head}):"
        )
        await write_human(
            lambda line: say("  " + line),
            reconciliation,
            "the demo's ledger",
            str(path),
            verify=f"{croupier} verify{on_ledger}",
        )
    return summary.ok


def _configured_but_down(chosen: Settings) -> CommandError:
    down = [
        f"{name} at {host_port(url)} ({variable})"
        for name, url, variable, configured in (
            (
                "PostgreSQL",
                chosen.database_url,
                "CROUPIER_DATABASE_URL",
                chosen.database_configured,
            ),
            ("RabbitMQ", chosen.amqp_url, "CROUPIER_AMQP_URL", chosen.amqp_configured),
        )
        if configured and not reachable(url, 5432 if name == "PostgreSQL" else 5672)
    ] or ["the configured services"]
    return CommandError(
        f"{' and '.join(down)} not reachable; both are needed for live mode",
        "start it with `make services`, fix or unset the variable, or run `croupier demo "
        "--embedded`",
    )


def _check_fleet_services(settings: Settings, broker: str, count: int) -> None:
    """Raise a :class:`CommandError` naming each service a fleet needs that does not answer."""
    if settings.database_url.startswith("sqlite"):
        raise CommandError(
            f"croupier demo --instances {count} needs a PostgreSQL ledger, and "
            "CROUPIER_DATABASE_URL names a SQLite file",
            "point it at PostgreSQL, or unset it for the local one",
        )
    down = [
        f"{name} at {host_port(url)} ({variable})"
        for name, url, variable, port in (
            ("PostgreSQL", settings.database_url, "CROUPIER_DATABASE_URL", 5432),
            ("RabbitMQ", broker, "CROUPIER_AMQP_URL", 5672),
        )
        if not reachable(url, port)
    ]
    if down:
        raise CommandError(
            f"croupier demo --instances {count} runs partitioned `croupier serve` processes, "
            f"which need RabbitMQ and PostgreSQL: {' and '.join(down)} not reachable",
            f"{START_SERVICES} (or point the variable at a running one); "
            "without --instances the demo also plays embedded",
        )


def dealt_rounds(messages: Iterable[FeedMessage]) -> dict[RoundKey, set[str]]:
    """Every round the studio dealt, with the faults it injected into each."""
    rounds: dict[RoundKey, set[str]] = {}
    for message in messages:
        if message.event is None:
            continue
        faults = rounds.setdefault((message.table_id, str(message.event["round_id"])), set())
        if message.fault is not None:
            faults.add(message.fault)
    return rounds


@dataclass(frozen=True)
class Audit:
    """Every round dealt, closed in the ledger and paid to the unit by the wallets."""

    dealt: dict[RoundKey, set[str]]
    closed: dict[RoundKey, Counter[str]]  # returned per currency, by the ledger
    paid: dict[RoundKey, Counter[str]]  # returned per currency, by the wallets
    #: Closing facts per round (settled or voided: one each), and the closed rounds whose
    #: postings do not sum to zero in a currency.
    closures: Counter[RoundKey] = field(default_factory=Counter)
    unbalanced: frozenset[RoundKey] = frozenset()

    def twice(self) -> list[RoundKey]:
        """Rounds the ledger closed more than once."""
        return sorted(key for key, n in self.closures.items() if n > 1)

    def open(self) -> dict[RoundKey, set[str]]:
        """Rounds dealt that the ledger has not closed, with their injected faults."""
        return {key: faults for key, faults in self.dealt.items() if key not in self.closed}

    def unexplained(self) -> list[RoundKey]:
        """Open rounds the studio injected no fault into: something lost them."""
        return sorted(key for key, faults in self.open().items() if not faults - {"redelivery"})

    def unpaid(self) -> list[RoundKey]:
        """Closed rounds whose wallets were paid another amount than the ledger returned."""
        return sorted(
            key
            for key, returned in self.closed.items()
            if +returned != +self.paid.get(key, Counter())
        )

    def mismatched(self) -> list[str]:
        """Currencies in which the wallets were paid another total than the ledger returned."""
        returned, paid = _total(self.closed.values()), _total(self.paid.values())
        return sorted(c for c in returned | paid if returned[c] != paid[c])

    @property
    def ok(self) -> bool:
        return (
            not self.unexplained()
            and not self.unpaid()
            and not self.mismatched()
            and not self.twice()
            and not self.unbalanced
        )

    def report(self) -> list[str]:
        """Open and unpaid rounds, then the verdict."""
        opened = self.open()
        lines = [f"rounds dealt {len(self.dealt)}, closed {len(self.closed)}, open {len(opened)}"]
        for key, faults in sorted(opened.items())[:LISTED]:
            why = f"faults injected: {', '.join(sorted(faults))}" if faults else "NO FAULT INJECTED"
            lines.append(f"  open {key[0]} {key[1]}: {why}")
        unpaid = self.unpaid()
        for key in unpaid[:LISTED]:
            ledger, wallets = dict(+self.closed[key]), dict(+self.paid.get(key, Counter()))
            lines.append(f"  UNPAID {key[0]} {key[1]}: ledger returned {ledger}, wallets {wallets}")
        twice = self.twice()
        for key in twice[:LISTED]:
            lines.append(f"  CLOSED {self.closures[key]} TIMES {key[0]} {key[1]}")
        for key in sorted(self.unbalanced)[:LISTED]:
            lines.append(f"  POSTINGS UNBALANCED {key[0]} {key[1]}")
        lines.append(
            f"closed once each: {len(self.closed) - len(twice)} of {len(self.closed)}; "
            f"postings balanced in {len(self.closed) - len(self.unbalanced)}"
        )
        if self.ok:
            lines.append("demo: OK, every closed round paid to the unit")
        else:
            lines.append(
                f"demo: FAILED: {len(unpaid)} unpaid round(s), "
                f"{len(self.unexplained())} round(s) open without an injected fault, "
                f"{len(twice)} closed more than once, {len(self.unbalanced)} unbalanced, "
                f"wallets and ledger disagree in {self.mismatched() or 'no currency'}"
            )
        return lines


def _total(amounts: Iterable[Counter[str]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for amount in amounts:
        total.update(amount)
    return total


def _a_player(config: StudioConfig) -> str:
    """The player of the studio's first bet."""
    for message in simulate(config):
        body = json.loads(message.body)
        if body["event_type"] == "bet.placed":
            return str(body["payload"]["player_id"])
    raise AssertionError("a studio that plays rounds places bets")


async def _fleet_ledger(
    settings: Settings, broker: str, instances: int, say: Say
) -> tuple[Ledger, str]:
    """The PostgreSQL ledger a fleet shares and its URL: the live demo's. Never embedded:
    a database that is missing stops the demo, saying how to create it."""
    ledger = open_ledger(settings.database_url, _signing_key(settings))
    with reaching(ledger=settings.database_url):
        await ledger.schema_version()
    broker_at, database = mask_url(broker), mask_url(settings.database_url)
    say(
        f"partitioned mode: {instances} instances, RabbitMQ at {broker_at}, "
        f"PostgreSQL at {database}"
    )
    return ledger, settings.database_url


def _live_available(settings: Settings) -> bool:
    return reachable(settings.database_url, 5432) and reachable(settings.amqp_url, 5672)


async def _infrastructure(live: bool, settings: Settings, say: Say) -> tuple[Ledger, Bus, str]:
    """The ledger, bus and ledger URL of the chosen mode: an unconfigured demo whose local
    PostgreSQL lacks the ``croupier`` database plays embedded rather than creating it
    through another database. Embedded, the ledger is a new one."""
    if live:
        from croupier.bus.amqp import AmqpBus

        ledger = open_ledger(settings.database_url, _signing_key(settings))
        try:
            with reaching(ledger=settings.database_url):  # its own database, nothing else
                await ledger.schema_version()
        except CommandError as error:
            if settings.database_configured or not _missing_database(error):
                raise
            say(f"no live mode: {error.line()}")
        else:
            broker, database = mask_url(settings.amqp_url), mask_url(settings.database_url)
            say(f"live mode: RabbitMQ at {broker}, PostgreSQL at {database}")
            return ledger, AmqpBus(settings.amqp_url), settings.database_url
    DEMO_LEDGER.parent.mkdir(parents=True, exist_ok=True)
    for stale in (DEMO_LEDGER, *(Path(f"{DEMO_LEDGER}-{end}") for end in ("wal", "shm"))):
        stale.unlink(missing_ok=True)
    say(f"embedded mode: in-process bus, a new SQLite ledger at {DEMO_LEDGER}")
    say("  (live mode needs RabbitMQ and PostgreSQL: the local ones, or CROUPIER_AMQP_URL")
    say("   and CROUPIER_DATABASE_URL)")
    url = f"sqlite:///{DEMO_LEDGER}"
    return open_ledger(url, _signing_key(settings)), MemoryBus(), url


def _missing_database(error: CommandError) -> bool:
    return isinstance(error.__cause__, asyncpg.InvalidCatalogNameError)


def _signing_key(settings: Settings) -> LedgerKey:
    """``CROUPIER_LEDGER_SIGNING_KEY``, else the demo's own key under ``var/`` (made once)."""
    return LedgerKey.from_file(_signing_key_file(settings))


def _signing_key_file(settings: Settings) -> Path:
    """The file of :func:`_signing_key` (made once when it is the demo's own)."""
    if settings.ledger_signing_key is not None:
        return Path(settings.ledger_signing_key)
    path = DEMO_KEY_FOLDER / PRIVATE_KEY_FILE
    if not path.exists():
        LedgerKey.generate().write(DEMO_KEY_FOLDER)
    return path


def _free_port(preferred: int) -> int:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", preferred))
        except OSError:
            return 0
    return preferred


async def _play(
    config: StudioConfig,
    messages: list[FeedMessage],
    ledger: Ledger,
    bus: Bus | None,
    broker: str,
    wallet: Wallet,
    start: int,
    say: Say,
    fleet: Fleet | None = None,
    kill_one: bool = False,
) -> _Closing:
    """Play the feed until every round is paid (or nothing moves); what closed, with totals.
    ``bus`` None: a fleet settles it, fed through ``broker``."""
    say(f"studio: {len(config.tables)} tables, {config.rounds} rounds, {len(messages)} events")
    started = time.perf_counter()
    sent = asyncio.Event()
    closing = _Closing(ledger, start, wallet.tables, dealt_rounds(messages))
    backlog: list[int] = []  # the feed backlog at each tick, newest last

    async def halfway() -> None:
        """Once the first half is settled (the queues empty, the ledger quiet), kill one."""
        assert fleet is not None
        while not (backlog and backlog[-1] == 0 and closing.quiet >= QUIET_TICKS):
            await asyncio.sleep(TICK)
        victim = await fleet.kill_one(ledger)
        say(
            f"  killed {victim.name} (SIGKILL, pid {victim.process.pid}) with half the feed "
            "settled: its leases run out within the term, then the others take its partitions"
        )

    if isinstance(bus, MemoryBus):
        bus.subscribe("#", wallet.credit)
        publishing = asyncio.create_task(_publish_in_process(bus, messages, sent))
    else:
        pause = halfway if kill_one else None
        publishing = asyncio.create_task(_publish_amqp(messages, broker, wallet, sent, pause))

    async def report(feed_backlog: Callable[[], Awaitable[int]]) -> None:
        """A progress line every tick, from the wallet and the feed: never waits for the
        ledger, which the service keeps busy."""
        while True:
            await asyncio.sleep(TICK)
            backlog.append(await feed_backlog())
            elapsed = time.perf_counter() - started
            say(
                f"  {elapsed:5.1f}s  rounds paid {len(wallet.rounds):>5}/{config.rounds}"
                f"  results paid {len(wallet.seen):>6}  feed backlog {backlog[-1]:>6}"
            )
            if fleet is not None:
                say(await fleet.status(ledger))

    queues = [FEED_QUEUE]
    if fleet is not None:
        count = await ledger.partition_leases().count()
        queues = [*(partition_queue(p, count) for p in range(count)), UNROUTED_QUEUE]
    async with _feed_backlog(bus, broker, queues) as feed_backlog:
        reporting = asyncio.create_task(report(feed_backlog))
        try:
            while True:
                await asyncio.sleep(TICK)
                pending = len(await ledger.pending_outbox(1))
                moved = await closing.follow()
                drained = bool(backlog) and backlog[-1] == 0
                idle = sent.is_set() and drained and pending == 0 and not moved
                handed = fleet is None or await fleet.handed_over(ledger)
                if (idle and handed and closing.done(wallet)) or closing.stalled(idle):
                    wallet.settled.set()
                    await publishing
                    await closing.follow()
                    return closing
        finally:
            reporting.cancel()


TICK = 0.5  # seconds between progress lines
QUIET_TICKS = 2  # ticks without a new ledger event before the demo may end
STALL_TICKS = 60  # ticks without one after which it ends anyway, and the audit says why


class _Closing:
    """Follows the ledger while the demo plays: which of this run's rounds have closed, and
    what they wagered and returned.

    The demo ends when every round dealt without a fault has closed, every closed round is
    paid, and the ledger has been quiet a moment (faulted rounds get that moment to close);
    or when nothing has moved for :data:`STALL_TICKS` ticks.
    """

    def __init__(
        self, ledger: Ledger, after: int, prefix: str, dealt: dict[RoundKey, set[str]]
    ) -> None:
        self.ledger = ledger
        self.stream_prefix = f"round:{prefix}"
        self.must_close = {key for key, faults in dealt.items() if not faults - {"redelivery"}}
        self.closed: set[RoundKey] = set()
        #: Totals per game, and the amount returned per closed round, of this run's tables.
        self.totals: dict[str, GameTotals] = {}
        self.returned: dict[RoundKey, Counter[str]] = {}
        #: Closing facts per round, and the rounds whose postings do not balance.
        self.closures: Counter[RoundKey] = Counter()
        self.unbalanced: set[RoundKey] = set()
        self.after = after
        self.quiet = 0

    async def follow(self) -> bool:
        """Read what the ledger appended since; whether anything was."""
        moved = False
        while page := await self.ledger.read_all(self.after, 5000):
            self.after, moved = page[-1].position, True
            for record in page:
                if record.type in (SETTLED, VOIDED) and record.stream.startswith(
                    self.stream_prefix
                ):
                    self._count(record.type, closing(record.data))
        self.quiet = 0 if moved else self.quiet + 1
        return moved

    def _count(self, fact_type: str, data: Closing) -> None:
        """Add a closed round of this run to the totals of its game."""
        event = data["event"]
        key = (event["table_id"], event["round_id"])
        self.closed.add(key)
        self.closures[key] += 1
        postings: Counter[str] = Counter()
        for posting in data["postings"]:
            postings[posting["currency"]] += posting["amount"]
        if any(postings.values()):
            self.unbalanced.add(key)
        game = str(load_paytable(data["paytable"]["id"]).game)
        totals = self.totals.setdefault(game, GameTotals())
        totals.rounds += fact_type == SETTLED
        totals.voided += fact_type == VOIDED
        returned = self.returned.setdefault(key, Counter())
        for line in data["results"]:
            returned[line["currency"]] += line["returned"]
            totals.bets += 1
            totals.wagered[line["currency"]] += line["stake"]
            totals.returned[line["currency"]] += line["returned"]

    def done(self, wallet: Wallet) -> bool:
        """Every round that must close has, each closed round is paid, all quiet."""
        return (
            self.quiet >= QUIET_TICKS
            and self.must_close <= self.closed
            and self.closed <= wallet.rounds
        )

    def stalled(self, idle: bool) -> bool:
        """Nothing has moved for long: stop and let the audit say what is missing."""
        return idle and self.quiet >= STALL_TICKS


async def _publish_in_process(
    bus: MemoryBus, messages: Iterable[FeedMessage], sent: asyncio.Event
) -> None:
    for i, message in enumerate(messages):
        await bus.publish_feed(message.routing_key, message.body, message.event_id)
        if i % 200 == 0:
            await asyncio.sleep(0.01)  # a studio deals in real time; let the service keep up
    sent.set()


async def _publish_amqp(
    messages: list[FeedMessage],
    url: str,
    wallet: Wallet,
    sent: asyncio.Event,
    halfway: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Publish the feed to RabbitMQ while a wallet queue takes the settlement results;
    ``halfway``, when given, is awaited between the feed's two halves."""

    async def on_result(message: AbstractIncomingMessage) -> None:
        async with message.process():
            body = json.loads(message.body)
            wallet.credit(Outgoing(message.message_id or "", message.routing_key or "", body))

    async with await aio_pika.connect_robust(url) as connection:
        channel = await connection.channel()
        settlements = await channel.get_exchange(SETTLEMENTS_EXCHANGE)
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(settlements, "#")
        await queue.consume(on_result)
        if halfway is None:
            await publish(messages, url)
        else:
            await publish(messages[: len(messages) // 2], url)
            await halfway()
            await publish(messages[len(messages) // 2 :], url)
        sent.set()
        await wallet.settled.wait()


@asynccontextmanager
async def _feed_backlog(
    bus: Bus | None, url: str, queues: list[str]
) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """A probe of the feed messages not yet settled: ready in ``queues`` at the broker
    (one connection for the demo), or in the in-process bus."""
    if isinstance(bus, MemoryBus):

        async def in_process() -> int:
            return bus.backlog + len(bus.unacked)

        yield in_process
        return
    async with await aio_pika.connect(url) as connection:
        channel = await connection.channel()

        async def on_broker() -> int:
            ready = 0
            for name in queues:
                queue = await channel.declare_queue(name, passive=True)
                ready += int(queue.declaration_result.message_count or 0)
            return ready

        yield on_broker


_HEADER = ("game", "rounds", "voided", "bets", "wagered", "returned", "hold", "hold %")
_WIDTHS = (20, 8, 8, 8, 14, 14, 12, 8)


def _row(cells: Iterable[object]) -> str:
    return "".join(
        f"{cell:<{w}}" if i == 0 else f"{cell:>{w}}"
        for i, (cell, w) in enumerate(zip(cells, _WIDTHS, strict=True))
    )


def _summary(totals: dict[str, GameTotals], wallet: Wallet) -> str:
    lines = ["", _row(_HEADER)]
    returned: Counter[str] = Counter()
    for game, t in sorted(totals.items()):
        for currency in sorted(t.wagered):
            w, r = t.wagered[currency], t.returned[currency]
            returned[currency] += r
            hold = _percent(w - r, w)
            lines.append(
                _row((game, t.rounds, t.voided, t.bets, _money(w), _money(r), _money(w - r), hold))
            )
    for currency in sorted(returned | wallet.paid):
        verdict = "balanced" if returned[currency] == wallet.paid[currency] else "MISMATCH"
        lines.append(
            f"wallets {currency}: ledger returned {_money(returned[currency])}, "
            f"wallets paid {_money(wallet.paid[currency])}: {verdict} "
            f"({wallet.duplicates} redelivered results ignored)"
        )
    return "\n".join(lines)


def _percent(part: int, whole: int) -> str:
    """``part / whole`` as a percentage with two decimals, in integer arithmetic."""
    if not whole:
        return "-"
    basis_points = abs(part) * 10000 // whole
    return f"{'-' if part < 0 else ''}{basis_points // 100}.{basis_points % 100:02d}%"


def _money(minor: int) -> str:
    """Minor units as a decimal amount (two decimals, as EUR has), without floats."""
    units, cents = divmod(abs(minor), 100)
    return f"{'-' if minor < 0 else ''}{units:,}.{cents:02d}"
