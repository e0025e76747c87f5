"""The bus's batching inbox, what a feed delivery keeps, and the in-process adapter."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from contract.feed import MAX_BODY_BYTES
from croupier.bus import (
    KEPT_BYTES,
    MAX_BATCH_BYTES,
    UNROUTABLE,
    Inbox,
    Outgoing,
    Oversize,
    delivered,
    feed_inbox,
)
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


async def test_a_batch_takes_at_most_its_weight_but_always_one() -> None:
    inbox: Inbox[bytes] = Inbox(len, max_weight=10)
    for body in (b"aaaa", b"bbbb", b"cccc", b"d" * 30, b"e"):
        inbox.put(body)
    assert await inbox.take(100, linger=5.0) == [b"aaaa", b"bbbb"]  # full by weight: no linger
    assert await inbox.take(100, linger=0.0) == [b"cccc"]
    assert await inbox.take(100, linger=0.0) == [b"d" * 30]  # heavier than a batch: alone
    assert await inbox.take(100, linger=0.0) == [b"e"]


async def test_feed_batches_hold_at_most_max_batch_bytes_of_bodies() -> None:
    inbox = feed_inbox()
    for tag in range(1, 1001):
        inbox.put(delivered(b"x" * MAX_BODY_BYTES, tag, "t.x"))
    batch = await inbox.take(1000, linger=0.0)
    assert len(batch) == MAX_BATCH_BYTES // MAX_BODY_BYTES < 1000
    assert sum(len(d.body) for d in batch) <= MAX_BATCH_BYTES
    small = feed_inbox()
    for tag in range(1, 1001):
        small.put(delivered(b"x" * 500, tag, "t.x"))
    assert len(await small.take(1000, linger=0.0)) == 1000  # the usual event: a full batch


def test_a_delivery_over_the_maximum_keeps_its_first_bytes_its_size_and_digest() -> None:
    whole = b"y" * MAX_BODY_BYTES
    assert delivered(whole, 1, "t.x").body is whole
    assert delivered(whole, 1, "t.x").oversize is None
    over = b"z" * (MAX_BODY_BYTES + 1)
    cut = delivered(over, 2, "t.x", "m2")
    assert cut.body == over[:KEPT_BYTES] and len(cut.body) == KEPT_BYTES
    assert cut.oversize == Oversize(len(over), hashlib.sha256(over).hexdigest())
    assert (cut.tag, cut.routing_key, cut.message_id) == (2, "t.x", "m2")


async def test_the_memory_bus_cuts_an_over_size_message_as_it_arrives() -> None:
    bus = MemoryBus()
    await bus.connect()
    await bus.publish_feed("t.x", b"w" * (MAX_BODY_BYTES * 4), "m1")
    (taken,) = await bus.next_batch(10, 0.0)
    assert len(taken.body) == KEPT_BYTES
    assert taken.oversize is not None and taken.oversize.size == MAX_BODY_BYTES * 4


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
