"""Exact decision tables of one flop, shared by every situation on it up to renaming suits.

A situation (two hole cards and a flop, and for Texas Hold'em Plus a turn card) is looked up
in the table of its flop's canonical form (:func:`holdem.odds.combos.canonical_flops`):
renaming suits changes no EV, so 1,755 flop tables cover all 22,100 flops. A table holds
every hole pair of the flop at once (:mod:`holdem.odds.engine`), so the rounds of a day that
share a flop, and the players of a shared hand, cost one table between them.

Numerators are exact integers over the completions counted: Casino Hold'em over
:data:`~holdem.odds.situation.CH_COMPLETIONS`; a Texas Hold'em Plus turn over
:data:`~holdem.odds.situation.THP_TURN_COMPLETIONS`, its flop over 47 times that.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from holdem.odds import engine, situation
from holdem.odds.combos import SUIT_PERMUTATIONS, canonical_flops, pair_index, permute_suits
from holdem.odds.engine import casino_holdem_flop_all, thp_flop_all
from holdem.odds.situation import THP_TURN_COMPLETIONS, ch_call_numerator, thp_turn_numerators

I64 = npt.NDArray[np.int64]
Flop = tuple[int, int, int]
Multipliers = tuple[int, ...]
Progress = Callable[[int, int], None]

#: Flop tables of each game kept at once (a Texas Hold'em Plus table is a few megabytes).
CH_TABLES_KEPT: Final = 4096
THP_TABLES_KEPT: Final = 24


@cache
def _orbits() -> dict[Flop, tuple[Flop, tuple[int, ...]]]:
    """Every sorted flop -> (its canonical flop, the suit renaming that maps it there)."""
    out: dict[Flop, tuple[Flop, tuple[int, ...]]] = {}
    for flop, _ in canonical_flops():
        for perm in SUIT_PERMUTATIONS:
            image = tuple(sorted(permute_suits(c, perm) for c in flop))
            if image not in out:
                back = [0, 0, 0, 0]
                for suit, renamed in enumerate(perm):
                    back[renamed] = suit
                out[(image[0], image[1], image[2])] = (flop, tuple(back))
    assert len(out) == 22_100
    return out


@dataclass(frozen=True, slots=True)
class Place:
    """Where a situation sits in its flop's table: the canonical flop and the hole's row."""

    flop: Flop
    row: int
    perm: tuple[int, ...]
    position: tuple[int, ...]  # card -> its place among the 49 cards off the flop, or -1


def place(hole: Sequence[int], flop: Sequence[int]) -> Place:
    """The canonical flop and hole row of a (hole, flop) situation."""
    key = tuple(sorted(flop))
    canonical, perm = _orbits()[(key[0], key[1], key[2])]
    position = _positions(canonical)
    a, b = (position[permute_suits(c, perm)] for c in hole)
    assert a >= 0 and b >= 0, "hole cards are not on the flop"
    return Place(canonical, int(pair_index(49)[a, b]), perm, position)


@lru_cache(maxsize=2048)
def _positions(flop: Flop) -> tuple[int, ...]:
    out = [-1] * 52
    for i, card in enumerate(sorted(set(range(52)) - set(flop))):
        out[card] = i
    return tuple(out)


def turn_index(where: Place, hole: Sequence[int], turn: int) -> int:
    """The turn card's index among the hole's 47 open cards (ascending positions)."""
    p = where.position[permute_suits(turn, where.perm)]
    a, b = (where.position[permute_suits(c, where.perm)] for c in hole)
    assert p >= 0 and p not in (a, b), "the turn is not an open card"
    return p - (a < p) - (b < p)


# --- Casino Hold'em -----------------------------------------------------------------------


@dataclass(frozen=True)
class ChFlopTable:
    """A call's net win per ante, every hole pair of one canonical flop.

    ``ev`` and ``second`` are the sums of the net and of its square over the completions.
    """

    ev: I64
    second: I64


@lru_cache(maxsize=2)
def _ch_counts(flop: Flop) -> tuple[I64, I64, I64, I64]:
    c = casino_holdem_flop_all(flop)
    return c.no_qualify, c.wins, c.ties, c.losses


_CH_EVERY: dict[Multipliers, tuple[dict[Flop, int], I64, I64]] = {}


def ch_flop_table(multipliers: Multipliers, flop: Flop) -> ChFlopTable:
    """The Casino Hold'em table of a canonical flop under one ante table."""
    every = _CH_EVERY.get(multipliers)
    if every is not None:
        index, ev, second = every
        i = index[flop]
        return ChFlopTable(ev[i], second[i])
    return _ch_flop_table(multipliers, flop)


@lru_cache(maxsize=CH_TABLES_KEPT)
def _ch_flop_table(multipliers: Multipliers, flop: Flop) -> ChFlopTable:
    no_qualify, wins, _, losses = _ch_counts(flop)
    m = np.asarray(multipliers, dtype=np.int64)
    ev = ch_call_numerator(no_qualify, wins, losses, multipliers)
    second = no_qualify @ (m * m) + wins @ ((m + 2) * (m + 2)) + 9 * losses
    ev.setflags(write=False)
    second.setflags(write=False)
    return ChFlopTable(ev, second)


def preload_ch(multipliers: Multipliers, progress: Progress | None = None) -> None:
    """Hold the Casino Hold'em tables of every canonical flop in memory (about 33 MB).

    Built once (every flop enumerated, minutes) and kept on disk under the user's cache
    directory, keyed on the ante table and the engine's source; later calls load the file.
    """
    if multipliers in _CH_EVERY:
        return
    flops = [flop for flop, _ in canonical_flops()]
    path = _cache_file(multipliers)
    try:
        with np.load(path) as stored:
            ev, second = stored["ev"], stored["second"]
    except (OSError, KeyError, ValueError):
        ev = np.empty((len(flops), 1176), dtype=np.int64)
        second = np.empty_like(ev)
        for i, flop in enumerate(flops):
            table = _ch_flop_table(multipliers, flop)
            ev[i], second[i] = table.ev, table.second
            if progress:
                progress(i + 1, len(flops))
        _store(path, ev=ev, second=second)
    assert ev.shape == (len(flops), 1176) and second.shape == ev.shape
    _CH_EVERY[multipliers] = ({f: i for i, f in enumerate(flops)}, ev, second)


def _cache_file(multipliers: Multipliers) -> Path:
    # Keyed on the code that counts the outcomes, and on the ante table.
    source = b"".join(Path(module.__file__ or "").read_bytes() for module in (engine, situation))
    digest = hashlib.sha256(repr(multipliers).encode() + source).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "croupier" / f"integrity-ch-{digest}.npz"


def _store(path: Path, **arrays: I64) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as handle:
            np.savez(handle, **arrays)  # type: ignore[arg-type]
        os.replace(handle.name, path)
    except OSError:
        pass  # a read-only home only costs the rebuild


# --- Texas Hold'em Plus ---------------------------------------------------------------------


@dataclass(frozen=True)
class ThpFlopTable:
    """Texas Hold'em Plus values of every hole pair and turn card of one canonical flop.

    - ``wins`` (1176, 47, 10), ``losses`` (1176, 47): showdown counts after each turn card
      (the player's final category on the last axis), over 45,540 completions each.
    - ``best_turn`` (2, 1176, 47): the best turn action's net numerator after a flop check
      (0) or flop bet (1): 45,540 times the best-play value after the turn card.
    - ``flop`` (1176, 3): flop numerators of check, fold, bet over 47 x 45,540.
    """

    wins: I64
    losses: I64
    best_turn: I64
    flop: I64


@lru_cache(maxsize=THP_TABLES_KEPT)
def thp_flop_table(multipliers: Multipliers, flop: Flop) -> ThpFlopTable:
    """The Texas Hold'em Plus table of a canonical flop under one ante table."""
    counts = thp_flop_all(flop)
    wins, losses = counts.wins, counts.losses
    best = np.stack(
        [
            thp_turn_numerators(wins, losses, THP_TURN_COMPLETIONS, fb, multipliers).max(axis=-1)
            for fb in (0, 1)
        ]
    )
    check = best[0].sum(axis=-1)
    bet = best[1].sum(axis=-1)
    fold = np.full_like(check, -3 * THP_TURN_COMPLETIONS * 47)
    flop_n = np.stack([check, fold, bet], axis=-1)
    for array in (wins, losses, best, flop_n):
        array.setflags(write=False)
    return ThpFlopTable(wins, losses, best, flop_n)


@dataclass(frozen=True, slots=True)
class ThpSituation:
    """What one Texas Hold'em Plus situation (hole, flop, turn card) needs from its table.

    - ``flop``: flop numerators of check, fold, bet (over 47 x 45,540);
    - ``after``: the best-play value after this turn card, following a flop check or bet
      (antes);
    - ``spread``: over the 47 possible turn cards, the variance of the value after a check,
      its covariance with the value after a bet, and the variance after a bet (antes^2);
    - ``wins`` (by the player's final category) and ``losses`` after this turn card, over
      45,540 completions.
    """

    flop: tuple[int, int, int]
    after: tuple[float, float]
    spread: tuple[float, float, float]
    wins: tuple[int, ...]
    losses: int


_THP_KNOWN: dict[tuple[Multipliers, Flop, int, int], ThpSituation] = {}


def thp_situation(multipliers: Multipliers, flop: Flop, row: int, turn: int) -> ThpSituation:
    """One situation of a canonical flop: prefetched, else from the flop's table."""
    known = _THP_KNOWN.get((multipliers, flop, row, turn))
    if known is not None:
        return known
    return _thp_situation(thp_flop_table(multipliers, flop), row, turn)


def _thp_situation(table: ThpFlopTable, row: int, turn: int) -> ThpSituation:
    after = table.best_turn[:, row, :].astype(np.float64) / THP_TURN_COMPLETIONS
    centred = after - after.mean(axis=1, keepdims=True)
    spread = (centred @ centred.T) / after.shape[1]
    f = table.flop[row]
    return ThpSituation(
        (int(f[0]), int(f[1]), int(f[2])),
        (float(after[0, turn]), float(after[1, turn])),
        (float(spread[0, 0]), float(spread[0, 1]), float(spread[1, 1])),
        tuple(int(x) for x in table.wins[row, turn]),
        int(table.losses[row, turn]),
    )


def prefetch_thp(
    multipliers: Multipliers,
    situations: Iterable[tuple[Flop, int, int]],
    progress: Progress | None = None,
) -> None:
    """Compute many situations flop by flop, each flop's table once (a recompute's pass)."""
    by_flop: dict[Flop, set[tuple[int, int]]] = {}
    for flop, row, turn in situations:
        by_flop.setdefault(flop, set()).add((row, turn))
    for done, (flop, wanted) in enumerate(sorted(by_flop.items()), 1):
        table = thp_flop_table(multipliers, flop)
        for row, turn in wanted:
            _THP_KNOWN[(multipliers, flop, row, turn)] = _thp_situation(table, row, turn)
        if progress:
            progress(done, len(by_flop))


def forget_prefetched() -> None:
    """Drop prefetched situations (after a recompute)."""
    _THP_KNOWN.clear()
