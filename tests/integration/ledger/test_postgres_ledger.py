"""The ledger suite against the real PostgreSQL (a fresh database per test), plus what only
PostgreSQL has: TRUNCATE, the service role's grants, and readers racing a held-open append.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from held_append import HeldAppend
from ledger_suite import LedgerSuite, append, message, read_everything

from contract.canonical import Encoded
from croupier.ledger import (
    IdempotencyConflict,
    Ledger,
    LedgerUnavailable,
    OutboxMessage,
    StreamAppend,
    open_ledger,
)
from croupier.ledger.postgres import APPEND_LOCK, PostgresLedger, _packed
from croupier.projection.postgres import PostgresStore
from croupier.settlement.facts import Fact

if TYPE_CHECKING:
    pass

pytestmark = pytest.mark.integration

_TABLES = ("events", "outbox", "outbox_published")
_TAMPERED = (*_TABLES, "ledger_heads", "outbox_marks")


class TestPostgresLedger(LedgerSuite):
    @pytest.fixture
    def ledger_url(self, postgres_database: str) -> str:
        return postgres_database

    async def raw(self, url: str, statement: str) -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    def out_of_reach(self, url: str) -> str:
        parts = urlsplit(url)
        return urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:1"))

    async def tamper(self, url: str, *statements: str) -> None:
        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():
                for table in _TAMPERED:
                    await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
                for statement in statements:
                    await conn.execute(statement)
                for table in _TAMPERED:
                    await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        finally:
            await conn.close()

    @pytest.mark.parametrize("table", _TABLES)
    async def test_truncate_is_refused(self, ledger: Ledger, ledger_url: str, table: str) -> None:
        await ledger.append([append("s", 0, 2)], [message("m1")])
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await self.raw(ledger_url, f"TRUNCATE {table} CASCADE")
        assert await ledger.last_position() == 2


async def test_service_role_may_only_insert_and_select(postgres_database: str) -> None:
    async with open_ledger(postgres_database) as owner:
        await owner.migrate()
    as_service = f"{postgres_database}?role=croupier_app"
    async with open_ledger(as_service) as ledger:
        await ledger.append([append("s", 0, 3)], [message("m1")])
        await ledger.mark_published(["m1"])
        assert await ledger.pending_outbox() == []
        assert (await ledger.verify()).ok
        assert await ledger.open_streams("none:", [], 5) == []  # raises the open floor
        assert await ledger.open_streams("s", ["x"], 5) == ["s"]
    conn = await asyncpg.connect(as_service)
    try:
        assert await conn.fetchval("SELECT current_user") == "croupier_app"
        for statement in (
            "UPDATE events SET type = 'x'",
            "DELETE FROM outbox_published",
            "DELETE FROM open_floor",
            "TRUNCATE events",
            "ALTER TABLE events DISABLE TRIGGER USER",
            "DROP TRIGGER events_append_only ON events",
        ):
            with pytest.raises((asyncpg.InsufficientPrivilegeError, asyncpg.UndefinedObjectError)):
                await conn.execute(statement)
    finally:
        await conn.close()


async def test_sessions_run_without_jit_unless_the_url_asks(postgres_database: str) -> None:
    """The relay's listing passes the planner's JIT threshold on a large outbox; compiling
    it at every execution cost more than running it (the module docstring)."""
    async with PostgresLedger(postgres_database) as ledger:
        pool = await ledger.pool()
        assert await pool.fetchval("SHOW jit") == "off"
        assert await pool.fetchval("SHOW statement_timeout") == "10s"
    async with PostgresLedger(f"{postgres_database}?jit=on") as ledger:
        assert await (await ledger.pool()).fetchval("SHOW jit") == "on"


async def test_writable_fails_while_another_process_holds_the_append_lock(
    postgres_database: str,
) -> None:
    blocker = await asyncpg.connect(postgres_database)
    try:
        await blocker.execute("SELECT pg_advisory_lock($1)", APPEND_LOCK)
        async with open_ledger(f"{postgres_database}?lock_timeout=200ms") as ledger:
            await ledger.migrate()
            with pytest.raises(LedgerUnavailable):
                await ledger.writable()
            await blocker.execute("SELECT pg_advisory_unlock($1)", APPEND_LOCK)
            await ledger.writable()
    finally:
        await blocker.close()


async def test_reader_never_skips_an_event_that_commits_late(postgres_database: str) -> None:
    writer = open_ledger(postgres_database)
    reader_ledger = open_ledger(postgres_database)
    held = HeldAppend(postgres_database)
    await writer.migrate()
    await writer.append([append("round:early", 0, 5)])

    seen: list[int] = []
    done = asyncio.Event()

    async def reader() -> None:
        checkpoint = 0
        while True:
            page = await reader_ledger.read_all(checkpoint, 7)
            seen.extend(event.position for event in page)
            if page:
                checkpoint = page[-1].position
            elif done.is_set():
                return
            await asyncio.sleep(0.002)

    polling = asyncio.create_task(reader())
    slow = asyncio.create_task(held.append([append("round:slow", 0, 5)]))
    await asyncio.wait_for(held.written.wait(), 10)  # positions 6..10 written, not committed
    fast = [asyncio.create_task(writer.append([append(f"round:fast:{n}", 0, 3)])) for n in range(8)]
    await asyncio.sleep(0.5)
    assert not any(task.done() for task in fast), "appenders must wait for the open append"
    assert seen == [1, 2, 3, 4, 5], "nothing past the open transaction may be visible"

    held.release.set()
    await slow
    await asyncio.gather(*fast)
    total = 5 + 5 + 8 * 3
    async with asyncio.timeout(10):
        while len(seen) < total:
            await asyncio.sleep(0.01)
    done.set()
    await polling
    assert seen == list(range(1, total + 1))
    assert [e.position for e in await read_everything(writer)] == seen
    assert (await writer.verify()).ok
    for ledger in (writer, reader_ledger, held):
        await ledger.close()


async def test_reader_sees_every_position_once_under_concurrent_appends(
    postgres_database: str,
) -> None:
    writer = PostgresLedger(postgres_database, max_size=8)
    reader_ledger = open_ledger(postgres_database)
    await writer.migrate()
    seen: list[int] = []
    done = asyncio.Event()

    async def reader() -> None:
        checkpoint = 0
        while not (done.is_set() and checkpoint == await reader_ledger.last_position()):
            page = await reader_ledger.read_all(checkpoint, 50)
            seen.extend(event.position for event in page)
            checkpoint = page[-1].position if page else checkpoint

    async def appender(n: int) -> None:
        for round_no in range(5):
            await writer.append([append(f"round:{n}:{round_no}", 0, 4)])

    polling = asyncio.create_task(reader())
    await asyncio.gather(*(appender(n) for n in range(16)))
    done.set()
    await polling
    assert seen == list(range(1, 16 * 5 * 4 + 1))
    await writer.close()
    await reader_ledger.close()


async def test_a_round_of_150000_bets_is_appended_within_the_session_limits(
    postgres_database: str,
) -> None:
    """A shared hand of 75,000 players, two bets each: one settlement fact and 75,000
    results in one append, under the service's ``statement_timeout`` and
    ``idle_in_transaction_session_timeout``, all of it committed in order."""
    players = 75_000
    lines = [
        {"bet_id": f"b{n}-{spot}", "player_id": f"p{n}", "spot": spot, "stake": 100}
        for n in range(players)
        for spot in ("ante", "call")
    ]
    settled = Fact("round.settled", Encoded.plain({"results": lines}), "r1:settled")
    outbox = [
        OutboxMessage(
            f"m{n}",
            "croupier.settlements",
            f"EUR.p{n}",
            Encoded.plain({"player_id": f"p{n}", "bets": lines[2 * n : 2 * n + 2]}),
            settled.key,
        )
        for n in range(players)
    ]
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()
        [recorded] = await ledger.append([StreamAppend("round:t:r1", 0, [settled])], outbox)
        pending = await ledger.pending_outbox(2 * players)
    assert [m.message_id for m in pending] == [m.message_id for m in outbox]
    assert {m.position for m in pending} == {recorded.position}
    assert pending[-1].body == outbox[-1].body


@pytest.mark.parametrize("odd_chunk", [None, 0, 2])
async def test_outbox_chunks_packed_as_arrays_or_copied(
    postgres_database: str, monkeypatch: pytest.MonkeyPatch, odd_chunk: int | None
) -> None:
    """A batch's first outbox chunk goes with its events, as arrays when it holds a text
    with the separator of packed columns (or an empty one), else packed; the rest is
    copied a chunk at a time (whatever the texts); every row is stored as given, in order."""
    monkeypatch.setattr("croupier.ledger.postgres.OUTBOX_CHUNK", 3)
    routing = [f"EUR.p{i}" for i in range(8)]
    if odd_chunk is not None:
        routing[odd_chunk * 3] = "EUR.p\x1f" if odd_chunk else ""
    outbox = [
        OutboxMessage(f"m{i}", "croupier.settlements", key, {"i": i}, "k")
        for i, key in enumerate(routing)
    ]
    batch = [StreamAppend("s", 0, [Fact("t", {}, "k")])]
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()
        first = await ledger.append(batch, outbox)
        pending = await ledger.pending_outbox()
        # Appended again, every chunk is found recorded (the first with the append's other
        # reads, the rest a statement each): the same rows, or a conflict past the first.
        assert await ledger.append(batch, outbox) == first
        changed = [*outbox[:7], OutboxMessage("m7", "croupier.settlements", "x", {"i": 7}, "k")]
        with pytest.raises(IdempotencyConflict):
            await ledger.append(batch, changed)
    assert [(m.message_id, m.routing_key, m.body) for m in pending] == [
        (f"m{i}", key, {"i": i}) for i, key in enumerate(routing)
    ]


async def test_a_value_past_the_pack_limit_goes_as_arrays_and_is_stored_exactly(
    postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value longer than ``PACK_LIMIT`` (the settlement fact of a large round) sends its
    statement's columns as arrays rather than packed: every value stored as given."""
    monkeypatch.setattr("croupier.ledger.postgres.PACK_LIMIT", 64)
    big = {"results": [{"player_id": f"p{n}", "stake": 100} for n in range(20)]}
    kinds = ((1, "text"), (2, "int"))
    assert _packed((["a" * 65, "b"], [1, 2]), kinds) is None
    assert _packed((["a" * 64, "b"], [1, 2]), kinds) == ("a" * 64 + "\x1fb", "1\x1f2")
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()
        facts = [Fact("round.settled", big, "r1:settled"), Fact("t", {"small": 1}, "k")]
        outbox = [OutboxMessage("m1", "croupier.settlements", "EUR.p1", big, "r1:settled")]
        recorded = await ledger.append([StreamAppend("round:t:r1", 0, facts)], outbox)
        [stored, _] = await ledger.read_stream("round:t:r1")
        [pending] = await ledger.pending_outbox()
        assert (await ledger.verify()).problems == ()
    assert stored.data == big and stored.hash == recorded[0].hash
    assert pending.body == big


async def test_facts_are_compressed_with_lz4_where_the_server_has_it(
    postgres_database: str,
) -> None:
    """Large facts are stored with lz4 (faster to write under the append lock and to read
    back than pglz), on a server built with it; elsewhere with the server's default."""
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()
    database = await asyncpg.connect(postgres_database)
    try:
        methods = await database.fetchval(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        method = await database.fetchval(
            "SELECT attcompression::text FROM pg_attribute "
            "WHERE attrelid = 'events'::regclass AND attname = 'data'"
        )
    finally:
        await database.close()
    assert method == ("l" if "lz4" in methods else "")


async def test_a_pooled_connection_comes_back_as_the_pool_lent_it(postgres_database: str) -> None:
    """The pool takes connections back without asyncpg's reset round trip: the read
    models' session resets what it changed, the session's own settings stay, and a
    transaction left open is rolled back."""
    ledger = PostgresLedger(postgres_database, max_size=1)
    try:
        pool = await ledger.pool()
        before = await pool.fetchval("SHOW work_mem")
        async with PostgresStore(ledger).session() as session:
            await session.execute("CREATE TEMP TABLE scratch (n int)")
        assert await pool.fetchval("SHOW work_mem") == before
        assert await pool.fetchval("SELECT to_regclass('pg_temp.scratch')") is None
        assert await pool.fetchval("SHOW jit") == "off"  # the pool's session settings stay
        with pytest.raises(RuntimeError):
            async with pool.acquire() as conn:
                await conn.execute("BEGIN")
                raise RuntimeError("a borrower failing inside a transaction")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
    finally:
        await ledger.close()
