"""The wallet's transaction log: its format, and reading it row by row from a file or a database.

Format (``contracts/wallet/wallet-transaction.schema.json``): CSV with a header, or JSON
Lines, with the fields ``transaction_id, kind, message_id, table_id, round_id, bet_id,
player_id, currency, amount, occurred_at``; extra columns are ignored.

- ``debit``: a stake taken when the game server accepted a wager; ``table_id``,
  ``round_id`` and ``bet_id`` name the wager.
- ``credit``: a settlement result applied; ``message_id`` names the result.
- ``refund``: a voided round's result applied (its wagers returned); ``message_id`` names it.

``amount`` is a positive integer in minor units; ``occurred_at`` an RFC 3339 time with an
offset. A row that breaks a rule is reported with its line number and the reason, never
skipped silently. Rows are read one at a time: memory does not grow with the log.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

from croupier.ledger.chain import format_timestamp
from croupier.reconcile.contract import RFC3339_PATTERN

FIELDS: Final = (
    "transaction_id",
    "kind",
    "message_id",
    "table_id",
    "round_id",
    "bet_id",
    "player_id",
    "currency",
    "amount",
    "occurred_at",
)
KINDS: Final = ("debit", "credit", "refund")
MAX_TEXT: Final = 200  # characters in any id
MAX_AMOUNT: Final = 2**63 - 1
_CURRENCY: Final = re.compile(r"[A-Z]{3}")
_RFC3339: Final = re.compile(RFC3339_PATTERN)
_REQUIRED: Final = {
    "debit": ("transaction_id", "table_id", "round_id", "bet_id", "player_id", "currency"),
    "credit": ("transaction_id", "message_id", "player_id", "currency"),
    "refund": ("transaction_id", "message_id", "player_id", "currency"),
}


class WalletRow(NamedTuple):
    """One valid wallet transaction, as staged for the comparison."""

    line: int
    transaction_id: str
    kind: str
    message_id: str | None
    table_id: str | None
    round_id: str | None
    bet_id: str | None
    player_id: str
    currency: str
    amount: int
    occurred_at: str  # UTC, YYYY-MM-DDTHH:MM:SS.ffffffZ


@dataclass(frozen=True, slots=True)
class BadRow:
    """A row of the wallet log that breaks the format: where, and why."""

    line: int
    reason: str


class WalletFormatError(Exception):
    """The wallet input as a whole cannot be read (not a single bad row)."""


def check_row(line: int, raw: Mapping[str, Any]) -> WalletRow | BadRow:
    """The row as a :class:`WalletRow`, or why it is not one."""
    kind = raw.get("kind")
    if kind not in KINDS:
        return BadRow(line, f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    values: dict[str, str | None] = {}
    for name in ("transaction_id", "message_id", "table_id", "round_id", "bet_id", "player_id"):
        value = raw.get(name)
        if value in ("", None):
            values[name] = None
        elif not isinstance(value, str) or len(value) > MAX_TEXT:
            return BadRow(line, f"{name} must be text of at most {MAX_TEXT} characters")
        else:
            values[name] = value
    missing = [name for name in _REQUIRED[kind] if name != "currency" and not values.get(name)]
    if missing:
        return BadRow(line, f"a {kind} needs {', '.join(missing)}")
    currency = raw.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        return BadRow(line, f"currency must be an ISO 4217 code such as EUR, got {currency!r}")
    amount = _amount(raw.get("amount"))
    if amount is None:
        got = raw.get("amount")
        return BadRow(line, f"amount must be a positive whole number of minor units, got {got!r}")
    occurred_at = _time(raw.get("occurred_at"))
    if occurred_at is None:
        got = raw.get("occurred_at")
        return BadRow(line, f"occurred_at must be an RFC 3339 time with an offset, got {got!r}")
    return WalletRow(
        line,
        values["transaction_id"] or "",
        kind,
        values["message_id"],
        values["table_id"],
        values["round_id"],
        values["bet_id"],
        values["player_id"] or "",
        currency,
        amount,
        occurred_at,
    )


def _amount(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int) and 0 < value <= MAX_AMOUNT:
        return value
    if hasattr(value, "as_integer_ratio") and not isinstance(value, float):  # Decimal
        numerator, denominator = value.as_integer_ratio()
        return numerator if denominator == 1 and 0 < numerator <= MAX_AMOUNT else None
    return None


def _time(value: Any) -> str | None:
    if isinstance(value, str):
        if not _RFC3339.match(value):
            return None
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if isinstance(value, datetime) and value.tzinfo is not None:
        return format_timestamp(value)
    return None


def read_file(path: Path) -> Iterator[WalletRow | BadRow]:
    """Rows of a CSV (``.csv``) or JSON Lines (``.jsonl``, ``.ndjson``) wallet log."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise WalletFormatError(f"{path}: the wallet log must be .csv or .jsonl")
    handle = path.open(encoding="utf-8", newline="")
    with handle:
        if suffix == ".csv":
            yield from _csv_rows(handle, path)
        else:
            yield from _jsonl_rows(handle)


def _csv_rows(handle: io.TextIOBase, path: Path) -> Iterator[WalletRow | BadRow]:
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        raise WalletFormatError(f"{path}: empty file; a CSV wallet log starts with a header")
    missing = [name for name in ("kind", "amount", "occurred_at", "currency") if name not in header]
    if missing:
        raise WalletFormatError(f"{path}: the header lacks {', '.join(missing)}")
    width = len(header)
    for row in reader:
        line = reader.line_num
        if len(row) != width:
            yield BadRow(line, f"{len(row)} fields where the header has {width}")
            continue
        yield check_row(line, dict(zip(header, row, strict=True)))


def _jsonl_rows(handle: io.TextIOBase) -> Iterator[WalletRow | BadRow]:
    for line, text in enumerate(handle, start=1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
        except ValueError as error:
            yield BadRow(line, f"not JSON: {error}")
            continue
        if not isinstance(raw, dict):
            yield BadRow(line, "not a JSON object")
            continue
        yield check_row(line, raw)


async def read_postgres(
    url: str, *, table: str | None = None, query: str | None = None, page: int = 10_000
) -> AsyncIterator[WalletRow | BadRow]:
    """Rows of a wallet table (or of a query returning the same columns) in PostgreSQL.

    ``line`` is the row's number in the query's order (ordered by ``occurred_at`` for a
    table).
    """
    import asyncpg

    if (table is None) == (query is None):
        raise WalletFormatError("name a wallet table or a query, not both")
    if table is not None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", table):
            raise WalletFormatError(f"{table!r} is not a table name")
        query = f"SELECT * FROM {table} ORDER BY occurred_at"
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction(readonly=True):
            cursor = await conn.cursor(query or "")
            line = 0
            while rows := await cursor.fetch(page):
                for row in rows:
                    line += 1
                    yield check_row(line, dict(row.items()))
    finally:
        await conn.close()
