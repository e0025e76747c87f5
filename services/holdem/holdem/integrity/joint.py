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

The counting is compiled (numba, kept in its cache like :mod:`holdem.odds.sweep`) and sums
integers: per calling box the sum of its net per ante over the completions, per pair of
boxes the sum of the product of their nets. The weights (antes that called) enter in exact
integer arithmetic, so the mean and variance are the exact fractions, rounded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from holdem import evaluator
from holdem.odds.combos import quads
from holdem.odds.situation import category_of_strength, qualifying_strength
from holdem.odds.sweep import _jit, card_keys, flop_strengths

I64 = npt.NDArray[np.int64]


def ch_calls(
    multipliers: Sequence[int],
    flop: Sequence[int],
    holes: Sequence[tuple[int, int]],
    weights: Sequence[int],
) -> tuple[float, float]:
    """Mean and variance of ``sum(w * X)`` over every completion, X a box's call net per ante.

    ``holes`` are every box's hole cards (all of them are seen), ``weights`` the antes that
    called on each box (0 for a box where nobody called).
    """
    seen = [*flop, *(c for hole in holes for c in hole)]
    assert len(set(seen)) == len(seen), "the table's cards are distinct"
    unseen = np.array(sorted(set(range(52)) - set(seen)), dtype=np.int64)
    calling = [(hole, int(w)) for hole, w in zip(holes, weights, strict=True) if w]
    first, products = ch_call_moments(multipliers, flop, [hole for hole, _ in calling], unseen)
    w = [weight for _, weight in calling]
    completions = _completions(len(unseen))
    total = sum(wi * int(f) for wi, f in zip(w, first.tolist(), strict=True))
    rows = products.tolist()
    second = sum(wi * wj * rows[i][j] for i, wi in enumerate(w) for j, wj in enumerate(w))
    return total / completions, (completions * second - total * total) / (completions**2)


def _completions(n: int) -> int:
    return n * (n - 1) // 2 * ((n - 2) * (n - 3) // 2)


def ch_call_moments(
    multipliers: Sequence[int],
    flop: Sequence[int],
    holes: Sequence[tuple[int, int]],
    unseen: I64,
) -> tuple[I64, I64]:
    """Per calling box, its call's net per ante summed over every completion of ``unseen``;
    per pair of them, the product of their nets summed likewise (exact integers)."""
    t = evaluator._T
    first = np.zeros(len(holes), dtype=np.int64)
    products = np.zeros((len(holes), len(holes)), dtype=np.int64)
    _compiled()(
        flop_strengths(flop, unseen),
        _packed_quads(len(unseen)),
        np.asarray(holes, dtype=np.int64).reshape(len(holes), 2),
        np.asarray(flop, dtype=np.int64),
        unseen,
        card_keys(),
        t.np_suit7,
        t.rank7,
        t.np_flush,
        t.np_rank_bits,
        qualifying_strength(),
        _pays(tuple(multipliers)),
        first,
        products,
    )
    return first, products


@cache
def _pays(multipliers: tuple[int, ...]) -> I64:
    """An ante table's pay multiplier of each strength."""
    out: I64 = np.asarray(multipliers, dtype=np.int64)[category_of_strength()]
    out.setflags(write=False)
    return out


@cache
def _packed_quads(n: int) -> npt.NDArray[np.int32]:
    """The rows of ``quads(n)``, each 4-subset's positions packed in 6 bits each."""
    q = quads(n)
    out = (q[:, 0] | q[:, 1] << 6 | q[:, 2] << 12 | q[:, 3] << 18).astype(np.int32)
    out.setflags(write=False)
    return out


@cache
def _compiled() -> Any:
    return _jit(_moments)


def _moments(
    dealer: Any,
    packed: Any,
    holes: Any,
    flop: Any,
    unseen: Any,
    card_keys: Any,
    suit7: Any,
    rank7: Any,
    flush: Any,
    rank_bits: Any,
    qualifying: int,
    pays: Any,
    first: Any,
    products: Any,
) -> None:  # pragma: no cover - compiled
    # Each box's strength on each turn/river pair (the evaluator's key sums, as in
    # holdem.odds.sweep) sets two thresholds on the dealer's strength there: its hand, and its
    # hand plus one. The 4-subsets are then swept in strength order, each adding one to the
    # count of its six turn/river pairs, and a threshold reads its pair's count when the
    # sweep reaches it: the dealer pairs weaker than it on that board.
    n = unseen.shape[0]
    k = holes.shape[0]
    boards = n * (n - 1) // 2
    per_board = (n - 2) * (n - 3) // 2
    levels = 7464  # strengths run 1..7462; a threshold may be one above the strongest
    base = np.empty(k, dtype=np.int64)
    for i in range(k):
        base[i] = card_keys[holes[i, 0]] + card_keys[holes[i, 1]]
        for c in range(3):
            base[i] += card_keys[flop[c]]
    cards = np.empty(7, dtype=np.int64)
    strength = np.empty((boards, k), dtype=np.int64)
    t = 0
    for a in range(n):
        for b in range(a + 1, n):
            for i in range(k):
                total = base[i] + card_keys[unseen[a]] + card_keys[unseen[b]]
                suit = suit7[total & 511]
                if suit < 0:
                    strength[t, i] = rank7[total >> 9]
                else:
                    cards[0], cards[1] = holes[i, 0], holes[i, 1]
                    cards[2], cards[3], cards[4] = flop[0], flop[1], flop[2]
                    cards[5], cards[6] = unseen[a], unseen[b]
                    mask = 0
                    for c in range(7):
                        if cards[c] & 3 == suit:
                            mask += rank_bits[cards[c]]
                    strength[t, i] = flush[mask]
            t += 1
    # Thresholds (board t, box i, hand or hand plus one) and 4-subsets, each by strength.
    events = boards * k * 2
    start = np.zeros(levels + 1, dtype=np.int64)
    for t in range(boards):
        for i in range(k):
            start[strength[t, i] + 1] += 1
            start[strength[t, i] + 2] += 1
    for v in range(1, levels + 1):
        start[v] += start[v - 1]
    event_order = np.empty(events, dtype=np.int64)
    for t in range(boards):
        for i in range(k):
            for up in range(2):
                v = strength[t, i] + up
                event_order[start[v]] = (t * k + i) * 2 + up
                start[v] += 1
    hands = dealer.shape[0]
    at = np.zeros(levels + 1, dtype=np.int64)
    for h in range(hands):
        at[dealer[h] + 1] += 1
    for v in range(1, levels + 1):
        at[v] += at[v - 1]
    # In strength order, each 4-subset as its six turn/river pairs' rows, read in sequence.
    ordered = np.empty(hands, dtype=np.int32)
    for h in range(hands):
        v = dealer[h]
        ordered[at[v]] = packed[h]
        at[v] += 1
    count = np.zeros(boards, dtype=np.int64)
    below = np.empty(events, dtype=np.int64)
    q = np.zeros(boards, dtype=np.int64)
    e = 0
    g = 0
    for v in range(levels):
        if v == qualifying:
            q[:] = count
        while e < start[v]:  # the thresholds at v (start[v]: where those above v begin)
            below[event_order[e]] = count[event_order[e] // (2 * k)]
            e += 1
        while g < at[v]:
            p = ordered[g]
            w, x, y, z = p & 63, (p >> 6) & 63, (p >> 12) & 63, p >> 18
            rw = w * n - ((w * (w + 3)) >> 1) - 1  # pairs(n) row of (w, c) is rw + c
            rx = x * n - ((x * (x + 3)) >> 1) - 1
            ry = y * n - ((y * (y + 3)) >> 1) - 1
            count[rw + x] += 1
            count[rw + y] += 1
            count[rw + z] += 1
            count[rx + y] += 1
            count[rx + z] += 1
            count[ry + z] += 1
            g += 1
    # The nets of each band of the dealer's strength, per box and per pair of boxes.
    paid = np.empty(k, dtype=np.int64)
    weaker = np.empty(k, dtype=np.int64)
    upto = np.empty(k, dtype=np.int64)
    for t in range(boards):
        qt = q[t]
        for i in range(k):
            paid[i] = pays[strength[t, i]]
            weaker[i] = below[(t * k + i) * 2]
            upto[i] = below[(t * k + i) * 2 + 1]
        for i in range(k):
            win = paid[i] + 2
            first[i] += (
                paid[i] * qt + win * max(weaker[i] - qt, 0) - 3 * (per_board - max(upto[i], qt))
            )
            for j in range(k):
                both_win = max(min(weaker[i], weaker[j]) - qt, 0)
                win_lose = max(weaker[i] - max(upto[j], qt), 0)
                lose_win = max(weaker[j] - max(upto[i], qt), 0)
                both_lose = per_board - max(max(upto[i], upto[j]), qt)
                products[i, j] += (
                    paid[i] * paid[j] * qt
                    + win * (paid[j] + 2) * both_win
                    - 3 * win * win_lose
                    - 3 * (paid[j] + 2) * lose_win
                    + 9 * both_lose
                )
