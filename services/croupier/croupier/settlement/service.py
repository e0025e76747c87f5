"""The live settlement service: a consumer, an outbox relay and probes around one ledger.

Start order: probes (the HTTP port first: a port in use fails before any delivery is taken),
the ledger schema check (start-up never migrates: ``croupier migrate`` is the owner's step),
broker connection and topology, relay, consumer.
Stop order (SIGTERM): stop taking deliveries, finish and acknowledge the batch in hand,
publish what the outbox holds, close.

Partitioned (given a ``PartitionOwner`` and a ``RoutedAmqpBus``; ``CROUPIER_PARTITIONED=1``):
the instance takes its share of the ledger's partitions before it connects, consumes the
queues of the partitions it holds and nothing else, follows every balance (a partition
taken is consumed, one lost or given back is dropped: its deliveries go back to the broker
unacknowledged), fences every append by the partitions it writes for, and times out only
its own partitions' rounds. A graceful stop releases every lease as soon as the batch in
hand is finished, so the others take them within one poll. A killed instance's leases run
out after their term; its partitions are then taken, and its unacknowledged deliveries
(returned by the broker when its connection dropped) settle at their new owner.

A stop takes at most ``STOP_SECONDS`` in every state, failure loops included (the database
or the broker down, a batch retried or quarantined message by message, the relay stalled
or refused, a signal during start-up): each step is bounded, and what does not finish in
time is cancelled. Nothing is lost by that: a delivery not acknowledged goes back to the
broker (and settles as a no-op if its batch did commit), a message not published stays in
the outbox for the next relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Coroutine
from typing import Any, Final, TypeVar

import structlog

from croupier.bus import Bus
from croupier.bus.routed import RoutedAmqpBus
from croupier.ledger import Ledger, LedgerUnavailable
from croupier.metrics import Metrics
from croupier.settlement.consumer import DEFAULT_HELD_TIMEOUT, DEFAULT_ROUND_TIMEOUT, FeedConsumer
from croupier.settlement.deadletters import record_parked
from croupier.settlement.partitions import PartitionOwner, consume_held
from croupier.settlement.relay import DEFAULT_LEASE_SECONDS, WRITER_GRACE, OutboxRelay
from croupier.settlement.runtime import fewer_collections
from croupier.settlement.settler import Settler
from croupier.web import ProbeServer

log = structlog.get_logger("croupier.settlement.service")

#: Seconds :meth:`Service.stop` takes at most (``croupier serve`` exits within 10 s of SIGTERM).
STOP_SECONDS: Final = 6.0
#: Of which publishing what the outbox holds takes at most.
DRAIN_SECONDS: Final = 3.0
#: What is still running after a stop gets this long to wind down, then is abandoned.
ABANDON_SECONDS: Final = 1.0

T = TypeVar("T")


class Service:
    """Everything ``croupier serve`` runs, on whichever ledger and bus it is given."""

    def __init__(
        self,
        ledger: Ledger,
        bus: Bus,
        *,
        metrics: Metrics | None = None,
        max_batch: int = 1000,
        held_timeout: float = DEFAULT_HELD_TIMEOUT,
        round_timeout: float = DEFAULT_ROUND_TIMEOUT,
        relay_lease: float = DEFAULT_LEASE_SECONDS,
        owner: PartitionOwner | None = None,
    ) -> None:
        """``owner``: share the ledger's partitions with other instances (``bus`` is then a
        :class:`RoutedAmqpBus`); without, this instance settles every table."""
        if owner is not None and not isinstance(bus, RoutedAmqpBus):
            raise TypeError("a partitioned service consumes a RoutedAmqpBus")
        self.ledger = ledger
        self.bus = bus
        self.metrics = metrics or (owner.metrics if owner is not None else Metrics())
        self.metrics.initialise()
        self.metrics.watch_append_lock(lambda: ledger.append_lock_held)
        self.owner = owner
        self._owner_stopped = asyncio.Event()
        if owner is None:
            self.settler = Settler(ledger, dead_letters=True)
        else:
            self.settler = Settler(
                ledger,
                dead_letters=True,
                fence=owner.fence,
                owns=lambda table: owner.partition(table) in owner.held,
            )
        self.relay = OutboxRelay(
            ledger,
            bus,
            self.metrics,
            lease_seconds=relay_lease,
            writer_grace=WRITER_GRACE * relay_lease,
        )
        if owner is not None:
            owner.on_lapsed = self.relay.adopt
        self.consumer = FeedConsumer(
            bus,
            self.settler,
            self.metrics,
            max_batch=max_batch,
            on_commit=lambda report: self.relay.committed(report.outbox),
            held_timeout=held_timeout,
            round_timeout=round_timeout,
        )
        self.probes = ProbeServer(self.metrics, self.readiness)
        self.http_port: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._tuning = contextlib.ExitStack()

    async def start(self, *, http_host: str = "0.0.0.0", http_port: int | None = None) -> None:
        """Check the schema, connect, and start consuming and relaying.

        Raises ``SchemaBehind`` (saying how to migrate) when the schema is not current, and
        ``HeadNotSigned`` (saying why) when the signing key may not append after the
        ledger's head (a rotation without the keyring, a handover to another key).
        """
        self._tuning.enter_context(fewer_collections())  # until stop()
        if http_port is not None:
            self.http_port = await self.probes.start(http_host, http_port)
        log.info("ledger schema is current", version=await self.ledger.check_schema())
        await self.ledger.check_signing()  # HeadNotSigned: this key may not append here
        if open_rounds := await self.settler.load_open():
            log.info("open rounds read back from the ledger", rounds=open_rounds)
        if self.owner is not None:
            await self.owner.join()  # the partition count; shares are taken a poll later
            assert isinstance(self.bus, RoutedAmqpBus)
            self.bus.count = self.owner.count
        await self.bus.connect()
        await self.relay.look()  # before the settler commits: its facts are its own to publish
        self._tasks = [
            asyncio.create_task(self.relay.run(), name="outbox-relay"),
            asyncio.create_task(self.consumer.run(), name="feed-consumer"),
            asyncio.create_task(self._watch_readiness(), name="readiness"),
            asyncio.create_task(self._record_dead_letters(), name="dead-letter-recorder"),
        ]
        if self.owner is None:
            self._tasks.append(asyncio.create_task(self._widen_once_writable(), name="widen"))
        else:
            self._tasks.append(asyncio.create_task(self._own_partitions(), name="partitions"))
        log.info("croupier serving", http_port=self.http_port)

    async def stop(self, within: float = STOP_SECONDS) -> None:
        """Graceful stop within ``within`` seconds: the batch in hand is committed and
        acknowledged first, then what the outbox holds is published, as far as time allows
        (what is left is cancelled: see the module's guarantees). Safe to call after a
        start that did not finish."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within

        def left(reserve: float = 0.0) -> float:
            return max(0.0, deadline - loop.time() - reserve)

        tasks = {task.get_name(): task for task in self._tasks}
        for name in ("readiness", "dead-letter-recorder", "widen", "partitions"):
            if name in tasks:
                tasks[name].cancel()
        self.metrics.ready.set(0)
        await _within(left(DRAIN_SECONDS), "stop consuming", self.bus.stop_consuming())
        self.consumer.stop()
        if "feed-consumer" in tasks:
            await _within(left(DRAIN_SECONDS), "the batch in hand", tasks["feed-consumer"])
        if self.owner is not None and "partitions" in tasks:
            # after the last batch: the others take these partitions within one poll
            await _within(left(DRAIN_SECONDS), "the partition leases", self._release())
        self.relay.stop()
        if "outbox-relay" in tasks:
            await _within(left(2.0), "the relay", tasks["outbox-relay"])
        await _within(min(DRAIN_SECONDS, left(1.0)), "the outbox", self.relay.drain(timeout=60))
        await _within(left(0.5), "the probes", self.probes.close())
        await _within(left(), "the broker connection", self.bus.close())
        self._tuning.close()
        log.info("croupier stopped")

    async def readiness(self) -> dict[str, bool]:
        """Broker connected, consumer attached, database answering, no fault in progress."""
        try:
            async with asyncio.timeout(2):
                await self.ledger.last_position()
            database = True
        except Exception:
            database = False
        checks = {
            "broker": self.bus.connected,
            "consumer": self.bus.attached,
            "database": database and self.consumer.healthy,
            "relay": self.relay.healthy and not self.relay.stalled and not self.relay.marks_missing,
        }
        self.metrics.ready.set(all(checks.values()))
        return checks

    async def _release(self) -> None:
        assert self.owner is not None
        try:
            await self.owner.stop()
        except LedgerUnavailable as error:  # the leases run out by themselves
            log.warning("partition leases not released", error=str(error))

    async def _own_partitions(self) -> None:
        """Balance every poll and consume exactly the partitions held (see
        :func:`~croupier.settlement.partitions.consume_held`)."""
        owner, bus = self.owner, self.bus
        assert owner is not None and isinstance(bus, RoutedAmqpBus)
        await consume_held(owner, bus.assign, lambda: bus.owned, bus.give_back)

    async def _widen_once_writable(self) -> None:
        """Take the full prefetch once the ledger's append lock has been granted: until
        then a crash loop holds (and burns delivery attempts of) a few messages only."""
        delay = 0.1
        while True:
            try:
                await self.ledger.writable()
            except LedgerUnavailable as error:
                log.warning("cannot append yet; consuming a few at a time", error=str(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            await self.bus.widen()
            return

    async def _record_dead_letters(self) -> None:
        """Keep in the ledger what the broker dead-letters (delivery limit, expiry, ...)."""
        while True:
            batch = await self.bus.next_parked(100)
            delay = 0.5
            while True:
                try:
                    facts = await record_parked(self.ledger, batch)
                    break
                except Exception as error:  # the ledger is failing: the same batch again
                    log.warning("dead letters not recorded yet; retrying", error=repr(error))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
            await self.bus.finish_parked(batch)
            for fact in facts:
                self.metrics.rejected.labels(fact.data["code"]).inc()
                log.warning(
                    "the broker dead-lettered a feed message",
                    message_id=fact.data["message_id"],
                    code=fact.data["code"],
                    reason=fact.data["reason"],
                )

    async def _watch_readiness(self, every: float = 2.0) -> None:
        """Keep ``croupier_ready`` current between probes, for alerting; and end a silent
        holder of the append lock (a partitioned or paused instance), so that the ledger
        is free again within the idle limit plus ``every``, standby or not."""
        while True:
            await self.readiness()
            with contextlib.suppress(LedgerUnavailable):
                await self.ledger.end_silent_holders()
            await asyncio.sleep(every)

    async def serve_until_signalled(self, *, http_port: int) -> None:
        """Run until SIGTERM or SIGINT (start-up included), then stop gracefully."""
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        starting = asyncio.create_task(self.start(http_port=http_port), name="start")
        signalled = asyncio.create_task(stopping.wait(), name="signalled")
        await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stop requested while starting")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
        elif starting.exception() is not None:
            signalled.cancel()
            await _within(1.0, "the probes", self.probes.close())
            await _within(1.0, "the broker connection", self.bus.close())
            self._tuning.close()
            starting.result()  # raises what start-up raised
        await signalled
        log.info("stop requested; finishing the batch in hand")
        await self.stop()


async def _within(seconds: float, what: str, step: Awaitable[object]) -> None:
    """Wait for one step of a stop for ``seconds`` at most, then cancel it without waiting
    for it to wind down (a driver cancelling a call on a connection that answers nothing
    can take as long as the call's own timeout); its failure is logged, not raised."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=max(seconds, 0.0))
    if not done:
        task.cancel()
        log.warning("stopping: gave up waiting", step=what, seconds=round(seconds, 2))
    elif not task.cancelled() and task.exception() is not None:
        log.warning("stopping: a step failed", step=what, error=repr(task.exception()))


def run_to_stop(main: Coroutine[Any, Any, T], grace: float = ABANDON_SECONDS) -> T:
    """``asyncio.run(main)``, except that tasks still running when ``main`` is done get
    ``grace`` seconds to wind down after being cancelled, and are then abandoned with the
    event loop: a stop's deadline holds whatever a driver does on cancellation."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=grace))
            loop.run_until_complete(
                asyncio.wait({loop.create_task(loop.shutdown_asyncgens())}, timeout=grace)
            )
        finally:
            asyncio.set_event_loop(None)
            loop.close()
