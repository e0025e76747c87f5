"""The ledger port: an append-only, hash-chained event store with a transactional outbox.

What the ledger promises
------------------------
Streams and positions
    Events live in streams named by the caller (e.g. ``"round:T1:R42"``). Each event has a
    stream version (1, 2, 3, ... per stream) and a global position (1, 2, 3, ... over the
    whole ledger, gap-free, in commit order).

Atomic batched append
    ``append`` writes the events of many streams plus outbox messages in ONE transaction:
    all of it commits or none of it does.

Optimistic concurrency
    Each ``StreamAppend`` names the version its stream must be at (0: the stream must not
    exist yet; ``None``: no check). A mismatch raises ``VersionConflict`` and rolls back
    the whole batch.

Idempotency
    Every event carries an idempotency key, unique over the ledger. Re-appending an event
    whose key is recorded with the same stream, type and data is a no-op that returns the
    stored record; the same key with other content raises ``IdempotencyConflict``.
    Combined with the version check: if ALL events of a ``StreamAppend`` are recorded,
    it is a replay and its expected version is not checked (a redelivered batch after a
    crash succeeds as a no-op). If a leading prefix is recorded, that prefix must sit at
    ``expected_version + 1 ...`` and the rest is appended as if the prefix had been
    written by this call. Recorded events after a new one in the same ``StreamAppend``
    raise ``IdempotencyConflict``. Outbox messages are idempotent on ``message_id`` the
    same way.

Readers never skip
    ``read_all(after_position, limit)`` returns events in position order. Appends are
    serialised (one writer at a time, positions assigned under that lock), so a position
    becomes visible only after every lower position is visible: a reader that checkpoints
    the last position it saw never skips an event that commits late.

Append-only in the database
    Triggers refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL) on every ledger table,
    for every role. On PostgreSQL the service role ``croupier_app`` has INSERT and SELECT
    only; migrations run as the owner.

Hash chain
    Each event stores ``prev_hash`` and ``hash = sha256(prev_hash + canonical row)``, the
    canonical row covering position, stream, version, type, data, key and recorded_at.
    ``verify()`` walks the whole chain and reports every changed, removed and inserted row
    by position. The newest rows can only be vouched for against a head (position, hash)
    kept outside the database: ``VerifyReport`` gives the head to keep, and
    ``verify(anchor=...)`` (``croupier verify --anchor POSITION:HASH``) checks a kept one.

Outbox
    Outbox messages are written in the same transaction as the events and are never
    updated: publishing inserts a marker row. ``pending_outbox`` lists unmarked messages
    in write order; ``mark_published`` is idempotent. A message the broker refuses for
    good is *set aside* (``set_aside``, another marker row, with the reason): it is no
    longer pending, so it never blocks the messages after it, and ``set_aside_messages``
    lists it until it is published after all (``croupier redrive --results``).

Relay lease
    ``hold_lease(name, holder, seconds)`` takes or renews a named lease that expires
    ``seconds`` after its last renewal, so one of many instances relays the outbox and
    another takes over within ``seconds`` of the holder's last sign of life.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from croupier.ledger.chain import (
    ChainRow,
    ChainVerifier,
    Problem,
    VerifyReport,
    canonical_json,
)

__all__ = [
    "IdempotencyConflict",
    "Ledger",
    "LedgerError",
    "LedgerTampered",
    "NewEvent",
    "OutboxMessage",
    "PendingMessage",
    "Problem",
    "RecordedEvent",
    "StreamAppend",
    "VerifyReport",
    "VersionConflict",
    "open_ledger",
]


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append; ``key`` is its idempotency key (e.g. the feed ``event_id``).

    ``encoded`` is ``canonical_json(data)`` when the caller already has it (say, spliced
    from parts it encoded anyway); the ledger then stores and hashes it as given.
    """

    type: str
    data: Mapping[str, Any]
    key: str
    encoded: str | None = None

    @property
    def text(self) -> str:
        """The JSON text the ledger stores for ``data``."""
        return canonical_json(self.data) if self.encoded is None else self.encoded


@dataclass(frozen=True, slots=True)
class StreamAppend:
    """Events for one stream, appended only if the stream is at ``expected_version``."""

    stream: str
    expected_version: int | None
    events: Sequence[NewEvent]


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """An event as stored in the ledger."""

    position: int
    stream: str
    version: int
    type: str
    data: Mapping[str, Any]
    key: str
    recorded_at: datetime
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A message to publish once the transaction that writes it has committed.

    ``event_key`` names the event of the same batch the message reports; its position
    becomes the pending message's ``position`` (the batch head when there is none).
    """

    message_id: str
    exchange: str
    routing_key: str
    body: Mapping[str, Any]
    event_key: str | None = None


@dataclass(frozen=True, slots=True)
class PendingMessage:
    """An unpublished outbox message; ``position`` is that of the event it reports."""

    message_id: str
    exchange: str
    routing_key: str
    body: Mapping[str, Any]
    position: int


class LedgerError(Exception):
    """Base class of ledger errors."""


class VersionConflict(LedgerError):
    """A stream was not at the version the caller expected; nothing was written."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(f"stream {stream!r} is at version {actual}, expected {expected}")
        self.stream = stream
        self.expected = expected
        self.actual = actual


class IdempotencyConflict(LedgerError):
    """A key (event key or outbox message id) is recorded with other content."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"idempotency key {key!r}: {reason}")
        self.key = key


class LedgerTampered(LedgerError):
    """The hash chain is broken (raised by ``VerifyReport.raise_if_broken``)."""

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(report.summary())
        self.report = report


class Ledger(ABC):
    """The ledger port. Adapters: ``croupier.ledger.sqlite``, ``croupier.ledger.postgres``."""

    @abstractmethod
    async def migrate(self) -> list[str]:
        """Apply pending schema migrations; return the names applied (idempotent)."""

    @abstractmethod
    async def append(
        self, appends: Sequence[StreamAppend], outbox: Sequence[OutboxMessage] = ()
    ) -> list[RecordedEvent]:
        """Append all events and outbox messages in one transaction.

        Returns one record per input event, in input order (stored records for replays).
        Raises ``VersionConflict`` or ``IdempotencyConflict``; then nothing is written.
        """

    @abstractmethod
    async def read_streams(self, streams: Sequence[str]) -> dict[str, list[RecordedEvent]]:
        """The events of each stream in version order (an empty list for a new stream)."""

    async def read_stream(self, stream: str) -> list[RecordedEvent]:
        """All events of ``stream`` in version order."""
        return (await self.read_streams([stream]))[stream]

    @abstractmethod
    async def read_all(self, after_position: int = 0, limit: int = 1000) -> list[RecordedEvent]:
        """Up to ``limit`` events with position > ``after_position``, in position order."""

    @abstractmethod
    async def stream_version(self, stream: str) -> int:
        """The stream's current version (0 when it has no events)."""

    @abstractmethod
    async def last_position(self) -> int:
        """The highest committed position (0 when empty)."""

    @abstractmethod
    async def pending_outbox(self, limit: int = 100) -> list[PendingMessage]:
        """Up to ``limit`` unpublished messages, oldest first."""

    @abstractmethod
    async def mark_published(self, message_ids: Iterable[str]) -> None:
        """Record messages as published (idempotent; unknown ids are ignored)."""

    @abstractmethod
    async def open_streams(self, prefix: str, closing: Sequence[str], limit: int) -> list[str]:
        """Streams named ``prefix...`` with no event of a ``closing`` type, oldest first.

        Reads every event of those streams' names (a scan): for start-up and reports.
        """

    @abstractmethod
    async def set_aside(self, reasons: Mapping[str, str]) -> None:
        """Set messages aside (message_id -> why): no longer pending (idempotent)."""

    @abstractmethod
    async def set_aside_messages(self, limit: int = 100) -> list[tuple[PendingMessage, str]]:
        """Up to ``limit`` set-aside messages not published since, oldest first, with why."""

    @abstractmethod
    async def hold_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Take or renew lease ``name`` for ``seconds``; False while another holds it."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""

    @abstractmethod
    async def _chain_page(self, after_position: int, limit: int) -> list[ChainRow]:
        """Raw rows for verification, ``position > after_position`` in position order."""

    async def verify(
        self,
        page_size: int = 10_000,
        anchor: tuple[int, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> VerifyReport:
        """Walk the whole hash chain and report every changed, removed or inserted row.

        ``anchor``: a (position, hash) kept outside the database, e.g. an earlier report's
        head; the chain must still hold it, which also catches rows cut from the end.
        ``progress`` is called with the number of rows of each page walked.
        """
        verifier = ChainVerifier(anchor=anchor)
        after = -(2**63)  # rows forged at positions <= 0 must be seen too
        while page := await self._chain_page(after, page_size):
            for row in page:
                verifier.feed(row)
            after = page[-1].position
            if progress is not None:
                progress(len(page))
        return verifier.finish()

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def open_ledger(url: str) -> Ledger:
    """Open the adapter ``url`` names (no I/O until first use).

    ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``,
    ``postgresql://user@host:port/db`` (or ``postgres://``).
    """
    if url.startswith("sqlite:///"):
        from croupier.ledger.sqlite import SqliteLedger

        return SqliteLedger(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        from croupier.ledger.postgres import PostgresLedger

        return PostgresLedger(url)
    raise ValueError(f"unsupported ledger url {url!r}: use sqlite:///... or postgresql://...")
