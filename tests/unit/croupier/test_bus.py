"""The bus's batching inbox and the in-process adapter built on it."""

from __future__ import annotations

import asyncio
import time

import pytest

from croupier.bus import UNROUTABLE, Inbox, Outgoing
from croupier.bus.memory import MemoryBus, topic_matches


async def test_a_batch_takes_what_is_waiting_up_to_the_cap() -> None:
    inbox: Inbox[int] = Inbox()
    for n in range(5):
        inbox.put(n)
    assert await inbox.take(3, linger=1.0) == [0, 1, 2]  # full at once: no lingering
    assert await inbox.take(3, linger=0.0) == [3, 4]
    assert len(inbox) == 0


async def test_a_batch_waits_for_its_first_delivery_then_lingers_for_more() -> None:
    inbox: Inbox[str] = Inbox()
    taking = asyncio.create_task(inbox.take(10, linger=0.2))
    await asyncio.sleep(0.05)
    assert not taking.done()  # nothing yet: it waits, however long
    inbox.put("first")
    await asyncio.sleep(0.01)
    inbox.put("second")  # within the linger
    started = time.monotonic()
    assert await taking == ["first", "second"]
    assert time.monotonic() - started < 0.5


async def test_a_full_batch_ends_the_linger_early() -> None:
    inbox: Inbox[int] = Inbox()
    taking = asyncio.create_task(inbox.take(3, linger=5.0))
    for n in range(4):
        await asyncio.sleep(0)
        inbox.put(n)
    assert await asyncio.wait_for(taking, 1.0) == [0, 1, 2]
    assert len(inbox) == 1


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("#", "EUR.p1", True),
        ("EUR.*", "EUR.p1", True),
        ("EUR.*", "GBP.p1", False),
        ("*.p1", "EUR.p1", True),
        ("EUR.#", "EUR", True),
        ("*", "EUR.p1", False),
    ],
)
def test_topic_patterns(pattern: str, key: str, matches: bool) -> None:
    assert topic_matches(pattern, key) is matches


async def test_the_memory_bus_keeps_deliveries_unacked_until_finished() -> None:
    bus = MemoryBus()
    await bus.connect()
    for n in range(3):
        await bus.publish_feed("t1.bet.placed", f'{{"n":{n}}}'.encode(), f"m{n}")
    assert bus.backlog == 3
    batch = await bus.next_batch(10, linger=0.0)
    assert [d.message_id for d in batch] == ["m0", "m1", "m2"] and bus.backlog == 0
    assert set(bus.unacked) == {d.tag for d in batch}
    await bus.finish_batch(batch)
    assert bus.unacked == {}


async def test_the_memory_bus_refuses_results_nobody_binds() -> None:
    bus = MemoryBus()
    received: list[Outgoing] = []
    bus.subscribe("EUR.*", received.append)
    refused = await bus.publish([Outgoing("r1", "EUR.p1", {}), Outgoing("r2", "GBP.p1", {})])
    assert [m.message_id for m in received] == ["r1"]
    assert [(r.message_id, r.kind) for r in refused] == [("r2", UNROUTABLE)]
