"""Read models checked against the ledger: every row re-derived, every difference named.

What players and support are shown comes from read models (``history_recalls``,
``history_player_rounds``, ...), which are outside the hash chain: a role that may write
them could change what a page says while ``croupier verify`` still finds the chain intact.
:func:`check_read_models` projects the ledger again, in memory, with the same code, and
compares row by row with what is stored, naming each row that was changed (and which
columns), removed, or added without a fact to come from.

Consistent while a projector runs
    The checked projections only insert rows, each from one fact, and never change one.
    The checkpoint is read before the stored rows (``before``) and after them (``after``):
    a stored row must be what the ledger up to ``after`` gives, and every row the ledger up
    to ``before`` gives must be stored. Rows the projector adds meanwhile are neither
    missing nor unexpected. A checkpoint that went back (a rebuild) is reported, not
    guessed around.
Memory
    The stored rows are held as a 32-byte digest each (BLAKE2b, with 4 bytes per column to
    name the columns that differ) under their key; the ledger is read once, page by page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from croupier.ledger import Ledger
from croupier.projection import Changes, Projection, ReadModelStore, Row, Table
from croupier.projection.sql import CHECKPOINTS

#: The read models ``croupier verify --read-models`` checks: what the history pages and the
#: hold report show. (The integrity statistics sum rows as they go, so they are not
#: insert-only, and are worth a rebuild rather than a check.)
CHECKED: Final = ("wagers", "rounds")
PAGE: Final = 2_000

Kind = Literal["changed", "missing", "unexpected"]


@dataclass(frozen=True, slots=True)
class RowDifference:
    """A stored row that is not what the ledger gives."""

    table: str
    key: dict[str, Any]
    kind: Kind
    columns: tuple[str, ...] = ()

    def line(self) -> str:
        """One line naming the row (and the columns that differ)."""
        key = ", ".join(f"{k}={v!r}" for k, v in self.key.items())
        what = {
            "changed": f"changed ({', '.join(self.columns)} not what the ledger gives)",
            "missing": "missing (the ledger gives it; the read model does not hold it)",
            "unexpected": "unexpected (no ledger fact gives it)",
        }[self.kind]
        return f"{self.table} ({key}): {what}"

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "key": self.key,
            "kind": self.kind,
            "columns": list(self.columns),
        }


@dataclass
class ReadModelReport:
    """The outcome of a check: rows compared per table, and every difference."""

    compared: dict[str, int] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)
    differences: list[RowDifference] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.problems

    def summary(self) -> str:
        if self.problems:
            return f"read models: not checked: {'; '.join(self.problems)} - FAILED"
        rows = sum(self.compared.values())
        upto = ", ".join(f"{name} up to {p}" for name, p in self.positions.items())
        head = f"read models: {rows} rows re-derived from the ledger ({upto})"
        if self.ok:
            return f"{head}: every row is what the ledger gives"
        return f"{head}: {len(self.differences)} row(s) differ - FAILED"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "compared": self.compared,
            "positions": self.positions,
            "differences": [d.to_json() for d in self.differences],
            "problems": self.problems,
        }


@dataclass
class _Stored:
    """A table's stored rows: key -> (row digest, column digests)."""

    table: Table
    rows: dict[tuple[Any, ...], tuple[bytes, bytes]] = field(default_factory=dict)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c for c in self.table.column_names if c not in self.table.key)


async def check_read_models(
    ledger: Ledger,
    store: ReadModelStore,
    projections: Sequence[Projection],
    *,
    page: int = PAGE,
    progress: Callable[[int], None] | None = None,
) -> ReadModelReport:
    """Compare each projection's stored rows with the ledger projected again (fresh
    ``projections``, which must only insert rows)."""
    report = ReadModelReport()
    before = await _checkpoints(store, projections, report, begun=False)
    if report.problems:
        return report
    stored = {p.name: await _stored(store, p) for p in projections}
    after = await _checkpoints(store, projections, report, begun=True)
    went_back = [p.name for p in projections if after[p.name] < before[p.name]]
    if went_back:
        report.problems.append(
            f"read models {', '.join(went_back)} went back during the check (rebuilt?): check again"
        )
    if report.problems:
        return report
    report.positions = {p.name: after[p.name] for p in projections}
    await _compare(ledger, projections, stored, before, after, page, report, progress)
    for tables in stored.values():
        for held in tables.values():
            report.compared.setdefault(held.table.name, 0)
            for key in held.rows:
                report.differences.append(
                    RowDifference(held.table.name, _key(held, key), "unexpected")
                )
    return report


async def _checkpoints(
    store: ReadModelStore, projections: Sequence[Projection], report: ReadModelReport, begun: bool
) -> dict[str, int]:
    """Each projection's position; with ``begun``, past a fact it has begun to write in
    pieces (some of that fact's rows may be stored, the rest not yet)."""
    async with store.session() as session:
        try:
            rows = await session.fetch(f"SELECT name, version, position, part FROM {CHECKPOINTS}")
        except Exception:  # no checkpoint table: nothing was ever projected (by this build)
            report.problems.append("no read models to check: run croupier project first")
            return {}
    found = {
        name: (version, position + (begun and part > 0)) for name, version, position, part in rows
    }
    for projection in projections:
        version, _ = found.get(projection.name, (None, 0))
        if version != projection.version:
            report.problems.append(
                f"read model {projection.name} is at version {version}, this build projects "
                f"version {projection.version}: run croupier project first"
            )
    return {name: position for name, (_, position) in found.items()}


async def _stored(store: ReadModelStore, projection: Projection) -> dict[str, _Stored]:
    tables: dict[str, _Stored] = {}
    async with store.session() as session:
        for table in projection.tables:
            held = tables[table.name] = _Stored(table)
            key = [table.column_names.index(c) for c in table.key]
            values = [table.column_names.index(c) for c in held.values]
            sql = f"SELECT {', '.join(table.column_names)} FROM {table.name}"
            async for rows in session.stream(sql):
                for row in rows:
                    held.rows[tuple(row[i] for i in key)] = _digest([row[i] for i in values])
    return tables


async def _compare(
    ledger: Ledger,
    projections: Sequence[Projection],
    stored: dict[str, dict[str, _Stored]],
    before: dict[str, int],
    after: dict[str, int],
    page: int,
    report: ReadModelReport,
    progress: Callable[[int], None] | None,
) -> None:
    """The ledger read once, page by page, into every projection; each row it gives is
    checked off against the stored ones."""
    last = max(after[p.name] for p in projections)
    # pages end at each ``before``, so each row is known to come from at or below it, or not
    stops = sorted({before[p.name] for p in projections} | {last})
    position = 0
    while position < last:
        end = next(stop for stop in stops if stop > position)
        events = await ledger.read_all(position, min(page, end - position))
        if not events:
            report.problems.append(f"the ledger has no events after {position}, below {last}")
            return
        for projection in projections:
            mine = [e for e in events if e.position <= after[projection.name]]
            if not mine:
                continue
            await projection.gather(mine, ledger)
            changes = Changes()
            projection.apply(mine, changes)
            if changes.upserts:
                report.problems.append(f"read model {projection.name} is not insert-only")
                return
            settled = mine[-1].position <= before[projection.name]
            tables = stored[projection.name]
            for name, rows in changes.inserts.items():
                for row in rows:
                    _expect(tables[name], row, settled, report)
        position = events[-1].position
        if progress is not None:
            progress(len(events))


def _expect(held: _Stored, row: Row, settled: bool, report: ReadModelReport) -> None:
    """One row the ledger gives, against the stored one (removed from ``held`` once seen)."""
    table = held.table
    key = tuple(row[c] for c in table.key)
    found = held.rows.pop(key, None)
    report.compared[table.name] = report.compared.get(table.name, 0) + 1
    if found is None:
        if settled:  # written before the check began: it must be there
            report.differences.append(RowDifference(table.name, _key(held, key), "missing"))
        return
    digest, columns = _digest([row[c] for c in held.values])
    if digest != found[0]:
        differing = tuple(
            name
            for i, name in enumerate(held.values)
            if columns[4 * i : 4 * i + 4] != found[1][4 * i : 4 * i + 4]
        )
        report.differences.append(
            RowDifference(table.name, _key(held, key), "changed", differing or held.values)
        )


def _key(held: _Stored, key: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(held.table.key, key, strict=True))


def _digest(values: Sequence[Any]) -> tuple[bytes, bytes]:
    """A row's digest, and 4 bytes per column to tell which ones differ."""
    encoded = [_encoded(v) for v in values]
    framed = b"".join(len(e).to_bytes(8, "big") + e for e in encoded)
    whole = hashlib.blake2b(framed, digest_size=32).digest()
    columns = b"".join(hashlib.blake2b(e, digest_size=4).digest() for e in encoded)
    return whole, columns


def _encoded(value: Any) -> bytes:
    """A column's value as bytes that tell its type too (text "1" is not the integer 1)."""
    if value is None:
        return b"n"
    if isinstance(value, int):
        return b"i" + str(value).encode()
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    return b"r" + repr(value).encode()
