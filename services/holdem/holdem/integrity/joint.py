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
from holdem.odds.combos import colex4, pairs, quads
from holdem.odds.situation import category_of_strength, qualifying_strength

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
    four = quads(n)
    cards = np.empty((len(four), 7), dtype=np.uint8)
    cards[:, :3] = flop
    cards[:, 3:] = unseen[four]
    # Per turn/river pair (rows), the dealer's strength with each pair of the rest.
    dealer = evaluate_batch(cards)[_dealer_quads(n)]
    per_board = dealer.shape[1]

    def below(threshold: npt.NDArray[np.integer]) -> F64:
        """Per turn/river pair, how many dealer pairs are weaker than ``threshold``."""
        return (dealer < threshold[:, None]).sum(axis=1, dtype=np.float64)  # type: ignore[no-any-return]

    board = pairs(n)
    q = below(np.full(len(board), qualifying_strength()))
    m = np.asarray(multipliers, dtype=np.float64)
    boxes = []  # per calling box: weight, paid, net on a win, weaker, no stronger
    for hole, weight in zip(holes, weights, strict=True):
        if not weight:
            continue
        hand = np.empty((len(board), 7), dtype=np.uint8)
        hand[:, :2] = hole
        hand[:, 2:5] = flop
        hand[:, 5:] = unseen[board]
        strength = evaluate_batch(hand)
        paid = m[category_of_strength()[strength]]
        weaker = below(strength)
        upto = weaker + (dealer == strength[:, None]).sum(axis=1, dtype=np.float64)
        boxes.append((float(weight), paid, paid + 2, weaker, upto))
    first = np.zeros(len(board))
    second = np.zeros(len(board))
    for w, paid, win, weaker, upto in boxes:
        lose = per_board - np.maximum(upto, q)
        first += w * (paid * q + win * np.maximum(weaker - q, 0) - 3 * lose)
        for v, paid2, win2, weaker2, upto2 in boxes:
            both_win = np.maximum(np.minimum(weaker, weaker2) - q, 0)
            win_lose = np.maximum(weaker - np.maximum(upto2, q), 0)
            lose_win = np.maximum(weaker2 - np.maximum(upto, q), 0)
            both_lose = per_board - np.maximum(np.maximum(upto, upto2), q)
            second += (
                w
                * v
                * (
                    paid * paid2 * q
                    + win * win2 * both_win
                    - 3 * win * win_lose
                    - 3 * win2 * lose_win
                    + 9 * both_lose
                )
            )
    completions = float(len(board) * per_board)
    mean = float(first.sum()) / completions
    return mean, float(second.sum()) / completions - mean * mean
