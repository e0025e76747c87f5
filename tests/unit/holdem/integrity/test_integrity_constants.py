"""The stored deal constants: recomputed by full enumeration (slow), and checked on their own."""

from __future__ import annotations

import pytest

from holdem import load_paytable, paytable_ids
from holdem.integrity.constants import compute_constants, load_constants
from holdem.odds.par import load_par
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
