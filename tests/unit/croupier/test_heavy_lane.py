"""A heavy round harms nobody else: its closing is settled in a lane of its own, and other
tables' rounds are settled and acknowledged meanwhile, each table's events in order
(``croupier.settlement.consumer``), on the embedded bus and ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from croupier.bus import Delivery
from croupier.bus.memory import MemoryBus
from croupier.ledger import Ledger, RecordedEvent, open_ledger
from croupier.metrics import Metrics
from croupier.settlement.consumer import FeedConsumer, _Acks
from croupier.settlement.round import SETTLED, stream_name
from croupier.settlement.settler import BatchReport, Inbound, Settler
from studio import StudioConfig, TableSpec, simulate
from studio.message import FeedMessage

#: Players of a shared hand with more than ``HEAVY_WAGERS`` wagers (an ante each, and
#: side bets and calls).
HEAVY_PLAYERS = 4_000


def _feed(table: str, players: int, rounds: int) -> list[FeedMessage]:
    spec = TableSpec(table, "casino-holdem/classic", players=players)
    return list(simulate(StudioConfig(tables=(spec,), rounds=rounds, seed=7)))


async def _publish(bus: MemoryBus, messages: Sequence[FeedMessage]) -> None:
    for message in messages:
        await bus.publish_feed(message.routing_key, message.body, message.event_id)


async def _until(condition: Callable[[], bool], seconds: float = 60) -> None:
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


def _round_of(message: FeedMessage) -> str:
    assert message.event is not None
    return str(message.event["round_id"])


def _is_closing(message: FeedMessage) -> bool:
    return message.routing_key.endswith(".round.completed")


async def _positions(ledger: Ledger, table: str, round_id: str) -> list[RecordedEvent]:
    stream = stream_name(table, round_id)
    return (await ledger.read_streams([stream]))[stream]


async def test_another_tables_round_is_settled_while_a_heavy_closing_is_in_hand(
    tmp_path: Path,
) -> None:
    """The heavy hand's closing, another table's whole round and the heavy table's next
    round arrive together: the other table's round is committed before the heavy closing,
    the heavy table's next round after it, every round settles, every delivery is
    acknowledged once (the memory bus asserts it)."""
    heavy = _feed("heavy", HEAVY_PLAYERS, 2)
    first_closing = next(i for i, m in enumerate(heavy) if _is_closing(m))
    other = _feed("other", 1, 1)
    closed: list[str] = []

    def committed(report: BatchReport) -> None:
        closed.extend(r.stream for r in report.closed)

    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate()
        bus, settler = MemoryBus(), Settler(ledger, dead_letters=True)
        consumer = FeedConsumer(bus, settler, Metrics(), max_batch=2_000, on_commit=committed)
        running = asyncio.create_task(consumer.run())
        try:
            await _publish(bus, heavy[:first_closing])
            await _until(lambda: not bus.backlog and not bus.unacked)
            assert settler.closes_heavy("heavy", _round_of(heavy[0]))
            await _publish(bus, [heavy[first_closing], *other, *heavy[first_closing + 1 :]])
            await _until(lambda: len(closed) == 3 and not bus.unacked)
        finally:
            consumer.stop()
            await running
        rounds = [stream.split(":")[1] for stream in closed]
        assert rounds == ["other", "heavy", "heavy"]
        first, second = [
            await _positions(ledger, "heavy", _round_of(m)) for m in (heavy[0], heavy[-1])
        ]
        closing = next(r for r in first if r.type == SETTLED)
        assert all(r.position > closing.position for r in second)  # the table's order
        assert not bus.unacked and not bus.backlog


async def test_a_light_closing_stays_in_the_batch(tmp_path: Path) -> None:
    """Below ``HEAVY_WAGERS`` nothing changes: the rounds settle in the order they close."""
    light = _feed("light", 10, 1)
    other = _feed("other", 1, 1)
    closed: list[str] = []
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate()
        bus, settler = MemoryBus(), Settler(ledger, dead_letters=True)
        consumer = FeedConsumer(
            bus,
            settler,
            Metrics(),
            on_commit=lambda report: closed.extend(r.stream for r in report.closed),
        )
        running = asyncio.create_task(consumer.run())
        try:
            await _publish(bus, light[:-1])
            await _until(lambda: not bus.backlog and not bus.unacked)
            assert not settler.closes_heavy("light", _round_of(light[0]))
            await _publish(bus, [light[-1], *other])
            await _until(lambda: len(closed) == 2 and not bus.unacked)
        finally:
            consumer.stop()
            await running
        assert [stream.split(":")[1] for stream in closed] == ["light", "other"]


class _Acknowledging(MemoryBus):
    """Notes each acknowledgement: ``("many", tags)`` or ``("alone", tags)``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[int]]] = []

    async def finish_batch(self, batch: Sequence[Delivery]) -> None:
        self.calls.append(("many", [d.tag for d in batch]))
        await super().finish_batch(batch)

    async def finish_each(self, deliveries: Sequence[Delivery]) -> None:
        self.calls.append(("alone", [d.tag for d in deliveries]))
        await super().finish_each(deliveries)


async def test_deliveries_settled_before_one_taken_earlier_are_acknowledged_alone() -> None:
    bus = _Acknowledging()
    for n in range(5):
        await bus.publish_feed(f"t{n}.bet.placed", b"{}", f"m{n}")
    one, two, three, four, five = await bus.next_batch(10, 0)
    acks = _Acks(bus)
    acks.taken([one, two, three, four, five])

    await acks.settled([three, four])  # beside one and two, still in the lane
    await acks.settled([one])
    await acks.settled([two])
    await acks.settled([five])

    assert bus.calls == [
        ("many", []),
        ("alone", [3, 4]),
        ("many", [1]),
        ("many", [2]),  # four and three were acknowledged alone: not again
        ("many", [5]),
    ]
    assert not bus.unacked


async def test_a_sweep_leaves_the_rounds_of_busy_tables_alone(tmp_path: Path) -> None:
    """Timeouts wait while a table's deliveries are in the lane (its round is being
    decided there), and apply to the other tables."""
    feeds = [_feed(table, 1, 1) for table in ("busy", "idle")]
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        await ledger.migrate()
        settler = Settler(ledger)
        for feed in feeds:
            await settler.handle([Inbound(m.body, n) for n, m in enumerate(feed[:2])])
        report = await settler.expire(300, 0, busy={"busy"})
        assert [r.stream.split(":")[1] for r in report.closed] == ["idle"]
        report = await settler.expire(300, 0)
        assert [r.stream.split(":")[1] for r in report.closed] == ["busy"]
