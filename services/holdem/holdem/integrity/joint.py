"""Casino Hold'em boxes of one round together: the calls' return given every card on the table.

When several boxes of a round call, their returns come from the same turn, river and dealer
hand, so they are correlated. Conditioning on every card seen at the table (every box's hole
cards and the flop), the return of the calls is a function of the completion alone: its mean
and variance are exact over the C(n, 2) x C(n - 2, 2) completions of the n unseen cards (a
turn/river pair, then the dealer's pair of the rest).

Counted, not enumerated: the dealer's hand is the flop and four unseen cards, so its C(n, 4)
strengths are evaluated once. For a turn/river pair, a box's call nets a fixed amount in each
band of the dealer's strength (below the qualifying hand; qualifying and below, equal to or
above the box's hand), and the product of two boxes' nets is fixed in each band of the
bands' intersection. So every moment is a sum of band counts, and every band count is a
difference of how many dealer pairs are below a threshold: the qualifying hand, each box's
hand, and each box's hand plus one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import numpy.typing as npt

from holdem.evaluator import evaluate_batch
from holdem.odds.combos import colex4, pairs
from holdem.odds.situation import category_of_strength, qualifying_strength
from holdem.odds.sweep import flop_strengths

F64 = npt.NDArray[np.float64]


@cache
def _dealer_quads(n: int) -> npt.NDArray[np.int32]:
    """For each turn/river pair of ``pairs(n)``, the ``quads(n)`` rows of it with each pair
    of the other n - 2 cards: shape (C(n, 2), C(n - 2, 2))."""
    board = pairs(n)
    mask = np.ones((len(board), n), dtype=bool)
    mask[np.arange(len(board))[:, None], board] = False
    rest = np.broadcast_to(np.arange(n), mask.shape)[mask].reshape(len(board), n - 2)
    dealer = rest[:, pairs(n - 2)]
    both = np.broadcast_to(board[:, None, :], dealer.shape)
    out = colex4(np.sort(np.concatenate([both, dealer], axis=2), axis=2)).astype(np.int32)
    out.setflags(write=False)
    return out


def ch_calls(
    multipliers: Sequence[int],
    flop: Sequence[int],
    holes: Sequence[tuple[int, int]],
    weights: Sequence[float],
) -> tuple[float, float]:
    """Mean and variance of ``sum(w * X)`` over every completion, X a box's call net per ante.

    ``holes`` are every box's hole cards (all of them are seen), ``weights`` the antes that
    called on each box (0 for a box where nobody called).
    """
    seen = [*flop, *(c for hole in holes for c in hole)]
    assert len(set(seen)) == len(seen), "the table's cards are distinct"
    unseen = np.array(sorted(set(range(52)) - set(seen)), dtype=np.uint8)
    n = len(unseen)
    # Per turn/river pair (rows), the dealer's strength with each pair of the rest.
    dealer = flop_strengths(flop, unseen)[_dealer_quads(n)]
    per_board = float(dealer.shape[1])
    board = pairs(n)
    calling = [(hole, float(w)) for hole, w in zip(holes, weights, strict=True) if w]
    hands = np.empty((len(calling), len(board), 7), dtype=np.uint8)
    for i, (hole, _) in enumerate(calling):
        hands[i, :, :2] = hole
    hands[:, :, 2:5] = flop
    hands[:, :, 5:] = unseen[board]
    strength = evaluate_batch(hands.reshape(-1, 7)).reshape(len(calling), len(board))
    # Per box (rows) and turn/river pair: dealer pairs weaker, and no stronger, than the box.
    weaker = _below(dealer, strength)
    upto = _below(dealer, strength + 1)
    q = _below(dealer, np.full((1, len(board)), qualifying_strength(), dtype=np.uint16))[0]
    w = np.array([weight for _, weight in calling])
    paid = np.asarray(multipliers, dtype=np.float64)[category_of_strength()[strength]]
    win = paid + 2
    first = w @ (paid * q + win * np.maximum(weaker - q, 0) - 3 * (per_board - np.maximum(upto, q)))
    # Every pair of boxes (i, j) on the last axes: the counts of each band of the dealer's hand.
    both_win = np.maximum(np.minimum(weaker[:, None], weaker[None]) - q, 0)
    win_lose = np.maximum(weaker[:, None] - np.maximum(upto[None], q), 0)
    both_lose = per_board - np.maximum(np.maximum(upto[:, None], upto[None]), q)
    products = (
        paid[:, None] * paid[None] * q
        + win[:, None] * win[None] * both_win
        - 3 * win[:, None] * win_lose
        - 3 * win[None] * win_lose.transpose(1, 0, 2)
        + 9 * both_lose
    )
    second = np.einsum("i,j,ijt->", w, w, products)
    completions = len(board) * per_board
    mean = float(first.sum()) / completions
    return mean, float(second) / completions - mean * mean


def _below(dealer: npt.NDArray[np.uint16], thresholds: npt.NDArray[np.integer]) -> F64:
    """Per row of ``thresholds`` and turn/river pair, how many dealer pairs are weaker."""
    weaker = dealer[None] < thresholds[:, :, None]
    counts: F64 = weaker.view(np.uint8).sum(axis=2, dtype=np.uint16).astype(np.float64)
    return counts
