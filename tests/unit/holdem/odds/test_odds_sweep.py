"""The compiled sweep against the numpy ranking: the same integers, flop by flop."""

from __future__ import annotations

import numpy as np
import pytest

from holdem.evaluator import evaluate_batch
from holdem.odds.combos import canonical_flops, quads
from holdem.odds.engine import (
    flop_all,
    ranked_casino_holdem_flop_all,
    ranked_thp_flop_all,
)
from holdem.odds.sweep import flop_strengths

CANONICAL = [flop for flop, _ in canonical_flops()]
# Trips, monotone low (wheel draws), aces, a suited run, a paired board, two of a suit, and
# canonical flops spread over the whole list.
FLOPS = [(0, 1, 2), (0, 4, 12), (48, 49, 50), (8, 12, 16), (20, 21, 44), (3, 20, 42)]
FLOPS += CANONICAL[250::500]


@pytest.mark.parametrize("flop", FLOPS)
def test_both_games_count_as_the_numpy_ranking(flop: tuple[int, int, int]) -> None:
    ch, thp = flop_all(flop)
    ranked_ch, ranked_thp = ranked_casino_holdem_flop_all(flop), ranked_thp_flop_all(flop)
    assert np.array_equal(ch.remaining, ranked_ch.remaining)
    for name in ("no_qualify", "wins", "ties", "losses"):
        assert np.array_equal(getattr(ch, name), getattr(ranked_ch, name)), name
    for name in ("wins", "losses"):
        assert np.array_equal(getattr(thp, name), getattr(ranked_thp, name)), name
    assert ch.wins.dtype == ranked_ch.wins.dtype == thp.wins.dtype == np.int64


def test_one_game_alone_counts_the_same_and_leaves_the_other_empty() -> None:
    flop = FLOPS[4]
    both_ch, both_thp = flop_all(flop)
    ch, no_thp = flop_all(flop, thp=False)
    no_ch, thp = flop_all(flop, ch=False)
    assert np.array_equal(ch.wins, both_ch.wins) and np.array_equal(ch.losses, both_ch.losses)
    assert np.array_equal(thp.wins, both_thp.wins)
    assert not no_thp.wins.any() and not no_ch.no_qualify.any() and not no_ch.losses.any()


@pytest.mark.parametrize("flop", [(0, 1, 2), (0, 4, 8), (17, 30, 51)])
def test_strengths_are_the_evaluators(flop: tuple[int, int, int]) -> None:
    remaining = np.array(sorted(set(range(52)) - set(flop)), dtype=np.uint8)
    hands = np.empty((len(quads(49)), 7), dtype=np.uint8)
    hands[:, :3] = flop
    hands[:, 3:] = remaining[quads(49)]
    assert np.array_equal(flop_strengths(flop), evaluate_batch(hands))


def test_strengths_over_a_smaller_unseen_set_are_the_evaluators() -> None:
    flop = (5, 22, 47)
    seen = {*flop, 0, 13, 30, 51, 8, 9}  # the flop and three boxes' hole cards
    unseen = np.array(sorted(set(range(52)) - seen), dtype=np.uint8)
    four = quads(len(unseen))
    hands = np.empty((len(four), 7), dtype=np.uint8)
    hands[:, :3] = flop
    hands[:, 3:] = unseen[four]
    assert np.array_equal(flop_strengths(flop, unseen), evaluate_batch(hands))
