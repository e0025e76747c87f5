"""What a round is settled from (the deal, the wagers, the decisions) and what it yields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from holdem.paytable import Spot
from holdem.values import quick


class Outcome(StrEnum):
    """How a bet ended."""

    WIN = "win"
    LOSE = "lose"
    PUSH = "push"
    FOLD = "fold"
    REFUND = "refund"


class Stage(StrEnum):
    """When a decision is taken."""

    PREFLOP = "preflop"
    FLOP = "flop"
    TURN = "turn"


class Action(StrEnum):
    """What a player decides."""

    CALL = "call"
    FOLD = "fold"
    BET = "bet"
    CHECK = "check"


class SettlementError(ValueError):
    """A round that cannot be settled as given (cards missing, wagers inconsistent)."""


@quick
@dataclass(frozen=True, slots=True)
class Wager:
    """A stake on a spot. ``player`` links side bets and play wagers to their ante."""

    bet_id: str
    player: str
    box: str
    spot: Spot
    amount: int


@quick
@dataclass(frozen=True, slots=True)
class Decision:
    """A decision on one ante. A call or bet carries the new play wager's id and amount."""

    ante_bet_id: str
    stage: Stage
    action: Action
    bet_id: str | None = None
    amount: int | None = None


@dataclass(frozen=True, slots=True)
class Deal:
    """A round's cards as ids: hole cards per box, the dealer's two, and the five-card board."""

    boxes: Mapping[str, tuple[int, int]]
    dealer: tuple[int, int]
    board: tuple[int, ...]

    @property
    def flop(self) -> tuple[int, ...]:
        """The first three board cards."""
        return self.board[:3]


@quick
@dataclass(frozen=True, slots=True)
class BetResult:
    """One bet's result: ``returned`` is what goes back to the player (stake + win)."""

    bet_id: str
    player: str
    box: str
    spot: Spot
    stake: int
    returned: int
    outcome: Outcome
    line: str | None = None

    @property
    def net(self) -> int:
        """The player's net win on this bet (negative on a loss)."""
        return self.returned - self.stake


@dataclass(frozen=True, slots=True)
class MeterMovement:
    """How a round moved the progressive jackpot meter, in minor units.

    ``before + contributed - awarded + reseeded == after``.
    """

    before: int
    contributed: int
    awarded: int
    reseeded: int
    after: int


@dataclass(frozen=True, slots=True)
class Settlement:
    """Every bet's result, in wager order, and the jackpot meter's movement if any."""

    results: tuple[BetResult, ...]
    meter: MeterMovement | None = None
    hands: Mapping[str, str] = field(default_factory=dict)

    @property
    def staked(self) -> int:
        """Total of all stakes."""
        return sum(r.stake for r in self.results)

    @property
    def returned(self) -> int:
        """Total returned to players."""
        return sum(r.returned for r in self.results)


def paid(wager: Wager, multiplier: int, line: str) -> BetResult:
    """A win at ``multiplier`` to 1."""
    return result(wager, wager.amount * (1 + multiplier), Outcome.WIN, line)


def result(wager: Wager, returned: int, outcome: Outcome, line: str | None = None) -> BetResult:
    """A bet's result."""
    return BetResult(
        wager.bet_id, wager.player, wager.box, wager.spot, wager.amount, returned, outcome, line
    )
