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
    The stored rows are held as a 32-byte digest each (with 4 bytes per column, to name the
    columns that differ) under their key; the ledger is read page by page.
"""

from __future__ import annotations

import hashlib
import json
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
    before = await _checkpoints(store, projections, report)
    if report.problems:
        return report
    stored = {p.name: await _stored(store, p) for p in projections}
    after = await _checkpoints(store, projections, report)
    for projection in projections:
        name = projection.name
        if report.problems:
            break
        if after[name] < before[name]:
            report.problems.append(
                f"read model {name} went back from {before[name]} to {after[name]} during "
                "the check (rebuilt?): check again"
            )
            break
        report.positions[name] = after[name]
        await _compare(ledger, projection, stored[name], before[name], after[name], page,
                       report, progress)  # fmt: skip
    return report


async def _checkpoints(
    store: ReadModelStore, projections: Sequence[Projection], report: ReadModelReport
) -> dict[str, int]:
    async with store.session() as session:
        try:
            rows = await session.fetch(f"SELECT name, version, position FROM {CHECKPOINTS}")
        except Exception:  # no checkpoint table: nothing was ever projected
            report.problems.append("no read models to check: run croupier project first")
            return {}
    found = {name: (version, position) for name, version, position in rows}
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
    projection: Projection,
    stored: dict[str, _Stored],
    before: int,
    after: int,
    page: int,
    report: ReadModelReport,
    progress: Callable[[int], None] | None,
) -> None:
    position = 0
    while position < after:
        # pages end at ``before`` too, so each row is known to come from at or below it, or not
        end = before if position < before else after
        events = await ledger.read_all(position, min(page, end - position))
        if not events:
            report.problems.append(f"the ledger has no events after {position}, below {after}")
            return
        await projection.gather(events, ledger)
        changes = Changes()
        projection.apply(events, changes)
        if changes.upserts:
            report.problems.append(f"read model {projection.name} is not insert-only")
            return
        settled = events[-1].position <= before
        for name, rows in changes.inserts.items():
            for row in rows:
                _expect(stored[name], row, settled, report)
        position = events[-1].position
        if progress is not None:
            progress(len(events))
    for held in stored.values():
        report.compared[held.table.name] = report.compared.get(held.table.name, 0)
        for key in held.rows:
            report.differences.append(RowDifference(held.table.name, _key(held, key), "unexpected"))


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
    encoded = [json.dumps(v, ensure_ascii=False).encode() for v in values]
    whole = hashlib.sha256(b"\x00".join(encoded)).digest()
    columns = b"".join(hashlib.blake2b(e, digest_size=4).digest() for e in encoded)
    return whole, columns
