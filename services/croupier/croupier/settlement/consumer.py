"""The feed consumer: deliveries in batches, one ledger transaction each, then one ack.

Guarantees:
- A delivery is acknowledged only after the ledger commit that covers it (at-least-once in,
  exactly-once in the ledger thanks to idempotent appends).
- Batches are processed one after another from a single-active-consumer queue, so prefetch
  never turns into concurrent reordering: each table's events keep their order. One
  exception keeps that order too: the closing of a heavy round (``HEAVY_WAGERS`` wagers or
  more in memory, ``croupier.settlement.settler``), with every later delivery of its table,
  is settled in a lane of its own beside the rest of the feed, so that other tables' rounds
  are not held up for the seconds a shared hand of 100,000 players takes. A table with a
  delivery in the lane stays there until the lane has settled it; no other table's round
  waits for it.
- Deliveries are acknowledged in the order taken, once settled: those at the front with one
  acknowledgement for many, one settled while an earlier delivery is still in the lane
  alone (so the prefetch is not held up behind a heavy round). None twice.
- Memory is bounded whatever the broker delivers: a body over the contract's maximum
  (``MAX_BODY_BYTES``, checked on the raw bytes as it arrives, before any decode) is kept as
  its first ``KEPT_BYTES`` with its size and SHA-256 (``croupier.bus.delivered``), never
  parsed, and rejected ``too_large``; so the deliveries in hand hold at most prefetch x
  ``KEPT_BYTES``, and a batch at most ``MAX_BATCH_BYTES`` of bodies.
- Rejected input is recorded in the ledger with its dead letter in the outbox, in the same
  transaction; the relay publishes the dead letter. A message that makes settlement itself
  fail is isolated, quarantined the same way, and never blocks the queue.
- Transient faults (database or broker down) back off and retry without acking; readiness
  is false meanwhile. Nothing is lost: unacked deliveries stay with the broker.
- A stop is never held up by a failure loop: a batch that is being retried, or isolated
  and quarantined message by message, is given up when :meth:`FeedConsumer.stop` is
  called (left unacknowledged: the broker delivers it again, and what of it committed
  settles as a no-op then).
- A batch refused by fencing (``Fenced``: this instance no longer holds a partition of it,
  ``croupier.settlement.partitions``) is never quarantined nor dead-lettered: the source
  drops those partitions (``FeedSource.drop``; their deliveries go back to the broker,
  unacknowledged, for the new owner) and the rest of the batch is settled again. A message
  fenced on a partition other than the one it was delivered from (its body names a table
  its routing key does not) is quarantined like any message settlement fails on.
- Nothing waits forever unseen: every ``reload_every`` s the open rounds are read back
  from the ledger (those another instance left open too; a search that starts at the
  ledger's open floor, so its cost does not grow with the ledger), and between batches
  (at least every ``sweep_every`` s) events
  held for a gap in ``seq`` longer than ``held_timeout`` are rejected (recorded,
  dead-lettered) and rounds open longer than ``round_timeout`` are voided (recorded, every
  wager refunded through the outbox, counted in ``croupier_rounds_timed_out_total``); the
  held events, open rounds and their ages are metrics meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

import structlog

from contract.codes import RejectionCode
from croupier.bus import BusError, Delivery, FeedSource, routed_table
from croupier.ledger import Fenced, HeadNotSigned, LedgerUnavailable, VersionConflict
from croupier.logs import context_ids
from croupier.metrics import Metrics
from croupier.settlement.facts import closing
from croupier.settlement.round import SETTLED, Status
from croupier.settlement.settler import BatchReport, Handled, Inbound, Settler

log = structlog.get_logger("croupier.settlement.consumer")

#: Seconds an event may wait for a gap in its round's ``seq`` to fill before it is rejected.
DEFAULT_HELD_TIMEOUT: Final = 300.0
#: Seconds a round may stay open before Croupier voids it (``round_timeout``).
DEFAULT_ROUND_TIMEOUT: Final = 3600.0

#: The feed routing keys (``<table_id>.<event_type>``) of events that close a round.
_CLOSING_KEYS: Final = (".round.completed", ".round.voided")

_TRANSIENT: Final = (OSError, TimeoutError, BusError, VersionConflict, LedgerUnavailable)
#: Lost races (``VersionConflict``) in a row a batch is decided again at once, without
#: backing off or reporting itself unhealthy; beyond, it is handled as any transient fault.
LOST_RACES_AT_ONCE: Final = 3
#: Why a batch was settled again (``croupier_batch_retries_total{reason}``): the first
#: whose type the error is, else ``error``.
RETRY_REASONS: Final[
    tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...]
] = (
    (VersionConflict, "lost_race"),
    (LedgerUnavailable, "ledger_unavailable"),
    (BusError, "broker"),
    (HeadNotSigned, "head_not_signed"),
    ((OSError, TimeoutError), "io"),
)


def event_age(body: bytes, now: float | None = None) -> float:
    """Seconds since a feed event occurred (its ``occurred_at``); 0 when it does not parse.

    The first message of a batch is the oldest one not yet settled (the queue is in order),
    so its age is the consumer's lag, queue wait included.
    """
    try:
        occurred = json.loads(body)["occurred_at"]
        moment = datetime.fromisoformat(occurred.replace("Z", "+00:00")).timestamp()
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return 0.0  # hostile bodies reach here too (deep nesting): the contract rejects them
    return max(0.0, (time.time() if now is None else now) - moment)


def is_transient(error: BaseException) -> bool:
    """Faults worth retrying as they are: connections, timeouts, lost races. A refusal to
    sign after the ledger's head (``HeadNotSigned``) counts too: no message is at fault,
    so none is quarantined, and nothing is acknowledged until the head is one the key may
    append after."""
    return isinstance(error, (*_TRANSIENT, HeadNotSigned))


def retry_reason(error: BaseException) -> str:
    """The label a failed attempt is counted under (:data:`RETRY_REASONS`)."""
    return next((reason for kind, reason in RETRY_REASONS if isinstance(error, kind)), "error")


class _GivenUp(Exception):
    """Stopping: the batch in hand is left unacknowledged."""


class FeedConsumer:
    """Pulls batches from a feed source and settles them through the settler."""

    def __init__(
        self,
        source: FeedSource,
        settler: Settler,
        metrics: Metrics,
        *,
        max_batch: int = 1000,
        linger: float = 0.005,
        on_commit: Callable[[BatchReport], None] = lambda report: None,
        held_timeout: float = DEFAULT_HELD_TIMEOUT,
        round_timeout: float = DEFAULT_ROUND_TIMEOUT,
        sweep_every: float = 5.0,
        reload_every: float = 60.0,
    ) -> None:
        self.source = source
        self.settler = settler
        self.metrics = metrics
        self.max_batch = max_batch
        self.linger = linger
        self.on_commit = on_commit
        self.held_timeout = held_timeout
        self.round_timeout = round_timeout
        self.sweep_every = sweep_every
        self.reload_every = reload_every
        self.healthy = True
        self._stopping = asyncio.Event()
        self._swept = self._reloaded = time.monotonic()
        self._acks = _Acks(source)
        self._lane = _Lane(self._process)

    async def run(self) -> None:
        """Consume until :meth:`stop`; the batches in hand (the lane's too) are always
        finished first."""
        try:
            while not self._stopping.is_set():
                self._lane.check()
                batch = await self._next_batch()
                if batch:
                    self.metrics.consumer_lag.set(_age(batch[0]))
                    rest = self._hand_heavy_over(batch)
                    if rest:
                        await asyncio.shield(self._process(rest))
                else:
                    self.metrics.consumer_lag.set(0)
                if time.monotonic() - self._swept >= self.sweep_every:
                    await asyncio.shield(self.sweep())
        finally:
            await asyncio.shield(self._lane.drained())
        self._lane.check()

    def _hand_heavy_over(self, batch: list[Delivery]) -> list[Delivery]:
        """Give the lane the deliveries of tables that close a heavy round in ``batch``, or
        have deliveries in the lane still, in order; the rest, to settle now."""
        tables = {routed_table(d.routing_key) for d in batch if self._closes_heavy(d)}
        if self._lane.tables:
            tables.update(
                t for t in {routed_table(d.routing_key) for d in batch} if t in self._lane
            )
        if not tables:
            return batch
        self._lane.add([d for d in batch if routed_table(d.routing_key) in tables])
        return [d for d in batch if routed_table(d.routing_key) not in tables]

    def _closes_heavy(self, delivery: Delivery) -> bool:
        if delivery.oversize is not None or not delivery.routing_key.endswith(_CLOSING_KEYS):
            return False
        round_id = _round_id(delivery.body)
        table = routed_table(delivery.routing_key)
        return round_id is not None and self.settler.closes_heavy(table, round_id)

    async def sweep(self) -> None:
        """Time out what waited too long; refresh the held and open gauges."""
        self._swept = time.monotonic()
        try:
            if self._swept - self._reloaded >= self.reload_every:
                await self.settler.load_open()  # the ledger's open rounds, from its floor
                self._reloaded = self._swept
            report = await self.settler.expire(
                self.held_timeout, self.round_timeout, busy=self._lane.tables
            )
        except Exception as error:
            log.warning("timeouts not recorded yet; retrying", error=repr(error))
            return
        if report.handled or report.closed:
            self.on_commit(report)
            self._observe(report, 0, 0.0)
        self._gauge_waiting()

    def _gauge_waiting(self) -> None:
        now = time.time()
        open_rounds = [r for r in self.settler.rounds if r.status is Status.OPEN]
        held = [r for r in open_rounds if r.held]
        m = self.metrics
        m.rounds_open.set(len(open_rounds))
        m.events_held.set(sum(len(r.held) for r in held))
        started = [r.started_at for r in open_rounds if r.started_at is not None]
        m.oldest_open_round.set(now - min(started) if started else 0)
        since = [r.held_since for r in held if r.held_since is not None]
        m.oldest_held_event.set(now - min(since) if since else 0)

    def stop(self) -> None:
        """Finish the batch in hand, then return from :meth:`run`."""
        self._stopping.set()

    async def _next_batch(self) -> list[Delivery]:
        """The next batch; empty when stopping or when the next sweep is due first."""
        taking = asyncio.ensure_future(self.source.next_batch(self.max_batch, self.linger))
        stopping = asyncio.ensure_future(self._stopping.wait())
        due = max(0.0, self.sweep_every - (time.monotonic() - self._swept))
        done, _ = await asyncio.wait(
            {taking, stopping}, timeout=due, return_when=asyncio.FIRST_COMPLETED
        )
        stopping.cancel()
        if taking in done:
            batch = taking.result()
            self._acks.taken(batch)
            return batch
        taking.cancel()  # nothing is taken off the inbox until a batch is complete
        return []

    async def _process(self, batch: Sequence[Delivery]) -> None:
        started = time.perf_counter()
        try:
            report, batch = await self._settle(batch)
        except _GivenUp:
            log.warning(
                "stopping in a failure loop: the batch in hand is left unacknowledged "
                "for redelivery",
                deliveries=len(batch),
            )
            return
        self.on_commit(report)  # the relay publishes results and dead letters now
        await self._acks.settled(batch)
        self._observe(report, len(batch), time.perf_counter() - started)

    async def _settle(self, batch: Sequence[Delivery]) -> tuple[BatchReport, Sequence[Delivery]]:
        """The batch's report, and what of the batch it covers (less the deliveries of
        partitions handed over on ``Fenced``)."""
        delay = 0.05
        isolating = False
        races = 0
        while True:
            try:
                if isolating:
                    report = await self._isolate(batch)
                else:
                    report = await self._settle_or_isolate(batch)
            except _GivenUp:
                raise
            except Fenced as fenced:
                await self.source.drop(fenced.partitions)
                remaining = self.source.live(batch)
                log.warning(
                    "fenced: the deliveries of partitions no longer held go back to the broker",
                    partitions=list(fenced.partitions),
                    handed_over=len(batch) - len(remaining),
                )
                if not remaining:
                    # The ledger answered (it refused): whatever fault came before is over.
                    self._healthy_again()
                    return BatchReport(), remaining
                # none of its own: a misrouted message, found and quarantined one by one
                isolating = len(remaining) == len(batch)
                batch = remaining
                continue
            except Exception as error:
                self.metrics.batch_retries.labels(retry_reason(error)).inc()
                if isinstance(error, VersionConflict) and races < LOST_RACES_AT_ONCE:
                    # Another writer moved a stream on (a jackpot meter two instances share):
                    # nothing is failing, and the batch is decided again on what it wrote.
                    races += 1
                    log.debug("lost a race; deciding the batch again", stream=error.stream)
                    continue
                # A transient fault, or one while isolating: the quarantine itself could not
                # be recorded, so the ledger is failing, not the message. Retry; never ack.
                self._unhealthy(error, delay)
                await self._back_off(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._healthy_again()
            return report, batch

    async def _back_off(self, delay: float) -> None:
        """Wait ``delay`` s before a retry; ``_GivenUp`` as soon as stopping."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stopping.wait()
        if self._stopping.is_set():
            raise _GivenUp

    async def _settle_or_isolate(self, batch: Sequence[Delivery]) -> BatchReport:
        try:
            return await self.settler.handle([_inbound(d) for d in batch])
        except Exception as error:
            if is_transient(error) or isinstance(error, Fenced):
                raise
            return await self._isolate(batch)

    async def _isolate(self, batch: Sequence[Delivery]) -> BatchReport:
        """Settle one message at a time; quarantine the ones settlement itself fails on."""
        merged = BatchReport()
        for delivery in batch:
            if self._stopping.is_set():
                raise _GivenUp
            try:
                report = await self._settle_one(delivery)
            except Exception as error:
                if is_transient(error):
                    raise
                if isinstance(error, Fenced):
                    await self.source.drop(error.partitions)
                    if not self.source.live([delivery]):
                        continue  # its partition is handed over: the new owner settles it
                ids = context_ids(delivery.body) if delivery.oversize is None else {}
                with structlog.contextvars.bound_contextvars(**ids):
                    log.exception("quarantining a message settlement fails on", tag=delivery.tag)
                report = await self.settler.quarantine(_inbound(delivery), error)
            merged.handled += report.handled
            merged.closed += report.closed
            merged.written += report.written
            merged.outbox += report.outbox
        return merged

    async def _settle_one(self, delivery: Delivery) -> BatchReport:
        return await self.settler.handle([_inbound(delivery)])

    def _healthy_again(self) -> None:
        if not self.healthy:
            log.info("settling again after a transient fault")
        self.healthy = True

    def _unhealthy(self, error: BaseException, delay: float) -> None:
        if self.healthy:
            log.warning("transient fault; retrying without acking", error=repr(error))
        self.healthy = False
        log.debug("backing off", seconds=delay)

    def _observe(self, report: BatchReport, size: int, seconds: float) -> None:
        m = self.metrics
        if size:
            m.batch_size.observe(size)
        # Counted per label per batch: each labels() lookup takes the metric's lock.
        consumed: Counter[str] = Counter()
        rejected: Counter[str] = Counter()
        for handled in report.handled:
            if handled.ref:
                consumed[handled.event_type or "malformed"] += 1
            if handled.verdict == "rejected" and handled.new:  # as the ledger records them
                rejected[handled.code or "rejected"] += 1
                _log_rejection(handled)
        for event_type, count in consumed.items():
            m.consumed.labels(event_type).inc(count)
        for code, count in rejected.items():
            m.rejected.labels(code).inc(count)
        for closed in report.closed:
            status = "settled" if closed.type == SETTLED else "voided"
            m.observe_closed([closed.data], status)
            if size:
                m.latency.observe(seconds)
            data = closing(closed.data)
            event = data["event"]
            say = log.info
            if closed.data.get("code") == RejectionCode.ROUND_TIMEOUT:
                m.rounds_timed_out.inc()
                say, status = log.warning, "voided: open past the round timeout"
            say(
                f"round {status}",
                table_id=event["table_id"],
                round_id=event["round_id"],
                event_id=event["event_id"],
                ledger_position=closed.position,
                bets=len(data["results"]),
            )


class _Lane:
    """Groups of deliveries settled one after another beside the rest of the feed: heavy
    closings, and what follows them at their tables. ``in``: whether a table has a
    delivery here still."""

    def __init__(self, process: Callable[[Sequence[Delivery]], Awaitable[None]]) -> None:
        self._process = process
        self._groups: deque[list[Delivery]] = deque()
        self.tables: Counter[str] = Counter()  # deliveries here, by table
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    def __contains__(self, table: str) -> bool:
        return table in self.tables

    def add(self, group: list[Delivery]) -> None:
        self._groups.append(group)
        self.tables.update(routed_table(d.routing_key) for d in group)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="feed-consumer-lane")

    async def _run(self) -> None:
        while self._groups and self._failure is None:
            group = self._groups[0]
            try:
                await self._process(group)
            except BaseException as error:  # raised in the consumer's own task (check)
                self._failure = error
                return
            self._groups.popleft()
            self.tables -= Counter(routed_table(d.routing_key) for d in group)

    async def drained(self) -> None:
        """Once every group handed over is settled (or the lane failed)."""
        if self._task is not None:
            await self._task

    def check(self) -> None:
        """Raise what made the lane fail, if anything did."""
        if self._failure is not None:
            raise self._failure


class _Acks:
    """Acknowledges settled deliveries in the order taken: those at the front with one
    acknowledgement for many, one settled while a delivery taken before it is still in
    hand (in the lane), alone; each once. Deliveries the source handed back (``live``)
    leave."""

    def __init__(self, source: FeedSource) -> None:
        self.source = source
        self._hand: list[Delivery] = []
        self._settled: set[int] = set()  # by id(): deliveries in hand settled...
        self._alone: set[int] = set()  # ...and, of those, acknowledged alone already

    def taken(self, batch: Sequence[Delivery]) -> None:
        self._hand += batch

    async def settled(self, batch: Sequence[Delivery]) -> None:
        self._settled.update(map(id, batch))
        hand = self.source.live(self._hand)
        front = 0
        while front < len(hand) and id(hand[front]) in self._settled:
            front += 1
        done, self._hand = hand[:front], hand[front:]
        together = [d for d in done if id(d) not in self._alone]
        alone = [d for d in self._hand if id(d) in self._settled and id(d) not in self._alone]
        kept = set(map(id, self._hand))
        self._settled &= kept
        self._alone = (self._alone & kept) | set(map(id, alone))
        await self.source.finish_batch(together)
        if alone:
            await self.source.finish_each(alone)


def _round_id(body: bytes) -> str | None:
    """The ``round_id`` a feed event's body names, if it parses."""
    try:
        event = json.loads(body)
    except (ValueError, RecursionError):
        return None
    round_id = event.get("round_id") if isinstance(event, dict) else None
    return round_id if isinstance(round_id, str) else None


def _inbound(delivery: Delivery) -> Inbound:
    return Inbound(
        delivery.body, delivery.tag, delivery.routing_key, delivery.message_id, delivery.oversize
    )


def _age(delivery: Delivery) -> float:
    """:func:`event_age` of a delivery; 0 for an over-size one, which is never parsed."""
    return event_age(delivery.body) if delivery.oversize is None else 0.0


def _log_rejection(handled: Handled) -> None:
    log.info(
        "event rejected",
        event_id=handled.event_id,
        table_id=handled.table_id,
        round_id=handled.round_id,
        code=handled.code,
        reason=handled.reason,
    )
