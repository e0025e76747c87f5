"""The stored deal constants: recomputed by full enumeration (slow), and checked on their own."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import lcm

import numpy as np
import pytest

from holdem import load_paytable, paytable_ids
from holdem.evaluator import evaluate
from holdem.integrity.constants import (
    THP_FLOP_COMPLETIONS,
    aa_bonus_net,
    compute_constants,
    disjoint_moment,
    jackpot_net,
    load_constants,
    plus_net,
)
from holdem.odds.combos import canonical_flops, pairs
from holdem.odds.engine import casino_holdem_flop_all, thp_flop_all
from holdem.odds.par import load_par
from holdem.odds.situation import (
    CH_COMPLETIONS,
    ante_multipliers,
    ch_call_numerator,
    thp_flop_numerators,
)
from holdem.paytable import Game


@pytest.mark.slow
@pytest.mark.parametrize("game", list(Game))
def test_stored_deal_constants_are_what_full_enumeration_gives(game: Game) -> None:
    tables = [load_paytable(i) for i in paytable_ids() if load_paytable(i).game is game]
    for table, computed in zip(tables, compute_constants(tables), strict=True):
        assert computed == load_constants(table)


def test_the_preflop_stage_agrees_with_the_par_sheet() -> None:
    """Texas Hold'em Plus: per hole class, E[best flop value^2] >= (its PAR preflop EV)^2."""
    table = load_paytable("texas-holdem-plus/standard")
    constants = load_constants(table)
    par = load_par(table)
    assert constants.preflop_second.keys() == par.preflop_ev.keys()
    for name, ev in par.preflop_ev.items():
        assert constants.preflop_second[name] >= ev * ev, name


def test_the_deal_value_is_far_less_variable_than_the_return() -> None:
    """Casino Hold'em: about 1.1 antes^2 for the deal value against 6.8 for the return."""
    table = load_paytable("casino-holdem/classic")
    deal = load_constants(table).covariance[0][0]
    whole = load_par(table).base.variance()
    assert 0.9 < float(deal) < 1.3
    assert 6 < float(whole) < 7.5


@pytest.mark.parametrize("paytable", ["casino-holdem/classic", "casino-holdem/royal-20"])
def test_the_mean_deal_value_is_the_par_sheets_best_play_ev(paytable: str) -> None:
    """E[max(call EV, -1)] over every deal is the PAR sheet's best-strategy EV, exactly."""
    table = load_paytable(paytable)
    assert load_constants(table).mean[0] == load_par(table).strategy_ev


def test_side_bet_means_are_their_every_hand_ev() -> None:
    table = load_paytable("casino-holdem/progressive")
    constants = load_constants(table)
    par = load_par(table)
    aa = par.side_bet("aa_bonus", "every hand")
    jackpot = par.side_bet("jackpot", "every hand")
    assert constants.mean[1] == aa.ev()
    assert par.jackpot_meter is not None
    assert constants.mean[2] == jackpot.ev(par.jackpot_meter)
    assert constants.covariance[1][1] == aa.variance()
    assert constants.covariance[2][2] == jackpot.variance(par.jackpot_meter)


def test_the_texas_holdem_plus_mean_is_the_par_sheets_preflop_evs() -> None:
    """The best flop value averages, class by class, to the PAR sheet's preflop call EV."""
    from fractions import Fraction

    from holdem.odds.combos import class_size, hole_classes

    table = load_paytable("texas-holdem-plus/standard")
    par = load_par(table)
    mean = sum(
        (Fraction(class_size(name), 1326) * par.preflop_ev[name] for name in hole_classes()),
        Fraction(0),
    )
    assert load_constants(table).mean[0] == mean


def _disjoint_holes() -> np.ndarray:
    """``(1176, 1176)`` object matrix: 1 where two holes of one flop share no card."""
    holes = pairs(49)
    cards = np.eye(49, dtype=np.int64)
    incidence = cards[holes[:, 0]] + cards[holes[:, 1]]
    return (incidence @ incidence.T == 0).astype(np.int64).astype(object)


def test_the_disjoint_pair_moment_sums_every_pair_of_disjoint_holes() -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(-(10**9), 10**9, size=(1176, 3), dtype=np.int64)  # products pass 2**63
    exact = values.astype(object)
    assert (disjoint_moment(values) == exact.T @ (_disjoint_holes() @ exact)).all()


def _cross_by_every_pair(vectors: Sequence[Sequence[Fraction]]) -> list[list[Fraction]]:
    """E[v_h v_g^T] - mean mean^T over the ordered pairs of disjoint holes, pair by pair."""
    scale = lcm(*(x.denominator for v in vectors for x in v))
    ints = np.array([[int(x * scale) for x in v] for v in vectors], dtype=object)
    moment = ints.T @ (_disjoint_holes() @ ints)
    count = len(vectors) * 1081
    n = len(vectors[0])
    mean = [sum((v[i] for v in vectors), Fraction(0)) / len(vectors) for i in range(n)]
    return [
        [Fraction(int(moment[i][j]), count * scale * scale) - mean[i] * mean[j] for j in range(n)]
        for i in range(n)
    ]


def _holes_of(flop: tuple[int, int, int]) -> list[tuple[int, int]]:
    rest = [c for c in range(52) if c not in flop]
    return [(rest[a], rest[b]) for a, b in pairs(49).tolist()]


def test_two_casino_holdem_boxes_on_one_flop_by_every_pair() -> None:
    """The cross-covariance of ante, AA bonus and jackpot values of two boxes on one flop."""
    table = load_paytable("casino-holdem/progressive")
    flop = canonical_flops()[900][0]
    [constants] = compute_constants([table], flops=[(flop, 1)])
    counts = casino_holdem_flop_all(flop)
    ev = ch_call_numerator(counts.no_qualify, counts.wins, counts.losses, ante_multipliers(table))
    vectors = []
    for (a, b), call in zip(_holes_of(flop), ev.tolist(), strict=True):
        five = evaluate([a, b, *flop])
        ante = max(Fraction(call, CH_COMPLETIONS), Fraction(-1))
        vectors.append((ante, Fraction(aa_bonus_net(table, five)), jackpot_net(table, five)))
    assert [list(row) for row in constants.cross] == _cross_by_every_pair(vectors)


def test_two_texas_holdem_plus_boxes_on_one_flop_by_every_pair() -> None:
    table = load_paytable("texas-holdem-plus/standard")
    flop = canonical_flops()[400][0]
    [constants] = compute_constants([table], flops=[(flop, 1)])
    counts = thp_flop_all(flop)
    best, _, _ = thp_flop_numerators(counts.wins, counts.losses, ante_multipliers(table))
    vectors = [
        (Fraction(int(max(row)), THP_FLOP_COMPLETIONS), Fraction(plus_net(table, hole)))
        for hole, row in zip(_holes_of(flop), best.tolist(), strict=True)
    ]
    assert [list(row) for row in constants.cross] == _cross_by_every_pair(vectors)


@pytest.mark.parametrize(
    ("paytable", "low", "high"),
    [("casino-holdem/classic", -0.014, -0.012), ("texas-holdem-plus/standard", -0.036, -0.034)],
)
def test_two_boxes_ante_values_correlate_by_card_removal(
    paytable: str, low: float, high: float
) -> None:
    """Over every flop, the stored ante cross-covariance is the correlation the flop tables
    give in floating point (``bench.integrity boxes``: -1.28% and -3.48%)."""
    constants = load_constants(load_paytable(paytable))
    assert low < constants.cross[0][0] / constants.covariance[0][0] < high
