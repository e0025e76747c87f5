"""The ledger's hash chain: row encoding, linking, and the verification walk.

A row's canonical form is the compact JSON array
``[position, stream, version, type, data, key, recorded_at]`` with ``data`` itself canonical
JSON (sorted keys, no spaces, UTF-8) and ``recorded_at`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.
``hash = sha256(prev_hash + canonical row)`` in hex; the first row links to ``GENESIS_HASH``.
Both adapters store ``data`` as the exact canonical text (``contract.canonical``), so
verification hashes the stored bytes and never depends on re-encoding.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from contract.canonical import quote as _quote

GENESIS_HASH = "0" * 64

ProblemKind = Literal["changed", "removed", "inserted", "unsigned", "forged", "missing"]
KINDS: tuple[ProblemKind, ...] = ("changed", "removed", "inserted", "unsigned", "forged", "missing")
#: Timestamps whose text ``format_timestamp`` keeps.
TIMESTAMPS_KEPT = 4096
#: Positions listed one by one for a run of removed or unsigned rows; the rest as one range.
LISTED_RUN = 1000


@functools.lru_cache(maxsize=TIMESTAMPS_KEPT)
def format_timestamp(moment: datetime) -> str:
    """The chain's timestamp text (UTC, microseconds, ``Z``). Kept for the moments met
    last: the rows of one append share theirs, and the relay's vouching and ``verify``
    read rows by the thousand (formatting was a sixth of the relay's vouching)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def row_hash(
    prev_hash: str,
    position: int,
    stream: str,
    version: int,
    type_: str,
    data: str,
    key: str,
    recorded_at: str,
) -> str:
    """sha256 over ``prev_hash`` + the canonical row; ``data`` is canonical JSON text."""
    # Splicing the already-canonical data text keeps the whole array canonical JSON
    # without re-encoding the payload. Guarded by `python -m bench ledger`.
    encoded = (
        f"[{position},{_quote(stream)},{version},{_quote(type_)},{data},"
        f"{_quote(key)},{_quote(recorded_at)}]"
    )
    return hashlib.sha256((prev_hash + encoded).encode()).hexdigest()


class ChainRow(NamedTuple):
    """A stored event row exactly as the hash covers it (a tuple, ready for drivers)."""

    position: int
    stream: str
    version: int
    type: str
    data: str
    key: str
    recorded_at: str
    prev_hash: str
    hash: str

    def computed_hash(self) -> str:
        """The hash this row's content and ``prev_hash`` call for."""
        return row_hash(
            self.prev_hash,
            self.position,
            self.stream,
            self.version,
            self.type,
            self.data,
            self.key,
            self.recorded_at,
        )


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of ``verify``: a row of ``table`` changed, removed, inserted, ...

    ``position`` is the event position the row concerns; ``row`` names a row of another
    table than ``events`` (e.g. ``seq 12 message_id ...``).
    """

    kind: ProblemKind
    position: int
    detail: str
    table: str = "events"
    row: str = ""

    def line(self) -> str:
        """One line for people: table, kind, which row, why."""
        where = self.row or f"position {self.position}"
        return f"{self.table} {self.kind}: {where}: {self.detail}"


@dataclass(frozen=True)
class VerifyReport:
    """The result of a chain walk; ``ok`` is False when anything is wrong."""

    checked: int
    head_position: int
    head_hash: str
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()  # information, not findings (e.g. messages set aside)

    @property
    def ok(self) -> bool:
        return not self.problems

    def positions(self, kind: ProblemKind, table: str = "events") -> list[int]:
        """Positions of the problems of one kind in ``table``, ascending."""
        return sorted(p.position for p in self.problems if p.kind == kind and p.table == table)

    def rows(self, table: str, kind: ProblemKind | None = None) -> list[str]:
        """The named rows of ``table`` with problems (of one kind, if given)."""
        return [p.row for p in self.problems if p.table == table and kind in (None, p.kind)]

    @property
    def unsigned(self) -> list[int]:
        return self.positions("unsigned")

    @property
    def changed(self) -> list[int]:
        return self.positions("changed")

    @property
    def removed(self) -> list[int]:
        return self.positions("removed")

    @property
    def inserted(self) -> list[int]:
        return self.positions("inserted")

    def summary(self) -> str:
        """One line for people and logs."""
        head = f"{self.checked} rows, head {self.head_position} {self.head_hash[:16]}"
        if self.ok:
            return f"ledger chain ok: {head}"
        parts = [f"{kind} {self.positions(kind)}" for kind in KINDS if self.positions(kind)]
        tables = sorted({p.table for p in self.problems} - {"events"})
        parts += [f"{table}: {len(self.rows(table))} rows" for table in tables]
        return f"ledger chain BROKEN: {'; '.join(parts)} ({head})"

    def to_json(self) -> dict[str, Any]:
        """The report for programs (``croupier verify --json``)."""
        return {
            "ok": self.ok,
            "checked": self.checked,
            "head": {"position": self.head_position, "hash": self.head_hash},
            "changed": self.changed,
            "removed": self.removed,
            "inserted": self.inserted,
            "unsigned": self.unsigned,
            "notes": list(self.notes),
            "problems": [
                {
                    "table": p.table,
                    "kind": p.kind,
                    "position": p.position,
                    "row": p.row,
                    "detail": p.detail,
                }
                for p in self.problems
            ],
        }

    def raise_if_broken(self) -> None:
        """Raise ``LedgerTampered`` unless ``ok``."""
        if not self.ok:
            from croupier.ledger import LedgerTampered

            raise LedgerTampered(self)


@dataclass
class ChainVerifier:
    """Incremental walk over rows in position order; ``feed`` each row, then ``finish``.

    Positions must run 1, 2, 3, ... and every row must link to its predecessor's hash and
    hash to its own stored value. Each break is attributed to one row:

    * a missing position is *removed*;
    * a row whose content no longer gives its stored hash is *changed*;
    * a row whose link to the predecessor is broken although its successor links to it
      means the predecessor was rewritten and re-hashed: the predecessor is *changed*;
    * a row that neither links to its predecessor nor is linked to by its successor
      (or sits below position 1) is *inserted*.

    A rewritten or forged newest row is indistinguishable from a legitimate append, and so
    is a chain cut short. An ``anchor`` (a position and hash recorded outside the database,
    e.g. the head an earlier verification printed) covers both: the row at that position
    must still exist and still carry that hash. ``signed`` heads (position: hash, each
    with a valid signature) are anchors too, and with them every row must sit at or below
    the last one: a row above it is *unsigned*.
    """

    anchor: tuple[int, str] | None = None
    signed: dict[int, str] | None = None
    checked: int = 0
    _prev: ChainRow | None = None
    _pending: ChainRow | None = None
    _flagged: set[int] = field(default_factory=set)
    _problems: list[Problem] = field(default_factory=list)

    def feed(self, row: ChainRow) -> None:
        if self._pending is not None:
            self._judge(self._pending, row)
        self._pending = row

    def finish(self, more: Sequence[Problem] = (), notes: Sequence[str] = ()) -> VerifyReport:
        """The report; ``more`` are findings of the same walk in other tables, ``notes``
        information."""
        if self._pending is not None:
            self._judge(self._pending, None)
            self._pending = None
        head = self._prev
        last = head.position if head else 0
        if self.anchor is not None and last < self.anchor[0]:
            self._run("removed", last + 1, self.anchor[0], "gone, though the anchor is here")
        if self.signed is not None:
            top = max(self.signed, default=0)
            if last < top:
                self._run("removed", last + 1, top, f"gone, though a signed head is at {top}")
            self._run("unsigned", top + 1, last, f"above the last signed head ({top})")
        return VerifyReport(
            checked=self.checked,
            head_position=head.position if head else 0,
            head_hash=head.hash if head else GENESIS_HASH,
            problems=(*self._problems, *more),
            notes=tuple(notes),
        )

    def _run(self, kind: ProblemKind, first: int, last: int, detail: str) -> None:
        """Flag positions ``first..last``: one by one, then the rest of a long run at once."""
        for position in range(first, min(last, first + LISTED_RUN - 1) + 1):
            self._flag(kind, position, detail)
        if last >= first + LISTED_RUN:
            rest = f"{detail}; and every position up to {last}"
            self._flag(kind, first + LISTED_RUN, rest)

    def _flag(self, kind: ProblemKind, position: int, detail: str) -> None:
        if position not in self._flagged:
            self._flagged.add(position)
            self._problems.append(Problem(kind, position, detail))

    def _judge(self, row: ChainRow, successor: ChainRow | None) -> None:
        self.checked += 1
        anchor = self.anchor
        if anchor is not None and row.position == anchor[0] and row.hash != anchor[1]:
            self._flag("changed", row.position, "hash differs from the recorded anchor")
        signed = self.signed.get(row.position) if self.signed else None
        if signed is not None and row.hash != signed:
            below = max((p for p in self.signed or {} if p < row.position), default=0)
            detail = f"differs from the signed head: a row in {below + 1}..{row.position} changed"
            self._flag("changed", row.position, detail)
        prev = self._prev
        expected_position = prev.position + 1 if prev else 1
        if row.position < expected_position:
            self._flag("inserted", row.position, "position outside the chain")
            return
        gap = row.position > expected_position
        for missing in range(expected_position, row.position):
            self._flag("removed", missing, "position missing")
        linked = row.prev_hash == (prev.hash if prev else GENESIS_HASH)
        if row.computed_hash() != row.hash:
            if linked or gap or successor is not None:
                self._flag("changed", row.position, "content does not match its hash")
            else:
                self._flag("inserted", row.position, "forged row at the head")
        elif not linked and not gap:
            if prev is not None and successor is not None and successor.prev_hash == row.hash:
                self._flag("changed", prev.position, "row rewritten and re-hashed")
            else:
                self._flag("inserted", row.position, "row does not link into the chain")
        self._prev = row
