"""Game faults: a fair shoe unless asked; a biased one moves the cards the way it says."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from holdem import Action, Game, Stage, load_paytable
from holdem.casino_holdem import dealer_qualifies
from holdem.evaluator import Category, evaluate
from holdem.schedule import decision_stage
from studio.config import ConfigError, GameFaults, StudioConfig, every_paytable
from studio.feed import simulate
from studio.gamefaults import draw
from studio.strategy import DecisionPoint, RandomStrategy, make_strategy

BOXES = 2
CARDS = 2 * BOXES + 11


def _deals(faults: GameFaults, n: int = 6000) -> list[list[int]]:
    rng = random.Random(3)
    return [draw(CARDS, BOXES, faults, rng) for _ in range(n)]


def _first_box_no_pair(deck: list[int]) -> bool:
    flop = deck[2 * BOXES + 4 : 2 * BOXES + 7]
    return evaluate(deck[1:3] + flop).category is Category.HIGH_CARD


def _dealer_qualifies(deck: list[int]) -> bool:
    board = [*deck[2 * BOXES + 4 : 2 * BOXES + 7], deck[2 * BOXES + 8], deck[2 * BOXES + 10]]
    return dealer_qualifies(evaluate(deck[2 * BOXES + 1 : 2 * BOXES + 3] + board))


def test_no_fault_draws_exactly_what_the_fair_shoe_did() -> None:
    rng_a, rng_b = random.Random(9), random.Random(9)
    for _ in range(100):
        assert draw(CARDS, BOXES, GameFaults(), rng_a) == rng_b.sample(range(52), CARDS)


def test_every_deal_is_distinct_cards() -> None:
    for deck in _deals(GameFaults(0.5, 0.5), 2000):
        assert len(set(deck)) == CARDS


def test_deal_bias_gives_the_first_box_fewer_weak_hands() -> None:
    fair = sum(map(_first_box_no_pair, _deals(GameFaults())))
    biased = sum(map(_first_box_no_pair, _deals(GameFaults(deal_bias=0.5))))
    # About half of fair five-card hands make no pair; half of those are dealt again.
    assert biased < 0.85 * fair


def test_completion_bias_gives_the_dealer_fewer_qualifying_hands() -> None:
    n = 6000
    fair = sum(map(_dealer_qualifies, _deals(GameFaults(), n)))
    biased = sum(map(_dealer_qualifies, _deals(GameFaults(completion_bias=0.5), n)))
    # A qualifying hand is redrawn half the time; on the same board it often qualifies again.
    assert biased < 0.95 * fair


def test_rates_outside_zero_to_one_are_refused() -> None:
    with pytest.raises(ConfigError, match="deal_bias"):
        GameFaults(deal_bias=1.5)


def test_a_biased_studio_still_sends_a_valid_feed() -> None:
    config = StudioConfig(
        tables=every_paytable(players=3), rounds=8, seed=1, game_faults=GameFaults(1.0, 1.0)
    )
    kinds = Counter(m.event["event_type"] for m in simulate(config) if m.event)
    assert kinds["round.completed"] == 8


def test_the_random_player_takes_every_admitted_action() -> None:
    strategy = make_strategy("random", random.Random(1))
    assert isinstance(strategy, RandomStrategy)
    table = load_paytable("texas-holdem-plus/standard")
    point = DecisionPoint(Game.TEXAS_HOLDEM_PLUS, Stage.FLOP, (0, 5), (9, 20, 33), table)
    seen = Counter(strategy.decide(point) for _ in range(300))
    flop = decision_stage(Game.TEXAS_HOLDEM_PLUS, Stage.FLOP)
    assert flop is not None
    assert set(seen) == set(flop.actions)
    assert min(seen.values()) > 60
    assert Action.CALL not in seen
