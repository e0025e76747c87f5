"""Ledger append throughput: events/s through the SQLite and PostgreSQL adapters.

Each batch is one append call, one transaction: 125 round streams of 4 events plus one
outbox message per round, the shape the settlement service writes.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from croupier.ledger import OutboxMessage, StreamAppend, open_ledger
from croupier.settlement.facts import Fact
from croupier.urls import mask_url

EVENTS = 100_000
BATCH = 500
PER_ROUND = 4
ADMIN_URL = os.environ.get(
    "CROUPIER_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)

Batch = tuple[list[StreamAppend], list[OutboxMessage]]


def make_batches(events: int = EVENTS, batch: int = BATCH) -> list[Batch]:
    """The workload, built before timing starts."""
    batches: list[Batch] = []
    for b in range(events // batch):
        appends: list[StreamAppend] = []
        outbox: list[OutboxMessage] = []
        for r in range(batch // PER_ROUND):
            round_id = f"round:T{b % 16}:R{b}-{r}"
            appends.append(
                StreamAppend(round_id, 0, [_event(round_id, n) for n in range(PER_ROUND)])
            )
            body = {"round_id": round_id, "stake_total": 1000, "returned_total": 2000}
            outbox.append(OutboxMessage(f"{round_id}:p1", "croupier.settlements", "EUR.p1", body))
        batches.append((appends, outbox))
    return batches


def _event(round_id: str, n: int) -> Fact:
    data = {"bet_id": f"b{n}", "player_id": "p1", "spot": "ante", "amount": 500, "currency": "EUR"}
    return Fact("wager.accepted" if n < 2 else "bet.settled", data, f"{round_id}:{n}")


async def measure(url: str, batches: list[Batch]) -> float:
    """Events per second appending ``batches`` to a freshly migrated ledger at ``url``."""
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        count = sum(len(a.events) for appends, _ in batches for a in appends)
        start = time.perf_counter()
        for appends, outbox in batches:
            await ledger.append(appends, outbox)
        elapsed = time.perf_counter() - start
        report = await ledger.verify()
        if not report.ok or report.head_position != count:
            raise RuntimeError(f"benchmark ledger is inconsistent: {report.summary()}")
    return count / elapsed


async def _postgres(batches: list[Batch]) -> float | None:
    name = f"croupier_bench_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        print(
            f"ledger postgres: skipped, {mask_url(ADMIN_URL)} unreachable ({error}); "
            "run `make services`"
        )
        return None
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))
        return await measure(url, batches)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _run() -> None:
    batches = make_batches()
    with tempfile.TemporaryDirectory() as folder:
        rate = await measure(f"sqlite:///{Path(folder) / 'bench.db'}", batches)
    print(f"ledger sqlite:   {rate:>9,.0f} events/s ({EVENTS:,} events, batches of {BATCH})")
    pg_rate = await _postgres(batches)
    if pg_rate is not None:
        print(f"ledger postgres: {pg_rate:>9,.0f} events/s ({EVENTS:,} events, batches of {BATCH})")


def run() -> None:
    """Print events/s for both adapters."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
