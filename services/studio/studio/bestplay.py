"""Best play from the exact odds: the ``best-play`` strategy's advisor.

Each decision is computed by full enumeration in :mod:`holdem.odds` (tens of milliseconds) and
remembered, so every player of a shared live hand, who all see the same cards, costs one.
"""

from __future__ import annotations

from functools import cache, lru_cache

from holdem import Action, Game, Stage, load_paytable
from holdem.odds import (
    casino_holdem_flop,
    texas_holdem_plus_flop,
    texas_holdem_plus_preflop,
    texas_holdem_plus_turn,
)
from studio.strategy import Board, DecisionPoint, Hole


class ExactOdds:
    """An advisor: the highest-EV action at each decision, by full enumeration."""

    def best_action(self, point: DecisionPoint) -> Action:
        """The action with the highest exact EV (ties to the smaller stake)."""
        stage, hole, table = point.stage, point.hole, point.paytable
        seen = point.board[:3] if stage is Stage.FLOP else point.board[:4]
        ordered = (min(hole), max(hole))
        return _best(table.id, table.version, stage, ordered, seen, point.flop_bet)


@cache
def exact_odds() -> ExactOdds:
    """The process's advisor (its memory of decisions is shared by every table)."""
    return ExactOdds()


@lru_cache(maxsize=8192)
def _best(
    paytable_id: str, version: int, stage: Stage, hole: Hole, board: Board, flop_bet: bool
) -> Action:
    table = load_paytable(paytable_id, version)
    if table.game is Game.CASINO_HOLDEM:
        return casino_holdem_flop(table, hole, board[:3]).best
    if stage is Stage.PREFLOP:
        return texas_holdem_plus_preflop(table, hole).best
    if stage is Stage.FLOP:
        return texas_holdem_plus_flop(table, hole, board[:3]).best
    return texas_holdem_plus_turn(table, hole, board[:3], board[3:4], flop_bet).best
