"""Partitions held are consumed without delaying their renewal: starting consumers on a
busy event loop can take seconds, longer than a lease term, and the leases must not run out
meanwhile (``croupier.settlement.partitions.consume_held``), on the embedded ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from croupier.ledger import open_ledger
from croupier.metrics import Metrics
from croupier.settlement.partitions import PartitionOwner, consume_held

PARTITIONS = 8
TERM = 1.0
#: Seconds to start one partition's consumer: the eight take three terms and more.
START_SECONDS = 0.4


class SlowConsumers:
    """Starts a partition's consumer in ``START_SECONDS``; drops one at once."""

    def __init__(self) -> None:
        self.consumed: set[int] = set()
        self.failures = 0

    async def assign(self, held: frozenset[int]) -> None:
        self.consumed &= held
        for partition in sorted(held - self.consumed):
            await asyncio.sleep(START_SECONDS)
            if self.failures:
                self.failures -= 1
                raise ConnectionError("the broker is reconnecting")
            self.consumed.add(partition)


async def _consume(owner: PartitionOwner, consumers: SlowConsumers) -> None:
    await consume_held(owner, consumers.assign, lambda: consumers.consumed)


def _lost(metrics: Metrics) -> float:
    return metrics.partition_handovers.labels("lost")._value.get()


async def _until(condition: Callable[[], bool], seconds: float) -> None:
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.05)


async def test_leases_are_renewed_while_the_consumers_start(tmp_path: Path) -> None:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate(partitions=PARTITIONS)
        metrics = Metrics()
        owner = PartitionOwner(ledger, "instance-a", metrics, term=TERM, poll=0.1)
        consumers = SlowConsumers()
        running = asyncio.create_task(
            consume_held(owner, consumers.assign, lambda: consumers.consumed)
        )
        try:
            await _until(lambda: len(consumers.consumed) == PARTITIONS, 20)
            await asyncio.sleep(3 * owner.poll)  # balances after the last consumer started
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        assert _lost(metrics) == 0
        assert owner.held == dict.fromkeys(range(PARTITIONS), 1)  # the first epochs, kept


async def test_a_failed_start_is_tried_again_and_a_partition_given_back_is_dropped(
    tmp_path: Path,
) -> None:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate(partitions=PARTITIONS)
        owner = PartitionOwner(ledger, "instance-a", Metrics(), term=TERM, poll=0.1)
        consumers = SlowConsumers()
        consumers.failures = 2
        running = asyncio.create_task(
            consume_held(owner, consumers.assign, lambda: consumers.consumed)
        )
        try:
            await _until(lambda: len(consumers.consumed) == PARTITIONS, 30)
            other = PartitionOwner(ledger, "instance-b", Metrics(), term=TERM, poll=0.1)
            await other.balance()  # a second instance: half the partitions go back to it
            await _until(lambda: len(consumers.consumed) == PARTITIONS // 2, 10)
            await other.balance()
            assert set(other.held) | consumers.consumed == set(range(PARTITIONS))
            assert not set(other.held) & consumers.consumed
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)


async def test_instances_started_together_take_their_shares_and_give_nothing_back(
    tmp_path: Path,
) -> None:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate(partitions=PARTITIONS)
        metrics = [Metrics() for _ in range(4)]
        owners = [
            PartitionOwner(ledger, f"instance-{n}", m, term=TERM, poll=0.1)
            for n, m in enumerate(metrics)
        ]
        fleet = [SlowConsumers() for _ in owners]
        running = []
        for owner, consumers in zip(owners, fleet, strict=True):  # started within one poll
            running.append(asyncio.create_task(_consume(owner, consumers)))
            await asyncio.sleep(0.02)
        try:
            await _until(lambda: sorted(len(c.consumed) for c in fleet) == [2, 2, 2, 2], 20)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        released = [m.partition_handovers.labels("released")._value.get() for m in metrics]
        assert released == [0, 0, 0, 0]


class GivingBack(SlowConsumers):
    """Like the routed feed: a partition given back is consumed no more at once, and its
    channel (``leaving``) is closed by the next assign."""

    def __init__(self) -> None:
        super().__init__()
        self.leaving: set[int] = set()

    async def give_back(self, partitions: Sequence[int], within: float) -> None:
        self.consumed -= set(partitions)
        self.leaving |= set(partitions)

    async def assign(self, held: frozenset[int]) -> None:
        self.leaving.clear()
        await super().assign(held)


async def test_a_partition_given_back_is_closed_as_soon_as_it_is_released(
    tmp_path: Path,
) -> None:
    """What is given back and released leaves the feed at once (its deliveries still in
    hand go back to the broker), not at the next change of what is held."""
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate(partitions=PARTITIONS)
        owner = PartitionOwner(ledger, "instance-a", Metrics(), term=TERM, poll=0.1)
        consumers = GivingBack()
        running = asyncio.create_task(
            consume_held(owner, consumers.assign, lambda: consumers.consumed, consumers.give_back)
        )
        try:
            await _until(lambda: len(consumers.consumed) == PARTITIONS, 30)
            other = PartitionOwner(ledger, "instance-b", Metrics(), term=TERM, poll=0.1)
            await other.join()
            await _until(lambda: len(owner.held) == PARTITIONS // 2, 10)
            await _until(lambda: not consumers.leaving, 10 * owner.poll)
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
