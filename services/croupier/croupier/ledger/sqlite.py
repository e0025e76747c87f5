"""The embedded ledger adapter: stdlib ``sqlite3`` in WAL mode, driven from asyncio.

Each call (a whole append batch included) runs in one worker thread via
``asyncio.to_thread``. aiosqlite is not used: it ships every statement through its
connection thread's queue, while an append is a dozen statements that must run back to
back inside one transaction; one hop per batch is both simpler and faster.

Concurrency: one write connection and one read connection, each guarded by an asyncio
lock (a sqlite3 connection must not be used by two threads at once). Appends take
``BEGIN IMMEDIATE``, SQLite's single writer lock, before reading the chain head, so
positions are assigned and committed strictly in order, also across processes sharing the
file. WAL readers see only committed snapshots and never block the writer. ``:memory:``
uses one connection for both.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from contract.canonical import canonical_json
from croupier.ledger import (
    Fence,
    Fenced,
    HeadNotSigned,
    Ledger,
    OutboxMessage,
    PartitionsFixed,
    RecordedEvent,
    StreamAppend,
    unavailable_on,
)
from croupier.ledger.batch import (
    Plan,
    batch_keys,
    batch_streams,
    outbox_ids,
    plan_append,
    recorded,
)
from croupier.ledger.chain import GENESIS_HASH, ChainRow
from croupier.ledger.keyring import KEYS_STREAM, Keyring
from croupier.ledger.migrate import migrations, split_sqlite_script
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

T = TypeVar("T")

#: What sqlite3 raises for a fault that passes (the file locked or busy past busy_timeout,
#: a disk I/O error); callers see :class:`LedgerUnavailable`.
TRANSIENT: Final = (sqlite3.OperationalError,)

_COLUMNS = "position, stream, version, type, data, key, recorded_at, prev_hash, hash"
_INSERT_EVENT = f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_OUTBOX = (
    "INSERT INTO outbox (message_id, position, exchange, routing_key, body, event_hash) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_HEAD = (
    "INSERT INTO ledger_heads (position, hash, key_id, signature, published) VALUES (?, ?, ?, ?, ?)"
)
_HEAD_COLUMNS = "id, position, hash, key_id, signature, published"
_OUTBOX_COLUMNS = (
    "o.seq, o.message_id, o.exchange, o.routing_key, o.body, o.position, o.event_hash, "
    "(SELECT json_group_array(p.mark) FROM outbox_published p WHERE p.message_id = o.message_id), "
    "EXISTS (SELECT 1 FROM outbox_set_aside s WHERE s.message_id = o.message_id)"
)
_CHUNK = 500  # host parameters per IN (...) list


class _Connection:
    """A sqlite3 connection used by one thread at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = asyncio.Lock()
        # Also held by the worker thread: a cancelled caller releases ``lock`` while its
        # thread may still be running.
        self._thread_lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def get(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL: a committed batch survives power loss before the broker ack goes out;
            # batching amortises the one fsync per commit.
            conn.execute("PRAGMA synchronous = FULL")
            # Idempotency keys are random (event ids), so every batch dirties pages all over
            # the key index: keep the index in memory, and checkpoint the WAL into the main
            # file every ~40 MB rather than every 4 MB so a page rewritten by many batches
            # is copied back once. Neither changes what a commit guarantees.
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("PRAGMA wal_autocheckpoint = 10000")
            conn.execute("PRAGMA foreign_keys = ON")
            self._conn = conn
        return self._conn

    @unavailable_on(*TRANSIENT)
    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        async with self.lock:
            return await asyncio.to_thread(self._work, work)

    def _work(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._thread_lock:
            return work(self.get())

    def close(self) -> None:
        with self._thread_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class SqliteLedger(Ledger):
    """The ledger in one SQLite file (or ``:memory:``)."""

    dialect = "sqlite"

    def __init__(
        self, path: str, *, key: LedgerKey | None = None, keyring: Keyring | None = None
    ) -> None:
        self.path = path
        self.trust = Trust(key, keyring)
        self._writer = _Connection(path)
        self._reader = self._writer if path == ":memory:" else _Connection(path)
        self._floor = PublishedFloor()
        self._open_known = {}

    async def migrate(self, partitions: int | None = None) -> list[str]:
        if partitions is not None:
            check_count(partitions)
        return await self._writer.run(lambda conn: _migrate(conn, partitions))

    async def schema_version(self) -> int:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        if not await self._read(sql, ()):
            return 0
        rows = await self._read("SELECT coalesce(max(version), 0) FROM schema_migrations", ())
        return int(rows[0][0])

    async def _append(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage],
        fence: Fence | None = None,
    ) -> Plan:
        published = self._floor.seq  # what this process has seen published, for the head

        def append(conn: sqlite3.Connection) -> Plan:
            taken = time.monotonic()  # the one writer is the lock: a transaction at a time
            try:
                return _append(conn, appends, outbox, self.trust, published, fence)
            finally:  # only the writer's thread adds to it
                self.append_lock_held += time.monotonic() - taken

        return await self._writer.run(append)

    async def read_streams(self, streams: Sequence[str]) -> dict[str, list[RecordedEvent]]:
        sql = f"SELECT {_COLUMNS} FROM events WHERE stream IN ({{marks}})"
        wanted = list(dict.fromkeys(streams))
        rows = await self._reader.run(lambda conn: list(_in_chunks(conn, sql, wanted)))
        found: dict[str, list[RecordedEvent]] = {stream: [] for stream in wanted}
        for row in sorted(rows, key=lambda r: r[0]):
            found[row[1]].append(recorded(ChainRow(*row)))
        return found

    async def read_last(self, stream: str) -> RecordedEvent | None:
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1",
            (stream,),
        )
        return recorded(ChainRow(*rows[0])) if rows else None

    async def read_all(self, after_position: int = 0, limit: int = 1000) -> list[RecordedEvent]:
        return [recorded(row) for row in await self._chain_page(after_position, limit)]

    async def stream_version(self, stream: str) -> int:
        rows = await self._read("SELECT MAX(version) FROM events WHERE stream = ?", (stream,))
        return int(rows[0][0] or 0)

    async def writable(self) -> None:
        await self._writer.run(_take_write_lock)

    async def last_position(self) -> int:
        rows = await self._read("SELECT MAX(position) FROM events", ())
        return int(rows[0][0] or 0)

    async def last_recorded(self, prefix: str) -> dict[str, datetime]:
        rows = await self._read(
            "SELECT CASE instr(rest, ':') WHEN 0 THEN rest "
            "ELSE substr(rest, 1, instr(rest, ':') - 1) END, max(recorded_at) "
            "FROM (SELECT substr(stream, ?) AS rest, recorded_at FROM events "
            "WHERE substr(stream, 1, ?) = ?) GROUP BY 1",
            (len(prefix) + 1, len(prefix), prefix),
        )
        return {name: datetime.fromisoformat(recorded) for name, recorded in rows}

    async def first_recorded(self, streams: Sequence[str]) -> dict[str, datetime]:
        sql = "SELECT stream, recorded_at FROM events WHERE version = 1 AND stream IN ({marks})"
        wanted = list(dict.fromkeys(streams))
        rows = await self._reader.run(lambda conn: list(_in_chunks(conn, sql, wanted)))
        return {stream: datetime.fromisoformat(recorded) for stream, recorded in rows}

    async def mark_published(self, message_ids: Iterable[str], *, written: bool = False) -> None:
        ids = list(dict.fromkeys(message_ids))
        if ids:
            await self._writer.run(lambda conn: _mark_published(conn, ids, self.trust))
            self._floor.marked(ids)

    async def run_writing(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the write connection in a worker thread, serialised with appends.

        Read models kept in the same file write through here, so their transactions take
        the same single writer lock as the ledger's.
        """
        return await self._writer.run(work)

    async def run_reading(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the read connection in a worker thread."""
        return await self._reader.run(work)

    async def _open_floor(self, scope: str) -> tuple[int, int]:
        sql = (
            "SELECT (SELECT coalesce(max(position), 1) FROM open_floor WHERE scope = ?), "
            "(SELECT coalesce(max(position), 0) FROM events)"
        )
        ((floor, head),) = await self._read(sql, (scope,))
        return int(floor), int(head)

    async def _open_above(
        self, prefix: str, closing: Sequence[str], floor: int, head: int, limit: int
    ) -> list[tuple[str, int]]:
        marks = ",".join("?" * len(closing)) or "NULL"
        sql = (  # one pass over the positions floor..head, as on PostgreSQL
            "SELECT stream, MIN(position) AS began FROM events "
            "WHERE position BETWEEN ? AND ? AND substr(stream, 1, ?) = ? GROUP BY stream "
            f"HAVING MIN(version) = 1 AND SUM(type IN ({marks})) = 0 ORDER BY began LIMIT ?"
        )
        rows = await self._read(sql, (floor, head, len(prefix), prefix, *closing, limit))
        return [(r[0], int(r[1])) for r in rows]

    async def _open_changes(
        self, prefix: str, closing: Sequence[str], after: int, head: int
    ) -> list[tuple[str, int, int, str]]:
        marks = ",".join("?" * len(closing)) or "NULL"
        sql = (
            "SELECT stream, position, version, type FROM events "
            "WHERE position > ? AND position <= ? AND substr(stream, 1, ?) = ? "
            f"AND (version = 1 OR type IN ({marks})) ORDER BY position"
        )
        rows = await self._read(sql, (after, head, len(prefix), prefix, *closing))
        return [(r[0], int(r[1]), int(r[2]), r[3]) for r in rows]

    async def _raise_open_floor(self, scope: str, position: int) -> None:
        sql = "INSERT INTO open_floor (scope, position) VALUES (?, ?)"
        await self._writer.run(lambda conn: _write(conn, sql, [(scope, position)]))

    async def _record_set_aside(
        self, rows: Sequence[tuple[str, str, str | None, str | None]]
    ) -> None:
        await self._writer.run(lambda conn: _write(conn, _SET_ASIDE, list(rows)))

    async def _set_aside_page(
        self, after_id: int, limit: int
    ) -> list[tuple[SetAsideRow, OutboxRow]]:
        sql = (
            f"SELECT s.id, s.message_id, s.reason, s.key_id, s.signature, {_OUTBOX_COLUMNS} "
            "FROM outbox_set_aside s JOIN outbox o ON o.message_id = s.message_id "
            "WHERE s.id > ? ORDER BY s.id LIMIT ?"
        )
        rows = await self._read(sql, (after_id, limit))
        return [(SetAsideRow(*row[:5]), _outbox_row(row[5:])) for row in rows]

    async def leases(self) -> list[tuple[str, str, float]]:
        sql = "SELECT name, holder, expires_at - ? FROM relay_lease ORDER BY name"
        return [(r[0], r[1], r[2]) for r in await self._read(sql, (time.time(),))]

    async def hold_lease(self, name: str, holder: str, seconds: float) -> bool:
        now = time.time()
        row = (name, holder, now + seconds, now)
        held = await self._writer.run(lambda conn: _write(conn, _HOLD_LEASE, [row]))
        return held == [(holder,)]

    def partition_leases(self) -> SqlitePartitions:
        return SqlitePartitions(self)

    async def close(self) -> None:
        async with self._writer.lock:
            self._writer.close()
        if self._reader is not self._writer:
            async with self._reader.lock:
                self._reader.close()

    async def _chain_page(self, after_position: int, limit: int) -> list[ChainRow]:
        sql = f"SELECT {_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?"
        return [ChainRow(*row) for row in await self._read(sql, (after_position, limit))]

    async def _outbox_after(self, after_seq: int, limit: int, through_seq: int) -> list[OutboxRow]:
        sql = (
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.seq > ? AND o.seq <= ? "
            "ORDER BY o.seq LIMIT ?"
        )
        return [_outbox_row(row) for row in await self._read(sql, (after_seq, through_seq, limit))]

    async def _outbox_seq_through(self, position: int) -> int:
        sql = (
            "SELECT max(seq) FROM outbox WHERE position = "
            "(SELECT max(position) FROM outbox WHERE position <= ?)"
        )
        ((seq,),) = await self._read(sql, (position,))
        return int(seq or 0)

    async def _outbox_past(self, position: int, limit: int, through: int) -> list[OutboxRow]:
        sql = (
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.position > ? AND o.position <= ? "
            "ORDER BY o.position, o.seq LIMIT ?"
        )
        return [_outbox_row(row) for row in await self._read(sql, (position, through, limit))]

    async def _outbox_between(self, low: int, high: int) -> list[OutboxRow]:
        sql = (
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox o WHERE o.position > ? AND o.position <= ? "
            "ORDER BY o.position, o.seq"
        )
        return [_outbox_row(row) for row in await self._read(sql, (low, high))]

    async def _message_positions(self, message_ids: Sequence[str]) -> dict[str, int]:
        sql = "SELECT message_id, position FROM outbox WHERE message_id IN ({marks})"
        rows = await self._reader.run(lambda conn: list(_in_chunks(conn, sql, message_ids)))
        return {row[0]: int(row[1]) for row in rows}

    async def _marks(self, marks: Sequence[int]) -> list[MarkRow]:
        sql = (
            "SELECT mark, message_ids, key_id, signature FROM outbox_marks WHERE mark IN ({marks})"
        )
        found = await self._reader.run(
            lambda conn: list(_in_chunks(conn, sql, [str(m) for m in marks]))
        )
        return [_mark_row(row) for row in found]

    async def _mark_page(self, after_mark: int, limit: int) -> list[MarkRow]:
        sql = (
            "SELECT mark, message_ids, key_id, signature FROM outbox_marks WHERE mark > ? "
            "ORDER BY mark LIMIT ?"
        )
        return [_mark_row(row) for row in await self._read(sql, (after_mark, limit))]

    async def _marker_page(self, after: tuple[int, str], limit: int) -> list[tuple[int, str]]:
        sql = (
            "SELECT coalesce(mark, -1) AS m, message_id FROM outbox_published "
            "WHERE (coalesce(mark, -1), message_id) > (?, ?) ORDER BY m, message_id LIMIT ?"
        )
        return [(r[0], r[1]) for r in await self._read(sql, (after[0], after[1], limit))]

    async def _heads_from(self, position: int, limit: int = HEADS_SCANNED) -> list[HeadRow]:
        sql = (
            f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE position >= ? "
            "ORDER BY position, id LIMIT ?"
        )
        return [HeadRow(*row) for row in await self._read(sql, (position, limit))]

    async def _head_page(self, after_id: int, limit: int) -> list[HeadRow]:
        sql = f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE id > ? ORDER BY id LIMIT ?"
        return [HeadRow(*row) for row in await self._read(sql, (after_id, limit))]

    async def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return await self._reader.run(lambda conn: conn.execute(sql, params).fetchall())


def _migrate(conn: sqlite3.Connection, partitions: int | None) -> list[str]:
    applied: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT (datetime('now')))"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for migration in migrations("sqlite"):
            if migration.version in done:
                continue
            for statement in split_sqlite_script(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                (migration.version, migration.name),
            )
            applied.append(migration.name)
        _fix_partitions(conn, partitions)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied


def _append(
    conn: sqlite3.Connection,
    appends: Sequence[StreamAppend],
    outbox: Sequence[OutboxMessage],
    trust: Trust,
    published: int,
    fence: Fence | None = None,
) -> Plan:
    keys = batch_keys(appends)
    ids = outbox_ids(outbox)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if fence is not None:
            _check_fence(conn, fence)
        head = _head(conn)
        plan = plan_append(
            appends,
            outbox,
            existing={row.key: row for row in _rows_by_key(conn, keys)},
            versions=_versions(conn, batch_streams(appends)),
            head=head,
            existing_outbox=_outbox_by_id(conn, ids),
            recorded_at=datetime.now(UTC),
        )
        if plan.rows and trust.signing:
            _check_head(conn, head, trust, plan.rows[0].position, plan.rows[-1].position)
            last = plan.rows[-1]
            conn.execute(_INSERT_HEAD, trust.sign_head(last.position, last.hash, published))
        conn.executemany(_INSERT_EVENT, plan.rows)
        conn.executemany(_INSERT_OUTBOX, plan.outbox)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return plan


def _check_head(
    conn: sqlite3.Connection, head: tuple[int, str], trust: Trust, first: int, last: int
) -> None:
    """Refuse to append after rows no key of the keyring signed, after a handover to another
    key, or at positions this key may not sign (inside the write transaction)."""
    why = None
    if head != trust.head and head[0] != 0:
        rows = conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE position = ? ORDER BY id DESC "
            f"LIMIT {HEADS_SCANNED}",
            (head[0],),
        ).fetchall()
        any_heads = (
            bool(rows) or conn.execute("SELECT EXISTS (SELECT 1 FROM ledger_heads)").fetchone()[0]
        )
        event = conn.execute("SELECT type, data FROM events WHERE position = ?", (head[0],))
        type_, data = event.fetchone()
        handed_over = not any_heads and bool(
            conn.execute(_HANDED_OVER, (KEYS_STREAM,)).fetchone()[0]
        )
        why = trust.accept_head(
            head, [HeadRow(*r) for r in rows], bool(any_heads), (type_, data), handed_over
        )
    why = why or trust.may_sign(first) or trust.may_sign(last)
    if why:
        signed = conn.execute("SELECT coalesce(max(position), 0) FROM ledger_heads").fetchone()[0]
        raise HeadNotSigned(head[0], int(signed), why)


_HANDED_OVER = "SELECT EXISTS (SELECT 1 FROM events WHERE stream = ?)"


def _outbox_row(row: Sequence[Any]) -> OutboxRow:
    marks = tuple(json.loads(row[7])) if row[7] else ()
    seq, message_id, exchange, routing_key, body, position, event_hash = row[:7]
    aside = bool(row[8])
    return OutboxRow(
        seq, message_id, exchange, routing_key, body, position, event_hash, marks, aside
    )


def _mark_row(row: Sequence[Any]) -> MarkRow:
    return MarkRow(row[0], tuple(json.loads(row[1])), row[2], row[3])


def _in_chunks(
    conn: sqlite3.Connection, sql: str, values: Sequence[str | int]
) -> Iterable[tuple[Any, ...]]:
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        yield from conn.execute(sql.format(marks=marks), chunk)


def _rows_by_key(conn: sqlite3.Connection, keys: Sequence[str]) -> list[ChainRow]:
    sql = f"SELECT {_COLUMNS} FROM events WHERE key IN ({{marks}})"
    return [ChainRow(*row) for row in _in_chunks(conn, sql, keys)]


def _versions(conn: sqlite3.Connection, streams: Sequence[str]) -> dict[str, int]:
    sql = "SELECT stream, MAX(version) FROM events WHERE stream IN ({marks}) GROUP BY stream"
    return {stream: version for stream, version in _in_chunks(conn, sql, streams)}


def _head(conn: sqlite3.Connection) -> tuple[int, str]:
    row = conn.execute(
        "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
    ).fetchone()
    return (0, GENESIS_HASH) if row is None else (row[0], row[1])


def _outbox_by_id(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
    sql = "SELECT message_id, exchange, routing_key, body FROM outbox WHERE message_id IN ({marks})"
    return {row[0]: (row[1], row[2], row[3]) for row in _in_chunks(conn, sql, ids)}


_SET_ASIDE = (
    "INSERT INTO outbox_set_aside (message_id, reason, key_id, signature) "
    "SELECT message_id, ?2, ?3, ?4 FROM outbox WHERE message_id = ?1 AND NOT EXISTS "
    "(SELECT 1 FROM outbox_set_aside s WHERE s.message_id = ?1 AND s.signature IS ?4)"
)
_HOLD_LEASE = (
    "INSERT INTO relay_lease (name, holder, expires_at) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
    "expires_at = excluded.expires_at "
    "WHERE relay_lease.holder = excluded.holder OR relay_lease.expires_at < ?4 "
    "RETURNING holder"
)


def _write(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> list[Any]:
    """Run ``sql`` once per row in one write transaction; the rows it returned."""
    returned: list[Any] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for row in rows:
            returned += conn.execute(sql, row).fetchall()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return returned


def _mark_published(conn: sqlite3.Connection, ids: list[str], trust: Trust) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        sql = "SELECT message_id FROM outbox WHERE message_id IN ({marks})"
        known = sorted(row[0] for row in _in_chunks(conn, sql, ids))
        mark = None
        if known and trust.signing:
            key_id, signature = trust.sign_mark(known)
            mark = conn.execute(
                "INSERT INTO outbox_marks (message_ids, key_id, signature) VALUES (?, ?, ?) "
                "RETURNING mark",
                (canonical_json(known), key_id, signature),
            ).fetchone()[0]
        conn.executemany(
            "INSERT OR IGNORE INTO outbox_published (message_id, mark) VALUES (?, ?)",
            [(message_id, mark) for message_id in known],
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if mark is not None:
        trust.remember_mark(mark, known)


def _take_write_lock(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("ROLLBACK")


def _fix_partitions(conn: sqlite3.Connection, partitions: int | None) -> None:
    """Store the partition count and a free lease per partition unless stored already
    (inside the migration's transaction); ``PartitionsFixed`` when another count is."""
    row = conn.execute("SELECT count FROM ledger_partitions").fetchone()
    if row is None:
        count = DEFAULT_PARTITIONS if partitions is None else partitions
        conn.execute("INSERT INTO ledger_partitions (count) VALUES (?)", (count,))
        conn.executemany(
            "INSERT INTO partition_leases (partition) VALUES (?)", [(p,) for p in range(count)]
        )
    elif partitions is not None and partitions != row[0]:
        raise PartitionsFixed(int(row[0]), partitions)


def _check_fence(conn: sqlite3.Connection, fence: Fence) -> None:
    """Raise ``Fenced`` unless ``fence.owner`` holds each of its partitions at its epoch,
    unexpired now (inside the write transaction: no lease changes until it ends)."""
    if not fence.epochs:
        return
    now = time.time()
    held = {
        partition
        for partition, owner, epoch, expires_at in _in_chunks(
            conn,
            "SELECT partition, owner, epoch, expires_at FROM partition_leases "
            "WHERE partition IN ({marks})",
            list(fence.epochs),
        )
        if owner == fence.owner and epoch == fence.epochs[partition] and expires_at > now
    }
    if missing := set(fence.epochs) - held:
        raise Fenced(fence.owner, missing)


def _in_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in one write transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return result


def _register(conn: sqlite3.Connection, instance: str, seconds: float) -> int:
    now = time.time()
    conn.execute(
        "INSERT INTO instances (id, seen_at, live_until) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, "
        "live_until = excluded.live_until",
        (instance, now, now + seconds),
    )
    conn.execute("DELETE FROM instances WHERE seen_at < ?", (now - FORGET_SECONDS,))
    sql = "SELECT count(*) FROM instances WHERE live_until > ?"
    return int(conn.execute(sql, (now,)).fetchone()[0])


def _take(conn: sqlite3.Connection, owner: str, seconds: float, limit: int) -> list[Taken]:
    now = time.time()
    free = conn.execute(
        "SELECT partition, epoch, expires_at, owner FROM partition_leases "
        "WHERE owner IS NULL OR expires_at <= ? ORDER BY partition LIMIT ?",
        (now, limit),
    ).fetchall()
    conn.executemany(
        "UPDATE partition_leases SET owner = ?, epoch = epoch + 1, expires_at = ? "
        "WHERE partition = ?",
        [(owner, now + seconds, partition) for partition, *_ in free],
    )
    return [
        Taken(partition, epoch + 1, now - ended if epoch > 0 else None, lapsed)
        for partition, epoch, ended, lapsed in free
    ]


def _renew(conn: sqlite3.Connection, owner: str, seconds: float) -> dict[int, int]:
    now = time.time()
    rows = conn.execute(
        "UPDATE partition_leases SET expires_at = ? WHERE owner = ? AND expires_at > ? "
        "RETURNING partition, epoch",
        (now + seconds, owner, now),
    ).fetchall()
    return {partition: epoch for partition, epoch in sorted(rows)}


def _release(conn: sqlite3.Connection, owner: str, partitions: Collection[int] | None) -> list[int]:
    now = time.time()
    sql = (
        "UPDATE partition_leases SET owner = NULL, expires_at = min(expires_at, ?) "
        "WHERE owner = ? AND partition IN ({marks}) RETURNING partition"
    )
    if partitions is None:
        sql = sql.replace(" AND partition IN ({marks})", "")
        rows = conn.execute(sql, (now, owner)).fetchall()
    else:
        rows = []
        for start in range(0, len(wanted := sorted(set(partitions))), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows += conn.execute(sql.format(marks=marks), (now, owner, *chunk)).fetchall()
    return sorted(row[0] for row in rows)


def _leave(conn: sqlite3.Connection, instance: str) -> list[int]:
    freed = _release(conn, instance, None)
    conn.execute("DELETE FROM instances WHERE id = ?", (instance,))
    return freed


class SqlitePartitions(PartitionLeases):
    """Partition leases in the ledger's SQLite file, through its write connection (so every
    change is serialised with the appends that check them)."""

    def __init__(self, ledger: SqliteLedger) -> None:
        self.ledger = ledger

    async def count(self) -> int:
        return int((await self.ledger._read("SELECT count FROM ledger_partitions", ()))[0][0])

    async def register(self, instance: str, seconds: float) -> int:
        return await self._write(lambda conn: _register(conn, instance, seconds))

    async def take(self, owner: str, seconds: float, limit: int) -> list[Taken]:
        if limit <= 0:
            return []
        return await self._write(lambda conn: _take(conn, owner, seconds, limit))

    async def renew(self, owner: str, seconds: float) -> dict[int, int]:
        return await self._write(lambda conn: _renew(conn, owner, seconds))

    async def release(self, owner: str, partitions: Collection[int] | None = None) -> list[int]:
        return await self._write(lambda conn: _release(conn, owner, partitions))

    async def leave(self, instance: str) -> list[int]:
        return await self._write(lambda conn: _leave(conn, instance))

    async def leases(self) -> list[Lease]:
        sql = (
            "SELECT partition, owner, epoch, expires_at - ? FROM partition_leases "
            "ORDER BY partition"
        )
        rows = await self.ledger._read(sql, (time.time(),))
        return [Lease(*row) for row in rows]

    async def instances(self) -> list[Instance]:
        sql = "SELECT id, ? - seen_at FROM instances ORDER BY seen_at DESC, id"
        return [Instance(*row) for row in await self.ledger._read(sql, (time.time(),))]

    async def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self.ledger._writer.run(lambda conn: _in_transaction(conn, work))
