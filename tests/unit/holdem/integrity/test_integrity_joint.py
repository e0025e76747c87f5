"""Calls on several Casino Hold'em boxes taken together, against a plain enumeration."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from holdem import Action, Deal, Decision, Spot, Stage, Wager, load_paytable, settle
from holdem.cards import parse_cards
from holdem.evaluator import evaluate_batch
from holdem.integrity.joint import ch_calls
from holdem.integrity.terms import Calculator
from holdem.odds.situation import ante_multipliers, category_of_strength, qualifying_strength

CLASSIC = load_paytable("casino-holdem/classic")


def _by_enumeration(
    flop: list[int], holes: list[tuple[int, int]], weights: list[float]
) -> tuple[float, float]:
    """Every (turn, river) and dealer pair written out, each hand evaluated on its own."""
    seen = set(flop) | {c for h in holes for c in h}
    unseen = [c for c in range(52) if c not in seen]
    rows = []
    for turn, river in combinations(unseen, 2):
        rest = [c for c in unseen if c not in (turn, river)]
        for d1, d2 in combinations(rest, 2):
            rows.append((turn, river, d1, d2))
    completions = np.array(rows, dtype=np.uint8)
    board = np.concatenate([np.broadcast_to(flop, (len(rows), 3)), completions[:, :2]], axis=1)
    dealer = evaluate_batch(np.concatenate([completions[:, 2:], board], axis=1))
    m = np.asarray(ante_multipliers(CLASSIC), dtype=np.float64)
    total = np.zeros(len(rows))
    for hole, weight in zip(holes, weights, strict=True):
        player = evaluate_batch(np.concatenate([np.broadcast_to(hole, (len(rows), 2)), board], 1))
        paid = m[category_of_strength()[player]]
        x = np.where(player > dealer, paid + 2, np.where(player == dealer, 0.0, -3.0))
        total += weight * np.where(dealer >= qualifying_strength(), x, paid)
    return float(total.mean()), float(total.var())


def test_two_boxes_together_are_the_plain_enumeration() -> None:
    flop = parse_cards("Qh7c2s")
    holes = [tuple(parse_cards("AsKd")), tuple(parse_cards("9c9d")), tuple(parse_cards("3h4h"))]
    weights = [100, 300, 0]  # the third box folded: its cards are seen all the same
    got = ch_calls(ante_multipliers(CLASSIC), flop, holes, weights)  # type: ignore[arg-type]
    want = _by_enumeration(flop, holes, weights)  # type: ignore[arg-type]
    assert got == pytest.approx(want, rel=1e-12)


def test_a_multi_box_round_takes_its_calls_together() -> None:
    deal = Deal(
        {"1": tuple(parse_cards("AsKd")), "2": tuple(parse_cards("9c9d"))},  # type: ignore[dict-item]
        tuple(parse_cards("5c5d")),  # type: ignore[arg-type]
        tuple(parse_cards("Qh7c2s3d9h")),
    )
    wagers = [Wager("a", "p1", "1", Spot.ANTE, 100), Wager("b", "p2", "2", Spot.ANTE, 300)]
    decisions = [
        Decision("a", Stage.FLOP, Action.CALL, "c", 200),
        Decision("b", Stage.FLOP, Action.CALL, "d", 600),
    ]
    results = settle(CLASSIC, deal, wagers, decisions).results
    terms = Calculator(CLASSIC).round(deal, results, decisions)
    mean, variance = ch_calls(
        ante_multipliers(CLASSIC),
        deal.board[:3],
        [deal.boxes["1"], deal.boxes["2"]],
        [100, 300],
    )
    assert terms.play_expected == pytest.approx(3 * 400 + mean, rel=1e-12)
    assert terms.play_variance == pytest.approx(variance, rel=1e-12)
    assert terms.play_actual == sum(r.returned for r in results)
