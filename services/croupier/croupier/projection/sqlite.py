"""Read models in the SQLite ledger's file.

Commits run on the ledger's write connection under ``BEGIN IMMEDIATE``, SQLite's single
writer lock, so a batch's rows and its checkpoint commit together or not at all, and two
projectors (two processes on one file) are serialised: the second finds the checkpoint
moved. Sessions open a connection of their own (``:memory:`` shares the ledger's).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from croupier.ledger.sqlite import SqliteLedger
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
    upsert_sql,
)

T = TypeVar("T")


class SqliteStore(ReadModelStore):
    """Read models beside a :class:`SqliteLedger`."""

    dialect: Dialect = "sqlite"

    def __init__(self, ledger: SqliteLedger) -> None:
        self.ledger = ledger

    async def setup(self, projections: Sequence[Projection]) -> list[str]:
        return await self.ledger.run_writing(lambda conn: _transaction(conn, _setup, projections))

    async def marks(self, projections: Sequence[Projection]) -> dict[str, Mark]:
        names = [p.name for p in projections]
        sql = f"SELECT name, position, part FROM {CHECKPOINTS}"
        rows = await self.ledger.run_reading(lambda conn: conn.execute(sql).fetchall())
        found = {name: Mark(position, part) for name, position, part in rows if name in names}
        missing = set(names) - set(found)
        if missing:
            raise ProjectionError(f"projections {sorted(missing)} are not set up: run setup first")
        return found

    async def commit(self, steps: Sequence[Step]) -> None:
        if steps:
            await self.ledger.run_writing(lambda conn: _transaction(conn, _commit, steps))

    async def reset(self, projections: Sequence[Projection]) -> None:
        await self.ledger.run_writing(lambda conn: _transaction(conn, _reset, projections))

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        if self.ledger.path == ":memory:":
            yield SqliteSession(self.ledger.run_writing)
            return
        conn = sqlite3.connect(self.ledger.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA temp_store = FILE")  # big staging tables stay off the heap
        lock = threading.Lock()

        async def run(work: Callable[[sqlite3.Connection], T]) -> T:
            def locked() -> T:
                with lock:
                    return work(conn)

            return await asyncio.to_thread(locked)

        try:
            yield SqliteSession(run)
        finally:
            with lock:
                conn.close()


class SqliteSession(Session):
    """Queries on one SQLite connection, each run in a worker thread."""

    dialect: Dialect = "sqlite"

    def __init__(self, run: Callable[[Callable[[sqlite3.Connection], Any]], Any]) -> None:
        self._run = run

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        await self._run(lambda conn: conn.execute(sql, params))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._run(lambda conn: _many(conn, sql, rows))

    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        marks = ", ".join("?" * len(columns))
        await self.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = await self._run(
            lambda conn: conn.execute(sql, params).fetchall()
        )
        return rows

    async def stream(
        self, sql: str, params: Sequence[Any] = (), page: int = 5000
    ) -> AsyncGenerator[list[tuple[Any, ...]], None]:
        cursor: sqlite3.Cursor = await self._run(lambda conn: conn.execute(sql, params))
        try:
            while rows := await self._run(lambda _: cursor.fetchmany(page)):
                yield rows
        finally:
            await self._run(lambda _: cursor.close())


def _many(conn: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    conn.execute("BEGIN")
    try:
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _transaction(
    conn: sqlite3.Connection, work: Callable[[sqlite3.Connection, Any], T], arg: Any
) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn, arg)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return result


def _setup(conn: sqlite3.Connection, projections: Sequence[Projection]) -> list[str]:
    conn.execute(checkpoint_ddl("sqlite"))
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({CHECKPOINTS})")}
    if "part" not in columns:
        conn.execute(f"ALTER TABLE {CHECKPOINTS} ADD COLUMN {PART_COLUMN}")
    stored = {
        name: (version, tables)
        for name, version, tables in conn.execute(
            f"SELECT name, version, tables FROM {CHECKPOINTS}"
        )
    }
    created: list[str] = []
    for projection in projections:
        names = ",".join(t.name for t in projection.tables)
        version, tables = stored.get(projection.name, (None, ""))
        if version != projection.version:
            for old in filter(None, {*tables.split(","), *names.split(",")}):
                conn.execute(f"DROP TABLE IF EXISTS {old}")
            conn.execute(
                f"INSERT INTO {CHECKPOINTS} (name, version, position, tables) VALUES (?, ?, 0, ?) "
                "ON CONFLICT (name) DO UPDATE SET version = excluded.version, position = 0, "
                "part = 0, tables = excluded.tables",
                (projection.name, projection.version, names),
            )
            created.append(projection.name)
        for table in projection.tables:
            for statement in create_table(table, "sqlite"):
                conn.execute(statement)
    return created


def _commit(conn: sqlite3.Connection, steps: Sequence[Step]) -> None:
    for step in steps:
        row = conn.execute(
            f"SELECT position, part FROM {CHECKPOINTS} WHERE name = ?", (step.projection.name,)
        ).fetchone()
        actual = Mark(-1) if row is None else Mark(row[0], row[1])
        if actual != Mark(step.after, step.part_after):
            raise CheckpointMoved(step.projection.name, step.after, actual.position)
        for table, columns, add, rows in groups(step.projection.tables, step.changes):
            if add is None:
                sql = insert_sql(table, columns, "sqlite")
            else:
                sql = upsert_sql(table, columns, add, "sqlite")
            conn.executemany(sql, rows)
        conn.execute(
            f"UPDATE {CHECKPOINTS} SET position = ?, part = ? WHERE name = ?",
            (step.upto, step.part_upto, step.projection.name),
        )


def _reset(conn: sqlite3.Connection, projections: Sequence[Projection]) -> None:
    for projection in projections:
        for table in projection.tables:
            conn.execute(f"DELETE FROM {table.name}")
        conn.execute(
            f"UPDATE {CHECKPOINTS} SET position = 0, part = 0 WHERE name = ?", (projection.name,)
        )
