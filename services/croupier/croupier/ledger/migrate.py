"""Versioned SQL migrations: ``migrations/<dialect>/NNNN_name.sql``, applied in order.

Each adapter records applied versions in a ``schema_migrations`` table and applies the
missing ones inside a transaction under its write lock, so running ``migrate`` again, or
from two processes at once, is harmless.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from typing import Literal

Dialect = Literal["postgres", "sqlite"]

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    sql: str


def migrations(dialect: Dialect) -> list[Migration]:
    """The dialect's migrations in version order."""
    folder = resources.files("croupier.ledger").joinpath("migrations", dialect)
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions in {dialect}: {versions}")
    return found


def split_sqlite_script(script: str) -> list[str]:
    """Split a SQLite script into statements (trigger bodies keep their inner ``;``)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if statement := _strip_comments(buffer):
                statements.append(statement)
            buffer = ""
    if _strip_comments(buffer):
        raise ValueError(f"incomplete SQL statement: {buffer.strip()[:80]!r}")
    return statements


def _strip_comments(sql: str) -> str:
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return "\n".join(lines).strip()
