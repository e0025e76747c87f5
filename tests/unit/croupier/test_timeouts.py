"""Nothing waits forever unseen: held events time out into rejections, open rounds into
voids that refund every wager, and both are visible meanwhile (metrics; read back after a
restart; ``croupier rounds --open``)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from croupier_feeds import RoundFeed, line

from croupier.bus import CODE_HEADER, Outgoing
from croupier.bus.memory import MemoryBus
from croupier.cli import main
from croupier.ledger import Ledger, open_ledger
from croupier.metrics import Metrics
from croupier.settlement.consumer import FeedConsumer
from croupier.settlement.facts import Fact
from croupier.settlement.relay import OutboxRelay
from croupier.settlement.replay import replay
from croupier.settlement.results import message_id
from croupier.settlement.round import REJECTED, SETTLED, VOIDED, Round, Status, stream_name
from croupier.settlement.settler import Inbound, Settler


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


def gauge(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_a_held_event_times_out_into_a_dead_lettered_rejection(ledger: Ledger) -> None:
    f = RoundFeed(table_id="t-gap")
    opened, bet = f.opened(), f.bet("a1")
    gap = f.make(
        "bet.placed", bet["payload"] | {"bet_id": "a2"}, seq=999_999
    )  # the gap before it never fills
    settler, metrics = Settler(ledger, dead_letters=True), Metrics()
    bus = MemoryBus()
    consumer = FeedConsumer(bus, settler, metrics, held_timeout=0.3, round_timeout=3600)
    await settler.handle([Inbound(line(e).encode(), n) for n, e in enumerate([opened, gap], 1)])

    await consumer.sweep()
    assert gauge(metrics, "croupier_events_held") == 1
    assert gauge(metrics, "croupier_rounds_open") == 1
    await asyncio.sleep(0.4)
    await consumer.sweep()
    await OutboxRelay(ledger, bus, metrics).relay_once()

    facts = await ledger.read_stream(stream_name("t-gap", "r1"))
    rejected = [r for r in facts if r.type == REJECTED]
    assert [(r.data["event"]["event_id"], r.data["code"]) for r in rejected] == [
        (gap["event_id"], "held_timeout")
    ]
    assert "did not arrive within 0.3 s" in rejected[0].data["reason"]
    (letter,) = bus.dead_letters
    assert letter.headers is not None and letter.headers[CODE_HEADER] == "held_timeout"
    assert gauge(metrics, "croupier_events_held") == 0
    assert (
        metrics.registry.get_sample_value(
            "croupier_events_rejected_total", {"code": "held_timeout"}
        )
        == 1
    )
    # The round goes on: seq 2 is free.
    report = await settler.handle([Inbound(line(bet).encode(), 3)])
    assert [h.verdict for h in report.handled] == ["accepted"]


def slow_round() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A Casino Hold'em round with an ante and a side bet: the part the studio sends before
    it stalls, and the rest (a flop call and the completion)."""
    f = RoundFeed(table_id="t-slow")
    first = [
        f.opened(),
        f.bet("a1"),
        f.bet("x1", "aa_bonus", amount=500),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
    ]
    rest = [
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.cards("board", "Ks 4h"),
        f.completed(),
    ]
    return first, rest


async def test_an_open_round_times_out_into_a_void_refunded_like_a_studio_void(
    ledger: Ledger,
) -> None:
    first, rest = slow_round()
    settler, metrics, bus = Settler(ledger, dead_letters=True), Metrics(), MemoryBus()
    wallet: list[Outgoing] = []
    bus.subscribe("#", wallet.append)
    await settler.handle([Inbound(line(e).encode(), n) for n, e in enumerate(first, 1)])
    await asyncio.sleep(0.3)
    # Visible while it waits: the gauges of a sweep whose timeout is not reached yet.
    await FeedConsumer(bus, settler, metrics, held_timeout=60, round_timeout=3600).sweep()
    assert gauge(metrics, "croupier_rounds_open") == 1
    assert gauge(metrics, "croupier_oldest_open_round_seconds") > 0.2

    consumer = FeedConsumer(bus, settler, metrics, held_timeout=60, round_timeout=0.2)
    await consumer.sweep()
    await consumer.sweep()  # once only
    await OutboxRelay(ledger, bus, metrics).relay_once()

    stream = stream_name("t-slow", "r1")
    facts = await ledger.read_stream(stream)
    (void,) = [r for r in facts if r.type == VOIDED]
    assert void == facts[-1] and void.version == len(first) + 1
    assert void.data["code"] == "round_timeout"
    assert void.data["waiting_for"] == "waiting for round.completed"
    assert void.data["event"]["seq"] == len(first) + 1
    assert "round timeout of 0.2 s" in void.data["reason"]
    # Refunded through the outbox exactly like a studio void: one result per player.
    (result,) = [m.body for m in wallet]
    assert result["message_id"] == message_id("t-slow", "r1", "p1", "EUR")
    assert {b["bet_id"]: (b["stake"], b["returned"], b["outcome"]) for b in result["bets"]} == {
        "a1": (100, 100, "refund"),
        "x1": (500, 500, "refund"),
    }
    assert result["ledger_position"] == void.position
    assert gauge(metrics, "croupier_rounds_timed_out_total") == 1
    assert gauge(metrics, "croupier_rounds_open") == 0
    assert gauge(metrics, "croupier_oldest_open_round_seconds") == 0
    assert await ledger.open_streams("round:", ["round.settled", "round.voided"], 10) == []

    # A restarted instance has nothing open; the studio's late events are rejected with a code
    # (dead-lettered), and the round closes only once.
    again = Settler(ledger, dead_letters=True)
    assert await again.load_open() == 0
    report = await again.handle([Inbound(line(e).encode(), n) for n, e in enumerate(rest, 10)])
    assert [(h.verdict, h.code) for h in report.handled] == [("rejected", "after_timeout")] * 4
    assert report.closed == []
    await OutboxRelay(ledger, bus, metrics).relay_once()
    assert [d.headers[CODE_HEADER] for d in bus.dead_letters if d.headers] == ["after_timeout"] * 4
    assert len(wallet) == 1
    closing = [r for r in await ledger.read_stream(stream) if r.type in (SETTLED, VOIDED)]
    assert closing == [void]


async def test_a_timed_out_round_reads_back_and_replays_as_the_ledger_recorded_it(
    ledger: Ledger, tmp_path: Path
) -> None:
    """The void is a recorded fact: a round read back from the ledger is voided, and a
    replay of the whole feed against the same ledger writes the refunds wallets got."""
    first, rest = slow_round()
    settler, bus = Settler(ledger, dead_letters=True), MemoryBus()
    wallet: list[Outgoing] = []
    bus.subscribe("#", wallet.append)
    await settler.handle([Inbound(line(e).encode(), n) for n, e in enumerate(first, 1)])
    await asyncio.sleep(0.25)
    await FeedConsumer(bus, settler, Metrics(), round_timeout=0.2).sweep()
    await OutboxRelay(ledger, bus, Metrics()).relay_once()

    state = Round("t-slow", "r1")
    for record in await ledger.read_stream(stream_name("t-slow", "r1")):
        state.apply(Fact(record.type, record.data, record.key))
    assert state.status is Status.VOIDED and state.timed_out

    results, rejections = io.StringIO(), io.StringIO()
    lines = [line(e).encode() for e in [*first, *rest]]
    summary = await replay(lines, ledger, results, rejections)
    replayed = [json.loads(row) for row in results.getvalue().splitlines()]
    assert replayed == [m.body for m in wallet]
    assert (summary.voided, summary.settled, summary.read_back) == (1, 0, 1)
    assert summary.rejected == {"after_timeout": len(rest)}


async def test_the_rounds_command_lists_open_rounds_and_what_they_wait_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    f, g = RoundFeed(table_id="t-open"), RoundFeed(table_id="t-gap", round_id="r9")
    events = [f.opened(), f.bet("a1"), g.opened()]
    g.bet("a1")  # seq 2 never arrives
    events.append(g.bet("a2", seq=3))
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await Settler(ledger).handle([Inbound(line(e).encode(), n) for n, e in enumerate(events)])

    status = await asyncio.to_thread(main, ["rounds", "--open", "--ledger", url, "--json"])

    assert status == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["open"] == 2
    by_table = {r["table_id"]: r for r in listed["rounds"]}
    assert by_table["t-open"]["waiting_for"] == "waiting for round.completed"
    assert by_table["t-gap"]["waiting_for"] == "waiting for seq 2 (held: [3])"
    assert by_table["t-gap"]["held_seqs"] == [3]
    assert listed["round_timeout_seconds"] == 3600
    assert 3590 < by_table["t-open"]["times_out_in_seconds"] <= 3600
    assert await asyncio.to_thread(main, ["rounds", "--open", "--ledger", url]) == 0
    out = capsys.readouterr().out
    assert "2 open rounds" in out and "(voided in 60 min)" in out


async def test_a_round_timing_out_rejects_what_it_holds_before_its_void(ledger: Ledger) -> None:
    f = RoundFeed(table_id="t-stuck")
    events = [f.opened(), f.bet("a1")]
    f.hole("As Ad")  # seq 3 never arrives
    events.append(f.cards("dealer", "9c 9d", seq=4))
    settler = Settler(ledger, dead_letters=True)
    await settler.handle([Inbound(line(e).encode(), n) for n, e in enumerate(events, 1)])
    await asyncio.sleep(0.25)

    report = await settler.expire(held_timeout=60, round_timeout=0.2)

    assert [(h.verdict, h.code) for h in report.handled] == [("rejected", "held_timeout")]
    (void,) = report.closed
    assert void.data["waiting_for"] == "waiting for seq 3 (held: [4])"
    assert void.data["event"]["seq"] == 3
    assert settler.rounds == []  # closed: it leaves memory
    # Nothing is held for a closed round: an event ahead of its turn is rejected at once.
    late = f.cards("board", "Ah 7c 2d", seq=9)
    (handled,) = (await settler.handle([Inbound(line(late).encode(), 9)])).handled
    assert (handled.verdict, handled.code) == ("rejected", "after_timeout")


async def test_rounds_another_instance_left_open_are_read_back_and_time_out(
    ledger: Ledger,
) -> None:
    """A standby started before the rounds opened: its sweep reads the ledger's open rounds
    back now and then (from the open floor), forgets those closed elsewhere, and times out
    the ones left open once it is the only instance left."""
    stalled, done = RoundFeed(table_id="t-left"), RoundFeed(table_id="t-done")
    active, standby_settler = Settler(ledger, dead_letters=True), Settler(ledger, dead_letters=True)
    assert await standby_settler.load_open() == 0
    metrics = Metrics()
    standby = FeedConsumer(
        MemoryBus(), standby_settler, metrics, round_timeout=3600, reload_every=0
    )
    first = [stalled.opened(), stalled.bet("a1"), done.opened(), done.bet("a1")]
    await active.handle([Inbound(line(e).encode(), n) for n, e in enumerate(first, 1)])

    await standby.sweep()
    assert sorted(r.table_id for r in standby_settler.rounds) == ["t-done", "t-left"]
    assert gauge(metrics, "croupier_rounds_open") == 2
    finish = [
        done.hole("As Ad"),
        done.cards("dealer", "9c 9d"),
        done.cards("board", "Ah 7c 2d Ks 4h"),
        done.completed(),
    ]
    report = await active.handle([Inbound(line(e).encode(), n) for n, e in enumerate(finish, 9)])
    assert len(report.closed) == 1
    await standby.sweep()
    assert [r.table_id for r in standby_settler.rounds] == ["t-left"]
    assert gauge(metrics, "croupier_rounds_open") == 1

    await asyncio.sleep(0.25)
    standby.round_timeout = 0.2
    await standby.sweep()
    (void,) = [r for r in await ledger.read_stream(stream_name("t-left", "r1")) if r.type == VOIDED]
    assert void.data["code"] == "round_timeout"
    assert standby_settler.rounds == []
