"""The Round aggregate: every bad input of docs/feed.md, order, duplicates, voids, timeouts,
rebuild.

Events are written as feed JSON and parsed by the contract (``croupier_feeds``), so each test
feeds the aggregate exactly what the service would.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, CH_PROGRESSIVE, CH_ROYAL, THP, RoundFeed, parsed

import holdem
from contract.canonical import canonical_json
from croupier.ledger.encoding import data_text
from croupier.settlement.facts import Fact
from croupier.settlement.round import ACCEPTED, HELD, REJECTED, SETTLED, VOIDED, Round, Status

METER = 5_000_000
Event = dict[str, Any]


def meters(table: holdem.PayTable, currency: str) -> int:
    return METER


def fresh() -> Round:
    return Round("t1", "r1")


def feed(state: Round, events: Sequence[Event]) -> list[Fact]:
    """Every fact the events lead to, in order."""
    return [fact for event in events for fact in state.receive(parsed(event), meters)]


def played(events: Sequence[Event]) -> tuple[Round, list[Fact]]:
    state = fresh()
    return state, feed(state, events)


def snapshot(state: Round) -> dict[str, Any]:
    """What a rejected event must leave alone (it may only use up its seq)."""
    fields = ("status", "bets", "decisions", "hole", "dealer", "board", "dealt", "held")
    return {"table": state.table} | {name: copy.deepcopy(getattr(state, name)) for name in fields}


def results_of(fact: Fact) -> dict[str, tuple[str, int, int, str]]:
    """bet_id -> (spot, stake, returned, outcome) of a settled or voided round."""
    return {
        r["bet_id"]: (r["spot"], r["stake"], r["returned"], r["outcome"])
        for r in fact.data["results"]
    }


# -- rounds to start from -------------------------------------------------------------------


def ch_dealt(f: RoundFeed, table: tuple[str, str] = CH_CLASSIC) -> list[Event]:
    """Casino Hold'em: p1 antes 100 with a 100 AA bonus; aces in the hole, nines to the dealer."""
    return [
        f.opened(table),
        f.bet("a1"),
        f.bet("x1", "aa_bonus"),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
    ]


def ch_to_flop(f: RoundFeed, table: tuple[str, str] = CH_CLASSIC) -> list[Event]:
    """The same with the flop Ah 7c 2d."""
    return [*ch_dealt(f, table), f.cards("board", "Ah 7c 2d")]


def ch_round(f: RoundFeed, decision: str | None = "call") -> list[Event]:
    """A whole Casino Hold'em round: trips aces against a qualifying pair of nines."""
    events = ch_to_flop(f)
    if decision == "call":
        events.append(f.decide("a1", "flop", "call", "c1", 200))
    elif decision == "fold":
        events.append(f.decide("a1", "flop", "fold"))
    return [*events, f.cards("board", "Ks 4h"), f.completed()]


def thp_to_deal(f: RoundFeed) -> list[Event]:
    """Texas Hold'em Plus: p1 antes 100 with a 100 PLUS bet; A-K suited in the hole."""
    return [
        f.opened(THP),
        f.bet("a1"),
        f.bet("p1plus", "plus"),
        f.hole("As Ks"),
        f.cards("dealer", "2c 7d"),
    ]


def thp_round(f: RoundFeed, preflop: str | None, flop: str | None, turn: str | None) -> list[Event]:
    """Texas Hold'em Plus: two pair, aces and kings, against ace high; decisions as given."""
    events = thp_to_deal(f)
    if preflop == "call":
        events.append(f.decide("a1", "preflop", "call", "c1", 200))
    elif preflop:
        events.append(f.decide("a1", "preflop", preflop))
    events.append(f.cards("board", "Ah Kd 9c"))
    if flop == "bet":
        events.append(f.decide("a1", "flop", "bet", "fb1", 100))
    elif flop:
        events.append(f.decide("a1", "flop", flop))
    events.append(f.cards("board", "4s"))
    if turn == "bet":
        events.append(f.decide("a1", "turn", "bet", "tb1", 100))
    elif turn:
        events.append(f.decide("a1", "turn", turn))
    return [*events, f.cards("board", "3h"), f.completed()]


# -- every bad input of docs/feed.md -------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """A round so far, the event that breaks a rule, its rejection code and reason words."""

    build: Callable[[RoundFeed], tuple[list[Event], Event]]
    code: str
    says: tuple[str, ...]


def _burn_first(f: RoundFeed) -> list[Event]:
    return [f.opened(), f.bet("a1"), f.cards("burn", "5h")]


BAD_INPUT: dict[str, Bad] = {
    "unknown pay table": Bad(
        lambda f: ([], f.opened(("casino_holdem", "casino-holdem/nope"))),
        "unknown_paytable",
        ("casino-holdem/nope", "casino-holdem/classic"),
    ),
    "game and pay table disagree": Bad(
        lambda f: ([], f.opened(("texas_holdem_plus", "casino-holdem/classic"))),
        "paytable_game_mismatch",
        ("casino-holdem/classic", "casino_holdem", "texas_holdem_plus"),
    ),
    "duplicate card: board repeats a hole card": Bad(
        lambda f: (ch_dealt(f), f.cards("board", "As 7c 2d")),
        "duplicate_card",
        ("As", "box main"),
    ),
    "duplicate card: a burnt card dealt again": Bad(
        lambda f: (_burn_first(f), f.hole("5h 6h")),
        "duplicate_card",
        ("5h", "burn"),
    ),
    "duplicate card: burning a dealt card": Bad(
        lambda f: (ch_to_flop(f), f.cards("burn", "9d")),
        "duplicate_card",
        ("9d", "dealer"),
    ),
    "wager after betting closed": Bad(
        lambda f: ([f.opened(), f.bet("a1"), f.hole("As Ad")], f.bet("a2", player="p2")),
        "betting_closed",
        ("a2", "cards were dealt"),
    ),
    "wager after a burn card closed betting": Bad(
        lambda f: (_burn_first(f), f.bet("x1", "aa_bonus")),
        "betting_closed",
        ("x1",),
    ),
    "call of 1x the ante": Bad(
        lambda f: (ch_to_flop(f), f.decide("a1", "flop", "call", "c1", 100)),
        "wrong_wager_size",
        ("2x", "100", "got 100"),
    ),
    "call of 3x the ante": Bad(
        lambda f: (ch_to_flop(f), f.decide("a1", "flop", "call", "c1", 300)),
        "wrong_wager_size",
        ("2x", "got 300"),
    ),
    "THP preflop call of 1x": Bad(
        lambda f: (thp_to_deal(f), f.decide("a1", "preflop", "call", "c1", 100)),
        "wrong_wager_size",
        ("2x",),
    ),
    "THP flop bet of 2x": Bad(
        lambda f: (
            [
                *thp_to_deal(f),
                f.decide("a1", "preflop", "call", "c1", 200),
                f.cards("board", "Ah Kd 9c"),
            ],
            f.decide("a1", "flop", "bet", "fb1", 200),
        ),
        "wrong_wager_size",
        ("1x", "got 200"),
    ),
    "decision for an unknown ante": Bad(
        lambda f: (ch_to_flop(f), f.decide("nope", "flop", "fold")),
        "unknown_ante",
        ("nope",),
    ),
    "decision naming a side bet as its ante": Bad(
        lambda f: (ch_to_flop(f), f.decide("x1", "flop", "fold")),
        "unknown_ante",
        ("x1",),
    ),
    "second decision at one stage": Bad(
        lambda f: (
            [*ch_to_flop(f), f.decide("a1", "flop", "call", "c1", 200)],
            f.decide("a1", "flop", "fold"),
        ),
        "second_decision",
        ("a1", "flop"),
    ),
    "THP second flop decision": Bad(
        lambda f: (
            [
                *thp_to_deal(f),
                f.decide("a1", "preflop", "call", "c1", 200),
                f.cards("board", "Ah Kd 9c"),
                f.decide("a1", "flop", "check"),
            ],
            f.decide("a1", "flop", "bet", "fb1", 100),
        ),
        "second_decision",
        ("a1",),
    ),
    "CH decision before the flop": Bad(
        lambda f: (ch_dealt(f), f.decide("a1", "flop", "call", "c1", 200)),
        "wrong_stage",
        ("flop", "3 board cards", "has 0"),
    ),
    "CH decision after the turn": Bad(
        lambda f: ([*ch_to_flop(f), f.cards("board", "Ks")], f.decide("a1", "flop", "fold")),
        "wrong_stage",
        ("has 4",),
    ),
    "CH preflop decision": Bad(
        lambda f: (ch_dealt(f), f.decide("a1", "preflop", "fold")),
        "wrong_stage",
        ("casino_holdem has no preflop",),
    ),
    "CH decision before the hole cards": Bad(
        lambda f: (
            [f.opened(), f.bet("a1"), f.cards("dealer", "9c 9d"), f.cards("board", "Ah 7c 2d")],
            f.decide("a1", "flop", "fold"),
        ),
        "wrong_stage",
        ("main hole cards",),
    ),
    "THP flop decision before the flop": Bad(
        lambda f: (
            [*thp_to_deal(f), f.decide("a1", "preflop", "call", "c1", 200)],
            f.decide("a1", "flop", "check"),
        ),
        "wrong_stage",
        ("3 board cards", "has 0"),
    ),
    "THP preflop decision after the flop": Bad(
        lambda f: (
            [*thp_to_deal(f), f.cards("board", "Ah Kd 9c")],
            f.decide("a1", "preflop", "call", "c1", 200),
        ),
        "wrong_stage",
        ("preflop", "0 board cards", "has 3"),
    ),
    "THP turn decision on the flop": Bad(
        lambda f: (
            [
                *thp_to_deal(f),
                f.decide("a1", "preflop", "call", "c1", 200),
                f.cards("board", "Ah Kd 9c"),
            ],
            f.decide("a1", "turn", "check"),
        ),
        "wrong_stage",
        ("turn", "4 board cards"),
    ),
    "CH bet is no flop action": Bad(
        lambda f: (ch_to_flop(f), f.decide("a1", "flop", "bet", "b1", 100)),
        "wrong_action",
        ("bet", "call", "fold"),
    ),
    "THP check is no preflop action": Bad(
        lambda f: (thp_to_deal(f), f.decide("a1", "preflop", "check")),
        "wrong_action",
        ("check",),
    ),
    "THP decision after a preflop fold": Bad(
        lambda f: (
            [*thp_to_deal(f), f.decide("a1", "preflop", "fold"), f.cards("board", "Ah Kd 9c")],
            f.decide("a1", "flop", "bet", "fb1", 100),
        ),
        "after_fold",
        ("a1", "folded"),
    ),
    "THP decision after a flop fold": Bad(
        lambda f: (
            [
                *thp_to_deal(f),
                f.decide("a1", "preflop", "call", "c1", 200),
                f.cards("board", "Ah Kd 9c"),
                f.decide("a1", "flop", "fold"),
                f.cards("board", "4s"),
            ],
            f.decide("a1", "turn", "check"),
        ),
        "after_fold",
        ("a1",),
    ),
    "THP flop decision without a preflop call": Bad(
        lambda f: (
            [*thp_to_deal(f), f.cards("board", "Ah Kd 9c")],
            f.decide("a1", "flop", "check"),
        ),
        "after_fold",
        ("did not call",),
    ),
    "event for a round never opened": Bad(
        lambda f: ([], f.bet("a1")),
        "never_opened",
        ("r1", "t1", "round.opened"),
    ),
    "round.opened twice": Bad(
        lambda f: ([f.opened()], f.opened()),
        "already_open",
        ("r1",),
    ),
    "ante below the minimum": Bad(
        lambda f: ([f.opened()], f.bet("a1", amount=99)),
        "stake_limits",
        ("99", "100..1000000"),
    ),
    "ante above the maximum": Bad(
        lambda f: ([f.opened()], f.bet("a1", amount=1_000_001)),
        "stake_limits",
        ("1000001", "100..1000000"),
    ),
    "AA bonus above its maximum": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("x1", "aa_bonus", 100_001)),
        "stake_limits",
        ("aa_bonus", "100..100000"),
    ),
    "PLUS below its minimum": Bad(
        lambda f: ([f.opened(THP), f.bet("a1")], f.bet("p1plus", "plus", 50)),
        "stake_limits",
        ("plus", "100..100000"),
    ),
    "jackpot above the fixed stake": Bad(
        lambda f: ([f.opened(CH_PROGRESSIVE), f.bet("a1")], f.bet("j1", "jackpot", 200)),
        "stake_limits",
        ("jackpot", "100..100"),
    ),
    "jackpot below the fixed stake": Bad(
        lambda f: ([f.opened(CH_PROGRESSIVE), f.bet("a1")], f.bet("j1", "jackpot", 99)),
        "stake_limits",
        ("jackpot", "100..100"),
    ),
    "AA bonus on Texas Hold'em Plus": Bad(
        lambda f: ([f.opened(THP), f.bet("a1")], f.bet("x1", "aa_bonus")),
        "spot_not_offered",
        ("texas-holdem-plus/standard", "aa_bonus"),
    ),
    "PLUS on Casino Hold'em": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("p1plus", "plus")),
        "spot_not_offered",
        ("casino-holdem/classic", "plus"),
    ),
    "jackpot on the classic table": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("j1", "jackpot")),
        "spot_not_offered",
        ("jackpot",),
    ),
    "jackpot on the royal-20 table": Bad(
        lambda f: ([f.opened(CH_ROYAL), f.bet("a1")], f.bet("j1", "jackpot")),
        "spot_not_offered",
        ("casino-holdem/royal-20",),
    ),
    "side bet before any ante": Bad(
        lambda f: ([f.opened()], f.bet("x1", "aa_bonus")),
        "side_bet_without_ante",
        ("x1", "p1", "main"),
    ),
    "side bet by a player without an ante": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("x2", "aa_bonus", player="p2")),
        "side_bet_without_ante",
        ("p2",),
    ),
    "side bet on another box than the ante": Bad(
        lambda f: ([f.opened(), f.bet("a1", box="b1")], f.bet("x1", "aa_bonus", box="b2")),
        "side_bet_without_ante",
        ("b2",),
    ),
    "second ante by a player on a box": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("a2")),
        "duplicate_ante",
        ("a1",),
    ),
    "bet id used twice": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("a1", player="p2")),
        "duplicate_bet_id",
        ("a1",),
    ),
    "call reusing a bet id": Bad(
        lambda f: (ch_to_flop(f), f.decide("a1", "flop", "call", "x1", 200)),
        "duplicate_bet_id",
        ("x1",),
    ),
    "side bet in another currency than its ante": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.bet("x1", "aa_bonus", currency="USD")),
        "currency_mismatch",
        ("USD", "EUR"),
    ),
    "round completed with the river missing": Bad(
        lambda f: ([*ch_to_flop(f), f.cards("board", "Ks")], f.completed()),
        "cards_missing",
        ("board has 4 of 5",),
    ),
    "round completed with a box short of cards": Bad(
        lambda f: (
            [f.opened(), f.bet("a1"), f.bet("a2", player="p2", box="b2"), f.hole("As Ad")],
            f.completed(),
        ),
        "cards_missing",
        ("dealer has 0 of 2", "board has 0 of 5", "box b2 has 0 of 2"),
    ),
    "round completed with a staked-by-nobody box half dealt": Bad(
        lambda f: (
            [*ch_to_flop(f), f.hole("3c", box="spare"), f.cards("board", "Ks 4h")],
            f.completed(),
        ),
        "cards_missing",
        ("box spare has 1 of 2",),
    ),
    "three cards to a box": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.hole("As Ad Ah")),
        "too_many_cards",
        ("box main", "3"),
    ),
    "a third card to a box": Bad(
        lambda f: (ch_to_flop(f), f.hole("3c")),
        "too_many_cards",
        ("box main", "3", "at most 2"),
    ),
    "three cards to an unstaked box": Bad(
        lambda f: ([f.opened(), f.bet("a1")], f.hole("2c 3c 4c", box="ghost")),
        "too_many_cards",
        ("box ghost",),
    ),
    "a third card to the dealer": Bad(
        lambda f: (ch_to_flop(f), f.cards("dealer", "3c")),
        "too_many_cards",
        ("the dealer",),
    ),
    "a sixth board card": Bad(
        lambda f: ([*ch_to_flop(f), f.cards("board", "Ks 4h")], f.cards("board", "3c")),
        "too_many_cards",
        ("the board", "6", "at most 5"),
    ),
    "six board cards after a flop": Bad(
        lambda f: (
            [f.opened(), f.bet("a1"), f.cards("board", "2c 3c 4c")],
            f.cards("board", "5c 6c 7c"),
        ),
        "too_many_cards",
        ("the board",),
    ),
    "an event after the round settled": Bad(
        lambda f: (ch_round(f), f.voided()),
        "round_closed",
        ("settled",),
    ),
    "an event after the round was voided": Bad(
        lambda f: ([*ch_to_flop(f), f.voided()], f.decide("a1", "flop", "call", "c1", 200)),
        "round_closed",
        ("voided",),
    ),
}


@pytest.mark.parametrize("case", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_rejected_with_a_reason_and_changes_nothing(case: Bad) -> None:
    f = RoundFeed()
    before, bad = case.build(f)
    state, facts = played(before)
    assert all(fact.type in (ACCEPTED, SETTLED, VOIDED) for fact in facts), facts
    untouched, next_seq = snapshot(state), state.next_seq

    (fact,) = state.receive(parsed(bad), meters)

    assert fact.type == REJECTED
    assert fact.data["code"] == case.code
    for words in case.says:
        assert words in fact.data["reason"]
    assert fact.data["event"]["event_id"] == bad["event_id"]
    assert snapshot(state) == untouched
    assert state.next_seq == next_seq + 1  # the seq is used up, so the round goes on
    assert state.receive(parsed(bad), meters) == []  # and a redelivery is a no-op


def test_a_rejected_event_leaves_the_round_to_settle_as_if_it_never_came() -> None:
    clean = RoundFeed()
    _, clean_facts = played(ch_round(clean))
    dirty = RoundFeed()
    events = ch_to_flop(dirty)
    events += [
        dirty.bet("late", player="p9"),
        dirty.cards("board", "As"),
        dirty.decide("a1", "flop", "call", "c1", 100),
        dirty.decide("a1", "flop", "call", "c1", 200),
        dirty.cards("board", "Ks 4h"),
        dirty.completed(),
    ]
    _, dirty_facts = played(events)
    codes = [fact.data.get("code") for fact in dirty_facts if fact.type == REJECTED]
    assert codes == ["betting_closed", "duplicate_card", "wrong_wager_size"]
    assert results_of(dirty_facts[-1]) == results_of(clean_facts[-1])


def test_a_round_completed_with_cards_missing_stays_open_until_completed_correctly() -> None:
    f = RoundFeed()
    events = [*ch_to_flop(f), f.decide("a1", "flop", "call", "c1", 200), f.cards("board", "Ks")]
    state, _ = played(events)
    (early,) = state.receive(parsed(f.completed()), meters)
    assert early.data["code"] == "cards_missing"
    assert state.status is Status.OPEN
    assert state.waiting_for == "waiting for round.completed"

    facts = feed(state, [f.cards("board", "4h"), f.completed()])

    assert [fact.type for fact in facts] == [ACCEPTED, SETTLED]
    assert state.waiting_for is None
    assert results_of(facts[-1]) == {
        "a1": ("ante", 100, 200, "win"),
        "x1": ("aa_bonus", 100, 800, "win"),
        "c1": ("call", 200, 400, "win"),
    }


def test_a_round_never_opened_rejects_each_event_and_a_late_opening() -> None:
    f = RoundFeed()
    opening = f.opened()
    state, facts = played([f.bet("a1", seq=1), opening | {"seq": 2}])
    assert [fact.data["code"] for fact in facts] == ["never_opened", "open_not_first"]
    assert state.table is None and state.waiting_for == "never opened"


# -- duplicates -----------------------------------------------------------------------------


def test_a_redelivered_event_is_a_no_op_at_every_point_of_a_round() -> None:
    f = RoundFeed()
    state = fresh()
    for event in ch_round(f):
        first = state.receive(parsed(event), meters)
        assert first and first[0].type in (ACCEPTED, SETTLED)
        after = snapshot(state), state.next_seq
        assert state.receive(parsed(event), meters) == []
        assert (snapshot(state), state.next_seq) == after


def test_a_redelivered_held_event_is_a_no_op() -> None:
    f = RoundFeed()
    opened, bet = f.opened(), f.bet("a1")
    state, facts = played([bet])
    assert [fact.type for fact in facts] == [HELD]
    assert state.receive(parsed(bet), meters) == []
    assert [fact.type for fact in feed(state, [opened])] == [ACCEPTED, ACCEPTED]


REUSED_ID: dict[str, Callable[[Event], Event]] = {
    "other amount": lambda e: e | {"payload": e["payload"] | {"amount": 500}},
    "other seq": lambda e: e | {"seq": 9},
    "other time": lambda e: e | {"occurred_at": "2024-05-01T20:16:00Z"},
    "other type": lambda e: e | {"event_type": "round.voided", "payload": {"reason": "x"}},
}


@pytest.mark.parametrize("change", REUSED_ID.values(), ids=REUSED_ID.keys())
def test_an_event_id_reused_with_other_content_is_rejected(
    change: Callable[[Event], Event],
) -> None:
    f = RoundFeed()
    state, _ = played([f.opened(), bet := f.bet("a1")])
    untouched, next_seq = snapshot(state), state.next_seq

    (fact,) = state.receive(parsed(change(bet)), meters)

    assert fact.type == REJECTED and fact.data["code"] == "reused_event_id"
    assert bet["event_id"] in fact.data["reason"]
    assert (snapshot(state), state.next_seq) == (untouched, next_seq)  # seq not used up
    assert [fact.type for fact in feed(state, [f.bet("x1", "aa_bonus")])] == [ACCEPTED]


def test_a_new_event_at_a_taken_seq_is_rejected() -> None:
    f = RoundFeed()
    state, _ = played([f.opened(), f.bet("a1")])
    (fact,) = state.receive(parsed(f.bet("a2", player="p2", seq=2)), meters)
    assert fact.data["code"] == "seq_taken" and "seq 2" in fact.data["reason"]
    held = f.bet("a3", player="p3", seq=5)
    assert [x.type for x in state.receive(parsed(held), meters)] == [HELD]
    (fact,) = state.receive(parsed(f.bet("a4", player="p4", seq=5)), meters)
    assert fact.data["code"] == "seq_taken"
    assert state.held == {5: parsed(held)}


# -- order ----------------------------------------------------------------------------------


def _orders(n: int) -> dict[str, list[int]]:
    """Delivery orders of a round's n events (indexes into them)."""
    last, completion = n - 1, n - 1
    river = n - 2
    return {
        "in order": list(range(n)),
        "reversed": list(reversed(range(n))),
        "completion before the river": [*range(river), completion, river],
        "opening last": [*range(1, n), 0],
        "odd then even": [*range(1, n, 2), *range(0, n, 2)],
        "one held, rest in order": [1, 0, *range(2, last + 1)],
    }


ORDERS = _orders(len(ch_round(RoundFeed())))


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
@pytest.mark.parametrize("table", [CH_CLASSIC, CH_PROGRESSIVE], ids=["classic", "progressive"])
def test_events_out_of_seq_order_are_held_then_applied_in_seq_order(
    order: list[int], table: tuple[str, str]
) -> None:
    f = RoundFeed()
    events = [*ch_to_flop(f, table)]
    events += [f.decide("a1", "flop", "call", "c1", 200), f.cards("board", "Ks 4h"), f.completed()]
    reference, reference_facts = played(events)
    state = fresh()

    facts = feed(state, [events[i] for i in order])

    held = [fact for fact in facts if fact.type == HELD]
    applied = [fact for fact in facts if fact.type != HELD]
    assert len(held) == sum(1 for k, i in enumerate(order) if i > min(order[k:]))
    assert [fact.data["event"]["seq"] for fact in applied] == list(range(1, len(events) + 1))
    assert [fact.type for fact in applied] == [fact.type for fact in reference_facts]
    assert applied[-1].data == reference_facts[-1].data
    assert state == reference


def test_a_gap_keeps_the_round_open_and_reports_what_it_waits_for() -> None:
    f = RoundFeed()
    events = ch_round(f)
    state, _ = played([events[0], *events[2:]])
    assert state.status is Status.OPEN
    assert state.waiting_for == f"waiting for seq 2 (held: {list(range(3, len(events) + 1))})"
    assert feed(state, [events[1]])[-1].type == SETTLED


# -- voids ----------------------------------------------------------------------------------


def test_a_void_refunds_every_wager_and_closes_the_round() -> None:
    f = RoundFeed()
    events = [
        f.opened(CH_PROGRESSIVE),
        f.bet("a1"),
        f.bet("x1", "aa_bonus", 500),
        f.bet("j1", "jackpot"),
        f.bet("a2", amount=300, player="p2"),
        f.bet("a3", amount=1000, player="p3", currency="USD"),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.decide("a2", "flop", "fold"),
        f.voided("dealer exposed a card"),
    ]
    state, facts = played(events)

    voided = facts[-1]
    assert voided.type == VOIDED and state.status is Status.VOIDED
    assert voided.data["reason"] == "dealer exposed a card"
    assert results_of(voided) == {
        "a1": ("ante", 100, 100, "refund"),
        "x1": ("aa_bonus", 500, 500, "refund"),
        "j1": ("jackpot", 100, 100, "refund"),
        "c1": ("call", 200, 200, "refund"),
        "a2": ("ante", 300, 300, "refund"),
        "a3": ("ante", 1000, 1000, "refund"),
    }
    assert voided.data["jackpot"] == []
    assert_balanced(voided)
    for late in (f.cards("board", "Ks 4h"), f.completed(), f.voided()):
        (fact,) = state.receive(parsed(late), meters)
        assert fact.data["code"] == "round_closed"
        assert state.status is Status.VOIDED


def test_a_void_refunds_every_play_wager_of_texas_holdem_plus() -> None:
    f = RoundFeed()
    events = [
        *thp_to_deal(f),
        f.decide("a1", "preflop", "call", "c1", 200),
        f.cards("board", "Ah Kd 9c"),
        f.decide("a1", "flop", "bet", "fb1", 100),
        f.voided(),
    ]
    _, facts = played(events)
    assert results_of(facts[-1]) == {
        "a1": ("ante", 100, 100, "refund"),
        "p1plus": ("plus", 100, 100, "refund"),
        "c1": ("call", 200, 200, "refund"),
        "fb1": ("flop_bet", 100, 100, "refund"),
    }


def test_a_void_before_any_card_refunds_the_antes() -> None:
    f = RoundFeed()
    _, facts = played([f.opened(), f.bet("a1"), f.voided()])
    assert results_of(facts[-1]) == {"a1": ("ante", 100, 100, "refund")}


# -- settling: decisions and timeouts -------------------------------------------------------

WIN_CH = {
    "a1": ("ante", 100, 200, "win"),
    "x1": ("aa_bonus", 100, 800, "win"),
    "c1": ("call", 200, 400, "win"),
}
FOLD_CH = {"a1": ("ante", 100, 0, "fold"), "x1": ("aa_bonus", 100, 0, "fold")}

CH_DECISIONS: dict[str, tuple[str | None, dict[str, tuple[str, int, int, str]]]] = {
    "call": ("call", WIN_CH),
    "fold forfeits a winning AA bonus": ("fold", FOLD_CH),
    "no decision is a fold": (None, FOLD_CH),
}


@pytest.mark.parametrize(("decision", "expected"), CH_DECISIONS.values(), ids=CH_DECISIONS.keys())
def test_casino_holdem_decisions_and_the_timeout(
    decision: str | None, expected: dict[str, tuple[str, int, int, str]]
) -> None:
    _, facts = played(ch_round(RoundFeed(), decision))
    assert facts[-1].type == SETTLED
    assert results_of(facts[-1]) == expected


THP_PLUS = ("plus", 100, 2600, "win")  # A-K suited, 25 to 1, whatever the player does
THP_CASES: dict[str, tuple[tuple[str | None, str | None, str | None], dict[str, Any]]] = {
    "call, bet, bet": (
        ("call", "bet", "bet"),
        {
            "a1": ("ante", 100, 100, "push"),
            "c1": ("call", 200, 400, "win"),
            "fb1": ("flop_bet", 100, 200, "win"),
            "tb1": ("turn_bet", 100, 200, "win"),
        },
    ),
    "no preflop decision is a fold": (
        (None, None, None),
        {"a1": ("ante", 100, 0, "fold")},
    ),
    "preflop fold": (("fold", None, None), {"a1": ("ante", 100, 0, "fold")}),
    "no flop or turn decision is a check": (
        ("call", None, None),
        {"a1": ("ante", 100, 100, "push"), "c1": ("call", 200, 400, "win")},
    ),
    "flop timeout then a turn bet": (
        ("call", None, "bet"),
        {
            "a1": ("ante", 100, 100, "push"),
            "c1": ("call", 200, 400, "win"),
            "tb1": ("turn_bet", 100, 200, "win"),
        },
    ),
    "flop bet then a turn fold loses every play wager": (
        ("call", "bet", "fold"),
        {
            "a1": ("ante", 100, 0, "fold"),
            "c1": ("call", 200, 0, "fold"),
            "fb1": ("flop_bet", 100, 0, "fold"),
        },
    ),
    "checks": (
        ("call", "check", "check"),
        {"a1": ("ante", 100, 100, "push"), "c1": ("call", 200, 400, "win")},
    ),
}


@pytest.mark.parametrize(("decisions", "expected"), THP_CASES.values(), ids=THP_CASES.keys())
def test_texas_holdem_plus_decisions_and_timeouts(
    decisions: tuple[str | None, str | None, str | None], expected: dict[str, Any]
) -> None:
    _, facts = played(thp_round(RoundFeed(), *decisions))
    assert facts[-1].type == SETTLED
    assert results_of(facts[-1]) == {**expected, "p1plus": THP_PLUS}


# -- many players, several boxes ------------------------------------------------------------


def test_a_shared_hand_with_200_players_each_settled_by_their_own_bets() -> None:
    f = RoundFeed()
    events = [f.opened()]
    for n in range(200):
        events.append(f.bet(f"a{n}", amount=100 + n, player=f"p{n}"))
        if n % 3 == 0:
            events.append(f.bet(f"x{n}", "aa_bonus", 100 + 2 * n, player=f"p{n}"))
    events += [f.hole("As Ad"), f.cards("dealer", "9c 9d"), f.cards("board", "Ah 7c 2d")]
    for n in range(200):
        if n % 5 == 0:
            events.append(f.decide(f"a{n}", "flop", "fold"))
        elif n % 7 != 0:  # the sevens never decide: they fold
            events.append(f.decide(f"a{n}", "flop", "call", f"c{n}", 2 * (100 + n)))
    _, facts = played([*events, f.cards("board", "Ks 4h"), f.completed()])

    assert Counter(fact.type for fact in facts) == {ACCEPTED: len(events) + 1, SETTLED: 1}
    expected: dict[str, tuple[str, int, int, str]] = {}
    for n in range(200):
        ante, calls = 100 + n, n % 5 != 0 and n % 7 != 0
        expected[f"a{n}"] = ("ante", ante, 2 * ante if calls else 0, "win" if calls else "fold")
        if n % 3 == 0:
            aa = 100 + 2 * n
            expected[f"x{n}"] = ("aa_bonus", aa, 8 * aa if calls else 0, "win" if calls else "fold")
        if calls:
            expected[f"c{n}"] = ("call", 2 * ante, 4 * ante, "win")
    settled = facts[-1]
    assert results_of(settled) == expected
    assert {r["player_id"] for r in settled.data["results"]} == {f"p{n}" for n in range(200)}
    assert_balanced(settled)


def test_several_boxes_each_settle_on_their_own_hand() -> None:
    f = RoundFeed()
    events = [
        f.opened(CH_ROYAL),
        f.bet("a1", box="b1", player="p1"),
        f.bet("x1", "aa_bonus", box="b1", player="p1"),
        f.bet("a2", box="b2", player="p2"),
        f.bet("a3", box="b3", player="p3"),
        f.bet("a3b", box="b2", player="p3"),  # p3 plays two boxes
        f.hole("As Ad", box="b1"),  # trips aces
        f.hole("8h 8s", box="b2"),  # pair of eights: loses to the nines
        f.hole("Qh Jh", box="b3"),  # a straight by the river
        f.cards("dealer", "9c 9d"),
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.decide("a2", "flop", "call", "c2", 200),
        f.decide("a3", "flop", "call", "c3", 200),
        f.decide("a3b", "flop", "fold"),
        f.cards("board", "Ks Th"),
        f.completed(),
    ]
    _, facts = played(events)
    assert results_of(facts[-1]) == {
        "a1": ("ante", 100, 200, "win"),
        "x1": ("aa_bonus", 100, 800, "win"),
        "c1": ("call", 200, 400, "win"),
        "a2": ("ante", 100, 0, "lose"),
        "c2": ("call", 200, 0, "lose"),
        "a3": ("ante", 100, 200, "win"),
        "c3": ("call", 200, 400, "win"),
        "a3b": ("ante", 100, 0, "fold"),
    }
    assert facts[-1].data["hands"].keys() == {"dealer", "b1", "b2", "b3"}


def test_a_progressive_jackpot_royal_takes_the_meter_and_reseeds_it() -> None:
    f = RoundFeed()
    events = [
        f.opened(CH_PROGRESSIVE),
        f.bet("a1"),
        f.bet("j1", "jackpot"),
        f.bet("a2", player="p2"),
        f.bet("j2", "jackpot", player="p2"),
        f.hole("As Ks"),
        f.cards("dealer", "2c 3d"),
        f.cards("board", "Qs Js Ts"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.decide("a2", "flop", "call", "c2", 200),
        f.cards("board", "4h 8d"),
        f.completed(),
    ]
    _, facts = played(events)
    settled = facts[-1]
    level = METER + 200 * 20 // 100
    share = level // 2
    assert results_of(settled)["j1"] == ("jackpot", 100, 100 + share, "win")
    assert results_of(settled)["j2"] == ("jackpot", 100, 100 + share, "win")
    (movement,) = settled.data["jackpot"]
    assert movement == {
        "currency": "EUR",
        "before": METER,
        "contributed": 40,
        "awarded": 2 * share,
        "reseeded": 5_000_000 - (level - 2 * share),
        "after": 5_000_000,
    }
    assert_balanced(settled)


# -- money and records ----------------------------------------------------------------------


def assert_balanced(fact: Fact) -> None:
    """Postings sum to zero per currency; each player's posting is what they get back."""
    sums: Counter[str] = Counter()
    for posting in fact.data["postings"]:
        sums[posting["currency"]] += posting["amount"]
    assert all(total == 0 for total in sums.values()), sums
    returned: Counter[tuple[str, str]] = Counter()
    staked: Counter[str] = Counter()
    for r in fact.data["results"]:
        returned[(r["currency"], f"player:{r['player_id']}")] += r["returned"]
        staked[r["currency"]] += r["stake"]
    players = {
        (p["currency"], p["account"]): p["amount"]
        for p in fact.data["postings"]
        if p["account"].startswith("player:")
    }
    assert players == dict(returned)
    escrow = {
        p["currency"]: -p["amount"] for p in fact.data["postings"] if p["account"] == "escrow"
    }
    assert escrow == dict(staked)


def test_postings_balance_per_currency_and_pay_players_what_was_returned() -> None:
    f = RoundFeed()
    events = [
        f.opened(),
        f.bet("a1"),
        f.bet("x1", "aa_bonus"),
        f.bet("a2", amount=250, player="p2", currency="USD"),
        f.bet("x2", "aa_bonus", 300, player="p2", currency="USD"),
        f.bet("a3", amount=400, player="p3", currency="USD"),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.decide("a2", "flop", "call", "c2", 500),
        f.cards("board", "Ks 4h"),
        f.completed(),
    ]
    _, facts = played(events)
    settled = facts[-1]
    assert_balanced(settled)
    currencies = {p["currency"] for p in settled.data["postings"]}
    assert currencies == {"EUR", "USD"}
    house = {
        p["currency"]: p["amount"] for p in settled.data["postings"] if p["account"] == "house"
    }
    assert house == {"EUR": 400 - 1400, "USD": 1450 - (500 + 2400 + 1000)}


@pytest.mark.parametrize("table", [CH_CLASSIC, CH_ROYAL, CH_PROGRESSIVE], ids=lambda t: t[1])
def test_results_record_the_pay_table_id_version_and_hash(table: tuple[str, str]) -> None:
    f = RoundFeed()
    events = [*ch_to_flop(f, table), f.cards("board", "Ks 4h"), f.completed()]
    _, facts = played(events)
    loaded = holdem.load_paytable(table[1])
    expected = {"id": loaded.id, "version": loaded.version, "hash": loaded.content_hash}
    assert facts[-1].data["paytable"] == expected
    assert loaded.content_hash.startswith("sha256:")


# -- rebuilt from facts ---------------------------------------------------------------------


def _mixed(f: RoundFeed) -> list[Event]:
    """Texas Hold'em Plus events out of order, with rejections among them."""
    opened, ante, hole = f.opened(THP), f.bet("a1"), f.hole("As Ks")
    late = f.bet("late", player="p2")  # rejected: betting closed
    repeat = f.cards("dealer", "As 7d")  # rejected: As is dealt
    dealer = f.cards("dealer", "2c 7d")
    call = f.decide("a1", "preflop", "call", "c1", 200)
    flop = f.cards("board", "Ah Kd 9c")  # held until the call
    reused = ante | {"payload": ante["payload"] | {"amount": 999}}  # rejected: reused id
    return [ante, opened, hole, late, flop, repeat, dealer, reused, call]


REBUILT: dict[str, Callable[[RoundFeed], list[Event]]] = {
    "half-played CH": lambda f: ch_to_flop(f),
    "settled CH": lambda f: ch_round(f),
    "voided": lambda f: [*ch_to_flop(f), f.voided()],
    "held and rejected events": _mixed,
    "never opened": lambda f: [f.bet("a1"), f.bet("a2", player="p2", seq=4)],
}


@pytest.mark.parametrize("build", REBUILT.values(), ids=REBUILT.keys())
def test_a_round_rebuilt_from_its_facts_is_the_same_round(
    build: Callable[[RoundFeed], list[Event]],
) -> None:
    f = RoundFeed()
    original, facts = played(build(f))

    rebuilt = fresh()
    for fact in facts:
        rebuilt.apply(fact)

    assert rebuilt == original
    assert rebuilt.waiting_for == original.waiting_for
    for following in (
        f.decide("a1", "flop", "call", "c1", 200),
        f.cards("board", "Ks 4h"),
        f.completed(),
        f.bet("zz", player="p7"),
    ):
        assert rebuilt.receive(parsed(following), meters) == original.receive(
            parsed(following), meters
        )
        assert rebuilt == original


def test_the_ledger_records_every_fact_as_its_canonical_json_text() -> None:
    f = RoundFeed()
    state = fresh()
    facts = feed(state, list(reversed(ch_round(f))))  # held, then released and settled
    facts += feed(state, [f.cards("board", "Ks 4h")])  # after the settlement: rejected
    v = RoundFeed(round_id="r2")
    facts += played([v.opened(), v.bet("a1"), v.voided()])[1]
    assert {fact.type for fact in facts} == {HELD, ACCEPTED, REJECTED, SETTLED, VOIDED}
    for fact in facts:
        assert data_text(fact.data) == canonical_json(fact.data)


def test_an_event_ahead_of_its_turn_after_the_round_closed_is_rejected_not_held() -> None:
    f = RoundFeed()
    state, _ = played([*ch_round(f)])
    (fact,) = state.receive(parsed(f.bet("late", seq=f.next_seq + 5)), meters)
    assert (fact.type, fact.data["code"]) == (REJECTED, "round_closed")
    assert state.held == {}
