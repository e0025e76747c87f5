"""A message the contract refuses takes its place in its round: nobody else is harmed.

Each case settles a round whose feed carries one refused message, and the same round's feed
without it (renumbered, as the studio would have sent it), and compares every other bet's
result: they must be equal, whatever the refusal is and wherever it arrives.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from chaos.hostile import INSIDE, inside_rounds
from croupier_feeds import CH_CLASSIC, THP, RoundFeed, line

from croupier.ledger import Ledger, open_ledger
from croupier.settlement.round import REJECTED, SETTLED
from croupier.settlement.settler import REJECTIONS_STREAM, Inbound, Settler

Event = dict[str, Any]
Spoil = Callable[[Event], None]
Ledgers = Callable[[str], AbstractAsyncContextManager[Ledger]]


@pytest.fixture
def ledgers(tmp_path: Path) -> Ledgers:
    """A fresh SQLite ledger by name, migrated."""

    @asynccontextmanager
    async def opened(name: str) -> AsyncIterator[Ledger]:
        async with open_ledger(f"sqlite:///{tmp_path / name}.db") as ledger:
            await ledger.migrate()
            yield ledger

    return opened


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


def shared_hand(f: RoundFeed, game: tuple[str, str] = CH_CLASSIC) -> list[Event]:
    """Three players on one box; p1 calls, p2 folds, p3 calls; everything dealt."""
    events = [
        f.opened(game),
        f.bet("a1"),
        f.bet("a2", amount=300, player="p2"),
        f.bet("a3", amount=200, player="p3"),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
    ]
    if game == CH_CLASSIC:
        return [
            *events,
            f.cards("board", "Ah 7c 2d"),
            f.decide("a1", "flop", "call", "c1", 200),
            f.decide("a2", "flop", "fold"),
            f.decide("a3", "flop", "call", "c3", 400),
            f.cards("board", "Ks 4h"),
            f.completed(),
        ]
    return [
        *events,
        f.decide("a1", "preflop", "call", "c1", 200),
        f.decide("a2", "preflop", "fold"),
        f.decide("a3", "preflop", "call", "c3", 400),
        f.cards("board", "Ah 7c 2d"),
        f.cards("board", "Ks"),
        f.cards("board", "4h"),
        f.completed(),
    ]


def without(events: Sequence[Event], index: int) -> list[Event]:
    """The feed as the studio would have sent it without event ``index``: renumbered."""
    kept = [dict(e) for i, e in enumerate(events) if i != index]
    for seq, event in enumerate(sorted(kept, key=lambda e: e["seq"]), start=1):
        event["seq"] = seq
    return kept


def bodies(events: Sequence[Event | bytes]) -> list[Inbound]:
    return [
        Inbound(e if isinstance(e, bytes) else line(e).encode(), ref)
        for ref, e in enumerate(events, start=1)
    ]


def spoiled(event: Event, spoil: Spoil) -> bytes:
    bad = copy.deepcopy(event)
    spoil(bad)
    return json.dumps(bad, ensure_ascii=False).encode()


def results_of(ledger_facts: Sequence[Any]) -> dict[str, tuple[int, int, str]]:
    (closing,) = [f for f in ledger_facts if f.type == SETTLED]
    return {r["bet_id"]: (r["stake"], r["returned"], r["outcome"]) for r in closing.data["results"]}


SPOILS: dict[str, Spoil] = {
    "player_id of 300 bytes": lambda e: e["payload"].update(player_id="p" * 300),
    "NUL in player_id": lambda e: e["payload"].update(player_id="p\x00"),
    "# in player_id": lambda e: e["payload"].update(player_id="p#1"),
    "* in player_id": lambda e: e["payload"].update(player_id="*"),
    "unknown field": lambda e: e["payload"].update(extra=1),
    "amount as text": lambda e: e["payload"].update(amount="100"),
    "bad occurred_at": lambda e: e.update(occurred_at="yesterday"),
    "unknown event type": lambda e: e.update(event_type="bet.doubled"),
}


@pytest.mark.parametrize("game", [CH_CLASSIC, THP], ids=["casino-holdem", "texas-holdem-plus"])
@pytest.mark.parametrize("spoil", list(SPOILS), ids=list(SPOILS))
@pytest.mark.parametrize("order", ["in order", "ahead of its turn"])
async def test_a_refused_bet_harms_no_other_player(
    ledgers: Callable[[str], AbstractAsyncContextManager[Ledger]],
    game: tuple[str, str],
    spoil: str,
    order: str,
) -> None:
    feed = shared_hand(RoundFeed(), game)
    bad_index = 4  # a fourth player's bet, between the others' bets and the deal
    bad = RoundFeed(next_seq=99).bet("a4", amount=500, player="p4")
    bad["seq"] = feed[bad_index - 1]["seq"] + 1
    for event in feed[bad_index:]:
        event["seq"] += 1
    feed.insert(bad_index, bad)
    sent: list[Event | bytes] = [*feed]
    sent[bad_index] = spoiled(bad, SPOILS[spoil])
    if order == "ahead of its turn":  # the refused message arrives first of all
        sent.insert(0, sent.pop(bad_index))

    async with ledgers("with") as ledger:
        report = await Settler(ledger).handle(bodies(sent))
        facts = await ledger.read_stream("round:t1:r1")
        assert await ledger.read_stream(REJECTIONS_STREAM) == []
    async with ledgers("without") as ledger:
        await Settler(ledger).handle(bodies(without(feed, bad_index)))
        reference = await ledger.read_stream("round:t1:r1")

    assert [h.verdict for h in report.handled].count("rejected") == 1
    assert results_of(facts) == results_of(reference)
    refused = [f for f in facts if f.type == REJECTED]
    assert [(f.data["seq"], f.data["uses_seq"]) for f in refused] == [(bad["seq"], True)]
    assert "raw" in refused[0].data


async def test_a_refusal_releases_the_events_held_behind_it(ledger: Ledger) -> None:
    f = RoundFeed()
    events = shared_hand(f)
    settler = Settler(ledger)
    bad = spoiled(events[3], SPOILS["NUL in player_id"])

    first = await settler.handle(bodies([*events[:3], *events[4:]]))
    assert {h.verdict for h in first.handled[3:]} == {"held"}
    released = await settler.handle(bodies([bad]))

    verdicts = [(h.verdict, h.code) for h in released.handled]
    assert verdicts[0] == ("rejected", "contract")
    # p3's bet was the refused message, so p3's call has no ante, as without it
    assert (
        verdicts[1:]
        == [("accepted", None)] * 5 + [("rejected", "unknown_ante")] + [("accepted", None)] * 2
    )
    facts = await ledger.read_stream("round:t1:r1")
    assert facts[-1].type == SETTLED
    assert {r["player_id"] for r in facts[-1].data["results"]} == {"p1", "p2"}


async def test_a_refusal_whose_seq_is_taken_is_kept_in_the_rejections_stream(
    ledger: Ledger,
) -> None:
    f = RoundFeed()
    events = shared_hand(f)
    bad = spoiled(events[1], SPOILS["* in player_id"])  # seq 2, accepted already

    report = await Settler(ledger).handle(bodies([*events, bad]))

    assert report.handled[-1].verdict == "rejected"
    (kept,) = await ledger.read_stream(REJECTIONS_STREAM)
    assert "seq" not in kept.data
    facts = await ledger.read_stream("round:t1:r1")
    assert [f.type for f in facts].count(REJECTED) == 0
    assert facts[-1].type == SETTLED


async def test_a_refusal_redelivered_is_recorded_once_and_read_back_by_a_new_process(
    ledger: Ledger,
) -> None:
    events = shared_hand(RoundFeed())
    bad_event = RoundFeed(next_seq=4).bet("a9", player="p9")
    bad = spoiled(bad_event, SPOILS["# in player_id"])
    later = [dict(e, seq=e["seq"] + 1) if e["seq"] >= 4 else e for e in events]

    first = await Settler(ledger).handle(bodies([*later[:3], bad, bad]))
    assert [(h.verdict, h.new) for h in first.handled[3:]] == [
        ("rejected", True),
        ("rejected", False),
    ]
    again = await Settler(ledger).handle(bodies([bad, *later[3:]]))  # a new process

    assert (again.handled[0].verdict, again.handled[0].new) == ("rejected", False)
    assert {h.verdict for h in again.handled[1:]} == {"accepted"}
    facts = await ledger.read_stream("round:t1:r1")
    assert [f.type for f in facts].count(REJECTED) == 1
    assert facts[-1].type == SETTLED
    assert await ledger.read_stream(REJECTIONS_STREAM) == []


async def test_a_refusal_in_a_closed_round_goes_to_the_rejections_stream(ledger: Ledger) -> None:
    events = shared_hand(RoundFeed())
    late = dict(events[1], seq=len(events) + 1)
    bad = spoiled(late, SPOILS["unknown field"])

    await Settler(ledger).handle(bodies([*events, bad]))

    assert len(await ledger.read_stream(REJECTIONS_STREAM)) == 1


async def test_an_unreadable_place_holds_nothing(ledger: Ledger) -> None:
    """A seq or round id the contract refuses gives the message no place: it is kept in the
    rejections stream, and events after it wait for the real one as before."""
    events = shared_hand(RoundFeed())
    bad_seq = spoiled(events[3], lambda e: e.update(seq=0))
    bad_round = spoiled(events[3], lambda e: e.update(round_id="r 1"))
    bad_seq_type = spoiled(events[3], lambda e: e.update(seq="4"))

    report = await Settler(ledger).handle(bodies([*events[:3], bad_seq, bad_round, bad_seq_type]))

    assert [h.verdict for h in report.handled[3:]] == ["rejected"] * 3
    assert len(await ledger.read_stream(REJECTIONS_STREAM)) == 3
    assert [f.type for f in await ledger.read_stream("round:t1:r1")].count(REJECTED) == 0


async def test_the_chaos_corpus_inside_rounds_harms_no_innocent_bet(ledgers: Ledgers) -> None:
    """Every refusal the chaos suite places inside shared, multi-box rounds (a bet, a
    decision, a deal; both games): each round's results equal its reference feed's."""
    inside = inside_rounds("unit")

    async with ledgers("served") as ledger:
        served = await Settler(ledger).handle(bodies([m.body for m in inside.served]))
        kept_apart = await ledger.read_stream(REJECTIONS_STREAM)
    async with ledgers("reference") as ledger:
        reference = await Settler(ledger).handle(bodies([m.body for m in inside.reference]))

    refused = [h for h in served.handled if h.verdict == "rejected" and h.code == "contract"]
    assert len(refused) == sum(len(spoils) for spoils in INSIDE.values()) * 2
    assert kept_apart == []
    ours = {body["message_id"]: body for body in served.results}
    theirs = {body["message_id"]: body for body in reference.results}
    assert len(theirs) == len(refused) * 3  # three players a round, the refused one's aside
    assert ours.keys() == theirs.keys()
    harmed = [m for m in theirs if _bets(ours[m]) != _bets(theirs[m])]
    assert harmed == []


def _bets(body: Any) -> list[tuple[Any, ...]]:
    return sorted((b["bet_id"], b["stake"], b["returned"], b["outcome"]) for b in body["bets"])
