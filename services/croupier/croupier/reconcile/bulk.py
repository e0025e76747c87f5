"""A CSV wallet log loaded by the database itself (PostgreSQL ``COPY``), checked by SQL.

Guarantees
----------
- Same answer as reading the file row by row (:func:`croupier.reconcile.wallet.read_chunks`):
  SQL accepts only rows that are certainly valid in their canonical form (ASCII digits,
  ``...Z`` times, ids of at most 200 characters); every other row goes through
  :func:`~croupier.reconcile.wallet.check_values`, the one definition of a valid row, which
  stages it or reports it with its line number and reason.
- Line numbers are those of the file: the fast path is taken only when the file holds no
  double quote (no field can span lines) and the database loaded one row per line. A file
  the database refuses (a row with too few or too many fields, bytes that are not UTF-8)
  is read row by row instead, from the start; nothing is staged twice.
- Memory is flat: the file is streamed to the database in blocks.
"""

from __future__ import annotations

import csv
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from contract.wallet import FIELDS, MAX_TEXT
from croupier.projection import Session
from croupier.reconcile.wallet import (
    CHUNK,
    BadRow,
    WalletRow,
    check_values,
    header_picks,
)

BLOCK: Final = 1 << 20
_RAW: Final = "wallet_raw"
_IDS: Final = ("transaction_id", "message_id", "table_id", "round_id", "bet_id", "player_id")
_DIGITS: Final = "0123456789"
#: Where the digits of ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` are (1-based start, length).
_TIME_DIGITS: Final = ((1, 4), (6, 2), (9, 2), (12, 2), (15, 2), (18, 2), (21, 6))
_WAGER: Final = ("table_id", "round_id", "bet_id")
#: Each kind, with the ids it needs (a refund names a result, or a wager whose stake it returns).
_NEEDS: Final = (
    ("debit", _WAGER),
    ("credit", ("message_id",)),
    ("refund", ("message_id",)),
    ("refund", _WAGER),
)


@dataclass(frozen=True, slots=True)
class Loaded:
    """Rows SQL staged, and the others, checked one by one as they are read."""

    staged: int
    leftovers: AsyncIterator[list[WalletRow | BadRow]]


@dataclass
class _Scan:
    newlines: int = 0
    quoted: bool = False
    last: bytes = b"\n"

    def see(self, block: bytes) -> None:
        self.newlines += block.count(b"\n")
        self.quoted = self.quoted or b'"' in block
        self.last = block[-1:]

    @property
    def records(self) -> int:
        return self.newlines + (self.last != b"\n")


async def copy_csv(session: Session, path: Path, table: str) -> Loaded | None:
    """Load the CSV wallet log at ``path`` into ``table`` (the staging table's columns);
    None when the database cannot (then read the file row by row)."""
    if session.dialect != "postgres" or path.suffix.lower() != ".csv":
        return None
    picks, width = _header(path)  # a pick equal to the width: the header lacks that field
    columns = [f"c{i}" for i in range(width)]
    await session.execute(
        f"CREATE TEMP TABLE {_RAW} ({', '.join(f'{c} text' for c in columns)}, "
        "line bigint GENERATED ALWAYS AS IDENTITY (START WITH 2))"
    )
    scan = _Scan()
    copied = await session.copy_csv(_RAW, columns, _blocks(path, scan))
    if copied is None or scan.quoted or copied != scan.records - 1:
        await session.execute(f"DROP TABLE {_RAW}")
        return None
    fields = [f"c{i}" if i < width else "NULL::text" for i in picks]
    clean = _clean(dict(zip(FIELDS, fields, strict=True)))
    values = _values(dict(zip(FIELDS, fields, strict=True)))
    await session.execute(
        f"INSERT INTO {table} (line, {', '.join(FIELDS)}) "
        f"SELECT line, {', '.join(values)} FROM {_RAW} WHERE {clean}"
    )
    (count,) = await session.fetch(f"SELECT count(*) FROM {table}")
    query = f"SELECT line, {', '.join(fields)} FROM {_RAW} WHERE NOT {clean} ORDER BY line"
    return Loaded(int(count[0]), _leftovers(session, query))


def _header(path: Path) -> tuple[list[int], int]:
    with path.open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), None)
    return header_picks(header, path), len(header or ())


async def _blocks(path: Path, scan: _Scan) -> AsyncIterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(BLOCK):
            scan.see(block)
            yield block


def _clean(f: dict[str, str]) -> str:
    """SQL: the row is valid in canonical form (never NULL)."""
    ids = " AND ".join(f"({f[name]} IS NULL OR length({f[name]}) <= {MAX_TEXT})" for name in _IDS)
    needs = " OR ".join(
        f"({f['kind']} = '{kind}' AND "
        + " AND ".join(f"{f[name]} <> ''" for name in ("transaction_id", "player_id", *names))
        + ")"
        for kind, names in _NEEDS
    )
    c, a, t = f["currency"], f["amount"], f["occurred_at"]
    # Plain string functions where they will do: a regular expression costs per character.
    amount = f"length({a}) <= 18 AND ltrim({a}, '{_DIGITS}') = '' AND ltrim({a}, '0') <> ''"
    digits = "||".join(f"substr({t}, {start}, {size})" for start, size in _TIME_DIGITS)
    time = (
        f"({t} LIKE '____-__-__T__:__:__Z' OR {t} LIKE '____-__-__T__:__:__.______Z')"
        f" AND ltrim({digits}, '{_DIGITS}') = ''"
    )
    return f"COALESCE(({needs}) AND {ids} AND {c} ~ '^[A-Z]{{3}}$' AND {amount} AND {time}, false)"


def _values(f: dict[str, str]) -> list[str]:
    """SQL: the staged values of a clean row, as :func:`check_values` gives them."""
    out = []
    for name in FIELDS:
        if name == "amount":
            out.append(f"{f[name]}::bigint")
        elif name == "occurred_at":
            t = f[name]
            out.append(
                f"CASE WHEN length({t}) = 20 THEN substr({t}, 1, 19) || '.000000Z' ELSE {t} END"
            )
        elif name in _IDS:
            out.append(f"NULLIF({f[name]}, '')")
        else:
            out.append(f[name])
    return out


async def _leftovers(session: Session, query: str) -> AsyncIterator[list[WalletRow | BadRow]]:
    try:
        async for rows in session.stream(query, (), CHUNK):
            yield list(_checked(rows))
    finally:
        await session.execute(f"DROP TABLE IF EXISTS {_RAW}")


def _checked(rows: list[tuple[Any, ...]]) -> Iterator[WalletRow | BadRow]:
    for line, *values in rows:
        # as the CSV reader gives them: an empty field is ''
        yield check_values(int(line), *("" if v is None else v for v in values))
