"""Every hole pair of one flop at once: the counting core of the PAR computation.

For a flop F, 49 cards remain. Each seven-card hand that matters is F plus four of them, so
the C(49, 4) = 211,876 hands are evaluated once and serve both sides: the player's hand is
F + hole + turn/river and the dealer's is F + dealer pair + turn/river.

:func:`casino_holdem_flop_all`, :func:`thp_flop_all` and :func:`flop_all` (both games from
one pass) count by the compiled sweep of :mod:`holdem.odds.sweep`. The ``ranked_`` functions
reach the same integers in numpy by another route, kept as its independent check (the tests
compare the two flop by flop) and as the benchmark's anchor: for each of the 1,176
turn/river pairs, the 1,081 pairs of the 47 other cards are ranked by strength; the number of
dealer pairs that are disjoint from a hole pair ``{a, b}`` and weaker (or no stronger) than
it is its rank among all pairs, less its ranks among the 46 pairs holding ``a`` and the 46
holding ``b`` (inclusion-exclusion: only ``{a, b}`` itself holds both). All 1,176 boards are
handled in 2-D arrays, so a flop is a few dozen numpy calls.

Positions 0..48 index the remaining cards in ascending order; hole pairs are the rows of
``pairs(49)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import Final

import numpy as np
import numpy.typing as npt

from holdem.evaluator import evaluate_batch
from holdem.odds.combos import colex4, pair_index, pairs, quads
from holdem.odds.situation import category_of_strength, qualifying_strength
from holdem.odds.sweep import flop_counts

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]

REMAINING: Final = 49
HOLES: Final = 1176  # C(49, 2): hole pairs, and also turn/river pairs
OTHERS: Final = 47
DEALER_PAIRS: Final = 1081  # C(47, 2)
DISJOINT: Final = 990  # C(45, 2): dealer pairs disjoint from a hole pair


@dataclass(frozen=True)
class _Tables:
    seven: I32  # (1176, 1081): row in quads(49) of (turn/river + pair)
    hole: I32  # (1176, 1081): row in pairs(49) of the pair
    triple: I32  # (18424, 46): row in quads(49) of each 3-subset + each card outside it
    in_a: I32  # (1176, 1081): flat place in ``triple`` of (board + a, b) for pair {a, b}
    in_b: I32  # (1176, 1081): ... of (board + b, a)
    triple_a: I32  # (1176, 1081): row of the 3-subset board + a
    triple_b: I32  # (1176, 1081): ... board + b
    turn_a: I32  # (1176,): position of the first card of each turn/river pair
    turn_b: I32  # (1176,): ... of the second
    hole_turns: I32  # (1176, 47): turn positions open to each hole pair (not in it)


def _colex3(s: npt.NDArray[np.integer]) -> I64:
    s = np.asarray(s, dtype=np.int64)
    out: I64 = s[..., 0] + s[..., 1] * (s[..., 1] - 1) // 2
    out += s[..., 2] * (s[..., 2] - 1) * (s[..., 2] - 2) // 6
    return out


def _outside(sets: I32, n: int) -> I32:
    """For each row of positions, the positions of ``range(n)`` not in it, ascending."""
    mask = np.ones((len(sets), n), dtype=bool)
    mask[np.arange(len(sets))[:, None], sets] = False
    everything = np.broadcast_to(np.arange(n, dtype=np.int32), mask.shape)
    return everything[mask].reshape(len(sets), n - sets.shape[1])


@cache
def tables() -> _Tables:
    """The flop-independent index tables (built once per process)."""
    n = REMAINING
    board = pairs(n)
    others = _outside(board, n)  # (1176, 47)
    local = pairs(OTHERS)
    x = others[:, local]  # (1176, 1081, 2): positions of each pair
    a, b = x[..., 0], x[..., 1]
    four = np.sort(np.concatenate([np.broadcast_to(board[:, None, :], x.shape), x], axis=2))
    seven = colex4(four).astype(np.int32)
    hole = pair_index(n)[a, b]
    triples = np.array(sorted(combinations(range(n), 3), key=lambda t: t[::-1]), dtype=np.int32)
    outside = _outside(triples, n)  # (18424, 46)
    with_card = np.sort(
        np.concatenate(
            [np.broadcast_to(triples[:, None, :], (*outside.shape, 3)), outside[..., None]], axis=2
        )
    )
    triple = colex4(with_card).astype(np.int32)
    wide = np.broadcast_to(board[:, None, :], x.shape)

    def place(first: I32, second: I32) -> tuple[I32, I32]:
        three = np.sort(np.concatenate([wide, first[..., None]], axis=2), axis=2)
        row = _colex3(three).astype(np.int32)
        column = second - (three < second[..., None]).sum(axis=2)
        return row, (row * (n - 3) + column).astype(np.int32)

    triple_a, in_a = place(a, b)
    triple_b, in_b = place(b, a)
    return _Tables(
        seven=seven,
        hole=hole.astype(np.int32),
        triple=triple,
        in_a=in_a,
        in_b=in_b,
        triple_a=triple_a,
        triple_b=triple_b,
        turn_a=board[:, 0].copy(),
        turn_b=board[:, 1].copy(),
        hole_turns=others.copy(),
    )


def _ranks(values: U16, stable: bool) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Along the last axis: how many entries are below each one, and how many not above it."""
    order = np.argsort(values, axis=-1, kind="stable" if stable else None)
    ordered = np.take_along_axis(values, order, axis=-1)
    n = values.shape[-1]
    step = np.empty(ordered.shape, dtype=bool)
    step[..., 0] = True
    np.not_equal(ordered[..., 1:], ordered[..., :-1], out=step[..., 1:])
    place = np.arange(n, dtype=np.int32)
    below_sorted = np.maximum.accumulate(np.where(step, place, 0), axis=-1)
    last = np.empty_like(step)
    last[..., -1] = True
    last[..., :-1] = step[..., 1:]
    upto_sorted = np.minimum.accumulate(np.where(last, place + 1, n)[..., ::-1], axis=-1)[..., ::-1]
    below = np.empty(values.shape, dtype=np.int32)
    upto = np.empty(values.shape, dtype=np.int32)
    np.put_along_axis(below, order, below_sorted, axis=-1)
    np.put_along_axis(upto, order, upto_sorted, axis=-1)
    return below, upto


@dataclass(frozen=True)
class FlopShowdowns:
    """Per (turn/river pair, pair of the other 47): strength, category, and dealer counts.

    ``below``/``upto``: disjoint dealer pairs weaker than / no stronger than the pair's hand;
    ``no_qualify``: disjoint dealer pairs that do not qualify. Each row sums over 990.
    """

    remaining: npt.NDArray[np.uint8]
    strength: U16
    category: npt.NDArray[np.uint8]
    below: I32
    upto: I32
    no_qualify: I32


def flop_showdowns(flop: tuple[int, int, int], with_qualify: bool = True) -> FlopShowdowns:
    """Rank every (hole, board, dealer) of one flop: see the module docstring."""
    t = tables()
    remaining = np.array(sorted(set(range(52)) - set(flop)), dtype=np.uint8)
    q = quads(REMAINING)
    hands = np.empty((len(q), 7), dtype=np.uint8)
    hands[:, :3] = flop
    hands[:, 3:] = remaining[q]
    every = evaluate_batch(hands)
    strength = every[t.seven]  # (1176, 1081)
    by_triple = every[t.triple]  # (18424, 46)
    below_all, upto_all = _ranks(strength, stable=True)
    below_t, upto_t = _ranks(by_triple, stable=False)
    below_t, upto_t = below_t.ravel(), upto_t.ravel()
    below = below_all - below_t[t.in_a] - below_t[t.in_b]
    upto = upto_all - upto_t[t.in_a] - upto_t[t.in_b] + 1
    if with_qualify:
        threshold = qualifying_strength()
        weak = strength < threshold
        weak_t = (by_triple < threshold).sum(axis=1, dtype=np.int32)
        no_qualify = (
            weak.sum(axis=1, dtype=np.int32)[:, None]
            - weak_t[t.triple_a]
            - weak_t[t.triple_b]
            + weak
        )
    else:
        no_qualify = np.zeros_like(below)
    return FlopShowdowns(
        remaining=remaining,
        strength=strength,
        category=category_of_strength()[strength],
        below=below,
        upto=upto,
        no_qualify=no_qualify,
    )


def _per_hole(keys: I32, weights: npt.NDArray[np.integer], bins: int) -> I64:
    out = np.bincount(keys.ravel(), weights=weights.ravel(), minlength=bins)
    return np.rint(out).astype(np.int64)


@dataclass(frozen=True)
class CasinoHoldemFlop:
    """Outcome counts of a call for every hole pair of one flop (rows of ``pairs(49)``)."""

    remaining: npt.NDArray[np.uint8]
    no_qualify: I64  # (1176, 10) by the player's final category
    wins: I64  # (1176, 10)
    ties: I64  # (1176,)
    losses: I64  # (1176,)


def casino_holdem_flop_all(flop: tuple[int, int, int]) -> CasinoHoldemFlop:
    """Casino Hold'em call outcome counts of every hole pair of one flop."""
    return flop_all(flop, thp=False)[0]


def ranked_casino_holdem_flop_all(flop: tuple[int, int, int]) -> CasinoHoldemFlop:
    """:func:`casino_holdem_flop_all` by ranking in numpy (the check and the anchor)."""
    s = flop_showdowns(flop)
    t = tables()
    qualifies = s.strength >= qualifying_strength()
    nq = s.no_qualify
    wins = np.where(qualifies, s.below - nq, 0)
    ties = np.where(qualifies, s.upto - s.below, 0)
    losses = np.where(qualifies, DISJOINT - s.upto, DISJOINT - nq)
    key = t.hole * 10 + s.category
    return CasinoHoldemFlop(
        remaining=s.remaining,
        no_qualify=_per_hole(key, nq, HOLES * 10).reshape(HOLES, 10),
        wins=_per_hole(key, wins, HOLES * 10).reshape(HOLES, 10),
        ties=_per_hole(t.hole, ties, HOLES),
        losses=_per_hole(t.hole, losses, HOLES),
    )


@dataclass(frozen=True)
class ThpFlop:
    """Texas Hold'em Plus showdown counts per (hole pair, turn card) of one flop.

    Turn cards are each hole's 47 open positions in ascending order (``hole_turns``); each
    count is over 46 rivers x 990 house hands.
    """

    remaining: npt.NDArray[np.uint8]
    wins: I64  # (1176, 47, 10) by the player's final category
    losses: I64  # (1176, 47)


def thp_flop_all(flop: tuple[int, int, int]) -> ThpFlop:
    """Texas Hold'em Plus showdown counts of every hole pair and turn card of one flop."""
    return flop_all(flop, ch=False)[1]


def ranked_thp_flop_all(flop: tuple[int, int, int]) -> ThpFlop:
    """:func:`thp_flop_all` by ranking in numpy (the check and the anchor)."""
    s = flop_showdowns(flop, with_qualify=False)
    t = tables()
    losses = DISJOINT - s.upto
    bins = HOLES * REMAINING
    base = t.hole * REMAINING
    turn_a = base + t.turn_a[:, None]
    turn_b = base + t.turn_b[:, None]
    cat = s.category.astype(np.int32)
    win = _per_hole(turn_a * 10 + cat, s.below, bins * 10) + _per_hole(
        turn_b * 10 + cat, s.below, bins * 10
    )
    lose = _per_hole(turn_a, losses, bins) + _per_hole(turn_b, losses, bins)
    rows = np.arange(HOLES)[:, None]
    return ThpFlop(
        remaining=s.remaining,
        wins=win.reshape(HOLES, REMAINING, 10)[rows, t.hole_turns],
        losses=lose.reshape(HOLES, REMAINING)[rows, t.hole_turns],
    )


def flop_all(
    flop: tuple[int, int, int], ch: bool = True, thp: bool = True
) -> tuple[CasinoHoldemFlop, ThpFlop]:
    """Both games' counts of every hole pair of one flop, from one sweep.

    A game not asked for (``ch``, ``thp``) comes back all zeros, at no cost.
    """
    c = flop_counts(flop, ch=ch, thp=thp)
    return (
        CasinoHoldemFlop(c.remaining, c.ch_no_qualify, c.ch_wins, c.ch_ties, c.ch_losses),
        ThpFlop(c.remaining, c.thp_wins, c.thp_losses),
    )
