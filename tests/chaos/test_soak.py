"""Soak: ``croupier serve`` under a steady studio feed; its memory stays flat.

One service process on a PostgreSQL cluster and a RabbitMQ node of the test's own, fed by the
studio simulator at ``CROUPIER_SOAK_RATE`` events/s (default 1,000) for
``CROUPIER_SOAK_SECONDS`` (``make soak``: 3,600; ``make soak-short``: 120). The service's RSS
is sampled every few seconds; the first tenth of the run (at least 30 s) is warm-up. It prints
the figures, and asserts that nothing was lost or doubled (every round the feed closed is
closed once in the ledger, every result published, nothing dead-lettered) and, over an hour
or more, that RSS grew by at most 50 MiB after warm-up.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from chaos_harness import rss_kib
from integration.service.service_harness import (
    TABLES,
    eventually,
    prepare_broker,
    serve_process,
)
from private_services import private_postgres, private_rabbitmq

from croupier.bus import DEAD_LETTER_QUEUE
from croupier.ledger import open_ledger
from croupier.settlement.round import SETTLED, VOIDED
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import FeedMessage, simulate
from studio.publisher import publish

pytestmark = [pytest.mark.integration, pytest.mark.soak]

#: RSS growth allowed after warm-up over an hour at 1,000 events/s.
GROWTH_LIMIT_MIB = 50
SAMPLE_EVERY = 5.0
#: Seconds the ledger may take, after publishing ends, to settle and publish what is queued.
DRAIN_SECONDS = 600.0


def studio(seconds: float, rate: float) -> Iterator[FeedMessage]:
    """Enough studio rounds for ``seconds`` at ``rate`` (stopped by the caller)."""
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix="soak"),
        rounds=10**7,
        seed=5,
        timeout_rate=0.03,
        side_bet_rate=0.4,
        faults=Faults(void=0.02),
    )
    deadline = time.monotonic() + seconds
    for message in simulate(config):
        if time.monotonic() > deadline:
            return
        yield message


class Closing:
    """Counts the rounds the published feed closed."""

    def __init__(self, messages: Iterator[FeedMessage]) -> None:
        self.messages = messages
        self.closed = 0
        self.sent = 0

    def __iter__(self) -> Iterator[FeedMessage]:
        for message in self.messages:
            self.sent += 1
            if message.event and message.event["event_type"] in ("round.completed", "round.voided"):
                self.closed += 1
            yield message


async def ledger_figures(url: str) -> tuple[int, int, int]:
    """(rounds closed, rounds closed more than once, results not yet published)."""
    connection = await asyncpg.connect(url, timeout=10)
    try:
        closed = await connection.fetchval(
            "SELECT count(DISTINCT stream) FROM events WHERE type = ANY($1::text[])",
            [SETTLED, VOIDED],
        )
        twice = await connection.fetchval(
            "SELECT count(*) FROM (SELECT stream FROM events WHERE type = ANY($1::text[]) "
            "GROUP BY stream HAVING count(*) > 1) AS doubled",
            [SETTLED, VOIDED],
        )
    finally:
        await connection.close()
    async with open_ledger(url) as ledger:
        pending = len(await ledger.pending_outbox(100_000))
    return int(closed), int(twice), pending


async def _not_drained(url: str, feed: Closing, elapsed: float) -> str:
    """Why the ledger did not catch up: still settling (it could not keep up with the feed
    on this machine) or stuck (nothing moves)."""
    before, _, _ = await ledger_figures(url)
    await asyncio.sleep(10)
    closed, _, pending = await ledger_figures(url)
    state = (
        f"still settling ({(closed - before) / 10:.1f} rounds/s): the service could not keep "
        "up with the feed on this machine"
        if closed > before
        else "nothing moves: rounds are stuck"
    )
    return (
        f"not drained {DRAIN_SECONDS:.0f}s after publishing ended: {closed:,} of "
        f"{feed.closed:,} rounds closed, {pending} results unpublished; {feed.sent:,} events "
        f"published in {elapsed:.0f}s; {state} (load {os.getloadavg()[0]:.1f})"
    )


async def test_memory_stays_flat_and_nothing_is_lost_under_a_steady_feed(tmp_path: Path) -> None:
    seconds = float(os.environ.get("CROUPIER_SOAK_SECONDS", "120"))
    rate = float(os.environ.get("CROUPIER_SOAK_RATE", "1000"))
    warm_up = max(30.0, seconds / 10)
    with private_postgres() as database, private_rabbitmq() as broker:
        url = database.database_url("croupier")
        await prepare_broker(broker.url)
        with serve_process(url, broker.url, tmp_path / "serve.log") as served:
            await served.ready(timeout=120)
            pid = served.process.pid
            samples: list[tuple[float, int]] = []
            feed = Closing(studio(seconds, rate))
            started = time.monotonic()
            publishing = asyncio.create_task(publish(feed, broker.url, rate=rate))
            while not publishing.done():
                samples.append((time.monotonic() - started, rss_kib(pid)))
                await asyncio.wait({publishing}, timeout=SAMPLE_EVERY)
            await publishing
            elapsed = time.monotonic() - started

            async def all_closed() -> bool:
                closed, _, pending = await ledger_figures(url)
                return closed >= feed.closed and pending == 0

            try:
                await eventually(all_closed, DRAIN_SECONDS, "every round closed", every=2)
            except AssertionError:
                raise AssertionError(await _not_drained(url, feed, elapsed)) from None
            samples.append((time.monotonic() - started, rss_kib(pid)))
            assert served.process.poll() is None, served.tail()
        closed, twice, pending = await ledger_figures(url)
        parked = broker.ctl("list_queues", "-q", "--no-table-headers", "name", "messages")
    dead = sum(
        int(row.split()[1]) for row in parked.splitlines() if row.split()[:1] == [DEAD_LETTER_QUEUE]
    )
    after_warm_up = [kib for at, kib in samples if at >= warm_up] or [samples[-1][1]]
    base, end, peak = after_warm_up[0], samples[-1][1], max(kib for _, kib in samples)
    growth = (end - base) / 1024
    print(
        "\nsoak run\n"
        f"  events published      {feed.sent:,} in {elapsed:.0f}s ({feed.sent / elapsed:,.0f}/s,"
        f" asked {rate:,.0f}/s)\n"
        f"  rounds closed         {closed:,} of {feed.closed:,} the feed closed\n"
        f"  closed twice          {twice}\n"
        f"  results unpublished   {pending}\n"
        f"  dead-lettered         {dead}\n"
        f"  RSS at start          {samples[0][1] / 1024:.1f} MiB\n"
        f"  RSS after warm-up     {base / 1024:.1f} MiB (at {warm_up:.0f}s)\n"
        f"  RSS at end            {end / 1024:.1f} MiB (peak {peak / 1024:.1f} MiB)\n"
        f"  growth after warm-up  {growth:+.1f} MiB over {elapsed - warm_up:.0f}s\n"
        f"  load                  {os.getloadavg()[0]:.1f}"
    )
    assert (closed - feed.closed, twice, pending, dead) == (0, 0, 0, 0)
    if seconds >= 3600:
        assert growth <= GROWTH_LIMIT_MIB, f"RSS grew {growth:.1f} MiB after warm-up"
