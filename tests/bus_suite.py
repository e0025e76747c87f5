"""The one test suite every bus adapter must pass: the in-process bus as RabbitMQ does.

A subclass provides the ``bus`` fixture (a connected bus on a topology of its own) and
three ways of reaching the broker behind the bus's back: ``feed`` publishes a studio event,
``wallet`` binds a settlement queue and returns how to take from it, and ``parked`` takes
what reached the dead-letter queue.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_EXCHANGE,
    REASON_HEADER,
    TOO_LONG,
    UNROUTABLE,
    Bus,
    Delivery,
    Outgoing,
)


@dataclass(frozen=True)
class Taken:
    """A message as a wallet or an operator sees it."""

    message_id: str | None
    routing_key: str
    body: bytes
    headers: dict[str, str]


Take = Callable[[int], Awaitable[list[Taken]]]


def result(currency: str, player: str, n: int) -> Outgoing:
    body = {"message_id": f"r-{currency}-{player}-{n}", "currency": currency, "n": n}
    return Outgoing(str(body["message_id"]), f"{currency}.{player}", body)


async def take_all(bus: Bus, count: int, cap: int) -> list[list[Delivery]]:
    """Batches until ``count`` deliveries are in hand, each finished once taken."""
    batches: list[list[Delivery]] = []
    while sum(map(len, batches)) < count:
        batch = await asyncio.wait_for(bus.next_batch(cap, linger=0.2), 20)
        await bus.finish_batch(batch)
        batches.append(batch)
    return batches


async def _taken(bus: Bus, count: int) -> list[list[Delivery]]:
    """Batches until ``count`` deliveries are in hand, none acknowledged."""
    batches: list[list[Delivery]] = []
    while sum(map(len, batches)) < count:
        batches.append(await asyncio.wait_for(bus.next_batch(count, linger=0.2), 20))
    return batches


class BusSuite:
    """Behaviour common to all adapters; subclasses supply the broker."""

    @pytest.fixture
    async def bus(self) -> AsyncIterator[Bus]:
        raise NotImplementedError
        yield

    async def feed(self, bus: Bus, routing_key: str, body: bytes, message_id: str) -> None:
        raise NotImplementedError

    async def wallet(self, bus: Bus, pattern: str) -> Take:
        raise NotImplementedError

    async def parked(self, bus: Bus, count: int) -> list[Taken]:
        raise NotImplementedError

    async def test_deliveries_keep_their_order_in_capped_batches(self, bus: Bus) -> None:
        sent = [(f"T{n % 2}.bet.placed", f'{{"n":{n}}}'.encode(), f"e{n}") for n in range(9)]
        for routing_key, body, message_id in sent:
            await self.feed(bus, routing_key, body, message_id)
        batches = await take_all(bus, len(sent), cap=4)
        assert all(1 <= len(batch) <= 4 for batch in batches)
        delivered = [(d.routing_key, d.body, d.message_id) for b in batches for d in b]
        assert delivered == sent
        tags = [d.tag for b in batches for d in b]
        assert tags == sorted(tags) and len(set(tags)) == len(tags)

    async def test_a_batch_waits_for_a_first_delivery_then_lingers_for_more(self, bus: Bus) -> None:
        taking = asyncio.create_task(bus.next_batch(10, linger=1.0))
        await asyncio.sleep(0.2)
        assert not taking.done()  # nothing yet: it waits
        await self.feed(bus, "T1.round.opened", b"{}", "first")
        await asyncio.sleep(0.05)
        await self.feed(bus, "T1.bet.placed", b"{}", "second")  # within the linger
        batch = await asyncio.wait_for(taking, 10)
        await bus.finish_batch(batch)
        assert [d.message_id for d in batch] == ["first", "second"]

    async def test_deliveries_settled_out_of_order_are_acknowledged_once(self, bus: Bus) -> None:
        """A delivery settled beside an earlier one still in hand is acknowledged alone;
        the earlier ones later, with one acknowledgement for many. No tag is acknowledged
        twice (the broker would close the channel and deliver everything in hand again)."""
        for name in "abcd":
            await self.feed(bus, f"T{name}.bet.placed", b"{}", name)
        a, b, c, d = [delivery for batch in await _taken(bus, 4) for delivery in batch]
        await bus.finish_each([c])
        await bus.finish_batch([a, b])
        await self.feed(bus, "Te.bet.placed", b"{}", "e")
        (e,) = [delivery for batch in await _taken(bus, 1) for delivery in batch]
        await bus.finish_each([e])
        await bus.finish_batch([d])
        await self.feed(bus, "Tf.bet.placed", b"{}", "f")
        (f,) = [delivery for batch in await _taken(bus, 1) for delivery in batch]
        await bus.finish_batch([f])
        assert [x.message_id for x in (e, f)] == ["e", "f"]
        assert not e.redelivered and not f.redelivered

    async def test_results_reach_the_wallet_bound_for_them(self, bus: Bus) -> None:
        take = await self.wallet(bus, "EUR.#")
        results = [result("EUR", f"p{n}", n) for n in range(5)]
        assert await bus.publish(results) == []
        taken = await take(len(results))
        assert [t.message_id for t in taken] == [r.message_id for r in results]
        assert [t.routing_key for t in taken] == [r.routing_key for r in results]
        assert [json.loads(t.body) for t in taken] == [r.body for r in results]

    async def test_a_result_no_wallet_is_bound_for_is_refused_as_unroutable(self, bus: Bus) -> None:
        take = await self.wallet(bus, "EUR.#")
        page = [result("USD" if n % 3 == 1 else "EUR", f"p{n}", n) for n in range(7)]
        refused = await bus.publish(page)
        usd = [r.message_id for r in page if r.routing_key.startswith("USD.")]
        assert [r.message_id for r in refused] == usd
        assert {r.kind for r in refused} == {UNROUTABLE}
        routed = [r.message_id for r in page if r.routing_key.startswith("EUR.")]
        assert [t.message_id for t in await take(len(routed))] == routed

    async def test_a_result_that_cannot_be_framed_is_refused_and_the_rest_go(
        self, bus: Bus
    ) -> None:
        take = await self.wallet(bus, "EUR.#")
        too_long = result("EUR", "p" * 300, 0)  # the routing key is over 255 bytes
        fine = result("EUR", "p1", 1)
        refused = await bus.publish([too_long, fine])
        assert [(r.message_id, r.kind) for r in refused] == [(too_long.message_id, TOO_LONG)]
        assert [t.message_id for t in await take(1)] == [fine.message_id]

    async def test_a_dead_letter_is_parked_raw_with_its_code_and_reason(self, bus: Bus) -> None:
        raw = b'{"event_id": "not json'
        headers = {CODE_HEADER: "malformed_json", REASON_HEADER: "the body is not JSON"}
        letter = Outgoing(
            "dl-1",
            "T1.bet.placed",
            {},
            exchange=DEAD_LETTER_EXCHANGE,
            raw=raw,
            headers=headers,
            amqp_message_id="e-bad",
        )
        assert await bus.publish([letter]) == []
        (parked,) = await self.parked(bus, 1)
        assert (parked.message_id, parked.routing_key, parked.body) == (
            "e-bad",
            "T1.bet.placed",
            raw,
        )
        assert {k: parked.headers[k] for k in headers} == headers
