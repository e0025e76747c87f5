"""Integrity terms of known rounds against figures worked out by hand from the exact odds.

The hand figures use the single-situation odds (:mod:`holdem.odds.situation`), not the flop
tables the calculator reads, so suit renaming, row look-ups and the martingale bookkeeping
are all checked against an independent path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from holdem import Action, Deal, Decision, PayTable, Spot, Stage, Wager, load_paytable, settle
from holdem.cards import parse_cards
from holdem.integrity.constants import compute_constants, load_constants
from holdem.integrity.terms import Calculator, Terms
from holdem.odds import (
    casino_holdem_flop,
    texas_holdem_plus_flop,
    texas_holdem_plus_preflop,
    texas_holdem_plus_turn,
)
from holdem.odds.combos import hole_class
from holdem.odds.situation import ante_multipliers

CLASSIC = load_paytable("casino-holdem/classic")
STANDARD = load_paytable("texas-holdem-plus/standard")


def _deal(hole: str, dealer: str, board: str) -> Deal:
    h, d = parse_cards(hole), parse_cards(dealer)
    return Deal({"main": (h[0], h[1])}, (d[0], d[1]), tuple(parse_cards(board)))


def _quadratic(weights: list[int], covariance: tuple[tuple[Fraction, ...], ...]) -> Fraction:
    return _bilinear(weights, weights, covariance)


def _bilinear(u: list[int], v: list[int], matrix: tuple[tuple[Fraction, ...], ...]) -> Fraction:
    n = len(u)
    return sum((u[i] * v[j] * matrix[i][j] for i in range(n) for j in range(n)), Fraction(0))


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


def _thp_box_by_hand(
    hole: str, flop: str, turn: str, players: list[tuple[int, Action, Action]]
) -> tuple[Fraction, Fraction]:
    """A box's expected return and exact variance from the single-situation odds, every
    player calling before the flop, then ``(ante, flop action, turn action)``, no folds."""
    q0 = texas_holdem_plus_preflop(STANDARD, hole).ev[Action.CALL]
    flop_ev = texas_holdem_plus_flop(STANDARD, hole, flop).ev
    v1 = max(flop_ev.values())
    at_turn = {fb: texas_holdem_plus_turn(STANDARD, hole, flop, turn, fb) for fb in (False, True)}
    expected = Fraction(0)
    for ante, flop_action, turn_action in players:
        turn_ev = at_turn[flop_action is Action.BET].ev
        staked = 3 + (flop_action is Action.BET) + (turn_action is Action.BET)
        expected += ante * (
            staked
            + q0
            - (v1 - flop_ev[flop_action])
            - (max(turn_ev.values()) - turn_ev[turn_action])
        )
    callers = sum(ante for ante, _, _ in players)
    name = hole_class(*parse_cards(hole))
    preflop = callers**2 * (load_constants(STANDARD).preflop_second[name] - q0**2)
    seen = set(parse_cards(hole + flop))
    ys = []
    for card in sorted(set(range(52)) - seen):
        best = {
            fb: max(texas_holdem_plus_turn(STANDARD, hole, flop, [card], fb).ev.values())
            for fb in (False, True)
        }
        ys.append(sum(ante * best[fa is Action.BET] for ante, fa, _ in players))
    flop_stage = _population_variance([(1, y) for y in ys])
    m = ante_multipliers(STANDARD)
    odds = at_turn[False]
    played = [(ante, 2 + (fa is Action.BET) + (ta is Action.BET)) for ante, fa, ta in players]
    outcomes = [(c, sum(a * (p + m[k]) for a, p in played)) for k, c in enumerate(odds.wins)]
    outcomes += [(odds.ties, 0), (odds.losses, -sum(a * (1 + p) for a, p in played))]
    return expected, preflop + flop_stage + _population_variance(outcomes)


def _population_variance(weighted: Sequence[tuple[int, Fraction | int]]) -> Fraction:
    n = sum(c for c, _ in weighted)
    mean = Fraction(sum(c * y for c, y in weighted), n)
    return Fraction(sum(c * (y - mean) ** 2 for c, y in weighted), n)


def test_texas_holdem_plus_boxes_of_one_round_by_hand() -> None:
    """Three boxes on one board: the boxes' exact variances, plus every pair's product of
    residuals for their covariance; the deal variance with every pair's cross-covariance."""
    flop, turn = "Th7h2c", "Kd"
    boxes = {"1": "AhJh", "2": "8d8s", "3": "5c6c"}
    deal = Deal(
        {box: tuple(parse_cards(hole)) for box, hole in boxes.items()},  # type: ignore[misc]
        tuple(parse_cards("QsJd")),  # type: ignore[arg-type]
        tuple(parse_cards(flop + turn + "4s")),
    )
    players = {  # (ante, flop action, turn action); box 3 is a shared hand
        "1": [(100, Action.BET, Action.BET)],
        "2": [(300, Action.CHECK, Action.CHECK)],
        "3": [(200, Action.BET, Action.CHECK), (100, Action.CHECK, Action.BET)],
    }
    wagers, decisions = [], []
    for box, seated in players.items():
        for i, (ante, flop_action, turn_action) in enumerate(seated):
            bet = f"{box}.{i}"
            wagers.append(Wager(bet, f"p{bet}", box, Spot.ANTE, ante))
            decisions.append(Decision(bet, Stage.PREFLOP, Action.CALL, f"{bet}c", 2 * ante))
            for stage, action in ((Stage.FLOP, flop_action), (Stage.TURN, turn_action)):
                wager = f"{bet}{stage}" if action is Action.BET else None
                decisions.append(Decision(bet, stage, action, wager, ante if wager else None))
    results = settle(STANDARD, deal, wagers, decisions).results
    got = Calculator(STANDARD).round(deal, results, decisions)

    residuals, variances = [], []
    for box, seated in players.items():
        expected, variance = _thp_box_by_hand(boxes[box], flop, turn, seated)
        returned = sum(r.returned for r in results if r.box == box)
        residuals.append(returned - expected)
        variances.append(variance)
    t1, t2, t3 = residuals
    covariance = 2 * (t1 * t2 + t1 * t3 + t2 * t3)
    assert got.play_actual - got.play_expected == pytest.approx(float(t1 + t2 + t3), rel=1e-9)
    assert got.play_variance == pytest.approx(float(sum(variances)), rel=1e-9)
    assert got.play_covariance == pytest.approx(float(covariance), rel=1e-9)
    stated = sum(variances) + covariance
    assert got.play_z == pytest.approx(float(t1 + t2 + t3) / float(stated) ** 0.5, rel=1e-9)
    constants = load_constants(STANDARD)
    stakes = [[sum(ante for ante, _, _ in seated), 0] for seated in players.values()]
    alone = sum(_quadratic(w, constants.covariance) for w in stakes)
    pairs = sum(
        _bilinear(w, v, constants.cross) for i, w in enumerate(stakes) for v in stakes[i + 1 :]
    )
    assert got.deal_variance == pytest.approx(float(alone + 2 * pairs), rel=1e-12)
    assert pairs < 0, "card removal: two boxes' ante values on one flop move apart"


def test_terms_add_up_and_score() -> None:
    a = Terms(1, 10.0, 8.0, 4.0, 7, 5.0, 1.0, 9.0)
    b = Terms(2, 1.0, 1.0, 5.0, 3, 4.0, 8.0, -2.0)
    total = a + b
    assert total == Terms(3, 11.0, 9.0, 9.0, 10, 9.0, 9.0, 7.0)
    assert total.deal_z == pytest.approx(2 / 3)
    assert total.play_z == pytest.approx(1 / 4)  # over the variance and the covariance
    assert Terms().play_z == 0.0
    assert Terms(play_actual=5, play_variance=3.0, play_covariance=-3.0).play_z == 0.0
    assert Terms(play_actual=5, play_variance=3.0, play_covariance=-4.0).play_z == 0.0


def test_deal_constants_are_a_covariance() -> None:
    for table in (CLASSIC, STANDARD, load_paytable("casino-holdem/progressive")):
        c = load_constants(table)
        matrix = np.array([[float(x) for x in row] for row in c.covariance])
        assert np.all(np.linalg.eigvalsh(matrix) > 0)


def _random_round(
    game_table: object,
    flop: tuple[int, int, int],
    rng: np.random.Generator,
    players: int,
    boxes: int = 1,
    antes: Sequence[int] = (100, 500, 2500),
) -> tuple[Deal, list[Wager], list[Decision]]:
    """A round on ``flop``: ``players`` on each box, each deciding at random."""
    rest = [c for c in range(52) if c not in flop]
    cards = rng.choice(rest, 2 * boxes + 4, replace=False).tolist()
    holes = {f"b{b}": (cards[2 * b], cards[2 * b + 1]) for b in range(boxes)}
    dealer, rest = cards[2 * boxes : 2 * boxes + 2], cards[2 * boxes + 2 :]
    deal = Deal(holes, (dealer[0], dealer[1]), (*flop, rest[0], rest[1]))
    wagers, decisions = [], []
    for box in holes:
        for i in range(players):
            ante_id = f"{box}a{i}"
            ante = int(rng.choice(antes))
            wagers.append(Wager(ante_id, f"{box}p{i}", box, Spot.ANTE, ante))
            decisions += _random_decisions(game_table, ante_id, ante, rng)
    return deal, wagers, decisions


def _random_decisions(
    game_table: object, ante_id: str, ante: int, rng: np.random.Generator
) -> list[Decision]:
    call = Decision(ante_id, Stage.FLOP, Action.CALL, f"{ante_id}c", 2 * ante)
    if game_table is CLASSIC:
        return [call] if rng.random() < 0.7 else []
    if rng.random() < 0.2:
        return []  # no call before the flop: a fold
    decisions = [replace(call, stage=Stage.PREFLOP)]
    for stage in (Stage.FLOP, Stage.TURN):
        action = [Action.BET, Action.CHECK, Action.FOLD][int(rng.integers(3))]
        bet = f"{ante_id}{stage}" if action is Action.BET else None
        decisions.append(Decision(ante_id, stage, action, bet, ante if bet else None))
        if action is Action.FOLD:
            break
    return decisions


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


def test_with_no_fault_texas_holdem_plus_boxes_of_one_round_are_standard() -> None:
    """Rounds of 2 to 7 boxes, shared hands of 1 to 3 players deciding at random: the play
    residual's z-score and scale are those of N(0, 1) over the boxes' exact variances plus
    their covariance estimated from the residuals.

    The boxes' residuals are correlated through the board and the dealer: over their
    variances alone the scale is about 1.4, over their stages combined as if perfectly
    correlated about 0.5. On a few flops only (a flop's table takes a fraction of a second),
    drawn at random.
    """
    rng = np.random.default_rng(23)
    calculator = Calculator(STANDARD)
    deck = np.arange(52)
    flops = [tuple(sorted(rng.choice(deck, 3, replace=False).tolist())) for _ in range(16)]
    residuals, variances, covariances = [], [], []
    for _ in range(1200):
        flop = flops[int(rng.integers(len(flops)))]
        boxes, players = int(rng.integers(2, 8)), int(rng.integers(1, 4))
        deal, wagers, decisions = _random_round(STANDARD, flop, rng, players, boxes)
        results = settle(STANDARD, deal, wagers, decisions).results
        terms = calculator.round(deal, results, decisions)
        residuals.append(terms.play_actual - terms.play_expected)
        variances.append(terms.play_variance)
        covariances.append(terms.play_covariance)
    stated = sum(variances) + sum(covariances)
    z = sum(residuals) / np.sqrt(stated)
    scale = sum(r * r for r in residuals) / stated
    assert abs(z) < 4
    assert 0.85 < scale < 1.15
    assert sum(covariances) > 0.1 * sum(variances), "the boxes' covariance counts"


@pytest.mark.parametrize(
    ("table", "rounds"),
    [
        (CLASSIC, 600),
        pytest.param(CLASSIC, 1500, marks=pytest.mark.slow),
        (STANDARD, 1500),
    ],
    ids=lambda p: p.id if isinstance(p, PayTable) else str(p),
)
def test_with_no_fault_the_deal_value_of_many_boxes_is_standard(
    table: PayTable, rounds: int
) -> None:
    """Rounds of 5 to 7 equal boxes dealt from a few flops, against deal constants computed
    over those flops: the deal value's z-score and scale are those of N(0, 1).

    Card removal correlates the boxes' values on one flop (Texas Hold'em Plus: -3.6% a pair
    on these flops): with the boxes' own variances alone the scale would be about 0.8.
    A Casino Hold'em round costs ten times a Texas Hold'em Plus one (the calls are joint),
    so its 1,500-round form is in ``make test-slow``.
    """
    rng = np.random.default_rng(41)
    flops = [(3, 20, 42), (0, 17, 50), (8, 9, 33), (12, 26, 45)]
    [constants] = compute_constants([table], flops=[(flop, 1) for flop in flops])
    calculator = Calculator(table, constants)
    deviations, variances, alone = [], [], []
    for _ in range(rounds):
        flop = flops[int(rng.integers(len(flops)))]
        boxes = int(rng.integers(5, 8))
        deal, wagers, decisions = _random_round(table, flop, rng, 1, boxes, antes=(100,))
        results = settle(table, deal, wagers, decisions).results
        terms = calculator.round(deal, results, decisions)
        deviations.append(terms.deal_value - terms.deal_mean)
        variances.append(terms.deal_variance)
        alone.append(boxes * 100**2 * float(constants.covariance[0][0]))
    squares = sum(d * d for d in deviations)
    assert abs(sum(deviations) / np.sqrt(sum(variances))) < 4
    assert 0.9 < squares / sum(variances) < 1.1
    if table is STANDARD:
        assert squares / sum(alone) < 0.9, "the boxes' cross-covariance counts"
