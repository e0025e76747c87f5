"""The rules of Casino Hold'em, as docs/rules.md states them, applied to one round.

- Each player antes, may add side bets (AA bonus; progressive jackpot where the pay table has
  one), sees two hole cards and the flop, then CALLS (a second wager of exactly 2x the ante)
  or FOLDS. No decision by the end of the round is a fold.
- Fold: the ante and every side bet are lost, even a side bet that would have won.
- The dealer qualifies with a pair of fours or better. If not: the ante pays by the ante
  table on the player's final hand and the call pushes, even against a higher dealer hand.
  If so: player higher, ante by the table and call 1:1; dealer higher, both lose; equal hands
  (the sixth and seventh cards never count), both push.
- AA bonus and jackpot: judged on the hole cards and the flop only, paid only on a call.
  AA bonus pays a pair of aces or better (any two pair or better, aces or not).
  Jackpot: royal flush takes a share of the meter, straight flush another; quads, full house
  and flush pay fixed odds; winners of a meter line in one round split its award equally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from holdem.bets import (
    BetResult,
    Deal,
    Decision,
    MeterMovement,
    Outcome,
    Settlement,
    SettlementError,
    Wager,
    paid,
    result,
)
from holdem.evaluator import Category, HandValue, evaluate
from holdem.paytable import Game, PayTable, Spot
from holdem.schedule import folded_antes, play_wagers

CATEGORY_LINE: Mapping[Category, str] = {c: c.name.lower() for c in Category}
DEALER_DOES_NOT_QUALIFY = "dealer_does_not_qualify"
_PAIR_OF_FOURS = 4


def dealer_qualifies(dealer: HandValue) -> bool:
    """A pair of fours or better."""
    if dealer.category is Category.PAIR:
        return dealer.ranks[0] >= _PAIR_OF_FOURS
    return dealer.category > Category.PAIR


def aa_bonus_line(five: HandValue) -> str | None:
    """The AA bonus line won by the hole cards and flop, or None."""
    if five.category >= Category.TWO_PAIR:
        return CATEGORY_LINE[five.category]
    if five.category is Category.PAIR and five.ranks[0] == 14:
        return "pair_of_aces"
    return None


def jackpot_line(five: HandValue) -> str | None:
    """The jackpot line won by the hole cards and flop, or None."""
    return CATEGORY_LINE[five.category] if five.category >= Category.FLUSH else None


def settle(
    table: PayTable,
    deal: Deal,
    wagers: Sequence[Wager],
    decisions: Sequence[Decision],
    meter: int | None = None,
) -> Settlement:
    """Settle one Casino Hold'em round. ``meter`` is the jackpot meter before the round."""
    antes = {w.bet_id: w for w in wagers if w.spot is Spot.ANTE}
    folded = folded_antes(Game.CASINO_HOLDEM, antes, decisions)
    ante_of = {(w.player, w.box): w for w in antes.values()}
    dealer = evaluate(deal.dealer + deal.board)
    hands = {box: evaluate(hole + deal.board) for box, hole in deal.boxes.items()}
    fives = {box: evaluate(hole + deal.flop) for box, hole in deal.boxes.items()}
    all_wagers = [*wagers, *play_wagers(decisions, antes)]
    jackpot_winners: list[tuple[Wager, str]] = []
    results: dict[str, BetResult] = {}
    # A bet's outcome depends on its box, spot and stake only: on a shared hand, where
    # thousands of players bet on one box, each is judged once.
    judged: dict[tuple[str, Spot, int], tuple[int, Outcome, str | None]] = {}
    for wager in all_wagers:
        ante = antes.get(wager.bet_id) or ante_of.get((wager.player, wager.box))
        if ante is None or wager.box not in hands:
            raise SettlementError(f"bet {wager.bet_id!r} has no ante or no hand on its box")
        if ante.bet_id in folded:
            results[wager.bet_id] = result(wager, 0, Outcome.FOLD)
        elif wager.spot is Spot.JACKPOT and _meter_line(table, fives[wager.box]):
            jackpot_winners.append((wager, _meter_line(table, fives[wager.box]) or ""))
        elif (verdict := judged.get((wager.box, wager.spot, wager.amount))) is not None:
            results[wager.bet_id] = result(wager, *verdict)
        else:
            settled = _settle_bet(table, wager, hands[wager.box], dealer, fives)
            judged[wager.box, wager.spot, wager.amount] = (
                settled.returned,
                settled.outcome,
                settled.line,
            )
            results[wager.bet_id] = settled
    movement, awards = _jackpot(table, all_wagers, jackpot_winners, meter)
    results.update(awards)
    described = {"dealer": dealer.description} | {b: h.description for b, h in hands.items()}
    return Settlement(tuple(results[w.bet_id] for w in all_wagers), movement, described)


def _settle_bet(
    table: PayTable,
    wager: Wager,
    hand: HandValue,
    dealer: HandValue,
    fives: Mapping[str, HandValue],
) -> BetResult:
    if wager.spot in (Spot.ANTE, Spot.CALL):
        return _showdown(table, wager, hand, dealer)
    line = (aa_bonus_line if wager.spot is Spot.AA_BONUS else jackpot_line)(fives[wager.box])
    multiplier = table.pays(wager.spot, line) if line else None
    if multiplier is None:
        return result(wager, 0, Outcome.LOSE)
    return paid(wager, multiplier, line or "")


def _showdown(table: PayTable, wager: Wager, hand: HandValue, dealer: HandValue) -> BetResult:
    qualifies = dealer_qualifies(dealer)
    if qualifies and dealer > hand:
        return result(wager, 0, Outcome.LOSE)
    if qualifies and dealer == hand:
        return result(wager, wager.amount, Outcome.PUSH)
    if wager.spot is Spot.CALL:
        if not qualifies:
            return result(wager, wager.amount, Outcome.PUSH, DEALER_DOES_NOT_QUALIFY)
        return paid(wager, table.pays(Spot.CALL, "win") or 1, "win")
    line = CATEGORY_LINE[hand.category]
    multiplier = table.pays(Spot.ANTE, line)
    if multiplier is None:
        raise SettlementError(f"pay table {table.id} has no ante line {line!r}")
    return paid(wager, multiplier, line)


def _meter_line(table: PayTable, five: HandValue) -> str | None:
    line = jackpot_line(five)
    if table.jackpot is None or line not in table.jackpot.meter_percent:
        return None
    return line


def _jackpot(
    table: PayTable,
    wagers: Sequence[Wager],
    winners: Sequence[tuple[Wager, str]],
    meter: int | None,
) -> tuple[MeterMovement | None, dict[str, BetResult]]:
    """Feed the meter with the round's jackpot stakes, then pay its meter lines.

    Lines are paid from the highest down, each on the meter left by the one before; winners
    of a line split its award equally, and the indivisible remainder stays on the meter. A
    meter a line leaves below its seed is topped up to the seed by the house before the next
    line is paid, so a straight flush in the round of a royal flush wins 10% of the seed
    rather than 10% of the royal's remainder (nothing).
    """
    stakes = sum(w.amount for w in wagers if w.spot is Spot.JACKPOT)
    if table.jackpot is None:
        if stakes:
            raise SettlementError(f"pay table {table.id} has no jackpot")
        return None, {}
    if meter is None:
        if not stakes:  # nobody staked the jackpot: the meter does not move
            return None, {}
        raise SettlementError("a round with jackpot wagers needs the meter it starts from")
    contributed = table.jackpot.contribution(stakes)
    level = meter + contributed
    awards: dict[str, BetResult] = {}
    awarded = reseeded = 0
    for line in ("royal_flush", "straight_flush"):
        line_winners = [w for w, won in winners if won == line]
        if not line_winners:
            continue
        share = level * table.jackpot.meter_percent[line] // 100 // len(line_winners)
        for wager in line_winners:
            awards[wager.bet_id] = result(wager, wager.amount + share, Outcome.WIN, line)
        level -= share * len(line_winners)
        awarded += share * len(line_winners)
        if level < table.jackpot.seed:
            reseeded += table.jackpot.seed - level
            level = table.jackpot.seed
    after = level
    return MeterMovement(meter, contributed, awarded, reseeded, after), awards
