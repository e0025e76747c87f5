"""Situation EVs against plain brute force (phevaluator, itertools over every completion)."""

from __future__ import annotations

import odds_reference as ref
import pytest

from holdem.bets import Action
from holdem.cards import parse_cards
from holdem.evaluator import Category
from holdem.odds.situation import (
    CH_COMPLETIONS,
    ante_multipliers,
    casino_holdem_flop,
    texas_holdem_plus_flop,
    texas_holdem_plus_turn,
)
from holdem.paytable import PayTable, load_paytable

CLASSIC = load_paytable("casino-holdem/classic")
ROYAL_20 = load_paytable("casino-holdem/royal-20")
THP = load_paytable("texas-holdem-plus/standard")

# A spread of situations: overcards, a low paired board (qualification is subtle), a made
# flush, a royal draw, and a dead-looking hand.
CH_SITUATIONS = [
    ("AsKd", "Qh7c2s"),
    ("9c8c", "4d4s3h"),
    ("2c7d", "AhAdKs"),
    ("QsJs", "As Ts 3d"),
    ("5h5d", "5c 6h 7h"),
]


@pytest.mark.parametrize(("hole", "flop"), CH_SITUATIONS[:3])
@pytest.mark.parametrize("table", [CLASSIC, ROYAL_20], ids=["classic", "royal-20"])
def test_casino_holdem_flop_matches_brute_force(hole: str, flop: str, table: PayTable) -> None:
    odds = casino_holdem_flop(table, hole, flop)
    counts, ev = ref.casino_holdem_flop(
        parse_cards(hole), parse_cards(flop), ante_multipliers(table)
    )
    assert odds.ev_call == ev
    assert odds.completions == CH_COMPLETIONS == sum(counts.values())
    for c in Category:
        assert odds.dealer_does_not_qualify[c] == counts["no_qualify", c]
        assert odds.wins[c] == counts["win", c]
    assert odds.ties == counts["tie", -1]
    assert odds.losses == counts["loss", -1]


@pytest.mark.parametrize(("hole", "flop"), CH_SITUATIONS)
def test_casino_holdem_counts_add_up(hole: str, flop: str) -> None:
    odds = casino_holdem_flop(CLASSIC, hole, flop)
    total = sum(odds.dealer_does_not_qualify) + sum(odds.wins) + odds.ties + odds.losses
    assert total == odds.completions == 1_070_190
    assert odds.ev_fold == -1
    assert odds.best is (Action.CALL if odds.ev_call > -1 else Action.FOLD)


@pytest.mark.parametrize(
    ("hole", "board", "flop_bet"),
    [
        ("AsKd", "Qh7c2s3d", 0),
        ("AsKd", "Qh7c2s3d", 1),
        ("9c8c", "4d4s3h2c", 0),
        ("Td9d", "8d7s2dKh", 1),
    ],
)
def test_thp_turn_matches_brute_force(hole: str, board: str, flop_bet: int) -> None:
    cards = parse_cards(board)
    odds = texas_holdem_plus_turn(THP, hole, cards[:3], cards[3:], bool(flop_bet))
    expected = ref.thp_turn(parse_cards(hole), cards, flop_bet, ante_multipliers(THP))
    assert odds.ev == {Action(a): v for a, v in expected.items()}
    assert sum(odds.wins) + odds.ties + odds.losses == odds.completions == 45_540


@pytest.mark.parametrize(("hole", "flop"), [("AsKd", "Qh7c2s"), ("9c8c", "4d4s3h")])
def test_thp_flop_is_the_mean_of_the_best_turn_actions(hole: str, flop: str) -> None:
    """Flop EV of an action = mean over the 47 turn cards of the best turn EV after it."""
    odds = texas_holdem_plus_flop(THP, hole, flop)
    seen = set(parse_cards(hole + flop))
    for action, flop_bet in ((Action.CHECK, False), (Action.BET, True)):
        turns = [
            texas_holdem_plus_turn(THP, hole, flop, [t], flop_bet)
            for t in range(52)
            if t not in seen
        ]
        assert len(turns) == 47
        assert odds.ev[action] == sum(max(t.ev.values()) for t in turns) / 47
    assert odds.ev[Action.FOLD] == -3


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="only once"):
        casino_holdem_flop(CLASSIC, "AsKd", "AsQh2c")
    with pytest.raises(ValueError, match="texas_holdem_plus"):
        casino_holdem_flop(THP, "AsKd", "Qh7c2s")
    with pytest.raises(ValueError, match="3 cards"):
        casino_holdem_flop(CLASSIC, "AsKd", "Qh7c")
