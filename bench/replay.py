"""Replay throughput: bets settled per second through ``croupier.settlement.replay.replay``.

A fixed-seed studio feed of about 100,000 bets (antes, side bets and play wagers) on every
shipped pay table is generated before timing starts, then replayed through the settler into
(a) the embedded SQLite ledger in a temporary file and (b) PostgreSQL, in a scratch database
this benchmark creates and drops. Each figure is the best of ``REPEATS`` runs, each on a
fresh ledger.

The anchor, measured in the same run: the raw append rate of each ledger adapter
(``bench.ledger``: batches of prepared events, no settlement) for as many events as the
replay wrote. The ratio says how close settlement gets to the ledger's own ceiling.
The settler's deciding alone (every batch decided, nothing written) is timed too: no
ledger can make a replay faster than that, and the replay's wall-clock rate is printed as
a share of it. Each replay is also measured in CPU-seconds of this process (user plus
system time: the replay's own work, the database server's apart), which a machine shared
with other work disturbs far less than wall time. Targets are printed, not asserted.
"""

from __future__ import annotations

import asyncio
import io
import os
import resource
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bench.ledger import BATCH, make_batches
from bench.ledger import measure as measure_appends
from croupier.ledger import open_ledger
from croupier.ledger.signing import LedgerKey
from croupier.settlement.replay import replay
from croupier.settlement.runtime import fewer_collections
from croupier.settlement.settler import Inbound, Settler
from croupier.urls import mask_url
from studio import FeedTally, StudioConfig, every_paytable, simulate

SEED = 20240501
PLAYERS = 20  # per shared hand
ROUNDS = 2_200  # about 100,000 bets at this seed and seating
REPEATS = 3
BATCH_SIZE = 2000  # replay's default
TARGET_SQLITE = 20_000
TARGET_POSTGRES = 10_000
#: Bets per CPU-second of the replay process on PostgreSQL, and the share of deciding alone
#: its wall-clock rate should reach.
TARGET_POSTGRES_CPU = 25_000
TARGET_OF_DECIDING = 0.8
ADMIN_URL = os.environ.get(
    "CROUPIER_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@dataclass(frozen=True)
class Feed:
    """The workload: the feed's lines and what they hold."""

    lines: list[bytes]
    bets: int
    rounds: int


@dataclass(frozen=True)
class Timing:
    """One replay: wall-clock seconds, CPU-seconds of this process, and the ledger events
    it wrote."""

    seconds: float
    events: int
    cpu: float


def cpu_seconds() -> float:
    """User plus system time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def make_feed(rounds: int = ROUNDS, seed: int = SEED) -> Feed:
    """The fixed feed: every pay table, one shared hand of ``PLAYERS`` per table."""
    config = StudioConfig(tables=every_paytable(players=PLAYERS), rounds=rounds, seed=seed)
    tally = FeedTally()
    lines = [message.body for message in tally.watch(simulate(config))]
    total = tally.total
    return Feed(lines, total.bets + total.play_wagers, total.rounds)


async def replay_once(url: str, feed: Feed) -> Timing:
    """Replay ``feed`` into a fresh ledger at ``url``, signing its heads as the service does;
    check it settled every round."""
    async with open_ledger(url, LedgerKey.generate()) as ledger:
        await ledger.migrate()
        results, rejections = io.StringIO(), io.StringIO()
        start, cpu = time.perf_counter(), cpu_seconds()
        summary = await replay(feed.lines, ledger, results, rejections)
        elapsed, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        events = await ledger.last_position()
    if summary.settled != feed.rounds or summary.rejected or summary.open:
        raise RuntimeError(f"the benchmark feed did not settle cleanly:\n{summary.render()}")
    return Timing(elapsed, events, cpu)


async def decide_only(feed: Feed) -> tuple[float, float]:
    """Seconds and CPU-seconds the settler takes to decide every batch of ``feed``, writing
    nothing."""
    async with open_ledger("sqlite:///:memory:") as ledger:
        await ledger.migrate()
        settler = Settler(ledger, cache_rounds=10**9)
        batches = [feed.lines[i : i + BATCH_SIZE] for i in range(0, len(feed.lines), BATCH_SIZE)]
        with fewer_collections():  # as replay runs
            start, cpu = time.perf_counter(), cpu_seconds()
            for number, lines in enumerate(batches):
                await settler.decide([Inbound(line, number) for line in lines])
            return time.perf_counter() - start, cpu_seconds() - cpu


@asynccontextmanager
async def scratch_database(admin_url: str = ADMIN_URL) -> AsyncIterator[str]:
    """A new, empty PostgreSQL database for the duration; its URL. Dropped afterwards."""
    name = f"croupier_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_url, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def postgres_available(admin_url: str = ADMIN_URL) -> bool:
    """Whether the bench can reach PostgreSQL (and says how to fix it when not)."""
    try:
        connection = await asyncpg.connect(admin_url, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        print(
            f"postgres: skipped, {mask_url(admin_url)} unreachable ({error}); run `make services`"
        )
        return False
    await connection.close()
    return True


async def _best_sqlite(feed: Feed) -> tuple[list[Timing], float]:
    """Every replay and the best raw-append rate (events/s) on SQLite, interleaved."""
    timings: list[Timing] = []
    rates: list[float] = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as folder:
            timings.append(await replay_once(f"sqlite:///{Path(folder) / 'replay.db'}", feed))
        batches = make_batches(_rounded(timings[-1].events))
        with tempfile.TemporaryDirectory() as folder:
            rates.append(await measure_appends(f"sqlite:///{Path(folder) / 'raw.db'}", batches))
    return timings, max(rates)


async def _best_postgres(feed: Feed) -> tuple[list[Timing], float]:
    """Every replay and the best raw-append rate (events/s) on PostgreSQL, interleaved."""
    timings: list[Timing] = []
    rates: list[float] = []
    for _ in range(REPEATS):
        async with scratch_database() as url:
            timings.append(await replay_once(url, feed))
        batches = make_batches(_rounded(timings[-1].events))
        async with scratch_database() as url:
            rates.append(await measure_appends(url, batches))
    return timings, max(rates)


def _rounded(events: int) -> int:
    return max(BATCH, round(events / BATCH) * BATCH)


def load_line() -> str:
    """The machine's load averages, to read the figures by (a shared machine is noisy)."""
    one, five, _ = os.getloadavg()
    return f"load average: {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cpus"


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _report(
    name: str,
    feed: Feed,
    timings: list[Timing],
    anchor: float,
    deciding: float,
    target: int,
    target_cpu: int | None = None,
) -> None:
    timing = min(timings, key=lambda t: t.seconds)
    bets = feed.bets / timing.seconds
    events = timing.events / timing.seconds
    print(
        f"replay {name:<9} {bets:>9,.0f} bets/s   {events:>9,.0f} ledger events/s"
        f"   ({timing.seconds:.2f} s)   target >= {target:,} bets/s: {_verdict(bets >= target)}"
    )
    print(
        f"  anchor: raw {name} append {anchor:>9,.0f} events/s   replay/raw = {events / anchor:.2f}"
    )
    cpu = min(t.cpu for t in timings)
    per_cpu = feed.bets / cpu
    aim = f"   target >= {target_cpu:,}: {_verdict(per_cpu >= target_cpu)}" if target_cpu else ""
    print(f"  cpu: {per_cpu:>9,.0f} bets per CPU-second of the replay ({cpu:.2f} s){aim}")
    share = bets / (feed.bets / deciding)
    print(
        f"  of deciding alone: {share:.2f} (wall clock)   target >= {TARGET_OF_DECIDING}: "
        f"{_verdict(share >= TARGET_OF_DECIDING)}"
    )


async def _run() -> None:
    print(load_line())
    started = time.perf_counter()
    feed = make_feed()
    print(
        f"feed: {feed.bets:,} bets in {feed.rounds:,} rounds, {len(feed.lines):,} events "
        f"(seed {SEED}, generated in {time.perf_counter() - started:.1f} s); best of {REPEATS}"
    )
    alone = [await decide_only(feed) for _ in range(REPEATS)]
    deciding, deciding_cpu = min(wall for wall, _ in alone), min(cpu for _, cpu in alone)
    print(
        f"context: deciding alone, no ledger writes {feed.bets / deciding:>9,.0f} bets/s"
        f"   ({deciding:.2f} s; {feed.bets / deciding_cpu:,.0f} bets per CPU-second): "
        "the ceiling of any replay on one core"
    )
    timings, anchor = await _best_sqlite(feed)
    _report("sqlite", feed, timings, anchor, deciding, TARGET_SQLITE)
    if await postgres_available():
        timings, anchor = await _best_postgres(feed)
        _report("postgres", feed, timings, anchor, deciding, TARGET_POSTGRES, TARGET_POSTGRES_CPU)


def run() -> None:
    """Print bets/s for both ledgers against the raw append anchors."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
