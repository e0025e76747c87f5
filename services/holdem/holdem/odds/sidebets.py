"""Side bets by closed-form combinatorics: AA bonus, progressive jackpot, PLUS.

AA bonus and jackpot are judged on five cards (hole + flop), so their odds are those of a
five-card poker hand out of C(52, 5) = 2,598,960. PLUS is judged on the two hole cards, out of
C(52, 2) = 1,326. These sheets are on the "every hand" basis (the bet judged on every deal,
as if the player always called); the PAR computation also gives them under the best
strategy, where a fold forfeits the side bet.
"""

from __future__ import annotations

from math import comb
from typing import Final

from holdem.casino_holdem import CATEGORY_LINE
from holdem.evaluator import Category
from holdem.odds.sheet import BetSheet, Line
from holdem.paytable import PayTable, PayTableError, Spot

FIVE_CARD_HANDS: Final = comb(52, 5)
TWO_CARD_HANDS: Final = comb(52, 2)
EVERY_HAND: Final = "every hand"
BEST_STRATEGY: Final = "best strategy"

_STRAIGHTS: Final = 10  # A-high down to 5-high (the wheel)
_RANK_SETS: Final = comb(13, 5) - _STRAIGHTS  # five distinct ranks that are not a straight
_SUIT_SETS: Final = 4**5 - 4  # five suits that are not all the same


def five_card_counts() -> dict[Category, int]:
    """How many of the 2,598,960 five-card hands fall in each category."""
    counts = {
        Category.ROYAL_FLUSH: 4,
        Category.STRAIGHT_FLUSH: 4 * (_STRAIGHTS - 1),
        Category.FOUR_OF_A_KIND: 13 * 48,
        Category.FULL_HOUSE: 13 * comb(4, 3) * 12 * comb(4, 2),
        Category.FLUSH: 4 * _RANK_SETS,
        Category.STRAIGHT: _STRAIGHTS * _SUIT_SETS,
        Category.THREE_OF_A_KIND: 13 * comb(4, 3) * comb(12, 2) * 4**2,
        Category.TWO_PAIR: comb(13, 2) * comb(4, 2) ** 2 * 11 * 4,
        Category.PAIR: 13 * comb(4, 2) * comb(12, 3) * 4**3,
        Category.HIGH_CARD: _RANK_SETS * _SUIT_SETS,
    }
    assert sum(counts.values()) == FIVE_CARD_HANDS
    return counts


#: Five-card hands holding exactly one pair, of aces.
PAIR_OF_ACES: Final = comb(4, 2) * comb(12, 3) * 4**3


def five_card_lines() -> dict[str, int]:
    """Five-card hand counts by the lines AA bonus and jackpot use (pair of aces apart)."""
    out = {CATEGORY_LINE[c]: n for c, n in five_card_counts().items()}
    out["pair_of_aces"] = PAIR_OF_ACES
    out["pair"] -= PAIR_OF_ACES
    return out


def _sheet(name: str, table: PayTable, spot: Spot, counts: dict[str, int], total: int) -> BetSheet:
    lines = []
    losing = 0
    for line, n in counts.items():
        multiplier = table.pays(spot, line)
        if multiplier is None:
            losing += n
        else:
            lines.append(Line(line, multiplier, n))
    lines.append(Line("lose", -1, losing))
    return BetSheet(name, EVERY_HAND, total, tuple(lines))


def aa_bonus_sheet(table: PayTable) -> BetSheet:
    """AA bonus on every hand: pair of aces or better on hole + flop, by the AA table."""
    if not table.offers(Spot.AA_BONUS):
        raise PayTableError(f"pay table {table.id} has no AA bonus")
    counts = five_card_lines()
    # "Or better" includes any two pair or better; a pair below aces loses.
    return _sheet(Spot.AA_BONUS, table, Spot.AA_BONUS, counts, FIVE_CARD_HANDS)


def jackpot_sheet(table: PayTable) -> BetSheet:
    """Jackpot on every hand: fixed lines by the table, meter lines as a share of the meter."""
    if table.jackpot is None:
        raise PayTableError(f"pay table {table.id} has no jackpot")
    counts = five_card_lines()
    lines = []
    losing = 0
    for line, n in counts.items():
        multiplier = table.pays(Spot.JACKPOT, line)
        share = table.jackpot.meter_percent.get(line)
        if share:
            lines.append(Line(line, 0, n, meter_percent=share))
        elif multiplier is not None:
            lines.append(Line(line, multiplier, n))
        else:
            losing += n
    lines.append(Line("lose", -1, losing))
    return BetSheet(Spot.JACKPOT, EVERY_HAND, FIVE_CARD_HANDS, tuple(lines))


def plus_counts() -> dict[str, int]:
    """How many of the 1,326 two-card hands win each PLUS line."""
    return {
        "pair_of_aces": comb(4, 2),
        "ace_king_suited": 4,
        "ace_queen_or_jack_suited": 2 * 4,
        "ace_king_offsuit": 12,
        "pair_of_jacks_to_kings": 3 * comb(4, 2),
        "ace_queen_or_jack_offsuit": 2 * 12,
        "pair_of_twos_to_tens": 9 * comb(4, 2),
    }


def plus_sheet(table: PayTable) -> BetSheet:
    """PLUS: judged on the hole cards alone, settled whatever the player does."""
    if not table.offers(Spot.PLUS):
        raise PayTableError(f"pay table {table.id} has no PLUS bet")
    counts = plus_counts()
    counts["none"] = TWO_CARD_HANDS - sum(counts.values())
    return _sheet(Spot.PLUS, table, Spot.PLUS, counts, TWO_CARD_HANDS)
