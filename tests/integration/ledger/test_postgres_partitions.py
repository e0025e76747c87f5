"""The partition ownership suite against the real PostgreSQL (a fresh database per test),
plus what only a server with concurrent sessions shows: many owners racing in their own
connections, a takeover waiting for an append that checked its fence, the service role's
rights, and an owner killed (no release) or stopped gracefully, timed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import pytest
from held_append import HeldAppend
from ledger_suite import read_everything
from partitions_suite import P, PartitionSuite, a_fact, eventually, fenced, table_in

from croupier.ledger import Fenced, open_ledger
from croupier.ledger.postgres import PostgresLedger
from croupier.metrics import Metrics
from croupier.settlement.partitions import PartitionOwner
from croupier.settlement.settler import Inbound, Settler
from studio import StudioConfig, TableSpec, simulate

if TYPE_CHECKING:
    pass

pytestmark = pytest.mark.integration


class TestPostgresPartitions(PartitionSuite):
    refused = (asyncpg.CheckViolationError, asyncpg.InsufficientPrivilegeError)

    @pytest.fixture
    def ledger_url(self, postgres_database: str) -> str:
        return postgres_database

    async def raw(self, url: str, statement: str) -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()


async def test_many_owners_racing_in_their_own_sessions_never_share_a_partition(
    postgres_database: str,
) -> None:
    async with open_ledger(postgres_database) as owner:
        await owner.migrate(partitions=64)
    ledgers = [PostgresLedger(postgres_database) for _ in range(6)]
    try:
        for round_ in range(3):
            taken = await asyncio.gather(
                *(
                    ledger.partition_leases().take(f"i{n}", 10, 64)
                    for n, ledger in enumerate(ledgers)
                )
            )
            partitions = [t.partition for got in taken for t in got]
            assert len(partitions) == len(set(partitions))  # disjoint
            if round_ == 0:
                assert sorted(partitions) == list(range(64))
            # every partition has exactly the owner that was told it took it, at epoch 1
            told = {t.partition: (f"i{n}", t.epoch) for n, got in enumerate(taken) for t in got}
            leases = await ledgers[0].partition_leases().leases()
            for lease in leases:
                if lease.partition in told:
                    assert (lease.owner, lease.epoch) == told[lease.partition]
            assert {lease.epoch for lease in leases} == {1}
    finally:
        for ledger in ledgers:
            await ledger.close()


async def test_no_takeover_commits_between_an_append_fence_check_and_its_commit(
    postgres_database: str,
) -> None:
    """An append whose fence passed keeps its partition's lease row locked until it ends: a
    takeover in the meantime skips the partition, even once the lease has expired, and gets
    it only after the append committed; the old owner's next append is refused."""
    async with open_ledger(postgres_database) as owner:
        await owner.migrate(partitions=P)
    slow = HeldAppend(postgres_database)
    other = PostgresLedger(postgres_database)
    try:
        a = PartitionOwner(slow, "a", Metrics(), term=1.0, poll=0.2)
        b = PartitionOwner(other, "b", Metrics(), term=10.0, poll=0.2)
        await a.balance()
        table = table_in(3)
        appending = asyncio.create_task(a.append([a_fact(table)], tables=[table]))
        await asyncio.wait_for(slow.written.wait(), 10)
        await asyncio.sleep(1.2)  # a's leases expire while its append is open
        await b.balance()
        assert 3 not in b.held  # locked by the append in flight: skipped
        assert sorted(b.held) == [p for p in range(P) if p != 3]
        slow.release.set()
        (record,) = await appending  # checked before the expiry: it commits
        await b.balance()
        assert b.held[3] == 2
        with pytest.raises(Fenced):
            await a.append([a_fact(table)], tables=[table])
        assert fenced(a.metrics, 3) == 1
        await b.append([a_fact(table)], tables=[table])
        assert await other.last_position() == record.position + 1
    finally:
        slow.release.set()
        await slow.close()
        await other.close()


async def test_the_service_role_keeps_leases_but_cannot_change_the_count(
    postgres_database: str,
) -> None:
    async with open_ledger(postgres_database) as owner:
        await owner.migrate(partitions=P)
    as_service = f"{postgres_database}?role=croupier_app"
    async with open_ledger(as_service) as ledger:
        a = PartitionOwner(ledger, "a", Metrics())
        await a.balance()
        assert len(a.held) == P
        await a.append([a_fact("T1")], tables=["T1"])
        await a.stop()
    conn = await asyncpg.connect(as_service)
    try:
        for statement in (
            "UPDATE ledger_partitions SET count = 4",
            "INSERT INTO ledger_partitions (fixed, count) VALUES (false, 4)",
            "DELETE FROM partition_leases",
            "INSERT INTO partition_leases (partition) VALUES (100)",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    finally:
        await conn.close()


async def test_a_killed_owner_partitions_are_taken_within_the_term_and_a_poll(
    postgres_database: str,
) -> None:
    """An owner that stops renewing (killed: no release) leaves its partitions for at most
    its term plus the other's poll; the one stopped gracefully, for at most a poll."""
    async with open_ledger(postgres_database) as owner:
        await owner.migrate(partitions=64)
    term, poll = 2.0, 0.5
    one, two = PostgresLedger(postgres_database), PostgresLedger(postgres_database)
    a = PartitionOwner(one, "a", Metrics(), term=term, poll=poll)
    b = PartitionOwner(two, "b", Metrics(), term=term, poll=poll)
    a_stops, b_stops = asyncio.Event(), asyncio.Event()
    a_runs = asyncio.create_task(a.run(a_stops))
    await eventually(lambda: len(a.held) == 64)
    b_runs = asyncio.create_task(b.run(b_stops))
    try:
        await eventually(lambda: len(a.held) == 32 and len(b.held) == 32, 3 * term)
        a_runs.cancel()  # killed: no release, no more renewals
        with pytest.raises(asyncio.CancelledError):
            await a_runs
        killed = time.monotonic()
        await eventually(lambda: len(b.held) == 64, term + poll + 5)
        unowned = time.monotonic() - killed
        assert unowned <= term + poll + 1.0  # the last renewal was before the kill
        longest = max(lease.expires_in for lease in await two.partition_leases().leases())
        assert longest > 0
        b_stops.set()
        await b_runs
        stopped = time.monotonic()
        c = PartitionOwner(one, "c", Metrics(), term=term, poll=poll)
        await c.balance()
        assert len(c.held) == 64 and time.monotonic() - stopped < 2.0
    finally:
        a_stops.set()
        b_stops.set()
        for task in (a_runs, b_runs):
            if not task.done():
                task.cancel()
        await one.close()
        await two.close()


async def test_an_owner_paused_by_sigstop_is_replaced_and_never_appends_again(
    postgres_database: str,
) -> None:
    """A real process holds every partition and appends; SIGSTOP pauses it past its term.
    Another instance takes the partitions within the term plus a poll and appends; once the
    paused process resumes, every append it attempts is refused and counted, and none of
    its events lands after the new owner's."""
    async with open_ledger(postgres_database) as owner:
        await owner.migrate(partitions=P)
    term, poll, table = 2.0, 0.5, table_in(2)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("paused_owner.py")),
        postgres_database,
        table,
        str(term),
        str(poll),
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    ledger = PostgresLedger(postgres_database)
    b = PartitionOwner(ledger, "b", Metrics(), term=term, poll=poll)
    stopping = asyncio.Event()
    running: asyncio.Task[None] | None = None
    try:

        async def line() -> dict[str, float]:
            assert child.stdout is not None
            while True:  # its log lines are not JSON
                text = await asyncio.wait_for(child.stdout.readline(), 30)
                assert text, "the paused owner ended"
                if text.startswith(b"{"):
                    found: dict[str, float] = json.loads(text)
                    return found

        for _ in range(3):
            assert "ok" in await line()
        os.kill(child.pid, signal.SIGSTOP)
        paused = time.monotonic()
        running = asyncio.create_task(b.run(stopping))
        await eventually(lambda: len(b.held) == P, term + poll + 5)
        assert time.monotonic() - paused <= term + poll + 1.0
        assert set(b.held.values()) == {2}
        (mine,) = await b.append([a_fact(table)], tables=[table])
        os.kill(child.pid, signal.SIGCONT)
        after: list[dict[str, float]] = []
        while not any("fenced" in line for line in after):
            after.append(await line())
        # the lines printed before the pause may still be in the pipe: none after it is ok
        resumed = [line for line in after if "ok" not in line or line["ok"] > mine.position]
        assert all("fenced" in line for line in resumed), resumed
        assert after[-1]["fenced"] >= 1
        events = await read_everything(ledger)
        theirs = [e.position for e in events if ":paused-" in e.stream]
        assert theirs and max(theirs) < mine.position
    finally:
        if child.returncode is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            await child.wait()
        stopping.set()
        if running is not None:
            await running
        await ledger.close()


async def test_croupier_partitions_lists_owners_epochs_expiry_and_instances(
    postgres_database: str,
) -> None:
    """Each partition's owner, epoch, expiry and open rounds (the oldest's age); the
    instances and how many partitions each holds."""
    table = TableSpec(table_in(1), "casino-holdem/classic", players=2)
    feed = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=5))]
    async with open_ledger(postgres_database) as owner:
        await owner.migrate(partitions=P)
        unfinished = feed[:-1]  # everything but round.completed: the round stays open
        await Settler(owner).handle([Inbound(b, n) for n, b in enumerate(unfinished, 1)])
    one, two = PostgresLedger(postgres_database), PostgresLedger(postgres_database)
    try:
        a = PartitionOwner(one, "instance-a", Metrics(), term=30)
        b = PartitionOwner(two, "instance-b", Metrics(), term=30)
        await a.balance()
        await b.balance()
        await a.balance()
        await b.balance()
        listed = await _croupier("partitions", "--ledger", postgres_database, "--json")
        document = json.loads(listed)
        assert document["partitions"] == P
        rows = {row["partition"]: row for row in document["leases"]}
        assert [(rows[p]["owner"], rows[p]["epoch"], rows[p]["state"]) for p in range(P)] == [
            ("instance-a", 1, "owned") for _ in range(P // 2)
        ] + [("instance-b", 2, "owned") for _ in range(P // 2)]
        assert all(25 < rows[p]["expires_in_seconds"] <= 30 for p in range(P))
        assert [rows[p]["open_rounds"] for p in range(P)] == [int(p == 1) for p in range(P)]
        assert 0 <= rows[1]["oldest_open_seconds"] < 60
        assert all(rows[p]["oldest_open_seconds"] is None for p in range(P) if p != 1)
        assert {(i["id"], i["partitions"]) for i in document["instances"]} == {
            ("instance-a", P // 2),
            ("instance-b", P // 2),
        }
        await a.stop()
        text = await _croupier("partitions", "--ledger", postgres_database)
        assert "partition  owner" in text
        assert "1, oldest " in text and "none" in text
        assert f"{P} partitions: {P // 2} owned, {P // 2} free or expired" in text
        assert "instance-a" not in text
    finally:
        await one.close()
        await two.close()


async def _croupier(*args: str) -> str:
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "floor.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(done.communicate(), 60)
    assert done.returncode == 0, err.decode()
    return out.decode()
