"""Stored PAR data: the published figures, the self-checks, and a full recomputation (slow)."""

from __future__ import annotations

import json
import multiprocessing
from fractions import Fraction

import numpy as np
import pytest

from holdem.bets import Action
from holdem.odds import sidebets
from holdem.odds.combos import canonical_flops, class_size, hole_classes
from holdem.odds.par import (
    ParDataError,
    compute_par,
    dump_par,
    load_par,
    par_counts,
    parse_par,
    texas_holdem_plus_preflop,
)
from holdem.odds.par import _fan_out as fan_out
from holdem.odds.sheet import ParSheet, percent
from holdem.paytable import Game, PayTable, Spot, load_paytable, paytable_ids

TABLES = [load_paytable(i) for i in paytable_ids()]


@pytest.mark.parametrize("table", TABLES, ids=[t.id for t in TABLES])
def test_stored_par_is_for_this_pay_table_content(table: PayTable) -> None:
    sheet = load_par(table)
    assert sheet.content_hash == table.content_hash
    assert (sheet.paytable_id, sheet.version) == (table.id, table.version)


def test_casino_holdem_classic_reproduces_the_published_97_84() -> None:
    sheet = load_par(load_paytable("casino-holdem/classic"))
    assert percent(sheet.base.rtp(), 2) == "97.84%"


def test_aa_bonus_reproduces_the_published_93_74() -> None:
    table = load_paytable("casino-holdem/classic")
    every_hand = load_par(table).side_bet(Spot.AA_BONUS, sidebets.EVERY_HAND)
    assert percent(every_hand.rtp(), 2) == "93.74%"
    # The enumeration over every (hole, flop) agrees with the closed form exactly.
    assert every_hand.rtp() == sidebets.aa_bonus_sheet(table).rtp()


@pytest.mark.parametrize("table", TABLES, ids=[t.id for t in TABLES])
def test_self_checks(table: PayTable) -> None:
    sheet = load_par(table)
    for bet in (sheet.base, *sheet.side_bets):
        assert sum(bet.probability(line) for line in bet.lines) == 1
        assert sum(line.count for line in bet.lines) == bet.denominator
    # The strategy's EV, from each decision's best EV, equals the outcome table's mean.
    assert sheet.strategy_ev == sheet.base.ev()
    for decision in sheet.decisions:
        assert sum(decision.counts.values()) == decision.reached <= decision.total
    if table.game is Game.CASINO_HOLDEM:
        assert sheet.base.denominator == 25_989_600 * 1_070_190
        for side in sheet.side_bets:
            closed = (
                sidebets.aa_bonus_sheet(table)
                if side.name == Spot.AA_BONUS
                else sidebets.jackpot_sheet(table)
            )
            if side.basis == sidebets.EVERY_HAND:
                meter = Fraction(12345)
                assert side.rtp(meter) == closed.rtp(meter)
            else:  # a fold forfeits the side bet: never more than on every hand
                assert side.rtp() <= closed.rtp()


def test_thp_preflop_evs_give_the_strategy_ev() -> None:
    """Mean over the 1,326 hole pairs of max(EV(call), -1) is the game's EV."""
    table = load_paytable("texas-holdem-plus/standard")
    sheet = load_par(table)
    assert set(sheet.preflop_ev) == set(hole_classes())
    ev = sum(class_size(c) * max(v, Fraction(-1)) for c, v in sheet.preflop_ev.items())
    assert ev / 1326 == sheet.base.ev()
    aces = texas_holdem_plus_preflop(table, "AsAd")
    assert aces.best is Action.CALL and aces.ev[Action.CALL] > 0
    assert sheet.preflop_ev["AA"] > sheet.preflop_ev["72o"]
    plus = sheet.side_bet(Spot.PLUS, sidebets.EVERY_HAND)
    assert plus.rtp() == Fraction(1208, 1326)


def test_stale_par_data_is_refused() -> None:
    table = load_paytable("casino-holdem/classic")
    raw = json.loads(dump_par(load_par(table)))
    raw["paytable"]["content_hash"] = "sha256:" + "0" * 64
    with pytest.raises(ParDataError, match="make par"):
        parse_par(json.dumps(raw), table)


def test_round_trip() -> None:
    sheet = load_par(load_paytable("casino-holdem/progressive"))
    assert ParSheet.from_json(json.loads(dump_par(sheet))) == sheet


@pytest.mark.parametrize("game", list(Game))
def test_a_partial_run_passes_its_own_self_checks(game: Game) -> None:
    """Two flops, one process: the sheet's constructor checks counts and the strategy EV."""
    tables = [t for t in TABLES if t.game is game]
    flops = list(canonical_flops()[::900])
    sheets = compute_par(tables, processes=1, flops=flops)
    for sheet in sheets:
        assert sheet.strategy_ev == sheet.base.ev()


def test_worker_processes_count_the_same_as_one_process() -> None:
    tables = [t for t in TABLES if t.game is Game.CASINO_HOLDEM]
    flops = list(canonical_flops()[::250])
    alone = par_counts(tables, processes=1, flops=flops)
    shared = par_counts(tables, processes=2, flops=flops)
    assert all(np.array_equal(a, b) for a, b in zip(alone, shared, strict=True))
    assert multiprocessing.active_children() == []


def _square(n: int) -> np.ndarray:
    if n == 13:
        raise ValueError("unlucky")
    return np.array([n * n])


def test_a_worker_error_reaches_the_caller_and_no_worker_is_left() -> None:
    with pytest.raises(ValueError, match="unlucky"):
        list(fan_out(_square, range(20), 2))
    assert multiprocessing.active_children() == []


def test_stopping_early_kills_the_workers() -> None:
    results = fan_out(_square, range(1_000), 2, chunk=1)
    first = [int(next(results)[0]) for _ in range(3)]
    assert all(int(n**0.5) ** 2 == n for n in first), first
    results.close()
    assert multiprocessing.active_children() == []
    assert sorted(int(r[0]) for r in fan_out(_square, range(12), 3)) == [n * n for n in range(12)]


@pytest.mark.slow
def test_full_recomputation_matches_the_stored_data() -> None:
    for game in Game:
        tables = [t for t in TABLES if t.game is game]
        for table, sheet in zip(tables, compute_par(tables), strict=True):
            assert dump_par(sheet) == dump_par(load_par(table)), table.id
