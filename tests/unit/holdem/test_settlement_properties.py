"""Properties of settlement over random rounds of every pay table, and of void().

A random round: distinct cards for one to three boxes, one to three players per box, stakes
within the table's limits, any side bets the table offers, and any decisions (missing ones
included). Whatever the deal, every bet must come back as 0, its stake, or its stake plus a
multiple of a line of its spot's pay table, and the round must add up; and settling each
kind of seat once (``holdem.kinds``) gives every seat what settling the round gives it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import pytest
from holdem_rounds import play, wager
from hypothesis import given, settings
from hypothesis import strategies as st

from holdem import (
    Action,
    BetResult,
    Category,
    Deal,
    Decision,
    Outcome,
    PayTable,
    Settlement,
    Spot,
    Stage,
    Wager,
    evaluate,
    load_paytable,
    parse_cards,
    paytable_ids,
    settle,
    void,
)
from holdem.bets import SettlementError
from holdem.casino_holdem import dealer_qualifies
from holdem.kinds import SeatKind, settle_kinds
from holdem.paytable import Game

TABLES = [load_paytable(paytable_id) for paytable_id in paytable_ids()]
SIDE_SPOTS = (Spot.AA_BONUS, Spot.JACKPOT, Spot.PLUS)
PLAY_SPOTS = {Stage.FLOP: Spot.FLOP_BET, Stage.TURN: Spot.TURN_BET}  # bets; a call is CALL
METER_LINES = ("royal_flush", "straight_flush")
# Hole cards + flop that random deals almost never give: every jackpot line, the AA bonus's
# top lines, the best PLUS hole cards.
RARE_FIVES = [
    parse_cards(five)
    for five in (
        "As Ks Qs Js Ts",
        "9h 8h 7h 6h 5h",
        "Ad 2d 3d 4d 5d",
        "9c 9d 9h 9s Kd",
        "Kc Kh Kd 7c 7h",
        "Ah 9h Kh 7h 2h",
        "Ac Ad Kc 7d 2h",
        "Jc Jd 4h 4s 9c",
    )
]


@dataclass(frozen=True)
class Round:
    table: PayTable
    deal: Deal
    wagers: tuple[Wager, ...]
    decisions: tuple[Decision, ...]
    meter: int | None

    def settle(self) -> Settlement:
        return settle(self.table, self.deal, self.wagers, self.decisions, self.meter)


def _amount(draw: st.DrawFn, table: PayTable, spot: Spot) -> int:
    limit = table.limit(spot)
    assert limit is not None
    return draw(st.integers(limit.min, limit.max))


def _decisions(draw: st.DrawFn, table: PayTable, ante: Wager) -> list[Decision]:
    """Any decisions a player may take on ``ante``, stopping at a fold or a missing one."""
    if table.game is Game.CASINO_HOLDEM:
        stages = [(Stage.FLOP, Action.CALL, 2)]
    else:
        stages = [(Stage.PREFLOP, Action.CALL, 2), (Stage.FLOP, Action.BET, 1),
                  (Stage.TURN, Action.BET, 1)]  # fmt: skip
    decisions = []
    for stage, play_action, times in stages:
        choices = [play_action, Action.FOLD, None]
        if stage is not Stage.PREFLOP and table.game is Game.TEXAS_HOLDEM_PLUS:
            choices.append(Action.CHECK)
        action = draw(st.sampled_from(choices))
        if action is None:
            break
        bet_id = f"{ante.bet_id}-{stage}"
        decisions.append(play(ante.bet_id, stage, action, bet_id, times * ante.amount))
        if action is Action.FOLD:
            break
    return decisions


@st.composite
def rounds(draw: st.DrawFn, tables: list[PayTable] = TABLES) -> Round:
    table = draw(st.sampled_from(tables))
    boxes = draw(st.integers(1, 3))
    # The first box's hole cards and the flop: either random, or one of the rare hands.
    first = draw(st.sampled_from(RARE_FIVES + [[]] * len(RARE_FIVES)))
    cards = first + draw(st.permutations([c for c in range(52) if c not in first]))
    holes = {f"b{b}": (cards[5 + 2 * b], cards[6 + 2 * b]) for b in range(1, boxes)}
    holes = {"b0": (cards[0], cards[1])} | holes
    the_deal = Deal(holes, (cards[-1], cards[-2]), (*cards[2:5], cards[-3], cards[-4]))
    wagers: list[Wager] = []
    decisions: list[Decision] = []
    for box in holes:
        for p in range(draw(st.integers(1, 3))):
            player = f"{box}-p{p}"
            ante = wager(f"{player}-ante", Spot.ANTE, _amount(draw, table, Spot.ANTE), player, box)
            wagers.append(ante)
            for spot in SIDE_SPOTS:
                if table.offers(spot) and draw(st.booleans()):
                    amount = _amount(draw, table, spot)
                    wagers.append(wager(f"{player}-{spot}", spot, amount, player, box))
            decisions += _decisions(draw, table, ante)
    jackpot = table.jackpot
    meter = None if jackpot is None else draw(st.integers(jackpot.seed, 20 * jackpot.seed))
    return Round(table, the_deal, tuple(wagers), tuple(draw(st.permutations(decisions))), meter)


def _folded(round_: Round) -> set[str]:
    """Antes whose hand folded (or timed out before it could play)."""
    antes = {w.bet_id for w in round_.wagers if w.spot is Spot.ANTE}
    called = {d.ante_bet_id for d in round_.decisions if d.action is Action.CALL}
    folds = {d.ante_bet_id for d in round_.decisions if d.action is Action.FOLD}
    return (antes - called) | folds


def _ante_of(result: BetResult) -> str:
    """The ante a bet belongs to: every player of a random round has one ante."""
    return f"{result.player}-ante"


PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)


@PROPERTY_SETTINGS
@given(rounds())
def test_every_bet_returns_nothing_its_stake_or_a_pay_line(round_: Round) -> None:
    settlement = round_.settle()
    meter_shares: dict[str, set[int]] = {}
    for r in settlement.results:
        assert type(r.stake) is int and type(r.returned) is int
        multipliers = set(round_.table.spots[r.spot].values())
        if r.spot is Spot.JACKPOT and r.line in METER_LINES:
            assert r.outcome is Outcome.WIN
            assert r.returned > r.stake
            meter_shares.setdefault(r.line, set()).add(r.returned - r.stake)
            continue
        assert r.returned in {0, r.stake} | {r.stake * (1 + m) for m in multipliers}
        if r.outcome is Outcome.WIN:
            multiplier = round_.table.pays(r.spot, r.line or "")
            assert multiplier is not None, r
            assert r.returned == r.stake * (1 + multiplier)
    # Winners of one meter line share its award equally.
    assert all(len(shares) == 1 for shares in meter_shares.values())


@PROPERTY_SETTINGS
@given(rounds())
def test_outcomes_agree_with_what_is_returned(round_: Round) -> None:
    for r in round_.settle().results:
        if r.outcome is Outcome.WIN:
            assert r.returned > r.stake
        elif r.outcome is Outcome.PUSH:
            assert r.returned == r.stake
        else:
            assert r.outcome in (Outcome.LOSE, Outcome.FOLD)
            assert r.returned == 0


@PROPERTY_SETTINGS
@given(rounds())
def test_results_cover_every_wager_and_every_play_wager_once(round_: Round) -> None:
    settlement = round_.settle()
    plays = [d for d in round_.decisions if d.action in (Action.CALL, Action.BET)]
    expected = [w.bet_id for w in round_.wagers] + [d.bet_id for d in plays]
    assert [r.bet_id for r in settlement.results] == expected
    assert len(set(expected)) == len(expected)
    stakes = {w.bet_id: (w.spot, w.amount, w.player, w.box) for w in round_.wagers}
    antes = {w.bet_id: w for w in round_.wagers}
    for d in plays:
        ante = antes[d.ante_bet_id]
        assert d.bet_id is not None and d.amount is not None
        spot = Spot.CALL if d.action is Action.CALL else PLAY_SPOTS[d.stage]
        stakes[d.bet_id] = (spot, d.amount, ante.player, ante.box)
    assert {r.bet_id: (r.spot, r.stake, r.player, r.box) for r in settlement.results} == stakes
    assert settlement.staked == sum(r.stake for r in settlement.results)
    assert settlement.returned == sum(r.returned for r in settlement.results)
    assert settlement.staked == sum(amount for _, amount, _, _ in stakes.values())


@PROPERTY_SETTINGS
@given(rounds())
def test_a_folded_hand_returns_nothing_but_its_plus_bet(round_: Round) -> None:
    folded = _folded(round_)
    for r in round_.settle().results:
        if _ante_of(r) in folded and r.spot is not Spot.PLUS:
            assert (r.outcome, r.returned) == (Outcome.FOLD, 0)
        else:
            assert r.outcome is not Outcome.FOLD


@PROPERTY_SETTINGS
@given(rounds())
def test_showdown_bets_follow_the_rules(round_: Round) -> None:
    """docs/rules.md read again, independently: the ante and play wagers of a hand that played."""
    table, cards = round_.table, round_.deal
    dealer = evaluate(cards.dealer + cards.board)
    folded = _folded(round_)
    for r in round_.settle().results:
        if r.spot in (Spot.AA_BONUS, Spot.JACKPOT, Spot.PLUS) or _ante_of(r) in folded:
            continue
        hand = evaluate(cards.boxes[r.box] + cards.board)
        if table.game is Game.CASINO_HOLDEM and not dealer_qualifies(dealer):
            expected = Outcome.PUSH if r.spot is Spot.CALL else Outcome.WIN
        elif hand > dealer:
            below_straight = hand.category < Category.STRAIGHT
            thp_ante_push = table.game is Game.TEXAS_HOLDEM_PLUS and below_straight
            expected = Outcome.PUSH if r.spot is Spot.ANTE and thp_ante_push else Outcome.WIN
        else:
            expected = Outcome.PUSH if hand == dealer else Outcome.LOSE
        assert r.outcome is expected, (r, hand, dealer)
        if r.outcome is Outcome.WIN and r.spot is not Spot.ANTE:
            assert r.returned == 2 * r.stake


@PROPERTY_SETTINGS
@given(rounds([t for t in TABLES if t.jackpot is not None]))
def test_the_meter_moves_by_what_it_is_fed_and_what_it_pays(round_: Round) -> None:
    settlement = round_.settle()
    jackpot, m = round_.table.jackpot, settlement.meter
    assert jackpot is not None and m is not None and round_.meter is not None
    assert m.before == round_.meter
    assert m.before + m.contributed - m.awarded + m.reseeded == m.after
    stakes = sum(w.amount for w in round_.wagers if w.spot is Spot.JACKPOT)
    assert m.contributed == stakes * jackpot.meter_share_percent // 100
    meter_wins = [r for r in settlement.results if r.spot is Spot.JACKPOT and r.line in METER_LINES]
    assert m.awarded == sum(r.returned - r.stake for r in meter_wins)
    assert m.after >= jackpot.seed
    if not meter_wins:
        assert (m.awarded, m.reseeded) == (0, 0)


@PROPERTY_SETTINGS
@given(rounds())
def test_settlement_is_deterministic(round_: Round) -> None:
    assert round_.settle() == round_.settle()


@PROPERTY_SETTINGS
@given(rounds())
def test_void_refunds_every_wager_and_play_wager(round_: Round) -> None:
    settlement = void(round_.wagers, round_.decisions)
    plays = [d.bet_id for d in round_.decisions if d.action in (Action.CALL, Action.BET)]
    assert [r.bet_id for r in settlement.results] == [w.bet_id for w in round_.wagers] + plays
    assert all(r.outcome is Outcome.REFUND and r.returned == r.stake for r in settlement.results)
    assert settlement.returned == settlement.staked
    assert settlement.meter is None


def test_void_of_a_texas_holdem_plus_round_with_every_play_wager() -> None:
    wagers = [wager("a", Spot.ANTE, 500), wager("p", Spot.PLUS, 100)]
    decisions = [
        play("a", Stage.PREFLOP, Action.CALL, "c", 1_000),
        play("a", Stage.FLOP, Action.BET, "f", 500),
        play("a", Stage.TURN, Action.BET, "t", 500),
    ]
    settlement = void(wagers, decisions)
    assert [(r.bet_id, r.spot, r.stake, r.returned, r.outcome) for r in settlement.results] == [
        ("a", Spot.ANTE, 500, 500, Outcome.REFUND),
        ("p", Spot.PLUS, 100, 100, Outcome.REFUND),
        ("c", Spot.CALL, 1_000, 1_000, Outcome.REFUND),
        ("f", Spot.FLOP_BET, 500, 500, Outcome.REFUND),
        ("t", Spot.TURN_BET, 500, 500, Outcome.REFUND),
    ]
    assert settlement.staked == settlement.returned == 2_600


def test_void_of_a_casino_holdem_round_with_a_fold_and_a_call() -> None:
    wagers = [
        wager("a1", Spot.ANTE, 100, "p1"),
        wager("j1", Spot.JACKPOT, 100, "p1"),
        wager("a2", Spot.ANTE, 300, "p2"),
        wager("aa2", Spot.AA_BONUS, 200, "p2"),
    ]
    decisions = [
        play("a1", Stage.FLOP, Action.FOLD),
        play("a2", Stage.FLOP, Action.CALL, "c2", 600),
    ]
    settlement = void(wagers, decisions)
    assert Counter(r.outcome for r in settlement.results) == {Outcome.REFUND: 5}
    assert {r.bet_id: r.returned for r in settlement.results} == {
        "a1": 100,
        "j1": 100,
        "a2": 300,
        "aa2": 200,
        "c2": 600,
    }


@given(rounds())
def test_each_kind_of_seat_settled_once_gives_every_seat_of_it_its_results(
    round_: Round,
) -> None:
    """``holdem.kinds``: without a jackpot wager, a seat's results are those of its kind
    (box, wagers' spots and stakes, decisions); with one, the round goes bet by bet."""
    seats: dict[tuple[str, str], list[Wager]] = {}
    for w in round_.wagers:
        seats.setdefault((w.player, w.box), []).append(w)
    kinds = [
        SeatKind(
            seat[0].box,
            tuple((w.spot, w.amount) for w in seat),
            tuple(
                (d.stage, d.action, d.amount)
                for d in round_.decisions
                if d.ante_bet_id == seat[0].bet_id
            ),
        )
        for seat in seats.values()
    ]
    if any(w.spot is Spot.JACKPOT for w in round_.wagers):
        with pytest.raises(SettlementError):
            settle_kinds(round_.table, round_.deal, kinds)
        return
    whole = settle(round_.table, round_.deal, round_.wagers, round_.decisions, None)
    by_id = {r.bet_id: r for r in whole.results}
    by_kind, hands = settle_kinds(round_.table, round_.deal, kinds)
    assert hands == dict(whole.hands)
    for seat, kind in zip(seats.values(), by_kind, strict=True):
        ante = seat[0].bet_id
        for w, got in zip(seat, kind.wagers, strict=True):
            assert replace(got, bet_id=w.bet_id, player=w.player) == by_id[w.bet_id]
        mine = [d for d in round_.decisions if d.ante_bet_id == ante]
        plays = {i: d for i, d in enumerate(mine) if d.action in (Action.CALL, Action.BET)}
        assert kind.plays.keys() == plays.keys()
        for index, d in plays.items():
            want = by_id[str(d.bet_id)]
            assert replace(kind.plays[index], bet_id=want.bet_id, player=want.player) == want
