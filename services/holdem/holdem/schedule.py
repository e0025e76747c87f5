"""Each game's decision schedule, as data: the one place that says when players decide.

A schedule lists a game's decision stages in order. Each stage says how many board cards are
on the table when the dealer asks, which actions it admits (the wagering one first), which
play wager that action makes and its size in antes, and what no decision in time means. The
Round checks decisions against it, the studio deals and asks by it, and settlement applies
its timeout defaults from it (docs/rules.md, "Casino Hold'em" and "Texas Hold'em Plus").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from holdem.bets import Action, Decision, SettlementError, Stage, Wager
from holdem.paytable import PLAY_WAGERS, Game, Spot


@dataclass(frozen=True, slots=True)
class DecisionStage:
    """One point of a round where each live ante is asked for a decision."""

    stage: Stage
    board_before: int
    actions: tuple[Action, ...]
    wager: Spot
    on_timeout: Action

    @property
    def wager_action(self) -> Action:
        """The action that adds a play wager here (a call, or a Texas Hold'em Plus bet)."""
        return self.actions[0]

    @property
    def multiple(self) -> int:
        """The play wager's stake, in antes."""
        return PLAY_WAGERS[self.wager]


SCHEDULES: Final[Mapping[Game, tuple[DecisionStage, ...]]] = {
    Game.CASINO_HOLDEM: (
        DecisionStage(Stage.FLOP, 3, (Action.CALL, Action.FOLD), Spot.CALL, Action.FOLD),
    ),
    Game.TEXAS_HOLDEM_PLUS: (
        DecisionStage(Stage.PREFLOP, 0, (Action.CALL, Action.FOLD), Spot.CALL, Action.FOLD),
        DecisionStage(
            Stage.FLOP, 3, (Action.BET, Action.CHECK, Action.FOLD), Spot.FLOP_BET, Action.CHECK
        ),
        DecisionStage(
            Stage.TURN, 4, (Action.BET, Action.CHECK, Action.FOLD), Spot.TURN_BET, Action.CHECK
        ),
    ),
}

_PLAY_SPOTS: Final = {
    (s.stage, s.wager_action): s.wager for stages in SCHEDULES.values() for s in stages
}
# Decisions carry no game: a play wager's spot must follow from its stage and action alone.
assert len(_PLAY_SPOTS) == sum(len(stages) for stages in SCHEDULES.values())
assert all(s.on_timeout in s.actions for stages in SCHEDULES.values() for s in stages)

#: The spots of play wagers: the wagers decisions make, not bets placed before the deal.
PLAY_SPOTS: Final = frozenset(_PLAY_SPOTS.values())


def schedule(game: Game) -> tuple[DecisionStage, ...]:
    """The decision stages of ``game``, in the order they come."""
    return SCHEDULES[game]


def decision_stage(game: Game, stage: Stage) -> DecisionStage | None:
    """The stage of ``game`` named ``stage``, or None when the game has no such decision."""
    return next((s for s in SCHEDULES[game] if s.stage is stage), None)


def play_spot(stage: Stage, action: Action) -> Spot | None:
    """The spot of the play wager a decision makes, or None for a fold or a check."""
    return _PLAY_SPOTS.get((stage, action))


def folds_before(game: Game, stage: Stage | None, decided: Mapping[Stage, Action]) -> bool:
    """Whether an ante with these decisions is out before ``stage`` (None: at the end).

    A stage already passed without a decision counts as its timeout action.
    """
    for earlier in SCHEDULES[game]:
        if earlier.stage is stage:
            return False
        if decided.get(earlier.stage, earlier.on_timeout) is Action.FOLD:
            return True
    return False


def folded_antes(game: Game, antes: Iterable[str], decisions: Sequence[Decision]) -> set[str]:
    """The antes that are out by the end of the round: folded, or timed out into a fold."""
    decided: dict[str, dict[Stage, Action]] = {ante: {} for ante in antes}
    for d in decisions:
        decided.setdefault(d.ante_bet_id, {})[d.stage] = d.action
    return {ante for ante, by_stage in decided.items() if folds_before(game, None, by_stage)}


def play_wagers(decisions: Sequence[Decision], antes: Mapping[str, Wager]) -> list[Wager]:
    """The play wagers the decisions created (calls and bets), tied to their ante's player."""
    wagers = []
    for d in decisions:
        spot = play_spot(d.stage, d.action)
        if spot is None:
            continue
        ante = antes.get(d.ante_bet_id)
        if ante is None or d.bet_id is None or d.amount is None:
            raise SettlementError(f"play wager {d.bet_id!r} has no ante {d.ante_bet_id!r}")
        wagers.append(Wager(d.bet_id, ante.player, ante.box, spot, d.amount))
    return wagers
