"""How simulated players decide: a small :class:`Strategy` protocol and a few players.

A strategy sees what a player sees at a decision, a :class:`DecisionPoint` (the game, the
stage, the two hole cards, the board so far and the pay table), and answers with an
:class:`~holdem.Action`, or ``None`` when the player does not decide in time (the feed then
simply carries no decision).

- :class:`SimpleStrategy`: a rule of thumb a casual player follows (rules on the class).
- :class:`AlwaysCall`: calls, and bets at every later stage.
- :class:`RandomStrategy`: any action the stage admits, each as likely.
- :class:`TimeoutStrategy`: another strategy that sometimes lets the clock run out.
- :class:`BestPlayStrategy`: the highest-EV decision, as an :class:`Advisor` computes it.
  The exact-odds module (``holdem.odds``) provides the advisor; register it with
  :func:`register_strategy` under ``"best-play"`` to make it a choice of the command line.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from holdem import Action, Game, PayTable, Stage
from holdem.cards import rank_of, suit_of
from holdem.schedule import DecisionStage, decision_stage

Hole = tuple[int, int]
Board = tuple[int, ...]

_ACE = 14


@dataclass(frozen=True, slots=True)
class DecisionPoint:
    """What a player sees when the dealer asks for a decision."""

    game: Game
    stage: Stage
    hole: Hole
    board: Board  # the board so far
    paytable: PayTable
    flop_bet: bool = False  # whether this ante bet on the flop (it changes the turn's stakes)


class Strategy(Protocol):
    """A player's way of deciding."""

    def decide(self, point: DecisionPoint) -> Action | None:
        """The action at ``point``, or None when the player times out."""
        ...


class Advisor(Protocol):
    """Something that knows the best decision (highest EV), e.g. the exact-odds module."""

    def best_action(self, point: DecisionPoint) -> Action:
        """The decision with the highest expected value."""
        ...


StrategyFactory = Callable[[random.Random], Strategy]


def decision_stage_of(point: DecisionPoint) -> DecisionStage:
    """The schedule's stage ``point`` is at (docs/rules.md); a ValueError if the game has none."""
    stage = decision_stage(point.game, point.stage)
    if stage is None:
        raise ValueError(f"{point.game} asks for no decision at {point.stage}")
    return stage


def _rank_mask(cards: Sequence[int]) -> int:
    """Bit r set for each rank r present (2..14), and bit 1 for an ace (it also plays low)."""
    mask = 0
    for card in cards:
        mask |= 1 << rank_of(card)
    return mask | ((mask >> _ACE) & 1) << 1


def _run_of(mask: int, length: int) -> bool:
    """Whether ``length`` consecutive ranks are all present."""
    run = mask
    for shift in range(1, length):
        run &= mask >> shift
    return run != 0


def has_pair_or_better(cards: Sequence[int]) -> bool:
    """A pair or better among five or more cards: a repeated rank, a flush or a straight."""
    ranks = {rank_of(card) for card in cards}
    return len(ranks) < len(cards) or has_flush(cards) or _run_of(_rank_mask(cards), 5)


def has_flush(cards: Sequence[int]) -> bool:
    """Five or more cards of one suit."""
    return _longest_suit(cards) >= 5


def has_flush_draw(cards: Sequence[int]) -> bool:
    """Four or more cards of one suit."""
    return _longest_suit(cards) >= 4


def _longest_suit(cards: Sequence[int]) -> int:
    counts = [0, 0, 0, 0]
    for card in cards:
        counts[suit_of(card)] += 1
    return max(counts)


def has_straight_draw(cards: Sequence[int]) -> bool:
    """Four ranks in a row (an open-ended draw, or a made straight), ace high or low."""
    return _run_of(_rank_mask(cards), 4)


@lru_cache(maxsize=1024)
def read_hand(hole: Hole, board: Board) -> tuple[bool, bool]:
    """What a casual player sees: (a pair or better, a flush or straight draw)."""
    cards = (*hole, *board)
    return has_pair_or_better(cards), has_flush_draw(cards) or has_straight_draw(cards)


class SimpleStrategy:
    """A casual player's rule of thumb.

    Casino Hold'em, flop: call with a pair or better, any ace in the hand, or four to a flush
    or to a straight; otherwise fold.

    Texas Hold'em Plus: preflop, call with any ace, any pair or suited connectors; otherwise
    fold three times in ten and call the rest. Flop: bet with a pair or better, check
    otherwise. Turn: bet with a pair or better, check with a draw; with nothing, fold one
    time in ten and check the rest.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def decide(self, point: DecisionPoint) -> Action | None:
        """The rule's action; never times out."""
        hole, stage = point.hole, point.stage
        if stage is Stage.PREFLOP:
            return self._preflop(hole)
        made, draw = read_hand(hole, point.board)
        if point.game is Game.CASINO_HOLDEM:
            ace = _ACE in (rank_of(hole[0]), rank_of(hole[1]))
            return Action.CALL if made or ace or draw else Action.FOLD
        if made:
            return Action.BET
        if stage is Stage.TURN and not draw and self._rng.random() < 0.1:
            return Action.FOLD
        return Action.CHECK

    def _preflop(self, hole: Hole) -> Action:
        high, low = sorted((rank_of(hole[0]), rank_of(hole[1])), reverse=True)
        suited_connectors = suit_of(hole[0]) == suit_of(hole[1]) and high - low == 1
        if high in (_ACE, low) or suited_connectors:
            return Action.CALL
        return Action.FOLD if self._rng.random() < 0.3 else Action.CALL


class AlwaysCall:
    """Always puts money in: calls, then bets at every later stage."""

    def __init__(self, rng: random.Random | None = None) -> None:
        del rng

    def decide(self, point: DecisionPoint) -> Action | None:
        """The wager action of the stage."""
        return decision_stage_of(point).wager_action


class RandomStrategy:
    """Picks among the actions the stage admits, each with the same probability."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def decide(self, point: DecisionPoint) -> Action | None:
        """A uniformly random admitted action."""
        return self._rng.choice(decision_stage_of(point).actions)


class TimeoutStrategy:
    """Another strategy whose player, ``rate`` of the time, does not decide at all."""

    def __init__(self, inner: Strategy, rate: float, rng: random.Random) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"timeout rate must be within 0..1, got {rate}")
        self._inner, self._rate, self._rng = inner, rate, rng

    def decide(self, point: DecisionPoint) -> Action | None:
        """None (a timeout) with the given rate, else the inner strategy's action."""
        if self._rng.random() < self._rate:
            return None
        return self._inner.decide(point)


class BestPlayStrategy:
    """The decision with the highest expected value, as ``advisor`` computes it.

    This is the hook for the exact-odds module: give it that module's advisor, e.g.
    ``register_strategy("best-play", lambda rng: BestPlayStrategy(advisor))``.
    """

    def __init__(self, advisor: Advisor) -> None:
        self._advisor = advisor

    def decide(self, point: DecisionPoint) -> Action | None:
        """The advisor's best action; never times out."""
        return self._advisor.best_action(point)


def _best_play(rng: random.Random) -> Strategy:
    from studio.bestplay import exact_odds

    return BestPlayStrategy(exact_odds())


STRATEGIES: dict[str, StrategyFactory] = {
    "simple": SimpleStrategy,
    "always-call": AlwaysCall,
    "random": RandomStrategy,
    "best-play": _best_play,
}


def register_strategy(name: str, factory: StrategyFactory) -> None:
    """Make a strategy available by name (to :class:`~studio.config.StudioConfig` and the CLI)."""
    STRATEGIES[name] = factory


def make_strategy(name: str, rng: random.Random, timeout_rate: float = 0.0) -> Strategy:
    """The named strategy, wrapped in a :class:`TimeoutStrategy` when ``timeout_rate`` > 0."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        known = ", ".join(sorted(STRATEGIES))
        raise ValueError(f"unknown strategy {name!r}; known: {known}") from None
    strategy = factory(rng)
    return TimeoutStrategy(strategy, timeout_rate, rng) if timeout_rate > 0 else strategy
