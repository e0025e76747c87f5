"""Side bets: the closed forms against brute force over every five-card or two-card hand."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import combinations

import numpy as np

from holdem.evaluator import Category
from holdem.odds import sidebets
from holdem.odds.sheet import percent
from holdem.paytable import Spot, load_paytable
from holdem.texas_holdem_plus import plus_line

CLASSIC = load_paytable("casino-holdem/classic")
ROYAL_20 = load_paytable("casino-holdem/royal-20")
PROGRESSIVE = load_paytable("casino-holdem/progressive")
THP = load_paytable("texas-holdem-plus/standard")


def _brute_five_card_lines() -> Counter[str]:
    """Every one of the 2,598,960 five-card hands, classified with numpy from scratch."""
    hands = np.array(list(combinations(range(52), 5)), dtype=np.int16)
    ranks = np.sort(hands // 4, axis=1)  # 0 = two .. 12 = ace
    flush = (hands % 4 == (hands[:, :1] % 4)).all(axis=1)
    counts = np.zeros((len(hands), 13), dtype=np.int8)
    np.add.at(counts, (np.arange(len(hands))[:, None], ranks), 1)
    shape = -np.sort(-counts, axis=1)[:, :2]
    distinct = shape[:, 0] == 1
    wheel = (ranks == np.array([0, 1, 2, 3, 12])).all(axis=1)
    straight = distinct & ((ranks[:, 4] - ranks[:, 0] == 4) | wheel)
    royal = straight & flush & (ranks[:, 0] == 8)
    pair_rank = np.argmax(counts == 2, axis=1)
    one_pair = (shape[:, 0] == 2) & (shape[:, 1] == 1)
    labels = np.select(
        [
            royal,
            straight & flush,
            shape[:, 0] == 4,
            (shape[:, 0] == 3) & (shape[:, 1] == 2),
            flush,
            straight,
            shape[:, 0] == 3,
            (shape[:, 0] == 2) & (shape[:, 1] == 2),
            one_pair & (pair_rank == 12),
            one_pair,
        ],
        [9, 8, 7, 6, 5, 4, 3, 2, 10, 1],
        0,
    )
    names = {c.value: c.name.lower() for c in Category} | {10: "pair_of_aces"}
    return Counter({names[k]: int(n) for k, n in enumerate(np.bincount(labels)) if n})


def test_five_card_closed_form_matches_brute_force() -> None:
    assert sidebets.five_card_lines() == _brute_five_card_lines()


def test_aa_bonus_classic_is_the_published_93_74() -> None:
    sheet = sidebets.aa_bonus_sheet(CLASSIC)
    assert sheet.rtp() == Fraction(2436308, 2598960)
    assert percent(sheet.rtp(), 2) == "93.74%"


def test_aa_bonus_royal_20_pays_seven_on_everything() -> None:
    lines = sidebets.five_card_lines()
    winners = sum(n for line, n in lines.items() if line not in ("pair", "high_card"))
    assert sidebets.aa_bonus_sheet(ROYAL_20).rtp() == Fraction(8 * winners, 2598960)


def test_jackpot_rtp_grows_with_the_meter() -> None:
    sheet = sidebets.jackpot_sheet(PROGRESSIVE)
    lines = sidebets.five_card_lines()
    fixed = Fraction(
        501 * lines["four_of_a_kind"] + 101 * lines["full_house"] + 51 * lines["flush"], 2598960
    )
    meter = Fraction(50_000)
    expected = (
        fixed
        + Fraction(lines["royal_flush"], 2598960) * (1 + meter)
        + Fraction(lines["straight_flush"], 2598960) * (1 + meter / 10)
    )
    assert sheet.rtp(meter) == expected
    assert sheet.rtp(Fraction(0)) < sheet.rtp(meter)


def test_plus_closed_form_matches_every_two_card_hand() -> None:
    brute = Counter(plus_line((a, b)) or "none" for a, b in combinations(range(52), 2))
    sheet = sidebets.plus_sheet(THP)
    closed = sidebets.plus_counts()
    assert {k: v for k, v in brute.items() if k != "none"} == closed
    pays = {line: THP.pays(Spot.PLUS, line) or 0 for line in closed}
    assert sheet.rtp() == Fraction(sum((pays[k] + 1) * n for k, n in closed.items()), 1326)
    assert sheet.rtp() == Fraction(1208, 1326)
