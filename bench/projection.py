"""The projector on PostgreSQL: facts/s rebuilding the read models, against COPY of its rows.

The data
    A fresh database: a simulated studio feed of the history bench's shape (shared hands of
    40 players on both Casino Hold'em tables, seven-box Texas Hold'em Plus tables) settled
    by ``replay`` through the real settler, timed: the rebuild is held against it.

The figures (all in one run, on the same host)
    settle
        ``replay`` of the feed into the ledger: facts/s (wall, and the process's CPU).
    projector
        ``Projector.rebuild`` of the ``wagers`` and ``rounds`` read models from scratch, as
        ``croupier project --rebuild`` does it: facts/s (wall, and the process's CPU; the
        database's own work is in the wall figure only).
    anchor
        The rows the projector wrote, read back and inserted with COPY into empty copies of
        the same tables (indexes included), one transaction per ledger page's share: the
        facts/s of writing those rows and nothing else.

The integrity projection is left out: its cost is each round's exact decision tables, built
once per host by ``make integrity-tables`` (see ``bench.integrity``), not the projector's.
Nothing is asserted; targets: the projector at 20,000 facts/s or more, a rebuild no slower
than settling.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Final

import asyncpg

from bench.replay import postgres_available, scratch_database
from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.projection.projector import DEFAULT_BATCH, Projector
from croupier.projection.registry import load_projections
from croupier.settlement.replay import replay
from studio.config import StudioConfig, parse_table_specs
from studio.feed import simulate

ROUNDS: Final = int(os.environ.get("CROUPIER_BENCH_PROJECTION_ROUNDS", "800"))
FEED_TABLES: Final = (
    "classic*3:shared=40",
    "progressive*3:shared=40",
    "standard*2:shared=40",
    "royal-20*2:boxes=7",
)
PROJECTIONS: Final = ("wagers", "rounds")


class Timed:
    """Wall and CPU seconds of a block."""

    def __enter__(self) -> Timed:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


async def measure(url: str) -> None:
    """Settle, rebuild, copy; print each beside the others."""
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        config = StudioConfig(
            tables=parse_table_specs(list(FEED_TABLES), prefix="bench"), rounds=ROUNDS, seed=15
        )
        feed = [m.body for m in simulate(config)]
        with open(os.devnull, "w") as sink, Timed() as settle:
            await replay(feed, ledger, sink, sink)
        facts = await ledger.last_position()
        projections = load_projections(list(PROJECTIONS))
        projector = Projector(ledger, open_store(ledger), projections)
        await projector.setup()
        with Timed() as project:
            assert await projector.rebuild() == facts
        tables = [table for projection in projections for table in projection.tables]
    copy_s, rows = await _copy(url, [t.name for t in tables], facts)
    print(f"projection: {facts:,} ledger facts ({ROUNDS:,} rounds: {', '.join(FEED_TABLES)})")
    print(_row("settled by replay", facts, settle.wall, settle.cpu))
    print(_row(f"projector rebuild ({', '.join(PROJECTIONS)})", facts, project.wall, project.cpu))
    print(_row(f"anchor: its {rows:,} rows with COPY", facts, copy_s, None))
    print(
        f"  projector/anchor {copy_s / project.wall:.2f}; rebuild/settle "
        f"{project.wall / settle.wall:.2f} (wall); load average {os.getloadavg()[0]:.2f}"
    )


def _row(name: str, facts: int, wall: float, cpu: float | None) -> str:
    per_cpu = f"{facts / cpu:>9,.0f} facts/cpu-s" if cpu else ""
    return f"  {name:<42}{wall:>7.1f} s {facts / wall:>9,.0f} facts/s {per_cpu}"


async def _copy(url: str, tables: list[str], facts: int) -> tuple[float, int]:
    """Seconds to COPY the projected rows into empty copies of their tables, in as many
    transactions as the projector made (one per ledger page)."""
    conn = await asyncpg.connect(url)
    try:
        # As the projector's commits: no wait for the WAL flush, documents compressed with lz4.
        await conn.execute("SET synchronous_commit = off")
        await conn.execute("SET default_toast_compression = 'lz4'")
        contents = {t: [tuple(r) for r in await conn.fetch(f"SELECT * FROM {t}")] for t in tables}
        for table in tables:
            await conn.execute(f"CREATE TABLE anchor_{table} (LIKE {table} INCLUDING ALL)")
        commits = -(-facts // DEFAULT_BATCH)
        started = time.perf_counter()
        for page in range(commits):
            async with conn.transaction():
                for table, rows in contents.items():
                    share = rows[page * len(rows) // commits : (page + 1) * len(rows) // commits]
                    if share:
                        await conn.copy_records_to_table(f"anchor_{table}", records=share)
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
    return elapsed, sum(map(len, contents.values()))


async def _run() -> None:
    if await postgres_available():
        async with scratch_database() as url:
            await measure(url)


def run() -> None:
    """Print the projector's facts/s beside settling and the COPY anchor."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
