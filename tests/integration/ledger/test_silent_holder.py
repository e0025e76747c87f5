"""A session holding the append lock whose client fell silent mid-exchange is ended.

The client here speaks the wire protocol itself, so that it can stop where a cut network
stops a real instance: after a statement's Bind and Execute, before its Sync. The server
then waits for the Sync with no limit of its own (``idle_in_transaction_session_timeout``
is armed only after a Sync), so the lock would be held for as long as TCP lives. The next
instance whose wait for the lock runs out ends that session, and its retry appends.
"""

from __future__ import annotations

import asyncio
import struct
from urllib.parse import urlsplit

import asyncpg
import pytest
from ledger_suite import append

from croupier.ledger import LedgerUnavailable
from croupier.ledger.postgres import APPEND_LOCK, PostgresLedger

pytestmark = pytest.mark.integration

#: Short limits, so that the test waits seconds: the holder is silent for longer than IDLE.
LIMITS = "lock_timeout=1s&idle_in_transaction_session_timeout=1s"


class SilentClient:
    """A PostgreSQL session driven message by message (protocol 3, trust authentication)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, url: str) -> SilentClient:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 5432)
        client = cls(reader, writer)
        options = {
            "user": parts.username or "postgres",
            "database": parts.path.lstrip("/"),
            "options": "-c idle_in_transaction_session_timeout=1s",
        }
        body = struct.pack("!i", 196608) + b"".join(
            k.encode() + b"\0" + v.encode() + b"\0" for k, v in options.items()
        )
        writer.write(struct.pack("!i", len(body) + 5) + body + b"\0")
        await client.until_ready()
        return client

    def send(self, kind: bytes, body: bytes) -> None:
        self.writer.write(kind + struct.pack("!i", len(body) + 4) + body)

    async def message(self) -> tuple[bytes, bytes]:
        head = await self.reader.readexactly(5)
        (length,) = struct.unpack("!i", head[1:])
        return head[:1], await self.reader.readexactly(length - 4)

    async def until_ready(self) -> bytes:
        """Read up to ReadyForQuery; its transaction status (``I``, ``T`` or ``E``)."""
        while True:
            kind, body = await self.message()
            assert kind != b"E", body
            if kind == b"Z":
                return body

    async def hold_lock_then_fall_silent(self) -> None:
        """Take the append lock in a transaction, then send a Bind and an Execute and no
        Sync: the server runs the statement and waits for the rest of the exchange."""
        self.send(b"Q", f"BEGIN; SELECT pg_advisory_xact_lock({APPEND_LOCK})".encode() + b"\0")
        assert await self.until_ready() == b"T"
        self.send(b"P", b"\0SELECT 1\0" + struct.pack("!h", 0))
        self.send(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
        self.send(b"E", b"\0" + struct.pack("!i", 0))
        await self.writer.drain()

    async def ended(self) -> bool:
        """Whether the server closed the session (after its FATAL, if any)."""
        try:
            while True:
                await asyncio.wait_for(self.message(), 5)
        except asyncio.IncompleteReadError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.writer.close()


async def _holder_pids(url: str) -> list[int]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
            "AND ((classid::bigint << 32) | objid::bigint) = $1 AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            APPEND_LOCK,
        )
        return [row[0] for row in rows]
    finally:
        await conn.close()


async def test_a_holder_silent_mid_exchange_is_ended_by_the_next_appender(
    postgres_database: str,
) -> None:
    owner = PostgresLedger(postgres_database)
    await owner.migrate()
    await owner.close()
    silent = await SilentClient.connect(postgres_database)
    try:
        await silent.hold_lock_then_fall_silent()
        await asyncio.sleep(2.5)  # over twice the idle limit: the server itself ends nothing
        assert len(await _holder_pids(postgres_database)) == 1

        ledger = PostgresLedger(f"{postgres_database}?{LIMITS}")
        try:
            with pytest.raises(LedgerUnavailable):
                await ledger.append([append("s", 0, 2)], [])
            assert await silent.ended()
            assert await _holder_pids(postgres_database) == []
            await ledger.append([append("s", 0, 2)], [])
            assert await ledger.last_position() == 2
        finally:
            await ledger.close()
    finally:
        silent.close()


async def test_a_holder_that_talks_is_left_alone(postgres_database: str) -> None:
    owner = PostgresLedger(postgres_database)
    await owner.migrate()
    await owner.close()
    holder = await asyncpg.connect(postgres_database)
    try:
        async with holder.transaction():
            await holder.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)
            waiter = PostgresLedger(f"{postgres_database}?{LIMITS}")
            try:
                # The holder keeps talking (a statement every half second): it is slow, not silent.
                attempt = asyncio.create_task(waiter.writable())
                while not attempt.done():
                    await holder.execute("SELECT pg_sleep(0.5)")
                with pytest.raises(LedgerUnavailable):
                    await attempt
            finally:
                await waiter.close()
            assert await holder.fetchval("SELECT 1") == 1  # still alive, lock still held
    finally:
        await holder.close()
