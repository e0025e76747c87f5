"""The outbox relay on the embedded ledger and the in-process bus.

A result the broker refuses is set aside, counted once and never blocks the ones after it;
only the lease holder publishes, and another relay takes over when the holder stops
renewing; rejections recorded in the ledger reach the dead-letter exchange exactly once,
even when the process stops between the commit and the publish; across key rotations each
key's relay publishes what its predecessors left pending; pages are listed and marked
while the broker confirms the one between, and a failure there loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from croupier_feeds import RoundFeed, line

from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_EXCHANGE,
    REASON_HEADER,
    SETTLEMENTS_EXCHANGE,
    BusError,
    Outgoing,
    Refused,
)
from croupier.bus.amqp import _publication
from croupier.bus.memory import MemoryBus
from croupier.bus.routed import RoutedAmqpBus
from croupier.ledger import Ledger, PendingMessage, open_ledger
from croupier.ledger.keyring import KeyEntry, Keyring
from croupier.ledger.partitions import partition_of
from croupier.ledger.signing import LedgerKey
from croupier.metrics import Metrics
from croupier.settlement.deadletters import ORIGINAL_ROUTING_KEY
from croupier.settlement.partitions import PartitionOwner
from croupier.settlement.relay import PAGES_IN_FLIGHT, Committed, OutboxRelay, derive
from croupier.settlement.results import message_id
from croupier.settlement.service import Service
from croupier.settlement.settler import Inbound, Settler
from studio import StudioConfig, TableSpec, simulate


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


def a_round(table: str, player: str = "p1", *, wrong_call: bool = False) -> list[bytes]:
    f = RoundFeed(table_id=table)
    events = [
        f.opened(),
        f.bet("a1", player=player),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
        f.cards("board", "Ah 7c 2d"),
    ]
    if wrong_call:
        events.append(f.decide("a1", "flop", "call", "c0", 300))
    events += [f.decide("a1", "flop", "call", "c1", 200), f.cards("board", "Ks 4h"), f.completed()]
    return [line(e).encode() for e in events]


def deliveries(bodies: list[bytes], first: int = 1) -> list[Inbound]:
    return [Inbound(b, n, "t.feed", f"m{n}") for n, b in enumerate(bodies, first)]


def counter(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels or None) or 0.0


async def test_a_refused_result_is_set_aside_counted_once_and_blocks_nothing(
    ledger: Ledger,
) -> None:
    bus, metrics = MemoryBus(), Metrics()
    received: list[Outgoing] = []
    bus.subscribe("EUR.bound-1", received.append)
    settler = Settler(ledger)
    await settler.handle(deliveries(a_round("t1", "unbound")))
    await settler.handle(deliveries(a_round("t2", "bound-1"), 100))
    relay = OutboxRelay(ledger, bus, metrics, batch=1)  # one per page: the first blocks none

    for _ in range(5):
        await relay.relay_once()

    assert [m.message_id for m in received] == [message_id("t2", "r1", "bound-1", "EUR")]
    assert counter(metrics, "croupier_results_unroutable_total") == 1
    assert counter(metrics, "croupier_results_set_aside_total", kind="unroutable") == 1
    assert await ledger.pending_outbox() == []
    ((aside, why),) = await ledger.set_aside_messages()
    assert aside.message_id == message_id("t1", "r1", "unbound", "EUR")
    assert why.startswith("unroutable: no queue is bound for routing key 'EUR.unbound'")


async def test_only_the_lease_holder_relays_and_another_takes_over(ledger: Ledger) -> None:
    bus = MemoryBus()
    received: list[Outgoing] = []
    bus.subscribe("#", received.append)
    one = OutboxRelay(ledger, bus, Metrics(), lease_seconds=0.6, idle=0.05)
    two = OutboxRelay(ledger, bus, Metrics(), lease_seconds=0.6, idle=0.05)
    settler = Settler(ledger)
    tasks = [asyncio.create_task(one.run()), asyncio.create_task(two.run())]
    try:
        for n in range(5):
            await settler.handle(deliveries(a_round(f"t{n}"), 100 * n))
            one.wake()
            two.wake()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        assert (one.active, two.active) == (True, False)
        one.stop()
        await tasks[0]
        await settler.handle(deliveries(a_round("t-late"), 1000))
        await asyncio.sleep(1.2)  # the lease expires; the standby takes it
        assert two.active
    finally:
        two.stop()
        await asyncio.gather(*tasks)
    ids = [m.message_id for m in received]
    assert len(ids) == len(set(ids)) == 6  # each result once, the late one included


async def test_a_rejection_is_dead_lettered_once_across_a_crash_before_publishing(
    ledger: Ledger,
) -> None:
    bodies = a_round("t-dl", wrong_call=True)
    batch = [*deliveries(bodies[:5]), Inbound(b"{torn", 50, "t-dl.bet.placed", "torn-1")]
    batch += deliveries(bodies[5:], 6)
    await Settler(ledger, dead_letters=True).handle(batch)
    # The process dies here: committed, nothing published. The broker redelivers the batch
    # to a fresh process, where it is a duplicate; the relay then publishes what is pending.
    again = await Settler(ledger, dead_letters=True).handle(batch)
    bus, metrics = MemoryBus(), Metrics()
    bus.subscribe("#", lambda _: None)
    relay = OutboxRelay(ledger, bus, metrics)
    await relay.relay_once()
    await relay.relay_once()

    assert {h.verdict for h in again.handled} == {"duplicate", "rejected"}
    # A rule rejection's letter carries the feed contract's delivery of the event.
    wrong_id = json.loads(bodies[5])["event_id"]
    letters = {m.amqp_message_id: m for m in bus.dead_letters}
    assert sorted(letters) == sorted([wrong_id, "torn-1"])
    assert len(bus.dead_letters) == 2
    torn, wrong = letters["torn-1"], letters[wrong_id]
    assert torn.raw == b"{torn" and torn.routing_key == "t-dl.bet.placed"
    assert torn.headers is not None and torn.headers[CODE_HEADER] == "not_json"
    assert wrong.raw == bodies[5]
    assert wrong.headers is not None and wrong.headers[CODE_HEADER] == "wrong_wager_size"
    assert "exactly" in wrong.headers[REASON_HEADER]
    assert wrong.headers[ORIGINAL_ROUTING_KEY] == "t-dl.decision.made"
    assert counter(metrics, "croupier_dead_lettered_total", code="not_json") == 1
    assert counter(metrics, "croupier_dead_lettered_total", code="wrong_wager_size") == 1
    assert counter(metrics, "croupier_results_published_total") == 1


async def test_an_event_held_then_rejected_is_dead_lettered_as_recorded(ledger: Ledger) -> None:
    f = RoundFeed(table_id="t-held")
    opened, bet = f.opened(), f.bet("a1", amount=10**9)  # outside the table's limits
    settler = Settler(ledger, dead_letters=True)
    await settler.handle(deliveries([line(bet).encode()]))  # seq 2 first: held
    await settler.handle(deliveries([line(opened).encode()], 2))  # releases it: rejected
    bus = MemoryBus()
    await OutboxRelay(ledger, bus, Metrics()).relay_once()

    (letter,) = bus.dead_letters
    assert letter.amqp_message_id == bet["event_id"]
    assert letter.routing_key == "t-held.bet.placed"
    assert letter.headers is not None and letter.headers[CODE_HEADER] == "stake_limits"


async def test_settling_and_relaying_go_on_across_two_rotations(tmp_path: Path) -> None:
    """What ``serve`` runs (the settler and the relay) under a first key, a second and a
    third: each key's relay publishes what is pending from before its handover, once."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    keys = [LedgerKey.generate() for _ in range(3)]
    keyring = Keyring.of(keys[0].public)
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda message: got.append(message.message_id))
    for n, key in enumerate(keys):
        async with open_ledger(url, key, keyring) as ledger:
            await ledger.migrate()
            relay = OutboxRelay(ledger, bus, Metrics(), holder="restarted")
            assert await relay.hold()
            await relay.drain()  # what the previous key left pending
            settler = Settler(ledger)
            await settler.handle(deliveries(a_round(f"t{n}a", f"p{n}")))
            await relay.drain()
            await settler.handle(deliveries(a_round(f"t{n}b", f"p{n}")))  # left pending
            if n < 2:
                position = await ledger.rotate_key(keys[n + 1].public)
                own = keyring.get(key.public.key_id)
                assert own is not None
                keyring = keyring.with_entry(replace(own, last=position))
                keyring = keyring.with_entry(KeyEntry(keys[n + 1].public, position + 1))
            else:
                await relay.drain()
            assert await ledger.set_aside_messages() == []
    wanted = [message_id(f"t{n}{r}", "r1", f"p{n}", "EUR") for n in range(3) for r in "ab"]
    assert sorted(got) == sorted(wanted)
    async with open_ledger(url) as auditor:
        assert (await auditor.verify(keyring=keyring)).ok


async def test_a_small_round_is_published_while_a_huge_one_still_is(ledger: Ledger) -> None:
    """Settlements take turns: a one-player round settled after a 20,000-player shared hand
    is published within the relay's first pages, and each round's results go out in its
    own outbox order."""
    big = TableSpec("huge", "casino-holdem/classic", players=20_000)
    huge = [m.body for m in simulate(StudioConfig(tables=(big,), rounds=1, seed=5))]
    settler = Settler(ledger)
    for start in range(0, len(huge), 5000):
        page = huge[start : start + 5000]
        await settler.handle([Inbound(b, n, "t.feed", f"h{start + n}") for n, b in enumerate(page)])
    await settler.handle(deliveries(a_round("small"), first=len(huge)))
    written = [m.message_id for m in await ledger.pending_outbox(30_000)]
    small = written[-1]
    assert len(written) == 20_001
    bus = MemoryBus()
    order: list[str] = []
    bus.subscribe("#", lambda message: order.append(message.message_id))
    relay = OutboxRelay(ledger, bus, Metrics(), batch=1000, turn=250)
    assert await relay.hold()
    assert await relay.relay_once() == 251
    assert relay.more and order[-1] == small  # published in the first page
    await relay.drain(timeout=120)
    assert sorted(order) == sorted(written)
    assert [m for m in order if m != small] == written[:-1]  # the huge round's own order
    assert await ledger.pending_outbox() == []


class SlowBroker(MemoryBus):
    """Confirms each page after a pause; fails the page numbered ``fail_page`` (from 1).
    ``gated``: a page's pause lasts until the relay has moved on (:meth:`relay_moved`: it
    listed the next page meanwhile), or half a second at most, so that what overlaps the
    confirms does not hang on how fast a loaded machine lists."""

    def __init__(self, fail_page: int | None = None, *, gated: bool = False) -> None:
        super().__init__()
        self.fail_page = fail_page
        self.gated = gated
        self.pages = 0
        self.in_flight = 0  # pages the broker has and has not answered yet
        self.most_in_flight = 0
        self.confirmed: set[str] = set()
        self._gates: list[asyncio.Event] = []

    def relay_moved(self) -> None:
        """The relay listed the next page while pages were in flight: confirm them."""
        for gate in self._gates:
            gate.set()

    async def _confirms(self) -> None:
        if not self.gated:
            await asyncio.sleep(0.02)
            return
        gate = asyncio.Event()
        self._gates.append(gate)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.wait(), 0.5)
        finally:
            self._gates.remove(gate)

    async def publish(self, messages: Sequence[Outgoing]) -> list[Refused]:
        self.pages += 1
        page = self.pages
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self._confirms()
            if page == self.fail_page:
                raise BusError("the connection dropped before the confirms")
            refused = await super().publish(messages)
        finally:
            self.in_flight -= 1
        self.confirmed.update(m.message_id for m in messages)
        return refused


async def test_pages_are_listed_and_marked_while_the_broker_confirms(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay lists the next page and marks the last one while the broker confirms the
    page in between; a message is marked only once confirmed, each exactly once; a
    failure in the middle loses nothing (what was in flight is published again)."""
    table = TableSpec("shared", "casino-holdem/classic", players=3_000)
    feed = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=3))]
    await Settler(ledger).handle(deliveries(feed))
    written = {m.message_id for m in await ledger.pending_outbox(10_000)}
    assert len(written) == 3_000

    broker = SlowBroker(fail_page=4, gated=True)
    got: list[str] = []
    broker.subscribe("#", lambda message: got.append(message.message_id))
    overlapped = {"listings": 0, "marks": 0}
    marked: list[str] = []
    list_pending, mark = ledger.pending_outbox, ledger.mark_published

    async def listing(*args: Any, **kwargs: Any) -> list[PendingMessage]:
        overlapped["listings"] += broker.in_flight
        broker.relay_moved()
        return await list_pending(*args, **kwargs)

    async def marking(message_ids: Iterable[str], **written: bool) -> None:
        ids = list(message_ids)
        assert set(ids) <= broker.confirmed, "marked before the broker confirmed it"
        overlapped["marks"] += broker.in_flight
        await mark(ids)
        marked.extend(ids)

    monkeypatch.setattr(ledger, "pending_outbox", listing)
    monkeypatch.setattr(ledger, "mark_published", marking)
    relay = OutboxRelay(ledger, broker, Metrics(), batch=500)
    assert await relay.hold()
    with pytest.raises(BusError):
        await relay.relay_pending()
    before = len(marked)
    assert 0 < before < 3_000  # the pages before the failure, not the one in flight
    assert await relay.relay_pending() == 3_000 - before
    assert await ledger.pending_outbox() == []
    assert set(got) == written and len(marked) == len(set(marked)) == 3_000
    assert overlapped["listings"] >= 4 and overlapped["marks"] >= 4


async def test_a_page_the_broker_confirmed_is_marked_even_when_the_next_one_fails(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark of a confirmed page still being written when the next page fails is
    finished, not cut short: the relay raises once it is in, and only the failed page is
    left to publish again."""
    table = TableSpec("slow-mark", "casino-holdem/classic", players=1_000)
    feed = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=3))]
    await Settler(ledger).handle(deliveries(feed))
    marked: list[str] = []
    mark = ledger.mark_published

    async def slow_marking(message_ids: Iterable[str], **written: bool) -> None:
        await asyncio.sleep(0.05)  # longer than the failing page takes to fail
        await mark(message_ids)
        marked.extend(message_ids)

    monkeypatch.setattr(ledger, "mark_published", slow_marking)
    broker = SlowBroker(fail_page=2)
    broker.subscribe("#", lambda message: None)
    relay = OutboxRelay(ledger, broker, Metrics(), batch=500)
    assert await relay.hold()
    with pytest.raises(BusError):
        await relay.relay_pending()
    assert len(marked) == 500
    assert len(await ledger.pending_outbox(10_000)) == 500


async def test_a_result_goes_to_the_broker_as_the_bus_would_encode_it(ledger: Ledger) -> None:
    """The relay hands the bus each result's bytes, written from the stored canonical text
    with ``ledger_position`` spliced in: byte for byte what the bus's encoder gives."""
    table = TableSpec("bytes", "casino-holdem/classic", players=40)
    feed = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=3, seed=9))]
    await Settler(ledger).handle(deliveries(feed))
    pending = await ledger.pending_outbox(1_000)
    vouched, refused = await derive(ledger, pending)
    assert not refused and len(vouched) == len(pending) > 40
    compact = json.JSONEncoder(separators=(",", ":")).encode
    for outgoing in vouched.values():
        assert outgoing.encoded == compact(outgoing.body).encode()
        assert _publication(outgoing).body == outgoing.encoded
    # Without the bytes (a message built elsewhere), the bus encodes the body itself.
    plain = replace(next(iter(vouched.values())), encoded=None)
    assert _publication(plain).body == compact(plain.body).encode()


async def test_what_this_process_committed_is_published_as_written_lease_or_not(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relay publishes what its own settler committed, holding the lease or not: the
    messages its transaction wrote, each once, nothing read back, listed or derived; the
    lease holder finds them published."""
    report = await Settler(ledger, dead_letters=True).handle(
        deliveries([*a_round("mine"), b"{not json"])
    )
    written = [m for _, messages in report.outbox for m in messages]
    assert {m.exchange for m in written} == {SETTLEMENTS_EXCHANGE, DEAD_LETTER_EXCHANGE}
    bus = MemoryBus()
    got: list[Outgoing] = []
    bus.subscribe("#", got.append)
    holder = OutboxRelay(ledger, bus, Metrics(), holder="the-holder")
    standby = OutboxRelay(ledger, bus, Metrics(), holder="standing-by")
    assert await holder.hold() and not await standby.hold()
    standby.committed(report.outbox)

    async def nothing_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read back")

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "vouched", nothing_read)
        patch.setattr(ledger, "pending_outbox", nothing_read)
        assert await standby.relay_committed() == len(written)
    positions = {m.message_id: fact.position for fact, ms in report.outbox for m in ms}
    results = [m for m in written if m.exchange == SETTLEMENTS_EXCHANGE]
    assert [o.body for o in got if o.exchange == SETTLEMENTS_EXCHANGE] == [
        {**m.body, "ledger_position": positions[m.message_id]} for m in results
    ]
    (letter,) = bus.dead_letters
    assert letter.raw == b"{not json"
    assert await holder.relay_pending() == 0
    assert await ledger.pending_outbox() == [] and len(got) == len(results)
    assert not standby.own


async def test_the_holder_leaves_another_writers_new_facts_to_it_for_the_grace(
    ledger: Ledger,
) -> None:
    """With a writer grace, the lease holder publishes a fact another process committed
    (and never published: it died) only once the grace has passed since it first saw
    it; what was there at its first look it publishes at once."""
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda message: got.append(message.message_id))
    settler = Settler(ledger)
    await settler.handle(deliveries(a_round("before")))
    holder = OutboxRelay(ledger, bus, Metrics(), writer_grace=0.4)
    assert await holder.hold()
    assert await holder.relay_pending() == 1  # there at its first look
    await settler.handle(deliveries(a_round("elsewhere"), 100))
    seen = time.monotonic()
    while not await holder.relay_pending():
        await asyncio.sleep(0.02)
    waited = time.monotonic() - seen
    assert 0.4 <= waited < 3.0
    assert len(got) == len(set(got)) == 2


async def test_a_first_look_after_this_process_committed_leaves_its_facts_to_it(
    ledger: Ledger,
) -> None:
    """A relay that looked at the ledger before its settler committed, and takes the lease
    only afterwards (another instance held it), publishes none of what its settler
    committed and has not handed over yet: those go out once, from memory. Without the
    early look, its first look took them as another writer's, and they went out twice."""
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda message: got.append(message.message_id))
    settler = Settler(ledger)
    relay = OutboxRelay(ledger, bus, Metrics(), writer_grace=60)
    await relay.look()  # as serve does, before its settler starts
    outbox = (await settler.handle(deliveries(a_round("own")))).outbox
    assert await relay.hold()
    assert await relay.relay_pending() == 0  # committed since the look, within the grace
    relay.committed(outbox)
    assert await relay.relay_committed() == 1
    assert await relay.relay_pending() == 0
    assert len(got) == len(set(got)) == 1


async def test_the_holder_leaves_what_this_process_has_not_published_yet(
    ledger: Ledger,
) -> None:
    """The lease holder's listing stops below the oldest fact its own process committed
    and has not published: its results go out once, from memory."""
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda message: got.append(message.message_id))
    settler = Settler(ledger)
    relay = OutboxRelay(ledger, bus, Metrics())
    assert await relay.hold()
    relay.committed((await settler.handle(deliveries(a_round("own")))).outbox)
    await settler.handle(deliveries(a_round("after"), 100))  # another process's
    assert await relay.relay_pending() == 0
    assert await relay.relay_committed() == 1
    assert await relay.relay_pending() == 1
    assert len(got) == len(set(got)) == 2


def tables_in(count: int, *partitions: int) -> list[str]:
    """A table in each of ``partitions`` (of ``count``), each another."""
    tables = (f"table-{n}" for n in range(10_000))
    chosen: list[str] = []
    for partition in partitions:
        chosen.append(
            next(t for t in tables if partition_of(t, count) == partition and t not in chosen)
        )
    return chosen


async def test_a_lapsed_owners_leftovers_go_out_from_the_new_owner_before_its_own(
    tmp_path: Path,
) -> None:
    """The new owner of partitions whose owner's lease lapsed publishes the results that
    owner committed for their tables and never published, vouched for, before its own;
    another partition's results and dead letters stay the relay lease holder's."""
    key = LedgerKey.generate()
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", key) as ledger:
        await ledger.migrate()
        adopted, kept, own = tables_in(8, 3, 4, 3)
        lapsed = Settler(ledger, dead_letters=True)  # committed, then died unpublished
        await lapsed.handle(deliveries([*a_round(adopted), *a_round(kept), b"{not json"]))
        bus = MemoryBus()
        got: list[str] = []
        bus.subscribe("#", lambda m: got.append(str(m.body.get("table_id", "dead letter"))))
        holder = OutboxRelay(ledger, bus, Metrics(), holder="holder", writer_grace=60)
        assert await holder.hold()
        heir = OutboxRelay(ledger, bus, Metrics(), holder="heir", writer_grace=60)
        heir.adopt(frozenset({3}), 8, await ledger.last_position())
        heir.committed((await Settler(ledger).handle(deliveries(a_round(own), 100))).outbox)
        relaying = asyncio.create_task(heir.run())
        async with asyncio.timeout(10):
            while len(got) < 2:
                await asyncio.sleep(0.01)
        heir.stop()
        await relaying
        assert got == [adopted, own]  # the table's earlier round first
        left = await ledger.pending_outbox()
        assert sorted(str(m.body.get("table_id", "dead letter")) for m in left) == sorted(
            [kept, "dead letter"]
        )
        assert await heir.relay_leftovers() == 0  # done once


async def test_nothing_more_of_its_own_goes_out_while_a_lapsed_owners_leftovers_wait(
    ledger: Ledger,
) -> None:
    """A handover that comes while the relay publishes its own pages stops it launching
    more until the leftovers are out (the next turn of ``run`` takes them first)."""
    adopted, own = tables_in(8, 3, 3)
    await Settler(ledger).handle(deliveries(a_round(adopted)))  # a lapsed owner's, unpublished
    taken_at = await ledger.last_position()
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda m: got.append(str(m.body["table_id"])))
    heir = OutboxRelay(ledger, bus, Metrics(), holder="heir")
    heir.committed((await Settler(ledger).handle(deliveries(a_round(own), 100))).outbox)
    heir.adopt(frozenset({3}), 8, taken_at)
    assert await heir.relay_committed() == 0
    assert await heir.relay_leftovers() == 1
    assert await heir.relay_committed() == 1
    assert got == [adopted, own]


async def test_a_partitioned_service_hands_lapsed_partitions_to_its_relay(
    ledger: Ledger,
) -> None:
    owner = PartitionOwner(ledger, "instance", Metrics())
    service = Service(ledger, RoutedAmqpBus("amqp://guest:guest@127.0.0.1:5672/", 8), owner=owner)
    assert owner.on_lapsed == service.relay.adopt


async def test_the_holder_lists_the_outbox_again_only_when_its_horizon_moves(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows up to the horizon were all written before it was seen: once a listing through
    it found nothing, listing again after every commit would find nothing new. The holder
    lists again when the horizon moves, or a third of a term later, and publishes another
    writer's fact once the grace has passed, as before."""
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda message: got.append(message.message_id))
    settler = Settler(ledger)
    relay = OutboxRelay(ledger, bus, Metrics(), writer_grace=0.4, lease_seconds=3)
    listings = 0
    listing = ledger.pending_outbox

    async def counted(*args: Any, **kwargs: Any) -> list[PendingMessage]:
        nonlocal listings
        listings += 1
        return await listing(*args, **kwargs)

    monkeypatch.setattr(ledger, "pending_outbox", counted)
    assert await relay.hold()
    await relay.look()  # the horizon: an empty ledger
    for n in range(5):  # this process's own commits, published from memory
        relay.committed((await settler.handle(deliveries(a_round(f"own{n}"), 100 * n))).outbox)
        assert await relay.relay_committed() == 1
        assert await relay.relay_pending() == 0
    assert listings == 1
    await settler.handle(deliveries(a_round("elsewhere"), 900))  # another writer's, unpublished
    seen = time.monotonic()
    while not await relay.relay_pending():
        await asyncio.sleep(0.02)
    assert 0.4 <= time.monotonic() - seen < 3.0
    assert 1 < listings < 40  # as the horizon moved (every twentieth of a second), not per call
    assert len(got) == len(set(got)) == 6


async def test_committed_results_take_turns_and_a_failure_loses_none(ledger: Ledger) -> None:
    """What this process committed goes out in pages, the facts taking turns (a small
    round after a large one is in the first page); a page the broker fails is taken
    again, and every message is published and marked exactly once."""
    table = TableSpec("own-shared", "casino-holdem/classic", players=2_000)
    feed = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=3))]
    settler = Settler(ledger)
    outbox = (await settler.handle(deliveries(feed))).outbox
    outbox += (await settler.handle(deliveries(a_round("small"), 10_000))).outbox
    small = outbox[-1][1][0].message_id
    broker = SlowBroker(fail_page=3)
    pages: list[list[str]] = []
    publish = broker.publish

    async def paging(messages: Sequence[Outgoing]) -> list[Refused]:
        pages.append([m.message_id for m in messages])
        return await publish(messages)

    broker.publish = paging  # type: ignore[method-assign]
    broker.subscribe("#", lambda message: None)
    relay = OutboxRelay(ledger, broker, Metrics(), batch=500, turn=250)
    relay.committed(outbox)
    assert relay.own.oldest == outbox[0][0].position
    with pytest.raises(BusError):
        await relay.relay_committed()
    assert small in pages[0]
    waiting = counter(relay.metrics, "croupier_outbox_backlog")
    assert waiting == len(relay.own) > 0  # what the broker has not confirmed shows
    assert await relay.relay_committed() > 0
    assert not relay.own and relay.own.oldest is None
    assert counter(relay.metrics, "croupier_outbox_backlog") == 0
    assert await ledger.pending_outbox() == []
    assert broker.confirmed == {m.message_id for _, ms in outbox for m in ms}


async def test_committed_pages_are_with_the_broker_two_at_once_in_order(ledger: Ledger) -> None:
    """The next page of a large round goes out while the broker confirms the one before:
    two pages in flight, never more, the round's results published in outbox order, each
    marked once confirmed."""
    relay, broker, got, written = await _large_round_committed(ledger, players=2_000)
    assert await relay.relay_committed() == len(written) > 3 * 300
    assert broker.most_in_flight == PAGES_IN_FLIGHT == 2
    assert got == written
    assert await ledger.pending_outbox() == [] and not relay.own


async def test_a_stopped_relay_drains_what_it_committed_page_after_page(ledger: Ledger) -> None:
    """At shutdown the relay is stopped, then drained: each call publishes a page, and the
    drain publishes every message this process committed."""
    relay, _, got, written = await _large_round_committed(ledger, players=1_000)
    relay.stop()
    assert await relay.relay_committed() == 300  # one page, no more once stopped
    await relay.drain()
    assert got == written
    assert await ledger.pending_outbox() == [] and not relay.own


async def _large_round_committed(
    ledger: Ledger, players: int
) -> tuple[OutboxRelay, SlowBroker, list[str], list[str]]:
    """A shared hand of ``players`` settled, its results committed to a relay of pages of
    300 on a slow broker; the relay, the broker, what the broker routes (a list that
    fills) and the message ids written, in outbox order."""
    table = TableSpec("own-shared", "casino-holdem/classic", players=players)
    feed = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=3))]
    outbox = (await Settler(ledger).handle(deliveries(feed))).outbox
    broker = SlowBroker()
    got: list[str] = []
    broker.subscribe("#", lambda message: got.append(message.message_id))
    relay = OutboxRelay(ledger, broker, Metrics(), batch=300)
    relay.committed(outbox)
    return relay, broker, got, [m.message_id for _, messages in outbox for m in messages]


async def test_beyond_its_limit_the_oldest_committed_fact_is_left_to_the_holder(
    ledger: Ledger,
) -> None:
    """Memory is bounded: past ``Committed.limit`` messages, the oldest fact is dropped
    from memory, and the lease holder publishes it from the outbox."""
    settler = Settler(ledger)
    bus = MemoryBus()
    got: list[str] = []
    bus.subscribe("#", lambda message: got.append(message.message_id))
    relay = OutboxRelay(ledger, bus, Metrics())
    relay.own = Committed(limit=2)
    for n in range(3):
        relay.committed((await settler.handle(deliveries(a_round(f"r{n}"), 100 * n))).outbox)
    assert len(relay.own) == 2
    assert await relay.hold()
    assert await relay.relay_pending() == 1  # the one left, below what memory holds
    assert await relay.relay_committed() == 2
    assert await ledger.pending_outbox() == [] and len(got) == len(set(got)) == 3
