"""Integrity monitoring, proved by simulation: how soon each method alerts, and how often wrongly.

Casino Hold'em (classic pay table) rounds are simulated in numpy batches with the exact flop
tables of :mod:`holdem.integrity.tables` (built once, kept in the user's cache), with the
studio's game faults (:mod:`studio.gamefaults`: deal bias, completion bias, same rules) and
three player strategies (best play, always call, random). For each round:

- naive drift: main-game net per ante against the PAR sheet's best-strategy EV, each bet an
  independent sample with the PAR sheet's variance (how ``croupier:rtp_drift`` is read);
- deal value: best-play value of the cards against the pay table's exact mean and variance;
- play residual: return against the exact expectation of the decisions taken.

Rows:

- ``alert``: rounds until |z| >= 4 (the alert threshold; the alert also waits for 1,000
  rounds), median over seeds, per fault x strategy, single box and a 50-player shared hand;
  naive beside new. ``>N`` means it had not fired by the cap.
- ``no fault``: with a fair shoe, the share of seeds whose |z| after a fixed number of rounds
  exceeds 2 (nominal 4.55%) and 3 (nominal 0.27%), per strategy and seating (single box,
  50-player shared hand).
- ``boxes``: several boxes of one round share the board and the dealer. Through the real
  path (rules core and :class:`holdem.integrity.terms.Calculator`), fair rounds of one
  player per box: 5-box rounds' sum of squared play residuals over the sum of stated
  variances (1: exact), and the no-fault alarm rates of 7-box tables of both games and of a
  lone Texas Hold'em Plus box, per strategy (Texas Hold'em Plus best play: the action of
  greatest exact EV at each stage), with each statistic's scale over every round; and two
  boxes' ante deal correlation from the flop tables beside the stored exact one.
- ``day``: recomputing a day (190,000 rounds) through the real path (settled facts ->
  :func:`croupier.reports.integrity.prepare_settled` -> terms) as on a fresh machine: a new
  process on an empty table cache, wall and CPU seconds, the tables' build apart; see
  :func:`run_day` (``day-here``: the same in this process, on its cache).
- ``tables``: building the exact flop tables, see :func:`run_tables`: CPU per flop of both
  games by the compiled sweep beside the numpy ranking (the anchor, the path that built them
  before) on the same flops; then four ``croupier integrity --tables`` started at once on an
  empty cache, as on a fresh machine: one builds, the others wait and read.

``python -m bench integrity`` runs it; ``BENCH_SEEDS`` and ``BENCH_CAP`` change the effort.
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from math import erf, sqrt
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from holdem import Action, Deal, Decision, PayTable, Spot, Stage, Wager, load_paytable, settle
from holdem.evaluator import evaluate_batch
from holdem.integrity import tables
from holdem.integrity.constants import THP_FLOP_COMPLETIONS, load_constants
from holdem.integrity.terms import Calculator, Terms, calculator
from holdem.odds import engine, sweep
from holdem.odds.combos import canonical_flops, hole_class, pair_index, pairs
from holdem.odds.par import ParSheet, load_par
from holdem.odds.situation import (
    CH_COMPLETIONS,
    ante_multipliers,
    category_of_strength,
    qualifying_strength,
)
from holdem.paytable import Game
from studio.gamefaults import ONE_POINT

if TYPE_CHECKING:
    from croupier.reports.integrity import PreparedRound

TABLE = load_paytable("casino-holdem/classic")
ALERT_Z: Final = 4.0
MIN_ROUNDS: Final = 1_000
SEEDS: Final = int(os.environ.get("BENCH_SEEDS", "6"))
CAP: Final = int(os.environ.get("BENCH_CAP", "2000000"))
CHUNK: Final = 25_000
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Arrays:
    code: npt.NDArray[np.int16]  # sorted flop code -> canonical flop index
    perm: npt.NDArray[np.int8]  # sorted flop code -> renaming id
    rename: I64  # (renamings, 52): card -> renamed card
    position: I64  # (1755, 52): card -> position off the canonical flop, -1 on it
    ev: I64  # (1755, 1176)
    second: I64


@cache
def _arrays() -> _Arrays:
    multipliers = ante_multipliers(TABLE)

    def progress(done: int, total: int) -> None:
        if done % 200 == 0:
            print(f"   building the flop tables once: {done}/{total}", flush=True)

    tables.prepare(ch=[multipliers], progress=progress)
    index, ev, second = tables._CH_STORED[multipliers]
    code = np.full(52**3, -1, dtype=np.int16)
    perm = np.zeros(52**3, dtype=np.int8)
    renamings: dict[tuple[int, ...], int] = {}
    for image, (canonical, back) in tables._orbits().items():
        c = image[0] * 2704 + image[1] * 52 + image[2]
        code[c] = index[canonical]
        perm[c] = renamings.setdefault(back, len(renamings))
    rename = np.array(
        [[(card & ~3) | back[card & 3] for card in range(52)] for back in renamings],
        dtype=np.int64,
    )
    flops = [flop for flop, _ in canonical_flops()]
    position = np.array([tables._positions(f) for f in flops], dtype=np.int64)
    return _Arrays(code, perm, rename, position, ev, second)


@dataclass(frozen=True)
class Case:
    """A simulated table: seating, strategy, and the game faults' rates."""

    strategy: str
    boxes: int = 1
    players: int = 1
    deal_bias: float = 0.0
    completion_bias: float = 0.0


@dataclass
class Increments:
    """Per-round increments of each statistic: deviation from the mean, and variance."""

    naive: tuple[F64, F64]
    deal: tuple[F64, F64]
    play: tuple[F64, F64]
    net: F64  # main-game net in antes
    antes: F64


def simulate(case: Case, rounds: int, rng: np.random.Generator) -> Increments:
    """``rounds`` rounds of ``case``, every statistic's increment per round."""
    a = _arrays()
    k, n = case.boxes, case.players
    need = 2 * k + 9
    deck = rng.random((rounds, 52)).argsort(axis=1)[:, :need]
    if case.deal_bias:
        five = np.concatenate([deck[:, 0:2], deck[:, 2 * k + 2 : 2 * k + 5]], axis=1)
        again = _high_card(five) & (rng.random(rounds) < case.deal_bias)
        deck[again] = rng.random((int(again.sum()), 52)).argsort(axis=1)[:, :need]
    holes = deck[:, : 2 * k].reshape(rounds, k, 2)
    board = deck[:, 2 * k + 2 : 2 * k + 7]
    dealer = deck[:, 2 * k : 2 * k + 2].copy()
    qs = qualifying_strength()
    if case.completion_bias:
        first = evaluate_batch(np.concatenate([dealer, board], axis=1).astype(np.uint8))
        redraw = (first >= qs) & (rng.random(rounds) < case.completion_bias)
        dealer[redraw] = deck[redraw, 2 * k + 7 : 2 * k + 9]
    house = evaluate_batch(np.concatenate([dealer, board], axis=1).astype(np.uint8))
    wide = np.broadcast_to(board[:, None, :], (rounds, k, 5))
    player = evaluate_batch(
        np.concatenate([holes, wide], axis=2).reshape(-1, 7).astype(np.uint8)
    ).reshape(rounds, k)
    # The situation of each box in its canonical flop's table.
    flop = np.sort(board[:, :3], axis=1)
    code = flop[:, 0] * 2704 + flop[:, 1] * 52 + flop[:, 2]
    ci, pi = a.code[code].astype(np.int64), a.perm[code].astype(np.int64)
    renamed = a.rename[pi[:, None, None], holes]
    pos = a.position[ci[:, None, None], renamed]
    row = pair_index(49)[pos[..., 0], pos[..., 1]]
    ev = a.ev[ci[:, None], row] / CH_COMPLETIONS
    second = a.second[ci[:, None], row] / CH_COMPLETIONS
    calls = _calls(case.strategy, ev, n, rng)  # (rounds, k) callers' stakes, antes
    m = np.asarray(ante_multipliers(TABLE), dtype=np.float64)
    category = category_of_strength()[player]
    hv = house[:, None]
    x = np.where(hv < qs, m[category], np.where(player > hv, m[category] + 2, 0.0))
    x = np.where((hv >= qs) & (player < hv), -3.0, x)
    c = _constants()
    deal = (n * (np.maximum(ev, -1.0) - c.deal_mean)).sum(axis=1)
    play = (calls * (x - ev)).sum(axis=1)
    play_var = (calls**2 * np.maximum(second - ev**2, 0.0)).sum(axis=1)
    net = (calls * x - (n - calls)).sum(axis=1)
    antes = float(k * n)
    return Increments(
        naive=(net - c.par_ev * antes, np.full(rounds, c.par_var * antes)),
        deal=(deal, np.full(rounds, n * n * (k * c.deal_var + k * (k - 1) * c.deal_cross))),
        play=(play, play_var),
        net=net,
        antes=np.full(rounds, antes),
    )


def _calls(strategy: str, ev: F64, players: int, rng: np.random.Generator) -> F64:
    if strategy == "best play":
        return np.where(ev > -1.0, float(players), 0.0)
    if strategy == "always call":
        return np.full(ev.shape, float(players))
    return rng.binomial(players, 0.5, ev.shape).astype(np.float64)


def _high_card(five: I64) -> npt.NDArray[np.bool_]:
    ranks = np.sort(five >> 2, axis=1)
    distinct = np.all(ranks[:, 1:] != ranks[:, :-1], axis=1)
    flush = np.all((five & 3) == (five[:, :1] & 3), axis=1)
    wheel = np.all(ranks == np.array([0, 1, 2, 3, 12]), axis=1)
    straight = distinct & ((ranks[:, 4] - ranks[:, 0] == 4) | wheel)
    return distinct & ~flush & ~straight


@dataclass(frozen=True)
class _Constants:
    deal_mean: float
    deal_var: float
    deal_cross: float  # two boxes' ante values on one flop
    par_ev: float
    par_var: float


@cache
def _constants() -> _Constants:
    deal = load_constants(TABLE)
    base = load_par(TABLE).base
    return _Constants(
        float(deal.mean[0]),
        float(deal.covariance[0][0]),
        float(deal.cross[0][0]),
        float(base.ev()),
        float(base.variance()),
    )


# --- the rows ----------------------------------------------------------------------------


def rounds_until_alert(
    case: Case, seeds: int, cap: int, needed: tuple[str, ...]
) -> dict[str, list[int | None]]:
    """Per statistic and seed: rounds until |z| >= ALERT_Z (None: not yet).

    A seed runs until every statistic in ``needed`` fired, or ``cap`` rounds.
    """
    out: dict[str, list[int | None]] = {"naive": [], "deal": [], "play": []}
    ran: list[int | None] = []
    for seed in range(seeds):
        rng = np.random.default_rng(1_000 + seed)
        sums = {name: [0.0, 0.0] for name in out}
        fired: dict[str, int | None] = dict.fromkeys(out)
        done = 0
        while done < cap and any(fired[name] is None for name in needed):
            inc = simulate(case, CHUNK, rng)
            for name in out:
                if fired[name] is not None:
                    continue
                dev, var = getattr(inc, name)
                s = sums[name][0] + np.cumsum(dev)
                v = sums[name][1] + np.cumsum(var)
                z = np.abs(s) / np.sqrt(np.maximum(v, 1e-300))
                z[: max(0, MIN_ROUNDS - done)] = 0
                hit = np.flatnonzero(z >= ALERT_Z)
                if hit.size:
                    fired[name] = done + int(hit[0]) + 1
                sums[name] = [float(s[-1]), float(v[-1])]
            done += CHUNK
        for name in out:
            out[name].append(fired[name])
        ran.append(done)
    return {**out, "rounds": ran}


def alarm_rates(case: Case, seeds: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Per statistic: the share of seeds with |z| > 2 and > 3 after ``rounds`` fair rounds."""
    z: dict[str, list[float]] = {"naive": [], "deal": [], "play": []}
    for seed in range(seeds):
        inc = simulate(case, rounds, np.random.default_rng(50_000 + seed))
        for name in z:
            dev, var = getattr(inc, name)
            z[name].append(float(dev.sum() / sqrt(var.sum())))
    return {
        name: (float(np.mean(np.abs(v) > 2)), float(np.mean(np.abs(v) > 3)))
        for name, v in z.items()
    }


def rtp_shift(case: Case, rounds: int = 400_000) -> float:
    """How much the case's faults move the main-game return per ante (against no fault)."""
    fair = Case(case.strategy, case.boxes, case.players)
    faulty = simulate(case, rounds, np.random.default_rng(7))
    clean = simulate(fair, rounds, np.random.default_rng(7))
    return float(faulty.net.sum() / faulty.antes.sum() - clean.net.sum() / clean.antes.sum())


COMPLETION_SEEDS: Final = int(os.environ.get("BENCH_COMPLETION_SEEDS", "40"))


def completion_race(seeds: int = COMPLETION_SEEDS, echo: Callable[[str], None] = print) -> None:
    """Completion bias, best play, one box: the naive drift against the play residual.

    The bias acts after the decision, on calls only, so both statistics move by the same
    amount per round; the play residual leaves out the deal value's variance (about 1.05 of
    6.8 antes^2), so theory says it needs ``Var(play) / Var(naive)`` of the naive rounds,
    about 0.85. Rounds until the alert are a first-passage time with a wide spread: each
    seed runs both statistics on the same rounds and the row reports their per-seed ratio,
    with the drift estimate ``16 Var / shift^2`` (|z| = 4 in expectation) of each.
    """
    case = Case("best play", completion_bias=ONE_POINT["completion_bias"])
    got = rounds_until_alert(case, seeds, CAP, ("naive", "play"))
    pairs = [(n, p) for n, p in zip(got["naive"], got["play"], strict=True) if n and p]
    if not pairs:
        echo(f"completion bias: no seed fired both statistics by {CAP:,} rounds")
        return
    ratios = sorted(p / n for n, p in pairs)
    q = np.quantile(ratios, [0.25, 0.5, 0.75])
    naive = sorted(n for n, _ in pairs)
    play = sorted(p for _, p in pairs)
    echo(
        f"completion bias, best play, one box, {seeds} seeds ({len(pairs)} fired both by "
        f"{CAP:,} rounds): median rounds naive {int(statistics.median(naive)):,} "
        f"(quartiles {int(np.quantile(naive, 0.25)):,}-{int(np.quantile(naive, 0.75)):,}), "
        f"play residual {int(statistics.median(play)):,} "
        f"(quartiles {int(np.quantile(play, 0.25)):,}-{int(np.quantile(play, 0.75)):,}); "
        f"per-seed ratio play/naive median {q[1]:.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), "
        f"{sum(r <= 1 for r in ratios)}/{len(ratios)} seeds <= 1"
    )
    rng = np.random.default_rng(99)
    sums = {name: np.zeros(3) for name in ("naive", "play")}  # deviation, its square, stated
    chunks = int(os.environ.get("BENCH_DRIFT_CHUNKS", "80"))
    for _ in range(chunks):
        inc = simulate(case, CHUNK, rng)
        for name, total in sums.items():
            dev, var = getattr(inc, name)
            total += (dev.sum(), (dev * dev).sum(), var.sum())
    rounds = chunks * CHUNK
    stated = {name: total[2] / rounds for name, total in sums.items()}
    echo(
        f"   the fault acts after the decision, so both statistics move by the same amount "
        f"per round: rounds needed play/naive = stated variance play/naive = "
        f"{stated['play'] / stated['naive']:.3f}"
    )
    for name, (first, second, stated_sum) in sums.items():
        shift = first / rounds
        observed = second / rounds - shift * shift
        stated = stated_sum / rounds
        echo(
            f"   {name:<6} over {rounds:,} rounds: shift {shift:+.4f} antes/round "
            f"(+-{sqrt(observed / rounds):.4f}), stated variance {stated:.3f}, observed "
            f"{observed:.3f}: |z| = 4 in expectation after {16 * stated / shift**2:,.0f} rounds"
        )


def _median(values: list[int | None], ran: list[int | None]) -> str:
    """The median over seeds; ``>N`` when most seeds had not fired after N rounds."""
    shortest = min(r for r in ran if r is not None)
    if sum(v is None for v in values) * 2 >= len(values):
        return f">{shortest:,}"
    ordered = sorted(v if v is not None else shortest + 1 for v in values)
    return f"{int(statistics.median(ordered)):,}"


def run(
    seeds: int = SEEDS,
    cap: int = CAP,
    echo: Callable[[str], None] = print,
) -> None:
    """Print the alert and no-fault rows (see the module docstring)."""
    run_tables(echo)
    started = time.perf_counter()
    _arrays()
    echo(f"load: {os.getloadavg()[0]:.2f} (1 min); seeds {seeds}; alert at |z| >= {ALERT_Z}")
    strategies = ("best play", "always call", "random")
    seatings = {"single box": (1, 1), "shared hand x50": (1, 50)}
    faults = {
        "deal bias": {"deal_bias": ONE_POINT["deal_bias"]},
        "completion bias": {"completion_bias": ONE_POINT["completion_bias"]},
    }
    for fault, rate in faults.items():
        shift = rtp_shift(Case("best play", **rate))
        echo(f"{fault} at {rate}: main-game RTP moves {shift * 100:+.2f} points (best play)")
    echo("alert: median rounds until |z| >= 4 (naive drift | deal value | play residual)")
    relevant = {"deal bias": "deal", "completion bias": "play"}
    for fault, rate in faults.items():
        for seating, (boxes, players) in seatings.items():
            for strategy in strategies:
                case = Case(strategy, boxes, players, **rate)
                got = rounds_until_alert(case, seeds, cap, ("naive", relevant[fault]))
                ran = got.pop("rounds")
                cells = " | ".join(f"{name} {_median(v, ran):>10}" for name, v in got.items())
                echo(f"  {fault:<15} {seating:<16} {strategy:<12} {cells}")
    no_fault(seeds, echo)
    box_rows(echo)
    echo(f"({time.perf_counter() - started:.0f} s)")
    completion_race(echo=echo)
    real_path_rates(echo)
    run_day(echo)


def box_rows(echo: Callable[[str], None] = print) -> None:
    """Fair 5-box rounds through the real path: stated variance against squared residuals."""
    echo(
        "boxes of one round (real path: studio-style rounds, rules core, Calculator): "
        "sum of squared play residuals over the sum of stated variances (1 = exact, "
        "below 1 = on the safe side), and the z-score"
    )
    for paytable in ("casino-holdem/classic", "texas-holdem-plus/standard"):
        for strategy in ("always call", "random"):
            scale, z, n = box_scale(paytable, 5, strategy, MULTIBOX_ROUNDS)
            line = f"{scale:5.2f} over {n} rounds, z {z:+.2f}"
            echo(f"  {paytable:<28} 5 boxes {strategy:<12} {line}")


def no_fault(seeds: int = SEEDS, echo: Callable[[str], None] = print) -> None:
    """No fault: the share of seeds beyond |z| 2 and 3, per seating and strategy, every
    statistic (naive beside new), with the sampling error of the nominal rate."""
    strategies = ("best play", "always call", "random")
    seatings = {"single box": (1, 1), "shared hand x50": (1, 50)}
    horizon = 10_000
    many = max(100, seeds * 25)
    normal = 1 - erf(2 / sqrt(2)), 1 - erf(3 / sqrt(2))
    se = sqrt(normal[0] * (1 - normal[0]) / many), sqrt(normal[1] * (1 - normal[1]) / many)
    echo(
        f"no fault: share of {many} seeds with |z| > 2 / > 3 after {horizon:,} rounds "
        f"(nominal {normal[0]:.2%} +- {se[0]:.2%} / {normal[1]:.2%} +- {se[1]:.2%})"
    )
    for seating, (boxes, players) in seatings.items():
        for strategy in strategies:
            rates = alarm_rates(Case(strategy, boxes, players), many, horizon)
            cells = " | ".join(f"{name} {r2:6.2%} {r3:6.2%}" for name, (r2, r3) in rates.items())
            echo(f"  {seating:<16} {strategy:<12} {cells}")


MULTIBOX_ROUNDS: Final = int(os.environ.get("BENCH_MULTIBOX_ROUNDS", "300"))


def box_scale(paytable: str, boxes: int, strategy: str, rounds: int) -> tuple[float, float, int]:
    """Fair multi-box rounds through the real path: sum r^2 / sum variance, z, rounds."""
    table = load_paytable(paytable)
    rng = np.random.default_rng(17)
    squares = variance = total = 0.0
    for _ in range(rounds):
        terms, _, _ = _real_round(table, boxes, strategy, rng)
        residual = terms.play_actual - terms.play_expected
        squares += residual * residual
        variance += terms.play_variance
        total += residual
    return squares / variance, total / sqrt(variance), rounds


def _real_round(
    table: PayTable, boxes: int, strategy: str, rng: np.random.Generator
) -> tuple[Terms, float, float]:
    """A fair round of one player per box through the rules core and the calculator.

    Returns its terms and the naive drift's deviation and variance: main-game net against
    the PAR sheet's best-play EV per ante, every ante an independent sample.
    """

    calc = calculator(table)
    ch = table.game is Game.CASINO_HOLDEM
    stages = (Stage.FLOP,) if ch else (Stage.PREFLOP, Stage.FLOP, Stage.TURN)
    cards = rng.permutation(52)[: 2 * boxes + 7].tolist()
    holes = {str(b): (cards[2 * b], cards[2 * b + 1]) for b in range(boxes)}
    deal = Deal(holes, (cards[-7], cards[-6]), tuple(cards[-5:]))
    wagers, decisions = [], []
    for b in range(boxes):
        ante = f"a{b}"
        wagers.append(Wager(ante, f"p{b}", str(b), Spot.ANTE, 100))
        flop_bet = 0
        for stage in stages:
            if strategy == "best play":
                action = _best_action(calc, stage, holes[str(b)], deal.board, flop_bet)
            elif stage is stages[0]:
                call = strategy == "always call" or rng.random() < 0.5
                action = Action.CALL if call else Action.FOLD
            else:
                options = (Action.BET,) if strategy == "always call" else tuple(Action)[1:]
                action = options[int(rng.integers(len(options)))]
            if stage is Stage.FLOP:
                flop_bet = int(action is Action.BET)
            bet = f"{stage}{b}" if action in (Action.CALL, Action.BET) else None
            amount = (200 if action is Action.CALL else 100) if bet else None
            decisions.append(Decision(ante, stage, action, bet, amount))
            if action is Action.FOLD:
                break
    results = settle(table, deal, wagers, decisions).results
    main = (Spot.ANTE, Spot.CALL, Spot.FLOP_BET, Spot.TURN_BET)
    net = sum(r.returned - r.stake for r in results if r.spot in main)
    base = _par(table.id, table.version).base
    antes = [w.amount for w in wagers]
    naive = net - float(base.ev()) * sum(antes), float(base.variance()) * sum(a * a for a in antes)
    return calc.round(deal, results, decisions), naive[0], naive[1]


@cache
def _par(paytable_id: str, version: int) -> ParSheet:
    """A pay table's stored PAR sheet, parsed once (``load_par`` reads and parses its file)."""
    return load_par(load_paytable(paytable_id, version))


def _best_action(
    calc: Calculator, stage: Stage, hole: tuple[int, int], board: tuple[int, ...], flop_bet: int
) -> Action:
    """The action of greatest exact EV given the cards seen at ``stage``."""
    where = tables.place(hole, board[:3])
    if calc.table.game is Game.CASINO_HOLDEM:
        ev = float(tables.ch_flop_table(calc.multipliers, where.flop).ev[where.row])
        return Action.CALL if ev / CH_COMPLETIONS > -1.0 else Action.FOLD
    if stage is Stage.PREFLOP:
        preflop = _par(calc.table.id, calc.table.version).preflop_ev[hole_class(*hole)]
        return Action.CALL if preflop > -1 else Action.FOLD
    turn = tables.turn_index(where, hole, board[3])
    s = tables.thp_situation(calc.multipliers, where.flop, where.row, turn)
    if stage is Stage.FLOP:
        numerators = s.flop
    else:
        numerators = tables.turn_numerators(s.won, s.lost, s.paid, flop_bet)
    return (Action.CHECK, Action.FOLD, Action.BET)[int(np.argmax(numerators))]


REAL_SEEDS: Final = int(os.environ.get("BENCH_REAL_SEEDS", "100"))
REAL_ROUNDS: Final = int(os.environ.get("BENCH_REAL_ROUNDS", "150"))


def real_alarm_rates(
    paytable: str, boxes: int, strategy: str, seeds: int, rounds: int
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """Fair rounds through the real path: per statistic, the share of seeds beyond 2 and 3;
    and per new statistic its scale, the sum over every round of its squared deviation over
    the sum of its stated variance (1: the variance is exact; far tighter than a share)."""
    table = load_paytable(paytable)
    z: dict[str, list[float]] = {"naive": [], "deal": [], "play": []}
    squares = {"deal": 0.0, "play": 0.0}
    stated = {"deal": 0.0, "play": 0.0}
    for seed in range(seeds):
        rng = np.random.default_rng(70_000 + seed)
        total = Terms()
        naive = [0.0, 0.0]
        for _ in range(rounds):
            terms, dev, var = _real_round(table, boxes, strategy, rng)
            total += terms
            naive[0] += dev
            naive[1] += var
            squares["deal"] += (terms.deal_value - terms.deal_mean) ** 2
            squares["play"] += (terms.play_actual - terms.play_expected) ** 2
        stated["deal"] += total.deal_variance
        stated["play"] += total.play_variance + total.play_covariance
        z["naive"].append(naive[0] / sqrt(naive[1]))
        z["deal"].append(total.deal_z)
        z["play"].append(total.play_z)
    rates = {
        name: (float(np.mean(np.abs(v) > 2)), float(np.mean(np.abs(v) > 3)))
        for name, v in z.items()
    }
    return rates, {name: squares[name] / stated[name] for name in squares}


def box_correlation(paytable: str) -> float:
    """Two boxes dealt on one flop: their ante deal values' correlation, in floating point
    from the flop tables the Calculator reads (built first when missing); a check on the
    exact cross-covariance the deal constants store.

    Over every canonical flop (weighted by its orbit) and every ordered pair of disjoint
    holes on it.
    """
    table = load_paytable(paytable)
    multipliers = ante_multipliers(table)
    if table.game is Game.CASINO_HOLDEM:
        tables.prepare(ch=[multipliers])
    else:
        tables.prepare(thp=[multipliers])
    holes = np.asarray(pairs(49))
    incidence = np.zeros((len(holes), 49))
    incidence[np.arange(len(holes)), holes[:, 0]] = 1
    incidence[np.arange(len(holes)), holes[:, 1]] = 1
    disjoint = (incidence @ incidence.T == 0).astype(np.float64)
    others = int(disjoint[0].sum())  # holes disjoint from one hole: C(47, 2)
    first = second = cross = 0.0
    weights = 0
    for flop, weight in canonical_flops():
        value = _ante_values(table, multipliers, flop)
        first += weight * value.sum()
        second += weight * (value @ value)
        cross += weight * (value @ disjoint @ value)
        weights += weight
    situations = weights * len(holes)
    mean = first / situations
    variance = second / situations - mean * mean
    covariance = cross / (situations * others) - mean * mean
    return float(covariance / variance)


def _ante_values(table: PayTable, multipliers: tuple[int, ...], flop: tuple[int, ...]) -> F64:
    """Every hole's ante deal value on a canonical flop, per ante (the Calculator's)."""
    if table.game is Game.CASINO_HOLDEM:
        ev = tables.ch_flop_table(multipliers, flop).ev.astype(np.float64) / CH_COMPLETIONS
        return np.maximum(ev, -1.0)
    stored = tables._THP_STORED[multipliers]
    numerators = stored.arrays["flop"][stored.index[flop]].astype(np.float64)
    return numerators.max(axis=1) / THP_FLOP_COMPLETIONS


#: Tables through the real path: (pay table, boxes, strategy). A lone Texas Hold'em Plus box
#: beside its 7-box tables: the numpy rows above are Casino Hold'em's only.
REAL_CASES: Final = tuple(
    (paytable, boxes, strategy)
    for paytable, seatings in (
        ("casino-holdem/classic", (7,)),
        ("texas-holdem-plus/standard", (1, 7)),
    )
    for boxes in seatings
    for strategy in ("best play", "always call", "random")
)


def real_path_rates(echo: Callable[[str], None] = print) -> None:
    """No-fault alarm rates through the real path (see real_alarm_rates): 7-box tables of
    both games, and a lone Texas Hold'em Plus box. ``BENCH_REAL_PAYTABLES`` (comma-separated
    pay table ids) keeps the cases of those pay tables only, to run parts side by side."""
    seeds, rounds = REAL_SEEDS, REAL_ROUNDS
    only = {p for p in os.environ.get("BENCH_REAL_PAYTABLES", "").split(",") if p}
    se = sqrt(0.0455 * 0.9545 / seeds)
    echo(
        f"no fault, through the real path (settle + Calculator): share of {seeds} seeds "
        f"with |z| > 2 / > 3 after {rounds} rounds (nominal 4.55% +- {se:.2%} / 0.27%)"
    )
    for paytable in dict.fromkeys(p for p, _, _ in REAL_CASES):
        if not only or paytable in only:
            constants = load_constants(load_paytable(paytable))
            stored = float(constants.cross[0][0] / constants.covariance[0][0])
            echo(
                f"  {paytable:<28} two boxes' ante deal values correlate "
                f"{box_correlation(paytable):+.3%} (flop tables), {stored:+.3%} (exact, stored)"
            )
    for paytable, boxes, strategy in REAL_CASES:
        if only and paytable not in only:
            continue
        started = time.perf_counter()
        rates, scales = real_alarm_rates(paytable, boxes, strategy, seeds, rounds)
        cells = " | ".join(f"{name} {r2:6.2%} {r3:6.2%}" for name, (r2, r3) in rates.items())
        scale = " ".join(f"{name} {x:.3f}" for name, x in scales.items())
        spent = time.perf_counter() - started
        echo(
            f"  {paytable:<28} {boxes} box{'es' if boxes > 1 else '  '} {strategy:<12} {cells}"
            f" | scale {scale}   ({spent:.0f} s)"
        )


# --- the day: recomputing 190,000 rounds through the real path ----------------------------

DAY_ROUNDS: Final = int(os.environ.get("BENCH_DAY_ROUNDS", "190000"))
#: Seconds within which ``croupier integrity`` should answer for a day on a fresh machine.
DAY_TARGET: Final = 60.0
#: 100 tables: shared hands and boxes, both games, every pay table.
DAY_TABLES: Final = (
    "classic*20:shared=20",
    "progressive*15:shared=20",
    "royal-20*15:boxes=5",
    "standard*25:shared=20",
    "standard*25:boxes=5",
)


def day_facts(rounds: int = DAY_ROUNDS, seed: int = 3) -> tuple[list[str], float]:
    """A day of settled facts (as the ledger stores them: JSON) from the studio's tables.

    Each round is drafted by the studio (bets, cards, decisions with the simple strategy)
    and settled by the rules core, the fact carrying what ``round.settled`` carries. The
    facts are in the order a ledger records them: every table deals through the day, so
    their rounds interleave (the k-th of a table's n rounds at k/n of the day). Also
    returns the CPU seconds the rules core took to settle them (the anchor).
    """
    import json
    import random

    from studio.config import StudioConfig, parse_table_specs
    from studio.table import StudioTable

    config = StudioConfig(
        tables=parse_table_specs(list(DAY_TABLES), prefix="day"), rounds=rounds, seed=seed
    )
    master = random.Random(seed)
    out: list[tuple[float, int, str]] = []
    settling = 0.0
    for index, spec in enumerate(config.tables):
        table = StudioTable(spec, config, random.Random(master.getrandbits(64)), 0)
        meter = table.paytable.jackpot.seed if table.paytable.jackpot else None
        count = config.rounds_of(index)
        for k in range(count):
            deal, wagers, decisions, folds = _read_draft(table.draft_round().steps)
            jackpot = any(w.spot.value == "jackpot" for w in wagers)
            before = time.process_time()
            settled = settle(table.paytable, deal, wagers, decisions, meter if jackpot else None)
            settling += time.process_time() - before
            if settled.meter is not None:
                meter = settled.meter.after
            fact = {
                "paytable": {"id": table.paytable.id, "version": table.paytable.version},
                "deal": {
                    "boxes": {b: _text(h) for b, h in deal.boxes.items()},
                    "dealer": _text(deal.dealer),
                    "board": _text(deal.board),
                },
                "folds": folds,
                "results": [
                    {
                        "bet_id": r.bet_id,
                        "player_id": r.player,
                        "box": r.box,
                        "spot": str(r.spot),
                        "stake": r.stake,
                        "returned": r.returned,
                        "outcome": str(r.outcome),
                        "line": r.line,
                        "currency": "EUR",
                    }
                    for r in settled.results
                ],
            }
            out.append((k / count, index, json.dumps(fact)))
    return [fact for *_, fact in sorted(out)], settling


def _text(cards: tuple[int, ...]) -> str:
    from holdem.cards import cards_text

    return cards_text(cards)


def _read_draft(steps: list) -> tuple:  # type: ignore[type-arg]
    from contract.feed import EventType
    from holdem.cards import parse_card

    wagers, decisions, folds = [], [], {}
    holes: dict[str, list[int]] = {}
    dealer: list[int] = []
    board: list[int] = []
    for step in steps:
        p = step.payload
        if step.event_type is EventType.BET_PLACED:
            wagers.append(
                Wager(p["bet_id"], p["player_id"], p["box"], Spot(p["spot"]), p["amount"])
            )
        elif step.event_type is EventType.CARDS_DEALT:
            cards = [parse_card(c) for c in p["cards"]]
            if p["target"] == "player":
                holes.setdefault(p["box"], []).extend(cards)
            elif p["target"] == "dealer":
                dealer += cards
            elif p["target"] == "board":
                board += cards
        elif step.event_type is EventType.DECISION_MADE:
            action, stage = Action(p["action"]), Stage(p["stage"])
            decisions.append(
                Decision(p["ante_bet_id"], stage, action, p.get("bet_id"), p.get("amount"))
            )
            if action is Action.FOLD:
                folds[p["ante_bet_id"]] = str(stage)
    boxes = {box: (h[0], h[1]) for box, h in holes.items()}
    return Deal(boxes, (dealer[0], dealer[1]), tuple(board)), wagers, decisions, folds


def run_day(echo: Callable[[str], None] = print) -> None:
    """A day's recompute as on a fresh machine: a new process, an empty table cache."""
    with tempfile.TemporaryDirectory(prefix="croupier-day-") as empty:
        env = {**os.environ, "XDG_CACHE_HOME": empty}
        command = [sys.executable, "-m", "bench.integrity", "day-here"]
        with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as child:
            assert child.stdout is not None
            for line in child.stdout:
                echo(line.rstrip())
        if child.returncode:
            raise RuntimeError(f"python -m bench.integrity day-here failed ({child.returncode})")


def day_here(echo: Callable[[str], None] = print) -> None:
    """Time recomputing a day's integrity figures from its settled facts, in this process
    and on its table cache (empty, in :func:`run_day`): decoding (as the ledger decodes a
    stored fact) and grouping the facts, building or loading the tables, the terms; wall
    and CPU seconds of each."""
    from contract.canonical import read_json
    from croupier.cli.commands.integrity import BUILD_FROM, TablesAhead
    from croupier.reports.integrity import prepare_settled, summed_terms

    made = time.perf_counter()
    facts, settling = day_facts()
    echo(
        f"day: {len(facts):,} rounds drafted and settled in {time.perf_counter() - made:.0f} s "
        f"(not timed); tables: {', '.join(DAY_TABLES)}"
    )
    echo(
        f"day: anchor: the rules core settled the same rounds in {settling:.0f} s CPU "
        f"({len(facts) / max(settling, 1e-9):,.0f} rounds/s)"
    )
    building = not any(tables.cache_dir().glob("integrity-*"))
    load = os.getloadavg()[0]
    marks = [(time.perf_counter(), _cpu())]
    rounds = []
    ahead = TablesAhead()  # as croupier integrity: the tables built while the rest is read
    for page in range(0, len(facts), 2_000):  # as croupier integrity reads the ledger
        rounds += [
            p for body in facts[page : page + 2_000] for p in prepare_settled(read_json(body))
        ]
        gc.freeze()
        ahead.see(rounds)
    marks.append((time.perf_counter(), _cpu()))
    ahead.finish(rounds)
    marks.append((time.perf_counter(), _cpu()))
    totals = summed_terms(rounds)  # as croupier integrity sums them: a worker per core
    marks.append((time.perf_counter(), _cpu()))
    wall, cpu = (marks[-1][i] - marks[0][i] for i in (0, 1))
    (read_w, read_c), (build_w, build_c), (terms_w, terms_c) = (
        (b[0] - a[0], b[1] - a[1]) for a, b in pairwise(marks)
    )
    echo(
        f"day: recompute of {len(facts):,} rounds {wall:.1f} s wall, {cpu:.1f} s CPU "
        f"(load {load:.1f} -> {os.getloadavg()[0]:.1f}, {len(os.sched_getaffinity(0))} cores): "
        f"decode and group {read_w:.1f} s wall / {read_c:.1f} s CPU (the tables "
        f"{'built' if building else 'loaded'} meanwhile, from the first {BUILD_FROM:,} rounds' "
        f"pay tables), then the rest of the tables {build_w:.1f} / {build_c:.1f}, "
        f"terms {terms_w:.1f} / {terms_c:.1f}"
    )
    where = "on a fresh machine" if building else "with the tables stored"
    echo(
        f"day: {where}, answered in {wall:.0f} s wall: "
        f"{'met' if wall < DAY_TARGET else 'NOT met'} (under {DAY_TARGET:.0f} s); "
        f"{cpu:.0f} s CPU ({cpu / DAY_TARGET:.1f}x the target); anchor: the rules core settled "
        f"the same rounds in {settling:.0f} s CPU, {cpu / max(settling, 1e-9):.1f}x the anchor"
    )
    for kind, (count, each) in sorted(_terms_by_kind(rounds).items()):
        echo(f"   terms of {kind}: {count:,} rounds, {each:.3f} ms of CPU each (one thread)")
    for labels, t in sorted(totals.items()):
        echo(
            f"   {' '.join(labels)}: {t.rounds:,} rounds, "
            f"deal z {t.deal_z:+.2f}, play z {t.play_z:+.2f}"
        )
    gc.unfreeze()


#: Rounds of each kind timed one at a time, after the day, for the cost of each kind.
KIND_SAMPLE: Final = 2_000


def _cpu() -> float:
    """CPU seconds of this process and of its children waited for (the terms' workers)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


def _terms_by_kind(rounds: Sequence[PreparedRound]) -> dict[str, tuple[int, float]]:
    """Per kind of round (pay table, one box or several): how many, and the CPU
    milliseconds of one's terms, timed one at a time over up to ``KIND_SAMPLE`` of them."""
    kinds: dict[str, list[PreparedRound]] = {}
    for prepared in rounds:
        boxes = "boxes" if len(prepared.round.boxes) > 1 else "one box"
        kinds.setdefault(f"{prepared.table.id} {boxes}", []).append(prepared)
    costs = {}
    for kind, members in kinds.items():
        sample = members[:KIND_SAMPLE]
        before = time.thread_time()
        for prepared in sample:
            prepared.terms()
        costs[kind] = (len(members), (time.thread_time() - before) / len(sample) * 1e3)
    return costs


TABLE_FLOPS: Final = 6
BUILDERS: Final = 4
Flop = tuple[int, int, int]


def run_tables(echo: Callable[[str], None] = print) -> None:
    """The exact tables: the sweep against the numpy ranking, then a build on an empty cache."""
    ch = ante_multipliers(TABLE)
    thp = ante_multipliers(load_paytable("texas-holdem-plus/standard"))
    flops = [flop for flop, _ in canonical_flops()][100 :: 1755 // TABLE_FLOPS][:TABLE_FLOPS]
    engine.flop_all(flops[0])  # compiled (or loaded from numba's cache) outside the timing
    engine.ranked_casino_holdem_flop_all(flops[0])  # the ranking's index tables, likewise
    rows = {name: np.empty((1, 1176, 47), dtype=np.int64) for name in ("won", "lost")}
    rows |= {name: np.empty((1, 1176, 47), dtype=np.int64) for name in ("paid", "paid_square")}
    rows |= {"flop": np.empty((1, 1176, 3), np.int64), "spread": np.empty((1, 1176, 3))}

    def ranked(flop: Flop) -> None:
        c, t = engine.ranked_casino_holdem_flop_all(flop), engine.ranked_thp_flop_all(flop)
        tables._ch_of_counts(ch, c.no_qualify, c.wins, c.ties, c.losses)
        paid, square = tables._showdown_sums(thp, t.wins)
        tables._store_thp_flop(sweep.ThpSums(t.wins.sum(axis=-1), t.losses, paid, square), rows, 0)

    def swept(flop: Flop) -> None:
        c, (sums,) = sweep.flop_sums(flop, True, [thp])
        tables._ch_of_counts(ch, c.ch_no_qualify, c.ch_wins, c.ch_ties, c.ch_losses)
        tables._store_thp_flop(sums, rows, 0)

    spent = {"ranking": 0.0, "sweep": 0.0}
    for flop in flops:  # alternately, so a change in the machine's load falls on both
        for name, build_flop in (("ranking", ranked), ("sweep", swept)):
            before = time.process_time()
            build_flop(flop)
            spent[name] += time.process_time() - before
    old, new = (spent[name] / len(flops) for name in ("ranking", "sweep"))
    echo(
        f"tables: CPU per flop, both games (Casino Hold'em {TABLE.id} and Texas Hold'em Plus "
        f"standard), {len(flops)} flops: numpy ranking (anchor) {old * 1e3:.0f} ms, "
        f"compiled sweep {new * 1e3:.1f} ms: {old / new:.1f}x; all 1,755 flops: "
        f"{1755 * old:.0f} s against {1755 * new:.0f} s"
    )
    _fresh_build(old, echo)


def _fresh_build(anchor: float, echo: Callable[[str], None]) -> None:
    """Four ``croupier integrity --tables`` at once on an empty cache: wall and CPU of each."""
    croupier = os.path.join(os.path.dirname(sys.executable), "croupier")
    with tempfile.TemporaryDirectory(prefix="croupier-fresh-") as empty:
        env = {**os.environ, "XDG_CACHE_HOME": empty}
        load = os.getloadavg()[0]
        wall = time.perf_counter()
        running = [
            subprocess.Popen(
                [croupier, "integrity", "--tables"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(BUILDERS)
        ]
        ended: list[tuple[float, float, bool]] = []
        for process in running:
            assert process.stderr is not None
            said = process.stderr.read()
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode:
                raise RuntimeError(f"croupier integrity --tables failed: {said}")
            cpu = usage.ru_utime + usage.ru_stime
            ended.append((time.perf_counter() - wall, cpu, "waiting" in said))
    waited = [cpu for _, cpu, wait in ended if wait]
    built = [cpu for _, cpu, wait in ended if not wait]
    echo(
        f"tables: {BUILDERS} croupier integrity --tables at once on an empty cache (every "
        f"pay table): all done in {max(w for w, _, _ in ended):.0f} s wall (load {load:.1f}); "
        f"{len(built)} did not wait (built), CPU {', '.join(f'{c:.0f} s' for c in built)}; "
        f"{len(waited)} waited and read, CPU {', '.join(f'{c:.1f} s' for c in waited)}; "
        f"anchor: the ranking's {1755 * anchor:.0f} s CPU for the same build, each"
    )


if __name__ == "__main__":
    import sys

    parts = {
        "completion": completion_race,
        "nofault": no_fault,
        "boxes": real_path_rates,
        "scale": box_rows,
        "day": run_day,
        "day-here": day_here,
        "tables": run_tables,
        "all": run,
    }
    for part in sys.argv[1:] or ["all"]:
        parts[part]()
