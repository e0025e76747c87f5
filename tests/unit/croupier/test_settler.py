"""The settler on the SQLite ledger (a temporary file): batches, redelivery, restart, meters."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, CH_PROGRESSIVE, RoundFeed, line

import holdem
from contract.settlement import SettlementResult
from croupier.ledger import Ledger, VersionConflict, open_ledger
from croupier.settlement.facts import Fact
from croupier.settlement.meters import METER_MOVED, meter_stream
from croupier.settlement.results import message_id
from croupier.settlement.round import SETTLED, Round
from croupier.settlement.settler import REJECTIONS_STREAM, BatchReport, Inbound, Settler
from studio import StudioConfig, TableSpec, simulate

Event = dict[str, Any]
SEED = holdem.load_paytable("casino-holdem/progressive").jackpot.seed  # type: ignore[union-attr]


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


def inbound(events: Sequence[Event | str], first_ref: int = 1) -> list[Inbound]:
    """Messages as the consumer hands them over; a ``str`` is a raw (malformed) body."""
    return [
        Inbound((e if isinstance(e, str) else line(e)).encode(), ref)
        for ref, e in enumerate(events, start=first_ref)
    ]


def ch_round(
    f: RoundFeed,
    table: tuple[str, str] = CH_CLASSIC,
    hole: str = "As Ad",
    flop: str = "Ah 7c 2d",
    jackpot: bool = False,
    rest: str = "Ks 4h",
) -> list[Event]:
    """Two players on a shared hand; p1 calls, p2 folds; the dealer holds nines."""
    return [
        f.opened(table),
        f.bet("a1"),
        f.bet("x1", "aa_bonus"),
        *([f.bet("j1", "jackpot")] if jackpot else []),
        f.bet("a2", amount=300, player="p2"),
        f.hole(hole),
        f.cards("dealer", "9c 9d"),
        f.cards("board", flop),
        f.decide("a1", "flop", "call", "c1", 200),
        f.decide("a2", "flop", "fold"),
        f.cards("board", rest),
        f.completed(),
    ]


def royal_round(round_id: str) -> list[Event]:
    """A progressive round in which p1 holds a royal flush: the jackpot is awarded."""
    return ch_round(
        RoundFeed(round_id=round_id),
        CH_PROGRESSIVE,
        hole="As Ks",
        flop="Qs Js Ts",
        jackpot=True,
        rest="3d 4h",
    )


def streams_read(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The streams ``ledger.read_streams`` is asked for from now on (filled as it is)."""
    read: list[str] = []
    read_streams = ledger.read_streams

    async def counted(streams: Sequence[str]) -> Any:
        read.extend(streams)
        return await read_streams(streams)

    monkeypatch.setattr(ledger, "read_streams", counted)
    return read


def models(report: BatchReport) -> list[SettlementResult]:
    """The report's result bodies as contract models (each validated)."""
    return [SettlementResult.model_validate(body, strict=False) for body in report.results]


def by_player(results: Sequence[SettlementResult]) -> dict[str, SettlementResult]:
    return {r.player_id: r for r in results}


async def test_a_batch_of_many_rounds_commits_in_one_transaction(ledger: Ledger) -> None:
    rounds = [ch_round(RoundFeed(round_id=f"r{n}")) for n in range(5)]
    events = [e for events in zip(*rounds, strict=True) for e in events]  # interleaved

    report = await Settler(ledger).handle(inbound(events))

    assert {h.verdict for h in report.handled} == {"accepted"}
    assert [h.ref for h in report.handled] == list(range(1, len(events) + 1))
    assert len(report.closed) == 5 and len(report.results) == 10
    recorded = await ledger.read_all(limit=10_000)
    assert len(recorded) == len(events)
    assert {r.type for r in recorded} == {"feed.accepted", SETTLED}


async def test_a_failed_batch_writes_nothing_and_a_retry_decides_the_same(ledger: Ledger) -> None:
    ours, theirs = Settler(ledger), Settler(ledger)
    first, second = RoundFeed(round_id="r1"), RoundFeed(round_id="r2")
    one, two = ch_round(first), ch_round(second)
    await ours.handle(inbound(one[:3]))
    await theirs.handle(inbound(one[3:4]))  # another instance moves r1 on behind our back
    before = await ledger.last_position()

    batch = inbound([*two, *one[4:]])
    with pytest.raises(VersionConflict):
        await ours.handle(batch)

    assert await ledger.last_position() == before  # r2, untouched by the conflict, too
    assert await ledger.stream_version("round:t1:r2") == 0
    report = await ours.handle(batch)  # read back from the ledger, then decided again
    assert [h.verdict for h in report.handled] == ["accepted"] * len(batch)
    assert {(r.round_id, r.player_id) for r in models(report)} == {
        ("r1", "p1"),
        ("r1", "p2"),
        ("r2", "p1"),
        ("r2", "p2"),
    }


async def test_redelivering_a_batch_is_a_no_op(ledger: Ledger) -> None:
    settler = Settler(ledger)
    batch = inbound(ch_round(RoundFeed()))
    first = await settler.handle(batch)
    position = await ledger.last_position()
    pending = await ledger.pending_outbox()

    again = await settler.handle(batch)
    after_restart = await Settler(ledger).handle(batch)

    for report in (again, after_restart):
        assert {h.verdict for h in report.handled} == {"duplicate"}
        assert report.results == [] and report.closed == []
    assert await ledger.last_position() == position
    assert await ledger.pending_outbox() == pending
    assert len(first.results) == 2


async def test_a_fresh_settler_continues_a_half_played_round(ledger: Ledger) -> None:
    events = ch_round(RoundFeed(), CH_PROGRESSIVE, jackpot=True)
    whole = await _settle_alone(events)
    split = 7
    held = events[split + 1 :]  # one missing: the rest are held until it comes

    await Settler(ledger).handle(inbound(events[:split]))
    restarted = Settler(ledger)
    report = await restarted.handle(inbound(held))
    assert {h.verdict for h in report.handled} == {"held"}
    report = await Settler(ledger).handle(inbound([events[split]]))  # and restart again

    assert [h.verdict for h in report.handled] == ["accepted"] * (1 + len(held))
    strip = {"ledger_position"}
    assert [r.model_dump(exclude=strip) for r in models(report)] == [
        r.model_dump(exclude=strip) for r in whole
    ]


async def _settle_alone(events: Sequence[Event]) -> list[SettlementResult]:
    async with open_ledger("sqlite:///:memory:") as other:
        await other.migrate()
        return models(await Settler(other).handle(inbound(events)))


MALFORMED = {
    "not json": "{not json",
    "unknown type": line(RoundFeed().make("round.paused", {})),
    "no card": line(RoundFeed().cards("board", "Ax 2c 3c")),
}


async def test_contract_rejections_are_kept_with_raw_text_and_reason(ledger: Ledger) -> None:
    f = RoundFeed()
    good = [f.opened(), f.bet("a1")]
    bodies: list[Event | str] = [good[0], *MALFORMED.values(), good[1]]

    report = await Settler(ledger).handle(inbound(bodies))

    verdicts = [(h.ref, h.verdict, h.code) for h in report.handled]
    assert verdicts == [
        (1, "accepted", None),
        (2, "rejected", "not_json"),
        (3, "rejected", "contract"),
        (4, "rejected", "contract"),
        (5, "accepted", None),
    ]
    kept = await ledger.read_stream(REJECTIONS_STREAM)
    assert [r.data["raw"] for r in kept] == list(MALFORMED.values())
    reasons = [r.data["reason"] for r in kept]
    assert "not valid JSON" in reasons[0]
    assert "round.paused" in reasons[1]
    assert "Ax" in reasons[2] and "card" in reasons[2]
    assert kept[2].data["event_id"] == MALFORMED_EVENT_ID
    assert [h.reason for h in report.handled[1:4]] == reasons
    assert await ledger.stream_version("round:t1:r1") == 2  # the round went on


MALFORMED_EVENT_ID = RoundFeed().cards("board", "Ax 2c 3c")["event_id"]


async def test_rule_rejections_are_kept_in_the_round_stream(ledger: Ledger) -> None:
    f = RoundFeed()
    events = [f.opened(), f.bet("a1"), f.bet("a2", amount=50, player="p2")]
    report = await Settler(ledger).handle(inbound(events))
    assert report.handled[-1].verdict == "rejected"
    assert report.handled[-1].code == "stake_limits"
    (*_, kept) = await ledger.read_stream("round:t1:r1")
    assert kept.type == "feed.rejected"
    assert kept.data["event"] == events[-1]
    assert "outside the table's limits" in kept.data["reason"]


async def test_results_carry_the_settled_fact_position_and_stable_message_ids(
    ledger: Ledger,
) -> None:
    f = RoundFeed(table_id="t9", round_id="r9")
    settler = Settler(ledger)
    await settler.handle(inbound([RoundFeed(round_id="warm-up").opened()]))  # shift positions
    report = await settler.handle(inbound(ch_round(f)))

    settled = [r for r in await ledger.read_stream("round:t9:r9") if r.type == SETTLED]
    (fact,) = settled
    assert [c.position for c in report.closed] == [fact.position]
    results = by_player(models(report))
    assert {r.ledger_position for r in results.values()} == {fact.position}
    assert results["p1"].message_id == message_id("t9", "r9", "p1", "EUR")
    assert results["p2"].message_id == message_id("t9", "r9", "p2", "EUR")
    assert results["p1"].message_id != results["p2"].message_id
    assert [r.message_id for r in await _settle_alone(ch_round(RoundFeed("t9", "r9")))] == [
        r.message_id for r in models(report)
    ]
    pending = {m.message_id: m for m in await ledger.pending_outbox()}
    for result in results.values():
        message = pending[result.message_id]
        assert message.position == fact.position
        assert message.routing_key == f"EUR.{result.player_id}"
        assert message.body == result.model_dump(mode="json", exclude={"ledger_position"})
    assert (results["p1"].stake_total, results["p1"].returned_total) == (400, 1400)
    assert (results["p2"].stake_total, results["p2"].returned_total) == (300, 0)


async def test_the_jackpot_meter_moves_across_rounds_and_reseeds_after_a_royal(
    ledger: Ledger,
) -> None:
    key = meter_stream("casino-holdem/progressive", "EUR")
    settler = Settler(ledger)
    plain = [ch_round(RoundFeed(round_id=f"r{n}"), CH_PROGRESSIVE, jackpot=True) for n in (1, 2)]
    await settler.handle(inbound(plain[0]))
    await Settler(ledger).handle(inbound(plain[1]))  # another instance reads the meter back
    royal = royal_round("r3")
    with pytest.raises(VersionConflict):  # the first one's meter is stale: nothing written
        await settler.handle(inbound(royal))
    assert await ledger.stream_version("round:t1:r3") == 0
    report = await settler.handle(inbound(royal))  # the retry reads the meter back
    assert {h.verdict for h in report.handled} == {"accepted"}
    after_royal = ch_round(RoundFeed(round_id="r4"), CH_PROGRESSIVE, jackpot=True)
    await settler.handle(inbound(after_royal))

    moves = await ledger.read_stream(key)
    assert [m.type for m in moves] == [METER_MOVED] * 4
    assert [m.version for m in moves] == [1, 2, 3, 4]
    contribution = 100 * 20 // 100
    assert [(m.data["before"], m.data["after"]) for m in moves] == [
        (SEED, SEED + contribution),
        (SEED + contribution, SEED + 2 * contribution),
        (SEED + 2 * contribution, SEED),
        (SEED, SEED + contribution),
    ]
    royal_move = moves[2].data
    assert royal_move["awarded"] == SEED + 3 * contribution
    assert royal_move["reseeded"] == SEED
    (p1,) = [r for r in models(report) if r.player_id == "p1"]
    jackpot = next(b for b in p1.bets if b.spot == "jackpot")
    assert jackpot.returned == 100 + SEED + 3 * contribution


async def test_a_lost_race_on_a_shared_meter_reads_back_only_that_batch_s_rounds(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two instances move one jackpot pool: a royal decided on the stale level meets a
    version conflict (an award is a share of the level it met), and the settler forgets
    the meter and the rounds of that batch only. Its other open rounds (a table half-way
    through its round) stay in memory as recorded, and are not read back from the ledger
    when that round goes on."""
    settler = Settler(ledger)
    waiting = ch_round(RoundFeed(table_id="t9", round_id="w1"))
    await settler.handle(inbound(waiting[:4]))  # open, two bets in
    plain = [ch_round(RoundFeed(round_id=f"r{n}"), CH_PROGRESSIVE, jackpot=True) for n in (1, 2)]
    await settler.handle(inbound(plain[0]))
    await Settler(ledger).handle(inbound(plain[1]))  # another instance moves the pool on
    royal = royal_round("r3")
    with pytest.raises(VersionConflict):
        await settler.handle(inbound(royal))
    read = streams_read(ledger, monkeypatch)
    assert {h.verdict for h in (await settler.handle(inbound(royal))).handled} == {"accepted"}
    assert read == ["round:t1:r3"]  # the failed batch's round, read back for the retry
    report = await settler.handle(inbound(waiting[4:], first_ref=50))
    assert read == ["round:t1:r3"]  # the waiting round went on from memory
    assert {h.verdict for h in report.handled} == {"accepted"}
    assert {r.round_id for r in models(report)} == {"w1"}


async def test_contributions_decided_on_a_stale_level_move_onto_the_level_recorded(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two instances move one jackpot pool, each with the level it last knew. The second
    to commit is not refused: its contributions (no award) are moved onto the level the
    other recorded, in its meter facts and its settlement's jackpot movements alike, and
    it commits without deciding the batch again or reading any round back. The pool's
    movements keep one recorded order, each continuing from the last, and the postings and
    results are those decided."""
    key = meter_stream("casino-holdem/progressive", "EUR")
    ours, theirs = Settler(ledger), Settler(ledger)
    rounds = [ch_round(RoundFeed(round_id=f"r{n}"), CH_PROGRESSIVE, jackpot=True) for n in range(4)]
    await ours.handle(inbound(rounds[0]))
    await theirs.handle(inbound(rounds[1]))  # reads the meter, moves it on
    batch = [*rounds[2], *rounds[3]]  # two more movements, decided on the stale level
    decided = await ours.decide(inbound(batch))
    expected_results = sorted(decided.outbox, key=lambda m: m.message_id)
    read = streams_read(ledger, monkeypatch)
    report = await ours.commit(decided)

    assert read == []
    assert sorted(m.message_id for m in decided.outbox) == [m.message_id for m in expected_results]
    moves = await ledger.read_stream(key)
    assert [m.version for m in moves] == [1, 2, 3, 4]
    assert [m.data["settlement"] for m in moves[2:]] == [c.key for c in report.closed]
    for previous, move in itertools.pairwise(moves):
        assert move.data["before"] == previous.data["after"]
    contribution = 100 * 20 // 100
    assert moves[-1].data["after"] == SEED + 4 * contribution
    for closed, move in zip(report.closed, moves[2:], strict=True):
        (movement,) = closed.data["jackpot"]
        assert (movement["before"], movement["after"]) == (
            move.data["before"],
            move.data["after"],
        )
    # The next batch starts from the level recorded, and reads the meter once.
    late = ch_round(RoundFeed(round_id="r9"), CH_PROGRESSIVE, jackpot=True)
    await ours.handle(inbound(late))
    assert (await ledger.read_last(key)).data["after"] == SEED + 5 * contribution


async def test_a_progressive_round_opened_last_settles_with_the_meter(ledger: Ledger) -> None:
    events = ch_round(RoundFeed(), CH_PROGRESSIVE, jackpot=True)
    report = await Settler(ledger).handle(inbound([*events[1:], events[0]]))
    assert [h.verdict for h in report.handled][: len(events) - 1] == ["held"] * (len(events) - 1)
    assert len(report.closed) == 1
    (move,) = await ledger.read_stream(meter_stream("casino-holdem/progressive", "EUR"))
    assert move.data["before"] == SEED


async def test_reject_unopened_rejects_what_waits_for_a_round_never_opened(
    ledger: Ledger,
) -> None:
    settler = Settler(ledger)
    f = RoundFeed()
    f.opened()  # never sent
    waiting = [f.bet("a1"), f.bet("a2", player="p2")]
    await settler.handle(inbound(waiting))

    report: BatchReport = await settler.reject_unopened()

    assert [(h.verdict, h.code, h.event_id) for h in report.handled] == [
        ("rejected", "never_opened", e["event_id"]) for e in waiting
    ]
    assert "never opened" in (report.handled[0].reason or "")
    kinds = [r.type for r in await ledger.read_stream("round:t1:r1")]
    assert kinds == ["feed.held", "feed.held", "feed.rejected", "feed.rejected"]


async def test_a_malformed_message_repeated_in_and_across_batches_is_kept_once(
    ledger: Ledger,
) -> None:
    settler = Settler(ledger)
    first, second = "{not json", "[1, 2]"
    report = await settler.handle(inbound([first, first]))
    assert [h.verdict for h in report.handled] == ["rejected", "rejected"]
    report = await settler.handle(inbound([second, first, RoundFeed().opened()]))

    assert [h.verdict for h in report.handled] == ["rejected", "rejected", "accepted"]
    kept = await ledger.read_stream(REJECTIONS_STREAM)
    assert [r.data["raw"] for r in kept] == [first, second]


async def test_a_rejection_the_ledger_holds_already_is_not_a_new_one(ledger: Ledger) -> None:
    """Rejected every time, new (to count) only when this handling recorded it: the same bytes
    twice in a batch, and again after a reconnect lost the ack, are one rejection."""
    first, second = "{not json", "[1, 2]"
    report = await Settler(ledger).handle(inbound([first, first]))
    assert [(h.verdict, h.new) for h in report.handled] == [("rejected", True), ("rejected", False)]
    redelivered = await Settler(ledger).handle(inbound([second, first]))  # a new process
    assert [(h.verdict, h.new) for h in redelivered.handled] == [
        ("rejected", True),
        ("rejected", False),
    ]
    new = sum(h.new for r in (report, redelivered) for h in r.handled if h.verdict == "rejected")
    assert new == len(await ledger.read_stream(REJECTIONS_STREAM)) == 2


async def test_settled_rounds_leave_memory_once_committed_and_open_ones_stay(
    ledger: Ledger,
) -> None:
    settler = Settler(ledger)
    played = [ch_round(RoundFeed(round_id=f"r{n}")) for n in range(3)]
    half = ch_round(RoundFeed(round_id="open"))[:4]
    await settler.handle(inbound([*[e for r in played for e in r], *half]))

    assert [state.round_id for state in settler.rounds] == ["open"]
    late = await settler.handle(inbound(played[0][-1:]))  # a redelivery, read back
    assert [h.verdict for h in late.handled] == ["duplicate"]
    assert [state.round_id for state in settler.rounds] == ["open"]


async def test_a_closed_round_stays_in_memory_while_a_later_batch_on_it_commits(
    ledger: Ledger,
) -> None:
    settler = Settler(ledger)
    f = RoundFeed(round_id="r1")
    events = ch_round(f)
    first = await settler.decide(inbound(events))
    # Decided before the first commits: a late bet on the closed round, rejected.
    second = await settler.decide(inbound([f.bet("late")], first_ref=100))
    await settler.commit(first)
    assert [state.round_id for state in settler.rounds] == ["r1"]
    report = await settler.commit(second)
    assert [h.verdict for h in report.handled] == ["rejected"]
    assert settler.rounds == []


def test_consumer_lag_is_the_age_of_the_event_at_the_head_of_the_batch() -> None:
    from croupier.settlement.consumer import event_age

    body = b'{"occurred_at": "2026-12-01T03:00:00.000Z", "event_id": "x"}'
    moment = 1_796_094_000.0  # 2026-12-01T03:00:00Z
    assert event_age(body, now=moment + 57.5) == 57.5
    assert event_age(b"not json", now=moment) == 0.0
    # A hostile body at the head of a batch must not stop the consumer.
    assert event_age(b'{"a":' * 3_000, now=moment) == 0.0
    assert event_age(b'{"occurred_at": 5}', now=moment) == 0.0


async def shared_hand_up_to_completion(settler: Settler, players: int) -> bytes:
    """A shared hand of ``players`` settled up to its ``round.completed``, which is returned."""
    table = TableSpec("big", "casino-holdem/classic", players=players)
    lines = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=3))]
    for start in range(0, len(lines) - 1, 1000):
        page = lines[start : min(start + 1000, len(lines) - 1)]
        await settler.handle([Inbound(body, n) for n, body in enumerate(page)])
    return lines[-1]


@contextlib.asynccontextmanager
async def counting_turns() -> AsyncIterator[Callable[[], int]]:
    """Another task counting the turns it gets; yields how many it has had so far."""
    turns = 0

    async def other_task() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_task())
    await asyncio.sleep(0)
    try:
        yield lambda: turns
    finally:
        other.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await other


async def turns_while(work: Awaitable[Any]) -> tuple[Any, int]:
    """What ``work`` gives, and how many turns another task got while it ran."""
    async with counting_turns() as turns:
        started = turns()
        return await work, turns() - started


async def test_a_large_round_lets_the_event_loop_run_while_its_results_are_encoded(
    ledger: Ledger,
) -> None:
    """Deciding the completion of a shared hand of 10,000 players hands the event loop to
    other tasks (heartbeats, the relay, a commit in flight) between chunks of results,
    not once at the end: counted in turns another task gets (a turn a millisecond; the
    encoding takes far longer than five on any machine)."""
    settler = Settler(ledger)
    completed = await shared_hand_up_to_completion(settler, 10_000)
    work, turns = await turns_while(settler.decide([Inbound(completed, 0)]))
    assert len(work.outbox) == 10_000
    assert turns >= 10_000 // 2_000  # one turn per chunk at least


async def test_a_batch_gives_the_event_loop_turns_while_it_is_decided(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit in flight needs the loop for each of its round trips to the database, so
    deciding a batch of 2,000 messages gives other tasks turns between its messages (a
    turn a millisecond of work), not only once the batch is decided: counted at each
    message decided, not timed."""
    settler = Settler(ledger)
    table = TableSpec("busy", "casino-holdem/classic", players=2_000)
    lines = [m.body for m in simulate(StudioConfig(tables=(table,), rounds=1, seed=5))]
    seen: list[int] = []
    decide_one = Settler._handled
    async with counting_turns() as turns:

        def counted(self: Settler, *args: Any) -> Any:
            seen.append(turns())
            return decide_one(self, *args)

        monkeypatch.setattr(Settler, "_handled", counted)
        work = await settler.decide([Inbound(b, n) for n, b in enumerate(lines[:2_000])])
    assert len(work.report.handled) == len(seen) == 2_000
    assert seen[-1] - seen[0] >= 2


async def test_a_heavy_rounds_closing_is_decided_while_the_event_loop_runs(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared hand of ``HEAVY_WAGERS`` wagers and more is decided on a worker thread:
    other tasks (another table's batch, heartbeats) get turns while the rules core settles
    it, not only between messages (counted at the start and end of the decision)."""
    settler = Settler(ledger)
    completed = await shared_hand_up_to_completion(settler, 10_000)
    seen: list[int] = []
    receive = Round.receive
    async with counting_turns() as turns:

        def counted(self: Round, *args: Any) -> Any:
            seen.append(turns())
            try:
                return receive(self, *args)
            finally:
                seen.append(turns())

        monkeypatch.setattr(Round, "receive", counted)
        work = await settler.decide([Inbound(completed, 0)])
    assert len(work.outbox) == 10_000
    assert seen[1] - seen[0] >= 2


async def test_a_batch_beside_waits_for_the_thread_deciding_its_round(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round is touched by one thread at a time: a batch decided beside a heavy closing
    (the same ``round.completed`` redelivered, say) decides its event only once the worker
    thread is done with the round."""
    settler = Settler(ledger)
    completed = await shared_hand_up_to_completion(settler, 10_000)
    calls: list[tuple[str, bool]] = []
    receive = Round.receive

    def noted(self: Round, *args: Any) -> Any:
        apart = threading.current_thread() is not threading.main_thread()
        calls.append(("enter", apart))
        try:
            return receive(self, *args)
        finally:
            calls.append(("exit", apart))

    monkeypatch.setattr(Round, "receive", noted)
    heavy = asyncio.create_task(settler.decide([Inbound(completed, 0)]))
    while not calls:
        await asyncio.sleep(0.001)
    again = await settler.decide([Inbound(completed, 1)])
    await heavy
    # the redelivery is decided on the event loop (the round is closed: nothing heavy left)
    assert calls == [("enter", True), ("exit", True), ("enter", False), ("exit", False)]
    assert [h.verdict for h in again.report.handled] == ["duplicate"]


async def test_a_large_round_read_back_lets_the_event_loop_run(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ``round.completed`` redelivered after the round closed (a connection lost while
    it was decided) reads the round's 23,000 facts back, and is a duplicate; other tasks
    get a turn at least every 1,000 facts folded (counted, not timed)."""
    settler = Settler(ledger)
    completed = await shared_hand_up_to_completion(settler, 10_000)
    await settler.handle([Inbound(completed, 0)])
    settler = Settler(ledger)  # another process: nothing of the round in memory
    applied = 0
    fold = Round.apply

    def counted(state: Round, fact: Fact) -> None:
        nonlocal applied
        applied += 1
        fold(state, fact)

    monkeypatch.setattr(Round, "apply", counted)
    seen: list[int] = []
    running = True

    async def other_task() -> None:
        while running:
            seen.append(applied)
            await asyncio.sleep(0)

    other = asyncio.create_task(other_task())
    report = await settler.handle([Inbound(completed, 1)])
    running = False
    await other
    assert [h.verdict for h in report.handled] == ["duplicate"]
    marks = [0, *seen, applied]
    assert applied > 20_000  # every fact of the round
    assert max(b - a for a, b in itertools.pairwise(marks)) <= 1_000
