"""Every hole pair of one flop by a sweep in strength order: the compiled counting core.

The same counts as the ranking in :mod:`holdem.odds.engine`, by another route. For a flop, the
C(49, 4) = 211,876 hands of the flop and four of the 49 other cards are evaluated once and
put in strength order (a counting sort). Each 4-subset splits six ways into a turn/river pair
(the board) and a pair of the other 47 cards; dealt out in that order, every one of the
1,176 boards gets its 1,081 pairs weakest first. A board's pairs are then swept from the
weakest: with ``seen`` the pairs already passed and ``holding[c]`` those of them holding
card ``c``, the dealer pairs weaker than a pair ``{a, b}`` and disjoint from it number
``seen - holding[a] - holding[b]`` (only ``{a, b}`` itself holds both, and it is not yet
passed). Equal strengths pass as one group, so ``upto`` (no stronger) is the same count just
after the group, plus one for the pair itself; the dealer pairs that do not qualify are the
count taken where the sweep reaches the qualifying strength.

Each pair is a hole pair of that board, and its counts are added straight into the hole's
Casino Hold'em and Texas Hold'em Plus totals, so one sweep serves both games.

Compiled with numba on first use (a few seconds, then kept in numba's cache so later
processes load it in a fraction of a second); the integers are exactly those of the numpy
ranking, which the tests check flop by flop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from holdem import evaluator
from holdem.odds.combos import quads
from holdem.odds.situation import category_of_strength, qualifying_strength

I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]

REMAINING: Final = 49
HOLES: Final = 1176  # C(49, 2): hole pairs, and also turn/river pairs
OTHERS: Final = 47
CATEGORIES: Final = 10


@dataclass(frozen=True)
class FlopCounts:
    """Counts of every hole pair of one flop (rows of ``pairs(49)``).

    Casino Hold'em, over the 1,081 x 990 completions of each hole: ``ch_no_qualify`` and
    ``ch_wins`` (1176, 10) by the player's final category, ``ch_ties`` and ``ch_losses``
    (1176,). Texas Hold'em Plus, per hole and turn card (the hole's 47 open positions,
    ascending), over 46 rivers x 990 house hands: ``thp_wins`` (1176, 47, 10) by the
    player's final category and ``thp_losses`` (1176, 47). A game not asked for is all zeros.
    """

    remaining: npt.NDArray[np.uint8]
    ch_no_qualify: I64
    ch_wins: I64
    ch_ties: I64
    ch_losses: I64
    thp_wins: I64
    thp_losses: I64


def flop_counts(flop: tuple[int, int, int], ch: bool = True, thp: bool = True) -> FlopCounts:
    """Casino Hold'em and Texas Hold'em Plus counts of every hole pair of one flop."""
    remaining = np.array(sorted(set(range(52)) - set(flop)), dtype=np.uint8)
    out = FlopCounts(
        remaining=remaining,
        ch_no_qualify=np.zeros((HOLES, CATEGORIES), dtype=np.int64),
        ch_wins=np.zeros((HOLES, CATEGORIES), dtype=np.int64),
        ch_ties=np.zeros(HOLES, dtype=np.int64),
        ch_losses=np.zeros(HOLES, dtype=np.int64),
        thp_wins=np.zeros((HOLES, OTHERS, CATEGORIES), dtype=np.int64),
        thp_losses=np.zeros((HOLES, OTHERS), dtype=np.int64),
    )
    _compiled()[1](
        flop_strengths(flop),
        _subsets(),
        qualifying_strength(),
        category_of_strength(),
        ch,
        thp,
        out.ch_no_qualify,
        out.ch_wins,
        out.ch_ties,
        out.ch_losses,
        out.thp_wins,
        out.thp_losses,
    )
    return out


def flop_strengths(flop: Sequence[int], unseen: npt.ArrayLike | None = None) -> U16:
    """The strength of the flop with each 4-subset of ``unseen`` (rows of quads(n)).

    ``unseen``: ascending card ids off the flop; by default the other 49 cards.
    """
    if unseen is None:
        unseen = sorted(set(range(52)) - set(flop))
    t = evaluator._T
    out: U16 = _compiled()[0](
        np.asarray(flop, dtype=np.int64),
        np.asarray(unseen, dtype=np.int64),
        t.np_card_keys.astype(np.int64),
        t.np_suit7,
        t.rank7,
        t.np_flush,
        t.np_rank_bits,
    )
    return out


@cache
def _subsets() -> npt.NDArray[np.int8]:
    return quads(REMAINING).astype(np.int8)


@cache
def _compiled() -> tuple[Any, Any]:
    return _jit(_strengths), _jit(_sweep)


def _jit(function: Any) -> Any:
    from numba import njit  # imported here: only counting a flop pays numba's import

    try:
        return njit(cache=True, nogil=True)(function)
    except RuntimeError:
        # No writable place for numba's cache (a read-only install and home, as in the
        # service image): compile in each process instead, a few seconds once.
        return njit(nogil=True)(function)


def _strengths(
    flop: Any,
    remaining: Any,
    card_keys: Any,
    suit7: Any,
    rank7: Any,
    flush: Any,
    rank_bits: Any,
) -> Any:  # pragma: no cover - compiled
    # The evaluator's sums (holdem.evaluator), card by card: face keys above 9 bits, suit keys
    # below; a suit of five or more takes the flush table on its 13-bit rank mask.
    n = remaining.shape[0]
    out = np.empty(n * (n - 1) * (n - 2) * (n - 3) // 24, dtype=np.uint16)
    base = card_keys[flop[0]] + card_keys[flop[1]] + card_keys[flop[2]]
    cards = np.empty(7, dtype=np.int64)
    cards[0], cards[1], cards[2] = flop[0], flop[1], flop[2]
    i = 0
    for d in range(3, n):
        kd = base + card_keys[remaining[d]]
        for c in range(2, d):
            kc = kd + card_keys[remaining[c]]
            for b in range(1, c):
                kb = kc + card_keys[remaining[b]]
                for a in range(b):
                    total = kb + card_keys[remaining[a]]
                    suit = suit7[total & 511]
                    if suit < 0:
                        out[i] = rank7[total >> 9]
                    else:
                        cards[3] = remaining[a]
                        cards[4] = remaining[b]
                        cards[5] = remaining[c]
                        cards[6] = remaining[d]
                        mask = 0
                        for k in range(7):
                            if cards[k] & 3 == suit:
                                mask += rank_bits[cards[k]]
                        out[i] = flush[mask]
                    i += 1
    return out


def _sweep(
    strengths: Any,
    subsets: Any,
    qualifying: int,
    category: Any,
    ch: bool,
    thp: bool,
    ch_no_qualify: Any,
    ch_wins: Any,
    ch_ties: Any,
    ch_losses: Any,
    thp_wins: Any,
    thp_losses: Any,
) -> None:  # pragma: no cover - compiled
    n = 49
    boards = 1176
    per_board = 1081
    disjoint = 990
    hands = strengths.shape[0]
    # The 4-subsets in strength order (a counting sort).
    count = np.zeros(7464, dtype=np.int64)
    for i in range(hands):
        count[strengths[i] + 1] += 1
    for v in range(1, 7464):
        count[v] += count[v - 1]
    order = np.empty(hands, dtype=np.int32)
    for i in range(hands):
        v = strengths[i]
        order[count[v]] = i
        count[v] += 1
    # Dealt out to the boards in that order: each board's 1,081 pairs, weakest first, each
    # as strength << 12 | a << 6 | b (a < b, positions among the 49).
    dealt = np.empty((boards, per_board), dtype=np.int32)
    filled = np.zeros(boards, dtype=np.int64)
    for g in range(hands):
        at = order[g]
        s = int(strengths[at]) << 12
        w = int(subsets[at, 0])
        x = int(subsets[at, 1])
        y = int(subsets[at, 2])
        z = int(subsets[at, 3])
        for c, d, a, b in (
            (w, x, y, z),
            (w, y, x, z),
            (w, z, x, y),
            (x, y, w, z),
            (x, z, w, y),
            (y, z, w, x),
        ):
            t = c * (97 - c) // 2 + d - c - 1
            dealt[t, filled[t]] = s | (a << 6) | b
            filled[t] += 1
    holding = np.zeros(n, dtype=np.int64)
    weak_holding = np.zeros(n, dtype=np.int64)
    below = np.empty(per_board, dtype=np.int64)
    # Texas Hold'em Plus by the turn card's position: a board's two cards each take one slab.
    wins_at = np.zeros((n, boards, 10), dtype=np.int32)
    losses_at = np.zeros((n, boards), dtype=np.int32)
    t = 0
    for c in range(n):
        for d in range(c + 1, n):
            row = dealt[t]
            holding[:] = 0
            seen = 0
            weak_seen = -1
            start = 0
            while start < per_board:
                s = row[start] >> 12
                end = start + 1
                while end < per_board and row[end] >> 12 == s:
                    end += 1
                if weak_seen < 0 and s >= qualifying:
                    weak_seen = seen
                    weak_holding[:] = holding
                if end == start + 1:
                    a = (row[start] >> 6) & 63
                    b = row[start] & 63
                    below[start] = seen - holding[a] - holding[b]
                    holding[a] += 1
                    holding[b] += 1
                else:
                    for g in range(start, end):
                        a = (row[g] >> 6) & 63
                        b = row[g] & 63
                        below[g] = seen - holding[a] - holding[b]
                    for g in range(start, end):
                        holding[(row[g] >> 6) & 63] += 1
                        holding[row[g] & 63] += 1
                seen += end - start
                cat = category[s]
                for g in range(start, end):
                    a = (row[g] >> 6) & 63
                    b = row[g] & 63
                    h = a * (97 - a) // 2 + b - a - 1
                    under = below[g]
                    upto = seen - holding[a] - holding[b] + 1
                    if ch and s >= qualifying:
                        nq = weak_seen - weak_holding[a] - weak_holding[b]
                        ch_no_qualify[h, cat] += nq
                        ch_wins[h, cat] += under - nq
                        ch_ties[h] += upto - under
                        ch_losses[h] += disjoint - upto
                    if thp:
                        wins_at[c, h, cat] += under
                        wins_at[d, h, cat] += under
                        losses_at[c, h] += disjoint - upto
                        losses_at[d, h] += disjoint - upto
                start = end
            if ch:
                # A player below the threshold: the dealer pairs that do not qualify are all
                # counted once the sweep has passed the threshold.
                if weak_seen < 0:
                    weak_seen = seen
                    weak_holding[:] = holding
                for g in range(per_board):
                    s = row[g] >> 12
                    if s >= qualifying:
                        break
                    a = (row[g] >> 6) & 63
                    b = row[g] & 63
                    h = a * (97 - a) // 2 + b - a - 1
                    nq = weak_seen - weak_holding[a] - weak_holding[b] + 1
                    ch_no_qualify[h, category[s]] += nq
                    ch_losses[h] += disjoint - nq
            t += 1
    if thp:
        # Back to each hole's 47 open turn cards, ascending.
        h = 0
        for a in range(n):
            for b in range(a + 1, n):
                k = 0
                for turn in range(n):
                    if turn != a and turn != b:
                        for cat in range(10):
                            thp_wins[h, k, cat] = wins_at[turn, h, cat]
                        thp_losses[h, k] = losses_at[turn, h]
                        k += 1
                h += 1
