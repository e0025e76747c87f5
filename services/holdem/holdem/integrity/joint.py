"""Casino Hold'em boxes of one round together: the calls' return given every card on the table.

When several boxes of a round call, their returns come from the same turn, river and dealer
hand, so they are correlated. Conditioning on every card seen at the table (every box's hole
cards and the flop), the return of the calls is a function of the completion alone: its mean
and variance are exact over the C(n, 2) x C(n - 2, 2) completions of the n unseen cards
(each 4-subset of them is the dealer's seven cards with the flop, split six ways into the
board's turn and river and the dealer's two).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import combinations

import numpy as np
import numpy.typing as npt

from holdem.evaluator import evaluate_batch
from holdem.odds.combos import pair_index, pairs, quads
from holdem.odds.situation import category_of_strength, qualifying_strength


@cache
def _splits(n: int) -> npt.NDArray[np.int32]:
    """For each 4-subset of n (colex order), its six (turn/river pair) rows in pairs(n)."""
    q, index = quads(n), pair_index(n)
    out = np.stack([index[q[:, i], q[:, j]] for i, j in combinations(range(4), 2)], axis=1)
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
    q, splits = quads(n), _splits(n)
    dealer_cards = np.empty((len(q), 7), dtype=np.uint8)
    dealer_cards[:, :3] = flop
    dealer_cards[:, 3:] = unseen[q]
    dealer = evaluate_batch(dealer_cards)[:, None]
    qualifies = dealer >= qualifying_strength()
    board = pairs(n)
    m = np.asarray(multipliers, dtype=np.float64)
    total = np.zeros(splits.shape)
    for hole, weight in zip(holes, weights, strict=True):
        if not weight:
            continue
        cards = np.empty((len(board), 7), dtype=np.uint8)
        cards[:, :2] = hole
        cards[:, 2:5] = flop
        cards[:, 5:] = unseen[board]
        player = evaluate_batch(cards)[splits]
        paid = m[category_of_strength()[player]]
        net = np.where(player > dealer, paid + 2, np.where(player == dealer, 0.0, -3.0))
        total += weight * np.where(qualifies, net, paid)
    mean = float(total.mean())
    return mean, float(np.mean((total - mean) ** 2))
