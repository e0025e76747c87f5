"""The PAR sheets' compiled steps after a flop's counts: best play per hole, five-card keys.

A flop's showdown counts come from :mod:`holdem.odds.sweep` (shared with the integrity
tables). From them, :func:`thp_tables` takes the Texas Hold'em Plus turn and flop decisions
of every hole pair by exact EV and adds what they lead to into per-hole-class counts, for
several pay tables from one flop's counts; :func:`evaluate_batch5` values the five-card
hands (hole + flop) the Casino Hold'em side bets are judged on, with the evaluator's own
look-up tables. Every number is an integer; nothing is rounded.

Compiled with numba on first use (kept in numba's cache, as the sweep is); importing this
module does not import numba.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from holdem import evaluator

I64 = npt.NDArray[np.int64]

HOLES: Final = 1176  # C(49, 2): hole pairs of a flop
#: Per-class layout of :func:`thp_tables`: situations, EV sum, outcomes (flop fold, turn
#: fold after a flop check, after a flop bet, then for each (flop bet, turn bet) a block of
#: wins by category, tie, loss), decisions (flop check/fold/bet, turn after a check, after a
#: bet).
THP_BLOCK: Final = 12
THP_OUTCOMES: Final = 3 + 4 * THP_BLOCK
THP_SIZE: Final = 2 + THP_OUTCOMES + 9
_TURN_COMPLETIONS: Final = 45_540  # 46 rivers x 990 house hands


def _thp_tables(
    wins: Any, losses: Any, multipliers: Any, classes: Any, out: Any
) -> None:  # pragma: no cover - compiled
    total = _TURN_COMPLETIONS
    turns = wins.shape[1]
    best = np.empty((2, turns), dtype=np.int64)
    flop_n = np.empty(3, dtype=np.int64)
    for i in range(multipliers.shape[0]):
        m = multipliers[i]
        for h in range(wins.shape[0]):
            flop_n[0] = 0
            flop_n[1] = -3 * total * turns
            flop_n[2] = 0
            for j in range(turns):
                lose = losses[h, j]
                won = 0
                paid = 0
                for c in range(10):
                    won += wins[h, j, c]
                    paid += wins[h, j, c] * m[c]
                for flop_bet in range(2):
                    played = 2 + flop_bet
                    check = paid + played * won - lose * (1 + played)
                    fold = -(1 + played) * total
                    bet = check + won - lose
                    # Ties go to the first of check, fold, bet.
                    arg = 0
                    value = check
                    if fold > value:
                        arg = 1
                        value = fold
                    if bet > value:
                        arg = 2
                        value = bet
                    best[flop_bet, j] = arg
                    flop_n[2 * flop_bet] += value
            action = 0
            if flop_n[1] > flop_n[0]:
                action = 1
            if flop_n[2] > flop_n[action]:
                action = 2
            row = out[i, classes[h]]
            row[0] += 1
            row[1] += flop_n[action]
            row[2 + THP_OUTCOMES + action] += 1
            if action == 1:
                row[2] += total * turns
                continue
            flop_bet = 1 if action == 2 else 0
            for j in range(turns):
                turn_action = best[flop_bet, j]
                row[2 + THP_OUTCOMES + 3 + 3 * flop_bet + turn_action] += 1
                if turn_action == 1:
                    row[3 + flop_bet] += total
                    continue
                start = 5 + (flop_bet * 2 + turn_action // 2) * THP_BLOCK
                won = 0
                for c in range(10):
                    row[start + c] += wins[h, j, c]
                    won += wins[h, j, c]
                row[start + 10] += total - won - losses[h, j]
                row[start + 11] += losses[h, j]


def thp_tables(
    wins: I64,
    losses: I64,
    tables: Sequence[Sequence[int]],
    classes: npt.NDArray[np.int64],
    class_count: int,
) -> I64:
    """Best-play counts per pay table and hole class from one flop's showdown counts.

    ``wins`` (holes, 47, 10) and ``losses`` (holes, 47) are per hole and turn card, over
    45,540 completions each (:class:`holdem.odds.sweep.FlopCounts`); ``tables`` are ante
    multipliers, high card first; ``classes`` gives each hole's class. Returns
    ``(len(tables), class_count, THP_SIZE)``, each hole counted once, unweighted.
    """
    out = np.zeros((len(tables), class_count, THP_SIZE), dtype=np.int64)
    _compiled()[0](wins, losses, np.array(tables, dtype=np.int64), classes, out)
    return out


def _value_fives(
    hands: Any,
    card_keys: Any,
    suit5: Any,
    face_sums: Any,
    face_strengths: Any,
    flush: Any,
    rank_bits: Any,
) -> Any:  # pragma: no cover - compiled
    out = np.empty(hands.shape[0], dtype=np.int64)
    for i in range(hands.shape[0]):
        key = 0
        for j in range(5):
            key += card_keys[hands[i, j]]
        suit = suit5[key & 511]
        if suit < 0:
            out[i] = face_strengths[np.searchsorted(face_sums, key >> 9)]
        else:
            mask = 0
            for j in range(5):
                mask |= rank_bits[hands[i, j]]
            out[i] = flush[mask]
    return out


@cache
def five_card_tables() -> tuple[I64, I64, npt.NDArray[np.int8]]:
    """The evaluator's five-card tables: face-key sums (sorted), their strengths, and the
    suit-key sum -> flush suit (or -1) table."""
    t = evaluator._T
    sums = np.array(sorted(t.ranks[5]), dtype=np.int64)
    strengths = np.array([t.ranks[5][int(k)] for k in sums], dtype=np.int64)
    return sums, strengths, np.array(t.suits[5], dtype=np.int8)


def evaluate_batch5(hands: npt.NDArray[np.uint8]) -> I64:
    """Strengths of five-card hands, an ``(n, 5)`` array of distinct card ids, as
    :func:`holdem.evaluator.evaluate` values them (the same look-up tables)."""
    t = evaluator._T
    sums, strengths, suit5 = five_card_tables()
    out: I64 = _compiled()[1](
        hands,
        t.np_card_keys.astype(np.int64),
        suit5,
        sums,
        strengths,
        t.np_flush,
        t.np_rank_bits.astype(np.int64),
    )
    return out


@cache
def _compiled() -> tuple[Any, Any]:
    from numba import njit  # imported here: only computing a PAR sheet pays numba's import

    return njit(cache=True, nogil=True)(_thp_tables), njit(cache=True, nogil=True)(_value_fives)
