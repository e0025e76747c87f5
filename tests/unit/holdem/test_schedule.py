"""Each game's decision schedule against docs/rules.md, and the timeout defaults it implies."""

from __future__ import annotations

import pytest

from holdem import Action, Decision, Game, Spot, Stage
from holdem.schedule import (
    PLAY_SPOTS,
    decision_stage,
    folded_antes,
    folds_before,
    play_spot,
    schedule,
)

CALL, FOLD, BET, CHECK = Action.CALL, Action.FOLD, Action.BET, Action.CHECK
PREFLOP, FLOP, TURN = Stage.PREFLOP, Stage.FLOP, Stage.TURN
CH, THP = Game.CASINO_HOLDEM, Game.TEXAS_HOLDEM_PLUS


def test_casino_holdem_asks_once_after_the_flop_for_a_call_of_twice_the_ante() -> None:
    (flop,) = schedule(CH)
    assert (flop.stage, flop.board_before, flop.actions) == (FLOP, 3, (CALL, FOLD))
    assert (flop.wager, flop.multiple, flop.on_timeout) == (Spot.CALL, 2, FOLD)


def test_texas_holdem_plus_asks_before_the_flop_then_on_the_flop_and_the_turn() -> None:
    stages = schedule(THP)
    assert [(s.stage, s.board_before) for s in stages] == [(PREFLOP, 0), (FLOP, 3), (TURN, 4)]
    assert [s.actions for s in stages] == [(CALL, FOLD), (BET, CHECK, FOLD), (BET, CHECK, FOLD)]
    assert [(s.wager, s.multiple) for s in stages] == [
        (Spot.CALL, 2),
        (Spot.FLOP_BET, 1),
        (Spot.TURN_BET, 1),
    ]
    # No decision in time: before the flop a fold, on the flop or turn a check.
    assert [s.on_timeout for s in stages] == [FOLD, CHECK, CHECK]


def test_a_stage_a_game_does_not_have_is_none() -> None:
    assert decision_stage(CH, PREFLOP) is None
    assert decision_stage(CH, TURN) is None
    assert decision_stage(THP, TURN) == schedule(THP)[2]


@pytest.mark.parametrize(
    ("stage", "action", "spot"),
    [
        (FLOP, CALL, Spot.CALL),
        (PREFLOP, CALL, Spot.CALL),
        (FLOP, BET, Spot.FLOP_BET),
        (TURN, BET, Spot.TURN_BET),
        (FLOP, FOLD, None),
        (TURN, CHECK, None),
    ],
)
def test_a_decision_makes_the_play_wager_of_its_stage(
    stage: Stage, action: Action, spot: Spot | None
) -> None:
    assert play_spot(stage, action) is spot


def test_play_spots_are_the_wagers_decisions_make() -> None:
    assert {Spot.CALL, Spot.FLOP_BET, Spot.TURN_BET} == PLAY_SPOTS


@pytest.mark.parametrize(
    ("game", "stage", "decided", "out"),
    [
        (CH, FLOP, {}, False),  # asked now: not out yet
        (CH, None, {}, True),  # the round ended with no call: a fold
        (CH, None, {FLOP: CALL}, False),
        (THP, FLOP, {}, True),  # no call before the flop
        (THP, FLOP, {PREFLOP: CALL}, False),
        (THP, TURN, {PREFLOP: CALL}, False),  # no flop decision is a check
        (THP, TURN, {PREFLOP: CALL, FLOP: FOLD}, True),
        (THP, None, {PREFLOP: CALL, FLOP: BET, TURN: FOLD}, True),
        (THP, None, {PREFLOP: CALL, FLOP: CHECK}, False),
    ],
)
def test_an_ante_is_out_after_a_fold_or_a_timeout_that_folds(
    game: Game, stage: Stage | None, decided: dict[Stage, Action], out: bool
) -> None:
    assert folds_before(game, stage, decided) is out


def test_folded_antes_at_the_end_of_a_texas_holdem_plus_round() -> None:
    decisions = [
        Decision("a1", PREFLOP, CALL, "c1", 200),
        Decision("a1", FLOP, FOLD),
        Decision("a2", PREFLOP, CALL, "c2", 200),
        Decision("a3", PREFLOP, FOLD),
    ]
    assert folded_antes(THP, ["a1", "a2", "a3", "a4"], decisions) == {"a1", "a3", "a4"}
