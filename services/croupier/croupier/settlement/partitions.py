"""One instance's share of the ledger's partitions: it keeps its leases, balances them with
the other instances, and fences its appends.

Guarantees (on top of ``croupier.ledger.partitions``):
- **Fair share.** Each :meth:`PartitionOwner.balance` registers the instance, renews its
  leases when a third of the term has passed, and then takes free or expired partitions up
  to ``ceil(P / live instances)`` or gives back what it holds beyond that (the highest
  partitions first). A joining instance therefore gets its share within about one term; a
  single instance holds every partition.
- **Given back at a batch boundary.** Partitions beyond the share are handed to
  ``give_back`` first (the feed stops taking their deliveries and waits up to
  ``GIVE_BACK_SECONDS``, or a quarter of the term, for those in hand to settle), then
  released: the batch in hand is committed by this instance, not fenced and redone by the
  next owner. What is still in hand after the wait goes back to the broker as the release
  is consumed (the next ``assign``, at once), or as a batch of it is fenced: none of it is
  acknowledged here.
- **Bounds.** :meth:`run` balances every ``poll`` seconds (``POLL_SECONDS``): a partition
  whose owner was killed is taken at most the term plus one poll after the owner's last
  renewal; one released by a graceful :meth:`stop` within one poll.
- **Fencing, counted.** :meth:`append` names the partitions of the tables it writes for at
  the epochs this instance holds them at. A table whose partition it does not hold is
  refused before the database is asked; one the database says it no longer holds at that
  epoch is refused in the append transaction. Either way the append raises ``Fenced``,
  writes nothing, is counted in ``croupier_appends_fenced_total{partition}``, and the
  partitions are dropped from what the instance believes it holds.
- **Leftovers to the new owner.** A partition taken from an owner whose lease lapsed
  (killed, paused, cut off) is handed to ``on_lapsed`` with the ledger's last position,
  before its queue is consumed: the relay publishes what that owner committed for its
  tables and did not publish, before anything more of this instance's own.
- **Unowned, measured.** At every renewal it reads every lease and sets
  ``croupier_partition_unowned_seconds`` to the longest any partition has been without a
  valid lease (:meth:`PartitionOwner.unowned`), so a partition nobody takes is seen from
  any live instance (the alert PartitionUnowned, deploy/prometheus/rules.yml).
- **Joining together.** :func:`consume_held` registers the instance one poll before its first
  take, so instances started together count each other and take their shares at once,
  instead of the first taking every partition and giving most back a poll later (their
  deliveries in hand handed back to the broker).
- **Renewal never waits for consumers.** :func:`consume_held` balances on a task of its own
  and has the partitions held consumed on another, so starting many partition consumers on
  a busy event loop (seconds, with a full backlog) never delays a renewal past the term.
- What it holds is what the database said at the last renewal or take; the database, not
  this object, decides every append.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Final

import structlog

from croupier.ledger import (
    Fence,
    Fenced,
    Ledger,
    LedgerUnavailable,
    OutboxMessage,
    RecordedEvent,
    StreamAppend,
)
from croupier.ledger.partitions import (
    DEFAULT_TERM,
    POLL_SECONDS,
    PartitionLeases,
    Taken,
    fair_share,
    partition_of,
)
from croupier.metrics import Metrics

log = structlog.get_logger("croupier.settlement.partitions")

#: The longest a partition given back waits for its deliveries in hand to settle before its
#: lease is released (what is not settled by then goes back to the broker, for the next
#: owner); at most a quarter of the term, so renewals are never late.
GIVE_BACK_SECONDS: Final = 1.0
#: Given partitions to give back and how long it may take: settle what of them is in hand.
GiveBack = Callable[[Sequence[int], float], Awaitable[None]]


class PartitionOwner:
    """The partitions ``instance`` holds on ``ledger`` (a unique id per process)."""

    def __init__(
        self,
        ledger: Ledger,
        instance: str,
        metrics: Metrics,
        *,
        term: float = DEFAULT_TERM,
        poll: float = POLL_SECONDS,
    ) -> None:
        if not 0 < poll < term:
            raise ValueError(f"the poll ({poll} s) must be shorter than the term ({term} s)")
        self.ledger = ledger
        self.leases: PartitionLeases = ledger.partition_leases()
        self.instance = instance
        self.metrics = metrics
        self.term = term
        self.poll = poll
        #: The ledger's partition count (read by the first balance).
        self.count = 0
        #: Partition -> the epoch this instance holds it at, as the database last said.
        self.held: dict[int, int] = {}
        self._renewed = -float("inf")
        #: Partition never owned -> when this instance first saw it so (monotonic).
        self._never_owned: dict[int, float] = {}
        #: Told of partitions taken from an owner whose lease lapsed (partitions, the
        #: partition count, the ledger's last position then): the service's relay, which
        #: publishes what that owner left unpublished (``OutboxRelay.adopt``).
        self.on_lapsed: Callable[[frozenset[int], int, int], None] | None = None

    async def balance(self, give_back: GiveBack | None = None) -> None:
        """One step: register, renew when due, then take up to the fair share or give back
        what is beyond it (handed to ``give_back`` before the release)."""
        if not self.count:
            self.count = await self.leases.count()
        live = await self.leases.register(self.instance, self.term)
        now = time.monotonic()
        due = now - self._renewed >= self.term / 3
        if due:
            renewed = await self.leases.renew(self.instance, self.term)
            self._renewed = now
            lost = [p for p, epoch in self.held.items() if renewed.get(p) != epoch]
            if lost:
                self.metrics.partition_handovers.labels("lost").inc(len(lost))
                log.warning("partitions lost", partitions=lost)
            self.held = renewed
        share = fair_share(self.count, live)
        if len(self.held) > share:
            beyond = sorted(self.held)[share:]
            if give_back is not None:
                await self._give_back(give_back, beyond)
            for partition in await self.leases.release(self.instance, beyond):
                self.held.pop(partition, None)
                self.metrics.partition_handovers.labels("released").inc()
        elif len(self.held) < share:
            taken = await self.leases.take(self.instance, self.term, share - len(self.held))
            for one in taken:
                self.held[one.partition] = one.epoch
                self.metrics.partition_handovers.labels("taken").inc()
                if one.unowned is not None:
                    self.metrics.partition_handover_seconds.observe(max(0.0, one.unowned))
            await self._hand_over_leftovers(taken)
        self.metrics.partitions_owned.set(len(self.held))
        if due:
            self.metrics.partition_unowned.set(await self.unowned())

    async def _hand_over_leftovers(self, taken: Sequence[Taken]) -> None:
        """Hand ``on_lapsed`` the partitions taken from another owner whose lease lapsed,
        with the ledger's last position now: every fact that owner wrote lies at or below
        it (its appends held the lease rows until they committed, the take waited)."""
        lapsed = frozenset(t.partition for t in taken if t.lapsed not in (None, self.instance))
        if not lapsed or self.on_lapsed is None:
            return
        try:
            through = await self.ledger.last_position()
        except LedgerUnavailable as error:  # the relay lease's holder publishes them later
            log.warning("a lapsed owner's leftovers left to the relay", error=str(error))
            return
        self.on_lapsed(lapsed, self.count, through)

    async def _give_back(self, give_back: GiveBack, partitions: Sequence[int]) -> None:
        """Let the feed settle what of ``partitions`` it holds; released regardless after."""
        try:
            await give_back(partitions, min(GIVE_BACK_SECONDS, self.term / 4))
        except Exception as error:  # the broker went away: its deliveries go back anyway
            log.warning(
                "partitions released without settling their deliveries in hand",
                partitions=list(partitions),
                error=repr(error),
            )

    async def join(self) -> int:
        """Register without taking anything (reading the partition count the first time):
        how many instances are live, itself included."""
        if not self.count:
            self.count = await self.leases.count()
        return await self.leases.register(self.instance, self.term)

    async def unowned(self) -> float:
        """The longest any partition of the ledger has been without a valid lease, in seconds
        (0 when every one is owned): since its release or expiry by the database's clock; a
        partition never owned, since this instance first saw it so. Read at every renewal
        into ``croupier_partition_unowned_seconds`` (the alert PartitionUnowned)."""
        now = time.monotonic()
        longest = 0.0
        for lease in await self.leases.leases():
            if lease.owner is not None and lease.expires_in > 0:
                self._never_owned.pop(lease.partition, None)
            elif lease.epoch > 0:
                longest = max(longest, -lease.expires_in)
            else:
                longest = max(longest, now - self._never_owned.setdefault(lease.partition, now))
        return longest

    async def run(self, stopping: asyncio.Event) -> None:
        """Balance every ``poll`` seconds until ``stopping`` is set, then :meth:`stop`. A
        database out of reach is retried at the next poll (the leases run out meanwhile)."""
        while not stopping.is_set():
            try:
                await self.balance()
            except LedgerUnavailable as error:
                log.warning("partition leases not renewed", error=str(error))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.poll)
        try:
            await self.stop()
        except LedgerUnavailable as error:  # the leases run out by themselves
            log.warning("partition leases not released", error=str(error))

    async def stop(self) -> None:
        """A graceful stop: release every lease and leave, so the others take them at once."""
        freed = await self.leases.leave(self.instance)
        if freed:
            self.metrics.partition_handovers.labels("released").inc(len(freed))
        self.held = {}
        self.metrics.partitions_owned.set(0)

    def partition(self, table_id: str) -> int:
        """The partition of ``table_id`` (once :meth:`balance` has read the count)."""
        if not self.count:
            raise RuntimeError("the partition count is read by the first balance()")
        return partition_of(table_id, self.count)

    def fence(self, tables: Iterable[str]) -> Fence:
        """The fence for an append writing for ``tables``: ``Fenced`` (counted) when this
        instance does not hold one of their partitions."""
        partitions = {self.partition(table) for table in tables}
        missing = [p for p in partitions if p not in self.held]
        if missing:
            self._fenced(missing)
            raise Fenced(self.instance, missing)
        return Fence(self.instance, {p: self.held[p] for p in sorted(partitions)})

    async def append(
        self,
        appends: Sequence[StreamAppend],
        outbox: Sequence[OutboxMessage] = (),
        *,
        tables: Iterable[str],
    ) -> list[RecordedEvent]:
        """``Ledger.append`` fenced by the partitions of ``tables`` (the tables whose rounds
        the appends write): ``Fenced``, counted, unless this instance holds them all. No
        tables, no partition to check: the append is not fenced."""
        fence = self.fence(tables)
        try:
            return await self.ledger.append(appends, outbox, fence=fence)
        except Fenced as refused:
            self._fenced(refused.partitions)
            raise

    def _fenced(self, refused: Iterable[int]) -> None:
        partitions = sorted(refused)
        for partition in partitions:
            self.metrics.appends_fenced.labels(str(partition)).inc()
            self.held.pop(partition, None)
        log.warning("append fenced", partitions=partitions, code=Fenced.code)


async def consume_held(
    owner: PartitionOwner,
    assign: Callable[[frozenset[int]], Awaitable[None]],
    consumed: Callable[[], Collection[int]],
    give_back: GiveBack | None = None,
) -> None:
    """Balance every poll and have ``assign`` consume exactly the partitions held (one taken
    is consumed, one lost or given back dropped), until cancelled. ``assign`` runs on a task
    of its own, again whenever what is held differs from what is ``consumed`` or the last
    one failed, so however long it takes, the leases are renewed on time. Partitions given
    back go through ``give_back`` first (:meth:`PartitionOwner.balance`)."""
    try:
        await owner.join()
    except LedgerUnavailable as error:  # the first balance registers it then
        log.warning("not registered yet", error=str(error))
    await asyncio.sleep(owner.poll)  # instances started together see each other first
    changed = asyncio.Event()
    assigning = asyncio.create_task(_assign_when_changed(owner, assign, changed), name="assign")
    try:
        while True:
            before = set(owner.held)
            try:
                await owner.balance(give_back)
            except LedgerUnavailable as error:
                log.warning("partition leases not renewed", error=str(error))
            given_up = before - set(owner.held)
            if given_up:
                log.info("partitions given up", partitions=sorted(given_up))
            # A partition given back is consumed no more, but its channel is closed by the
            # next assign only: that must come now, not with the next change.
            if given_up or set(owner.held) != set(consumed()):
                changed.set()
            await asyncio.sleep(owner.poll)
    finally:
        assigning.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await assigning


async def _assign_when_changed(
    owner: PartitionOwner,
    assign: Callable[[frozenset[int]], Awaitable[None]],
    changed: asyncio.Event,
) -> None:
    changed.set()  # the first balance's share
    while True:
        await changed.wait()
        changed.clear()
        try:
            await assign(frozenset(owner.held))
        except Exception as error:  # the broker is reconnecting: again at the next poll
            log.warning("partitions not consumed yet", error=repr(error))
            await asyncio.sleep(owner.poll)
            changed.set()
