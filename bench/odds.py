"""Exact odds of one Casino Hold'em flop situation, on one core, against a phevaluator loop.

(a) ``holdem.odds.situation.casino_holdem_flop``: all 1,070,190 completions of one situation
    (178,365 dealer hands and 1,081 player hands through ``evaluate_batch``, then vectorised
    comparison of the six (turn/river, dealer pair) splits of each 4-subset);
(b) the same situation with a Python loop calling phevaluator's ``evaluate_7cards`` once per
    hand (the same 179,446 hands), then the same vectorised counting.

Both give the same counts (checked). Timings are the best of several interleaved runs, pinned
to one CPU; the target (50 ms) is printed, not asserted. The Texas Hold'em Plus flop and turn
situations are timed too. Full PAR sheet timings are printed by ``make par``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench.evaluator import one_core
from holdem.cards import parse_cards
from holdem.odds.combos import pairs, quads
from holdem.odds.situation import (
    casino_holdem_flop,
    category_of_strength,
    flop_splits,
    qualifying_strength,
    texas_holdem_plus_flop,
    texas_holdem_plus_turn,
)
from holdem.paytable import load_paytable

SITUATIONS = (("AsKd", "Qh7c2s"), ("9c8c", "4d4s3h"), ("QsJs", "AsTs3d"))
REPEATS = 5
TARGET_MS = 50.0


def phevaluator_counts(hole: list[int], flop: list[int]) -> tuple[int, int, int, int]:
    """(dealer does not qualify, wins, ties, losses) with phevaluator valuing every hand."""
    from phevaluator import _pheval

    evaluate_7cards = _pheval.evaluate_7cards
    unseen = np.array(sorted(set(range(52)) - set(hole) - set(flop)), dtype=np.int64)
    f0, f1, f2 = flop
    h0, h1 = hole
    dealer = np.array(
        [evaluate_7cards(f0, f1, f2, a, b, c, d) for a, b, c, d in unseen[quads(47)].tolist()],
        dtype=np.int64,
    )
    player = np.array(
        [evaluate_7cards(h0, h1, f0, f1, f2, a, b) for a, b in unseen[pairs(47)].tolist()],
        dtype=np.int64,
    )
    # phevaluator: smaller is stronger. The strongest pair of threes bounds qualification.
    threes = evaluate_7cards(4, 5, 51, 47, 43, 0, 10)
    pv = player[flop_splits()]
    dv = dealer[:, None]
    qualifies = np.broadcast_to(dv < threes, pv.shape)
    return (
        int(np.count_nonzero(~qualifies)),
        int(np.count_nonzero(qualifies & (pv < dv))),
        int(np.count_nonzero(qualifies & (pv == dv))),
        int(np.count_nonzero(qualifies & (pv > dv))),
    )


def _best(works: list[Callable[[], Any]]) -> list[float]:
    best = [float("inf")] * len(works)
    for _ in range(REPEATS):
        for i, work in enumerate(works):
            started = time.perf_counter()
            work()
            best[i] = min(best[i], time.perf_counter() - started)
    return best


def run() -> None:
    classic = load_paytable("casino-holdem/classic")
    thp = load_paytable("texas-holdem-plus/standard")
    # Warm the caches (index tables, strength tables) before timing.
    casino_holdem_flop(classic, *SITUATIONS[0])
    category_of_strength()
    qualifying_strength()
    with one_core():
        for hole, flop in SITUATIONS:
            h, f = parse_cards(hole), parse_cards(flop)
            ours = casino_holdem_flop(classic, h, f)
            theirs = phevaluator_counts(h, f)
            assert theirs == (
                sum(ours.dealer_does_not_qualify),
                sum(ours.wins),
                ours.ties,
                ours.losses,
            ), "phevaluator and holdem.odds disagree"
            t_ours, t_ph = _best(
                [partial(casino_holdem_flop, classic, h, f), partial(phevaluator_counts, h, f)]
            )
            verdict = "met" if t_ours * 1e3 <= TARGET_MS else "missed"
            print(
                f"Casino Hold'em flop {hole} {flop}: holdem.odds {t_ours * 1e3:6.1f} ms, "
                f"phevaluator loop {t_ph * 1e3:6.1f} ms, ratio {t_ph / t_ours:5.1f}x "
                f"(target <= {TARGET_MS:.0f} ms: {verdict})"
            )
        t_flop, t_turn = _best(
            [
                lambda: texas_holdem_plus_flop(thp, "AsKd", "Qh7c2s"),
                lambda: texas_holdem_plus_turn(thp, "AsKd", "Qh7c2s", "3d"),
            ]
        )
        print(
            f"Texas Hold'em Plus AsKd Qh7c2s: flop decision {t_flop * 1e3:.1f} ms "
            f"(47 turns x 45,540), turn decision (3d) {t_turn * 1e3:.1f} ms"
        )
    print("Full PAR sheets: `make par` prints their timings.")


if __name__ == "__main__":
    run()
