"""The consumer tells a transient fault from a bad message by the ledger port's own error
types: a ledger out of reach, or a head its key may not append after, is retried, never
quarantined; and it is ready again once the ledger answers, even with a refusal."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import cast

import pytest

from croupier.bus import Delivery
from croupier.bus.memory import MemoryBus
from croupier.ledger import (
    Fenced,
    HeadNotSigned,
    LedgerError,
    LedgerUnavailable,
    StreamAppend,
    open_ledger,
)
from croupier.ledger.signing import LedgerKey
from croupier.metrics import Metrics
from croupier.settlement.consumer import FeedConsumer, is_transient
from croupier.settlement.facts import Fact
from croupier.settlement.settler import Inbound, Settler


async def test_a_ledger_out_of_reach_is_a_fault_to_retry(tmp_path: Path) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'no such directory' / 'ledger.db'}")
    try:
        with pytest.raises(LedgerError) as raised:
            await ledger.append([StreamAppend("s", 0, [Fact("t", {"n": 1}, "k1")])])
        assert is_transient(raised.value)
    finally:
        await ledger.close()


def test_a_permanent_fault_is_not_retried() -> None:
    assert not is_transient(ValueError("a message settlement fails on"))


async def test_a_key_that_handed_the_ledger_over_is_retried_not_quarantined(
    tmp_path: Path,
) -> None:
    old, new = LedgerKey.generate(), LedgerKey.generate()
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", old) as ledger:
        await ledger.migrate()
        await ledger.append([StreamAppend("s", 0, [Fact("t", {"n": 1}, "k1")])])
        await ledger.rotate_key(new.public)
        with pytest.raises(HeadNotSigned) as raised:
            await ledger.append([StreamAppend("s", 1, [Fact("t", {"n": 2}, "k2")])])
    # No message is at fault: nothing is quarantined, nothing acknowledged, until the
    # service runs with a key that may append.
    assert is_transient(raised.value)


class _PartitionedBus(MemoryBus):
    """A source that hands dropped partitions back: every delivery is of partition 3."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: set[int] = set()

    def live(self, batch: Sequence[Delivery]) -> list[Delivery]:
        return [] if 3 in self.dropped else list(batch)

    async def drop(self, partitions: Collection[int]) -> None:
        self.dropped |= set(partitions)


class _CutThenFenced:
    """A settler whose ledger is out of reach once, then refuses the batch: fenced."""

    def __init__(self) -> None:
        self.calls = 0

    async def handle(self, batch: Sequence[Inbound]) -> None:
        self.calls += 1
        if self.calls == 1:
            raise LedgerUnavailable(ConnectionResetError("the connection is closed"))
        raise Fenced("me", [3])

    def forget(self) -> None:
        """What the consumer calls after a fault (the settler's cache read again)."""


async def test_a_batch_fenced_after_a_transient_fault_leaves_the_consumer_ready() -> None:
    """A paused instance, resumed: its connection was ended meanwhile (a transient fault),
    and its retry is fenced, every delivery handed over. The ledger answered; with no
    batch to settle next (its partitions are gone), it must not stay unready."""
    bus, settler = _PartitionedBus(), _CutThenFenced()
    consumer = FeedConsumer(bus, cast(Settler, settler), Metrics())
    await bus.publish_feed("t.round.opened", b"{}", "m1")
    batch = await bus.next_batch(10, 0)

    await consumer._process(batch)

    assert settler.calls == 2 and bus.dropped == {3}
    assert consumer.healthy
