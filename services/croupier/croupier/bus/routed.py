"""The feed routed by partition on RabbitMQ 3.10: an instance consumes the queues of the
partitions it owns, and the router binds tables seen for the first time.

Topology (``croupier.bus.topology.routed_topology``; docs/scale.md): ``studio.feed`` is bound
whole to ``croupier.feed.in``; a binding ``<table_id>.#`` per known table leads to the
table's partition queue ``croupier.feed.pNN`` (quorum, single active consumer, delivery
limit, dead-lettering as the single feed queue); a table not bound yet falls through the
alternate exchange into ``croupier.feed.unrouted``.

Guarantees:
- **One table, one queue.** A table's binding leads to ``partition_of(table_id, P)``, the
  partition its rounds are fenced by, and bindings are durable. A message of a table not
  bound yet is taken by the router (single active consumer on ``croupier.feed.unrouted``,
  in whichever instance the broker picks): it binds the table, republishes the message to
  ``croupier.feed.in`` (persistent, mandatory, confirmed: now to the partition queue) and
  only then acknowledges it. A crash in between republishes it again (a duplicate, which the
  ledger makes a no-op). The few messages that raced the binding reach the partition queue
  after later ones; a round's events are held until their ``seq`` gap fills, so order
  within a round is restored by the settler.
- **A binding pruned is made again.** ``croupier partitions --prune-bindings`` may remove a
  table's binding at any time, this router's memory of binding it notwithstanding: every
  copy the router republishes carries the header :data:`ROUTED_HEADER`, and a message that
  comes back to ``croupier.feed.unrouted`` with it (its binding gone since) has its table
  bound again before it is republished. So the first message of a pruned table that comes
  back takes one extra turn through the router, and nothing is lost or left looping.
- **A partition, one channel.** Each partition owned is consumed on a channel of its own.
  Giving a partition up (:meth:`RoutedAmqpBus.drop`: lease lost, fenced, or released)
  closes that channel: the broker returns every delivery of it not acknowledged to the
  queue, where the single active consumer of the partition's new owner takes them; those
  still in hand here are dropped when taken (:meth:`next_batch`) and never acknowledged.
  Nothing of a partition given up is dead-lettered by this instance.
- **Given back at a batch boundary.** A partition given back to balance the fleet
  (:meth:`RoutedAmqpBus.give_back`, before its lease is released) is first no longer
  consumed, then its deliveries in hand are left to be settled and acknowledged, for up to
  a bound; only what is unacknowledged after that goes back to the broker (its channel
  closed by the next :meth:`assign`, or by :meth:`drop` when a batch of it is fenced first:
  never acknowledged after the release). The deliveries in hand are counted per channel
  from arrival to acknowledgement.
- Acknowledgements are per channel: a batch mixing partitions acknowledges each channel's
  last delivery (``multiple``), after the ledger commit that covers the batch.
- Not applied here: the initial prefetch of the single queue (``INITIAL_PREFETCH``); each
  partition is consumed at ``partition_prefetch`` from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Collection, Sequence
from typing import Final, cast

import aio_pika
import aiormq
import structlog
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

from contract.consuming import consume_inline
from contract.feed import TABLE_ID_PATTERN
from croupier.bus import DEAD_LETTER_RECORD_QUEUE, BusError, Delivery, routed_table
from croupier.bus.amqp import AmqpBus, declare_topology
from croupier.bus.topology import (
    ROUTED_EXCHANGE,
    UNROUTED_QUEUE,
    partition_queue,
    routed_topology,
    table_binding,
)
from croupier.ledger.partitions import partition_of

log = structlog.get_logger("croupier.bus.routed")

#: Deliveries in hand per partition consumed.
PARTITION_PREFETCH: Final = 200
#: Messages of new tables the router holds at once.
ROUTER_PREFETCH: Final = 50
_TABLE_ID: Final = re.compile(TABLE_ID_PATTERN)
#: Set on every copy the router republishes: one seen again by the router lost its binding.
ROUTED_HEADER: Final = "croupier-routed"


class RoutedAmqpBus(AmqpBus):
    """Consumes the partition queues it is given (:meth:`assign`), routes new tables, and
    publishes results as :class:`AmqpBus` does. ``count``: the ledger's partition count."""

    def __init__(
        self, url: str, count: int, *, partition_prefetch: int = PARTITION_PREFETCH
    ) -> None:
        super().__init__(url)
        self.count = count
        self.partition_prefetch = partition_prefetch
        #: Partition -> its channel, and the aiormq channel and tag its consumer runs on.
        self._partitions: dict[int, tuple[AbstractRobustChannel, aiormq.Channel, str]] = {}
        self._assigning = asyncio.Lock()
        self._router: AbstractRobustChannel | None = None
        #: Tables bound by this process (binding again is harmless, only slower; a binding
        #: pruned since shows in the message, which carries ROUTED_HEADER).
        self._bound: set[str] = set()
        self._resuming: set[asyncio.Task[None]] = set()
        #: Delivery tags in hand (not acknowledged), by id() of their aiormq channel.
        self._in_hand: dict[int, set[int]] = {}
        #: Partitions given back and no longer consumed, their channels not closed yet.
        self._leaving: dict[int, tuple[AbstractRobustChannel, aiormq.Channel]] = {}

    async def connect(self) -> None:
        await self.connect_publisher()
        assert self._connection is not None
        channel = await self._connection.channel()
        await declare_topology(channel, routed_topology(self.count))
        await channel.close()
        record_channel = await self._connection.channel()
        await record_channel.set_qos(prefetch_count=100)
        record = await record_channel.get_queue(DEAD_LETTER_RECORD_QUEUE)
        await record.consume(self._receive_parked)  # a robust consumer: restored on reconnect
        self._router = await self._connection.channel()
        await self._router.set_qos(prefetch_count=ROUTER_PREFETCH)
        unrouted = await self._router.get_queue(UNROUTED_QUEUE)
        await unrouted.consume(self._route)  # single active consumer: one router at a time
        self._consuming = True

    async def widen(self) -> None:
        """Nothing to widen: partitions are consumed at ``partition_prefetch`` from the start."""

    @property
    def owned(self) -> frozenset[int]:
        """The partitions consumed now."""
        return frozenset(self._partitions)

    @property
    def attached(self) -> bool:
        return self.connected and all(not c.is_closed for _, c, _ in self._partitions.values())

    async def assign(self, partitions: Collection[int]) -> None:
        """Consume exactly ``partitions``: start the new ones, :meth:`drop` the others (and
        close the channels of those given back)."""
        async with self._assigning:
            await self._close_leaving()
            gone = [p for p in self._partitions if p not in partitions]
            await self._drop(gone)
            if not self._consuming:
                return
            for partition in sorted(set(partitions) - set(self._partitions)):
                await self._start(partition)

    async def drop(self, partitions: Collection[int]) -> None:
        """Stop consuming ``partitions`` and hand their unacknowledged deliveries back to the
        broker (their channels closed), for their new owner: those given back and not
        closed yet too, so that a batch fenced after their release acknowledges none."""
        async with self._assigning:
            await self._close_leaving([p for p in partitions if p in self._leaving])
            await self._drop([p for p in partitions if p in self._partitions])

    async def give_back(self, partitions: Collection[int], within: float) -> None:
        """Stop consuming ``partitions`` and wait up to ``within`` s for their deliveries in
        hand to be acknowledged; their channels stay open until the next :meth:`assign`,
        which consumes them again if they are still held (their release failed)."""
        async with self._assigning:
            leaving = [p for p in partitions if p in self._partitions]
            for p in leaving:
                channel, underlay, tag = self._partitions.pop(p)
                self._leaving[p] = (channel, underlay)
                with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                    await underlay.basic_cancel(tag)
                log.info("giving a partition back once its deliveries in hand settle", partition=p)
        channels = [id(self._leaving[p][1]) for p in leaving]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while any(self._in_hand.get(c) for c in channels):
                    await asyncio.sleep(0.01)
        unsettled = sum(len(self._in_hand.get(c, ())) for c in channels)
        if unsettled:
            log.warning(
                "given back with deliveries in hand: they go back to the broker",
                partitions=leaving,
                deliveries=unsettled,
                within=within,
            )

    async def _close_leaving(self, partitions: Collection[int] | None = None) -> None:
        for p in list(self._leaving) if partitions is None else partitions:
            channel, underlay = self._leaving.pop(p)
            self._in_hand.pop(id(underlay), None)
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError, RuntimeError):
                await channel.close()  # what is still unacknowledged goes back to the queue

    def live(self, batch: Sequence[Delivery]) -> list[Delivery]:
        """The deliveries of ``batch`` that can still be acknowledged (their partition is
        still consumed here)."""
        return [d for d in batch if not cast(aiormq.Channel, d.handle).is_closed]

    async def _start(self, partition: int) -> None:
        assert self._connection is not None
        channel = await self._connection.channel()
        await channel.set_qos(prefetch_count=self.partition_prefetch)
        underlay = cast(aiormq.Channel, await channel.get_underlay_channel())
        queue = partition_queue(partition, self.count)
        tag = await consume_inline(underlay, queue, self._receive)
        self._partitions[partition] = (channel, underlay, tag)
        channel.reopen_callbacks.add(lambda *_: self._reopened(partition))
        log.info("consuming partition", partition=partition, queue=queue)

    def _reopened(self, partition: int) -> None:
        """aio-pika reopened a partition's channel after a reconnect: consume it again."""
        if partition in self._partitions:
            task = asyncio.create_task(self._resume(partition), name=f"resume-p{partition}")
            self._resuming.add(task)
            task.add_done_callback(self._resuming.discard)

    async def _resume(self, partition: int) -> None:
        delay = 0.1
        while self._consuming and partition in self._partitions:
            channel, underlay, _ = self._partitions[partition]
            try:
                fresh = cast(aiormq.Channel, await channel.get_underlay_channel())
                if fresh is underlay and not underlay.is_closed:
                    return
                queue = partition_queue(partition, self.count)
                tag = await consume_inline(fresh, queue, self._receive)
                self._in_hand.pop(id(underlay), None)  # the broker has those back already
                if partition in self._partitions:
                    self._partitions[partition] = (channel, fresh, tag)
                return
            except Exception as error:
                log.warning("cannot consume the partition again yet", error=repr(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _drop(self, partitions: Sequence[int]) -> None:
        for p in partitions:
            channel, underlay, _ = self._partitions.pop(p)
            self._in_hand.pop(id(underlay), None)
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError, RuntimeError):
                await channel.close()  # the broker requeues what this channel did not ack
            log.info("partition given up; its deliveries go back to the broker", partition=p)

    async def stop_consuming(self) -> None:
        """Take no new deliveries, on any partition; those in hand can still be finished."""
        self._consuming = False
        async with self._assigning:
            for _, underlay, tag in self._partitions.values():
                if not underlay.is_closed:
                    with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError):
                        await underlay.basic_cancel(tag)
        if self._router is not None:
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError, RuntimeError):
                await self._router.close()  # a message being routed comes back to the queue

    def _receive(self, message: DeliveredMessage) -> None:
        delivery = message.delivery
        assert isinstance(delivery, spec.Basic.Deliver)
        self._in_hand.setdefault(id(message.channel), set()).add(delivery.delivery_tag or 0)
        super()._receive(message)

    async def finish_each(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            self._in_hand.get(id(delivery.handle), set()).discard(delivery.tag)
        await super().finish_each(deliveries)

    async def finish_batch(self, batch: Sequence[Delivery]) -> None:
        last: dict[int, Delivery] = {}
        for delivery in batch:
            last[id(delivery.handle)] = delivery  # tags grow per channel, in arrival order
        for delivery in last.values():
            channel = delivery.handle
            assert isinstance(channel, aiormq.Channel)
            in_hand = self._in_hand.get(id(channel))
            if in_hand:
                in_hand.difference_update([t for t in in_hand if t <= delivery.tag])
            try:
                await channel.basic_ack(delivery.tag, multiple=True)
            except (
                aiormq.exceptions.AMQPError,
                aiormq.exceptions.ChannelInvalidStateError,
            ) as error:
                # The ledger has the batch; the broker will redeliver it and it will be a no-op.
                log.warning("batch not acknowledged; it will be redelivered", error=str(error))

    # -- the router ------------------------------------------------------------------------

    async def _route(self, message: AbstractIncomingMessage) -> None:
        """Bind the message's table to its partition, republish it there, then ack it."""
        routing_key = message.routing_key or ""
        table = routed_table(routing_key)
        partition = partition_of(table, self.count)
        queue = partition_queue(partition, self.count)
        try:
            if _TABLE_ID.match(table):
                if table not in self._bound or (message.headers or {}).get(ROUTED_HEADER):
                    assert self._router is not None
                    bound = await self._router.get_queue(queue, ensure=False)
                    await bound.bind(ROUTED_EXCHANGE, table_binding(table))
                    self._bound.add(table)
                    log.info("table routed", table_id=table, partition=partition, queue=queue)
                exchange, key = ROUTED_EXCHANGE, routing_key
            else:
                # Not a table id the contract allows (it could hold a wildcard): no binding,
                # straight to the queue of its partition, where the settler rejects it.
                exchange, key = "", queue
            await self._republish(message, exchange, key)
        except (BusError, aiormq.exceptions.AMQPError, ConnectionError) as error:
            log.warning("new table not routed yet; it comes again", error=repr(error))
            with contextlib.suppress(aiormq.exceptions.AMQPError, ConnectionError, RuntimeError):
                await message.nack(requeue=True)
            return
        await message.ack()

    async def _republish(self, message: AbstractIncomingMessage, exchange: str, key: str) -> None:
        if self._publish_channel is None:
            raise BusError("not connected")
        copy = aio_pika.Message(
            message.body,
            headers={**(message.headers or {}), ROUTED_HEADER: True},
            content_type=message.content_type,
            content_encoding=message.content_encoding,
            message_id=message.message_id,
            timestamp=message.timestamp,
            type=message.type,
            app_id=message.app_id,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        target = (
            self._publish_channel.default_exchange
            if exchange == ""
            else await self._publish_channel.get_exchange(exchange, ensure=False)
        )
        try:
            await target.publish(copy, routing_key=key, mandatory=True)
        except aio_pika.exceptions.DeliveryError as error:
            raise BusError(f"republish refused: {error!r}") from error


async def unbind_tables(url: str, tables: Collection[str], count: int) -> None:
    """Remove the binding ``<table_id>.#`` of each of ``tables`` from ``croupier.feed.in`` to
    its partition's queue, at the broker at ``url`` (one of a ledger of ``count``
    partitions). A binding already absent is no error (the broker says nothing either way).
    Raises :class:`BusError` when the vhost has no routed feed."""
    connection = await aio_pika.connect(url, timeout=30)
    try:
        channel = await connection.channel()
        try:
            routed = await channel.get_exchange(ROUTED_EXCHANGE)
        except aiormq.exceptions.ChannelNotFoundEntity:
            raise BusError(f"the vhost has no {ROUTED_EXCHANGE} (not a routed feed)") from None
        for table in tables:
            queue = await channel.get_queue(
                partition_queue(partition_of(table, count), count), ensure=False
            )
            await queue.unbind(routed, table_binding(table))
    finally:
        await connection.close()
