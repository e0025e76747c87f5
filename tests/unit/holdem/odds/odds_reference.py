"""Plain brute-force references for the odds tests, sharing nothing with ``holdem.odds``.

Hands are valued by phevaluator (an independent C evaluator: smaller is stronger, card ids
``rank * 4 + suit`` as in ``holdem``); every completion of a situation is walked with
itertools and settled with the rules written out again here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from functools import cache
from itertools import combinations

from phevaluator import _pheval as pheval  # the bench extra, installed by `make test`


def value(cards: Sequence[int]) -> int:
    """phevaluator's value of seven cards: smaller is stronger."""
    return int(pheval.evaluate_7cards(*cards))


# The strongest pair of threes (3-3-A-K-Q): a dealer qualifies iff strictly stronger.
_BEST_THREES = int(pheval.evaluate_5cards(4, 5, 51, 47, 43))
# Category boundaries of phevaluator's values (the classic 7,462 classes, strongest first).
_BOUNDS = (10, 166, 322, 1599, 1609, 2467, 3325, 6185, 7462)  # SF, 4K, FH, F, S, 3K, 2P, 1P, HC
_ROYAL = 1


def category(v: int) -> int:
    """The category of a phevaluator value, 0 (high card) .. 9 (royal flush)."""
    if v == _ROYAL:
        return 9
    for i, bound in enumerate(_BOUNDS):
        if v <= bound:
            return 8 - i
    raise AssertionError(v)


def qualifies(v: int) -> bool:
    return v < _BEST_THREES


def casino_holdem_flop(
    hole: Sequence[int], flop: Sequence[int], multipliers: Sequence[int]
) -> tuple[Counter[tuple[str, int]], Fraction]:
    """Every (turn/river, dealer pair) completion: outcome counts and the call EV."""
    counts = _casino_holdem_counts(tuple(hole), tuple(flop))
    total = sum(counts.values())
    net = 0
    for (outcome, cat), n in counts.items():
        if outcome == "no_qualify":
            net += n * multipliers[cat]
        elif outcome == "win":
            net += n * (multipliers[cat] + 2)
        elif outcome == "loss":
            net -= 3 * n
    return counts, Fraction(net, total)


@cache
def _casino_holdem_counts(hole: tuple[int, ...], flop: tuple[int, ...]) -> Counter[tuple[str, int]]:
    unseen = [c for c in range(52) if c not in (*hole, *flop)]
    counts: Counter[tuple[str, int]] = Counter()
    dealer_cache: dict[tuple[int, ...], int] = {}
    for board in combinations(unseen, 2):
        player = value([*hole, *flop, *board])
        cat = category(player)
        rest = [c for c in unseen if c not in board]
        for dealer_pair in combinations(rest, 2):
            key = tuple(sorted((*board, *dealer_pair)))
            dealer = dealer_cache.get(key)
            if dealer is None:
                dealer = dealer_cache[key] = value([*flop, *key])
            if not qualifies(dealer):
                counts["no_qualify", cat] += 1
            elif player < dealer:
                counts["win", cat] += 1
            elif player == dealer:
                counts["tie", -1] += 1
            else:
                counts["loss", -1] += 1
    return counts


def thp_turn(
    hole: Sequence[int],
    board: Sequence[int],
    flop_bet: int,
    multipliers: Sequence[int],
) -> dict[str, Fraction]:
    """Every (river, house pair) after the turn: EV of check, bet and fold."""
    unseen = [c for c in range(52) if c not in (*hole, *board)]
    ev = {"check": Fraction(0), "bet": Fraction(0)}
    total = 0
    for river in unseen:
        player = value([*hole, *board, river])
        rest = [c for c in unseen if c != river]
        for house_pair in combinations(rest, 2):
            house = value([*board, river, *house_pair])
            total += 1
            for action, turn_bet in (("check", 0), ("bet", 1)):
                played = 2 + flop_bet + turn_bet
                if player < house:
                    ev[action] += played + multipliers[category(player)]
                elif player > house:
                    ev[action] -= 1 + played
    out = {a: v / total for a, v in ev.items()}
    out["fold"] = Fraction(-(3 + flop_bet))
    return out
