"""The PAR sheet's compiled steps against vectorised numpy and the evaluator."""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt
import pytest

from holdem.evaluator import evaluate
from holdem.odds import engine, kernel, sweep
from holdem.odds.combos import canonical_flops, hole_class_table, hole_classes, pairs
from holdem.odds.situation import THP_TURN_COMPLETIONS, ante_multipliers, thp_flop_numerators
from holdem.paytable import load_paytable

# The first and last canonical flops, and one between.
FLOPS = [canonical_flops()[i][0] for i in (0, 900, 1754)]


def test_five_card_strengths_are_the_evaluators() -> None:
    deals = random.Random(26)
    hands = np.array([deals.sample(range(52), 5) for _ in range(3000)], dtype=np.uint8)
    # Every flush and straight flush shape turns up too: five cards of one suit.
    hands[:200] = [sorted(deals.sample(range(0, 52, 4), 5)) for _ in range(200)]
    hands[200] = [32, 36, 40, 44, 48]  # royal flush, clubs
    strengths = kernel.evaluate_batch5(hands)
    assert strengths.tolist() == [evaluate([int(c) for c in h]).strength for h in hands]


def _thp_tables_by_numpy(
    flop: tuple[int, int, int], multipliers: tuple[int, ...]
) -> npt.NDArray[np.int64]:
    """The per-class Texas Hold'em Plus counts of one flop, vectorised over the engine's."""
    counts = engine.ranked_thp_flop_all(flop)
    flop_n, after_check, after_bet = thp_flop_numerators(counts.wins, counts.losses, multipliers)
    flop_action = flop_n.argmax(axis=1)
    bet = flop_action == 2
    played = flop_action != 1
    turn_action = np.where(bet[:, None], after_bet, after_check)
    ties = THP_TURN_COMPLETIONS - counts.wins.sum(axis=2) - counts.losses
    blocks = np.concatenate([counts.wins, ties[..., None], counts.losses[..., None]], axis=2)
    rows = np.arange(kernel.HOLES)
    per_hole = np.zeros((kernel.HOLES, kernel.THP_SIZE), dtype=np.int64)
    per_hole[:, 0] = 1
    per_hole[:, 1] = flop_n[rows, flop_action]
    out = per_hole[:, 2 : 2 + kernel.THP_OUTCOMES]
    out[:, 0] = np.where(played, 0, 47 * THP_TURN_COMPLETIONS)
    folds = ((turn_action == 1) & played[:, None]).sum(axis=1) * THP_TURN_COMPLETIONS
    out[:, 1] = np.where(bet, 0, folds)
    out[:, 2] = np.where(bet, folds, 0)
    for flop_bet in (0, 1):
        for turn_bet in (0, 1):
            taken = played & (bet == bool(flop_bet))
            mask = taken[:, None] & (turn_action == (2 if turn_bet else 0))
            start = 3 + (flop_bet * 2 + turn_bet) * 12
            out[:, start : start + 12] = (blocks * mask[..., None]).sum(axis=1)
    decisions = per_hole[:, 2 + kernel.THP_OUTCOMES :]
    decisions[rows, flop_action] = 1
    for k in range(3):
        decisions[:, 3 + k] = np.where(played & ~bet, (turn_action == k).sum(axis=1), 0)
        decisions[:, 6 + k] = np.where(bet, (turn_action == k).sum(axis=1), 0)
    holes = counts.remaining[pairs(49)]
    acc = np.zeros((len(hole_classes()), kernel.THP_SIZE), dtype=np.int64)
    np.add.at(acc, hole_class_table()[holes[:, 0], holes[:, 1]], per_hole)
    return acc


@pytest.mark.parametrize("flop", FLOPS)
def test_thp_best_play_tables_equal_the_vectorised_ones(flop: tuple[int, int, int]) -> None:
    standard = ante_multipliers(load_paytable("texas-holdem-plus/standard"))
    generous = (0, 0, 0, 1, 2, 3, 4, 10, 50, 500)  # pays from trips up: other decisions
    remaining = np.array(sorted(set(range(52)) - set(flop)), dtype=np.uint8)
    holes = remaining[pairs(49)]
    classes = hole_class_table()[holes[:, 0], holes[:, 1]].astype(np.int64)
    counts = sweep.flop_counts(flop, ch=False)
    both = kernel.thp_tables(
        counts.thp_wins, counts.thp_losses, (standard, generous), classes, len(hole_classes())
    )
    assert np.array_equal(both[0], _thp_tables_by_numpy(flop, standard))
    assert np.array_equal(both[1], _thp_tables_by_numpy(flop, generous))
