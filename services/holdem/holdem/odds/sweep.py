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
Casino Hold'em and Texas Hold'em Plus totals, so one sweep serves both games. The totals are
packed: a hole's Casino Hold'em wins, non-qualifying dealers and ties of one category share
one integer (21 bits each: a hole's 1,081 boards times 990 dealer pairs fit), and a Texas
Hold'em Plus turn card's wins and losses another (16 bits each: 46 x 990 fit), so a pair costs
one addition per game and turn card; a Casino Hold'em hole's losses are what the other
outcomes leave of its completions. Laid out category before hole: a board's pairs come in
strength order, so its additions stay in one category's row at a time. Unpacked at the end,
by category (:func:`flop_counts`) or, for the stored tables, straight into the sums an ante
table reads (:func:`flop_sums`).

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
    remaining, ch_packed, thp_packed = _swept(flop, ch, thp)
    out = FlopCounts(
        remaining=remaining,
        ch_no_qualify=np.zeros((HOLES, CATEGORIES), dtype=np.int64),
        ch_wins=np.zeros((HOLES, CATEGORIES), dtype=np.int64),
        ch_ties=np.zeros(HOLES, dtype=np.int64),
        ch_losses=np.zeros(HOLES, dtype=np.int64),
        thp_wins=np.zeros((HOLES, OTHERS, CATEGORIES), dtype=np.int64),
        thp_losses=np.zeros((HOLES, OTHERS), dtype=np.int64),
    )
    if ch:
        _ch_counts(out, ch_packed)
    if thp:
        _compiled()[3](thp_packed, out.thp_wins, out.thp_losses)
    return out


@dataclass(frozen=True)
class ThpSums:
    """Texas Hold'em Plus showdowns of every hole pair and turn card of one flop under one
    ante table, (1176, 47) each, over 46 rivers x 990 house hands: ``won`` and ``lost``
    counts, and ``paid`` and ``paid_square``, the sums over the wins of the ante's pay
    multiplier and of its square."""

    won: I64
    lost: I64
    paid: I64
    paid_square: I64


def flop_sums(
    flop: tuple[int, int, int], ch: bool, thp: Sequence[Sequence[int]]
) -> tuple[FlopCounts, list[ThpSums]]:
    """What the stored tables keep of one flop, from one sweep: the Casino Hold'em counts
    (``ch``; its Texas Hold'em Plus counts by category are left out, of size 0) and the
    showdown sums under each ante table in ``thp`` (multipliers, high card first)."""
    remaining, ch_packed, thp_packed = _swept(flop, ch, bool(thp))
    counts = FlopCounts(
        remaining=remaining,
        ch_no_qualify=np.zeros((HOLES, CATEGORIES), dtype=np.int64),
        ch_wins=np.zeros((HOLES, CATEGORIES), dtype=np.int64),
        ch_ties=np.zeros(HOLES, dtype=np.int64),
        ch_losses=np.zeros(HOLES, dtype=np.int64),
        thp_wins=np.zeros((0, OTHERS, CATEGORIES), dtype=np.int64),
        thp_losses=np.zeros((0, OTHERS), dtype=np.int64),
    )
    if ch:
        _ch_counts(counts, ch_packed)
    sums = []
    for multipliers in thp:
        out = ThpSums(*(np.empty((HOLES, OTHERS), dtype=np.int64) for _ in range(4)))
        m = np.asarray(multipliers, dtype=np.int64)
        _compiled()[4](thp_packed, m, out.won, out.lost, out.paid, out.paid_square)
        sums.append(out)
    return counts, sums


def _swept(
    flop: tuple[int, int, int], ch: bool, thp: bool
) -> tuple[npt.NDArray[np.uint8], I64, npt.NDArray[np.uint32]]:
    """The sweep's packed totals: Casino Hold'em (10, 1176) and Texas Hold'em Plus by turn
    card position (49, 10, 1176)."""
    remaining = np.array(sorted(set(range(52)) - set(flop)), dtype=np.uint8)
    ch_packed = np.zeros((CATEGORIES, HOLES), dtype=np.int64)
    thp_packed = np.zeros((REMAINING, CATEGORIES, HOLES) if thp else (0, 0, 0), dtype=np.uint32)
    _compiled()[1](
        flop_strengths(flop),
        _packed_subsets(),
        qualifying_strength(),
        category_of_strength(),
        ch,
        thp,
        ch_packed,
        thp_packed,
    )
    return remaining, ch_packed, thp_packed


def _ch_counts(out: FlopCounts, packed: I64) -> None:
    _compiled()[2](packed, out.ch_no_qualify, out.ch_wins, out.ch_ties, out.ch_losses)


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
        card_keys(),
        t.np_suit7,
        t.rank7,
        t.np_flush,
        t.np_rank_bits,
    )
    return out


@cache
def card_keys() -> I64:
    """The evaluator's key of each card, as the compiled code adds them."""
    out: I64 = evaluator._T.np_card_keys.astype(np.int64)
    out.setflags(write=False)
    return out


@cache
def _packed_subsets() -> npt.NDArray[np.int32]:
    """The rows of ``quads(49)``, each 4-subset's positions packed in 6 bits each."""
    q = quads(REMAINING)
    out = (q[:, 0] | q[:, 1] << 6 | q[:, 2] << 12 | q[:, 3] << 18).astype(np.int32)
    out.setflags(write=False)
    return out


@cache
def _compiled() -> tuple[Any, Any, Any, Any, Any]:
    return (
        _jit(_strengths),
        _jit(_sweep),
        _jit(_unpack_ch),
        _jit(_unpack_thp),
        _jit(_thp_showdowns),
    )


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
    packed: Any,
    qualifying: int,
    category: Any,
    ch: bool,
    thp: bool,
    ch_packed: Any,
    thp_packed: Any,
) -> None:  # pragma: no cover - compiled
    n = 49
    boards = 1176
    per_board = 1081
    disjoint = 990
    levels = 7463  # strengths run 1..7462
    hands = strengths.shape[0]
    # The 4-subsets in strength order (a counting sort): level v holds start[v]:start[v + 1].
    start = np.zeros(levels + 1, dtype=np.int64)
    for i in range(hands):
        start[strengths[i] + 1] += 1
    for v in range(1, levels + 1):
        start[v] += start[v - 1]
    at = start.copy()
    ordered = np.empty(hands, dtype=np.int32)
    for i in range(hands):
        v = strengths[i]
        ordered[at[v]] = packed[i]
        at[v] += 1
    # Dealt out to the boards in that order: each board's 1,081 pairs, weakest first, each
    # as strength << 12 | a << 6 | b (a < b, positions among the 49). The pairs(49) row of
    # (w, c), w < c, is rw + c.
    dealt = np.empty((boards, per_board), dtype=np.int32)
    filled = np.zeros(boards, dtype=np.int64)
    for v in range(levels):
        s = v << 12
        for g in range(start[v], start[v + 1]):
            p = ordered[g]
            w, x, y, z = p & 63, (p >> 6) & 63, (p >> 12) & 63, p >> 18
            rw = w * (95 - w) // 2 - 1
            rx = x * (95 - x) // 2 - 1
            ry = y * (95 - y) // 2 - 1
            for t, pair in (
                (rw + x, (y << 6) | z),
                (rw + y, (x << 6) | z),
                (rw + z, (x << 6) | y),
                (rx + y, (w << 6) | z),
                (rx + z, (w << 6) | y),
                (ry + z, (w << 6) | x),
            ):
                dealt[t, filled[t]] = s | pair
                filled[t] += 1
    holding = np.zeros(n, dtype=np.int64)
    weak_holding = np.zeros(n, dtype=np.int64)
    below = np.empty(per_board, dtype=np.int64)
    t = 0
    for c in range(n):
        for d in range(c + 1, n):
            row = dealt[t]
            holding[:] = 0
            seen = 0
            weak_seen = -1
            start_at = 0
            while start_at < per_board:
                s = row[start_at] >> 12
                end = start_at + 1
                while end < per_board and row[end] >> 12 == s:
                    end += 1
                if weak_seen < 0 and s >= qualifying:
                    weak_seen = seen
                    weak_holding[:] = holding
                for g in range(start_at, end):
                    below[g] = seen - holding[(row[g] >> 6) & 63] - holding[row[g] & 63]
                for g in range(start_at, end):
                    holding[(row[g] >> 6) & 63] += 1
                    holding[row[g] & 63] += 1
                seen += end - start_at
                cat = category[s]
                qualifies = ch and s >= qualifying
                for g in range(start_at, end):
                    a = (row[g] >> 6) & 63
                    b = row[g] & 63
                    h = a * (95 - a) // 2 - 1 + b
                    under = below[g]
                    upto = seen - holding[a] - holding[b] + 1
                    if qualifies:
                        # wins | non-qualifying dealers << 21 | ties << 42
                        nq = weak_seen - weak_holding[a] - weak_holding[b]
                        ch_packed[cat, h] += (under - nq) | (nq << 21) | ((upto - under) << 42)
                    if thp:
                        # wins | losses << 16, for both turn cards of the board
                        both = under | ((disjoint - upto) << 16)
                        thp_packed[c, cat, h] += both
                        thp_packed[d, cat, h] += both
                start_at = end
            if ch:
                # A player below the threshold: the dealer pairs that do not qualify are all
                # counted once the sweep has passed the threshold; the rest beat it.
                if weak_seen < 0:
                    weak_seen = seen
                    weak_holding[:] = holding
                for g in range(per_board):
                    s = row[g] >> 12
                    if s >= qualifying:
                        break
                    a = (row[g] >> 6) & 63
                    b = row[g] & 63
                    h = a * (95 - a) // 2 - 1 + b
                    nq = weak_seen - weak_holding[a] - weak_holding[b] + 1
                    ch_packed[category[s], h] += nq << 21
            t += 1


def _unpack_ch(
    packed: Any, no_qualify: Any, wins: Any, ties: Any, losses: Any
) -> None:  # pragma: no cover - compiled
    field = (1 << 21) - 1
    for h in range(packed.shape[1]):
        tied = 0
        other = 0
        for cat in range(10):
            v = packed[cat, h]
            wins[h, cat] = v & field
            no_qualify[h, cat] = (v >> 21) & field
            tied += v >> 42
            other += (v & field) + ((v >> 21) & field)
        ties[h] = tied
        losses[h] = 1081 * 990 - other - tied


def _unpack_thp(packed: Any, wins: Any, losses: Any) -> None:  # pragma: no cover - compiled
    # Back to each hole's 47 open turn cards, ascending.
    n = 49
    h = 0
    for a in range(n):
        for b in range(a + 1, n):
            k = 0
            for turn in range(n):
                if turn != a and turn != b:
                    lost = 0
                    for cat in range(10):
                        v = packed[turn, cat, h]
                        wins[h, k, cat] = v & 0xFFFF
                        lost += v >> 16
                    losses[h, k] = lost
                    k += 1
            h += 1


def _thp_showdowns(
    packed: Any, multipliers: Any, won: Any, lost: Any, paid: Any, paid_square: Any
) -> None:  # pragma: no cover - compiled
    n = 49
    h = 0
    for a in range(n):
        for b in range(a + 1, n):
            k = 0
            for turn in range(n):
                if turn != a and turn != b:
                    w = 0
                    lo = 0
                    p = 0
                    q = 0
                    for cat in range(10):
                        v = packed[turn, cat, h]
                        count = v & 0xFFFF
                        w += count
                        lo += v >> 16
                        p += count * multipliers[cat]
                        q += count * multipliers[cat] * multipliers[cat]
                    won[h, k] = w
                    lost[h, k] = lo
                    paid[h, k] = p
                    paid_square[h, k] = q
                    k += 1
            h += 1
