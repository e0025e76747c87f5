"""Read models in the PostgreSQL ledger's database, through the ledger's connection pool.

A commit locks the checkpoint rows it moves (``SELECT ... FOR UPDATE``) and checks they
are where the batch started, so two projectors never both apply a batch; inserted rows go
in with COPY (a few with one ``unnest`` statement) and upserts with one ``unnest`` statement
per table and shape. ``setup`` makes the roles
``croupier_projector`` (reads the ledger, writes read models, cannot write the ledger) and
``croupier_reader`` (reads both); it needs DDL rights only when a table must be created,
so a projector running as ``croupier_projector`` follows read models an owner set up.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg

from croupier.ledger.postgres import PostgresLedger
from croupier.projection import (
    CheckpointMoved,
    Dialect,
    Mark,
    Projection,
    ProjectionError,
    ReadModelStore,
    Session,
    Step,
)
from croupier.projection.sql import (
    CHECKPOINTS,
    PART_COLUMN,
    checkpoint_ddl,
    create_table,
    groups,
    insert_sql,
    numbered,
    toast_option,
    upsert_sql,
)

if TYPE_CHECKING:
    from croupier.ledger.postgres import Conn

PROJECTOR_ROLE = "croupier_projector"
READER_ROLE = "croupier_reader"
SESSION_MEMORY = "128MB"
#: Seconds one read-model query may run (server and client side).
SESSION_TIMEOUT = 900.0
_SETUP_LOCK = 0x63726F7570696572 >> 2  # beside the ledger's advisory locks
#: Inserts of at least this many rows go in with COPY (fewer: one ``unnest`` statement, which
#: saves COPY's round trip for the table's column types).
_COPY_FROM = 50
#: Whether the server compresses with lz4 (PostgreSQL 14 and later, built with it, as packaged).
_HAS_LZ4 = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
#: A commit's transaction opens in one round trip with its settings: no wait for the WAL
#: flush (read models are derived: a database crash loses the last commits whole, rows and
#: checkpoint together, and they are projected again), and documents compressed with lz4,
#: several times faster than the default pglz, where the server has it.
_BEGIN = "BEGIN; SET LOCAL synchronous_commit = off"
_LZ4 = "; SET LOCAL default_toast_compression = 'lz4'"
_LOCK_CHECKPOINTS = (
    f"SELECT name, position, part FROM {CHECKPOINTS} WHERE name = ANY($1::text[]) "
    "ORDER BY name FOR UPDATE"
)
_MOVE_CHECKPOINTS = (
    f"UPDATE {CHECKPOINTS} c SET position = m.position, part = m.part "
    "FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS m(name, position, part) "
    "WHERE c.name = m.name"
)

_ROLES = f"""
DO $$
BEGIN
    CREATE ROLE {PROJECTOR_ROLE} NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
DO $$
BEGIN
    CREATE ROLE {READER_ROLE} NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
GRANT SELECT ON events TO {PROJECTOR_ROLE}, {READER_ROLE};
"""


class PostgresStore(ReadModelStore):
    """Read models beside a :class:`PostgresLedger`."""

    dialect: Dialect = "postgres"

    def __init__(self, ledger: PostgresLedger) -> None:
        self.ledger = ledger
        self._begin: str | None = None

    async def setup(self, projections: Sequence[Projection]) -> list[str]:
        async with (await self.ledger.pool()).acquire() as conn:
            if await _current(conn, projections):
                return []
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _SETUP_LOCK)
                return await _setup(conn, projections)

    async def marks(self, projections: Sequence[Projection]) -> dict[str, Mark]:
        names = [p.name for p in projections]
        rows = await (await self.ledger.pool()).fetch(
            f"SELECT name, position, part FROM {CHECKPOINTS} WHERE name = ANY($1::text[])", names
        )
        found = {row[0]: Mark(row[1], row[2]) for row in rows}
        missing = set(names) - set(found)
        if missing:
            raise ProjectionError(f"projections {sorted(missing)} are not set up: run setup first")
        return found

    async def commit(self, steps: Sequence[Step]) -> None:
        if not steps:
            return
        try:
            await self._commit(steps)
        except asyncpg.InsufficientPrivilegeError as error:
            raise ProjectionError(
                f"the read models are behind the ledger and this role may not write them "
                f"({error}): run `croupier project` as {PROJECTOR_ROLE} or the owner"
            ) from error

    async def _commit(self, steps: Sequence[Step]) -> None:
        """One transaction in as few round trips as it takes: its round trips are what a
        commit waits on while the next page is folded beside it."""
        if self._begin is None:
            lz4 = await (await self.ledger.pool()).fetchval(_HAS_LZ4)
            self._begin = _BEGIN + (_LZ4 if lz4 else "")
        async with (await self.ledger.pool()).acquire() as conn:
            try:
                await conn.execute(self._begin)
                rows = await conn.fetch(_LOCK_CHECKPOINTS, [s.projection.name for s in steps])
                at = {row[0]: Mark(row[1], row[2]) for row in rows}
                for step in steps:
                    actual = at.get(step.projection.name, Mark(-1))
                    if actual != Mark(step.after, step.part_after):
                        raise CheckpointMoved(step.projection.name, step.after, actual.position)
                    await _write(conn, step)
                await conn.execute(
                    _MOVE_CHECKPOINTS,
                    [step.projection.name for step in steps],
                    [step.upto for step in steps],
                    [step.part_upto for step in steps],
                )
            except BaseException:
                # best effort: a connection lost meanwhile has no transaction left to end
                with contextlib.suppress(Exception):
                    if not conn.is_closed():
                        await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")

    async def reset(self, projections: Sequence[Projection]) -> None:
        async with (await self.ledger.pool()).acquire() as conn, conn.transaction():
            for projection in projections:
                names = ", ".join(t.name for t in projection.tables)
                await conn.execute(f"TRUNCATE {names}")
                await conn.execute(
                    f"UPDATE {CHECKPOINTS} SET position = 0, part = 0 WHERE name = $1",
                    projection.name,
                )

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        async with (await self.ledger.pool()).acquire() as conn:
            # Room for temporary tables and sorts before they spill to disk; reset below,
            # before the connection goes back to the pool (which does not reset it).
            await conn.execute(f"SET temp_buffers = '{SESSION_MEMORY}'")
            await conn.execute(f"SET work_mem = '{SESSION_MEMORY}'")
            # A reconciliation's joins outlast the ledger pool's per-statement limit; they
            # get a limit of their own.
            await conn.execute(f"SET statement_timeout = '{int(SESSION_TIMEOUT)}s'")
            # Compiling a large join costs seconds and saves less on set-based queries.
            await conn.execute("SET jit = off")
            try:
                yield PostgresSession(conn)
            finally:
                await conn.execute("DISCARD TEMP; RESET ALL")


class PostgresSession(Session):
    """Queries on one pooled connection."""

    dialect: Dialect = "postgres"

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        await self._conn.execute(numbered(sql), *params, timeout=SESSION_TIMEOUT)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(numbered(sql), rows, timeout=SESSION_TIMEOUT)

    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        await self._conn.copy_records_to_table(
            table, records=rows, columns=list(columns), timeout=SESSION_TIMEOUT
        )

    async def copy_csv(
        self, table: str, columns: Sequence[str], source: AsyncIterable[bytes]
    ) -> int | None:
        try:
            status = await self._conn.copy_to_table(
                table,
                source=source,
                columns=list(columns),
                format="csv",
                header=True,
                timeout=SESSION_TIMEOUT,
            )
        except asyncpg.DataError:  # a row the database cannot take as it stands
            return None
        return int(status.rpartition(" ")[2])

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows = await self._conn.fetch(numbered(sql), *params, timeout=SESSION_TIMEOUT)
        return [tuple(row) for row in rows]

    async def stream(
        self, sql: str, params: Sequence[Any] = (), page: int = 5000
    ) -> AsyncGenerator[list[tuple[Any, ...]], None]:
        async with self._conn.transaction():
            cursor = await self._conn.cursor(numbered(sql), *params, timeout=SESSION_TIMEOUT)
            while rows := await cursor.fetch(page, timeout=SESSION_TIMEOUT):
                yield [tuple(row) for row in rows]


async def _current(conn: Conn, projections: Sequence[Projection]) -> bool:
    """Whether every projection's tables exist at its version (then no DDL is needed)."""
    if await conn.fetchval("SELECT to_regclass($1)", CHECKPOINTS) is None:
        return False
    if not await conn.fetchval(_HAS_PART, CHECKPOINTS):
        return False
    rows = await conn.fetch(f"SELECT name, version FROM {CHECKPOINTS}")
    versions = {row[0]: row[1] for row in rows}
    for projection in projections:
        if versions.get(projection.name) != projection.version:
            return False
        for table in projection.tables:
            if await conn.fetchval("SELECT to_regclass($1)", table.name) is None:
                return False
    return True


_HAS_PART = (
    "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = "
    "current_schema() AND table_name = $1 AND column_name = 'part')"
)


async def _setup(conn: Conn, projections: Sequence[Projection]) -> list[str]:
    await conn.execute(_ROLES)
    await conn.execute(checkpoint_ddl("postgres"))
    await conn.execute(f"ALTER TABLE {CHECKPOINTS} ADD COLUMN IF NOT EXISTS {PART_COLUMN}")
    await _grant(conn, CHECKPOINTS)
    rows = await conn.fetch(f"SELECT name, version, tables FROM {CHECKPOINTS}")
    stored = {row[0]: (row[1], row[2]) for row in rows}
    created: list[str] = []
    for projection in projections:
        names = ",".join(t.name for t in projection.tables)
        version, tables = stored.get(projection.name, (None, ""))
        if version != projection.version:
            for old in filter(None, {*tables.split(","), *names.split(",")}):
                await conn.execute(f"DROP TABLE IF EXISTS {old}")
            await conn.execute(
                f"INSERT INTO {CHECKPOINTS} (name, version, position, tables) "
                "VALUES ($1, $2, 0, $3) ON CONFLICT (name) DO UPDATE SET "
                "version = excluded.version, position = 0, part = 0, tables = excluded.tables",
                projection.name,
                projection.version,
                names,
            )
            created.append(projection.name)
        for table in projection.tables:
            for statement in create_table(table, "postgres"):
                await conn.execute(statement)
            if table.inline_bytes:
                # A table made before it had the option takes it for the rows written from
                # now on. Only here, where setup writes DDL anyway: a projector that may not
                # alter its tables still runs on tables made without it.
                await conn.execute(f"ALTER TABLE {table.name} SET ({toast_option(table)})")
            await _grant(conn, table.name)
    return created


async def _grant(conn: Conn, table: str) -> None:
    await conn.execute(f"REVOKE ALL ON {table} FROM PUBLIC")
    await conn.execute(
        f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON {table} TO {PROJECTOR_ROLE}"
    )
    await conn.execute(f"GRANT SELECT ON {table} TO {READER_ROLE}")


async def _write(conn: Conn, step: Step) -> None:
    for table, columns, add, rows in groups(step.projection.tables, step.changes):
        if add is None and len(rows) >= _COPY_FROM:
            await conn.copy_records_to_table(table.name, records=rows, columns=list(columns))
            continue
        if add is None:
            sql = insert_sql(table, columns, "postgres")
        else:
            sql = upsert_sql(table, columns, add, "postgres")
        await conn.execute(sql, *(list(column) for column in zip(*rows, strict=True)))
