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
    ``schema_migrations`` included, for every role. On PostgreSQL the service runs as a
    login role whose only rights come from ``croupier_app``: INSERT and SELECT. Migrations
    are the owner's step (``croupier migrate``); the service only checks the schema
    version (``check_schema`` raises ``SchemaBehind``) and never migrates.

Hash chain
    Each event stores ``prev_hash`` and ``hash = sha256(prev_hash + canonical row)``, the
    canonical row covering position, stream, version, type, data, key and recorded_at.
    ``verify()`` walks the whole chain and reports every changed, removed and inserted row
    by position. An ``anchor`` (position, hash) kept outside the database
    (``croupier verify --anchor POSITION:HASH``) must still be in the chain.

Signed heads
    Opened with a signing key (Ed25519, ``croupier.ledger.signing``), the ledger signs each
    committed batch's last (position, hash) into ``ledger_heads`` in the same transaction,
    and refuses (``HeadNotSigned``) to append after a head its key did not sign: rows
    someone else wrote are never signed over. ``verify(public_key=...)`` (the public key
    only) checks every head row's signature, that the chain still matches every signed
    head (a rewritten, re-hashed row shows), that it reaches the last one (a tail cut or
    truncation shows), and reports rows above it as *unsigned*. Without an anchor kept
    elsewhere, deleting rows *and* the signed heads above them consistently is not seen.

Outbox
    Outbox messages are written in the same transaction as the events and are never
    updated; each names the event it reports by position and hash. Publishing inserts a
    mark (the message ids, signed when the ledger has a key) and a marker row per message.
    ``pending_outbox`` lists messages without a marker that counts (with a key: one whose
    mark this key signed and lists the message), in write order, leaving out those
    ``set_aside``; ``mark_published`` is idempotent. Each signed head claims, inside its
    signature, how far the outbox was published (``published``: every row up to that
    outbox seq had a marker or a set-aside row; the highest claim seen is carried
    forward); ``published_claim`` gives it, and a pending message at or below it lost its
    marks (the relay stops on it; ``verify`` reports it *missing*). ``vouched(positions)``
    gives the events the chain vouches for (linked up to a head this key signed), which the relay
    re-derives results from; ``verify(outbox_rule=...)`` reports every outbox row that is
    not exactly what its event calls for, every called-for message that is missing, and
    (with a public key) every mark and marker the key did not sign.
    A message the broker (or the relay's rule) refuses for good is *set aside*
    (``set_aside``, with the reason, recorded and, with a key, signed over the message id
    and reason): this process no longer lists it, so it never blocks the messages after it,
    and ``set_aside_messages`` lists it, if this key signed the row, until it is published
    after all (``croupier redrive --results``). A set-aside row never suppresses a message
    for another process (it tries the message once more); ``verify(public_key=...)``
    reports every set-aside row the key did not sign and lists the others as notes.

Relay lease
    ``hold_lease(name, holder, seconds)`` takes or renews a named lease that expires
    ``seconds`` (at most ``LEASE_LIMIT``) after its last renewal, so one of many instances
    relays the outbox and another takes over within ``seconds`` of the holder's last sign
    of life. The lease is not ledger data and protects nothing: whoever may write it (the
    service role) can stall relaying. A lease held beyond ``LEASE_LIMIT`` was written by no
    Croupier instance: ``leases()`` shows it, the relay reports it, and ``verify`` names it.

Partitions and fencing
    A ledger has a fixed number of partitions, stored at creation (``migrate(partitions=P)``,
    never changed: ``PartitionsFixed``); ``partition_leases()`` is the ownership port
    (``croupier.ledger.partitions``, where the leases' promises are). An append given a
    ``fence`` (an owner and the epoch of each partition it writes for) checks, inside its
    transaction and before writing, that the owner holds each of those partitions at that
    epoch, unexpired, and keeps the lease rows from changing until it commits; otherwise it
    raises ``Fenced`` (result code ``fenced``) and writes nothing. An append without a
    fence is not checked (the single-instance service).

Faults
    Every error the port raises is a ``LedgerError``, except what an adapter's driver
    raises for a permanent fault (a refused privilege, a broken file), which passes through
    as it is. A transient fault (the database down, restarting, refusing connections, a
    lock or a connection not granted in time) is ``LedgerUnavailable``, its ``__cause__``
    the driver's error: nothing was written and the same call may be retried as it is.
    Callers tell transient from permanent by these types alone, never by a driver's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, ParamSpec, TypeVar

from contract.canonical import read_json
from croupier.config import LEASE_LIMIT
from croupier.ledger.audit import Audit, LetterRule, OutboxRule
from croupier.ledger.chain import (
    ChainRow,
    ChainVerifier,
    Problem,
    VerifyReport,
)
from croupier.ledger.keyring import KEYS_STREAM, Keyring, follow, handover
from croupier.ledger.migrate import Dialect, migrations
from croupier.ledger.outbox import OutboxRow, PublishedFloor, SetAsideRow
from croupier.ledger.signing import LedgerKey, LedgerPublicKey
from croupier.ledger.trust import HEADS_SCANNED, HeadRow, MarkRow, Trust, vouch
from croupier.settlement.facts import Fact
from holdem.values import quick

if TYPE_CHECKING:
    from croupier.ledger.batch import Plan
    from croupier.ledger.partitions import PartitionLeases

#: Positions one ``vouched`` read covers at most (more are read in further spans).
VOUCH_SPAN: Final = 20_000
#: Head rows one ``vouched`` span examines at most (a batch signs one head).
VOUCH_HEADS: Final = 5_000

__all__ = [
    "Fence",
    "Fenced",
    "HeadNotSigned",
    "IdempotencyConflict",
    "Ledger",
    "LedgerError",
    "LedgerTampered",
    "LedgerUnavailable",
    "OutboxMessage",
    "PartitionsFixed",
    "PendingMessage",
    "Problem",
    "RecordedEvent",
    "SchemaBehind",
    "StreamAppend",
    "VerifyReport",
    "VersionConflict",
    "open_ledger",
]


@dataclass(frozen=True, slots=True)
class StreamAppend:
    """Events for one stream, appended only if the stream is at ``expected_version``."""

    stream: str
    expected_version: int | None
    events: Sequence[Fact]


class RecordedEvent(NamedTuple):
    """An event as stored in the ledger (immutable; a named tuple: one per row appended,
    built at a third of a frozen dataclass's cost)."""

    position: int
    stream: str
    version: int
    type: str
    data: Mapping[str, Any]
    key: str
    recorded_at: datetime
    prev_hash: str
    hash: str


@quick
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
    """An unpublished outbox message; ``position`` and ``event_hash`` name the event it reports."""

    message_id: str
    exchange: str
    routing_key: str
    body: Mapping[str, Any]
    position: int
    event_hash: str = ""
    #: Its place in the outbox (write order), and whether any set-aside row names it.
    seq: int = 0
    aside: bool = False
    #: The body as stored: its canonical JSON text when the ledger wrote it.
    text: str = ""


#: ``pending_outbox``'s bound (on positions and on ``seq``) when none is given.
THROUGH_ALL: Final = 2**62

#: Open streams ``open_streams`` remembers per scope at most (beyond: it searches from the floor).
OPEN_KNOWN: Final = 100_000


@dataclass(slots=True)
class KnownOpen:
    """The open streams of a scope as of ``head`` (stream -> first position), and the
    floor last read or written."""

    head: int
    floor: int
    began: dict[str, int]

    def apply(
        self, changes: Sequence[tuple[str, int, int, str]], closing: Sequence[str], head: int
    ) -> None:
        """Move on to ``head`` with the openings and closings appended since."""
        for stream, position, version, type_ in changes:
            if version == 1:
                self.began[stream] = position
            if type_ in closing:
                self.began.pop(stream, None)
        self.head = head


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


class SchemaBehind(LedgerError):
    """The database's schema is older than this build's (or missing); nothing was changed."""

    def __init__(self, applied: int, needed: int) -> None:
        super().__init__(
            f"the ledger schema is at version {applied}, this build needs {needed}: "
            "run `croupier migrate` as the database owner"
        )
        self.applied = applied
        self.needed = needed


class HeadNotSigned(LedgerError):
    """This key may not append after the chain's head: no key of its keyring signed it
    (someone else appended, or the keyring lacks a predecessor), or the head hands over to
    another key, or the key may not sign the next position; nothing written. ``why`` says
    which."""

    def __init__(self, position: int, signed: int | None, why: str = "") -> None:
        last = "" if signed is None else f"; the last signed head is at {signed}"
        super().__init__(
            f"the ledger's head at position {position} is not signed so that this service's "
            f"key may append after it ({why or 'no key of its keyring signed it'}{last}): "
            "run `croupier verify --keyring FILE`; see docs/keys.md"
        )
        self.position = position
        self.signed = signed
        self.why = why


class LedgerUnavailable(LedgerError):
    """A transient fault: the database is out of reach or gave up for now; nothing was
    written and the same call may be retried as it is. ``__cause__`` is the driver's error."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"the ledger is unavailable: {type(cause).__name__}: {cause}")


@dataclass(frozen=True, slots=True)
class Fence:
    """What an append must hold: ``owner`` holds each partition at its epoch."""

    owner: str
    epochs: Mapping[int, int] = field(default_factory=dict)


class Fenced(LedgerError):
    """The append's owner does not hold these partitions at the epochs it named (taken by
    another instance, released, expired, or never held); nothing was written. Retrying does
    not help: the deliveries belong to the partitions' owner now."""

    #: The result an append refused this way reports (logs, metrics).
    code: Final = "fenced"

    def __init__(self, owner: str, partitions: Iterable[int]) -> None:
        self.owner = owner
        self.partitions = tuple(sorted(partitions))
        super().__init__(
            f"fenced: instance {owner!r} does not hold partition"
            f"{'s' if len(self.partitions) != 1 else ''} "
            f"{', '.join(map(str, self.partitions))} at the epoch it named; nothing written"
        )


class PartitionsFixed(LedgerError):
    """The ledger's partition count was fixed at creation and differs from the one asked."""

    def __init__(self, stored: int, asked: int) -> None:
        super().__init__(
            f"the ledger has {stored} partitions, fixed when it was created; {asked} asked"
        )
        self.stored = stored
        self.asked = asked


P = ParamSpec("P")
R = TypeVar("R")


def unavailable_on(
    *faults: type[BaseException],
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Decorate an adapter's method: its driver's transient ``faults`` reach the caller as
    :class:`LedgerUnavailable` (the driver's error as its cause)."""

    def decorate(
        method: Callable[P, Coroutine[Any, Any, R]],
    ) -> Callable[P, Coroutine[Any, Any, R]]:
        @wraps(method)
        async def translated(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return await method(*args, **kwargs)
            except faults as error:
                raise LedgerUnavailable(error) from error

        return translated

    return decorate


class LedgerTampered(LedgerError):
    """The hash chain is broken (raised by ``VerifyReport.raise_if_broken``)."""

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(report.summary())
        self.report = report


class Ledger(ABC):
    """The ledger port. Adapters: ``croupier.ledger.sqlite``, ``croupier.ledger.postgres``.

    An adapter opened with a signing key signs each committed batch's head, signs its
    publish marks, refuses to append after rows its key did not sign, and counts only
    markers its key signed; without one it does none of this.
    """

    dialect: Dialect
    trust: Trust
    #: Seconds this process has held the append lock, from taking it to the end of its
    #: transaction (a running total; the lock makes the ledger one writer at a time).
    append_lock_held: float = 0.0

    @abstractmethod
    async def migrate(self, partitions: int | None = None) -> list[str]:
        """Apply pending schema migrations; return the names applied (idempotent). The first
        migration that brings partitions fixes their count: ``partitions``, by default
        ``DEFAULT_PARTITIONS``; once fixed, another count raises ``PartitionsFixed`` (and
        nothing is applied)."""

    @abstractmethod
    async def schema_version(self) -> int:
        """The highest migration version applied (0 when none or no schema at all)."""

    async def check_schema(self) -> int:
        """The schema version; ``SchemaBehind`` unless every migration of this build is applied."""
        needed = migrations(self.dialect)[-1].version
        applied = await self.schema_version()
        if applied < needed:
            raise SchemaBehind(applied, needed)
        return applied

    async def append(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage] = (),
        *,
        fence: Fence | None = None,
    ) -> list[RecordedEvent]:
        """Append all events and outbox messages in one transaction.

        Returns one record per input event, in input order (stored records for replays).
        Raises ``VersionConflict`` or ``IdempotencyConflict``, or ``HeadNotSigned`` when
        signing and the chain's head is not one this key signed, or ``Fenced`` when
        ``fence`` names a partition its owner does not hold at that epoch; then nothing is
        written.
        """
        if not appends and not outbox:
            return []
        return (await self._append(appends, outbox, fence)).results

    async def append_new(self, appends: Sequence[StreamAppend]) -> list[RecordedEvent]:
        """Append as :meth:`append` does; only the events this call wrote, in input order.

        Which keys were new is decided inside the append transaction, so of any number of
        processes appending the same event, exactly one gets it back: what to count once.
        """
        records, written = await self.append_with_new_keys(appends)
        return [record for record in records if record.key in written]

    async def append_with_new_keys(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage] = (),
        *,
        fence: Fence | None = None,
    ) -> tuple[list[RecordedEvent], frozenset[str]]:
        """What :meth:`append` returns, and the keys of the events this call wrote (decided
        inside the append transaction, as :meth:`append_new` has it)."""
        if not appends and not outbox:
            return [], frozenset()
        plan = await self._append(appends, outbox, fence)
        return plan.results, frozenset(row.key for row in plan.rows)

    @abstractmethod
    async def _append(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage],
        fence: Fence | None = None,
    ) -> Plan:
        """Plan and write one append in one transaction (``batch.plan_append``), first
        checking ``fence`` in it when given (``Fenced``)."""

    @abstractmethod
    def partition_leases(self) -> PartitionLeases:
        """The partition ownership port on this ledger's database."""

    @abstractmethod
    async def read_streams(self, streams: Sequence[str]) -> dict[str, list[RecordedEvent]]:
        """The events of each stream in version order (an empty list for a new stream)."""

    async def read_stream(self, stream: str) -> list[RecordedEvent]:
        """All events of ``stream`` in version order."""
        return (await self.read_streams([stream]))[stream]

    @abstractmethod
    async def read_last(self, stream: str) -> RecordedEvent | None:
        """The last event of ``stream`` (None for a new stream): one index probe, however
        long the stream (a jackpot meter moves every round of every table on its pool)."""

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
    async def last_recorded(self, prefix: str) -> dict[str, datetime]:
        """For the streams ``<prefix><name>`` and ``<prefix><name>:...``, when the latest
        event of each ``name`` was recorded. Reads every event of those streams."""

    @abstractmethod
    async def first_recorded(self, streams: Sequence[str]) -> dict[str, datetime]:
        """When the first event of each of ``streams`` was recorded (a stream with none is
        left out): one index probe a stream, whatever its length."""

    @abstractmethod
    async def writable(self) -> None:
        """Return once this process could append now: the append lock taken and released.

        Raises ``LedgerUnavailable`` when the lock is not granted within the lock timeout
        (another process holds it) or the database cannot be reached."""

    async def end_silent_holders(self) -> int:
        """End another session that holds the append lock although its client fell silent
        in the middle of an exchange, where no server limit would; how many were ended.
        Only a database server has such sessions: the default ends none."""
        return 0

    async def pending_outbox(
        self,
        limit: int = 100,
        per_event: int | None = None,
        skip: Collection[str] = frozenset(),
        through: int | None = None,
    ) -> list[PendingMessage]:
        """Up to ``limit`` unpublished messages, oldest first (set-aside ones left out).

        A message counts as published when it has a marker (with a key: a marker whose
        mark this key signed and which lists it). With ``per_event``, events take turns:
        at most that many messages of one event, the oldest of it, then the listing goes
        on with the next event's, so a large settlement does not hold back later ones;
        when no later event has a message waiting, the event goes on past its turn.

        ``skip``: the messages of the page this listed last, in flight (the broker's
        confirms not in yet): left out, and not done either; the published floor stays
        below them. When that page took every pending row from its start to its end (no
        turn, no seek), the listing starts after it: the rows up to its end are done or in
        it, so they are not read again.

        ``through``: only messages of events at or below this position (outbox rows get
        their ``seq`` in position order, so this is a prefix of the outbox).
        """
        pending: list[tuple[PendingMessage, int]] = []
        floor = self._floor
        after, contiguous = floor.seq, True
        taken: Counter[int] = Counter()
        waiting: set[int] = set()  # events with a pending message met in this listing
        prefix: int | None = None  # messages listed before the first turn taken
        sought = False  # whether the listing skipped rows it did not read
        fetch = limit + len(skip)
        if skip and floor.through is not None and floor.through[0] > after:
            after, contiguous = floor.through[0], False
            waiting.update(floor.through[1])  # their events have messages in flight
            fetch = limit
        # The position bound as a seq bound: each read is then a range of the outbox's
        # primary key, however many rows lie beyond it.
        through = THROUGH_ALL if through is None else through
        last = THROUGH_ALL if through == THROUGH_ALL else await self._outbox_seq_through(through)
        rows = await self._outbox_after(after, fetch, last)
        while rows and len(pending) < limit:
            await self._check_marks(rows)
            seek: list[OutboxRow] | None = None
            for row in rows:
                position = row.position
                resume = floor.resume.get(position, 0)
                if row.seq < resume and not contiguous:
                    seek = await self._outbox_after(resume - 1, limit, last)  # skip its done part
                    sought = True
                    break
                done = self._done(row)
                if done and contiguous:
                    floor.seq = row.seq
                elif done:
                    if position not in waiting:
                        floor.resume[position] = row.seq + 1
                elif row.message_id in skip:
                    contiguous = False
                    waiting.add(position)
                else:
                    contiguous = False
                    waiting.add(position)
                    pending.append((_pending(row), row.seq))
                    taken[position] += 1
                    if len(pending) == limit:
                        break
                    if per_event is not None and taken[position] >= per_event:
                        later = await self._outbox_past(position, limit, through)
                        if await self._none_pending(later, limit, skip):
                            per_event = None  # no other event waits: this one goes on
                            continue
                        prefix = len(pending) if prefix is None else prefix
                        seek = later  # the next event's turn
                        break
            else:
                seek = await self._outbox_after(rows[-1].seq, limit, last)
            if seek is None:
                break
            rows = seek
        page = [(m.message_id, seq) for m, seq in pending[:prefix]]
        whole = prefix is None and not sought
        positions = {m.position for m, _ in pending} if whole else set()
        floor.listed(page, in_flight=bool(skip), whole=whole, positions=positions)
        return [m for m, _ in pending]

    async def pending_since_claim(
        self, through: int, limit: int, after: int | None = None
    ) -> tuple[list[PendingMessage], int | None]:
        """Unpublished messages of events at or below position ``through``, in outbox order,
        read ``limit`` rows at a time past outbox ``seq`` ``after`` (None: the published
        claim, :meth:`published_claim`, below which every row was published); and the
        ``after`` of the next page (None: no row is left to read). The published floor of
        :meth:`pending_outbox` is neither read nor moved: this is a listing of its own, for
        the new owner of a partition whose owner's lease lapsed (its leftovers)."""
        last = await self._outbox_seq_through(through)
        start = await self.published_claim() if after is None else after
        rows = await self._outbox_after(start, limit, last) if start < last else []
        await self._check_marks(rows)
        pending = [_pending(row) for row in rows if not self._done(row)]
        following = rows[-1].seq if rows and rows[-1].seq < last else None
        return pending, following

    async def _none_pending(
        self, rows: Sequence[OutboxRow], limit: int, skip: Collection[str] = frozenset()
    ) -> bool:
        """Whether ``rows``, every outbox row past an event (fewer than ``limit``: all of
        them), hold no message waiting its turn (those in ``skip`` are in flight)."""
        if len(rows) >= limit:
            return False
        await self._check_marks(rows)
        return all(row.message_id in skip or self._done(row) for row in rows)

    def _done(self, row: OutboxRow) -> bool:
        """Whether an outbox row (its marks checked) needs no publishing: published, or
        set aside (by this process; or, on an unsigned ledger, by anyone: taken as is)."""
        return (
            row.message_id in self._floor.aside
            or self.trust.published(row.message_id, row.marks, row.position)
            or (row.aside and self.trust.keyring is None)
        )

    async def _check_marks(self, rows: Sequence[OutboxRow]) -> None:
        """Check the marks of these rows' markers not checked yet (with a key)."""
        unknown = self.trust.unknown_marks(m for row in rows for m in row.marks)
        if unknown and self.trust.keyring is not None:
            self.trust.check_marks(await self._marks(unknown))

    @abstractmethod
    async def mark_published(self, message_ids: Iterable[str], *, written: bool = False) -> None:
        """Record messages as published (idempotent; unknown ids are ignored). ``written``:
        the caller's own committed transaction wrote them all (they need not be looked up)."""

    async def vouched(self, positions: Iterable[int]) -> dict[int, ChainRow]:
        """The rows at ``positions`` that the chain vouches for, by position.

        With a key: rows whose content gives their hash and which link, row by row, up
        to a head a key of its keyring signed, outside the part a revoked key signed
        (``Keyring.revoked_at``). Without: rows whose content gives their
        hash and whose successor links to them. Rows vouched for before (remembered by
        hash, the newest ``trust.VOUCHED_LIMIT``) anchor the walk as a signed head does,
        so paging through one batch's positions walks that batch once, not once per page.
        """
        wanted = sorted({p for p in positions if p > 0})
        found: dict[int, ChainRow] = {}
        while wanted:
            group = [p for p in wanted if p <= wanted[0] + VOUCH_SPAN]
            wanted = wanted[len(group) :]
            low, high = group[0], group[-1]
            top_hash: str | None = None
            # Rows vouched for before (the chain is append-only) anchor the walk like
            # signed heads: a page of a batch already walked is not walked again.
            signed = self.trust.vouched_between(low, high)
            if high in signed:
                top_hash = signed[high]
            elif self.trust.keyring is not None:
                candidates = await self._heads_from(low, VOUCH_HEADS)
                heads = [h for h in candidates if self.trust.trusts_head(h)]
                if not heads:
                    continue  # nothing signed at or above: nothing here is vouched for
                # The first signed head at or above the group's last position; when there
                # is none, the last signed one (the positions above it are not vouched for).
                top = next((h for h in heads if h.position >= high), heads[-1])
                high, top_hash = top.position, top.hash
                signed |= {h.position: h.hash for h in heads if h.position <= high}
            rows = await self._chain_range(low, high + (0 if top_hash else 1))
            chain = vouch([r for r in rows if r.position <= high], top_hash, signed)
            if top_hash is None and rows and rows[-1].position > high:
                chain = vouch(rows, None, signed)  # the successor's link is checked too
            self.trust.remember_vouched(chain.values())
            found.update((p, chain[p]) for p in group if p in chain)
        keyring = self.trust.keyring
        if keyring is not None and any(e.revoked_from for e in keyring.entries.values()):
            found = {p: row for p, row in found.items() if not keyring.revoked_at(p)}
        return found

    async def open_streams(self, prefix: str, closing: Sequence[str], limit: int) -> list[str]:
        """Streams named ``prefix...`` with no event of a ``closing`` type, oldest first.

        Bounded by the *open floor*: the first search of this ledger object reads only the
        streams whose first event is at or above the floor of (``prefix``, ``closing``)
        (every stream that began below it was closed when the floor was written, and closed
        streams stay closed); it remembers what it found (up to ``OPEN_KNOWN`` streams),
        and each later search reads only the openings and closings appended since. Each
        search raises the floor to the oldest stream open. So the cost follows the streams
        begun since the oldest open one once, then the events since the last search, never
        the ledger's size. A reader without the right to insert the floor (a read-only
        role) searches without raising it.
        """
        scope = f"{prefix}|{','.join(sorted(closing))}"
        known = self._open_known.get(scope)
        if known is None:
            floor, head = await self._open_floor(scope)
            most = max(limit, OPEN_KNOWN) + 1
            found = await self._open_above(prefix, closing, floor, head, most)
            known = KnownOpen(head, floor, dict(found))
            if len(found) <= OPEN_KNOWN:
                self._open_known[scope] = known
        else:
            head = await self.last_position()
            changes = await self._open_changes(prefix, closing, known.head, head)
            known.apply(changes, closing, head)
        oldest = sorted(known.began.items(), key=lambda item: item[1])
        raised = oldest[0][1] if oldest else known.head + 1
        if raised > known.floor:
            await self._raise_open_floor(scope, raised)
            known.floor = raised
        return [stream for stream, _ in oldest[:limit]]

    @abstractmethod
    async def _open_floor(self, scope: str) -> tuple[int, int]:
        """(the floor of ``scope``, 1 when none; the last committed position)."""

    @abstractmethod
    async def _open_above(
        self, prefix: str, closing: Sequence[str], floor: int, head: int, limit: int
    ) -> list[tuple[str, int]]:
        """(stream, first position) of the open ``prefix`` streams that began in
        ``floor..head``, by first position, at most ``limit``: one pass over those
        positions, whatever lies below."""

    @abstractmethod
    async def _open_changes(
        self, prefix: str, closing: Sequence[str], after: int, head: int
    ) -> list[tuple[str, int, int, str]]:
        """(stream, position, version, type) of the ``prefix`` events in ``after+1..head``
        that open a stream (version 1) or close one, by position."""

    @abstractmethod
    async def _raise_open_floor(self, scope: str, position: int) -> None:
        """Record a higher floor (a read-only role: nothing, no error)."""

    async def set_aside(self, reasons: Mapping[str, str]) -> None:
        """Set messages aside (message_id -> why): recorded with the reason (signed, with a
        key), and no longer pending for this process (idempotent)."""
        if reasons:
            sign = self.trust.sign_aside
            await self._record_set_aside([(i, why, *sign(i, why)) for i, why in reasons.items()])
            self._floor.set_aside(reasons)

    @abstractmethod
    async def _record_set_aside(
        self, rows: Sequence[tuple[str, str, str | None, str | None]]
    ) -> None:
        """Insert set-aside rows (message_id, reason, key_id, signature); unknown message ids
        and rows already recorded with the same signature are left out."""

    async def set_aside_rows(self, limit: int = 100) -> list[tuple[PendingMessage, SetAsideRow]]:
        """Up to ``limit`` set-aside rows whose message is not published since, oldest
        first, whoever wrote them (``trust.trusts_aside`` tells the service's own)."""
        found: list[tuple[PendingMessage, SetAsideRow]] = []
        after = 0
        while len(found) < limit and (page := await self._set_aside_page(after, limit)):
            await self._check_marks([row for _, row in page])
            for aside, row in page:
                if not self.trust.published(row.message_id, row.marks, row.position):
                    found.append((_pending(row), aside))
            after = page[-1][0].id
        return found[:limit]

    async def set_aside_messages(self, limit: int = 100) -> list[tuple[PendingMessage, str]]:
        """Up to ``limit`` messages this key set aside (without a key: anyone) that are not
        published since, oldest first, with why."""
        found: dict[str, tuple[PendingMessage, str]] = {}
        for message, aside in await self.set_aside_rows(limit):
            if self.trust.trusts_aside(aside, message.position):
                found.setdefault(message.message_id, (message, aside.reason))
        return list(found.values())

    async def signed(self) -> bool:
        """Whether any head row is recorded: this ledger is kept with a signing key."""
        return bool(await self._head_page(0, 1))

    async def check_signing(self) -> None:
        """Raise ``HeadNotSigned`` (saying why) unless this key could append after the
        chain's head now: what an append would refuse, found before anything is consumed.
        Nothing without a key."""
        if not self.trust.signing:
            return
        last = await self.last_position()
        if last == 0:
            why = self.trust.may_sign(1)
        else:
            (row,) = await self._chain_page(last - 1, 1)
            heads = await self._heads_at(last)
            any_heads = bool(heads) or await self.signed()
            handed_over = not any_heads and bool(await self.read_stream(KEYS_STREAM))
            event = (row.type, row.data)
            why = self.trust.accept_head(
                (row.position, row.hash), heads, any_heads, event, handed_over
            )
            why = why or self.trust.may_sign(last + 1)
        if why:
            raise HeadNotSigned(last, None, why)

    async def rotate_key(self, incoming: LedgerPublicKey) -> int:
        """Hand the ledger over from this key to ``incoming``: a handover fact alone in its
        batch, so this key's head at its position covers it; its position. This ledger
        object appends nothing more (idempotent: the same handover again is a no-op)."""
        assert self.trust.public is not None, "a handover is signed by the outgoing key"
        if incoming.key_id == self.trust.key_id:
            raise ValueError("the incoming key is the key in use")
        fact = handover(self.trust.public, incoming)
        (record,) = await self.append([StreamAppend(KEYS_STREAM, None, [fact])])
        self.trust.retire(record.position)
        return record.position

    async def published_claim(self) -> int:
        """The highest claim of a published outbox a trusted head makes (0 without a key):
        every outbox row with ``seq`` up to it was published (or set aside) when that head
        was signed, so one with no publish marker now lost it (``Trust.claimed``). Each
        head carries the highest claim its signer saw forward, so the head at the top of
        the chain, read once, holds it; this process's own signing raises it since."""
        if self.trust.keyring is None:
            return 0
        if not self._claim_read:
            for head in await self._heads_at(await self.last_position()):
                self.trust.trusts_head(head)  # a trusted head's claim is taken
            self._claim_read = True
        return self.trust.claimed

    async def _heads_at(self, position: int) -> list[HeadRow]:
        return [h for h in await self._heads_from(position) if h.position == position]

    @abstractmethod
    async def hold_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Take or renew lease ``name`` for ``seconds``; False while another holds it."""

    @abstractmethod
    async def leases(self) -> list[tuple[str, str, float]]:
        """Every lease: (name, holder, seconds until it expires, by the database's clock)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""

    # -- what adapters provide for the shared walks ----------------------------------------

    _floor: PublishedFloor
    #: Whether ``published_claim`` read the head at the top of the chain.
    _claim_read: bool = False
    #: What ``open_streams`` found, by scope: the later searches read what was appended since.
    _open_known: dict[str, KnownOpen]

    @abstractmethod
    async def _chain_page(self, after_position: int, limit: int) -> list[ChainRow]:
        """Raw rows for verification, ``position > after_position`` in position order."""

    @abstractmethod
    async def _outbox_after(self, after_seq: int, limit: int, through_seq: int) -> list[OutboxRow]:
        """Outbox rows with ``after_seq < seq <= through_seq`` in seq order, with their
        markers' marks."""

    @abstractmethod
    async def _outbox_seq_through(self, position: int) -> int:
        """The highest ``seq`` of an outbox row of an event at or below ``position`` (0:
        none); rows get both under the append lock, so every row up to it is such a row."""

    @abstractmethod
    async def _outbox_past(self, position: int, limit: int, through: int) -> list[OutboxRow]:
        """Outbox rows with ``position`` greater, up to ``through``, by position then seq
        (which is seq order: rows get both under the append lock)."""

    @abstractmethod
    async def _outbox_between(self, low: int, high: int) -> list[OutboxRow]:
        """Outbox rows with ``low < position <= high``, by position then seq."""

    @abstractmethod
    async def _set_aside_page(
        self, after_id: int, limit: int
    ) -> list[tuple[SetAsideRow, OutboxRow]]:
        """Set-aside rows with ``id > after_id`` in id order, each with its outbox row."""

    @abstractmethod
    async def _marks(self, marks: Sequence[int]) -> list[MarkRow]:
        """The ``outbox_marks`` rows with these ids."""

    @abstractmethod
    async def _mark_page(self, after_mark: int, limit: int) -> list[MarkRow]:
        """``outbox_marks`` rows with ``mark > after_mark``, in mark order."""

    @abstractmethod
    async def _marker_page(self, after: tuple[int, str], limit: int) -> list[tuple[int, str]]:
        """(mark or -1 when unsigned, message_id) of markers after ``after``, in that order."""

    @abstractmethod
    async def _message_positions(self, message_ids: Sequence[str]) -> dict[str, int]:
        """The position each of these outbox messages reports (unknown ids left out)."""

    @abstractmethod
    async def _heads_from(self, position: int, limit: int = HEADS_SCANNED) -> list[HeadRow]:
        """Head rows with ``position >= position``, by position then id."""

    @abstractmethod
    async def _head_page(self, after_id: int, limit: int) -> list[HeadRow]:
        """Head rows with ``id > after_id``, in id order."""

    async def _chain_range(self, low: int, high: int) -> list[ChainRow]:
        rows: list[ChainRow] = []
        after = low - 1
        while after < high and (page := await self._chain_page(after, min(high - after, 10_000))):
            rows += page
            after = page[-1].position
        return [r for r in rows if r.position <= high]

    async def verify(
        self,
        page_size: int = 10_000,
        anchor: tuple[int, str] | None = None,
        progress: Callable[[int], None] | None = None,
        *,
        public_key: LedgerPublicKey | None = None,
        keyring: Keyring | None = None,
        outbox_rule: OutboxRule | None = None,
        unruled: Collection[str] = (),
        letter_rule: LetterRule | None = None,
    ) -> VerifyReport:
        """Walk the whole hash chain and report every changed, removed or inserted row.

        ``anchor``: a (position, hash) kept outside the database, e.g. an earlier report's
        head; the chain must still hold it, which also catches rows cut from the end.
        ``progress`` is called with the number of rows of each page walked.
        ``keyring`` (or one ``public_key``): also check the signed heads, each against the
        key that signed it (every row must sit under one, the chain must reach the last,
        and every key's turn that ended must end with its head: ``keyring.follow``), and
        the publish marks. ``outbox_rule``: what each
        event must have put in the outbox; every outbox row must be exactly that, except on
        the ``unruled`` exchanges, whose rows must name an event of the chain and pass the
        ``letter_rule`` (if given).
        """
        if public_key is not None:
            keyring = Keyring.of(public_key).merged(keyring or Keyring())
        turns: list[Problem] = []
        if keyring is not None:
            keyring, turns = await self._follow_handovers(keyring)
        audit = Audit(keyring, outbox_rule, unruled, letter_rule)
        signed = await audit.heads(self._head_page, page_size) if keyring else None
        verifier = ChainVerifier(anchor=anchor, signed=signed)
        after = -(2**63)  # rows forged at positions <= 0 must be seen too
        while page := await self._chain_page(after, page_size):
            for row in page:
                verifier.feed(row)
            audit.outbox(page, await self._outbox_between(after, page[-1].position))
            after = page[-1].position
            if progress is not None:
                progress(len(page))
        audit.outbox([], await self._outbox_between(after, 2**63 - 1))
        if keyring is not None:
            await audit.marks(
                self._mark_page, self._marker_page, page_size, self._message_positions
            )
        await audit.set_aside(self._set_aside_page, page_size)
        audit.leases(await self.leases(), LEASE_LIMIT)
        return verifier.finish([*turns, *audit.problems], audit.notes)

    async def _follow_handovers(self, keyring: Keyring) -> tuple[Keyring, list[Problem]]:
        """``keyring`` as the chain's handovers make it, and what is wrong with them."""
        handovers = []
        for record in await self.read_stream(KEYS_STREAM):
            handovers += await self._chain_page(record.position - 1, 1)
        return await follow(keyring, handovers, self._heads_at, await self.last_position())

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _pending(row: OutboxRow) -> PendingMessage:
    body = read_json(row.body)
    return PendingMessage(
        row.message_id,
        row.exchange,
        row.routing_key,
        body,
        row.position,
        row.event_hash,
        row.seq,
        row.aside,
        row.body,
    )


def open_ledger(url: str, key: LedgerKey | None = None, keyring: Keyring | None = None) -> Ledger:
    """Open the adapter ``url`` names (no I/O until first use); ``key`` signs, if given,
    trusting the heads and marks of the keys in ``keyring`` (by default the key alone).

    ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``,
    ``postgresql://user@host:port/db`` (or ``postgres://``).
    """
    if url.startswith("sqlite:///"):
        from croupier.ledger.sqlite import SqliteLedger

        return SqliteLedger(url.removeprefix("sqlite:///"), key=key, keyring=keyring)
    if url.startswith(("postgresql://", "postgres://")):
        from croupier.ledger.postgres import PostgresLedger

        return PostgresLedger(url, key=key, keyring=keyring)
    raise ValueError(f"unsupported ledger url {url!r}: use sqlite:///... or postgresql://...")
