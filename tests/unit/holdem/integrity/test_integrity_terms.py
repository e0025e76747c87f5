"""Integrity terms of known rounds against figures worked out by hand from the exact odds.

The hand figures use the single-situation odds (:mod:`holdem.odds.situation`), not the flop
tables the calculator reads, so suit renaming, row look-ups and the martingale bookkeeping
are all checked against an independent path.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from holdem import Action, Deal, Decision, Spot, Stage, Wager, load_paytable, settle
from holdem.cards import parse_cards
from holdem.integrity.constants import load_constants
from holdem.integrity.terms import Calculator, Terms
from holdem.odds import casino_holdem_flop, texas_holdem_plus_preflop, texas_holdem_plus_turn
from holdem.odds.combos import hole_class
from holdem.odds.situation import ante_multipliers

CLASSIC = load_paytable("casino-holdem/classic")
STANDARD = load_paytable("texas-holdem-plus/standard")


def _deal(hole: str, dealer: str, board: str) -> Deal:
    h, d = parse_cards(hole), parse_cards(dealer)
    return Deal({"main": (h[0], h[1])}, (d[0], d[1]), tuple(parse_cards(board)))


def _quadratic(weights: list[int], covariance: tuple[tuple[Fraction, ...], ...]) -> Fraction:
    n = len(weights)
    return sum(
        (weights[i] * weights[j] * covariance[i][j] for i in range(n) for j in range(n)),
        Fraction(0),
    )


def test_a_casino_holdem_shared_hand_by_hand() -> None:
    deal = _deal("AsKd", "5c5d", "Qh7c2s3d9h")
    wagers = [
        Wager("b1", "p1", "main", Spot.ANTE, 100),
        Wager("b2", "p1", "main", Spot.AA_BONUS, 100),
        Wager("b3", "p2", "main", Spot.ANTE, 200),
        Wager("b4", "p3", "main", Spot.ANTE, 500),
    ]
    decisions = [
        Decision("b1", Stage.FLOP, Action.CALL, "b5", 200),
        Decision("b3", Stage.FLOP, Action.FOLD),
        Decision("b4", Stage.FLOP, Action.CALL, "b6", 1000),
    ]
    results = settle(CLASSIC, deal, wagers, decisions).results
    got = Calculator(CLASSIC).round(deal, results, decisions)

    odds = casino_holdem_flop(CLASSIC, "AsKd", "Qh7c2s")
    m = ante_multipliers(CLASSIC)
    n = odds.completions
    second = Fraction(
        sum(c * m[k] ** 2 for k, c in enumerate(odds.dealer_does_not_qualify))
        + sum(c * (m[k] + 2) ** 2 for k, c in enumerate(odds.wins))
        + 9 * odds.losses,
        n,
    )
    ev = odds.ev_call
    callers = 100 + 500
    assert got.play_actual == sum(r.returned for r in results)
    # Callers: 3 antes staked plus the call's EV; the AA bonus on A-K-Q-7-2 loses; a fold
    # returns nothing.
    assert got.play_expected == pytest.approx(float(callers * (3 + ev)), rel=1e-12)
    assert got.play_variance == pytest.approx(float(callers**2 * (second - ev**2)), rel=1e-9)

    constants = load_constants(CLASSIC)
    antes, aa = 800, 100
    deal_value = antes * (1 + max(ev, Fraction(-1))) + aa * (1 + -1)
    mean = antes * (1 + constants.mean[0]) + aa * (1 + constants.mean[1])
    assert got.deal_value == pytest.approx(float(deal_value), rel=1e-12)
    assert got.deal_mean == pytest.approx(float(mean), rel=1e-12)
    assert got.deal_variance == pytest.approx(
        float(_quadratic([antes, aa], constants.covariance)), rel=1e-12
    )
    assert got.rounds == 1


def _turn_values(
    hole: str, flop: str, turn: str, flop_bet: bool
) -> tuple[Fraction, dict[Action, Fraction]]:
    odds = texas_holdem_plus_turn(STANDARD, hole, flop, turn, flop_bet=flop_bet)
    return max(odds.ev.values()), dict(odds.ev)


def test_a_texas_holdem_plus_shared_hand_by_hand() -> None:
    hole, flop, turn = "AhJh", "Th7h2c", "Kd"
    deal = _deal(hole, "9s9c", flop + turn + "4s")
    wagers = [
        Wager("b1", "p1", "main", Spot.ANTE, 100),
        Wager("b2", "p1", "main", Spot.PLUS, 200),
        Wager("b3", "p2", "main", Spot.ANTE, 300),
        Wager("b4", "p3", "main", Spot.ANTE, 400),
    ]
    decisions = [
        Decision("b1", Stage.PREFLOP, Action.CALL, "b5", 200),
        Decision("b1", Stage.FLOP, Action.BET, "b6", 100),
        Decision("b1", Stage.TURN, Action.BET, "b7", 100),
        Decision("b3", Stage.PREFLOP, Action.CALL, "b8", 600),
        Decision("b3", Stage.FLOP, Action.CHECK),
        Decision("b4", Stage.PREFLOP, Action.FOLD),
    ]
    results = settle(STANDARD, deal, wagers, decisions).results
    got = Calculator(STANDARD).round(deal, results, decisions)

    q0 = texas_holdem_plus_preflop(STANDARD, hole).ev[Action.CALL]
    from holdem.odds import texas_holdem_plus_flop

    flop_ev = texas_holdem_plus_flop(STANDARD, hole, flop).ev
    v1 = max(flop_ev.values())
    v2_bet, turn_bet = _turn_values(hole, flop, turn, True)
    v2_check, turn_check = _turn_values(hole, flop, turn, False)
    # p2 timed out at the turn: a check.
    p1 = 100 * (5 + q0 - (v1 - flop_ev[Action.BET]) - (v2_bet - turn_bet[Action.BET]))
    p2 = 300 * (3 + q0 - (v1 - flop_ev[Action.CHECK]) - (v2_check - turn_check[Action.CHECK]))
    plus = 200 * (1 + 20)  # ace-jack suited pays 20 to 1
    assert got.play_actual == sum(r.returned for r in results)
    assert got.play_expected == pytest.approx(float(p1 + p2 + plus), rel=1e-12)

    # Variance: preflop stage (stored second moment), flop stage over the 47 turns, turn
    # stage over the showdowns.
    constants = load_constants(STANDARD)
    name = hole_class(*parse_cards(hole))
    preflop = 400**2 * (constants.preflop_second[name] - q0**2)
    seen = set(parse_cards(hole + flop))
    ys = []
    for card in sorted(set(range(52)) - seen):
        after_bet = max(texas_holdem_plus_turn(STANDARD, hole, flop, [card], True).ev.values())
        after_check = max(texas_holdem_plus_turn(STANDARD, hole, flop, [card], False).ev.values())
        ys.append(100 * after_bet + 300 * after_check)
    mean_y = sum(ys, Fraction(0)) / len(ys)
    flop_stage = sum(((y - mean_y) ** 2 for y in ys), Fraction(0)) / len(ys)
    odds = texas_holdem_plus_turn(STANDARD, hole, flop, turn, True)
    m = ante_multipliers(STANDARD)
    outcomes = [(c, 100 * (4 + m[k]) + 300 * (2 + m[k])) for k, c in enumerate(odds.wins)]
    outcomes += [(odds.ties, 0), (odds.losses, -100 * 5 - 300 * 3)]
    n = odds.completions
    mean_o = Fraction(sum(c * y for c, y in outcomes), n)
    turn_stage = Fraction(sum(c * (y - mean_o) ** 2 for c, y in outcomes), n)
    expected = preflop + flop_stage + turn_stage
    assert got.play_variance == pytest.approx(float(expected), rel=1e-9)

    antes = 800
    value = antes * (3 + v1) + 200 * (1 + 20)
    mean = antes * (3 + constants.mean[0]) + 200 * (1 + constants.mean[1])
    assert got.deal_value == pytest.approx(float(value), rel=1e-12)
    assert got.deal_mean == pytest.approx(float(mean), rel=1e-12)
    assert got.deal_variance == pytest.approx(
        float(_quadratic([antes, 200], constants.covariance)), rel=1e-12
    )


def test_terms_add_up_and_score() -> None:
    a = Terms(1, 10.0, 8.0, 4.0, 7, 5.0, 1.0)
    b = Terms(2, 1.0, 1.0, 5.0, 3, 4.0, 8.0)
    total = a + b
    assert total == Terms(3, 11.0, 9.0, 9.0, 10, 9.0, 9.0)
    assert total.deal_z == pytest.approx(2 / 3)
    assert total.play_z == pytest.approx(1 / 3)
    assert Terms().play_z == 0.0


def test_deal_constants_are_a_covariance() -> None:
    for table in (CLASSIC, STANDARD, load_paytable("casino-holdem/progressive")):
        c = load_constants(table)
        matrix = np.array([[float(x) for x in row] for row in c.covariance])
        assert np.all(np.linalg.eigvalsh(matrix) > 0)


def _random_round(
    game_table: object, flop: tuple[int, int, int], rng: np.random.Generator, players: int
) -> tuple[Deal, list[Wager], list[Decision]]:
    rest = [c for c in range(52) if c not in flop]
    cards = rng.choice(rest, 6, replace=False).tolist()
    deal = Deal({"main": (cards[0], cards[1])}, (cards[2], cards[3]), (*flop, cards[4], cards[5]))
    wagers, decisions = [], []
    for i in range(players):
        ante = int(rng.choice([100, 500, 2500]))
        wagers.append(Wager(f"a{i}", f"p{i}", "main", Spot.ANTE, ante))
        if game_table is CLASSIC:
            if rng.random() < 0.7:
                decisions.append(Decision(f"a{i}", Stage.FLOP, Action.CALL, f"c{i}", 2 * ante))
            continue
        if rng.random() < 0.2:
            continue  # no call before the flop: a fold
        decisions.append(Decision(f"a{i}", Stage.PREFLOP, Action.CALL, f"c{i}", 2 * ante))
        for stage in (Stage.FLOP, Stage.TURN):
            action = [Action.BET, Action.CHECK, Action.FOLD][int(rng.integers(3))]
            bet = f"{stage}{i}" if action is Action.BET else None
            decisions.append(Decision(f"a{i}", stage, action, bet, ante if bet else None))
            if action is Action.FOLD:
                break
    return deal, wagers, decisions


@pytest.mark.parametrize("table", [CLASSIC, STANDARD], ids=lambda t: t.id)
def test_with_no_fault_the_play_residual_is_standard(table: object) -> None:
    """On one flop, many random rounds: the residual's z-score and scale are those of N(0, 1).

    The play residual has mean zero and the stated variance given the cards seen at each
    decision, so fixing the flop changes nothing; players decide at random.
    """
    rng = np.random.default_rng(7)
    calculator = Calculator(table)  # type: ignore[arg-type]
    flop = (3, 20, 42)
    residuals, variances = [], []
    for _ in range(1500):
        deal, wagers, decisions = _random_round(table, flop, rng, int(rng.integers(1, 4)))
        results = settle(table, deal, wagers, decisions).results  # type: ignore[arg-type]
        terms = calculator.round(deal, results, decisions)
        residuals.append(terms.play_actual - terms.play_expected)
        variances.append(terms.play_variance)
    z = sum(residuals) / np.sqrt(sum(variances))
    scale = sum(r * r for r in residuals) / sum(variances)
    assert abs(z) < 4
    assert 0.8 < scale < 1.2
