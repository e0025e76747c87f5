"""The PostgreSQL ledger adapter (asyncpg, a connection pool, one statement per batch insert).

Why readers never skip a late commit
------------------------------------
Every append transaction first takes ``pg_advisory_xact_lock(APPEND_LOCK)`` and only then
reads the chain head and numbers its events head+1, head+2, ... The lock is released when
the transaction ends, and PostgreSQL marks a transaction committed (visible to new
snapshots) before it releases its locks. So the next appender can only read the head
after the previous batch is visible, positions are assigned in commit order, and no
snapshot can contain position n+1 without position n. A reader that asks for
``position > checkpoint`` therefore never finds a hole that fills in later (unlike
sequence-numbered inserts, where a slow transaction commits a lower number after a
faster one was read). The same lock makes the hash chain's predecessor well defined.

READ COMMITTED is required: each statement takes a fresh snapshot, so the head is read
after the lock is granted. Under REPEATABLE READ the snapshot would predate the wait.

Why an append does not look its keys up first
---------------------------------------------
Whatever an append does between taking the lock and committing, every other appender
waits for: the lock's held time is what one chain can carry (``append_lock_held``). An
append reads the head and its streams' versions, but not whether its events' keys and its
outbox messages' ids are recorded already (two thousand index probes for a batch, a fifth
of the time the lock was held): the unique constraints on ``events.key`` and
``outbox.message_id`` refuse a recorded one at insert, the transaction is rolled back
with nothing written, and the append is planned again against what is recorded (a
redelivery after a crash: recorded facts are returned, not written twice; other content
under a recorded key is an ``IdempotencyConflict``, as before).

Why a hung instance cannot hold the ledger
------------------------------------------
Every session runs with :data:`SESSION_LIMITS`: a transaction whose client stopped talking
(SIGSTOP, a partition) is ended by the server after ``idle_in_transaction_session_timeout``,
a statement after ``statement_timeout``, and a wait for the append lock gives up after
``lock_timeout`` (the caller retries). A holder whose client went silent in the middle of an
exchange, which neither server limit covers, is ended by the next instance whose wait for
the lock ran out (migration ``0007``). So the append lock is free again within seconds of
an instance hanging. Each limit can be set in the URL's query, e.g.
``postgresql://host/db?lock_timeout=2s``; migrations run without limits.

Why sessions run without JIT
----------------------------
Every session also runs with ``jit=off`` (:data:`SESSION_SETTINGS`). The relay's listing
of pending outbox rows reads each row's publish marks in a subquery, and once the outbox
holds 100,000 rows the planner's estimate passes ``jit_above_cost``: PostgreSQL then
compiled the query again at every execution, 12-30 ms of a statement that reads a page of
1,000 rows in 10 ms, or none in 0.1 ms; a shared hand of 100,000 players paid it twice per
page, 200 times. Nothing the ledger asks runs long enough for compiled expressions to pay.
The URL's query can set it too (``?jit=on``).

Why a connection goes back to the pool without a reset
------------------------------------------------------
asyncpg resets a connection it takes back (``RESET ALL``, ``UNLISTEN *``, ``CLOSE ALL``,
unlocking advisory locks): one more round trip for every statement the ledger sends
through the pool. A ledger session leaves nothing of that kind: its settings are ``SET
LOCAL``, its advisory locks are transaction-level, it neither listens nor keeps cursors,
and an open transaction is rolled back by asyncpg before any reset. The one borrower that
changes its session, the read models' (``projection.postgres``), resets it itself before
handing the connection back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from urllib.parse import parse_qs, urlsplit, urlunsplit

import asyncpg
import msgspec
import structlog

from contract.canonical import canonical_json
from croupier.ledger import (
    Fence,
    Fenced,
    HeadNotSigned,
    Ledger,
    LedgerUnavailable,
    OutboxMessage,
    PartitionsFixed,
    RecordedEvent,
    StreamAppend,
    VersionConflict,
    unavailable_on,
)
from croupier.ledger.batch import (
    OutboxInsert,
    Plan,
    batch_keys,
    batch_streams,
    outbox_ids,
    plan_append,
)
from croupier.ledger.chain import GENESIS_HASH, ChainRow, format_timestamp
from croupier.ledger.keyring import KEYS_STREAM, Keyring
from croupier.ledger.migrate import migrations
from croupier.ledger.outbox import OutboxRow, PublishedFloor, SetAsideRow
from croupier.ledger.partitions import (
    DEFAULT_PARTITIONS,
    FORGET_SECONDS,
    Instance,
    Lease,
    PartitionLeases,
    Taken,
    check_count,
)
from croupier.ledger.signing import LedgerKey
from croupier.ledger.trust import HEADS_SCANNED, HeadRow, MarkRow, Trust

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]

APPEND_LOCK = 0x63726F7570696572 >> 1  # "croupier", as a positive bigint
MIGRATE_LOCK = APPEND_LOCK - 1

_COLUMNS = (
    "position",
    "stream",
    "version",
    "type",
    "data",
    "key",
    "recorded_at",
    "prev_hash",
    "hash",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM events"
#: The parameters of a batch's events that are columns of values, with their types.
_EVENT_PARAMETERS: Final = (
    (2, "text"),
    (3, "int"),
    (4, "text"),
    (5, "json"),
    (6, "text"),
    (8, "text"),
    (9, "text"),
)
#: The types of an outbox insert's columns: message ids, positions, exchanges, routing
#: keys, bodies (JSON text) and event hashes.
_OUTBOX_TYPES: Final = ("text", "bigint", "text", "text", "text", "text")
_BATCH_PARAMETERS: Final = (*_EVENT_PARAMETERS, *enumerate(_OUTBOX_TYPES, start=10))
_MARK_PUBLISHED: Final = (
    "INSERT INTO outbox_published (message_id, mark) "
    "SELECT unnest($1::text[]), $2::bigint ON CONFLICT DO NOTHING"
)
#: The signed mark and the publish marks that name it, in one statement (one round trip).
_MARK_SIGNED: Final = """
    WITH mark AS (
        INSERT INTO outbox_marks (message_ids, key_id, signature)
        VALUES ($1::json, $2, $3) RETURNING mark
    ), published AS (
        INSERT INTO outbox_published (message_id, mark)
        SELECT unnest($4::text[]), mark.mark FROM mark ON CONFLICT DO NOTHING
    )
    SELECT mark FROM mark
"""
#: The unique constraints that refuse an event or outbox message recorded before.
_RECORDED_ALREADY: Final = frozenset({"events_key_unique", "outbox_message_id_key"})
#: Separates the values of a column sent as one text (``_packed``): a control character,
#: which canonical JSON always escapes.
_SEPARATOR: Final = "\x1f"
Column: TypeAlias = Callable[[int, str], str]
_decode_json: Final = msgspec.json.Decoder().decode


def _array(number: int, kind: str) -> str:
    """Parameter ``number``, an array of ``kind``."""
    return f"${number}::{kind}[]"


def _split(number: int, kind: str) -> str:
    """Parameter ``number``, one text of ``kind`` values joined by ``_SEPARATOR``."""
    return f"string_to_array(${number}::text, E'\\x1f')::{kind}[]"


def _insert_batch(column: Column) -> str:
    """A batch's events, outbox rows and signed head, in one statement (one round trip, under
    the append lock): columns of values in, unnest out; the parts insert into different
    tables and none reads another's rows."""
    events = ", ".join(column(n, kind) for n, kind in _EVENT_PARAMETERS)
    outbox = ", ".join(column(n, kind) for n, kind in _BATCH_PARAMETERS[len(_EVENT_PARAMETERS) :])
    return f"""
    WITH appended AS (
        INSERT INTO events ({", ".join(_COLUMNS)})
        SELECT $1::bigint + ord - 1, stream, version, type, data, key, $7::timestamptz, prev, hash
        FROM unnest({events})
            WITH ORDINALITY AS r(stream, version, type, data, key, prev, hash, ord)
    ), reported AS (
        INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash)
        SELECT m, p, e, r, b::json, h
        FROM unnest({outbox}) AS o(m, p, e, r, b, h)
    ), signed AS (
        INSERT INTO ledger_heads (position, hash, key_id, signature, published)
        SELECT $16::bigint, $17::text, $18::text, $19::text, $20::bigint
        WHERE $16::bigint IS NOT NULL
    )
    SELECT 1
"""


# Each column of values one text the server splits (``_packed``), or else an array:
# encoding an array, asyncpg checks every element against collections.abc (three
# Python-level calls for a text), about 0.4 us a value; the replay bench sends 1.6 million.
_INSERT_BATCH: Final = _insert_batch(_array)
_INSERT_BATCH_PACKED: Final = _insert_batch(_split)
#: Outbox rows per statement: the first chunk goes in the statement that inserts the events,
#: the rest are copied (``COPY``, a chunk at a time: a round of 100,000 players' rows took
#: 1.48-1.54 s to append so, against 1.74-1.88 s as insert statements), so no statement
#: nears ``statement_timeout``.
OUTBOX_CHUNK: Final = 10_000
_OUTBOX_COPIED: Final = ("message_id", "position", "exchange", "routing_key", "body", "event_hash")
#: The longest value sent packed (``_packed``). The server copies a packed text apart value
#: by value; for the 45 MB settlement fact of a 100,000-player hand that took longer than
#: asyncpg sending it as the one element of an array (0.63-0.83 s against 0.44-0.65 s).
PACK_LIMIT: Final = 1 << 20
#: Rows read back into events between turns of the event loop (``read_streams``).
READ_EVERY: Final = 1_000
_HEAD_COLUMNS = "id, position, hash, key_id, signature, published"
_OUTBOX_COLUMNS = (
    "o.seq, o.message_id, o.exchange, o.routing_key, o.body::text, o.position, o.event_hash, "
    "ARRAY(SELECT p.mark FROM outbox_published p WHERE p.message_id = o.message_id), "
    "EXISTS (SELECT 1 FROM outbox_set_aside s WHERE s.message_id = o.message_id)"
)


#: Server settings of every session unless the URL's query sets them (see the docstring).
SESSION_LIMITS: Final = {
    "lock_timeout": "5s",
    "idle_in_transaction_session_timeout": "5s",
    "statement_timeout": "10s",
}
#: Server settings of every session: the limits, and no JIT compilation (the docstring).
SESSION_SETTINGS: Final = {**SESSION_LIMITS, "jit": "off"}
#: The client gives up on a server that answers nothing (paused, partitioned) after this.
COMMAND_TIMEOUT: Final = 20.0
#: ``close`` waits this long for the pool to close gracefully, then closes its sockets.
CLOSE_SECONDS: Final = 1.5

#: What asyncpg raises for a fault that passes; callers see :class:`LedgerUnavailable`.
TRANSIENT: Final = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    # Administrator shutdown or restart, a terminated backend, a dropped database, a
    # statement over statement_timeout (57xxx).
    asyncpg.OperatorInterventionError,
    # What connecting raises while the database refuses connections (ALLOW_CONNECTIONS);
    # also the append lock not granted within lock_timeout (55P03).
    asyncpg.ObjectNotInPrerequisiteStateError,
    # This instance hung inside a transaction and the server ended it (25P03).
    asyncpg.IdleInTransactionSessionTimeoutError,
)
_reaching = unavailable_on(*TRANSIENT)
log = structlog.get_logger("croupier.ledger")


#: Ends a holder of the append lock silent for longer than the idle limit (none when the
#: limit is off); see migration 0007.
_END_SILENT_HOLDER: Final = (
    "SELECT ledger_end_silent_append_holder($1, "
    "current_setting('idle_in_transaction_session_timeout')::interval) "
    "WHERE current_setting('idle_in_transaction_session_timeout') <> '0'"
)

# A migration may rewrite a large table, or wait for another instance's migration.
_UNLIMITED: Final = "SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0"


async def _nothing_left_to_reset(_: asyncpg.Connection) -> None:
    """A ledger session leaves nothing to reset (the module docstring)."""


def session_settings(url: str) -> dict[str, str]:
    """The :data:`SESSION_SETTINGS` that ``url`` does not set itself."""
    named = parse_qs(urlsplit(url).query)
    return {name: value for name, value in SESSION_SETTINGS.items() if name not in named}


class PostgresLedger(Ledger):
    """The ledger in PostgreSQL; the pool is created on first use."""

    dialect = "postgres"

    def __init__(
        self,
        url: str,
        *,
        key: LedgerKey | None = None,
        keyring: Keyring | None = None,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self.url = url
        self.trust = Trust(key, keyring)
        self._min_size = min_size
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()
        self._floor = PublishedFloor()
        self._open_known = {}

    async def pool(self) -> asyncpg.Pool:
        """The connection pool (created on first call)."""
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self.url,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    server_settings=session_settings(self.url),
                    command_timeout=COMMAND_TIMEOUT,
                    reset=_nothing_left_to_reset,
                )
        return self._pool

    @_reaching
    async def migrate(self, partitions: int | None = None) -> list[str]:
        if partitions is not None:
            check_count(partitions)
        applied: list[str] = []
        async with (await self.pool()).acquire() as conn, conn.transaction():
            await conn.execute(_UNLIMITED)
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATE_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for migration in migrations("postgres"):
                if migration.version not in done:
                    await conn.execute(migration.sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                        migration.version,
                        migration.name,
                    )
                    applied.append(migration.name)
            await _fix_partitions(conn, partitions)
        return applied

    @_reaching
    async def schema_version(self) -> int:
        pool = await self.pool()
        if await pool.fetchval("SELECT to_regclass('schema_migrations')") is None:
            return 0
        return int(await pool.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))

    @_reaching
    async def _append(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage],
        fence: Fence | None = None,
    ) -> Plan:
        keys = batch_keys(appends)
        ids = outbox_ids(outbox)
        try:
            return await self._append_planned(appends, outbox, fence, keys, ids, look_up=False)
        except asyncpg.UniqueViolationError as error:
            if error.constraint_name not in _RECORDED_ALREADY:
                raise
        # Some of it is recorded already (a redelivery): planned again against the record.
        return await self._append_planned(appends, outbox, fence, keys, ids, look_up=True)

    async def _append_planned(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage],
        fence: Fence | None,
        keys: list[str],
        ids: list[str],
        *,
        look_up: bool,
    ) -> Plan:
        """One append transaction. Unless ``look_up``, planned as if none of its keys and
        message ids were recorded, and again against the record (the same transaction, the
        lock still held) when that plan meets a stream past its expected version."""
        streams = batch_streams(appends)
        async with self._append_locked() as conn:
            if fence is not None:
                await _check_fence(conn, fence)
            recorded_at = datetime.now(UTC)
            looked_up = (keys, ids) if look_up else ([], [])
            read = await _before_append(conn, looked_up[0], streams, looked_up[1])
            try:
                plan = _plan(appends, outbox, read, recorded_at)
            except VersionConflict:
                if look_up:
                    raise
                read = await _before_append(conn, keys, streams, ids)  # a redelivery?
                plan = _plan(appends, outbox, read, recorded_at)
            signed: tuple[int, str, str, str, int] | tuple[None, ...] = (None,) * 5
            if plan.rows and self.trust.signing:
                head = read[0]
                await self._check_head(conn, head, plan.rows[0].position, plan.rows[-1].position)
                last = plan.rows[-1]
                signed = self.trust.sign_head(last.position, last.hash, self._floor.seq)
            await self._write(conn, plan, signed)
        return plan

    async def _write(self, conn: Conn, plan: Plan, head: Sequence[Any]) -> None:
        """Insert the planned rows and the signed head (inside the append transaction, lock
        held): the events, the head and the first ``OUTBOX_CHUNK`` outbox rows in one
        statement, the rest of the outbox copied a chunk at a time, in order."""
        if plan.rows or plan.outbox:
            columns = _columns(plan.rows, plan.outbox[:OUTBOX_CHUNK])
            packed = _packed(columns, _BATCH_PARAMETERS)
            if packed is None:
                await conn.execute(_INSERT_BATCH, *columns, *head)
            else:
                await conn.execute(_INSERT_BATCH_PACKED, *packed, *head)
        for start in range(OUTBOX_CHUNK, len(plan.outbox), OUTBOX_CHUNK):
            await conn.copy_records_to_table(
                "outbox",
                records=plan.outbox[start : start + OUTBOX_CHUNK],
                columns=_OUTBOX_COPIED,
            )

    async def _check_head(self, conn: Conn, head: tuple[int, str], first: int, last: int) -> None:
        """Refuse to append after rows no key of the keyring signed, after a handover to
        another key, or at positions this key may not sign (inside the append lock)."""
        why = None
        if head != self.trust.head and head[0] != 0:
            rows = await conn.fetch(
                f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE position = $1 ORDER BY id DESC "
                f"LIMIT {HEADS_SCANNED}",
                head[0],
            )
            any_heads = bool(rows) or bool(
                await conn.fetchval("SELECT EXISTS (SELECT FROM ledger_heads)")
            )
            event = await conn.fetchrow(
                "SELECT type, data::text FROM events WHERE position = $1", head[0]
            )
            assert event is not None  # the head's own row
            handed_over = not any_heads and bool(
                await conn.fetchval(
                    "SELECT EXISTS (SELECT FROM events WHERE stream = $1)", KEYS_STREAM
                )
            )
            why = self.trust.accept_head(
                head, [HeadRow(*r) for r in rows], any_heads, (event[0], event[1]), handed_over
            )
        why = why or self.trust.may_sign(first) or self.trust.may_sign(last)
        if why:
            signed = await conn.fetchval("SELECT coalesce(max(position), 0) FROM ledger_heads")
            raise HeadNotSigned(head[0], int(signed), why)

    @_reaching
    async def read_streams(self, streams: Sequence[str]) -> dict[str, list[RecordedEvent]]:
        wanted = list(dict.fromkeys(streams))
        rows = await (await self.pool()).fetch(
            f"{_SELECT} WHERE stream = ANY($1::text[]) ORDER BY position", wanted
        )
        found: dict[str, list[RecordedEvent]] = {stream: [] for stream in wanted}
        for index, row in enumerate(rows):
            found[row["stream"]].append(_recorded(row))
            if index % READ_EVERY == READ_EVERY - 1:
                await asyncio.sleep(0)  # a round of 100,000 players is 300,000 rows
        return found

    @_reaching
    async def read_last(self, stream: str) -> RecordedEvent | None:
        row = await (await self.pool()).fetchrow(
            f"{_SELECT} WHERE stream = $1 ORDER BY version DESC LIMIT 1", stream
        )
        return None if row is None else _recorded(row)

    @_reaching
    async def read_all(self, after_position: int = 0, limit: int = 1000) -> list[RecordedEvent]:
        rows = await (await self.pool()).fetch(
            f"{_SELECT} WHERE position > $1 ORDER BY position LIMIT $2", after_position, limit
        )
        return [_recorded(row) for row in rows]

    @_reaching
    async def stream_version(self, stream: str) -> int:
        value = await (await self.pool()).fetchval(
            "SELECT max(version) FROM events WHERE stream = $1", stream
        )
        return int(value or 0)

    @_reaching
    async def writable(self) -> None:
        async with self._append_locked():
            pass

    @contextlib.asynccontextmanager
    async def _append_locked(self) -> AsyncIterator[Conn]:
        """A connection in a transaction that holds the append lock. When the wait for it
        runs out, a holder whose client went silent mid-exchange is ended before the error
        is raised, so that the caller's retry finds the lock free."""
        pool = await self.pool()
        taken: float | None = None
        try:
            async with pool.acquire() as conn:
                try:
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)
                        taken = time.monotonic()
                        yield conn
                finally:  # committed or rolled back: the lock is free again
                    if taken is not None:
                        self.append_lock_held += time.monotonic() - taken
        except asyncpg.LockNotAvailableError:
            with contextlib.suppress(LedgerUnavailable, asyncpg.PostgresError):
                await self.end_silent_holders()
            raise

    @_reaching
    async def end_silent_holders(self) -> int:
        ended = int(await (await self.pool()).fetchval(_END_SILENT_HOLDER, APPEND_LOCK) or 0)
        if ended:
            log.warning(
                "ended a session holding the append lock, its client silent", sessions=ended
            )
        return ended

    @_reaching
    async def last_position(self) -> int:
        value = await (await self.pool()).fetchval("SELECT max(position) FROM events")
        return int(value or 0)

    @_reaching
    async def last_recorded(self, prefix: str) -> dict[str, datetime]:
        rows = await (await self.pool()).fetch(
            "SELECT split_part(substr(stream, $2), ':', 1), max(recorded_at) FROM events "
            "WHERE starts_with(stream, $1) GROUP BY 1",
            prefix,
            len(prefix) + 1,
        )
        return {name: recorded.astimezone(UTC) for name, recorded in rows}

    @_reaching
    async def first_recorded(self, streams: Sequence[str]) -> dict[str, datetime]:
        rows = await (await self.pool()).fetch(_FIRST_RECORDED, list(dict.fromkeys(streams)))
        return {stream: recorded.astimezone(UTC) for stream, recorded in rows}

    @_reaching
    async def mark_published(self, message_ids: Iterable[str], *, written: bool = False) -> None:
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return
        pool = await self.pool()
        if written:  # the hot path: one statement, its own transaction
            await self._mark(pool, sorted(ids))
        else:
            async with pool.acquire() as conn, conn.transaction():
                await self._mark(conn, await _known(conn, ids))
        self._floor.marked(ids)

    async def _mark(self, conn: Conn | asyncpg.Pool, known: list[str]) -> None:
        """Mark ``known`` (sorted, all in the outbox) published, under one signed mark when
        signing: both inserts in one statement."""
        if not known:
            return
        if not self.trust.signing:
            await conn.execute(_MARK_PUBLISHED, known, None)
            return
        key_id, signature = self.trust.sign_mark(known)
        mark = await conn.fetchval(_MARK_SIGNED, canonical_json(known), key_id, signature, known)
        self.trust.remember_mark(mark, known)

    @_reaching
    async def _open_floor(self, scope: str) -> tuple[int, int]:
        pool = await self.pool()
        head = int(await pool.fetchval("SELECT coalesce(max(position), 0) FROM events"))
        try:
            floor = await pool.fetchval(
                "SELECT coalesce(max(position), 1) FROM open_floor WHERE scope = $1", scope
            )
        except asyncpg.InsufficientPrivilegeError:
            return 1, head  # a role that may read the events only: the whole search
        return int(floor), head

    async def _open_above(
        self, prefix: str, closing: Sequence[str], floor: int, head: int, limit: int
    ) -> list[tuple[str, int]]:
        # One pass over the positions floor..head (the primary key's range): a stream that
        # began there has every later event, its closing one included, there too.
        rows = await (await self.pool()).fetch(
            "SELECT stream, min(position) AS began FROM events "
            "WHERE position BETWEEN $2 AND $3 AND starts_with(stream, $1) GROUP BY stream "
            "HAVING min(version) = 1 AND NOT bool_or(type = ANY($4::text[])) "
            "ORDER BY began LIMIT $5",
            prefix,
            floor,
            head,
            list(closing),
            limit,
        )
        return [(r[0], int(r[1])) for r in rows]

    async def _open_changes(
        self, prefix: str, closing: Sequence[str], after: int, head: int
    ) -> list[tuple[str, int, int, str]]:
        rows = await (await self.pool()).fetch(
            "SELECT stream, position, version, type FROM events "
            "WHERE position > $2 AND position <= $3 AND starts_with(stream, $1) "
            "AND (version = 1 OR type = ANY($4::text[])) ORDER BY position",
            prefix,
            after,
            head,
            list(closing),
        )
        return [(r[0], int(r[1]), int(r[2]), r[3]) for r in rows]

    async def _raise_open_floor(self, scope: str, position: int) -> None:
        with contextlib.suppress(asyncpg.InsufficientPrivilegeError):
            await (await self.pool()).execute(
                "INSERT INTO open_floor (scope, position) VALUES ($1, $2)", scope, position
            )

    @_reaching
    async def _record_set_aside(
        self, rows: Sequence[tuple[str, str, str | None, str | None]]
    ) -> None:
        await (await self.pool()).execute(
            "INSERT INTO outbox_set_aside (message_id, reason, key_id, signature) "
            "SELECT o.message_id, r.reason, r.key_id, r.signature "
            "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) "
            "AS r(message_id, reason, key_id, signature) "
            "JOIN outbox o ON o.message_id = r.message_id WHERE NOT EXISTS (SELECT FROM "
            "outbox_set_aside s WHERE s.message_id = r.message_id "
            "AND s.signature IS NOT DISTINCT FROM r.signature)",
            *zip(*rows, strict=True),
        )

    @_reaching
    async def _set_aside_page(
        self, after_id: int, limit: int
    ) -> list[tuple[SetAsideRow, OutboxRow]]:
        rows = await (await self.pool()).fetch(
            f"SELECT s.id, s.message_id, s.reason, s.key_id, s.signature, {_OUTBOX_COLUMNS} "
            "FROM outbox_set_aside s JOIN outbox o ON o.message_id = s.message_id "
            "WHERE s.id > $1 ORDER BY s.id LIMIT $2",
            after_id,
            limit,
        )
        return [(SetAsideRow(*row[:5]), _outbox_row(row[5:])) for row in rows]

    @_reaching
    async def leases(self) -> list[tuple[str, str, float]]:
        rows = await (await self.pool()).fetch(
            "SELECT name, holder, (extract(epoch FROM expires_at) - extract(epoch FROM now()))"
            "::float8 "
            "FROM relay_lease ORDER BY name"
        )
        return [(row[0], row[1], row[2]) for row in rows]

    @_reaching
    async def hold_lease(self, name: str, holder: str, seconds: float) -> bool:
        # The database's clock decides, so instances need not agree on the time.
        held = await (await self.pool()).fetchval(
            "INSERT INTO relay_lease (name, holder, expires_at) "
            "VALUES ($1, $2, now() + make_interval(secs => $3)) "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
            "expires_at = EXCLUDED.expires_at "
            "WHERE relay_lease.holder = EXCLUDED.holder OR relay_lease.expires_at < now() "
            "RETURNING holder",
            name,
            holder,
            seconds,
        )
        return bool(held == holder)

    def partition_leases(self) -> PostgresPartitions:
        return PostgresPartitions(self)

    async def close(self) -> None:
        """Close the pool: gracefully for ``CLOSE_SECONDS`` at most (a database out of
        reach never answers), then by closing the sockets."""
        async with self._pool_lock:
            if self._pool is not None:
                closing = asyncio.ensure_future(self._pool.close())
                if not (await asyncio.wait({closing}, timeout=CLOSE_SECONDS))[0]:
                    closing.cancel()
                    self._pool.terminate()
                self._pool = None

    @_reaching
    async def _chain_page(self, after_position: int, limit: int) -> list[ChainRow]:
        rows = await (await self.pool()).fetch(
            f"{_SELECT} WHERE position > $1 ORDER BY position LIMIT $2", after_position, limit
        )
        return [_chain_row(row) for row in rows]

    @_reaching
    async def _outbox_after(self, after_seq: int, limit: int, through_seq: int) -> list[OutboxRow]:
        rows = await (await self.pool()).fetch(
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.seq > $1 AND o.seq <= $3 "
            "ORDER BY o.seq LIMIT $2",
            after_seq,
            limit,
            through_seq,
        )
        return [_outbox_row(row) for row in rows]

    @_reaching
    async def _outbox_seq_through(self, position: int) -> int:
        seq = await (await self.pool()).fetchval(
            "SELECT seq FROM outbox WHERE position <= $1 ORDER BY position DESC, seq DESC LIMIT 1",
            position,
        )
        return int(seq or 0)

    @_reaching
    async def _outbox_past(self, position: int, limit: int, through: int) -> list[OutboxRow]:
        rows = await (await self.pool()).fetch(
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.position > $1 AND o.position <= $3 "
            "ORDER BY o.position, o.seq LIMIT $2",
            position,
            limit,
            through,
        )
        return [_outbox_row(row) for row in rows]

    @_reaching
    async def _outbox_between(self, low: int, high: int) -> list[OutboxRow]:
        rows = await (await self.pool()).fetch(
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.position > $1 AND o.position <= $2 "
            "ORDER BY o.position, o.seq",
            low,
            high,
        )
        return [_outbox_row(row) for row in rows]

    @_reaching
    async def _message_positions(self, message_ids: Sequence[str]) -> dict[str, int]:
        rows = await (await self.pool()).fetch(
            "SELECT message_id, position FROM outbox WHERE message_id = ANY($1::text[])",
            list(message_ids),
        )
        return {row[0]: int(row[1]) for row in rows}

    @_reaching
    async def _marks(self, marks: Sequence[int]) -> list[MarkRow]:
        rows = await (await self.pool()).fetch(
            "SELECT mark, message_ids::text, key_id, signature FROM outbox_marks "
            "WHERE mark = ANY($1::bigint[])",
            list(marks),
        )
        return [_mark_row(row) for row in rows]

    @_reaching
    async def _mark_page(self, after_mark: int, limit: int) -> list[MarkRow]:
        rows = await (await self.pool()).fetch(
            "SELECT mark, message_ids::text, key_id, signature FROM outbox_marks "
            "WHERE mark > $1 ORDER BY mark LIMIT $2",
            after_mark,
            limit,
        )
        return [_mark_row(row) for row in rows]

    @_reaching
    async def _marker_page(self, after: tuple[int, str], limit: int) -> list[tuple[int, str]]:
        rows = await (await self.pool()).fetch(
            "SELECT coalesce(mark, -1) AS m, message_id FROM outbox_published "
            "WHERE (coalesce(mark, -1), message_id) > ($1, $2) ORDER BY m, message_id LIMIT $3",
            after[0],
            after[1],
            limit,
        )
        return [(row[0], row[1]) for row in rows]

    @_reaching
    async def _heads_from(self, position: int, limit: int = HEADS_SCANNED) -> list[HeadRow]:
        rows = await (await self.pool()).fetch(
            f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE position >= $1 "
            "ORDER BY position, id LIMIT $2",
            position,
            limit,
        )
        return [HeadRow(*row) for row in rows]

    @_reaching
    async def _head_page(self, after_id: int, limit: int) -> list[HeadRow]:
        rows = await (await self.pool()).fetch(
            f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE id > $1 ORDER BY id LIMIT $2",
            after_id,
            limit,
        )
        return [HeadRow(*row) for row in rows]


async def _fix_partitions(conn: Conn, partitions: int | None) -> None:
    """Store the partition count and a free lease per partition unless stored already
    (inside the migration's transaction); ``PartitionsFixed`` when another count is."""
    stored = await conn.fetchval("SELECT count FROM ledger_partitions")
    if stored is None:
        count = DEFAULT_PARTITIONS if partitions is None else partitions
        await conn.execute("INSERT INTO ledger_partitions (count) VALUES ($1)", count)
        await conn.execute(
            "INSERT INTO partition_leases (partition) SELECT generate_series(0, $1 - 1)", count
        )
    elif partitions is not None and partitions != stored:
        raise PartitionsFixed(int(stored), partitions)


#: The fence's partitions whose lease its owner holds at the epoch named, unexpired at this
#: moment (clock_timestamp: the transaction may have waited for the append lock), locked
#: shared in partition order until the append ends: a takeover (which skips locked rows),
#: renewal or release of them waits for it, and one that committed first is seen.
_FENCE = """
    SELECT l.partition FROM unnest($1::int[], $2::bigint[]) AS f(partition, epoch)
    JOIN partition_leases l ON l.partition = f.partition
    WHERE l.owner = $3 AND l.epoch = f.epoch AND l.expires_at > clock_timestamp()
    ORDER BY l.partition FOR SHARE OF l
"""


async def _check_fence(conn: Conn, fence: Fence) -> None:
    """Raise ``Fenced`` unless ``fence.owner`` holds each of its partitions at its epoch."""
    if not fence.epochs:
        return
    partitions = list(fence.epochs)
    held = await conn.fetch(_FENCE, partitions, [fence.epochs[p] for p in partitions], fence.owner)
    missing = set(partitions) - {row[0] for row in held}
    if missing:
        raise Fenced(fence.owner, missing)


#: Free or expired partitions, lowest first, skipping rows another transaction locked (a
#: racing taker, an append checking its fence): racers get disjoint sets and never wait.
_TAKE = """
    WITH free AS (
        SELECT partition, epoch AS was, expires_at AS ended, owner AS lapsed
        FROM partition_leases
        WHERE owner IS NULL OR expires_at <= clock_timestamp()
        ORDER BY partition LIMIT $3 FOR UPDATE SKIP LOCKED
    )
    UPDATE partition_leases l SET owner = $1, epoch = l.epoch + 1,
        expires_at = clock_timestamp() + make_interval(secs => $2)
    FROM free WHERE l.partition = free.partition
    RETURNING l.partition, l.epoch, CASE WHEN free.was > 0
        THEN extract(epoch FROM clock_timestamp() - free.ended)::float8 END, free.lapsed
"""
#: Rows are locked in partition order, as the fence locks them: no deadlock between them.
_RENEW = """
    WITH mine AS (
        SELECT partition FROM partition_leases
        WHERE owner = $1 AND expires_at > clock_timestamp() ORDER BY partition FOR UPDATE
    )
    UPDATE partition_leases l SET expires_at = clock_timestamp() + make_interval(secs => $2)
    FROM mine WHERE l.partition = mine.partition AND l.expires_at > clock_timestamp()
    RETURNING l.partition, l.epoch
"""
_RELEASE = """
    WITH mine AS (
        SELECT partition FROM partition_leases
        WHERE owner = $1 AND ($2::int[] IS NULL OR partition = ANY($2::int[]))
        ORDER BY partition FOR UPDATE
    )
    UPDATE partition_leases l SET owner = NULL,
        expires_at = least(l.expires_at, clock_timestamp())
    FROM mine WHERE l.partition = mine.partition AND l.owner = $1
    RETURNING l.partition
"""


class PostgresPartitions(PartitionLeases):
    """Partition leases in the ledger's PostgreSQL database, through its pool."""

    def __init__(self, ledger: PostgresLedger) -> None:
        self.ledger = ledger

    @_reaching
    async def count(self) -> int:
        pool = await self.ledger.pool()
        return int(await pool.fetchval("SELECT count FROM ledger_partitions"))

    @_reaching
    async def register(self, instance: str, seconds: float) -> int:
        async with (await self.ledger.pool()).acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO instances (id, seen_at, live_until) VALUES "
                "($1, clock_timestamp(), clock_timestamp() + make_interval(secs => $2)) "
                "ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at, "
                "live_until = EXCLUDED.live_until",
                instance,
                seconds,
            )
            await conn.execute(
                "DELETE FROM instances "
                "WHERE seen_at < clock_timestamp() - make_interval(secs => $1)",
                FORGET_SECONDS,
            )
            return int(
                await conn.fetchval(
                    "SELECT count(*) FROM instances WHERE live_until > clock_timestamp()"
                )
            )

    @_reaching
    async def take(self, owner: str, seconds: float, limit: int) -> list[Taken]:
        if limit <= 0:
            return []
        rows = await (await self.ledger.pool()).fetch(_TAKE, owner, seconds, limit)
        return sorted(Taken(row[0], int(row[1]), row[2], row[3]) for row in rows)

    @_reaching
    async def renew(self, owner: str, seconds: float) -> dict[int, int]:
        rows = await (await self.ledger.pool()).fetch(_RENEW, owner, seconds)
        return dict(sorted((row[0], int(row[1])) for row in rows))

    @_reaching
    async def release(self, owner: str, partitions: Collection[int] | None = None) -> list[int]:
        wanted = None if partitions is None else list(partitions)
        rows = await (await self.ledger.pool()).fetch(_RELEASE, owner, wanted)
        return sorted(row[0] for row in rows)

    @_reaching
    async def leave(self, instance: str) -> list[int]:
        async with (await self.ledger.pool()).acquire() as conn, conn.transaction():
            rows = await conn.fetch(_RELEASE, instance, None)
            await conn.execute("DELETE FROM instances WHERE id = $1", instance)
        return sorted(row[0] for row in rows)

    @_reaching
    async def leases(self) -> list[Lease]:
        rows = await (await self.ledger.pool()).fetch(
            "SELECT partition, owner, epoch, "
            "extract(epoch FROM expires_at - clock_timestamp())::float8 "
            "FROM partition_leases ORDER BY partition"
        )
        return [Lease(row[0], row[1], int(row[2]), row[3]) for row in rows]

    @_reaching
    async def instances(self) -> list[Instance]:
        rows = await (await self.ledger.pool()).fetch(
            "SELECT id, extract(epoch FROM clock_timestamp() - seen_at)::float8 "
            "FROM instances ORDER BY seen_at DESC, id"
        )
        return [Instance(row[0], row[1]) for row in rows]


# The lookups go through LATERAL (... LIMIT 1): a subquery with LIMIT cannot be flattened
# into a join, so each key is one index probe. A plain `= ANY($1)` or join lets a planner
# without fresh statistics (a new or fast-growing ledger) choose a full scan per batch.
#: What an append reads once it holds the lock, in one round trip (each costs the append a
#: turn of the event loop, which a settler deciding the next batch gives once a
#: millisecond): the chain's head, the rows already recorded under the batch's keys, the
#: streams' versions and the outbox rows already recorded under its first ids.
_BEFORE_APPEND = f"""
    SELECT
        (SELECT ROW(position, hash) FROM events ORDER BY position DESC LIMIT 1),
        ARRAY(
            SELECT ROW(e.*) FROM unnest($1::text[]) AS k(key)
            CROSS JOIN LATERAL ({_SELECT} WHERE events.key = k.key LIMIT 1) AS e
        ),
        ARRAY(
            SELECT ROW(s.stream, (SELECT max(version) FROM events e WHERE e.stream = s.stream))
            FROM unnest($2::text[]) AS s(stream)
        ),
        ARRAY(
            SELECT ROW(o.*) FROM unnest($3::text[]) AS k(id)
            CROSS JOIN LATERAL (
                SELECT message_id, exchange, routing_key, body FROM outbox
                WHERE outbox.message_id = k.id LIMIT 1
            ) AS o
        )
"""
_FIRST_RECORDED = """
    SELECT s.stream, e.recorded_at FROM unnest($1::text[]) AS s(stream)
    CROSS JOIN LATERAL (
        SELECT recorded_at FROM events WHERE events.stream = s.stream AND version = 1 LIMIT 1
    ) AS e
"""
_OUTBOX_BY_ID = """
    SELECT o.* FROM unnest($1::text[]) AS k(id)
    CROSS JOIN LATERAL (
        SELECT message_id, exchange, routing_key, body FROM outbox
        WHERE outbox.message_id = k.id LIMIT 1
    ) AS o
"""


def _outbox_row(row: asyncpg.Record | Sequence[Any]) -> OutboxRow:
    seq, message_id, exchange, routing_key, body, position, event_hash = row[:7]
    return OutboxRow(
        seq, message_id, exchange, routing_key, body, position, event_hash, tuple(row[7]), row[8]
    )


def _mark_row(row: asyncpg.Record) -> MarkRow:
    return MarkRow(row[0], tuple(json.loads(row[1])), row[2], row[3])


def _recorded(row: asyncpg.Record | Sequence[Any]) -> RecordedEvent:
    """A stored row as the ledger hands it out: ``data`` decoded with msgspec (a third of
    the json module's cost; the json module takes what msgspec refuses, such as NaN, so the
    values are the same), ``recorded_at`` as asyncpg read it (UTC, as the chain's text of it
    would parse back to)."""
    position, stream, version, type_, data, key, recorded_at, prev_hash, hash_ = row
    try:
        decoded = _decode_json(data)
    except msgspec.DecodeError:
        decoded = json.loads(data)
    return RecordedEvent(
        position,
        stream,
        version,
        type_,
        decoded,
        key,
        recorded_at.astimezone(UTC),
        prev_hash,
        hash_,
    )


def _chain_row(row: asyncpg.Record | Sequence[Any]) -> ChainRow:
    position, stream, version, type_, data, key, recorded_at, prev_hash, hash_ = row
    return ChainRow(
        position, stream, version, type_, data, key, format_timestamp(recorded_at), prev_hash, hash_
    )


def _plan(
    appends: Sequence[StreamAppend],
    outbox: Sequence[OutboxMessage],
    read: _Recorded,
    recorded_at: datetime,
) -> Plan:
    head, existing, versions, existing_outbox = read
    return plan_append(
        appends,
        outbox,
        existing=existing,
        versions=versions,
        head=head,
        existing_outbox=existing_outbox,
        recorded_at=recorded_at,
    )


#: What an append reads first: the head, the recorded rows by key, the streams' versions and
#: the recorded outbox messages by id.
_Recorded: TypeAlias = tuple[
    tuple[int, str], dict[str, ChainRow], dict[str, int], dict[str, tuple[str, str, str]]
]


async def _before_append(
    conn: Conn, keys: list[str], streams: list[str], ids: list[str]
) -> _Recorded:
    """What ``plan_append`` needs from the database (``_BEFORE_APPEND``): the head, the
    recorded rows by key, the streams' versions and the recorded outbox rows by id (past
    the first ``OUTBOX_CHUNK`` ids, a statement per chunk: no statement of the append grows
    with the round, for ``statement_timeout``)."""
    read = await conn.fetchrow(_BEFORE_APPEND, keys, streams, ids[:OUTBOX_CHUNK])
    assert read is not None, "a SELECT without FROM returns one row"
    head, recorded, versions, outbox = read
    existing = {row.key: row for row in map(_chain_row, recorded)}
    found = {message_id: (exchange, key, body) for message_id, exchange, key, body in outbox}
    for start in range(OUTBOX_CHUNK, len(ids), OUTBOX_CHUNK):
        more = await conn.fetch(_OUTBOX_BY_ID, ids[start : start + OUTBOX_CHUNK])
        found.update((row[0], (row[1], row[2], row[3])) for row in more)
    return (
        (0, GENESIS_HASH) if head is None else (head[0], head[1]),
        existing,
        {stream: version for stream, version in versions if version is not None},
        found,
    )


async def _known(conn: Conn, ids: list[str]) -> list[str]:
    """The ``ids`` the outbox holds, in order."""
    rows = await conn.fetch(
        "SELECT message_id FROM outbox WHERE message_id = ANY($1::text[]) ORDER BY message_id",
        ids,
    )
    return [row[0] for row in rows]


async def create_database_if_missing(url: str) -> bool:
    """Create the database ``url`` names if it does not exist; True when it was created.

    Connects to the server's ``postgres`` database with the same credentials, so the role
    needs CREATEDB (as a local superuser has).
    """
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"cannot create database {name!r} from {url!r}")
    admin = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        if await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return False
        await admin.execute(f'CREATE DATABASE "{name}"')
        return True
    finally:
        await admin.close()


SERVICE_GROUP = "croupier_app"
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


async def ensure_service_role(url: str, role: str, password: str | None = None) -> bool:
    """Make ``role`` a login role with only ``croupier_app``'s rights; True when created.

    Run as the ledger's owner after ``migrate`` (which creates ``croupier_app``). The role
    gets LOGIN and membership of ``croupier_app`` and nothing else: no superuser, no
    CREATEDB or CREATEROLE, no replication, owner of nothing. An existing role is granted
    the membership (and the password, if given); an existing superuser is refused.
    """
    if not _ROLE_NAME.match(role):
        raise ValueError(f"role name {role!r}: use lowercase letters, digits and _")
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            found = await conn.fetchrow(
                "SELECT rolsuper OR rolcreaterole OR rolbypassrls FROM pg_roles WHERE rolname = $1",
                role,
            )
            if found is not None and found[0]:
                raise ValueError(f"role {role!r} is privileged; the service role must not be")
            if found is None:
                statement = await conn.fetchval(
                    "SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                    "INHERIT NOREPLICATION NOBYPASSRLS IN ROLE croupier_app', $1::text)",
                    role,
                )
                await conn.execute(statement)
            else:
                await conn.execute(
                    await conn.fetchval("SELECT format('GRANT croupier_app TO %I', $1::text)", role)
                )
            if password is not None:
                await conn.execute(
                    await conn.fetchval(
                        "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)",
                        role,
                        password,
                    )
                )
        return found is None
    finally:
        await conn.close()


def _columns(events: Sequence[ChainRow], outbox: Sequence[OutboxInsert]) -> tuple[Any, ...]:
    """The arrays ``_INSERT_BATCH`` takes for events and outbox rows ($1-$15)."""
    rows: Sequence[Sequence[Any]] = list(zip(*events, strict=True)) or [()] * 9
    _, streams, versions, types, data, keys, stamps, prev_hashes, hashes = rows
    first = events[0].position if events else None
    stamp = datetime.fromisoformat(stamps[0]) if stamps else None  # one timestamp per batch
    columns = (first, streams, versions, types, data, keys, stamp, prev_hashes, hashes)
    return (*columns, *_outbox_columns(outbox))


def _outbox_columns(outbox: Sequence[OutboxInsert]) -> tuple[Sequence[Any], ...]:
    """The six arrays of outbox rows: message ids, positions, exchanges, routing keys,
    bodies (JSON text) and event hashes."""
    return tuple(zip(*outbox, strict=True)) or ((),) * 6


def _packed(
    columns: Sequence[Any], parameters: Sequence[tuple[int, str]]
) -> tuple[Any, ...] | None:
    """``columns`` with each column of values (``parameters``: number and type) one text
    joined by ``_SEPARATOR``, which the server splits back into exactly those values. None
    when a column cannot be: a text holding the separator, or an empty text (the server
    reads an empty text as no values at all); or when it should not be: a value longer
    than ``PACK_LIMIT``."""
    packed = list(columns)
    for number, kind in parameters:
        values = columns[number - 1]
        if kind in ("int", "bigint"):
            packed[number - 1] = _SEPARATOR.join(map(str, values))
            continue
        joined = _SEPARATOR.join(values)
        if values and (joined.count(_SEPARATOR) != len(values) - 1 or not all(values)):
            return None
        if len(joined) > PACK_LIMIT and max(map(len, values)) > PACK_LIMIT:
            return None
        packed[number - 1] = joined
    return tuple(packed)
