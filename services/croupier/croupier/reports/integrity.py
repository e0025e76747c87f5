"""Integrity terms of settled rounds, read from their ``round.settled`` facts.

A settled fact carries everything its terms need: the cards (``deal``), every bet's stake
and return (``results``), and the stage of each fold (``folds``; calls and bets show in the
results as play wagers, and no decision at the flop or turn is a check). So the terms are a
pure function of one ledger fact, the same in the projector, in ``croupier integrity`` and
in the tests (see :mod:`holdem.integrity.terms` for what the terms are).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from holdem import (
    Action,
    BetResult,
    Deal,
    Decision,
    Outcome,
    PayTable,
    Spot,
    load_paytable,
)
from holdem.cards import parse_cards
from holdem.integrity.terms import RoundInput, Terms, calculator, prepare
from holdem.schedule import DecisionStage, schedule


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


class NoCards(ValueError):
    """A settled fact recorded before settlements carried their cards."""


def settled_terms(data: Mapping[str, Any]) -> Iterator[RoundTerms]:
    """The terms of a ``round.settled`` fact, one per currency of its bets."""
    for prepared in prepare_settled(data):
        yield RoundTerms(*prepared.labels, prepared.terms())


def prepare_settled(data: Mapping[str, Any]) -> Iterator[PreparedRound]:
    """A ``round.settled`` fact's bets per currency, grouped by box and decisions."""
    if "deal" not in data:
        raise NoCards("this settlement was recorded without its cards")
    table = load_paytable(data["paytable"]["id"], data["paytable"]["version"])
    deal = _deal(data["deal"])
    by_currency: dict[str, list[BetResult]] = {}
    for line in data["results"]:
        by_currency.setdefault(line["currency"], []).append(_result(line))
    folds = data.get("folds", {})
    for currency, results in sorted(by_currency.items()):
        decisions = list(_decisions(results, folds, schedule(table.game)))
        yield PreparedRound(table, currency, prepare(deal, results, decisions))


def _deal(raw: Mapping[str, Any]) -> Deal:
    boxes = {}
    for box, text in raw["boxes"].items():
        a, b = parse_cards(text)
        boxes[box] = (a, b)
    d1, d2 = parse_cards(raw["dealer"])
    return Deal(boxes, (d1, d2), tuple(parse_cards(raw["board"])))


_SPOTS: Final = {str(spot.value): spot for spot in Spot}
_OUTCOMES: Final = {str(outcome.value): outcome for outcome in Outcome}


def _result(line: Mapping[str, Any]) -> BetResult:
    spot, outcome = line["spot"], line["outcome"]
    return BetResult(
        line["bet_id"],
        line["player_id"],
        line["box"],
        _SPOTS.get(spot) or Spot(spot),  # an unknown value: the enum's own error
        line["stake"],
        line["returned"],
        _OUTCOMES.get(outcome) or Outcome(outcome),
        line.get("line"),
    )


def _decisions(
    results: list[BetResult],
    folds: Mapping[str, str],
    stages: tuple[DecisionStage, ...],
) -> Iterator[Decision]:
    """The decisions that matter: calls and bets (from the play wagers) and folds."""
    spots: dict[tuple[str, str], set[Spot]] = {}
    antes: dict[tuple[str, str], str] = {}
    for r in results:
        spots.setdefault((r.player, r.box), set()).add(r.spot)
        if r.spot is Spot.ANTE:
            antes[(r.player, r.box)] = r.bet_id
    for key, ante in antes.items():
        for point in stages:
            if point.wager in spots[key]:
                yield Decision(ante, point.stage, point.wager_action)
            elif folds.get(ante) == point.stage:
                yield Decision(ante, point.stage, Action.FOLD)
                break
