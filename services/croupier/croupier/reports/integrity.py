"""Integrity terms of settled rounds, read from their ``round.settled`` facts.

A settled fact carries everything its terms need: the cards (``deal``), every bet's stake
and return (``results``), and the stage of each fold (``folds``; calls and bets show in the
results as play wagers, and no decision at the flop or turn is a check). So the terms are a
pure function of one ledger fact, the same in the projector, in ``croupier integrity`` and
in the tests (see :mod:`holdem.integrity.terms` for what the terms are).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache, partial
from typing import Any, Final

from holdem import Action, BetResult, Deal, Game, Outcome, PayTable, Spot, Stage, load_paytable
from holdem.cards import parse_cards
from holdem.integrity.terms import MAIN_SPOTS, Group, RoundInput, Terms, calculator, grouped
from holdem.schedule import schedule


@dataclass(frozen=True, slots=True)
class RoundTerms:
    """One settled round's terms in one currency, with the labels they are counted under."""

    game: str
    paytable: str
    currency: str
    terms: Terms


@dataclass(frozen=True, slots=True)
class PreparedRound:
    """One settled round's bets in one currency, grouped, ready for its terms."""

    table: PayTable
    currency: str
    round: RoundInput

    @property
    def labels(self) -> tuple[str, str, str]:
        """Game, pay table and currency."""
        return str(self.table.game), self.table.id, self.currency

    def terms(self) -> Terms:
        """The round's terms."""
        return calculator(self.table).terms(self.round)


#: Rounds a worker takes at a time when terms are summed over many.
TERMS_CHUNK: Final = 256
#: From this many rounds, terms are worked on in forked processes, one per core, sharing the
#: rounds read and the tables loaded (copy on write): threads share one interpreter lock,
#: and much of a round's terms is Python (a day's terms: 23.7-25.7 s in processes against
#: 28.9-33.6 s in threads, alternately). Below, or where processes cannot be forked, threads.
PROCESSES_FROM: Final = 20_000

Labels = tuple[str, str, str]
#: The rounds forked workers read (set in the parent for the pool's lifetime).
_SHARED: Sequence[PreparedRound] = ()


def summed_terms(
    rounds: Sequence[PreparedRound], advance: Callable[[int], None] = lambda _: None
) -> dict[Labels, Terms]:
    """The terms of ``rounds`` summed per game, pay table and currency, in the rounds'
    order (so the sums are the same whatever the workers). Chunks of rounds are worked on
    a worker per core (:data:`PROCESSES_FROM`); call it with no event loop running when the
    workers may be forked. ``advance``: told how many rounds each chunk held, in order."""
    spans = [(i, min(i + TERMS_CHUNK, len(rounds))) for i in range(0, len(rounds), TERMS_CHUNK)]
    totals: dict[Labels, Terms] = {}
    with _workers(rounds) as work:
        for (start, stop), terms in zip(spans, work(spans), strict=True):
            for prepared, each in zip(rounds[start:stop], terms, strict=True):
                totals[prepared.labels] = totals.get(prepared.labels, Terms()) + each
            advance(stop - start)
    return totals


@contextmanager
def _workers(
    rounds: Sequence[PreparedRound],
) -> Iterator[Callable[[list[tuple[int, int]]], Iterator[list[Terms]]]]:
    """Map spans of ``rounds`` to their terms, in order, on a worker per core."""
    global _SHARED
    count = max(1, len(os.sched_getaffinity(0)))
    forking = "fork" in multiprocessing.get_all_start_methods()
    if count == 1 or len(rounds) < PROCESSES_FROM or not forking:
        with ThreadPoolExecutor(count) as threads:
            yield lambda spans: threads.map(partial(_span_terms, rounds), spans)
        return
    _SHARED = rounds
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(count, mp_context=context) as processes:
            yield lambda spans: processes.map(_shared_span_terms, spans, chunksize=4)
    finally:
        _SHARED = ()


def _span_terms(rounds: Sequence[PreparedRound], span: tuple[int, int]) -> list[Terms]:
    return [prepared.terms() for prepared in rounds[span[0] : span[1]]]


def _shared_span_terms(span: tuple[int, int]) -> list[Terms]:
    return _span_terms(_SHARED, span)


class NoCards(ValueError):
    """A settled fact recorded before settlements carried their cards."""


def settled_terms(data: Mapping[str, Any]) -> Iterator[RoundTerms]:
    """The terms of a ``round.settled`` fact, one per currency of its bets."""
    for prepared in prepare_settled(data):
        yield RoundTerms(*prepared.labels, prepared.terms())


def prepare_settled(data: Mapping[str, Any]) -> Iterator[PreparedRound]:
    """A ``round.settled`` fact's bets per currency, grouped by box and decisions.

    One pass over its result lines, straight into each player's group on a box: only side
    bets are kept as results, and the decisions are read off the play wagers and folds.
    """
    if "deal" not in data:
        raise NoCards("this settlement was recorded without its cards")
    table = load_paytable(data["paytable"]["id"], data["paytable"]["version"])
    deal = _deal(data["deal"])
    points = _points(table.game)
    wagers = {wager for _, wager, _ in points}
    players: dict[tuple[str, str, str], Group] = {}
    played: dict[tuple[str, str, str], set[Spot]] = {}
    spots, outcomes = _SPOTS, _OUTCOMES
    for line in data["results"]:
        key = (line["currency"], line["player_id"], line["box"])
        group = players.get(key)
        if group is None:
            group = players[key] = Group()
        spot = spots.get(line["spot"]) or Spot(line["spot"])  # unknown: the enum's error
        outcome = outcomes.get(line["outcome"]) or Outcome(line["outcome"])
        stake, returned = line["stake"], line["returned"]
        group.staked += stake
        group.returned += returned
        if spot is Spot.ANTE:
            group.ante, group.ante_bet_id = stake, line["bet_id"]
        elif spot in wagers:
            played.setdefault(key, set()).add(spot)
        elif spot not in MAIN_SPOTS:
            bet = BetResult(
                line["bet_id"], key[1], key[2], spot, stake, returned, outcome, line.get("line")
            )
            group.side.setdefault(spot, []).append(bet)
    folds = data.get("folds", {})
    by_currency: dict[str, list[tuple[str, Group]]] = {}
    for key, group in players.items():
        if group.ante_bet_id:
            _decide(group, played.get(key, set()), folds.get(group.ante_bet_id), points)
        by_currency.setdefault(key[0], []).append((key[2], group))
    for currency, groups in sorted(by_currency.items()):
        yield PreparedRound(table, currency, grouped(deal, groups))


_SPOTS: Final = {str(spot.value): spot for spot in Spot}
_OUTCOMES: Final = {str(outcome.value): outcome for outcome in Outcome}
Point = tuple[Stage, Spot, Action]


@cache
def _points(game: Game) -> tuple[Point, ...]:
    """The game's decision stages: the stage, its play wager and the action that adds it."""
    return tuple((p.stage, p.wager, p.wager_action) for p in schedule(game))


def _decide(group: Group, played: set[Spot], fold: str | None, points: tuple[Point, ...]) -> None:
    """The decisions that matter: calls and bets (from the play wagers) and the fold."""
    for stage, wager, action in points:
        if wager in played:
            group.actions[stage] = action
        elif fold == stage:
            group.actions[stage] = Action.FOLD
            break


def _deal(raw: Mapping[str, Any]) -> Deal:
    boxes = {box: _two(text) for box, text in raw["boxes"].items()}
    return Deal(boxes, _two(raw["dealer"]), tuple(parse_cards(raw["board"])))


@lru_cache(maxsize=4096)
def _two(text: str) -> tuple[int, int]:
    a, b = parse_cards(text)
    return a, b
