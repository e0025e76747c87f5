"""The PAR engine (every hole of a flop at once) against the single-situation code."""

from __future__ import annotations

import numpy as np
import pytest

from holdem.odds.combos import canonical_flops, hole_classes, pairs
from holdem.odds.engine import casino_holdem_flop_all, thp_flop_all
from holdem.odds.situation import casino_holdem_flop, thp_flop_counts
from holdem.paytable import load_paytable

CLASSIC = load_paytable("casino-holdem/classic")
FLOPS = [(3, 20, 42), (0, 1, 2), (48, 49, 50), (8, 12, 16)]  # mixed, trips, aces, suited run


def _sample(seed: int) -> list[int]:
    return sorted(np.random.default_rng(seed).choice(1176, 4, replace=False).tolist())


@pytest.mark.parametrize("flop", FLOPS)
def test_casino_holdem_engine_matches_situations(flop: tuple[int, int, int]) -> None:
    every = casino_holdem_flop_all(flop)
    holes = every.remaining[pairs(49)]
    for k in _sample(sum(flop)):
        odds = casino_holdem_flop(CLASSIC, holes[k].tolist(), flop)
        assert tuple(every.no_qualify[k]) == odds.dealer_does_not_qualify
        assert tuple(every.wins[k]) == odds.wins
        assert (every.ties[k], every.losses[k]) == (odds.ties, odds.losses)
    totals = every.no_qualify.sum(1) + every.wins.sum(1) + every.ties + every.losses
    assert (totals == 1_070_190).all()


@pytest.mark.parametrize("flop", FLOPS[:2])
def test_thp_engine_matches_situations(flop: tuple[int, int, int]) -> None:
    every = thp_flop_all(flop)
    holes = every.remaining[pairs(49)]
    for k in _sample(sum(flop) + 1):
        wins, _ties, losses, _ = thp_flop_counts(tuple(holes[k].tolist()), flop)
        assert (every.wins[k] == wins).all()
        assert (every.losses[k] == losses).all()
    assert (every.wins.sum(2) + every.losses <= 45_540).all()


def test_canonical_flops_cover_every_flop_once() -> None:
    flops = canonical_flops()
    assert len(flops) == 1755
    assert sum(w for _, w in flops) == 22_100
    assert len(hole_classes()) == 169
