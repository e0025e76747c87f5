"""Index tables for exhaustive enumeration: pairs, 4-subsets, suit-canonical flops, hole classes.

Everything here is built once per process and cached; none of it depends on a pay table.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import combinations, permutations
from math import comb
from typing import Final

import numpy as np
import numpy.typing as npt

from holdem.cards import RANKS, rank_of, suit_of

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]

#: The 24 permutations of the four suits.
SUIT_PERMUTATIONS: Final = tuple(permutations(range(4)))


@cache
def pairs(n: int) -> I32:
    """All pairs ``i < j`` of ``range(n)``, in lexicographic order: shape ``(C(n, 2), 2)``."""
    out = np.array(list(combinations(range(n), 2)), dtype=np.int32)
    out.setflags(write=False)
    return out


@cache
def pair_index(n: int) -> I32:
    """``(n, n)`` table: the row of pair ``{i, j}`` in :func:`pairs`, -1 on the diagonal."""
    table = np.full((n, n), -1, dtype=np.int32)
    p = pairs(n)
    rows = np.arange(len(p), dtype=np.int32)
    table[p[:, 0], p[:, 1]] = rows
    table[p[:, 1], p[:, 0]] = rows
    table.setflags(write=False)
    return table


@cache
def quads(n: int) -> I32:
    """All 4-subsets ``a < b < c < d`` of ``range(n)`` in colex order: row = :func:`colex4`."""
    out = np.array(list(combinations(range(n), 4)), dtype=np.int32)
    ranks = colex4(out)
    ordered = np.empty_like(out)
    ordered[ranks] = out
    ordered.setflags(write=False)
    return ordered


def colex4(subsets: npt.NDArray[np.integer]) -> I64:
    """Colex rank of sorted 4-subsets ``(..., 4)``: ``C(a,1) + C(b,2) + C(c,3) + C(d,4)``."""
    s = np.asarray(subsets, dtype=np.int64)
    a, b, c, d = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    out: I64 = a + b * (b - 1) // 2 + c * (c - 1) * (c - 2) // 6
    out += d * (d - 1) * (d - 2) * (d - 3) // 24
    return out


def permute_suits(card: int, perm: Sequence[int]) -> int:
    """A card with its suit renamed by ``perm``."""
    return (card & ~3) | perm[card & 3]


@cache
def canonical_flops() -> tuple[tuple[tuple[int, int, int], int], ...]:
    """The 1,755 flops that are distinct up to renaming suits, each with its orbit size.

    Each flop is the lexicographically smallest sorted card tuple of its orbit; the orbit
    sizes add up to C(52, 3) = 22,100.
    """
    orbits: dict[tuple[int, int, int], int] = {}
    for flop in combinations(range(52), 3):
        images = {tuple(sorted(permute_suits(c, perm) for c in flop)) for perm in SUIT_PERMUTATIONS}
        key = min(images)
        if key == flop:
            orbits[flop] = len(images)
    assert sum(orbits.values()) == comb(52, 3)
    return tuple(sorted(orbits.items()))


def hole_class(a: int, b: int) -> str:
    """The class of two hole cards up to suits: ``"AA"``, ``"AKs"``, ``"AKo"`` (169 in all)."""
    hi, lo = sorted((rank_of(a), rank_of(b)), reverse=True)
    text = RANKS[hi - 2] + RANKS[lo - 2]
    if hi == lo:
        return text
    return text + ("s" if suit_of(a) == suit_of(b) else "o")


@cache
def hole_classes() -> tuple[str, ...]:
    """The 169 hole classes, strongest-looking first (pairs, then suited, then offsuit)."""
    order = RANKS[::-1]
    out = [r + r for r in order]
    out += [order[i] + order[j] + "s" for i in range(13) for j in range(i + 1, 13)]
    out += [order[i] + order[j] + "o" for i in range(13) for j in range(i + 1, 13)]
    return tuple(out)


@cache
def hole_class_table() -> I32:
    """``(52, 52)`` table: the index in :func:`hole_classes` of two distinct cards."""
    index = {name: i for i, name in enumerate(hole_classes())}
    table = np.full((52, 52), -1, dtype=np.int32)
    for a, b in combinations(range(52), 2):
        table[a, b] = table[b, a] = index[hole_class(a, b)]
    table.setflags(write=False)
    return table


def class_size(name: str) -> int:
    """How many two-card combinations a hole class has: 6, 4 or 12."""
    return 6 if len(name) == 2 else 4 if name.endswith("s") else 12
