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
    VersionConflict,
    open_ledger,
)
from croupier.ledger.signing import LedgerKey
from croupier.metrics import Metrics
from croupier.settlement.consumer import (
    LOST_RACES_AT_ONCE,
    RETRY_REASONS,
    FeedConsumer,
    is_transient,
    retry_reason,
)
from croupier.settlement.facts import Fact
from croupier.settlement.settler import BatchReport, Inbound, Settler


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


class _LosesRaces:
    """A settler whose append meets ``losses`` version conflicts (another writer moved a
    shared jackpot meter on), then commits; it notes whether the consumer was healthy at
    each attempt."""

    def __init__(self, consumer: list[FeedConsumer], losses: int) -> None:
        self.consumer, self.losses = consumer, losses
        self.healthy_at: list[bool] = []

    async def handle(self, batch: Sequence[Inbound]) -> BatchReport:
        self.healthy_at.append(self.consumer[0].healthy)
        if len(self.healthy_at) <= self.losses:
            raise VersionConflict("jackpot:casino-holdem/progressive:EUR", 4, 5)
        return BatchReport()


async def _retried(losses: int) -> tuple[_LosesRaces, Metrics]:
    bus, metrics, consumer = MemoryBus(), Metrics(), []
    settler = _LosesRaces(consumer, losses)
    consumer.append(FeedConsumer(bus, cast(Settler, settler), metrics))
    await bus.publish_feed("t.round.opened", b"{}", "m1")
    await consumer[0]._process(await bus.next_batch(10, 0))
    return settler, metrics


def _retries(metrics: Metrics, reason: str) -> float:
    return metrics.registry.get_sample_value("croupier_batch_retries_total", {"reason": reason})


async def test_a_lost_race_is_decided_again_at_once_and_counted_not_a_fault() -> None:
    """Two instances moving one jackpot pool lose races to each other in normal work: the
    batch is decided again at once, the consumer stays ready, and the race is counted. Past
    ``LOST_RACES_AT_ONCE`` in a row it is handled as a transient fault (backing off, not
    ready meanwhile), so a conflict that does not clear cannot spin."""
    settler, metrics = await _retried(LOST_RACES_AT_ONCE)
    assert settler.healthy_at == [True] * (LOST_RACES_AT_ONCE + 1)
    assert _retries(metrics, "lost_race") == LOST_RACES_AT_ONCE

    settler, metrics = await _retried(LOST_RACES_AT_ONCE + 1)
    assert settler.healthy_at == [True] * (LOST_RACES_AT_ONCE + 1) + [False]
    assert _retries(metrics, "lost_race") == LOST_RACES_AT_ONCE + 1


def test_every_retry_reason_is_listed_in_one_place() -> None:
    assert retry_reason(VersionConflict("s", 1, 2)) == "lost_race"
    assert retry_reason(LedgerUnavailable(ConnectionResetError())) == "ledger_unavailable"
    assert retry_reason(HeadNotSigned(3, 2)) == "head_not_signed"
    assert retry_reason(TimeoutError()) == "io"
    assert retry_reason(RuntimeError()) == "error"
    assert {reason for _, reason in RETRY_REASONS} | {"error"} == {
        "lost_race", "ledger_unavailable", "broker", "head_not_signed", "io", "error"
    }  # fmt: skip
