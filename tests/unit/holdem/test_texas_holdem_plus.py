"""Texas Hold'em Plus settlement, bet by bet (docs/rules.md, "Texas Hold'em Plus").

Unless a case says otherwise the player antes 100 (bet ``a``), calls 200 before the flop
(``c``), bets 100 on the flop (``f``, spot flop_bet) and 100 on the turn (``t``, turn_bet).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from holdem_rounds import by_bet, deal, play, wager

from holdem import (
    Action,
    Decision,
    Outcome,
    Settlement,
    SettlementError,
    Spot,
    Stage,
    load_paytable,
    settle,
)

THP = load_paytable("texas-holdem-plus/standard")
WIN, LOSE, PUSH, FOLD = Outcome.WIN, Outcome.LOSE, Outcome.PUSH, Outcome.FOLD
PRE, FLOP, TURN = Stage.PREFLOP, Stage.FLOP, Stage.TURN

CALL = play("a", PRE, Action.CALL, "c", 200)
BET_FLOP = play("a", FLOP, Action.BET, "f", 100)
BET_TURN = play("a", TURN, Action.BET, "t", 100)
ALL_IN = (CALL, BET_FLOP, BET_TURN)


def check(stage: Stage) -> Decision:
    return play("a", stage, Action.CHECK)


def fold(stage: Stage) -> Decision:
    return play("a", stage, Action.FOLD)


def one_hand(
    player: str,
    house: str,
    board: str,
    decisions: Sequence[Decision] = ALL_IN,
    *,
    plus: bool = False,
) -> Settlement:
    wagers = [wager("a", Spot.ANTE), *([wager("p", Spot.PLUS)] if plus else [])]
    return settle(THP, deal(player, house, board), wagers, decisions)


# --- the showdown ----------------------------------------------------------------------------

SHOWDOWNS = [
    # (player, house, board, ante, every play wager); play wagers are 200, 100 and 100
    pytest.param(
        "Kc Kd", "Qc Jd", "2h 7s 9d 3c 4h", (PUSH, 100), WIN,
        id="player wins with a pair: ante pushes, play wagers win 1:1",
    ),
    pytest.param(
        "Ac Qd", "7c 5d", "Kh 8s 3d Jc 2h", (PUSH, 100), WIN,
        id="player wins with ace high: ante pushes",
    ),
    pytest.param(
        "Qc Qd", "4c 4d", "Qh 8s 3d Kc 2h", (PUSH, 100), WIN,
        id="player wins with three of a kind: ante pushes",
    ),
    pytest.param(
        "Kc 8d", "4c 4d", "Kh 8s 3d Jc 2h", (PUSH, 100), WIN,
        id="player wins with two pair: ante pushes",
    ),
    pytest.param(
        "6c 5d", "4c 4d", "7h 8s 9d Kc 2h", (WIN, 200), WIN,
        id="player wins with a straight: ante 1:1 too",
    ),
    pytest.param(
        "Ah 9h", "4c 4d", "Kh 7h 2h 8c 3d", (WIN, 200), WIN,
        id="player wins with a flush: ante 1:1",
    ),
    pytest.param(
        "Kc Kh", "4c 4d", "Kd 7c 7h 2s 3d", (WIN, 200), WIN,
        id="player wins with a full house: ante 1:1",
    ),
    pytest.param(
        "9c 9d", "4c 4d", "9h 9s Kd 7c 2h", (WIN, 200), WIN,
        id="player wins with four of a kind: ante 1:1",
    ),
    pytest.param(
        "9s 8s", "4c 4d", "7s 6s 5s Kd 2h", (WIN, 200), WIN,
        id="player wins with a straight flush: ante 1:1",
    ),
    pytest.param(
        "As Ks", "4c 4d", "Qs Js Ts 7d 2h", (WIN, 200), WIN,
        id="player wins with a royal flush: ante 1:1",
    ),
    pytest.param(
        "Ac 4c", "2d 3d", "5c 6d 7h 8s Kc", (WIN, 200), WIN,
        id="player's 4-8 straight beats the house's king high: the ante pays",
    ),
    pytest.param(
        "Kc Kd", "Ac Ad", "2h 7s 9d 3c 4h", (LOSE, 0), LOSE,
        id="house higher: ante and every play wager lose",
    ),
    pytest.param(
        "Qc Jd", "Ac 5d", "Kh 8s 3d 9c 2h", (LOSE, 0), LOSE,
        id="the house needs no qualification: its ace high beats king high",
    ),
    pytest.param(
        "6c 5d", "Tc Jd", "7h 8s 9d Kc 2h", (LOSE, 0), LOSE,
        id="house's higher straight beats the player's straight",
    ),
    pytest.param(
        "2c 3d", "2d 3c", "5c 6d 7h 8s 9s", (PUSH, 100), PUSH,
        id="tie on a board straight: ante and play wagers push",
    ),
    pytest.param(
        "Kc 8d", "Kh 8c", "Ks 8s 2d 5c 3h", (PUSH, 100), PUSH,
        id="tie on the same two pair and kicker: all push",
    ),
    pytest.param(
        "Jc 2d", "3c 4h", "As Ad Ks Kd Qh", (PUSH, 100), PUSH,
        id="the board plays for both, the sixth and seventh cards never count",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("player", "house", "board", "ante", "play_wagers"), SHOWDOWNS)
def test_showdown(
    player: str, house: str, board: str, ante: tuple[Outcome, int], play_wagers: Outcome
) -> None:
    multiplier = {WIN: 2, PUSH: 1, LOSE: 0}[play_wagers]
    assert by_bet(one_hand(player, house, board)) == {
        "a": ante,
        "c": (play_wagers, 200 * multiplier),
        "f": (play_wagers, 100 * multiplier),
        "t": (play_wagers, 100 * multiplier),
    }


def test_a_push_below_a_straight_is_named_on_the_ante() -> None:
    ante, call, *_ = one_hand("Kc Kd", "Qc Jd", "2h 7s 9d 3c 4h").results
    assert (ante.outcome, ante.line) == (PUSH, "below_straight")
    assert (call.outcome, call.line) == (WIN, "win")
    straight = one_hand("6c 5d", "4c 4d", "7h 8s 9d Kc 2h").results[0]
    assert (straight.outcome, straight.line) == (WIN, "straight")


# --- decisions: bets, checks, folds and timeouts ---------------------------------------------

WINNING = ("Kc Kd", "Qc Jd", "2h 7s 9d 3c 4h")  # the player's kings win, below a straight

DECISIONS = [
    # (decisions, expected results on the winning hand)
    pytest.param(
        [fold(PRE)], {"a": (FOLD, 0)},
        id="preflop fold loses the ante",
    ),
    pytest.param(
        [], {"a": (FOLD, 0)},
        id="no preflop decision is a fold",
    ),
    pytest.param(
        [CALL, fold(FLOP)], {"a": (FOLD, 0), "c": (FOLD, 0)},
        id="flop fold loses ante and call",
    ),
    pytest.param(
        [CALL, BET_FLOP, fold(TURN)], {"a": (FOLD, 0), "c": (FOLD, 0), "f": (FOLD, 0)},
        id="turn fold loses ante, call and flop bet",
    ),
    pytest.param(
        [CALL, check(FLOP), fold(TURN)], {"a": (FOLD, 0), "c": (FOLD, 0)},
        id="turn fold after a flop check loses ante and call",
    ),
    pytest.param(
        [CALL], {"a": (PUSH, 100), "c": (WIN, 400)},
        id="no flop or turn decision is a check",
    ),
    pytest.param(
        [CALL, check(FLOP), check(TURN)], {"a": (PUSH, 100), "c": (WIN, 400)},
        id="check, check",
    ),
    pytest.param(
        [CALL, check(FLOP), BET_TURN], {"a": (PUSH, 100), "c": (WIN, 400), "t": (WIN, 200)},
        id="check on the flop, bet on the turn",
    ),
    pytest.param(
        [CALL, BET_FLOP], {"a": (PUSH, 100), "c": (WIN, 400), "f": (WIN, 200)},
        id="bet on the flop, no turn decision",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("decisions", "expected"), DECISIONS)
def test_decisions(decisions: list[Decision], expected: dict[str, tuple[Outcome, int]]) -> None:
    assert by_bet(one_hand(*WINNING, decisions)) == expected


def test_play_wagers_are_recorded_on_their_own_spots() -> None:
    settlement = one_hand(*WINNING)
    assert [(r.bet_id, r.spot, r.stake) for r in settlement.results] == [
        ("a", Spot.ANTE, 100),
        ("c", Spot.CALL, 200),
        ("f", Spot.FLOP_BET, 100),
        ("t", Spot.TURN_BET, 100),
    ]
    assert [str(r.spot) for r in settlement.results[1:]] == ["call", "flop_bet", "turn_bet"]
    assert {(r.player, r.box) for r in settlement.results} == {("p1", "main")}


def test_several_players_on_one_shared_hand() -> None:
    wagers = [wager("a1", Spot.ANTE, 100, "p1"), wager("a2", Spot.ANTE, 300, "p2"),
              wager("p2", Spot.PLUS, 100, "p2"), wager("a3", Spot.ANTE, 500, "p3")]  # fmt: skip
    decisions = [
        play("a1", PRE, Action.CALL, "c1", 200),
        play("a1", FLOP, Action.BET, "f1", 100),
        play("a2", PRE, Action.CALL, "c2", 600),
        play("a2", FLOP, Action.FOLD),
    ]  # p3 times out before the flop
    settlement = settle(THP, deal(*WINNING), wagers, decisions)
    assert by_bet(settlement) == {
        "a1": (PUSH, 100), "c1": (WIN, 400), "f1": (WIN, 200),
        "a2": (FOLD, 0), "p2": (WIN, 1_100), "c2": (FOLD, 0),  # K-K pays 10:1 on PLUS
        "a3": (FOLD, 0),
    }  # fmt: skip


# --- PLUS ------------------------------------------------------------------------------------

PLUS_LINES = [
    # (hole cards, line, returned on a stake of 100)
    ("As Ad", "pair_of_aces", 3_100),
    ("Ah Kh", "ace_king_suited", 2_600),
    ("Kc Ac", "ace_king_suited", 2_600),
    ("As Qs", "ace_queen_or_jack_suited", 2_100),
    ("Ad Jd", "ace_queen_or_jack_suited", 2_100),
    ("Ac Kd", "ace_king_offsuit", 1_600),
    ("Jc Jd", "pair_of_jacks_to_kings", 1_100),
    ("Qh Qs", "pair_of_jacks_to_kings", 1_100),
    ("Kc Kh", "pair_of_jacks_to_kings", 1_100),
    ("Ac Qh", "ace_queen_or_jack_offsuit", 600),
    ("Jc As", "ace_queen_or_jack_offsuit", 600),
    ("2c 2d", "pair_of_twos_to_tens", 400),
    ("5c 5s", "pair_of_twos_to_tens", 400),
    ("Tc Th", "pair_of_twos_to_tens", 400),
    ("As Ts", None, 0),  # A-T suited
    ("Ac Th", None, 0),
    ("Kh Qh", None, 0),  # K-Q suited
    ("Kc Jd", None, 0),
    ("7c 2d", None, 0),
]
# The house holds four nines: it beats every player hand below, which changes nothing for PLUS.
HOUSE, BOARD = "9c 9d", "9h 9s 6c 3d 2h"


@pytest.mark.parametrize(
    "decisions",
    [ALL_IN, [fold(PRE)], [], [CALL, fold(FLOP)], [CALL, BET_FLOP, fold(TURN)]],
    ids=["played to the river", "folded preflop", "no decision", "folded on the flop",
         "folded on the turn"],
)  # fmt: skip
@pytest.mark.parametrize(("hole", "line", "returned"), PLUS_LINES, ids=[c[0] for c in PLUS_LINES])
def test_every_plus_line_whatever_the_player_does_and_the_house_holds(
    hole: str, line: str | None, returned: int, decisions: Sequence[Decision]
) -> None:
    settlement = one_hand(hole, HOUSE, BOARD, decisions, plus=True)
    plus = next(r for r in settlement.results if r.spot is Spot.PLUS)
    assert (plus.outcome, plus.returned, plus.line) == (WIN if returned else LOSE, returned, line)
    others = [r for r in settlement.results if r.spot is not Spot.PLUS]
    assert all(r.returned == 0 and r.outcome in (LOSE, FOLD) for r in others)


def test_plus_is_judged_on_the_hole_cards_alone() -> None:
    # A-7 makes aces with the board, but the hole cards alone are A-7: PLUS loses.
    settlement = one_hand("Ac 7d", "4c 4d", "Ah 8s 3d Jc 2h", plus=True)
    assert by_bet(settlement)["p"] == (LOSE, 0)


# --- rounds that cannot be settled -----------------------------------------------------------


def test_there_is_no_meter() -> None:
    with pytest.raises(SettlementError, match="no jackpot meter"):
        settle(THP, deal(*WINNING), [wager("a", Spot.ANTE)], [CALL], 5_000_000)


def test_a_bet_for_an_unknown_ante_is_refused() -> None:
    with pytest.raises(SettlementError, match="has no ante 'x'"):
        settle(THP, deal(*WINNING), [wager("a", Spot.ANTE)], [play("x", FLOP, Action.BET, "f", 1)])
