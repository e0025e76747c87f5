"""What fencing costs an append: the same batches through PostgreSQL with and without a fence.

The anchor is the unfenced append (what the single-instance service does), measured in the
same run on the same database, the two alternating (ABBA), so that the machine's load
weighs on both alike. Each batch is ``bench.ledger``'s shape (125 rounds of 4 events and an
outbox message each) over 16 tables; a fenced batch names those tables' partitions.
Printed per 1,000 events: the client's CPU time (this process), the server's (the session's
backend, from /proc when the server runs on this machine), and wall time.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

from bench.ledger import BATCH, PER_ROUND, Batch
from bench.replay import postgres_available, scratch_database
from croupier.ledger import Fence, OutboxMessage, StreamAppend
from croupier.ledger.partitions import partition_of
from croupier.ledger.postgres import PostgresLedger
from croupier.settlement.facts import Fact

EVENTS = 40_000
TABLES = 16
PASSES = 4


def make_batches(events: int) -> list[Batch]:
    """``bench.ledger``'s workload under fresh round ids (every pass appends, none replays)."""
    tag = uuid.uuid4().hex[:8]
    batches: list[Batch] = []
    for b in range(events // BATCH):
        appends: list[StreamAppend] = []
        outbox: list[OutboxMessage] = []
        for r in range(BATCH // PER_ROUND):
            round_id = f"round:T{r % TABLES}:R{tag}-{b}-{r}"
            facts = [
                Fact("wager.accepted", {"bet_id": f"b{n}", "amount": 500}, f"{round_id}:{n}")
                for n in range(PER_ROUND)
            ]
            appends.append(StreamAppend(round_id, 0, facts))
            body = {"round_id": round_id, "stake_total": 1000, "returned_total": 2000}
            outbox.append(OutboxMessage(f"{round_id}:p1", "croupier.settlements", "EUR.p1", body))
        batches.append((appends, outbox))
    return batches


def _backend_seconds(pid: int) -> float | None:
    """CPU-seconds of a local backend, None when /proc does not show it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _pass(
    ledger: PostgresLedger, batches: list[Batch], fence: Fence | None, pid: int
) -> tuple[float, float | None, float]:
    server = _backend_seconds(pid)
    cpu, wall = time.process_time(), time.perf_counter()
    for appends, outbox in batches:
        await ledger.append(appends, outbox, fence=fence)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = _backend_seconds(pid)
    return cpu, None if server is None or after is None else after - server, wall


async def measure(url: str) -> None:
    ledger = PostgresLedger(url, min_size=1, max_size=1)  # one session: one backend to read
    try:
        await ledger.migrate()
        count = await ledger.partition_leases().count()
        held = {t.partition: t.epoch for t in await ledger.partition_leases().take("b", 3600, 64)}
        fence = Fence(
            "b", {p: held[p] for p in {partition_of(f"T{n}", count) for n in range(TABLES)}}
        )
        pid = int(await (await ledger.pool()).fetchval("SELECT pg_backend_pid()"))
        await _pass(ledger, make_batches(5_000), None, pid)  # warm up
        totals: dict[bool, list[float]] = {False: [0.0, 0.0, 0.0], True: [0.0, 0.0, 0.0]}
        local = True
        for n in range(PASSES):
            for fenced in (False, True) if n % 2 == 0 else (True, False):
                cpu, server, wall = await _pass(
                    ledger, make_batches(EVENTS), fence if fenced else None, pid
                )
                local = local and server is not None
                for i, value in enumerate((cpu, server or 0.0, wall)):
                    totals[fenced][i] += value
        per = PASSES * EVENTS / 1000
        for fenced, (cpu, server, wall) in totals.items():
            shown = f"{server / per * 1000:.1f} ms" if local else "n/a (remote server)"
            print(
                f"fencing {'fenced  ' if fenced else 'unfenced'}: client {cpu / per * 1000:.1f} "
                f"ms CPU, server {shown} CPU, wall {wall / per * 1000:.1f} ms per 1,000 events "
                f"({PASSES} x {EVENTS:,} events, batches of 500, {len(fence.epochs)} partitions "
                "named)"
            )
    finally:
        await ledger.close()


async def _run() -> None:
    if await postgres_available():
        async with scratch_database() as url:
            await measure(url)


def run() -> None:
    """Print the fenced and unfenced append's cost per 1,000 events."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
