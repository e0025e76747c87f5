"""Settle a round of either game, or refund a voided one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from holdem import casino_holdem, texas_holdem_plus
from holdem.bets import (
    Action,
    Deal,
    Decision,
    Outcome,
    Settlement,
    SettlementError,
    Wager,
    result,
)
from holdem.cards import DECK
from holdem.paytable import Game, PayTable, Spot
from holdem.schedule import play_wagers

_RULES = {
    Game.CASINO_HOLDEM: casino_holdem.settle,
    Game.TEXAS_HOLDEM_PLUS: texas_holdem_plus.settle,
}


def settle(
    table: PayTable,
    deal: Deal,
    wagers: Sequence[Wager],
    decisions: Sequence[Decision] = (),
    meter: int | None = None,
) -> Settlement:
    """Every bet's result for a completed round under ``table``'s game and pay lines.

    Decisions missing at completion take the live-dealer timeout defaults. ``meter`` is the
    jackpot meter before the round, required when the round has jackpot wagers.
    """
    _check_deal(deal)
    _check_bet_ids(wagers, decisions)
    return _RULES[table.game](table, deal, wagers, decisions, meter)


def void(wagers: Sequence[Wager], decisions: Sequence[Decision] = ()) -> Settlement:
    """A voided round: every wager, play wagers included, is refunded."""
    antes = {w.bet_id: w for w in wagers if w.spot is Spot.ANTE}
    every = [*wagers, *play_wagers(decisions, antes)]
    return Settlement(tuple(result(w, w.amount, Outcome.REFUND) for w in every))


def _check_deal(deal: Deal) -> None:
    cards = [*deal.dealer, *deal.board, *(c for hole in deal.boxes.values() for c in hole)]
    if len(deal.dealer) != 2 or len(deal.board) != 5:
        raise SettlementError("a round settles with the dealer's two cards and five board cards")
    if any(len(hole) != 2 for hole in deal.boxes.values()):
        raise SettlementError("every box has two hole cards")
    if len(set(cards)) != len(cards) or not set(cards) <= set(DECK):
        raise SettlementError("a round's cards are distinct card ids 0-51")


def _check_bet_ids(wagers: Sequence[Wager], decisions: Sequence[Decision]) -> None:
    # Results are matched to bets by id: a repeated id would drop one bet's result and
    # count another's twice.
    plays = [d.bet_id for d in decisions if d.action in (Action.CALL, Action.BET)]
    counts = Counter([*(w.bet_id for w in wagers), *plays])
    repeated = sorted(str(bet_id) for bet_id, n in counts.items() if n > 1)
    if repeated:
        raise SettlementError(f"a round's bet ids must be distinct; repeated: {repeated}")
