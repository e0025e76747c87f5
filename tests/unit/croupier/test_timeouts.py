"""Nothing waits forever unseen: held events time out into rejections, open rounds are
reported once, and both are visible meanwhile (metrics; read back after a restart)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from croupier_feeds import RoundFeed, line

from croupier.bus import CODE_HEADER
from croupier.bus.memory import MemoryBus
from croupier.cli import main
from croupier.consumer import FeedConsumer
from croupier.ledger import Ledger, open_ledger
from croupier.metrics import Metrics
from croupier.relay import OutboxRelay
from croupier.round import REJECTED, TIMED_OUT, stream_name
from croupier.settler import Inbound, Settler


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


async def test_an_open_round_is_reported_once_and_still_settles(ledger: Ledger) -> None:
    f = RoundFeed(table_id="t-slow")
    first = [f.opened(), f.bet("a1"), f.hole("As Ad"), f.cards("dealer", "9c 9d")]
    rest = [
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.cards("board", "Ks 4h"),
        f.completed(),
    ]
    settler, metrics = Settler(ledger, dead_letters=True), Metrics()
    consumer = FeedConsumer(MemoryBus(), settler, metrics, held_timeout=60, round_timeout=0.2)
    await settler.handle([Inbound(line(e).encode(), n) for n, e in enumerate(first, 1)])
    await asyncio.sleep(0.3)
    await consumer.sweep()
    await consumer.sweep()  # once only

    stream = stream_name("t-slow", "r1")
    reported = [r for r in await ledger.read_stream(stream) if r.type == TIMED_OUT]
    assert len(reported) == 1
    assert reported[0].data["code"] == "round_timeout"
    assert reported[0].data["waiting_for"] == "waiting for round.completed"
    assert gauge(metrics, "croupier_oldest_open_round_seconds") > 0.2
    # A restarted instance reads the open round back, reported already.
    again = Settler(ledger, dead_letters=True)
    assert await again.load_open() == 1
    (state,) = again.rounds
    assert state.timed_out and state.started_at is not None
    report = await again.handle([Inbound(line(e).encode(), n) for n, e in enumerate(rest, 10)])
    assert len(report.closed) == 1  # a late completion still settles
    assert await ledger.open_streams("round:", ["round.settled", "round.voided"], 10) == []


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
    assert await asyncio.to_thread(main, ["rounds", "--open", "--ledger", url]) == 0
    assert "2 open rounds" in capsys.readouterr().out
