"""SQL both read-model adapters share: table DDL, the checkpoint table, batch grouping.

Names come only from :class:`~croupier.projection.Table` declarations, which admit
``[a-z0-9_]`` alone, so formatting them into SQL is safe.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from croupier.projection import Changes, Dialect, ProjectionError, Row, Table

CHECKPOINTS: Final = "projection_checkpoints"

_TYPES: Final = {
    "postgres": {"text": "text", "int": "bigint"},
    "sqlite": {"text": "TEXT", "int": "INTEGER"},
}


def checkpoint_ddl(dialect: Dialect) -> str:
    """The checkpoint table: one row per projection, its version, position and tables."""
    text, integer = _TYPES[dialect]["text"], _TYPES[dialect]["int"]
    return (
        f"CREATE TABLE IF NOT EXISTS {CHECKPOINTS} (name {text} PRIMARY KEY, "
        f"version {integer} NOT NULL, position {integer} NOT NULL CHECK (position >= 0), "
        f"tables {text} NOT NULL, {PART_COLUMN})"
    )


#: The rows of the fact after ``position`` already written (a fact written in pieces);
#: added to checkpoint tables made before it.
PART_COLUMN: Final = "part bigint NOT NULL DEFAULT 0 CHECK (part >= 0)"


def create_table(table: Table, dialect: Dialect) -> list[str]:
    """``CREATE TABLE`` and ``CREATE INDEX`` statements for ``table``."""
    types = _TYPES[dialect]
    columns = [
        f"{c.name} {types[c.type]}{'' if c.nullable else ' NOT NULL'}" for c in table.columns
    ]
    columns.append(f"PRIMARY KEY ({', '.join(table.key)})")
    storage = storage_options(table) if dialect == "postgres" else ""
    statements = [f"CREATE TABLE IF NOT EXISTS {table.name} ({', '.join(columns)}){storage}"]
    for index in table.indexes:
        name = f"{table.name}__{'_'.join(index)}"[:63]
        statements.append(f"CREATE INDEX IF NOT EXISTS {name} ON {table.name} ({', '.join(index)})")
    return statements


def storage_options(table: Table) -> str:
    """PostgreSQL's ``WITH (...)`` of ``table`` (empty when it has none)."""
    return f" WITH ({toast_option(table)})" if table.inline_bytes else ""


def toast_option(table: Table) -> str:
    """The storage parameter ``inline_bytes`` sets, as ``pg_class.reloptions`` lists it."""
    return f"toast_tuple_target={table.inline_bytes}"


def insert_sql(table: Table, columns: Sequence[str], dialect: Dialect) -> str:
    """An insert of one row (SQLite) or of column arrays through ``unnest`` (PostgreSQL)."""
    return _insert(table, columns, dialect)


def upsert_sql(table: Table, columns: Sequence[str], add: Sequence[str], dialect: Dialect) -> str:
    """An insert that, on the primary key, sums ``add`` columns and replaces the others."""
    updates = [
        f"{c} = {table.name}.{c} + excluded.{c}" if c in add else f"{c} = excluded.{c}"
        for c in columns
        if c not in table.key
    ]
    action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
    return f"{_insert(table, columns, dialect)} ON CONFLICT ({', '.join(table.key)}) {action}"


def _insert(table: Table, columns: Sequence[str], dialect: Dialect) -> str:
    names = ", ".join(columns)
    if dialect == "sqlite":
        marks = ", ".join("?" * len(columns))
        return f"INSERT INTO {table.name} ({names}) VALUES ({marks})"
    types = {c.name: _TYPES["postgres"][c.type] for c in table.columns}
    arrays = ", ".join(f"${i}::{types[c]}[]" for i, c in enumerate(columns, 1))
    return f"INSERT INTO {table.name} ({names}) SELECT * FROM unnest({arrays})"


Group = tuple[Table, tuple[str, ...], tuple[str, ...] | None, list[tuple[Any, ...]]]


def groups(tables: Sequence[Table], changes: Changes) -> Iterator[Group]:
    """The batch's writes as (table, columns, add or None for a plain insert, rows).

    Inserts come first, then upserts; upserts to the same key in one batch are merged
    (PostgreSQL refuses to touch a row twice in one statement), in order.
    """
    by_name = {t.name: t for t in tables}
    for name in changes.inserts.keys() | changes.upserts.keys():
        if name not in by_name:
            raise ProjectionError(f"table {name!r} is not one of the projection's tables")
    for name, rows in changes.inserts.items():
        for columns, values in _by_columns(by_name[name], rows):
            yield by_name[name], columns, None, values
    for name, pairs in changes.upserts.items():
        table = by_name[name]
        merged: dict[
            tuple[tuple[str, ...], tuple[str, ...]], dict[tuple[Any, ...], dict[str, Any]]
        ] = {}
        for row, add in pairs:
            shape = (tuple(row), add)
            keyed = merged.setdefault(shape, {})
            key = tuple(row[k] for k in table.key)
            stored = keyed.get(key)
            if stored is None:
                keyed[key] = dict(row)
            else:
                for column, value in row.items():
                    stored[column] = stored[column] + value if column in add else value
        for (columns, add), keyed in merged.items():
            _check_columns(table, columns)
            yield table, columns, add, [tuple(r[c] for c in columns) for r in keyed.values()]


def _by_columns(
    table: Table, rows: Sequence[Row]
) -> Iterator[tuple[tuple[str, ...], list[tuple[Any, ...]]]]:
    shaped: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for row in rows:
        columns = tuple(row)
        shaped.setdefault(columns, []).append(tuple(row.values()))
    for columns, values in shaped.items():
        _check_columns(table, columns)
        yield columns, values


def _check_columns(table: Table, columns: tuple[str, ...]) -> None:
    unknown = set(columns) - set(table.column_names)
    if unknown or not set(table.key) <= set(columns):
        raise ProjectionError(
            f"rows for {table.name} must name its key {table.key} and only its columns; "
            f"unknown: {sorted(unknown)}"
        )


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2, ...`` (outside quoted text)."""
    out: list[str] = []
    number = 0
    quoted = False
    for char in sql:
        if char == "'":
            quoted = not quoted
        if char == "?" and not quoted:
            number += 1
            out.append(f"${number}")
        else:
            out.append(char)
    return "".join(out)
