"""Read models projected from the ledger: the port, what a projection declares, the guarantees.

What a projector promises
-------------------------
Following by position
    A projector reads the ledger with ``read_all(after_position, limit)`` from each
    projection's checkpoint. The ledger never lets a reader skip an event that commits late
    (see :mod:`croupier.ledger`), so a read model is never ahead of what is committed and
    never has a hole behind its checkpoint.

Checkpoint in the same transaction
    A batch's read-model rows and the new checkpoint of every projection it applied to are
    written in ONE transaction. A crash (SIGKILL included) leaves each read model exactly
    at its checkpoint: the next run resumes there, and nothing is counted twice or lost.
    Each commit also checks that the checkpoints are still where the batch started: of two
    projectors running at once, only one applies a batch; the other's commit is refused,
    and it reads the checkpoints again and goes on from there.

Any round size
    No transaction writes more than :data:`MAX_ROWS_PER_COMMIT` rows, and no fact the
    ledger accepted is too large to project. A batch whose rows would be more is applied
    fact by fact; a single fact whose rows are more (the settlement of a round of a hundred
    thousand bets) is written in pieces of at most that many rows, each piece in its own
    transaction with the checkpoint's ``part``: how many of that fact's rows are written.
    A projection's rows for a fact come out in the same order every time (``apply`` is
    pure), so a projector that resumes mid-fact applies it again and writes the rows after
    ``part``. Readers may see such a fact's rows appear piece by piece. A fold stops as
    soon as its rows pass the limit (``apply`` may be abandoned part-way and run again),
    so a fact written in pieces is folded whole once, not once per attempt.

Rebuildable
    Read models are derived data, outside the hash chain: ``rebuild`` empties a
    projection's tables and sets its checkpoint to 0, and following the ledger again gives
    the same rows. A projection whose ``version`` changed is dropped and rebuilt.

Same database as the ledger
    Read-model tables live beside the ledger (PostgreSQL or SQLite). On PostgreSQL the
    role ``croupier_projector`` may read the ledger and write read models, and may not
    write the ledger; ``croupier_reader`` may only read both.

Declaring a projection
----------------------
A projection names its tables (:class:`Table`), a ``version`` and a pure function from a
batch of recorded events (and what its ``gather`` read of earlier facts) to
:class:`Changes`: rows to insert and rows to upsert (on the primary key, adding the ``add``
columns to what is stored and replacing the others). The adapters turn that into SQL, so
one projection runs on both databases. Register a module in
:data:`croupier.projection.registry.PROJECTIONS` to have ``croupier project`` follow it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from croupier.ledger import Ledger, RecordedEvent

__all__ = [
    "MAX_ROWS_PER_COMMIT",
    "Changes",
    "CheckpointMoved",
    "Column",
    "Dialect",
    "Mark",
    "Oversized",
    "Projection",
    "ProjectionError",
    "ReadModelStore",
    "Row",
    "Session",
    "Step",
    "Table",
    "open_store",
]

Dialect = Literal["postgres", "sqlite"]
ColumnType = Literal["text", "int"]
Row = Mapping[str, Any]

#: At most this many rows are written in one commit (a limit on every transaction): a fact
#: whose rows are more is written in pieces.
MAX_ROWS_PER_COMMIT: Final = 50_000
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


class ProjectionError(Exception):
    """A projection or its store is misconfigured, or a batch broke an invariant."""


class CheckpointMoved(ProjectionError):
    """Another projector moved a checkpoint since this batch was read; nothing was written."""

    def __init__(self, name: str, expected: int, actual: int) -> None:
        super().__init__(
            f"projection {name!r} is at position {actual}, not {expected}: "
            "another projector is following the ledger"
        )
        self.name = name
        self.expected = expected
        self.actual = actual


def _check_name(name: str) -> str:
    if not name or not set(name) <= _NAME_CHARS or name[0].isdigit() or len(name) > 60:
        raise ProjectionError(f"{name!r} is not a valid table or column name (a-z, 0-9, _)")
    return name


@dataclass(frozen=True, slots=True)
class Column:
    """A read-model column: text or a 64-bit integer (money is integer minor units)."""

    name: str
    type: ColumnType
    nullable: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name)


@dataclass(frozen=True, slots=True)
class Table:
    """A read-model table: columns, primary key, and indexes (each a tuple of columns).

    ``inline_bytes`` (PostgreSQL): a row is compressed, and what is still too long moved
    out of line (TOAST), only once it is longer than this (its ``toast_tuple_target``; 0
    leaves the server's, about 2 kB). A table of documents that compress to a few kB keeps
    each in its row: no second table and index to write, nor to read a row back from.
    """

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    indexes: tuple[tuple[str, ...], ...] = ()
    inline_bytes: int = 0

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.inline_bytes and not 128 <= self.inline_bytes <= 8160:
            raise ProjectionError(f"table {self.name}: inline_bytes runs from 128 to 8160")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ProjectionError(f"table {self.name}: repeated column names")
        for cols in (self.key, *self.indexes):
            if not cols or not set(cols) <= set(names):
                raise ProjectionError(f"table {self.name}: key or index {cols} names no column")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


class Oversized(ProjectionError):
    """A fold gave more rows than its :class:`Changes` may hold; it was abandoned there."""


@dataclass
class Changes:
    """What one batch does to a projection's tables: inserts, then upserts, per table."""

    inserts: dict[str, list[Row]] = field(default_factory=dict)
    upserts: dict[str, list[tuple[Row, tuple[str, ...]]]] = field(default_factory=dict)
    #: Rows these changes may hold (0: any number); one more raises :class:`Oversized`.
    limit: int = 0
    _rows: int = field(default=0, repr=False, compare=False)

    def insert(self, table: str, row: Row) -> None:
        """A new row (its primary key must not exist yet)."""
        self.inserts.setdefault(table, []).append(row)
        self._counted()

    def upsert(self, table: str, row: Row, add: tuple[str, ...] = ()) -> None:
        """A row written on its key: ``add`` columns are summed into the stored row."""
        self.upserts.setdefault(table, []).append((row, add))
        self._counted()

    def _counted(self) -> None:
        self._rows += 1
        if self._rows > self.limit > 0:
            raise Oversized(f"more than {self.limit:,} rows")

    @property
    def size(self) -> int:
        return sum(map(len, self.inserts.values())) + sum(map(len, self.upserts.values()))

    def pieces(self, rows: int, skip: int = 0) -> Iterator[tuple[Changes, int]]:
        """These changes in order, ``rows`` at most per piece, leaving out the first ``skip``:
        each piece with how many rows are written once it is."""
        if rows < 1:
            raise ProjectionError(f"a piece holds at least one row, not {rows}")
        piece, done = Changes(), 0
        for name, inserted in self.inserts.items():
            for row in inserted:
                done += 1
                if done > skip:
                    piece.insert(name, row)
                    if piece.size == rows:
                        yield piece, done
                        piece = Changes()
        for name, upserted in self.upserts.items():
            for row, add in upserted:
                done += 1
                if done > skip:
                    piece.upsert(name, row, add)
                    if piece.size == rows:
                        yield piece, done
                        piece = Changes()
        if piece.size:
            yield piece, done


class Projection(ABC):
    """A read model derived from the ledger; subclasses are pure (no I/O in ``apply``)."""

    #: The checkpoint's name; unique among projections.
    name: str
    #: Bump when tables or the meaning of rows change: the read model is then rebuilt.
    version: int
    #: The tables this projection writes (and only these).
    tables: tuple[Table, ...]

    async def gather(self, events: Sequence[RecordedEvent], ledger: Ledger) -> None:  # noqa: B027
        """Read from ``ledger`` what ``apply`` needs of facts before ``events`` (default none).

        Only facts below ``events[0].position`` may be read: they are committed and the
        read model already follows them, so the projection is never ahead of the ledger.
        """

    @abstractmethod
    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        """Add to ``changes`` what ``events`` (in position order) do to the read model."""

    def committed(self, changes: Changes) -> None:  # noqa: B027 - a hook, empty by default
        """Called once the changes of the last ``apply`` are committed (e.g. for metrics)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """A checkpoint: every fact up to ``position`` is applied, and of the next fact the
    first ``part`` rows (0 unless that fact is being written in pieces)."""

    position: int
    part: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    """One projection's part of a commit: its checkpoint moves from ``after`` to ``upto``.

    A piece of one fact's rows moves the checkpoint's part from ``part_after`` to
    ``part_upto`` (``upto`` is then ``after``, or the fact's position once it is whole).
    """

    projection: Projection
    after: int
    upto: int
    changes: Changes
    part_after: int = 0
    part_upto: int = 0


class Session(ABC):
    """One database connection for queries over read models (temporary tables included).

    SQL uses ``?`` placeholders on both databases and portable SQL; temporary tables made
    in a session vanish with it, also when the process is killed.
    """

    dialect: Dialect

    @abstractmethod
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement."""

    @abstractmethod
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row."""

    @abstractmethod
    async def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        """Bulk-insert ``rows`` into ``table`` (PostgreSQL: COPY)."""

    async def copy_csv(
        self, table: str, columns: Sequence[str], source: AsyncIterable[bytes]
    ) -> int | None:
        """Load CSV text (a header line, then rows) into ``table``'s ``columns``: the rows
        loaded, or None when the database refuses the text or loads no CSV itself."""
        return None

    @abstractmethod
    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """All rows of a query (for small results)."""

    @abstractmethod
    def stream(
        self, sql: str, params: Sequence[Any] = (), page: int = 5000
    ) -> AsyncGenerator[list[tuple[Any, ...]], None]:
        """A query's rows page by page, never all in memory."""


class ReadModelStore(ABC):
    """The read-model port: checkpoints and rows, written together.

    Adapters: :mod:`croupier.projection.sqlite`, :mod:`croupier.projection.postgres`.
    """

    dialect: Dialect

    @abstractmethod
    async def setup(self, projections: Sequence[Projection]) -> list[str]:
        """Create missing tables; drop and recreate those whose version changed.

        Returns the names of projections (re)created, whose checkpoint is now 0.
        """

    async def checkpoints(self, projections: Sequence[Projection]) -> dict[str, int]:
        """The committed checkpoint of each projection (after ``setup``): the last fact
        wholly applied."""
        return {name: mark.position for name, mark in (await self.marks(projections)).items()}

    @abstractmethod
    async def marks(self, projections: Sequence[Projection]) -> dict[str, Mark]:
        """The committed checkpoint of each projection with its part (after ``setup``)."""

    @abstractmethod
    async def commit(self, steps: Sequence[Step]) -> None:
        """Write every step's changes and move its checkpoint, in one transaction.

        Raises :class:`CheckpointMoved` (nothing written) when a checkpoint is not at the
        step's ``after`` and ``part_after``.
        """

    @abstractmethod
    async def reset(self, projections: Sequence[Projection]) -> None:
        """Empty the projections' tables and set their checkpoints to 0, in one transaction."""

    @abstractmethod
    def session(self) -> AbstractAsyncContextManager[Session]:
        """A connection of its own for read-model queries."""


def open_store(ledger: Ledger) -> ReadModelStore:
    """The read-model store in the ledger's own database, through its connections."""
    from croupier.ledger.postgres import PostgresLedger
    from croupier.ledger.sqlite import SqliteLedger

    if isinstance(ledger, SqliteLedger):
        from croupier.projection.sqlite import SqliteStore

        return SqliteStore(ledger)
    if isinstance(ledger, PostgresLedger):
        from croupier.projection.postgres import PostgresStore

        return PostgresStore(ledger)
    raise ProjectionError(f"no read-model store for {type(ledger).__name__}")
