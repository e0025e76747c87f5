"""The rules of Texas Hold'em Plus, as docs/rules.md states them, applied to one round.

- Each player antes and may add the PLUS side bet, then sees two hole cards and CALLS (2x
  the ante) or FOLDS; after the flop BETS (1x the ante), CHECKS or FOLDS; after the turn the
  same again. The house does not qualify.
- No decision in time: before the flop a fold, on the flop or turn a check.
- Fold at any point: the ante and every play wager so far lose.
- Player higher: every play wager pays 1:1; the ante pays by its table (1:1 on a straight or
  better) and otherwise pushes. House higher: ante and play wagers lose. Equal: all push.
- PLUS: judged on the two hole cards alone, settled whatever the player or house does.
"""

from __future__ import annotations

from collections.abc import Sequence

from holdem.bets import (
    BetResult,
    Deal,
    Decision,
    Outcome,
    Settlement,
    SettlementError,
    Wager,
    paid,
    result,
)
from holdem.cards import rank_of, suit_of
from holdem.casino_holdem import CATEGORY_LINE
from holdem.evaluator import HandValue, evaluate
from holdem.paytable import Game, PayTable, Spot
from holdem.schedule import folded_antes, play_wagers

_ACE, _KING, _QUEEN, _JACK, _TEN = 14, 13, 12, 11, 10


def plus_line(hole: tuple[int, int]) -> str | None:
    """The PLUS line won by two hole cards, or None."""
    high, low = sorted((rank_of(hole[0]), rank_of(hole[1])), reverse=True)
    suited = suit_of(hole[0]) == suit_of(hole[1])
    if high == low:
        if high == _ACE:
            return "pair_of_aces"
        return "pair_of_jacks_to_kings" if high >= _JACK else "pair_of_twos_to_tens"
    if high != _ACE:
        return None
    if low == _KING:
        return "ace_king_suited" if suited else "ace_king_offsuit"
    if low in (_QUEEN, _JACK):
        return "ace_queen_or_jack_suited" if suited else "ace_queen_or_jack_offsuit"
    return None


def settle(
    table: PayTable,
    deal: Deal,
    wagers: Sequence[Wager],
    decisions: Sequence[Decision],
    meter: int | None = None,
) -> Settlement:
    """Settle one Texas Hold'em Plus round."""
    if meter is not None:
        raise SettlementError("Texas Hold'em Plus has no jackpot meter")
    antes = {w.bet_id: w for w in wagers if w.spot is Spot.ANTE}
    ante_of = {(w.player, w.box): w for w in antes.values()}
    folded = folded_antes(Game.TEXAS_HOLDEM_PLUS, antes, decisions)
    house = evaluate(deal.dealer + deal.board)
    hands = {box: evaluate(hole + deal.board) for box, hole in deal.boxes.items()}
    results: list[BetResult] = []
    for wager in [*wagers, *play_wagers(decisions, antes)]:
        ante = antes.get(wager.bet_id) or ante_of.get((wager.player, wager.box))
        if ante is None or wager.box not in hands:
            raise SettlementError(f"bet {wager.bet_id!r} has no ante or no hand on its box")
        if wager.spot is Spot.PLUS:
            results.append(_plus(table, wager, deal.boxes[wager.box]))
        elif ante.bet_id in folded:
            results.append(result(wager, 0, Outcome.FOLD))
        else:
            results.append(_showdown(table, wager, hands[wager.box], house))
    described = {"dealer": house.description} | {b: h.description for b, h in hands.items()}
    return Settlement(tuple(results), None, described)


def _plus(table: PayTable, wager: Wager, hole: tuple[int, int]) -> BetResult:
    line = plus_line(hole)
    multiplier = table.pays(Spot.PLUS, line) if line else None
    if multiplier is None:
        return result(wager, 0, Outcome.LOSE)
    return paid(wager, multiplier, line or "")


def _showdown(table: PayTable, wager: Wager, hand: HandValue, house: HandValue) -> BetResult:
    if hand < house:
        return result(wager, 0, Outcome.LOSE)
    if hand == house:
        return result(wager, wager.amount, Outcome.PUSH)
    line = CATEGORY_LINE[hand.category] if wager.spot is Spot.ANTE else "win"
    multiplier = table.pays(wager.spot, line)
    if multiplier is None:
        return result(wager, wager.amount, Outcome.PUSH, "below_straight")
    return paid(wager, multiplier, line)
