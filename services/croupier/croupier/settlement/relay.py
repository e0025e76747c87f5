"""The outbox relay: settlement results and dead letters from the ledger's outbox to the broker.

Guarantees:
- Each instance publishes what its own settler committed (``committed``,
  ``relay_committed``), at once, holding the lease or not: with partitions, the owner of a
  partition relays its results. Nothing of it is read back or derived again: the messages
  are those its transaction wrote, ``outbox_rule`` of the facts as stored (the same function
  on the same data, held in this process's memory, which nobody with database rights can
  reach; ``verify`` holds every outbox row to it).
- What no live writer publishes (it died or was cut off between its commit and its
  publish, or held more than ``DERIVED_KEPT`` messages) the holder of the ledger's relay
  lease (``Ledger.hold_lease``, renewed every third of its term) publishes from the
  outbox: the facts that were there at its first look (``look``, which ``serve`` takes
  before its settler commits anything) at once, a fact committed since once the writer
  grace (``WRITER_GRACE`` leases in ``serve``) has passed after it first saw it (every
  instance keeps looking, holding the lease or not), never one its own process has still
  to publish. A listing that found nothing is not repeated after each commit, only once
  the horizon has moved or a third of a term has passed: rows up to a horizon were all
  written before it was seen. Standby instances take the lease over within
  ``lease_seconds`` of the holder's last renewal (a crash, a hang, a partition).
  A message two publish (a writer slower than the grace) goes out twice with the same
  ``message_id``, as after a crash.
- What an owner whose partition lease lapsed (killed, paused, cut off) committed for its
  tables and left unpublished, the instance that takes those partitions over publishes
  (``adopt``, ``relay_leftovers``): listed from the published claim through the ledger's
  last position at the takeover, each vouched for as the lease holder's are, and before
  anything more of its own, so a table's earlier round reaches wallets before its next.
  Dead letters, and whatever a takeover did not list, stay the lease holder's.
- A message is marked published only after the broker confirmed it; a crash in between
  means it is published again with the same ``message_id``, which wallets deduplicate on.
- A message the broker refuses for good (unroutable, too long to frame, nacked) is set aside
  in the ledger with the reason, counted once (``croupier_results_set_aside_total``) and not
  retried: the messages after it go on. ``croupier redrive --results`` publishes set-aside
  messages once the cause is fixed.
- ``healthy`` is False while relaying fails (broker or database down); readiness shows it.
- A lease held beyond any term Croupier takes (``LEASE_LIMIT``: someone with the service's
  database rights wrote it) stalls relaying until it expires: nothing can prevent that,
  but standby instances see it, log it, set ``croupier_relay_lease_stalled`` and report
  the relay NOT READY (``stalled``) until it is gone.
- Marks deleted do not republish history: each signed head claims how far the outbox was
  published (``Ledger.published_claim``). A pending message at or below that claim, with
  no set-aside row, lost its publish mark (someone with the owner's rights deleted it):
  the relay publishes nothing then, logs why, sets ``croupier_relay_marks_missing`` and
  reports NOT READY (``relay``) until ``croupier redrive --results --unmarked`` publishes
  and marks those messages again, as someone must explicitly ask for.
- Only what a recorded fact says goes out. For each outbox row the lease holder lists, the
  relay reads the event the row names (position and hash) as the chain vouches for it
  (with a signing key: linked row by row up to a head a key of its keyring signed,
  outside a revoked key's part). A settlement result is re-derived from that fact
  (``results.outbox_rule``) and published as derived, only if the row is exactly it; a
  dead letter must name that (rejection) fact. Any other row (forged, edited, naming an
  unsigned or rewritten event) is refused: set aside with the reason, logged, counted in
  ``croupier_results_refused``, never published. A dead letter must be exactly the dead
  letter of the chained rejection it names (``deadletters.letter_problem``): its code,
  reason and bytes are the rejection's.
- Rounds take turns (``Ledger.pending_outbox(per_event=TURN)``): a page holds at most
  ``turn`` messages of one fact, its oldest pending ones, then the next fact's, so a round
  settled after a huge one is published within a page or two, not after it; with no other
  fact waiting, a huge one takes whole pages. The messages of one fact are published in
  outbox order; across facts (rounds) there is no order, even for one player (docs/feed.md,
  "Order").
- Pipelined (``relay_pending``): while the broker confirms a page, the page before it is
  marked published and the next one listed, leaving the page in flight out
  (``Ledger.pending_outbox(skip=...)``); a large settlement's pages cost the broker's
  confirms rather than those plus the database's round trips. Marks go in page order, each
  after its own page's confirms; a failure drops what is in flight (published again later).
  What this process committed goes out with two pages at the broker at once
  (``PAGES_IN_FLIGHT``, ``relay_committed``), written in order on the one channel, so the
  broker never waits for the relay to build the next page; marks still go in page order.
  Guarded by tests/unit/croupier/test_relay.py.
- Linear in the round: a fact is read, hashed and vouched for once, and the messages it
  calls for derived once (``Derivations``), however many pages its messages span: a shared
  hand of N players costs the relay O(N), not O(N) per message or per page. A large fact
  is derived in a worker thread; one this process committed is neither read nor derived.
  Guarded by tests/unit/croupier/test_linear_paths.py (work counted),
  tests/unit/croupier/test_relay.py and ``python -m bench service`` (10,000 and 100,000
  players, timed).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

import structlog

from contract.canonical import Encoded, canonical_json
from croupier.bus import (
    DEAD_LETTER_EXCHANGE,
    SETTLEMENTS_EXCHANGE,
    UNROUTABLE,
    Outgoing,
    Refused,
    SettlementSink,
)
from croupier.config import LEASE_LIMIT
from croupier.ledger import Ledger, OutboxMessage, PendingMessage, RecordedEvent
from croupier.ledger.audit import Expected
from croupier.ledger.chain import ChainRow
from croupier.ledger.partitions import partition_of
from croupier.metrics import Metrics
from croupier.settlement import deadletters
from croupier.settlement.results import outbox_rule

log = structlog.get_logger("croupier.settlement.relay")

RELAY_LEASE: Final = "outbox-relay"
DEFAULT_LEASE_SECONDS: Final = 10.0
#: Messages the relay keeps derived (from the facts it met last) between pages, and at most
#: as many that this process committed and has not published yet.
DERIVED_KEPT: Final = 250_000
#: How long (in terms of the lease) the holder leaves another instance's new facts to the
#: instance that wrote them before publishing them itself (the writer died or is cut off).
WRITER_GRACE: Final = 2.0
#: Facts longer than this (characters) are derived off the event loop.
DERIVE_INLINE: Final = 256 * 1024
#: A page holds at most this many messages of one settlement before the next one's turn.
TURN: Final = 250
#: Pages of this process's own messages the broker confirms at once (``relay_committed``).
PAGES_IN_FLIGHT: Final = 2

A = TypeVar("A")
B = TypeVar("B")
#: A page of this process's own messages with the broker: (position, message) each, what
#: went to the broker, and its publishing (what the broker refused, by id).
_Flying = tuple[
    Sequence[tuple[int, OutboxMessage]], Sequence[Outgoing], "asyncio.Future[dict[str, Refused]]"
]


def instance_name() -> str:
    """This process, as a lease holder: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class OutboxRelay:
    """Publishes pending outbox messages with confirms while it holds the relay lease."""

    def __init__(
        self,
        ledger: Ledger,
        sink: SettlementSink,
        metrics: Metrics,
        *,
        batch: int = 1000,
        turn: int = TURN,
        idle: float = 0.5,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        holder: str | None = None,
        writer_grace: float = 0.0,
    ) -> None:
        """``writer_grace``: seconds the lease holder leaves facts it did not write to the
        instance that did (0: it publishes whatever is pending)."""
        assert 0 < lease_seconds <= LEASE_LIMIT
        assert writer_grace >= 0
        self.ledger = ledger
        self.sink = sink
        self.metrics = metrics
        self.batch = batch
        self.turn = turn
        #: Whether the last page left messages pending (a full page, or a turn cut short).
        self.more = False
        self.idle = idle
        self.lease_seconds = lease_seconds
        self.holder = holder or instance_name()
        self.active = False
        self.healthy = True
        self.stalled = False
        #: Messages of the last page whose publish marks vanished (nothing relays meanwhile).
        self.marks_missing = 0
        self.derivations = Derivations()
        self.writer_grace = writer_grace
        #: What this process's settler committed that this relay has not published yet.
        self.own = Committed()
        #: Partitions taken over from a lapsed owner (``adopt``): (partitions, partition
        #: count, the ledger's last position then), oldest first.
        self._leftovers: deque[tuple[frozenset[int], int, int]] = deque()
        #: The ledger's last position as seen, and when (the first sighting: long ago).
        self._seen: deque[tuple[float, int]] = deque()
        self._through: int | None = None
        #: The horizon of the last listing that found nothing pending, and when.
        self._empty: tuple[int, float] | None = None
        self._backlog = 0
        self._renewed = 0.0
        self._tried = -math.inf
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()

    def wake(self) -> None:
        """New messages were committed: publish them now rather than at the next poll."""
        self._wake.set()

    def committed(self, written: Iterable[tuple[RecordedEvent, Sequence[OutboxMessage]]]) -> None:
        """This process's settler committed these facts with these outbox messages (wallet
        results, dead letters): publish them now, as they are, holding the lease or not."""
        for fact, messages in written:
            self.own.add(fact, messages)
        self.wake()

    def adopt(self, partitions: frozenset[int], count: int, through: int) -> None:
        """This instance took ``partitions`` (of ``count``) from an owner whose lease lapsed,
        when the ledger's last position was ``through``: publish the results that owner
        committed for their tables and left unpublished (``relay_leftovers``), before
        anything more of this process's own."""
        self._leftovers.append((partitions, count, through))
        self.wake()

    def stop(self) -> None:
        """Stop after the current round of publishing."""
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Relay until stopped, backing off on broker or database faults."""
        delay = 0.1
        while not self._stopping.is_set():
            try:
                await self.look()
                held = await self._hold_when_due()  # kept current while publishing fails
                sent = await self.relay_leftovers()
                sent += await self.relay_committed()
                sent += await self.relay_pending() if held and await self.hold() else 0
                self.healthy = True
                delay = 0.1
            except Exception as error:
                if self.healthy:
                    log.warning("relay fault; retrying", error=repr(error), retry_in=delay)
                self.healthy = False
                with contextlib.suppress(TimeoutError):  # backing off; a stop ends it
                    async with asyncio.timeout(delay):
                        await self._stopping.wait()
                delay = min(delay * 2, 5.0)
                continue
            if not (sent and self.more):
                await self._idle(self.idle if self.active else self.lease_seconds / 3)

    async def hold(self) -> bool:
        """Whether this relay holds the lease now (taking or renewing it when due)."""
        now = time.monotonic()
        if self.active and now - self._renewed < self.lease_seconds / 3:
            return True
        try:
            held = await self.ledger.hold_lease(RELAY_LEASE, self.holder, self.lease_seconds)
        except BaseException:
            self._activate(False)
            raise
        if held:
            self._renewed = now
        self._activate(held)
        await self._watch_lease(held)
        return held

    async def _hold_when_due(self) -> bool:
        """``hold``, asked at most every third of a term while standing by (a relay standing
        by is woken by its own process's commits, not to take the lease)."""
        now = time.monotonic()
        if not self.active and now - self._tried < self.lease_seconds / 3:
            return False
        self._tried = now
        return await self.hold()

    async def _watch_lease(self, held: bool) -> None:
        """Standing by: whether the lease is held beyond any term Croupier takes."""
        stalled = False
        if not held:
            lease = next((x for x in await self.ledger.leases() if x[0] == RELAY_LEASE), None)
            stalled = lease is not None and lease[2] > LEASE_LIMIT
            if stalled and not self.stalled:
                log.error(
                    "the relay lease is held beyond any term Croupier takes: nothing relays "
                    "until it expires; run `croupier verify`",
                    holder=lease[1] if lease else None,
                    seconds_left=lease[2] if lease else None,
                )
        self.stalled = stalled
        self.metrics.relay_lease_stalled.set(stalled)

    async def relay_once(self) -> int:
        """Publish one page of pending messages; the number taken off the outbox."""
        return await self._relay(pages=1)

    async def relay_leftovers(self) -> int:
        """Publish what owners whose lease lapsed left unpublished in the partitions this
        instance took from them (``adopt``), oldest handover first; the number taken.

        Listed from the published claim through the position at the handover
        (``Ledger.pending_since_claim``), the results of those partitions' tables only,
        each vouched for by its chained fact as the lease holder's are. Dead letters are
        the lease holder's. A failure leaves the handover to be listed again (what was
        published and not marked goes again with the same ``message_id``)."""
        taken = 0
        while self._leftovers:
            partitions, count, through = self._leftovers[0]
            left, after = 0, None
            while True:
                pending, after = await self.ledger.pending_since_claim(through, self.batch, after)
                theirs = [m for m in pending if _partition(m, count) in partitions]
                if theirs:
                    vouched = await self._vouched(theirs)
                    sendable = [vouched[m.message_id] for m in theirs if m.message_id in vouched]
                    await self._mark(sendable, await self._publish(sendable))
                    left += len(theirs)
                if after is None:
                    break
            self._leftovers.popleft()
            log.info(
                "published what a lapsed owner left", partitions=sorted(partitions), taken=left
            )
            taken += left
        return taken

    async def relay_committed(self) -> int:
        """Publish what this process's settler committed (``committed``), page after page
        until none is left or the relay stops; the number taken.

        Nothing is read back or derived: the messages are those the transaction that
        committed them wrote (``outbox_rule`` of the facts as stored; ``verify`` holds every
        outbox row to it). Up to ``PAGES_IN_FLIGHT`` pages are with the broker at once, in
        order on one channel, so it never waits for the relay to build the next page; each
        is marked, in page order, once its confirms are in, the next page already on its
        way. A failure puts what was not marked back first.
        """
        taken = 0
        flying: deque[_Flying] = deque()
        self._gauge_backlog()
        try:
            taken += self._launch(flying, first=True)
            while flying:
                page, outgoing, publishing = flying.popleft()
                refused = await publishing
                taken += self._launch(flying)
                await self._mark(outgoing, refused, written=True)
                self.own.done(page)
        except BaseException:
            for *_, publishing in flying:
                publishing.cancel()
            await asyncio.gather(*(publishing for *_, publishing in flying), return_exceptions=True)
            self.own.retake()
            raise
        finally:
            self._gauge_backlog()
        return taken

    def _launch(self, flying: deque[_Flying], *, first: bool = False) -> int:
        """Put pages of this process's own messages with the broker until
        ``PAGES_IN_FLIGHT`` are, none once the relay stops but the ``first`` of a call (a
        drain at shutdown publishes page after page), and none while a lapsed owner's
        leftovers wait (``adopt``: they go first); the number of messages taken."""
        taken = 0
        while (
            len(flying) < PAGES_IN_FLIGHT
            and not self._leftovers
            and (first or not self._stopping.is_set())
        ):
            first = False
            page = self.own.take(self.batch, self.turn)
            if not page:
                break
            outgoing = [_outgoing(position, message) for position, message in page]
            flying.append((page, outgoing, asyncio.ensure_future(self._publish(outgoing))))
            taken += len(page)
        return taken

    async def relay_pending(self) -> int:
        """Publish page after page while messages are pending (the lease held, not asked
        to stop); the number taken off the outbox.

        Pipelined: while the broker confirms one page, the page before it is marked
        published and the next one is listed (leaving the page in flight out), so a
        large settlement's pages cost the broker's confirms, not those plus two database
        round trips each. Marks are recorded in page order, each only after its page's
        confirms; a failure drops what is in flight, which is published again later with
        the same ``message_id``.
        """
        return await self._relay(pages=None)

    async def _relay(self, pages: int | None) -> int:
        self._through = await self._horizon()
        if self._listed_empty():
            return 0
        pending = await self._list(frozenset())
        through = self._through
        self._empty = (through, time.monotonic()) if not pending and through is not None else None
        taken, done = 0, None
        while pending:
            if await self._marks_missing(pending):
                break
            vouched = await self._vouched(pending)
            sendable = [vouched[m.message_id] for m in pending if m.message_id in vouched]
            taken += len(pending)
            pages = None if pages is None else pages - 1
            go_on = self.more and pages != 0
            publishing = self._publish(sendable)
            after = self._after(done, pending if go_on else None)
            refused, pending = await _both(publishing, after)
            done = (sendable, refused)
        if done is not None:
            await self._mark(*done)
        self._backlog = self._backlog if self.more else 0
        self._gauge_backlog()
        return taken

    async def look(self) -> None:
        """Note the ledger's last position, at most every eighth of the writer grace (the
        first time at once). Call it before this process's settler commits anything: what
        was there then is what the lease holder's first look publishes at once, never a
        fact this process committed and has not handed to ``committed`` yet. ``run`` looks
        on, holding the lease or not, so a standby that takes it over leaves only the last
        grace's facts to their writers."""
        if not self.writer_grace:
            return
        now = time.monotonic()
        if not self._seen or now - self._seen[-1][0] >= self.writer_grace / 8:
            last = await self.ledger.last_position()
            self._seen.append((now if self._seen else -math.inf, last))
        while len(self._seen) > 1 and self._seen[1][0] <= now - self.writer_grace:
            self._seen.popleft()

    async def _horizon(self) -> int | None:
        """The last position whose messages the lease holder publishes now: with a writer
        grace, what was the ledger's last position that long ago (at the first look, the
        last position then); below what this process committed and has not published."""
        through = None
        if self.writer_grace:
            await self.look()
            through = self._seen[0][1]
        oldest = self.own.oldest
        if oldest is not None:
            through = oldest - 1 if through is None else min(through, oldest - 1)
        return through

    def _listed_empty(self) -> bool:
        """Whether a listing through this horizon or a higher one found nothing pending a
        moment ago (within a third of a term): rows up to a horizon were all written before
        it was seen, so listing again after each commit would find nothing new."""
        if self._through is None or self._empty is None:
            return False
        through, when = self._empty
        return self._through <= through and time.monotonic() - when < self.lease_seconds / 3

    async def _list(self, in_flight: frozenset[str]) -> list[PendingMessage]:
        """The next page (``in_flight``: the ids of the page the broker confirms now)."""
        pending = await self.ledger.pending_outbox(
            self.batch, per_event=self.turn, skip=in_flight, through=self._through
        )
        turns = Counter(m.position for m in pending)
        self.more = len(pending) == self.batch or max(turns.values(), default=0) >= self.turn
        self._backlog = len(pending)
        self._gauge_backlog()
        return pending

    async def _publish(self, sendable: Sequence[Outgoing]) -> dict[str, Refused]:
        """Publish with confirms; what the broker refused, by id."""
        if not sendable:
            return {}
        return {r.message_id: r for r in await self.sink.publish(sendable)}

    async def _after(
        self,
        done: tuple[Sequence[Outgoing], Mapping[str, Refused]] | None,
        in_flight: Sequence[PendingMessage] | None,
    ) -> list[PendingMessage]:
        """While a page is in flight: mark the page before it, then list the next one
        (none when ``in_flight`` is None, or the lease is lost, or the relay stops)."""
        if done is not None:
            await self._mark(*done)
        if in_flight is None or self._stopping.is_set() or not await self.hold():
            return []
        return await self._list(frozenset(m.message_id for m in in_flight))

    async def _mark(
        self, sent: Sequence[Outgoing], refused: Mapping[str, Refused], *, written: bool = False
    ) -> None:
        """Record a confirmed page: published, and what the broker refused set aside
        (``written``: messages this process's own transactions wrote)."""
        published = [m for m in sent if m.message_id not in refused]
        await self.ledger.mark_published([m.message_id for m in published], written=written)
        if refused:
            await self.ledger.set_aside({i: f"{r.kind}: {r.reason}" for i, r in refused.items()})
            self._count_set_aside(list(refused.values()))
        self._count_published(published)

    async def _marks_missing(self, pending: Sequence[PendingMessage]) -> bool:
        """Whether publish marks of messages a signed head records published are gone:
        then nothing is published (not them again, nor anything after them) until they
        are marked again (``croupier redrive --results --unmarked``)."""
        claim = await self.ledger.published_claim()
        lost = [m for m in pending if m.seq <= claim and not m.aside]
        if lost and not self.marks_missing:
            log.error(
                "publish marks are missing: a signed head records these messages published, "
                "and no mark of them is left; not publishing them again, nor anything after "
                "them. Run `croupier verify`, then `croupier redrive --results --unmarked` "
                "to publish them again (wallets deduplicate on message_id)",
                published_through_seq=claim,
                missing_in_page=len(lost),
                first=[f"seq {m.seq} {m.message_id}" for m in lost[:5]],
            )
        elif not lost and self.marks_missing:
            log.info("publish marks are whole again: relaying")
        self.marks_missing = len(lost)
        self.metrics.relay_marks_missing.set(len(lost))
        return bool(lost)

    async def drain(self, timeout: float = 10.0) -> None:
        """Publish what this process committed, and (holding the lease) everything pending
        now, within ``timeout``: at shutdown."""
        async with asyncio.timeout(timeout):
            try:
                await self.relay_leftovers()
            except Exception as error:  # the lease holder publishes them after its grace
                log.warning("a lapsed owner's leftovers not published", error=repr(error))
                self._leftovers.clear()
            while self.own and await self.relay_committed():
                pass
            while self.active and await self.relay_pending() and self.more:
                pass

    async def _vouched(self, pending: Sequence[PendingMessage]) -> dict[str, Outgoing]:
        """What to publish for each message a chained fact says, by id; the rest are set
        aside with the reason."""
        vouched, refused = await derive(self.ledger, pending, self.derivations)
        if refused:
            await self.ledger.set_aside({i: f"refused: {why}" for i, why in refused.items()})
            self.metrics.refused.inc(len(refused))
        return vouched

    def _gauge_backlog(self) -> None:
        """What waits: this process's own, and the holder's last page listed."""
        self.metrics.outbox_backlog.set(len(self.own) + self._backlog)

    def _activate(self, held: bool) -> None:
        if held != self.active:
            log.info("relaying the outbox" if held else "standing by; another instance relays")
        self.active = held
        self.metrics.relay_active.set(held)

    def _count_set_aside(self, refused: list[Refused]) -> None:
        kinds = Counter(r.kind for r in refused)
        for kind, count in kinds.items():
            self.metrics.set_aside.labels(kind).inc(count)
        self.metrics.unroutable.inc(kinds[UNROUTABLE])
        log.error(
            "messages set aside: the broker refuses them",
            count=len(refused),
            first=[f"{r.message_id}: {r.kind}: {r.reason}" for r in refused[:5]],
        )

    def _count_published(self, published: list[Outgoing]) -> None:
        codes: Counter[str] = Counter()
        results = 0
        for message in published:
            if message.exchange == DEAD_LETTER_EXCHANGE:
                codes[str(message.body.get("code"))] += 1
            else:
                results += 1
        self.metrics.published.inc(results)
        for code, count in codes.items():
            self.metrics.dead_lettered.labels(code).inc(count)

    async def _idle(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass
        self._wake.clear()


@dataclass(slots=True)
class _Waiting:
    """A fact's outbox messages this process committed: taken up to ``taken`` (in flight
    or marked), marked up to ``marked``."""

    position: int
    messages: Sequence[OutboxMessage]
    taken: int = 0
    marked: int = 0


class Committed:
    """What this process's settler committed and its relay has not published yet: each
    fact's position and the outbox messages written with it, oldest first.

    Taken a page at a time, the facts taking turns (``take``); a page is done once marked,
    in page order, so each fact's marked messages are a prefix of them. At most ``limit``
    messages wait: beyond, the oldest fact is left to the lease holder, which publishes it
    from the outbox after its writer grace.
    """

    def __init__(self, limit: int = DERIVED_KEPT) -> None:
        self.limit = limit
        self._facts: OrderedDict[int, _Waiting] = OrderedDict()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def oldest(self) -> int | None:
        """The position of the oldest fact with messages not marked yet."""
        return next(iter(self._facts), None)

    def add(self, fact: RecordedEvent, messages: Sequence[OutboxMessage]) -> None:
        """``fact`` was committed with ``messages`` in the outbox."""
        assert all(m.event_key in (None, fact.key) for m in messages), "another fact's message"
        if not messages or fact.position in self._facts:
            return
        self._facts[fact.position] = _Waiting(fact.position, messages)
        self._size += len(messages)
        while self._size > self.limit and len(self._facts) > 1:
            _, left = self._facts.popitem(last=False)
            self._size -= len(left.messages) - left.marked
            log.warning(
                "too many results waiting to be published: left to the relay lease holder",
                position=left.position,
                messages=len(left.messages) - left.marked,
            )

    def take(self, limit: int, turn: int) -> list[tuple[int, OutboxMessage]]:
        """The next page: at most ``turn`` messages of each fact, oldest fact first, then
        as many more as fit, oldest first (a large fact alone takes whole pages)."""
        page: list[tuple[int, OutboxMessage]] = []
        for share in (turn, limit):
            for waiting in self._facts.values():
                room = min(share, limit - len(page), len(waiting.messages) - waiting.taken)
                if room <= 0:
                    continue
                start = waiting.taken
                waiting.taken += room
                page += [(waiting.position, m) for m in waiting.messages[start : start + room]]
        return page

    def done(self, page: Sequence[tuple[int, OutboxMessage]]) -> None:
        """``page`` (the oldest page taken and not done) is marked published or set aside."""
        for position, count in Counter(position for position, _ in page).items():
            waiting = self._facts.get(position)
            if waiting is None:
                continue  # left to the holder meanwhile
            waiting.marked += count
            assert waiting.marked <= waiting.taken, "marked before it was taken"
            self._size -= count
            if waiting.marked == len(waiting.messages):
                del self._facts[position]

    def retake(self) -> None:
        """Publishing failed: what was taken and not marked is taken again, in order."""
        for waiting in self._facts.values():
            waiting.taken = waiting.marked


class Derivations:
    """Chained facts as the relay read them, and the outbox messages each calls for
    (``outbox_rule``), each read and derived once.

    A fact is kept by position once the chain vouched for it: the chain is append-only,
    so it is exactly what reading again would give (a row rewritten since would not be
    vouched for, and its outbox rows name the hash kept here). Its messages are derived
    once however many of them a page holds and however many pages they span: relaying a
    round of N players reads and hashes its settlement once and derives its N messages
    once, not once per message or per page. The facts met last are kept up to ``limit``
    messages in all (the ones of the page in hand always).
    """

    def __init__(self, limit: int = DERIVED_KEPT) -> None:
        self.limit = limit
        self._kept: OrderedDict[int, tuple[ChainRow, dict[str, Expected] | None]] = OrderedDict()
        self._size = 0

    async def vouched(
        self, ledger: Ledger, pending: Sequence[PendingMessage]
    ) -> dict[int, ChainRow]:
        """The facts the ``pending`` messages name, as the chain vouches for them
        (``Ledger.vouched``), by position."""
        named = {message.position for message in pending}
        found = {p: self._kept[p][0] for p in named if p in self._kept}
        missing = named - found.keys()
        if missing:
            read = await ledger.vouched(missing)
            for position, row in read.items():
                self._keep(position, row, None)
            found.update(read)
        for position in found:
            self._kept.move_to_end(position)
        self._trim()
        return found

    async def derive(self, event: ChainRow) -> dict[str, Expected]:
        """The messages ``event`` calls for, by message id (a large fact is derived in a
        worker thread, so other tables' results keep flowing meanwhile)."""
        row, messages = self._kept.get(event.position, (None, None))
        if messages is None or row is None or row.hash != event.hash:
            if len(event.data) > DERIVE_INLINE:
                derived = await asyncio.to_thread(outbox_rule, event.type, event.data)
            else:
                derived = outbox_rule(event.type, event.data)
            messages = {e.message_id: e for e in derived}
            self._keep(event.position, event, messages)
            self._trim()
        return messages

    def _keep(self, position: int, row: ChainRow, messages: dict[str, Expected] | None) -> None:
        old = self._kept.pop(position, None)
        if old is not None:
            self._size -= 1 + len(old[1] or ())
        self._kept[position] = (row, messages)
        self._size += 1 + len(messages or ())

    def _trim(self) -> None:
        while self._size > self.limit and len(self._kept) > 1:
            _, (_, dropped) = self._kept.popitem(last=False)
            self._size -= 1 + len(dropped or ())


async def derive(
    ledger: Ledger, pending: Sequence[PendingMessage], derivations: Derivations | None = None
) -> tuple[dict[str, Outgoing], dict[str, str]]:
    """The relay's rule: what to publish for each message a chained fact says (by id), and
    why each other one is refused (by id; logged). ``croupier redrive --results`` applies
    it too. Each fact is derived once (``derivations``: kept from earlier calls)."""
    derivations = derivations or Derivations()
    events = await derivations.vouched(ledger, pending)
    expected: dict[int, dict[str, Expected]] = {}
    for message in pending:
        event = events.get(message.position)
        if event is None or event.hash != message.event_hash or event.position in expected:
            continue
        if message.exchange != DEAD_LETTER_EXCHANGE:
            expected[event.position] = await derivations.derive(event)
    vouched: dict[str, Outgoing] = {}
    refused: dict[str, str] = {}
    for message in pending:
        event = events.get(message.position)
        published = _derived(message, event, expected.get(event.position, {}) if event else {})
        if isinstance(published, Outgoing):
            vouched[message.message_id] = published
            continue
        refused[message.message_id] = published
        log.error(
            "outbox message refused: not what a recorded fact says",
            message_id=message.message_id,
            position=message.position,
            reason=published,
        )
    return vouched, refused


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results, run concurrently; the failure raised (the first one, when both fail).
    If ``second`` fails, ``first`` is cancelled; if ``first`` fails, ``second`` still
    finishes: the relay's ``second`` marks a page the broker has confirmed, and a mark cut
    short may have committed all the same (a worker thread's write goes on), leaving the
    relay's own count of what it marked behind the ledger's."""
    one, two = asyncio.ensure_future(first), asyncio.ensure_future(second)
    try:
        await asyncio.wait({one, two}, return_when=asyncio.FIRST_EXCEPTION)
        if not (two.done() and two.exception() is not None):
            await asyncio.wait({two})
    finally:
        for task in (one, two):
            if not task.done():
                task.cancel()
        await asyncio.wait({one, two})
    for task in (one, two):
        if not task.cancelled() and task.exception() is not None:
            raise cast(BaseException, task.exception())
    return one.result(), two.result()


def _partition(message: PendingMessage, count: int) -> int | None:
    """The partition of the table a settlement result names (None: not a result)."""
    table = message.body.get("table_id")
    if message.exchange != SETTLEMENTS_EXCHANGE or not isinstance(table, str):
        return None
    return partition_of(table, count)


def _outgoing(position: int, message: OutboxMessage) -> Outgoing:
    """What to publish for a message this process's settler committed for the fact at
    ``position``."""
    if message.exchange == DEAD_LETTER_EXCHANGE:
        return deadletters.outgoing(message)
    body = message.body
    assert isinstance(body, Encoded), "the settler writes wallet results with their text"
    return _published(message.message_id, message.exchange, message.routing_key, body, position)


def _published(
    message_id: str,
    exchange: str,
    routing_key: str,
    body: Mapping[str, Any],
    position: int,
    text: str | None = None,
) -> Outgoing:
    """A wallet result as published: its body with ``ledger_position``; encoded here when
    ``text`` (or an :class:`Encoded` body's) is its canonical text."""
    if text is None and isinstance(body, Encoded):
        text = body.text
    encoded = None
    if text is not None and text.isascii() and "\x7f" not in text:
        # The body in canonical key order, ``ledger_position`` last, as compact ASCII JSON
        # encodes it (DEL is the one ASCII character the two escape differently).
        encoded = f'{text[:-1]},"ledger_position":{position}}}'.encode()
    published = {**body, "ledger_position": position}
    return Outgoing(message_id, routing_key, published, exchange=exchange, encoded=encoded)


def _derived(
    message: PendingMessage, event: ChainRow | None, expected: Mapping[str, Expected]
) -> Outgoing | str:
    """What to publish for ``message``, or why it is refused (``expected``: the messages
    ``event`` calls for, by id)."""
    if event is None:
        return (
            "its event is not in the chain under a head a key of this service's keyring "
            "signed (or lies where a revoked key signed)"
        )
    if event.hash != message.event_hash:
        return f"it names event hash {message.event_hash[:16]}, the chain holds {event.hash[:16]}"
    if message.exchange == DEAD_LETTER_EXCHANGE:
        problem = deadletters.letter_problem(
            event, message.message_id, message.routing_key, message.body
        )
        return problem or deadletters.outgoing(message)
    want = expected.get(message.message_id)
    if want is None:
        return f"the {event.type} at position {event.position} reports no such message"
    # The stored text is the canonical text the settler wrote: equal, nothing to encode.
    text = message.text if message.text == want.body else canonical_json(message.body)
    if (message.exchange, message.routing_key, text) != want[1:]:
        return f"it differs from what the {event.type} at position {event.position} says"
    return _published(
        message.message_id,
        want.exchange,
        want.routing_key,
        message.body,  # exactly ``want.body``
        event.position,
        want.body if message.text == want.body else None,
    )
