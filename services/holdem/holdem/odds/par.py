"""PAR sheets by full enumeration, and the stored PAR data beside the pay tables.

Casino Hold'em: every (hole, flop) situation, 1,326 x 19,600 = 25,989,600 of them, is
decided by its exact call EV (:mod:`holdem.odds.engine`): call when it beats the fold's -1
ante, fold when it does not (a tie folds, the smaller stake). Flops are taken up to renaming
suits (1,755 of them), each weighted by the size of its orbit (the 22,100 flops in all).

Texas Hold'em Plus: for every (hole, flop) the flop and turn decisions are taken by exact EV
(ties go to the smaller stake, check before fold); the preflop EV of a hole class is the mean
over every flop of its best flop EV, and the player calls when it beats -1 ante.

PAR sheets are computed once per pay table version (``croupier par --all --write``) and stored
in ``holdem/par/<pay table file stem>.json`` with the pay table's id, version and content
hash; :func:`load_par` reads them and refuses data for another content hash.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from fractions import Fraction
from functools import cache
from importlib import resources
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkProcess
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from holdem.bets import Action, Stage
from holdem.cards import CardError, parse_cards
from holdem.casino_holdem import CATEGORY_LINE, aa_bonus_line, jackpot_line
from holdem.evaluator import HAND_CLASSES, Category, evaluate, hand_value
from holdem.odds import sidebets
from holdem.odds.combos import canonical_flops, hole_class, hole_class_table, hole_classes, pairs
from holdem.odds.kernel import THP_BLOCK, THP_OUTCOMES, evaluate_batch5, thp_tables
from holdem.odds.sheet import BetSheet, DecisionSheet, Line, ParSheet
from holdem.odds.situation import (
    CH_COMPLETIONS,
    THP_ACTIONS,
    THP_TURN_COMPLETIONS,
    THP_TURNS,
    ThpDecisionOdds,
    ante_multipliers,
    ch_call_numerator,
)
from holdem.odds.sweep import flop_counts
from holdem.paytable import Game, PayTable, PayTableError, Spot

I64 = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]

SITUATIONS: Final = 1326 * 19600  # (hole, flop) pairs: 25,989,600
FLOPS_PER_HOLE: Final = 19600  # C(50, 3)
THP_FLOP_COMPLETIONS: Final = THP_TURNS * THP_TURN_COMPLETIONS  # 2,140,380

# Five-card (hole + flop) line keys: the category, with a pair of aces apart as 10.
_FIVE_KEYS: Final = 11
_PAIR_OF_ACES_KEY: Final = 10
_CATEGORIES: Final = tuple(Category)
# Strongest first, a pair of aces just above the other pairs.
_FIVE_ORDER: Final = (9, 8, 7, 6, 5, 4, 3, 2, _PAIR_OF_ACES_KEY, 1, 0)


@cache
def _five_key_of_strength() -> I64:
    """Strength (0..7462) -> five-card line key."""
    out = np.zeros(HAND_CLASSES + 1, dtype=np.int64)
    for strength in range(1, HAND_CLASSES + 1):
        value = hand_value(strength)
        aces = value.category is Category.PAIR and value.ranks[0] == 14
        out[strength] = _PAIR_OF_ACES_KEY if aces else int(value.category)
    return out


def _five_keys(flop: tuple[int, int, int], holes: npt.NDArray[np.uint8]) -> I64:
    """The five-card line key of each hole pair with the flop, all at once."""
    hands = np.empty((len(holes), 5), dtype=np.uint8)
    hands[:, :2] = holes
    hands[:, 2:] = flop
    out: I64 = _five_key_of_strength()[evaluate_batch5(hands)]
    return out


def _hole_cards(remaining: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    out: npt.NDArray[np.uint8] = remaining[pairs(49)]
    return out


# --- Casino Hold'em ------------------------------------------------------------------------

# Accumulator layout per pay table: outcomes, decisions, five-card line x decision.
_CH_FOLD, _CH_NQ, _CH_WIN, _CH_TIE, _CH_LOSS = 0, 1, 11, 21, 22
_CH_OUTCOMES: Final = 23
_CH_DECISIONS: Final = 2  # fold, call
_CH_EV: Final = _CH_OUTCOMES + _CH_DECISIONS + _FIVE_KEYS * 2  # sum of the best EVs
_CH_SIZE: Final = _CH_EV + 1


def _ch_flop_job(job: tuple[tuple[int, int, int], int, tuple[tuple[int, ...], ...]]) -> I64:
    flop, weight, tables = job
    counts = flop_counts(flop, thp=False)
    no_qualify, wins, ties, losses = (
        counts.ch_no_qualify,
        counts.ch_wins,
        counts.ch_ties,
        counts.ch_losses,
    )
    five = _five_keys(flop, _hole_cards(counts.remaining))
    out = np.zeros((len(tables), _CH_SIZE), dtype=np.int64)
    for i, multipliers in enumerate(tables):
        numerator = ch_call_numerator(no_qualify, wins, losses, multipliers)
        call = numerator > -CH_COMPLETIONS
        row = out[i]
        row[_CH_FOLD] = np.count_nonzero(~call) * CH_COMPLETIONS
        row[_CH_NQ:_CH_WIN] = no_qualify[call].sum(axis=0)
        row[_CH_WIN:_CH_TIE] = wins[call].sum(axis=0)
        row[_CH_TIE] = ties[call].sum()
        row[_CH_LOSS] = losses[call].sum()
        row[_CH_OUTCOMES] = np.count_nonzero(~call)
        row[_CH_OUTCOMES + 1] = np.count_nonzero(call)
        joint = np.bincount(five * 2 + call, minlength=_FIVE_KEYS * 2)
        row[_CH_OUTCOMES + _CH_DECISIONS : _CH_EV] = joint
        row[_CH_EV] = np.maximum(numerator, -CH_COMPLETIONS).sum()
    out *= weight
    return out


def _ch_sheet(table: PayTable, acc: I64) -> ParSheet:
    multipliers = ante_multipliers(table)
    situations = int(acc[_CH_OUTCOMES : _CH_OUTCOMES + _CH_DECISIONS].sum())
    total = situations * CH_COMPLETIONS
    lines = [Line("fold", -1, int(acc[_CH_FOLD]))]
    for c in reversed(_CATEGORIES):
        n = int(acc[_CH_NQ + c])
        if n:
            lines.append(Line(f"dealer_does_not_qualify/{CATEGORY_LINE[c]}", multipliers[c], n, 3))
    for c in reversed(_CATEGORIES):
        n = int(acc[_CH_WIN + c])
        if n:
            lines.append(Line(f"win/{CATEGORY_LINE[c]}", multipliers[c] + 2, n, 3))
    lines.append(Line("tie", 0, int(acc[_CH_TIE]), 3))
    lines.append(Line("loss", -3, int(acc[_CH_LOSS]), 3))
    base = BetSheet("ante", sidebets.BEST_STRATEGY, total, tuple(lines))
    decision = DecisionSheet(
        Stage.FLOP,
        {Action.CALL: int(acc[_CH_OUTCOMES + 1]), Action.FOLD: int(acc[_CH_OUTCOMES])},
        situations,
        situations,
    )
    joint = acc[_CH_OUTCOMES + _CH_DECISIONS : _CH_EV].reshape(_FIVE_KEYS, 2)  # [key, called]
    side: list[BetSheet] = []
    meter: Fraction | None = None
    if table.offers(Spot.AA_BONUS):
        side += _five_card_side_bets(table, Spot.AA_BONUS, joint)
    if table.jackpot is not None:
        side += _five_card_side_bets(table, Spot.JACKPOT, joint)
        jp = table.jackpot
        meter = Fraction(jp.seed + jp.contribution(jp.stake), jp.stake)
    return ParSheet(
        paytable_id=table.id,
        version=table.version,
        content_hash=table.content_hash,
        game=table.game,
        base=base,
        decisions=(decision,),
        side_bets=tuple(side),
        jackpot_meter=meter,
        strategy_ev=Fraction(int(acc[_CH_EV]), total),
    )


def _five_card_side_bets(table: PayTable, spot: Spot, joint: I64) -> list[BetSheet]:
    situations = int(joint.sum())
    """The side bet over all situations, every hand and under the best strategy (folds lose)."""
    judge = aa_bonus_line if spot is Spot.AA_BONUS else jackpot_line
    meter_lines = table.jackpot.meter_percent if table.jackpot and spot is Spot.JACKPOT else {}
    out = []
    for basis in (sidebets.EVERY_HAND, sidebets.BEST_STRATEGY):
        lines: list[Line] = []
        losing = 0
        for key in _FIVE_ORDER:
            called, folded = int(joint[key, 1]), int(joint[key, 0])
            n = called + folded if basis == sidebets.EVERY_HAND else called
            losing += (called + folded) - n
            won = judge_line(judge, key)
            multiplier = table.pays(spot, won) if won else None
            if won is not None and won in meter_lines:
                lines.append(Line(won, 0, n, meter_percent=meter_lines[won]))
            elif won is not None and multiplier is not None:
                lines.append(Line(won, multiplier, n))
            else:
                losing += n
        lines.append(Line("lose", -1, losing))
        out.append(BetSheet(spot, basis, situations, tuple(ln for ln in lines if ln.count)))
    return out


def judge_line(judge: Callable[..., str | None], key: int) -> str | None:
    """The line a five-card key wins under a side bet's rule (its ``*_line`` function)."""
    example = _FIVE_EXAMPLES[key]
    return judge(evaluate(example))


# One five-card hand per key, to ask the rules which line it wins.
_FIVE_EXAMPLES: Final = {
    0: [51, 45, 38, 29, 0],  # A K J 9 2, mixed suits
    1: [0, 1, 51, 45, 38],  # pair of twos
    2: [0, 1, 4, 5, 51],  # two pair
    3: [0, 1, 2, 51, 45],  # trips
    4: [0, 5, 10, 15, 17],  # 2-6 straight
    5: [0, 4, 8, 12, 20],  # flush 2 3 4 5 7 of clubs
    6: [0, 1, 2, 4, 5],  # full house
    7: [0, 1, 2, 3, 51],  # quads
    8: [0, 4, 8, 12, 16],  # 6-high straight flush
    9: [35, 39, 43, 47, 51],  # royal flush (spades)
    10: [48, 49, 0, 5, 10],  # pair of aces
}


# --- Texas Hold'em Plus --------------------------------------------------------------------

# Per-hole outcome layout, given a preflop call (holdem.odds.kernel.thp_tables): flop fold,
# turn fold after check / after bet, then for each (flop bet, turn bet) a block of wins by
# category, tie, loss.
_THP_FOLD_FLOP, _THP_FOLD_TURN = 0, 1
_THP_BLOCK: Final = THP_BLOCK
_THP_SHOWDOWN: Final = 3
_THP_OUTCOMES: Final = THP_OUTCOMES
# Decisions: flop (check, fold, bet), turn after a check (3), turn after a bet (3).
_THP_DECISIONS: Final = 9


def _thp_flop_job(job: tuple[tuple[int, int, int], int, tuple[tuple[int, ...], ...]]) -> I64:
    flop, weight, tables = job
    counts = flop_counts(flop, ch=False)
    holes = _hole_cards(counts.remaining)
    classes = hole_class_table()[holes[:, 0], holes[:, 1]].astype(np.int64)
    out = thp_tables(counts.thp_wins, counts.thp_losses, tables, classes, len(hole_classes()))
    out *= weight
    return out


def _thp_sheet(table: PayTable, acc: I64) -> ParSheet:
    multipliers = ante_multipliers(table)
    names = hole_classes()
    class_units = [int(x) for x in acc[:, 0]]  # (hole, flop) situations per class
    situations = sum(class_units)
    total_units = situations * THP_FLOP_COMPLETIONS
    preflop_ev: dict[str, Fraction] = {}
    outcome = np.zeros(_THP_OUTCOMES, dtype=np.int64)
    fold_preflop = 0
    calls = folds = 0
    decisions = np.zeros(_THP_DECISIONS, dtype=np.int64)
    strategy = 0
    for i, name in enumerate(names):
        strategy += max(int(acc[i, 1]), -class_units[i] * THP_FLOP_COMPLETIONS)
        ev = Fraction(int(acc[i, 1]), class_units[i] * THP_FLOP_COMPLETIONS)
        preflop_ev[name] = ev
        if ev > -1:
            calls += class_units[i]
            outcome += acc[i, 2 : 2 + _THP_OUTCOMES]
            decisions += acc[i, 2 + _THP_OUTCOMES :]
        else:
            folds += class_units[i]
            fold_preflop += class_units[i] * THP_FLOP_COMPLETIONS
    lines = [
        Line("fold/preflop", -1, fold_preflop),
        Line("fold/flop", -3, int(outcome[_THP_FOLD_FLOP]), 3),
        Line("fold/turn", -3, int(outcome[_THP_FOLD_TURN]), 3),
        Line("fold/turn after flop bet", -4, int(outcome[_THP_FOLD_TURN + 1]), 4),
    ]
    for flop_bet in (1, 0):
        for turn_bet in (1, 0):
            played = 2 + flop_bet + turn_bet
            stake = 1 + played
            label = f"{'bet' if flop_bet else 'check'}/{'bet' if turn_bet else 'check'}"
            start = _THP_SHOWDOWN + (flop_bet * 2 + turn_bet) * _THP_BLOCK
            block = outcome[start : start + _THP_BLOCK]
            for c in reversed(_CATEGORIES):
                if block[c]:
                    net = played + multipliers[c]
                    lines.append(Line(f"{label}/win/{CATEGORY_LINE[c]}", net, int(block[c]), stake))
            lines.append(Line(f"{label}/tie", 0, int(block[10]), stake))
            lines.append(Line(f"{label}/loss", -stake, int(block[11]), stake))
    base = BetSheet(
        "ante", sidebets.BEST_STRATEGY, total_units, tuple(ln for ln in lines if ln.count)
    )
    acts = (Action.CHECK, Action.FOLD, Action.BET)
    assert acts == THP_ACTIONS
    flop_checks = int(decisions[0])
    flop_bets = int(decisions[2])
    decision_sheets = (
        DecisionSheet(
            Stage.PREFLOP, {Action.CALL: calls, Action.FOLD: folds}, situations, situations
        ),
        DecisionSheet(
            Stage.FLOP,
            {a: int(decisions[k]) for k, a in enumerate(acts)},
            calls,
            situations,
        ),
        DecisionSheet(
            "turn after flop check",
            {a: int(decisions[3 + k]) for k, a in enumerate(acts)},
            flop_checks * THP_TURNS,
            situations * THP_TURNS,
        ),
        DecisionSheet(
            "turn after flop bet",
            {a: int(decisions[6 + k]) for k, a in enumerate(acts)},
            flop_bets * THP_TURNS,
            situations * THP_TURNS,
        ),
    )
    side = (sidebets.plus_sheet(table),) if table.offers(Spot.PLUS) else ()
    return ParSheet(
        paytable_id=table.id,
        version=table.version,
        content_hash=table.content_hash,
        game=table.game,
        base=base,
        decisions=decision_sheets,
        side_bets=side,
        preflop_ev=preflop_ev,
        strategy_ev=Fraction(strategy, total_units),
    )


# --- running it ----------------------------------------------------------------------------


def _run(
    worker: Callable[..., I64],
    jobs: Sequence[Any],
    processes: int,
    progress: Progress | None,
) -> I64:
    if processes <= 1 or len(jobs) <= 1:
        results: Iterable[I64] = map(worker, jobs)
        return _sum(results, len(jobs), progress)
    with contextlib.closing(_fan_out(worker, jobs, processes)) as results:
        return _sum(results, len(jobs), progress)


def _fan_out(
    worker: Callable[..., I64], jobs: Sequence[Any], processes: int, chunk: int = 4
) -> Generator[I64, None, None]:
    """Each job's result, from ``processes`` forked workers, in the order they finish.

    This process only waits, and so answers Ctrl-C at once: the workers compute, ignoring
    it. The first job runs alone in the first worker, which compiles the kernel (or loads it
    from numba's cache) for the others to find in the cache. Each worker has a pipe of its
    own, no lock is shared between processes and no thread helps, so whatever ends the run
    early (Ctrl-C, an error, closing this iterator) kills the workers and returns at once,
    with nothing left waiting on a lock a killed worker held.
    """
    context = multiprocessing.get_context("fork")
    spans = ((at, min(at + chunk, len(jobs))) for at in range(1, len(jobs), chunk))
    workers: dict[Connection, ForkProcess] = {}

    def started() -> Connection:
        here, there = context.Pipe()
        process = context.Process(target=_work, args=(worker, jobs, there), daemon=True)
        workers[here] = process
        process.start()
        there.close()
        return here

    try:
        first = started()
        first.send((0, 1))
        yield from _reply(first)
        busy: set[Connection] = set()
        for conn in [first, *(started() for _ in range(1, processes))]:
            span = next(spans, None)
            conn.send(span)
            if span is not None:
                busy.add(conn)
        while busy:
            ready = set(wait(list(busy)))
            for conn in [conn for conn in busy if conn in ready]:
                reply = _reply(conn)
                span = next(spans, None)
                conn.send(span)
                if span is None:
                    busy.discard(conn)
                yield from reply
    finally:
        for conn, process in workers.items():
            if process.pid is not None:
                process.kill()
                process.join()
            conn.close()


def _work(worker: Callable[..., I64], jobs: Sequence[Any], conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while (span := conn.recv()) is not None:
            start, stop = span
            conn.send([worker(job) for job in jobs[start:stop]])
    except EOFError:  # the parent is gone
        return
    except BaseException as error:
        conn.send(error)


def _reply(conn: Connection) -> list[I64]:
    try:
        reply = conn.recv()
    except EOFError:
        raise RuntimeError("a PAR worker process ended without its results") from None
    if isinstance(reply, BaseException):
        raise reply
    assert isinstance(reply, list)
    return reply


def _sum(results: Iterator[I64] | Iterable[I64], n: int, progress: Progress | None) -> I64:
    total: I64 | None = None
    for done, part in enumerate(results, 1):
        total = part if total is None else total + part
        if progress:
            progress(done, n)
    assert total is not None
    return total


def par_counts(
    tables: Sequence[PayTable],
    processes: int | None = None,
    progress: Progress | None = None,
    flops: Sequence[tuple[tuple[int, int, int], int]] | None = None,
) -> list[I64]:
    """The integer counts each pay table's PAR sheet is made from, in one pass over the flops.

    Pay tables of one game share every flop's showdown counts; only the decisions and what
    they add up to are per table. ``flops`` (flop, weight) restricts the pass, for tests and
    the bench; the default is every canonical flop with its orbit size.
    """
    if not tables:
        return []
    games = {t.game for t in tables}
    if len(games) != 1:
        raise PayTableError("compute_par takes pay tables of one game at a time")
    processes = processes or min(2, os.cpu_count() or 1)
    chosen = list(flops) if flops is not None else list(canonical_flops())
    multipliers = tuple(ante_multipliers(t) for t in tables)
    job = _ch_flop_job if Game.CASINO_HOLDEM in games else _thp_flop_job
    acc = _run(job, [(f, w, multipliers) for f, w in chosen], processes, progress)
    return [acc[i] for i in range(len(tables))]


def compute_par(
    tables: Sequence[PayTable],
    processes: int | None = None,
    progress: Progress | None = None,
    flops: Sequence[tuple[tuple[int, int, int], int]] | None = None,
) -> list[ParSheet]:
    """PAR sheets of pay tables of one game, computed together in one pass over the flops.

    ``flops`` (flop, weight) restricts the pass, for tests; the default is every canonical
    flop with its orbit size, which gives the full PAR sheet.
    """
    counts = par_counts(tables, processes, progress, flops)
    sheet = _ch_sheet if tables and tables[0].game is Game.CASINO_HOLDEM else _thp_sheet
    return [sheet(t, acc) for t, acc in zip(tables, counts, strict=True)]


# --- stored data ---------------------------------------------------------------------------


def par_file_name(table: PayTable) -> str:
    """The stored PAR file of a pay table version: its pay table file's name."""
    return f"{table.id.replace('/', '--')}--v{table.version}.json"


def par_directory() -> Path:
    """Where the PAR data lives in the source tree (for writing)."""
    return Path(__file__).resolve().parent.parent / "par"


class ParDataError(ValueError):
    """Stored PAR data that is missing, or was computed for other pay table content."""


def parse_par(raw: str, table: PayTable) -> ParSheet:
    """A stored PAR sheet, checked against the pay table it claims to be for."""
    sheet = ParSheet.from_json(json.loads(raw))
    if (sheet.paytable_id, sheet.version) != (table.id, table.version):
        raise ParDataError(f"PAR data for {sheet.paytable_id} v{sheet.version}, not {table.id}")
    if sheet.content_hash != table.content_hash:
        raise ParDataError(
            f"PAR data for {table.id} v{table.version} was computed for content "
            f"{sheet.content_hash}, the pay table is {table.content_hash}: run `make par`"
        )
    return sheet


def load_par(table: PayTable) -> ParSheet:
    """The stored PAR sheet of a pay table version."""
    entry = resources.files("holdem.par") / par_file_name(table)
    if not entry.is_file():
        raise ParDataError(f"no stored PAR data for {table.id} v{table.version}: run `make par`")
    return parse_par(entry.read_text(encoding="utf-8"), table)


def dump_par(sheet: ParSheet) -> str:
    """The stored form of a PAR sheet."""
    return json.dumps(sheet.to_json(), indent=1) + "\n"


def texas_holdem_plus_preflop(table: PayTable, hole: Sequence[int] | str) -> ThpDecisionOdds:
    """EVs of CALL and FOLD before the flop, with best play after, from the stored PAR data.

    The call EV averages the best flop action over all 19,600 flops; it depends only on the
    hole class (suits renamed), so the PAR data keeps it for each of the 169 classes.
    """
    if table.game is not Game.TEXAS_HOLDEM_PLUS:
        raise PayTableError(
            f"pay table {table.id} is for {table.game}, not {Game.TEXAS_HOLDEM_PLUS}"
        )
    cards = parse_cards(hole) if isinstance(hole, str) else list(hole)
    if len(cards) != 2 or cards[0] == cards[1]:
        raise CardError(f"the hole is two distinct cards, got {cards!r}")
    ev = load_par(table).preflop_ev[hole_class(cards[0], cards[1])]
    return ThpDecisionOdds(stage=Stage.PREFLOP, ev={Action.CALL: ev, Action.FOLD: Fraction(-1)})
