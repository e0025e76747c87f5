"""The wallet's transaction log, read row by row from a file or a database.

The format is :mod:`contract.wallet` (``contracts/wallet/wallet-transaction.schema.json``):
CSV with a header, or JSON Lines; extra columns are ignored. A row that breaks a rule is
reported with its line number and the reason, never skipped silently. Rows are read one at a
time: memory does not grow with the log.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from contract.wallet import FIELDS, KINDS, MAX_AMOUNT, MAX_TEXT, RFC3339_PATTERN
from croupier.ledger.chain import format_timestamp

_CURRENCY: Final = re.compile(r"[A-Z]{3}")
_RFC3339: Final = re.compile(RFC3339_PATTERN)
_CANONICAL: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z")
_ID_FIELDS: Final = ("transaction_id", "message_id", "table_id", "round_id", "bet_id", "player_id")
_REQUIRED: Final = {
    kind: tuple((name, _ID_FIELDS.index(name)) for name in names)
    for kind, names in {
        "debit": ("transaction_id", "table_id", "round_id", "bet_id", "player_id"),
        "credit": ("transaction_id", "message_id", "player_id"),
        "refund": ("transaction_id", "message_id", "player_id"),
    }.items()
}
#: JSON Lines rows are decoded with msgspec, three times faster than the json module;
#: what the json module would take but JSON forbids (NaN, Infinity, a lone surrogate
#: escape, a number beyond a float) is a row that is not JSON.
_JSON: Final = msgspec.json.Decoder()
#: Rows read per chunk.
CHUNK: Final = 10_000


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
    return check_values(line, *(raw.get(name) for name in FIELDS))


def check_values(
    line: int,
    transaction_id: Any,
    kind: Any,
    message_id: Any,
    table_id: Any,
    round_id: Any,
    bet_id: Any,
    player_id: Any,
    currency: Any,
    amount: Any,
    occurred_at: Any,
) -> WalletRow | BadRow:
    """The fields of one row (in :data:`FIELDS` order) as a :class:`WalletRow`, or why not."""
    required = _REQUIRED.get(kind) if type(kind) is str else None  # JSON may give a list
    if required is None:
        return BadRow(line, f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    ids = [transaction_id, message_id, table_id, round_id, bet_id, player_id]
    for i, value in enumerate(ids):
        if value == "" or value is None:
            ids[i] = None
        elif type(value) is not str or len(value) > MAX_TEXT:
            return BadRow(line, f"{_ID_FIELDS[i]} must be text of at most {MAX_TEXT} characters")
    if kind == "refund" and ids[1] is None:  # not a result's: a stake returned
        required = _REQUIRED["debit"]
    missing = [name for name, i in required if ids[i] is None]
    if missing:
        if kind == "refund":
            return BadRow(
                line,
                "a refund needs message_id (a voided round's result) or table_id, round_id "
                f"and bet_id (a stake returned); it lacks {', '.join(missing)}",
            )
        return BadRow(line, f"a {kind} needs {', '.join(missing)}")
    if type(currency) is not str or not _CURRENCY.fullmatch(currency):
        return BadRow(line, f"currency must be an ISO 4217 code such as EUR, got {currency!r}")
    money = _amount(amount)
    if money is None:
        return BadRow(
            line, f"amount must be a positive whole number of minor units, got {amount!r}"
        )
    moment = _time(occurred_at)
    if moment is None:
        return BadRow(
            line, f"occurred_at must be an RFC 3339 time with an offset, got {occurred_at!r}"
        )
    tx, message, table, round_, bet, player = ids
    return WalletRow(
        line, tx or "", kind, message, table, round_, bet, player or "", currency, money, moment
    )


def _amount(value: Any) -> int | None:
    if type(value) is str:
        if not (value.isascii() and value.isdigit()):
            return None
        value = int(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 < value <= MAX_AMOUNT:
        return value
    if hasattr(value, "as_integer_ratio") and not isinstance(value, float):  # Decimal
        numerator, denominator = value.as_integer_ratio()
        return numerator if denominator == 1 and 0 < numerator <= MAX_AMOUNT else None
    return None


def _time(value: Any) -> str | None:
    if type(value) is str and value[-1:] == "Z" and _CANONICAL.fullmatch(value):
        return value if len(value) == 27 else value[:19] + ".000000Z"  # already UTC
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
    for chunk in read_chunks(path):
        yield from chunk


def read_chunks(path: Path) -> Generator[list[WalletRow | BadRow], None, None]:
    """The rows of a wallet log file, :data:`CHUNK` at a time."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise WalletFormatError(f"{path}: the wallet log must be .csv or .jsonl")
    with path.open(encoding="utf-8", newline="") as handle:
        yield from (_csv_chunks(handle, path) if suffix == ".csv" else _jsonl_chunks(handle))


async def file_chunks(path: Path) -> AsyncIterator[list[WalletRow | BadRow]]:
    """:func:`read_chunks` for a reconciliation: each chunk is read in a worker thread, the
    next one while the caller stages the last (one chunk ahead, no more)."""
    chunks = read_chunks(path)
    ahead = asyncio.ensure_future(asyncio.to_thread(next, chunks, None))
    try:
        while (chunk := await ahead) is not None:
            ahead = asyncio.ensure_future(asyncio.to_thread(next, chunks, None))
            yield chunk
    finally:
        if not ahead.done():
            await asyncio.wait([ahead])
        chunks.close()


def header_picks(header: list[str] | None, path: Path) -> list[int]:
    """Where each of :data:`FIELDS` is in a CSV header (its width when the header lacks it)."""
    if header is None:
        raise WalletFormatError(f"{path}: empty file; a CSV wallet log starts with a header")
    missing = [name for name in ("kind", "amount", "occurred_at", "currency") if name not in header]
    if missing:
        raise WalletFormatError(f"{path}: the header lacks {', '.join(missing)}")
    return [header.index(name) if name in header else len(header) for name in FIELDS]


def _csv_chunks(handle: io.TextIOBase, path: Path) -> Iterator[list[WalletRow | BadRow]]:
    reader = csv.reader(handle)
    header = next(reader, None)
    picks = header_picks(header, path)
    width = len(header or ())
    chunk: list[WalletRow | BadRow] = []
    for row in reader:
        if len(row) != width:
            chunk.append(BadRow(reader.line_num, f"{len(row)} fields where the header has {width}"))
        else:
            row.append("")  # what a column the header lacks reads as
            chunk.append(check_values(reader.line_num, *[row[i] for i in picks]))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _jsonl_chunks(handle: io.TextIOBase) -> Iterator[list[WalletRow | BadRow]]:
    chunk: list[WalletRow | BadRow] = []
    for line, text in enumerate(handle, start=1):
        if not text.strip():
            continue
        try:
            raw = _JSON.decode(text)
        except msgspec.DecodeError as error:
            chunk.append(BadRow(line, f"not JSON: {error}"))
            continue
        if not isinstance(raw, dict):
            chunk.append(BadRow(line, "not a JSON object"))
            continue
        chunk.append(check_row(line, raw))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def read_postgres(
    url: str, *, table: str | None = None, query: str | None = None, page: int = CHUNK
) -> AsyncIterator[list[WalletRow | BadRow]]:
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
                chunk: list[WalletRow | BadRow] = []
                for row in rows:
                    line += 1
                    chunk.append(check_row(line, dict(row.items())))
                yield chunk
    finally:
        await conn.close()
