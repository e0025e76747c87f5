"""The one test suite every ledger adapter must pass.

A subclass provides the ``ledger_url`` fixture (a fresh, empty ledger per test), two
ways of reaching the database behind the adapter's back: ``raw`` runs a statement as the
table owner with the triggers in force, ``tamper`` runs statements with them disabled, and
``out_of_reach``, a URL of the same kind whose database cannot be reached.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from croupier_feeds import RoundFeed, line

from croupier.bus.memory import MemoryBus
from croupier.cli.commands.redrive import _unmarked
from croupier.ledger import (
    HeadNotSigned,
    IdempotencyConflict,
    Ledger,
    LedgerTampered,
    LedgerUnavailable,
    OutboxMessage,
    RecordedEvent,
    StreamAppend,
    VersionConflict,
    open_ledger,
)
from croupier.ledger.chain import GENESIS_HASH, format_timestamp, row_hash
from croupier.ledger.keyring import KEYS_STREAM, KeyEntry, Keyring, handover
from croupier.ledger.signing import LedgerKey
from croupier.metrics import Metrics
from croupier.settlement.facts import Fact
from croupier.settlement.relay import OutboxRelay
from croupier.settlement.results import outbox_rule
from croupier.settlement.settler import Inbound, Settler

_keys = itertools.count(1)


def a_round(table: str) -> list[bytes]:
    """A one-player round of Casino Hold'em that settles (one settlement result)."""
    f = RoundFeed(table_id=table)
    events = [
        f.opened(),
        f.bet("a1", player=f"p-{table}"),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.cards("board", "Ks 4h"),
        f.completed(),
    ]
    return [line(e).encode() for e in events]


async def settle_rounds(ledger: Ledger, *tables: str) -> None:
    settler = Settler(ledger, dead_letters=True)
    for table in tables:
        await settler.handle([Inbound(b, n) for n, b in enumerate(a_round(table), 1)])


async def relay_once(ledger: Ledger) -> tuple[OutboxRelay, set[str]]:
    """One relay pass as the service's: the relay and the message ids published."""
    bus, got = MemoryBus(), set[str]()
    bus.subscribe("#", lambda m: got.add(m.message_id))
    relay = OutboxRelay(ledger, bus, Metrics(), holder="the service")  # restarted: the same
    assert await relay.hold()
    await relay.relay_once()
    return relay, got


def event(key: str | None = None, type_: str = "wager.accepted", **data: Any) -> Fact:
    """A new event; a fresh key unless one is given."""
    return Fact(type_, data or {"amount": 100, "currency": "EUR"}, key or f"k{next(_keys)}")


def append(stream: str, expected: int | None, count: int = 1) -> StreamAppend:
    return StreamAppend(stream, expected, [event(seq=i) for i in range(count)])


def message(message_id: str, **body: Any) -> OutboxMessage:
    return OutboxMessage(message_id, "croupier.settlements", "EUR.p1", body or {"returned": 200})


async def read_everything(ledger: Ledger) -> list[RecordedEvent]:
    events: list[RecordedEvent] = []
    while page := await ledger.read_all(events[-1].position if events else 0, 100):
        events.extend(page)
    return events


@dataclass
class Rotated:
    """A ledger signed by three keys in turn: ``one`` up to ``first``, ``two`` up to
    ``second`` (the handovers' positions), ``three`` since; the keyring says so."""

    one: LedgerKey
    two: LedgerKey
    three: LedgerKey
    first: int
    second: int
    keyring: Keyring

    def ids(self) -> tuple[str, str, str]:
        return self.one.public.key_id, self.two.public.key_id, self.three.public.key_id


class LedgerSuite:
    """Behaviour common to all adapters; subclasses supply the database."""

    @pytest.fixture
    def ledger_url(self) -> str:
        raise NotImplementedError

    async def raw(self, url: str, statement: str) -> None:
        """Run ``statement`` as the owner, triggers in force."""
        raise NotImplementedError

    async def tamper(self, url: str, *statements: str) -> None:
        """Run ``statements`` with the append-only triggers out of the way."""
        raise NotImplementedError

    def out_of_reach(self, url: str) -> str:
        """A URL like ``url`` whose database cannot be reached."""
        raise NotImplementedError

    @pytest.fixture
    async def ledger(self, ledger_url: str) -> AsyncIterator[Ledger]:
        ledger = open_ledger(ledger_url)
        await ledger.migrate()
        yield ledger
        await ledger.close()

    # -- append and read ------------------------------------------------------------

    async def test_append_returns_records_in_input_order(self, ledger: Ledger) -> None:
        first = [event(amount=100), event(amount=200)]
        records = await ledger.append(
            [StreamAppend("round:T1:R1", 0, first), StreamAppend("round:T1:R2", 0, [event()])]
        )
        assert [(r.stream, r.version, r.position) for r in records] == [
            ("round:T1:R1", 1, 1),
            ("round:T1:R1", 2, 2),
            ("round:T1:R2", 1, 3),
        ]
        assert [r.key for r in records[:2]] == [e.key for e in first]
        assert records[1].data == {"amount": 200}
        assert records[0].prev_hash == GENESIS_HASH
        assert records[1].prev_hash == records[0].hash

    async def test_read_stream_returns_what_was_appended(self, ledger: Ledger) -> None:
        appended = await ledger.append([append("round:A", 0, 3), append("round:B", 0, 2)])
        await ledger.append([append("round:A", 3, 1)])
        stream = await ledger.read_stream("round:A")
        assert [e.version for e in stream] == [1, 2, 3, 4]
        assert stream[:3] == appended[:3]
        assert await ledger.read_stream("round:none") == []

    async def test_read_last_is_the_stream_s_last_event(self, ledger: Ledger) -> None:
        await ledger.append([append("round:A", 0, 3), append("round:B", 0, 2)])
        await ledger.append([append("round:A", 3, 1)])
        assert await ledger.read_last("round:A") == (await ledger.read_stream("round:A"))[-1]
        assert (await ledger.read_last("round:B")) == (await ledger.read_stream("round:B"))[-1]
        assert await ledger.read_last("round:none") is None

    async def test_data_round_trips_exactly(self, ledger: Ledger) -> None:
        data = {
            "amount": 10**20,
            "nested": {"b": [1, "two", None, True, -3]},
            "name": 'Ærø € 🂡 "quoted" back\\slash\nnew line\ttab',
        }
        body = {"note": data["name"], "returned": 200}
        await ledger.append(
            [StreamAppend("s", 0, [Fact("t", data, "k")])],
            [OutboxMessage("m1", "croupier.settlements", "EUR.p1", body, "k")],
        )
        assert (await ledger.read_stream("s"))[0].data == data
        assert (await ledger.pending_outbox())[0].body == body
        assert (await ledger.verify()).ok  # the stored text is the text that was hashed

    async def test_positions_are_global_gap_free_and_in_commit_order(self, ledger: Ledger) -> None:
        for batch in range(5):
            await ledger.append([append(f"round:{batch}:{n}", 0, 3) for n in range(4)])
        events = await read_everything(ledger)
        assert [e.position for e in events] == list(range(1, 61))
        assert await ledger.last_position() == 60

    async def test_read_all_pages_after_a_position(self, ledger: Ledger) -> None:
        await ledger.append([append("s", 0, 10)])
        assert [e.position for e in await ledger.read_all(3, 4)] == [4, 5, 6, 7]
        assert [e.position for e in await ledger.read_all(8, 100)] == [9, 10]
        assert await ledger.read_all(10, 100) == []

    async def test_stream_version_and_last_position_start_at_zero(self, ledger: Ledger) -> None:
        assert await ledger.stream_version("s") == 0
        assert await ledger.last_position() == 0
        await ledger.append([append("s", 0, 2), append("t", 0, 1)])
        assert await ledger.stream_version("s") == 2
        assert await ledger.last_position() == 3

    async def test_last_recorded_is_per_name_after_the_prefix(self, ledger: Ledger) -> None:
        assert await ledger.last_recorded("round:") == {}
        await ledger.append([append("round:t1:r1", 0), append("round:t2:r1", 0)])
        first = await ledger.last_recorded("round:")
        await ledger.append([append("round:t1:r2", 0, 2), append("other:t3", 0)])
        later = await ledger.last_recorded("round:")
        assert set(later) == {"t1", "t2"}
        assert later["t2"] == first["t2"] < later["t1"]
        assert later["t1"] == (await ledger.read_all(0, 100))[-2].recorded_at

    async def test_first_recorded_is_each_streams_first_event(self, ledger: Ledger) -> None:
        assert await ledger.first_recorded(["a"]) == {}
        [a1, _, b1] = await ledger.append([append("a", 0, 2), append("b", 0)])
        await ledger.append([append("a", 2)])
        found = await ledger.first_recorded(["a", "b", "missing", "a"])
        assert found == {"a": a1.recorded_at, "b": b1.recorded_at}

    async def test_empty_append_writes_nothing(self, ledger: Ledger) -> None:
        assert await ledger.append([]) == []
        assert await ledger.last_position() == 0

    async def test_writable_takes_the_append_lock_and_writes_nothing(self, ledger: Ledger) -> None:
        await ledger.writable()
        await ledger.append([append("s", 0, 1)])
        await ledger.writable()
        assert await ledger.last_position() == 1

    # -- optimistic concurrency -----------------------------------------------------

    async def test_expected_version_must_match(self, ledger: Ledger) -> None:
        await ledger.append([append("s", 0, 2)])
        with pytest.raises(VersionConflict) as caught:
            await ledger.append([append("s", 0)])
        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s", 0, 2)
        with pytest.raises(VersionConflict):
            await ledger.append([append("s", 3)])
        await ledger.append([append("s", 2)])
        assert await ledger.stream_version("s") == 3

    async def test_no_expected_version_appends_at_the_end(self, ledger: Ledger) -> None:
        await ledger.append([append("rejections", None, 2)])
        records = await ledger.append([append("rejections", None, 1)])
        assert records[0].version == 3

    async def test_one_stream_twice_in_a_batch(self, ledger: Ledger) -> None:
        records = await ledger.append([append("s", 0, 2), append("s", 2, 1)])
        assert [r.version for r in records] == [1, 2, 3]
        with pytest.raises(VersionConflict):
            await ledger.append([append("t", 0, 2), append("t", 1, 1)])

    async def test_version_conflict_rolls_back_the_whole_batch(self, ledger: Ledger) -> None:
        await ledger.append([append("busy", 0, 1)])
        batch = [append("fresh:1", 0, 3), append("busy", 0, 1), append("fresh:2", 0, 1)]
        with pytest.raises(VersionConflict):
            await ledger.append(batch, [message("m1")])
        assert await ledger.last_position() == 1
        assert await ledger.read_stream("fresh:1") == []
        assert await ledger.pending_outbox() == []
        # The same events go through once the conflict is resolved.
        fixed = [batch[0], StreamAppend("busy", 1, batch[1].events), batch[2]]
        assert [r.position for r in await ledger.append(fixed)] == [2, 3, 4, 5, 6]

    async def test_the_append_lock_s_held_time_adds_up_refused_appends_too(
        self, ledger: Ledger
    ) -> None:
        assert ledger.append_lock_held == 0
        await ledger.append([append("busy", 0, 3)], [message("m1")])
        after_one = ledger.append_lock_held
        assert after_one > 0
        with pytest.raises(VersionConflict):  # refused inside the lock: it was held
            await ledger.append([append("busy", 0, 1)])
        after_two = ledger.append_lock_held
        assert after_two > after_one
        await ledger.read_stream("busy")  # a read takes no lock
        assert ledger.append_lock_held == after_two

    # -- idempotency ----------------------------------------------------------------

    async def test_redelivered_batch_is_a_no_op(self, ledger: Ledger) -> None:
        batch = [append("round:1", 0, 3), append("round:2", 0, 2)]
        outbox = [message("m1"), message("m2")]
        first = await ledger.append(batch, outbox)
        again = await ledger.append(batch, outbox)
        assert again == first
        assert await ledger.last_position() == 5
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m1", "m2"]

    async def test_append_new_returns_only_what_this_call_wrote(self, ledger: Ledger) -> None:
        old, new = event(), event()
        first = await ledger.append_new([StreamAppend("dead-letters", None, [old])])
        assert [r.key for r in first] == [old.key]
        both = [StreamAppend("dead-letters", None, [e]) for e in (old, new)]
        assert [r.key for r in await ledger.append_new(both)] == [new.key]
        assert await ledger.append_new(both) == []
        assert await ledger.append_new([]) == []
        assert await ledger.last_position() == 2

    async def test_a_recorded_fact_again_is_returned_and_the_signed_chain_goes_on(
        self, ledger_url: str
    ) -> None:
        """Appended again with no expected version (a kept rejection redelivered), a recorded
        fact and its outbox message are returned as recorded, not written twice, beside the
        new ones; the signed chain goes on from there and verifies."""
        key = LedgerKey.generate()
        async with open_ledger(ledger_url, key) as ledger:
            await ledger.migrate()
            old, new = event(), event()
            (first,) = await ledger.append(
                [StreamAppend("dead-letters", None, [old])], [message("m1")]
            )
            again = await ledger.append(
                [
                    StreamAppend("dead-letters", None, [old]),
                    StreamAppend("dead-letters", None, [new]),
                ],
                [message("m1"), message("m2")],
            )
            assert again[0] == first and again[1].position == first.position + 1
            await ledger.append([append("round:1", 0, 2)], [message("m3")])
            assert await ledger.last_position() == 4
            assert [m.message_id for m in await ledger.pending_outbox()] == ["m1", "m2", "m3"]
        async with open_ledger(ledger_url) as auditor:
            assert (await auditor.verify(public_key=key.public)).ok

    async def test_replay_is_a_no_op_after_the_stream_moved_on(self, ledger: Ledger) -> None:
        batch = [append("round:1", 0, 2)]
        first = await ledger.append(batch)
        await ledger.append([append("round:1", 2, 2)])
        assert await ledger.append(batch) == first
        assert await ledger.stream_version("round:1") == 4

    async def test_same_key_with_other_content_conflicts(self, ledger: Ledger) -> None:
        await ledger.append([StreamAppend("s", 0, [event("evt-1", amount=100)])])
        changed = StreamAppend("s", 0, [event("evt-1", amount=999)])
        with pytest.raises(IdempotencyConflict) as caught:
            await ledger.append([append("other", 0, 2), changed])
        assert caught.value.key == "evt-1"
        other_type = StreamAppend("s", 0, [event("evt-1", "bet.voided", amount=100)])
        with pytest.raises(IdempotencyConflict):
            await ledger.append([other_type])
        assert await ledger.last_position() == 1

    async def test_same_key_in_another_stream_conflicts(self, ledger: Ledger) -> None:
        await ledger.append([StreamAppend("s", 0, [event("evt-1")])])
        with pytest.raises(IdempotencyConflict):
            await ledger.append([StreamAppend("t", 0, [event("evt-1")])])

    async def test_recorded_prefix_is_skipped_and_the_rest_appended(self, ledger: Ledger) -> None:
        done = [event("a"), event("b")]
        await ledger.append([StreamAppend("s", 0, done)])
        records = await ledger.append([StreamAppend("s", 0, [*done, event("c")])])
        assert [(r.key, r.version, r.position) for r in records] == [
            ("a", 1, 1),
            ("b", 2, 2),
            ("c", 3, 3),
        ]
        with pytest.raises(VersionConflict):  # the prefix is not where expected says
            await ledger.append([StreamAppend("s", 1, [event("b"), event("d")])])

    async def test_recorded_event_after_a_new_one_conflicts(self, ledger: Ledger) -> None:
        await ledger.append([StreamAppend("s", 0, [event("a")])])
        with pytest.raises(IdempotencyConflict):
            await ledger.append([StreamAppend("s", 1, [event("new"), event("a")])])

    async def test_key_twice_in_one_batch_is_refused(self, ledger: Ledger) -> None:
        with pytest.raises(ValueError):
            await ledger.append([StreamAppend("s", 0, [event("a")]), append("t", 0)] * 2)
        assert await ledger.last_position() == 0

    async def test_outbox_message_id_with_other_content_conflicts(self, ledger: Ledger) -> None:
        await ledger.append([append("s", 0)], [message("m1", returned=200)])
        with pytest.raises(IdempotencyConflict):
            await ledger.append([append("t", 0)], [message("m1", returned=300)])
        assert await ledger.last_position() == 1

    # -- concurrency ----------------------------------------------------------------

    async def test_concurrent_appenders_on_distinct_streams(self, ledger: Ledger) -> None:
        async def appender(n: int) -> list[RecordedEvent]:
            return await ledger.append(
                [append(f"round:{n}:{i}", 0, 3) for i in range(5)], [message(f"m{n}")]
            )

        results = await asyncio.gather(*(appender(n) for n in range(40)))
        assert sum(len(r) for r in results) == 600
        events = await read_everything(ledger)
        assert [e.position for e in events] == list(range(1, 601))
        assert {e.key for e in events} == {r.key for batch in results for r in batch}
        for batch in results:  # each batch is contiguous: one transaction, one lock
            positions = [r.position for r in batch]
            assert positions == list(range(positions[0], positions[0] + 15))
        assert len(await ledger.pending_outbox(1000)) == 40
        assert (await ledger.verify()).ok

    async def test_concurrent_appenders_on_one_stream(self, ledger: Ledger) -> None:
        outcomes = await asyncio.gather(
            *(ledger.append([append("round:hot", 0, 2)]) for _ in range(20)),
            return_exceptions=True,
        )
        winners = [o for o in outcomes if isinstance(o, list)]
        losers = [o for o in outcomes if not isinstance(o, list)]
        assert len(winners) == 1
        assert all(isinstance(o, VersionConflict) for o in losers)
        assert await ledger.stream_version("round:hot") == 2

        async def retrying(n: int) -> None:
            while True:
                version = await ledger.stream_version("round:hot")
                try:
                    await ledger.append([append("round:hot", version, 1)])
                    return
                except VersionConflict:
                    await asyncio.sleep(0)

        await asyncio.gather(*(retrying(n) for n in range(20)))
        versions = [e.version for e in await ledger.read_stream("round:hot")]
        assert versions == list(range(1, 23))
        assert (await ledger.verify()).ok

    # -- append-only in the database ------------------------------------------------

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE events SET data = '{\"amount\":1}' WHERE position = 1",
            "DELETE FROM events WHERE position = 1",
            "DELETE FROM events",
            "UPDATE outbox SET routing_key = 'x'",
            "DELETE FROM outbox",
            "DELETE FROM outbox_published",
            "DELETE FROM outbox_set_aside",
            "DELETE FROM open_floor",
        ],
    )
    async def test_database_refuses_changes(
        self, ledger: Ledger, ledger_url: str, statement: str
    ) -> None:
        await ledger.append([append("s", 0, 2)], [message("m1"), message("m2")])
        await ledger.mark_published(["m1"])
        await ledger.set_aside({"m2": "unroutable"})
        assert await ledger.open_streams("none:", [], 1) == []  # writes a floor row
        with pytest.raises(Exception, match="append-only"):
            await self.raw(ledger_url, statement)
        assert len(await read_everything(ledger)) == 2
        assert (await ledger.verify()).ok

    # -- hash chain -----------------------------------------------------------------

    async def test_verify_passes_an_intact_chain(self, ledger: Ledger) -> None:
        empty = await ledger.verify()
        assert (empty.ok, empty.checked, empty.head_position) == (True, 0, 0)
        records = await ledger.append([append("s", 0, 4), append("t", 0, 3)])
        report = await ledger.verify(page_size=3)
        assert report.ok, report.summary()
        assert (report.checked, report.head_position) == (7, 7)
        assert report.head_hash == records[-1].hash
        report.raise_if_broken()

    async def test_verify_finds_a_changed_row(self, ledger: Ledger, ledger_url: str) -> None:
        await ledger.append([append("s", 0, 6)])
        await self.tamper(
            ledger_url, "UPDATE events SET data = '{\"amount\":1}' WHERE position = 3"
        )
        report = await ledger.verify()
        assert not report.ok
        assert (report.changed, report.removed, report.inserted) == ([3], [], [])
        with pytest.raises(LedgerTampered, match="changed"):
            report.raise_if_broken()

    async def test_verify_finds_a_row_rewritten_and_rehashed(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        records = await ledger.append([append("s", 0, 6)])
        row = records[2]
        forged_data = '{"amount":1}'
        forged_hash = row_hash(
            row.prev_hash,
            row.position,
            row.stream,
            row.version,
            row.type,
            forged_data,
            row.key,
            format_timestamp(row.recorded_at),
        )
        await self.tamper(
            ledger_url,
            f"UPDATE events SET data = '{forged_data}', hash = '{forged_hash}' WHERE position = 3",
        )
        report = await ledger.verify()
        assert (report.changed, report.removed, report.inserted) == ([3], [], [])

    async def test_verify_finds_removed_rows(self, ledger: Ledger, ledger_url: str) -> None:
        await ledger.append([append("s", 0, 8)])
        await self.tamper(
            ledger_url,
            "DELETE FROM events WHERE position = 3",
            "DELETE FROM events WHERE position IN (6, 7)",
        )
        report = await ledger.verify()
        assert (report.changed, report.removed, report.inserted) == ([], [3, 6, 7], [])

    async def test_verify_against_an_anchor_finds_a_chain_cut_short(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        await ledger.append([append("s", 0, 8)])
        head = await ledger.verify()
        anchor = (head.head_position, head.head_hash)
        assert (await ledger.verify(anchor=anchor)).ok
        await self.tamper(ledger_url, "DELETE FROM events WHERE position IN (7, 8)")
        assert (await ledger.verify()).ok  # without the anchor, a shorter chain looks whole
        report = await ledger.verify(anchor=anchor)
        assert (report.changed, report.removed, report.inserted) == ([], [7, 8], [])

    async def test_verify_against_an_anchor_finds_a_forged_head(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        await ledger.append([append("s", 0, 4)])
        head = await ledger.verify()
        await self.tamper(ledger_url, "UPDATE events SET hash = prev_hash WHERE position = 4")
        report = await ledger.verify(anchor=(head.head_position, head.head_hash))
        assert 4 in report.changed + report.inserted

    async def test_verify_finds_an_inserted_row(self, ledger: Ledger, ledger_url: str) -> None:
        await ledger.append([append("s", 0, 4)])
        stamp = "2030-01-01T00:00:00.000000Z"
        fake_prev = "f" * 64
        forged = row_hash(fake_prev, 5, "s", 5, "wager.accepted", "{}", "forged", stamp)
        await self.tamper(
            ledger_url,
            "INSERT INTO events (position, stream, version, type, data, key, recorded_at, "
            f"prev_hash, hash) VALUES (5, 's', 5, 'wager.accepted', '{{}}', 'forged', "
            f"'{stamp}', '{fake_prev}', '{forged}')",
        )
        report = await ledger.verify()
        assert (report.changed, report.removed, report.inserted) == ([], [], [5])

    async def test_verify_reports_every_problem_in_one_walk(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        await ledger.append([append("s", 0, 10)])
        await self.tamper(
            ledger_url,
            "UPDATE events SET type = 'payout' WHERE position = 2",
            "DELETE FROM events WHERE position = 5",
            "UPDATE events SET data = '{\"amount\":1}' WHERE position = 8",
        )
        report = await ledger.verify(page_size=2)
        assert (report.changed, report.removed, report.inserted) == ([2, 8], [5], [])
        assert "BROKEN" in report.summary()

    # -- outbox ---------------------------------------------------------------------

    async def test_texts_with_control_characters_or_empty_are_stored_exactly(
        self, ledger: Ledger
    ) -> None:
        # The PostgreSQL adapter sends a batch's columns joined by \x1f when it can.
        for stream, key, routing in [("s\x1fx", "k\x1f", "EUR.p\x1f1"), ("s2", "k2", "")]:
            data = {"text": "a\x1fb", "": ""}
            records = await ledger.append(
                [StreamAppend(stream, 0, [Fact("t\x1f", data, key), Fact("", {}, key + "2")])],
                [OutboxMessage(key, "", routing, {"\x1f": "\x1f"}, key)],
            )
            stored = await ledger.read_stream(stream)
            assert stored == records
            assert [(r.type, r.data, r.key) for r in stored] == [
                ("t\x1f", data, key),
                ("", {}, key + "2"),
            ]
            (pending,) = [m for m in await ledger.pending_outbox() if m.message_id == key]
            assert (pending.exchange, pending.routing_key) == ("", routing)
            assert pending.body == {"\x1f": "\x1f"}
        assert (await ledger.verify()).ok

    async def test_outbox_is_written_with_the_events(self, ledger: Ledger) -> None:
        records = await ledger.append(
            [append("round:1", 0, 3)], [message("m1", returned=200), message("m2")]
        )
        pending = await ledger.pending_outbox()
        assert [(m.message_id, m.position) for m in pending] == [("m1", 3), ("m2", 3)]
        assert pending[0].body == {"returned": 200}
        assert pending[0].exchange == "croupier.settlements"
        assert records[-1].position == 3

    async def test_pending_and_published(self, ledger: Ledger) -> None:
        for n in range(5):
            await ledger.append([append(f"s{n}", 0)], [message(f"m{n}")])
        assert [m.message_id for m in await ledger.pending_outbox(3)] == ["m0", "m1", "m2"]
        await ledger.mark_published(["m1", "m0", "unknown"])
        await ledger.mark_published(["m1"])  # idempotent
        await ledger.mark_published([])
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m2", "m3", "m4"]

    async def test_marks_of_messages_the_caller_wrote_count_like_looked_up_ones(
        self, ledger: Ledger
    ) -> None:
        for n in range(3):
            await ledger.append([append(f"s{n}", 0)], [message(f"m{n}")])
        await ledger.mark_published(["m2", "m0"], written=True)
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m1"]
        assert (await ledger.verify()).ok

    async def test_signed_marks_of_written_messages_are_honoured_after_a_restart(
        self, ledger_url: str
    ) -> None:
        key = LedgerKey.generate()
        async with open_ledger(ledger_url, key) as ledger:
            await ledger.migrate()
            for n in range(4):
                await ledger.append([append(f"s{n}", 0)], [message(f"m{n}")])
            await ledger.mark_published(["m2", "m0"], written=True)
            await ledger.mark_published(["m0", "m3"], written=True)  # m0 again: no harm
        async with open_ledger(ledger_url, key) as ledger:  # the marks read back, checked
            assert [m.message_id for m in await ledger.pending_outbox()] == ["m1"]
        async with open_ledger(ledger_url) as auditor:
            assert (await auditor.verify(public_key=key.public)).ok

    async def test_pending_through_a_position_lists_a_prefix_of_the_outbox(
        self, ledger: Ledger
    ) -> None:
        positions = []
        for n in range(4):
            (record,) = await ledger.append([append(f"s{n}", 0)], [message(f"m{n}")])
            positions.append(record.position)
        listed = await ledger.pending_outbox(through=positions[1])
        assert [m.message_id for m in listed] == ["m0", "m1"]
        assert [m.message_id for m in await ledger.pending_outbox(through=0)] == []
        await ledger.mark_published(["m0", "m1"])
        listed = await ledger.pending_outbox(per_event=1, through=positions[2])
        assert [m.message_id for m in listed] == ["m2"]
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m2", "m3"]

    async def test_leftovers_are_listed_from_the_published_claim_through_a_position(
        self, ledger_url: str
    ) -> None:
        key = LedgerKey.generate()
        async with open_ledger(ledger_url, key) as writer:
            await writer.migrate()
            positions = []
            for n in range(6):
                (record,) = await writer.append([append(f"s{n}", 0)], [message(f"m{n}")])
                positions.append(record.position)
            await writer.mark_published([m.message_id for m in await writer.pending_outbox(2)])
            await writer.append([append("s6", 0)])  # its head claims m0 and m1 published
            await writer.mark_published(["m3"])
        async with open_ledger(ledger_url, key) as heir:  # another instance, a fresh floor
            pages, after = [], None
            while True:
                pending, after = await heir.pending_since_claim(positions[4], 2, after)
                pages.append([(m.message_id, m.position) for m in pending])
                if after is None:
                    break
            # Past the claim: m2 and m3 (published), then m4; m5 lies beyond the position.
            assert pages == [[("m2", positions[2])], [("m4", positions[4])]]
            assert await heir.pending_since_claim(0, 10) == ([], None)
            assert await heir.pending_outbox() != []  # its own floor not moved by the listing
        async with open_ledger(ledger_url) as unsigned:  # no claim: read from the start
            pending, after = await unsigned.pending_since_claim(positions[5], 10)
            assert [m.message_id for m in pending] == ["m2", "m4", "m5"]
            assert after is None

    async def test_pending_pages_never_skip_a_message_left_unpublished(
        self, ledger: Ledger
    ) -> None:
        for n in range(6):
            await ledger.append([append(f"s{n}", 0)], [message(f"m{n}")])
        page = [m.message_id for m in await ledger.pending_outbox(2)]
        await ledger.mark_published(page)  # a whole page: later pages start after it
        assert [m.message_id for m in await ledger.pending_outbox(2)] == ["m2", "m3"]
        await ledger.mark_published(["m3"])  # m2 stays pending (say, unroutable)
        assert [m.message_id for m in await ledger.pending_outbox(2)] == ["m2", "m4"]
        await ledger.mark_published(["m4"])
        await ledger.append([append("s6", 0)], [message("m6")])
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m2", "m5", "m6"]
        await ledger.mark_published(["m2", "m5", "m6"])
        assert await ledger.pending_outbox() == []
        await ledger.append([append("s7", 0)], [message("m7")])
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m7"]

    async def test_events_take_turns_in_the_pending_outbox(self, ledger: Ledger) -> None:
        await ledger.append([append("big", 0)], [message(f"b{n}") for n in range(7)])
        await ledger.append([append("other", 0)], [message(f"o{n}") for n in range(3)])
        await ledger.append([append("small", 0)], [message("s0")])
        listed = [m.message_id for m in await ledger.pending_outbox(10, per_event=2)]
        assert listed == ["b0", "b1", "o0", "o1", "s0"]
        await ledger.mark_published(listed)
        listed = [m.message_id for m in await ledger.pending_outbox(10, per_event=2)]
        assert listed == ["b2", "b3", "o2"]
        await ledger.mark_published(["b2", "o2"])  # b3 stays pending (say, unroutable)
        await ledger.append([append("late", 0)], [message("l0")])
        listed = [m.message_id for m in await ledger.pending_outbox(10, per_event=2)]
        assert listed == ["b3", "b4", "l0"]
        await ledger.mark_published(["b4", "l0"])
        # No other event waits: the big one goes on past its turn, in whole pages.
        listed = [m.message_id for m in await ledger.pending_outbox(10, per_event=2)]
        assert listed == ["b3", "b5", "b6"]
        await ledger.mark_published(listed)
        assert await ledger.pending_outbox() == []

    async def test_outbox_message_carries_the_position_of_its_event(self, ledger: Ledger) -> None:
        await ledger.append([append("s", 0, 2)])
        settled = event("round:1:settled", "round.settled")
        report = OutboxMessage("m1", "croupier.settlements", "EUR.p1", {}, settled.key)
        await ledger.append([StreamAppend("round:1", 0, [settled]), append("t", 0, 3)], [report])
        assert [m.position for m in await ledger.pending_outbox()] == [3]

    async def test_outbox_alone_is_stamped_with_the_head(self, ledger: Ledger) -> None:
        await ledger.append([append("s", 0, 2)])
        await ledger.append([], [message("m1")])
        assert [m.position for m in await ledger.pending_outbox()] == [2]

    async def test_a_set_aside_message_is_no_longer_pending_and_is_listed(
        self, ledger: Ledger
    ) -> None:
        for n in range(4):
            await ledger.append([append(f"s{n}", 0)], [message(f"m{n}")])
        page = await ledger.pending_outbox(3)
        await ledger.mark_published(["m0", "m2"])
        await ledger.set_aside({"m1": "unroutable: no queue", "unknown": "x"})
        await ledger.set_aside({"m1": "again"})  # idempotent: the first reason stays
        assert [m.message_id for m in page] == ["m0", "m1", "m2"]
        assert [m.message_id for m in await ledger.pending_outbox()] == ["m3"]
        listed = await ledger.set_aside_messages()
        assert [(m.message_id, why) for m, why in listed] == [("m1", "unroutable: no queue")]
        await ledger.mark_published(["m1"])  # published after all (redrive)
        assert await ledger.set_aside_messages() == []

    async def test_open_streams_are_those_without_a_closing_event(self, ledger: Ledger) -> None:
        await ledger.append([append("round:a", 0, 2), append("round:b", 0), append("other", 0)])
        closed = event(type_="round.settled")
        await ledger.append([StreamAppend("round:a", 2, [closed]), append("round:c", 0)])
        assert await ledger.open_streams("round:", ["round.settled"], 10) == ["round:b", "round:c"]
        assert await ledger.open_streams("round:", ["round.settled"], 1) == ["round:b"]

    async def test_the_open_search_starts_at_the_floor_it_raises(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        settled = ["round.settled"]
        await ledger.append([append("round:a", 0), append("round:b", 0)])  # begin at 1, 2
        await ledger.append([StreamAppend("round:a", 1, [event(type_="round.settled")])])
        assert await ledger.open_streams("round:", settled, 10) == ["round:b"]  # floor: 2
        await ledger.append(
            [StreamAppend("round:b", 1, [event(type_="round.settled")]), append("round:c", 0)]
        )  # round:c begins at 5
        assert await ledger.open_streams("round:", settled, 10) == ["round:c"]  # floor: 5
        # Nothing below the floor is read again: a floor set above an open stream hides it
        # from a search that starts there (another process's first one).
        scope = "'round:|round.settled'"
        await self.raw(ledger_url, f"INSERT INTO open_floor (scope, position) VALUES ({scope}, 6)")
        async with open_ledger(ledger_url) as another:
            assert await another.open_streams("round:", settled, 10) == []
            await ledger.append([append("round:d", 0)])  # begins at 6
            assert await another.open_streams("round:", settled, 10) == ["round:d"]
        # This one read what was appended since its last search, not from the floor.
        assert await ledger.open_streams("round:", settled, 10) == ["round:c", "round:d"]
        # Another scope has a floor of its own.
        assert await ledger.open_streams("round:", ["round.voided"], 10) == [
            "round:a",
            "round:b",
            "round:c",
            "round:d",
        ]

    async def test_later_open_searches_read_what_was_appended_since(
        self, ledger: Ledger, ledger_url: str
    ) -> None:
        settled = ["round.settled"]
        await ledger.append([append("round:a", 0, 2), append("round:b", 0)])
        assert await ledger.open_streams("round:", settled, 10) == ["round:a", "round:b"]
        closed = event(type_="round.settled")
        # Opened and closed in one increment, closed, opened: each seen.
        await ledger.append(
            [append("round:c", 0), StreamAppend("round:a", 2, [closed]), append("other", 0)]
        )
        await ledger.append([StreamAppend("round:c", 1, [event(type_="round.settled")])])
        await ledger.append([append("round:d", 0, 3)])
        assert await ledger.open_streams("round:", settled, 10) == ["round:b", "round:d"]
        assert await ledger.open_streams("round:", settled, 1) == ["round:b"]
        async with open_ledger(ledger_url) as fresh:  # from the floor: the same
            assert await fresh.open_streams("round:", settled, 10) == ["round:b", "round:d"]

    async def test_one_holder_of_a_lease_until_it_expires(self, ledger: Ledger) -> None:
        assert await ledger.hold_lease("relay", "a", 0.5)
        assert await ledger.hold_lease("relay", "a", 0.5)  # renewed
        assert not await ledger.hold_lease("relay", "b", 0.5)
        assert await ledger.hold_lease("other", "b", 0.5)  # another lease
        await asyncio.sleep(0.7)
        assert await ledger.hold_lease("relay", "b", 30)  # expired: taken over
        assert not await ledger.hold_lease("relay", "a", 30)

    # -- schema ---------------------------------------------------------------------

    # -- faults -----------------------------------------------------------------------

    async def test_a_database_out_of_reach_is_a_transient_fault_of_the_port(
        self, ledger_url: str
    ) -> None:
        ledger = open_ledger(self.out_of_reach(ledger_url))
        try:
            with pytest.raises(LedgerUnavailable, match="unavailable") as raised:
                await ledger.append([append("round:T1:R1", 0)])
            assert raised.value.__cause__ is not None  # the driver's own error, kept
            assert not isinstance(raised.value.__cause__, LedgerUnavailable)
            with pytest.raises(LedgerUnavailable):
                await ledger.pending_outbox()
        finally:
            await ledger.close()

    async def test_migrate_is_idempotent(self, ledger: Ledger) -> None:
        assert await ledger.migrate() == []
        await ledger.append([append("s", 0)])
        assert await ledger.migrate() == []
        assert await ledger.last_position() == 1

    # -- key rotation ---------------------------------------------------------------------

    async def rotated(self, url: str) -> Rotated:
        """Sign with one key, rotate to a second and a third, each appending and publishing
        across the handovers (``m2`` is pending at the first, ``m4`` at the second)."""
        one, two, three = LedgerKey.generate(), LedgerKey.generate(), LedgerKey.generate()
        async with open_ledger(url, one) as ledger:
            await ledger.migrate()
            await ledger.append([append("a", 0, 3)], [message("m1")])
            await ledger.mark_published(["m1"])
            await ledger.append([append("b", 0, 2)], [message("m2")])
            first = await ledger.rotate_key(two.public)
            with pytest.raises(HeadNotSigned, match=re.escape(f"signs positions 1..{first} only")):
                await ledger.append([append("late", 0, 1)])  # the outgoing key signs no more
        keyring = Keyring([KeyEntry(one.public, 1, first), KeyEntry(two.public, first + 1)])
        async with open_ledger(url, two, keyring) as ledger:
            await ledger.check_signing()
            # The first key's mark is honoured: m1 stays published, m2 is pending.
            assert [m.message_id for m in await ledger.pending_outbox()] == ["m2"]
            assert sorted(await ledger.vouched(range(1, first + 1))) == list(range(1, first + 1))
            await ledger.mark_published(["m2"])
            await ledger.append([append("c", 0, 2)], [message("m3")])
            await ledger.mark_published(["m3"])
            await ledger.append([append("d", 0, 1)], [message("m4")])
            second = await ledger.rotate_key(three.public)
        own = keyring.get(two.public.key_id)
        assert own is not None
        keyring = keyring.with_entry(replace(own, last=second))
        keyring = keyring.with_entry(KeyEntry(three.public, second + 1))
        async with open_ledger(url, three, keyring) as ledger:
            await ledger.check_signing()
            assert [m.message_id for m in await ledger.pending_outbox()] == ["m4"]
            await ledger.mark_published(["m4"])
            await ledger.append([append("e", 0, 2)], [message("m5")])
            await ledger.mark_published(["m5"])
            assert await ledger.pending_outbox() == []
        return Rotated(one, two, three, first, second, keyring)

    async def test_keys_rotate_twice_and_each_part_verifies_against_its_key(
        self, ledger_url: str
    ) -> None:
        rotated = await self.rotated(ledger_url)
        one, two, three = (k.public for k in (rotated.one, rotated.two, rotated.three))
        async with open_ledger(ledger_url) as auditor:
            report = await auditor.verify(keyring=rotated.keyring)
            assert report.ok, report.summary()
            assert report.head_position == rotated.second + 2
            # Each key given once (old and new): the handovers say which signs where.
            report = await auditor.verify(keyring=Keyring.of(one, two, three))
            assert report.ok, report.summary()
            # Trust passes along the chain: the first key vouches for its successors.
            assert (await auditor.verify(public_key=one)).ok
            # A key not given leaves its part unchecked: refused and named.
            report = await auditor.verify(keyring=Keyring.of(two, three))
            forged = [p for p in report.problems if p.table == "ledger_heads"]
            assert forged and all(one.key_id in p.detail for p in forged), report.summary()
            assert any(f"({one.key_id}), not in the keyring" in p.detail for p in forged)

    async def test_a_new_key_without_the_keyring_refuses_and_names_the_old_one(
        self, ledger_url: str
    ) -> None:
        rotated = await self.rotated(ledger_url)
        third_id = rotated.three.public.key_id
        async with open_ledger(ledger_url, LedgerKey.generate()) as stranger:
            with pytest.raises(HeadNotSigned, match=f"another key \\({third_id}\\)"):
                await stranger.check_signing()
            with pytest.raises(HeadNotSigned):
                await stranger.append([append("x", 0, 1)])
        assert await self._positions(ledger_url) == rotated.second + 2  # nothing written

    async def _positions(self, url: str) -> int:
        async with open_ledger(url) as reader:
            return await reader.last_position()

    async def test_a_rogue_key_is_refused_and_named(self, ledger_url: str) -> None:
        rotated = await self.rotated(ledger_url)
        rogue = LedgerKey.generate()
        async with open_ledger(ledger_url, rogue) as theirs:
            # Forced past Croupier's own check, it appends under its own key.
            head = await theirs.read_all(rotated.second + 1, 1)
            theirs.trust.head = (head[0].position, head[0].hash)
            await theirs.append([append("rogue", 0, 2)], [message("m-rogue")])
            await theirs.mark_published(["m-rogue"])
        async with open_ledger(ledger_url, rotated.three, rotated.keyring) as ours:
            with pytest.raises(HeadNotSigned, match=rogue.public.key_id):
                await ours.append([append("f", 0, 1)])
            assert [m.message_id for m in await ours.pending_outbox()] == ["m-rogue"]
            report = await ours.verify(keyring=rotated.keyring)
        top = rotated.second + 2
        assert report.unsigned == [top + 1, top + 2]
        heads = [p for p in report.problems if p.table == "ledger_heads"]
        assert [p.position for p in heads] == [top + 2]
        assert f"another key ({rogue.public.key_id}), not in the keyring" in heads[0].detail
        assert report.rows("outbox_marks", "forged")

    async def test_an_old_key_signing_after_its_turn_is_refused_and_named(
        self, ledger_url: str
    ) -> None:
        rotated = await self.rotated(ledger_url)
        top = rotated.second + 2
        async with open_ledger(ledger_url, rotated.one) as old:  # no keyring: its range open
            head = await old.read_all(top - 1, 1)
            old.trust.head = (top, head[0].hash)  # forced past the handover check
            await old.append([append("late", 0, 1)])
        span = f"key {rotated.one.public.key_id} signs positions 1..{rotated.first} only"
        async with open_ledger(ledger_url, rotated.three, rotated.keyring) as ours:
            with pytest.raises(HeadNotSigned, match=re.escape(span)):
                await ours.check_signing()
        async with open_ledger(ledger_url) as auditor:
            every = Keyring.of(*(k.public for k in (rotated.one, rotated.two, rotated.three)))
            for keyring in (rotated.keyring, every):
                report = await auditor.verify(keyring=keyring)
                assert report.unsigned == [top + 1]
                heads = [(p.position, p.detail) for p in report.problems if p.table != "events"]
                assert heads == [(top + 1, span)], report.summary()

    async def test_a_handover_to_a_rogue_key_vouches_for_nothing(self, ledger_url: str) -> None:
        rotated = await self.rotated(ledger_url)
        rogue = LedgerKey.generate()
        async with open_ledger(ledger_url, rogue) as theirs:
            # Croupier's own code forced to append "the third key hands over to mine",
            # signed with their key, and rows under it.
            head = await theirs.read_all(rotated.second + 1, 1)
            theirs.trust.head = (head[0].position, head[0].hash)
            forged = handover(rotated.three.public, rogue.public)
            await theirs.append([StreamAppend(KEYS_STREAM, None, [forged])])
            await theirs.append([append("rogue", 0, 2)])
        top = rotated.second + 2
        three = rotated.three.public.key_id
        async with open_ledger(ledger_url, rotated.three, rotated.keyring) as ours:
            with pytest.raises(HeadNotSigned, match=rogue.public.key_id):
                await ours.check_signing()
        async with open_ledger(ledger_url) as auditor:
            for keyring in (rotated.keyring, Keyring.of(rotated.one.public)):
                report = await auditor.verify(keyring=keyring)
                assert report.unsigned == [top + 1, top + 2, top + 3]
                heads = [(p.kind, p.position) for p in report.problems if p.table == "ledger_heads"]
                assert heads == [("missing", top + 1), ("forged", top + 1), ("forged", top + 3)]
                named = " ".join(p.detail for p in report.problems)
                assert f"another key ({rogue.public.key_id}), not in the keyring" in named
                assert f"key {three}'s turn {rotated.second + 1}..{top + 1} ends here" in named

    async def test_a_revoked_key_is_refused_and_named(self, ledger_url: str) -> None:
        rotated = await self.rotated(ledger_url)
        two = rotated.keyring.get(rotated.two.public.key_id)
        assert two is not None
        since = rotated.first + 2  # the second key's first batch (m3) on
        revoked = rotated.keyring.with_entry(replace(two, revoked_from=since))
        async with open_ledger(ledger_url) as auditor:
            report = await auditor.verify(keyring=revoked)
        heads = [p for p in report.problems if p.table == "ledger_heads"]
        assert [p.position for p in heads] == [since, since + 1, rotated.second]
        assert all(f"revoked from position {since}" in p.detail for p in heads)
        # m3's marker (m2's is below the revocation, m4's the third key's)
        assert [m.split(" mark ")[0] for m in report.rows("outbox_published")] == ["message_id m3"]
        # The service's relay no longer counts the revoked key's mark of m3, nor vouches for
        # what the revoked key signed: m3 is pending and its event is not vouched for.
        async with open_ledger(ledger_url, rotated.three, revoked) as ours:
            assert [m.message_id for m in await ours.pending_outbox()] == ["m3"]
            assert sorted(await ours.vouched(range(1, since + 4))) == [*range(1, since), since + 3]
        # A service whose own key is revoked under its head refuses to go on.
        three = rotated.keyring.get(rotated.three.public.key_id)
        assert three is not None
        top = rotated.second + 2
        revoked = revoked.with_entry(replace(three, revoked_from=top))
        async with open_ledger(ledger_url, rotated.three, revoked) as ours:
            with pytest.raises(HeadNotSigned, match=f"revoked from position {top}"):
                await ours.check_signing()

    async def test_an_adopted_head_is_refused_and_named(self, ledger_url: str) -> None:
        rotated = await self.rotated(ledger_url)
        top = rotated.second + 2
        await self.tamper(ledger_url, "DELETE FROM ledger_heads")  # the owner's hand
        async with open_ledger(ledger_url, rotated.three, rotated.keyring) as ours:
            with pytest.raises(HeadNotSigned, match="signed heads were removed"):
                await ours.check_signing()
            with pytest.raises(HeadNotSigned, match="not adopted"):
                await ours.append([append("f", 0, 1)])
        # Without the keyring the chain's handovers still say heads were removed.
        async with open_ledger(ledger_url, rotated.three) as alone:
            with pytest.raises(HeadNotSigned, match="the chain holds key handovers"):
                await alone.check_signing()
            with pytest.raises(HeadNotSigned, match="the chain holds key handovers"):
                await alone.append([append("f", 0, 1)])
            # Forced: its first head vouches for everything below it.
            alone.trust.head = (top, (await alone.read_all(top - 1, 1))[0].hash)
            await alone.append([append("f", 0, 1)])
        one, two, _ = rotated.ids()
        async with open_ledger(ledger_url) as auditor:
            for keyring in (
                rotated.keyring,
                Keyring.of(rotated.one.public, rotated.two.public, rotated.three.public),
            ):
                report = await auditor.verify(keyring=keyring)
                missing = [p for p in report.problems if p.table == "ledger_heads"]
                assert [(p.kind, p.position) for p in missing] == [
                    ("missing", rotated.first),
                    ("missing", rotated.second),
                ], report.summary()
                assert f"key {one}'s turn 1..{rotated.first} ends here" in missing[0].detail
                assert f"key {two}'s turn" in missing[1].detail

    async def test_deleted_publish_marks_are_reported_and_nothing_is_republished(
        self, ledger_url: str
    ) -> None:
        """The owner deletes every publish mark: the relay publishes nothing again (not the
        history, nor anything after it) and says so, verify names each message, and
        ``redrive --results --unmarked`` is the explicit way on."""
        key = LedgerKey.generate()
        async with open_ledger(ledger_url, key) as ledger:
            await ledger.migrate()
            await settle_rounds(ledger, "t1", "t2", "t3")
            _, history = await relay_once(ledger)
            assert len(history) == 3
            await settle_rounds(ledger, "t4")  # its head records the three published
        await self.tamper(ledger_url, "DELETE FROM outbox_published", "DELETE FROM outbox_marks")
        async with open_ledger(ledger_url, key) as ledger:  # the service restarted
            relay, got = await relay_once(ledger)
            assert got == set()  # neither the history nor t4's result
            assert relay.marks_missing == 3
            assert relay.metrics.registry.get_sample_value("croupier_relay_marks_missing") == 3
            report = await ledger.verify(public_key=key.public, outbox_rule=outbox_rule)
            missing = [p for p in report.problems if p.table == "outbox_published"]
            assert {p.kind for p in missing} == {"missing"}
            assert sorted(p.row.rpartition(" ")[2] for p in missing) == sorted(history)
            assert "marks deleted" in missing[0].detail and not report.ok
            listed, sendable = await _unmarked(ledger, 100)
            assert set(sendable) == history and {e.action for e in listed} == {"would redrive"}
            await ledger.mark_published(list(sendable))  # published again, as redrive does
        async with open_ledger(ledger_url, key) as ledger:
            relay, got = await relay_once(ledger)
            assert relay.marks_missing == 0 and len(got) == 1  # t4's result, at last
            report = await ledger.verify(public_key=key.public, outbox_rule=outbox_rule)
            assert report.ok, report.summary()
        # The claim cannot be taken back: it is signed with the head.
        await self.tamper(
            ledger_url,
            "UPDATE ledger_heads SET published = NULL",
            "DELETE FROM outbox_published",
            "DELETE FROM outbox_marks",
        )
        async with open_ledger(ledger_url, key) as ledger:
            _, got = await relay_once(ledger)
            assert got == set()  # no head vouches for anything: refused, not republished
            report = await ledger.verify(public_key=key.public, outbox_rule=outbox_rule)
            forged = [p for p in report.problems if p.table == "ledger_heads"]
            assert forged and all("signature does not match" in p.detail for p in forged)
