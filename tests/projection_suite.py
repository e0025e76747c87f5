"""The one test suite every read-model store must pass (like ``ledger_suite``).

A subclass provides ``ledger_url`` (a fresh, empty ledger per test). The ledger is filled
by settling a simulated studio feed through the real settler, so the read model is checked
against facts exactly as the service records them.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from croupier.ledger import Ledger, RecordedEvent, StreamAppend, open_ledger
from croupier.projection import (
    Changes,
    CheckpointMoved,
    Column,
    Mark,
    Projection,
    ReadModelStore,
    Session,
    Step,
    Table,
    open_store,
)
from croupier.projection.projector import Projector
from croupier.projection.wagers import WagersProjection
from croupier.settlement.facts import Fact
from croupier.settlement.replay import replay
from croupier.settlement.round import SETTLED, VOIDED
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import simulate

TABLES = ("classic:shared=6", "royal-20:boxes=3", "progressive:shared=6", "standard:shared=6")


def studio_feed(
    rounds: int = 60, seed: int = 7, prefix: str = "pt", tables: Sequence[str] = TABLES
) -> list[bytes]:
    """A studio feed with voids, wrong calls and late bets (rejected wagers)."""
    config = StudioConfig(
        tables=parse_table_specs(list(tables), prefix=prefix),
        rounds=rounds,
        seed=seed,
        timeout_rate=0.05,
        side_bet_rate=0.4,
        faults=Faults(void=0.05, wrong_call=0.05, late_bet=0.05, redelivery=0.02),
    )
    return [message.body for message in simulate(config)]


async def settle(ledger: Ledger, feed: Sequence[bytes], batch: int = 150) -> None:
    """Settle ``feed`` into ``ledger`` through the real settler."""
    await replay(feed, ledger, io.StringIO(), io.StringIO(), batch_size=batch)


async def dump(store: ReadModelStore, projection: Projection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of ``projection``, sorted."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    async with store.session() as session:
        for table in projection.tables:
            rows = await session.fetch(f"SELECT * FROM {table.name}")
            out[table.name] = sorted(rows, key=repr)
    return out


async def closed_facts(ledger: Ledger) -> list[RecordedEvent]:
    facts: list[RecordedEvent] = []
    after = 0
    while page := await ledger.read_all(after, 1000):
        facts += [r for r in page if r.type in (SETTLED, VOIDED)]
        after = page[-1].position
    return facts


class CountingProjection(Projection):
    """Counts events per type with additive upserts (the shape of counters projections)."""

    name = "event_counts"
    version = 1
    tables = (
        Table(
            "event_counts",
            (Column("type", "text"), Column("events", "int"), Column("last", "int")),
            key=("type",),
        ),
    )

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        for record in events:
            row = {"type": record.type, "events": 1, "last": record.position}
            changes.upsert("event_counts", row, add=("events",))


class FailingProjection(CountingProjection):
    """Fails on the batch that reaches ``fail_at``, after rows for it were produced."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        super().apply(events, changes)
        if events[-1].position >= self.fail_at:
            raise RuntimeError("the projector dies here")


class FanOutProjection(Projection):
    """Writes ``position % 23`` rows per event, and adds every event into one total row."""

    name = "fan_out"
    version = 1
    tables = (
        Table(
            "fan_out",
            (Column("position", "int"), Column("n", "int"), Column("stream", "text")),
            key=("position", "n"),
        ),
        Table("fan_total", (Column("k", "text"), Column("events", "int")), key=("k",)),
    )

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        for record in events:
            for n in range(record.position % 23):
                changes.insert("fan_out", {"position": record.position, "n": n, "stream": "s"})
            changes.upsert("fan_total", {"k": "all", "events": 1}, add=("events",))


class Crash(Exception):
    """The projector's process dying between two commits."""


class CrashingStore(ReadModelStore):
    """A real store whose process dies after ``commits`` commits."""

    def __init__(self, store: ReadModelStore, commits: int) -> None:
        self.store = store
        self.dialect = store.dialect
        self.left = commits

    async def setup(self, projections: Sequence[Projection]) -> list[str]:
        return await self.store.setup(projections)

    async def marks(self, projections: Sequence[Projection]) -> dict[str, Mark]:
        return await self.store.marks(projections)

    async def commit(self, steps: Sequence[Step]) -> None:
        if self.left == 0:
            raise Crash()
        self.left -= 1
        await self.store.commit(steps)

    async def reset(self, projections: Sequence[Projection]) -> None:
        await self.store.reset(projections)

    def session(self) -> AbstractAsyncContextManager[Session]:
        return self.store.session()


class ProjectionSuite:
    """Behaviour every read-model store must have; subclasses supply the database."""

    @pytest.fixture
    def ledger_url(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    async def ledger(self, ledger_url: str) -> AsyncIterator[Ledger]:
        ledger = open_ledger(ledger_url)
        await ledger.migrate()
        yield ledger
        await ledger.close()

    @pytest.fixture
    async def settled(self, ledger: Ledger) -> Ledger:
        await settle(ledger, studio_feed())
        return ledger

    def projector(
        self, ledger: Ledger, *projections: Projection, batch: int = 97, rows: int = 50_000
    ) -> Projector:
        return Projector(
            ledger,
            open_store(ledger),
            projections or (WagersProjection(),),
            batch=batch,
            rows_per_commit=rows,
        )

    # -- the wagers read model -------------------------------------------------------

    async def test_results_match_the_settlement_facts(self, settled: Ledger) -> None:
        projector = self.projector(settled)
        assert await projector.setup() == ["wagers"]
        head = await settled.last_position()
        assert await projector.catch_up() == head
        facts = await closed_facts(settled)
        expected = Counter[tuple[str, str]]()
        for fact in facts:
            for line in fact.data["results"]:
                kind = "refunded" if fact.type == VOIDED else "returned"
                expected[(line["currency"], kind)] += line["returned"]
                expected[(line["currency"], "stake")] += line["stake"]
        async with projector.store.session() as session:
            rows = await session.fetch(
                "SELECT currency, sum(stake), sum(returned), sum(refunded), count(*) "
                "FROM results GROUP BY currency"
            )
            positions = await session.fetch("SELECT DISTINCT position FROM results")
        got = Counter[tuple[str, str]]()
        for currency, stake, returned, refunded, _ in rows:
            got[(currency, "stake")] += stake
            got[(currency, "returned")] += returned
            got[(currency, "refunded")] += refunded
        assert +got == +expected
        assert {p for (p,) in positions} == {f.position for f in facts}
        assert any(f.type == VOIDED for f in facts) and any(f.type == SETTLED for f in facts)

    async def test_rejected_wagers_are_kept_with_their_reason(self, settled: Ledger) -> None:
        projector = self.projector(settled)
        await projector.setup()
        await projector.catch_up()
        async with projector.store.session() as session:
            codes = await session.fetch("SELECT DISTINCT code FROM rejected_wagers")
            overlap = await session.fetch(
                "SELECT count(*) FROM rejected_wagers r JOIN wagers w ON "
                "w.table_id = r.table_id AND w.round_id = r.round_id AND w.bet_id = r.bet_id "
                "AND w.stake = r.amount"
            )
        assert {"betting_closed", "wrong_wager_size"} <= {code for (code,) in codes}
        assert overlap == [(0,)]  # a rejected wager is never also an accepted one

    async def test_hold_is_each_rounds_house_posting(self, settled: Ledger) -> None:
        projector = self.projector(settled)
        await projector.setup()
        await projector.catch_up()
        house = Counter[str]()
        for fact in await closed_facts(settled):
            for posting in fact.data["postings"]:
                if posting["account"] == "house":
                    house[posting["currency"]] += posting["amount"]
        async with projector.store.session() as session:
            rows = await session.fetch(
                "SELECT currency, sum(hold), sum(wagered - returned - contributed + awarded "
                "- reseeded) FROM round_hold GROUP BY currency"
            )
        assert {c: h for c, h, _ in rows} == dict(house)
        assert all(h == formula for _, h, formula in rows)

    # -- checkpoints -----------------------------------------------------------------

    async def test_running_again_changes_nothing(self, settled: Ledger) -> None:
        projector = self.projector(settled)
        await projector.setup()
        await projector.catch_up()
        before = await dump(projector.store, WagersProjection())
        assert await projector.setup() == []
        await projector.catch_up()
        assert await dump(projector.store, WagersProjection()) == before

    async def test_never_ahead_of_what_it_was_asked_for(self, settled: Ledger) -> None:
        projector = self.projector(settled)
        await projector.setup()
        assert await projector.catch_up(upto=500) == 500
        async with projector.store.session() as session:
            (highest,) = await session.fetch("SELECT max(position) FROM wagers")
        assert highest[0] <= 500

    async def test_a_failed_batch_leaves_the_last_checkpoint_and_resumes_exactly(
        self, settled: Ledger
    ) -> None:
        whole = self.projector(settled, CountingProjection())
        await whole.setup()
        await whole.catch_up()
        expected = await dump(whole.store, CountingProjection())
        await whole.store.reset([CountingProjection()])

        failing = self.projector(settled, FailingProjection(fail_at=700))
        with pytest.raises(RuntimeError, match="dies here"):
            await failing.catch_up()
        (at,) = (await failing.store.checkpoints([CountingProjection()])).values()
        assert 0 < at < 700
        counted = await dump(failing.store, CountingProjection())
        assert sum(row[1] for row in counted["event_counts"]) == at  # rows == checkpoint
        assert await whole.catch_up() == await settled.last_position()
        assert await dump(whole.store, CountingProjection()) == expected

    async def test_rebuild_gives_the_same_rows(self, settled: Ledger) -> None:
        projector = self.projector(settled, WagersProjection(), CountingProjection())
        await projector.setup()
        await projector.catch_up()
        before = await dump(projector.store, WagersProjection())
        assert await projector.rebuild() == await settled.last_position()
        assert await dump(projector.store, WagersProjection()) == before

    async def test_a_second_projector_cannot_apply_the_same_batch(self, settled: Ledger) -> None:
        first = self.projector(settled, CountingProjection())
        await first.setup()
        second = self.projector(settled, CountingProjection())
        await first.catch_up(upto=100)
        page = await settled.read_all(0, 100)
        stale = second._step(CountingProjection(), 0, page)
        with pytest.raises(CheckpointMoved):
            await second.store.commit([stale])
        await second.catch_up()
        counted = await dump(first.store, CountingProjection())
        assert sum(row[1] for row in counted["event_counts"]) == await settled.last_position()

    async def test_two_projectors_at_once_count_every_fact_once(self, settled: Ledger) -> None:
        projections = (CountingProjection, FanOutProjection)
        first = self.projector(settled, *(p() for p in projections), batch=37, rows=40)
        await first.setup()
        second = self.projector(settled, *(p() for p in projections), batch=53, rows=40)
        head = await settled.last_position()
        assert await asyncio.gather(first.catch_up(), second.catch_up()) == [head, head]
        counted = await dump(first.store, CountingProjection())
        assert sum(row[1] for row in counted["event_counts"]) == head
        fanned = await dump(first.store, FanOutProjection())
        assert fanned["fan_total"] == [("all", head)]
        assert len(fanned["fan_out"]) == sum(p % 23 for p in range(1, head + 1))

    async def test_a_new_version_is_rebuilt(self, settled: Ledger) -> None:
        projector = self.projector(settled, CountingProjection())
        await projector.setup()
        await projector.catch_up()

        class Renamed(CountingProjection):
            version = 2

        again = self.projector(settled, Renamed())
        assert await again.setup() == ["event_counts"]
        assert await again.store.checkpoints([Renamed()]) == {"event_counts": 0}
        assert (await dump(again.store, Renamed()))["event_counts"] == []

    async def test_follow_picks_up_new_events(self, ledger: Ledger) -> None:
        projector = self.projector(ledger, CountingProjection())
        await projector.setup()
        stop = asyncio.Event()
        following = asyncio.create_task(projector.follow(stop, idle=0.05))
        await ledger.append([StreamAppend("s", 0, [Fact("t", {"n": 1}, "k1")])])
        for _ in range(100):
            if (await projector.store.checkpoints([CountingProjection()]))["event_counts"] == 1:
                break
            await asyncio.sleep(0.05)
        stop.set()
        await following
        assert (await dump(projector.store, CountingProjection()))["event_counts"] == [("t", 1, 1)]

    async def test_sigkill_while_projecting_resumes_without_double_counting(
        self, settled: Ledger, ledger_url: str
    ) -> None:
        whole = self.projector(settled)
        await whole.setup()
        await whole.catch_up()
        expected = await dump(whole.store, WagersProjection())
        await whole.store.reset([WagersProjection()])
        head = await settled.last_position()
        for run in range(3):
            command = [sys.executable, "-m", "croupier.cli", "project", "--ledger", ledger_url]
            process = subprocess.Popen(
                [*command, "--rebuild" if run == 0 else "--only=wagers", "--batch", "20"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            # Killed as soon as it has committed a batch of its own: mid-run on any machine.
            (started,) = (await whole.store.checkpoints([WagersProjection()])).values()
            while process.poll() is None:
                (now,) = (await whole.store.checkpoints([WagersProjection()])).values()
                if now > started:
                    break
                await asyncio.sleep(0.002)
            process.send_signal(signal.SIGKILL)
            process.wait()
        (at,) = (await whole.store.checkpoints([WagersProjection()])).values()
        assert at < head, "the projector finished before it was killed: nothing was proven"
        assert await whole.catch_up() == head
        assert await dump(whole.store, WagersProjection()) == expected

    # -- rows beyond one commit ------------------------------------------------------

    async def test_facts_too_large_for_one_commit_are_written_in_pieces(
        self, settled: Ledger
    ) -> None:
        whole = self.projector(settled, FanOutProjection(), CountingProjection())
        await whole.setup()
        head = await whole.catch_up()
        expected = await dump(whole.store, FanOutProjection())
        counted = await dump(whole.store, CountingProjection())
        assert not whole.pieces

        small = self.projector(settled, FanOutProjection(), CountingProjection(), rows=7)
        await small.store.reset([FanOutProjection(), CountingProjection()])
        assert await small.catch_up() == head
        assert small.pieces == {"fan_out": sum(1 for p in range(1, head + 1) if p % 23 + 1 > 7)}
        assert await dump(small.store, FanOutProjection()) == expected
        assert await dump(small.store, CountingProjection()) == counted
        assert sum(len(rows) for rows in expected.values()) > 7 * 50

    async def test_a_crash_between_pieces_resumes_after_the_rows_written(
        self, settled: Ledger
    ) -> None:
        whole = self.projector(settled, FanOutProjection())
        await whole.setup()
        head = await whole.catch_up(upto=300)
        expected = await dump(whole.store, FanOutProjection())
        await whole.store.reset([FanOutProjection()])
        parts = set()
        for commits in range(3, 10_000, 37):
            crashing = Projector(
                settled,
                CrashingStore(open_store(settled), commits),
                [FanOutProjection()],
                batch=50,
                rows_per_commit=5,
            )
            with pytest.raises(Crash):
                await crashing.catch_up(upto=300)
            (mark,) = (await crashing.store.marks([FanOutProjection()])).values()
            parts.add(mark.part > 0)
            if mark.position >= 250:
                break
        assert parts == {True, False}, "crashed both between facts and inside one"
        assert await whole.catch_up(upto=300) == head == 300
        assert await dump(whole.store, FanOutProjection()) == expected
