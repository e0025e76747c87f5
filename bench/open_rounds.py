"""The open-round search against ledger size: ``Ledger.open_streams`` from the open floor.

For each size, a scratch PostgreSQL ledger holds that many closed rounds (10 events each,
the last a ``round.settled``) and, among the newest 1%, 20 rounds left open. Rows are
inserted with SQL (the search reads neither hashes nor data, so the chain is not built).
Timed, in the same run on the same data:

- anchor: the search before the floor, one ``GROUP BY`` over every round event;
- first search: the floor at 1 (a ledger migrated with rounds already in it): one pass
  over every position, as the anchor;
- from the floor: another process's first search, from the floor the first one raised
  (what ``croupier rounds --open`` and a start pay): the events since the oldest open round;
- next: that process's next search (what the service's minutely read-back pays): the
  openings and closings appended since (none here).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from croupier.ledger import open_ledger
from croupier.urls import mask_url

T = TypeVar("T")
SIZES = (20_000, 200_000)
EVENTS_PER_ROUND = 10
OPEN_ROUNDS = 20
CLOSING = ["round.settled", "round.voided"]
ADMIN_URL = os.environ.get(
    "CROUPIER_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
_FILL = """
INSERT INTO events (position, stream, version, type, data, key, recorded_at, prev_hash, hash)
SELECT r * $2 + v, 'round:bench:' || r, v,
       CASE WHEN v = $2 AND NOT (($1 - 1 - r) % $4 = 0 AND r >= $1 - $3 * $4)
            THEN 'round.settled' ELSE 'feed.accepted' END,
       '{}', 'k' || (r * $2 + v), now(), '', ''
FROM generate_series(0, $1 - 1) AS r, generate_series(1, $2) AS v
"""
_ANCHOR = (
    "SELECT stream FROM events WHERE starts_with(stream, $1) GROUP BY stream "
    "HAVING NOT bool_or(type = ANY($2::text[])) ORDER BY min(position) LIMIT $3"
)


async def _timed(work: Awaitable[T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = await work
    return time.perf_counter() - start, result


async def _measure(url: str, rounds: int) -> tuple[float, float, float, float]:
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        conn = await asyncpg.connect(url)
        try:
            spacing = max(1, rounds // 100 // OPEN_ROUNDS)
            await conn.execute(_FILL, rounds, EVENTS_PER_ROUND, OPEN_ROUNDS, spacing)
            await conn.execute("ANALYZE events")
            anchor, listed = await _timed(conn.fetch(_ANCHOR, "round:", CLOSING, 10_000))
        finally:
            await conn.close()
        await ledger.last_position()  # connected before timing
        first, found = await _timed(ledger.open_streams("round:", CLOSING, 10_000))
    async with open_ledger(url) as another:
        await another.last_position()
        after, again = await _timed(another.open_streams("round:", CLOSING, 10_000))
        then, still = await _timed(another.open_streams("round:", CLOSING, 10_000))
    expected = [row[0] for row in listed]
    if not found == again == still == expected or len(expected) != OPEN_ROUNDS:
        raise RuntimeError(f"the searches disagree: {len(expected)} open by the anchor")
    return anchor, first, after, then


async def _run() -> None:
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        print(f"open rounds: skipped, {mask_url(ADMIN_URL)} unreachable ({error})")
        return
    try:
        for rounds in SIZES:
            name = f"croupier_bench_{uuid.uuid4().hex[:12]}"
            await admin.execute(f'CREATE DATABASE "{name}"')
            try:
                url = urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))
                anchor, first, after, then = await _measure(url, rounds)
            finally:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            events = rounds * EVENTS_PER_ROUND
            print(
                f"open rounds, {rounds:>7,} rounds ({events:>9,} events, {OPEN_ROUNDS} open): "
                f"anchor GROUP BY {anchor * 1000:7.1f} ms | first search {first * 1000:7.1f} ms "
                f"({first / anchor:4.2f}x) | from the floor {after * 1000:5.1f} ms "
                f"({after / anchor:6.4f}x) | next {then * 1000:5.1f} ms ({then / anchor:6.4f}x)"
                f"  load {os.getloadavg()[0]:.2f}"
            )
    finally:
        await admin.close()


def run() -> None:
    """Print the search's time at each size, against the anchor."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
