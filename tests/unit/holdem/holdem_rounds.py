"""Helpers that write a round as text: cards as ``"Qs 4d"``, wagers and decisions by name."""

from __future__ import annotations

from collections.abc import Mapping

from holdem import Action, Deal, Decision, Outcome, Settlement, Spot, Stage, Wager, parse_cards


def two(text: str) -> tuple[int, int]:
    """Two hole cards."""
    first, second = parse_cards(text)
    return first, second


def deal(boxes: str | Mapping[str, str], dealer: str, board: str) -> Deal:
    """A deal; a single hand (``str``) sits in box ``"main"``."""
    hands = {"main": boxes} if isinstance(boxes, str) else boxes
    return Deal(
        {box: two(hole) for box, hole in hands.items()},
        two(dealer),
        tuple(parse_cards(board)),
    )


def wager(
    bet_id: str, spot: Spot, amount: int = 100, player: str = "p1", box: str = "main"
) -> Wager:
    """A wager placed before the deal."""
    return Wager(bet_id, player, box, spot, amount)


def play(
    ante_bet_id: str, stage: Stage, action: Action, bet_id: str = "", amount: int = 0
) -> Decision:
    """A decision; a call or bet carries its new wager's id and amount."""
    if action in (Action.CALL, Action.BET):
        return Decision(ante_bet_id, stage, action, bet_id, amount)
    return Decision(ante_bet_id, stage, action)


def by_bet(settlement: Settlement) -> dict[str, tuple[Outcome, int]]:
    """Each bet's outcome and the amount returned to the player, by bet id."""
    return {r.bet_id: (r.outcome, r.returned) for r in settlement.results}
