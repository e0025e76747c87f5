"""Simulated players' strategies."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from holdem import Action, Game, Stage, load_paytable, parse_cards
from studio.config import StudioConfig, TableSpec
from studio.feed import simulate
from studio.strategy import (
    STRATEGIES,
    AlwaysCall,
    BestPlayStrategy,
    Board,
    DecisionPoint,
    Hole,
    SimpleStrategy,
    TimeoutStrategy,
    make_strategy,
    register_strategy,
)

CH = load_paytable("casino-holdem/classic")
THP = load_paytable("texas-holdem-plus/standard")


def ch_flop(cards: Hole, board: Board) -> DecisionPoint:
    """A Casino Hold'em flop decision on the classic table."""
    return DecisionPoint(Game.CASINO_HOLDEM, Stage.FLOP, cards, board, CH)


def thp_at(stage: Stage, cards: Hole, board: Board) -> DecisionPoint:
    """A Texas Hold'em Plus decision on the standard table."""
    return DecisionPoint(Game.TEXAS_HOLDEM_PLUS, stage, cards, board, THP)


def hand(hole: str, board: str = "") -> tuple[Hole, Board]:
    h = parse_cards(hole)
    return (h[0], h[1]), tuple(parse_cards(board))


@pytest.mark.parametrize(
    ("hole", "flop", "action"),
    [
        ("7c9s", "2dKc5h", Action.FOLD),  # nothing
        ("7c9s", "9dKc5h", Action.CALL),  # a pair
        ("Ac3s", "9dKc5h", Action.CALL),  # an ace
        ("7c8c", "2cKc5h", Action.CALL),  # four to a flush
        ("7c8d", "9s6h2c", Action.CALL),  # four to a straight
        ("2c3d", "4s5hKc", Action.CALL),  # four to a straight, ace low
        ("2c7d", "9sTh4c", Action.FOLD),
    ],
)
def test_simple_casino_holdem(hole: str, flop: str, action: Action) -> None:
    cards, board = hand(hole, flop)
    strategy = SimpleStrategy(random.Random(0))
    assert strategy.decide(ch_flop(cards, board)) is action


def test_simple_texas_holdem_plus() -> None:
    strategy = SimpleStrategy(random.Random(0))
    for hole in ("Ac2d", "7c7d", "8h9h"):
        assert strategy.decide(thp_at(Stage.PREFLOP, *hand(hole))) is Action.CALL
    folds = tally(strategy, thp_at(Stage.PREFLOP, *hand("2c9d")))
    assert 200 < folds[Action.FOLD] < 400 and folds[Action.FOLD] + folds[Action.CALL] == 1000
    assert strategy.decide(thp_at(Stage.FLOP, *hand("2c9d", "9h4s5c"))) is Action.BET
    assert strategy.decide(thp_at(Stage.FLOP, *hand("2c9d", "Th4sKc"))) is Action.CHECK
    assert strategy.decide(thp_at(Stage.TURN, *hand("2c9d", "Th4sKc2h"))) is Action.BET
    turn = tally(strategy, thp_at(Stage.TURN, *hand("2c9d", "Th4sKcJh")))
    assert set(turn) <= {Action.CHECK, Action.FOLD} and turn[Action.FOLD] < 200


def tally(strategy: SimpleStrategy, point: DecisionPoint) -> Counter[Action | None]:
    """The strategy's answers to the same decision, asked 1,000 times."""
    return Counter(strategy.decide(point) for _ in range(1000))


def test_always_call_puts_money_in_at_every_stage() -> None:
    cards, board = hand("2c7d", "9sTh4c")
    player = AlwaysCall()
    assert player.decide(ch_flop(cards, board)) is Action.CALL
    assert player.decide(thp_at(Stage.PREFLOP, cards, ())) is Action.CALL
    for stage in (Stage.FLOP, Stage.TURN):
        assert player.decide(thp_at(stage, cards, board)) is Action.BET


def test_timeout_strategy_sometimes_says_nothing() -> None:
    cards, board = hand("2c7d", "9sTh4c")
    never = TimeoutStrategy(AlwaysCall(), 0.0, random.Random(1))
    always = TimeoutStrategy(AlwaysCall(), 1.0, random.Random(1))
    assert never.decide(ch_flop(cards, board)) is Action.CALL
    assert always.decide(ch_flop(cards, board)) is None
    with pytest.raises(ValueError):
        TimeoutStrategy(AlwaysCall(), 2.0, random.Random(1))


class _FoldEverything:
    def best_action(self, point: DecisionPoint) -> Action:
        return Action.FOLD


def test_best_play_asks_its_advisor_and_can_be_registered() -> None:
    cards, board = hand("AcAd", "AsAhKc")
    best = BestPlayStrategy(_FoldEverything())
    assert best.decide(ch_flop(cards, board)) is Action.FOLD
    register_strategy("fold-all", lambda rng: BestPlayStrategy(_FoldEverything()))
    try:
        table = TableSpec("studio-1-classic", "casino-holdem/classic", players=5)
        config = StudioConfig((table,), rounds=3, seed=1, strategy="fold-all")
        actions = {
            m.event["payload"]["action"]
            for m in simulate(config)
            if m.event and m.event["event_type"] == "decision.made"
        }
        assert actions == {"fold"}
    finally:
        del STRATEGIES["fold-all"]


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(ValueError, match="known: always-call, best-play, random, simple"):
        make_strategy("clairvoyant", random.Random(0))


def test_a_strategy_answering_out_of_turn_is_refused() -> None:
    register_strategy("checker", lambda rng: _Checker())
    try:
        table = TableSpec("studio-1-classic", "casino-holdem/classic", players=1)
        with pytest.raises(ValueError, match="check"):
            list(simulate(StudioConfig((table,), rounds=1, strategy="checker")))
    finally:
        del STRATEGIES["checker"]


class _Checker:
    def decide(self, point: DecisionPoint) -> Action | None:
        return Action.CHECK


def test_best_play_takes_the_exact_odds_decision() -> None:
    """best-play answers what holdem.odds computes, and remembers it for a shared hand."""
    from holdem import load_paytable, parse_cards
    from holdem.odds import casino_holdem_flop, texas_holdem_plus_turn
    from studio.bestplay import exact_odds

    player = make_strategy("best-play", random.Random(0))
    classic = load_paytable("casino-holdem/classic")
    hole, board = parse_cards("7c2d"), tuple(parse_cards("KsQhJd"))
    best = casino_holdem_flop(classic, hole, board).best
    assert best is Action.FOLD  # 7-2 offsuit against K-Q-J: no pair, no draw
    assert (
        player.decide(
            DecisionPoint(Game.CASINO_HOLDEM, Stage.FLOP, (hole[0], hole[1]), board, classic)
        )
        is best
    )
    plus = load_paytable("texas-holdem-plus/standard")
    hole, board = parse_cards("AhKh"), tuple(parse_cards("QhJh2c3d"))
    for flop_bet in (False, True):
        expected = texas_holdem_plus_turn(plus, hole, board[:3], board[3:], flop_bet).best
        point = DecisionPoint(
            Game.TEXAS_HOLDEM_PLUS, Stage.TURN, (hole[0], hole[1]), board, plus, flop_bet
        )
        answer = exact_odds().best_action(point)
        assert answer is expected
