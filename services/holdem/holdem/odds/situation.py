"""Exact odds of one decision, by enumerating every way the round can end.

Casino Hold'em at the flop: the player sees two hole cards and three flop cards; 47 cards are
unseen. The dealer's seven cards are the flop plus four of the 47 (turn, river and the
dealer's two), so only the C(47, 4) = 178,365 dealer hands and the C(47, 2) = 1,081 player
hands are evaluated; each 4-subset splits six ways into (turn/river, dealer pair), which gives
all 1,081 x 990 = 1,070,190 completions.

Texas Hold'em Plus at the turn: 46 unseen cards, C(46, 3) = 15,180 dealer hands, each split
three ways into (river, house pair): 46 x 990 = 45,540 completions. At the flop: as for
Casino Hold'em, then every turn card's completions are summed and the best turn action is
taken for each; the flop EV is their mean. Before the flop, the EV averages the best flop
action over all 19,600 flops; that comes from the stored PAR data (see :mod:`holdem.odds.par`).

EVs are exact fractions, in antes, as the player's net win (a fold is -1 ante at the
Casino Hold'em flop). When two actions have the same EV, the one that stakes less is taken;
between check and fold, check (the table's default on the flop and turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from itertools import combinations
from typing import Final

import numpy as np
import numpy.typing as npt

from holdem.bets import Action, Stage
from holdem.cards import CardError, cards_text, parse_cards
from holdem.casino_holdem import CATEGORY_LINE, dealer_qualifies
from holdem.evaluator import HAND_CLASSES, Category, evaluate_batch, hand_value
from holdem.odds.combos import pair_index, pairs, quads
from holdem.paytable import Game, PayTable, PayTableError, Spot

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

CATEGORIES: Final = tuple(Category)
#: Completions after the Casino Hold'em flop: C(47, 2) boards x C(45, 2) dealer hands.
CH_COMPLETIONS: Final = 1_070_190
#: Completions after the Texas Hold'em Plus turn: 46 rivers x C(45, 2) house hands.
THP_TURN_COMPLETIONS: Final = 45_540
#: Turn cards after the flop.
THP_TURNS: Final = 47


@cache
def category_of_strength() -> U8:
    """Strength (0..7462) -> hand category, as a ``uint8`` array."""
    table = np.zeros(HAND_CLASSES + 1, dtype=np.uint8)
    for strength in range(1, HAND_CLASSES + 1):
        table[strength] = hand_value(strength).category
    table.setflags(write=False)
    return table


@cache
def qualifying_strength() -> int:
    """The weakest strength that qualifies the dealer (a pair of fours)."""
    q = next(s for s in range(1, HAND_CLASSES + 1) if dealer_qualifies(hand_value(s)))
    # Qualification is a threshold on strength: everything above qualifies, nothing below.
    assert all(dealer_qualifies(hand_value(s)) for s in range(q, HAND_CLASSES + 1))
    return q


def ante_multipliers(table: PayTable) -> tuple[int, ...]:
    """What the ante pays "to 1" per category (low to high); 0 where it pushes."""
    return tuple(table.pays(Spot.ANTE, CATEGORY_LINE[c]) or 0 for c in CATEGORIES)


def _check_game(table: PayTable, game: Game) -> None:
    if table.game is not game:
        raise PayTableError(f"pay table {table.id} is for {table.game}, not {game}")


def _cards(cards: Sequence[int] | str, count: int, what: str) -> tuple[int, ...]:
    ids = tuple(parse_cards(cards)) if isinstance(cards, str) else tuple(cards)
    if len(ids) != count:
        raise CardError(f"{what} is {count} cards, got {len(ids)}")
    for card in ids:
        if not 0 <= card < 52:
            raise CardError(f"card ids run from 0 (2c) to 51 (As), got {card!r}")
    return ids


def _distinct(*groups: tuple[int, ...]) -> tuple[int, ...]:
    seen = tuple(c for g in groups for c in g)
    if len(set(seen)) != len(seen):
        raise CardError(f"a card may appear only once, got {cards_text(seen)}")
    return seen


def _unseen(seen: tuple[int, ...]) -> U8:
    return np.array(sorted(set(range(52)) - set(seen)), dtype=np.uint8)


@cache
def flop_splits() -> npt.NDArray[np.int32]:
    """For each 4-subset of 47 (colex order), its six (turn/river pair) rows in pairs(47)."""
    q, index = quads(47), pair_index(47)
    out = np.stack([index[q[:, i], q[:, j]] for i, j in combinations(range(4), 2)], axis=1)
    out.setflags(write=False)
    return out


@cache
def _splits46() -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """3-subsets of 46 and, for each, its three river positions (one per split)."""
    triples = np.array(list(combinations(range(46), 3)), dtype=np.int32)
    triples.setflags(write=False)
    return triples, triples


def _flop_showdowns(
    hole: tuple[int, ...], flop: tuple[int, ...], unseen: U8
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16], npt.NDArray[np.int32]]:
    """Player strength per turn/river pair, dealer strength per 4-subset, and the splits."""
    q = quads(47)
    dealer_cards = np.empty((len(q), 7), dtype=np.uint8)
    dealer_cards[:, :3] = flop
    dealer_cards[:, 3:] = unseen[q]
    board = pairs(47)
    player_cards = np.empty((len(board), 7), dtype=np.uint8)
    player_cards[:, :2] = hole
    player_cards[:, 2:5] = flop
    player_cards[:, 5:] = unseen[board]
    return evaluate_batch(player_cards), evaluate_batch(dealer_cards), flop_splits()


# --- Casino Hold'em ------------------------------------------------------------------------


@dataclass(frozen=True)
class CasinoHoldemFlopOdds:
    """One Casino Hold'em flop decision: EVs in antes and the outcome counts of a call.

    Counts are over all 1,070,190 (turn/river, dealer hand) completions; those by category
    are indexed by :class:`Category` (high card first) and are the player's final hand.
    """

    hole: tuple[int, int]
    flop: tuple[int, int, int]
    completions: int
    dealer_does_not_qualify: tuple[int, ...]
    wins: tuple[int, ...]
    ties: int
    losses: int
    ev_call: Fraction
    ev_fold: Fraction

    @property
    def best(self) -> Action:
        """The action with the higher EV (fold when they are equal)."""
        return Action.CALL if self.ev_call > self.ev_fold else Action.FOLD

    @property
    def ev(self) -> Mapping[Action, Fraction]:
        """EV of each action, in antes."""
        return {Action.CALL: self.ev_call, Action.FOLD: self.ev_fold}


def ch_call_numerator(
    no_qualify: npt.NDArray[np.int64],
    wins: npt.NDArray[np.int64],
    losses: npt.NDArray[np.int64],
    multipliers: Sequence[int],
) -> I64:
    """Net win of a call, summed over the completions counted (ante units).

    ``no_qualify`` and ``wins`` have the categories on the last axis. Dealer does not
    qualify: the ante pays by the table, the call pushes. Player higher: the ante pays by the
    table and the 2-ante call 1:1. Dealer higher: both lose (3 antes). Equal: both push.
    """
    m = np.asarray(multipliers, dtype=np.int64)
    out: I64 = no_qualify @ m + wins @ (m + 2) - 3 * losses
    return out


def casino_holdem_flop(
    table: PayTable, hole: Sequence[int] | str, flop: Sequence[int] | str
) -> CasinoHoldemFlopOdds:
    """Exact EVs of CALL and FOLD at the Casino Hold'em flop, and the outcome counts."""
    _check_game(table, Game.CASINO_HOLDEM)
    h, f = _cards(hole, 2, "the hole"), _cards(flop, 3, "the flop")
    unseen = _unseen(_distinct(h, f))
    player, dealer, splits = _flop_showdowns(h, f, unseen)
    pv = player[splits]  # (178365, 6): the player's strength in each split
    dv = dealer[:, None]
    qualifies = np.broadcast_to(dv >= qualifying_strength(), pv.shape)
    category = category_of_strength()[pv]
    no_qualify = np.bincount(category[~qualifies], minlength=10)
    wins = np.bincount(category[qualifies & (pv > dv)], minlength=10)
    ties = int(np.count_nonzero(qualifies & (pv == dv)))
    losses = int(np.count_nonzero(qualifies & (pv < dv)))
    numerator = int(ch_call_numerator(no_qualify, wins, np.array(losses), ante_multipliers(table)))
    total = int(no_qualify.sum() + wins.sum()) + ties + losses
    assert total == CH_COMPLETIONS
    return CasinoHoldemFlopOdds(
        hole=(h[0], h[1]),
        flop=(f[0], f[1], f[2]),
        completions=total,
        dealer_does_not_qualify=tuple(int(x) for x in no_qualify),
        wins=tuple(int(x) for x in wins),
        ties=ties,
        losses=losses,
        ev_call=Fraction(numerator, total),
        ev_fold=Fraction(-1),
    )


# --- Texas Hold'em Plus --------------------------------------------------------------------

#: Turn and flop actions in the order that breaks ties: the smaller stake first, check
#: before fold.
THP_ACTIONS: Final = (Action.CHECK, Action.FOLD, Action.BET)


def thp_turn_numerators(
    wins: npt.NDArray[np.int64],
    losses: npt.NDArray[np.int64],
    total: int,
    flop_bet: int,
    multipliers: Sequence[int],
) -> I64:
    """Net win of check, fold and bet at the turn, summed over ``total`` completions.

    ``wins`` has the player's final category on its last axis; the result has the three
    actions (:data:`THP_ACTIONS`) on its last axis. Stakes so far: ante 1, call 2, flop bet
    ``flop_bet`` (0 or 1). Player higher: play wagers 1:1, the ante by its table (pushes
    below it); house higher: all lose; equal: all push; fold: all staked so far is lost.
    """
    m = np.asarray(multipliers, dtype=np.int64)
    played = 2 + flop_bet
    lose = np.asarray(losses, dtype=np.int64)
    check = wins @ (m + played) - lose * (1 + played)
    bet = check + wins.sum(axis=-1) - lose
    fold = np.full_like(check, -(1 + played) * total)
    out: I64 = np.stack([check, fold, bet], axis=-1)
    return out


def thp_flop_numerators(
    turn_wins: npt.NDArray[np.int64],
    turn_losses: npt.NDArray[np.int64],
    multipliers: Sequence[int],
) -> tuple[I64, I64, I64]:
    """Flop EV numerators of check, fold, bet over 47 turns x 45,540 completions each.

    ``turn_wins`` is ``(..., 47, 10)`` and ``turn_losses`` ``(..., 47)``: counts after each
    turn card. Returns the flop numerators ``(..., 3)`` and the best turn action index per
    turn card after a flop check and after a flop bet, ``(..., 47)`` each.
    """
    total = THP_TURN_COMPLETIONS
    after_check = thp_turn_numerators(turn_wins, turn_losses, total, 0, multipliers)
    after_bet = thp_turn_numerators(turn_wins, turn_losses, total, 1, multipliers)
    check = after_check.max(axis=-1).sum(axis=-1)
    bet = after_bet.max(axis=-1).sum(axis=-1)
    fold = np.full_like(check, -3 * total * turn_wins.shape[-2])
    flop: I64 = np.stack([check, fold, bet], axis=-1)
    return flop, after_check.argmax(axis=-1), after_bet.argmax(axis=-1)


@dataclass(frozen=True)
class ThpDecisionOdds:
    """One Texas Hold'em Plus decision: the EV of each action in antes (best play after).

    Showdown counts (wins by the player's final category, ties, losses) are over every
    completion, for a turn decision; for a flop or preflop decision they are empty.
    """

    stage: Stage
    ev: Mapping[Action, Fraction]
    completions: int = 0
    wins: tuple[int, ...] = ()
    ties: int = 0
    losses: int = 0

    @property
    def best(self) -> Action:
        """The action with the highest EV; ties go to the smaller stake, check before fold."""
        order = {Action.FOLD: 0, Action.CHECK: -1, Action.BET: 1, Action.CALL: 1}
        return max(self.ev, key=lambda a: (self.ev[a], -order[a]))


def texas_holdem_plus_turn(
    table: PayTable,
    hole: Sequence[int] | str,
    flop: Sequence[int] | str,
    turn: Sequence[int] | str,
    flop_bet: bool = False,
) -> ThpDecisionOdds:
    """Exact EVs of check, bet and fold at the turn; ``flop_bet``: whether a flop bet was made."""
    _check_game(table, Game.TEXAS_HOLDEM_PLUS)
    h, f = _cards(hole, 2, "the hole"), _cards(flop, 3, "the flop")
    t = _cards(turn, 1, "the turn")
    unseen = _unseen(_distinct(h, f, t))
    triples, _ = _splits46()
    board = (*f, *t)
    rivers = np.empty((46, 7), dtype=np.uint8)
    rivers[:, :2] = h
    rivers[:, 2:6] = board
    rivers[:, 6] = unseen
    player = evaluate_batch(rivers)
    house_cards = np.empty((len(triples), 7), dtype=np.uint8)
    house_cards[:, :4] = board
    house_cards[:, 4:] = unseen[triples]
    house = evaluate_batch(house_cards)[:, None]
    pv = player[triples]  # (15180, 3): the river is each of the three cards in turn
    category = category_of_strength()[pv]
    wins = np.bincount(category[pv > house], minlength=10).astype(np.int64)
    ties = int(np.count_nonzero(pv == house))
    losses = int(np.count_nonzero(pv < house))
    assert int(wins.sum()) + ties + losses == THP_TURN_COMPLETIONS
    numerators = thp_turn_numerators(
        wins, np.array(losses), THP_TURN_COMPLETIONS, int(flop_bet), ante_multipliers(table)
    )
    return ThpDecisionOdds(
        stage=Stage.TURN,
        ev={
            a: Fraction(int(n), THP_TURN_COMPLETIONS)
            for a, n in zip(THP_ACTIONS, numerators, strict=True)
        },
        completions=THP_TURN_COMPLETIONS,
        wins=tuple(int(x) for x in wins),
        ties=ties,
        losses=losses,
    )


def thp_flop_counts(
    hole: tuple[int, ...], flop: tuple[int, ...]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], U8]:
    """Per turn card (the 47 unseen, ascending): wins by category, ties and losses."""
    unseen = _unseen(_distinct(hole, flop))
    player, house, splits = _flop_showdowns(hole, flop, unseen)
    pv = player[splits]
    hv = house[:, None]
    category = category_of_strength()[pv].astype(np.int64)
    # Per turn/river pair: wins by category, ties, losses over its 990 house hands.
    win_key = np.where(pv > hv, splits * 10 + category, -1).ravel()
    board_wins = np.bincount(win_key[win_key >= 0], minlength=1081 * 10).reshape(1081, 10)
    board_ties = np.bincount(splits[pv == hv], minlength=1081)
    board_losses = np.bincount(splits[pv < hv], minlength=1081)
    # Per turn card: sum over the 46 pairs holding it (the other card is the river).
    board = pairs(47)
    incidence = np.zeros((1081, 47), dtype=np.int64)
    incidence[np.arange(1081), board[:, 0]] = 1
    incidence[np.arange(1081), board[:, 1]] = 1
    turn_wins = incidence.T @ board_wins
    turn_ties = incidence.T @ board_ties
    turn_losses = incidence.T @ board_losses
    return turn_wins, turn_ties, turn_losses, unseen


def texas_holdem_plus_flop(
    table: PayTable, hole: Sequence[int] | str, flop: Sequence[int] | str
) -> ThpDecisionOdds:
    """Exact EVs of check, bet and fold at the flop, with the best turn action after."""
    _check_game(table, Game.TEXAS_HOLDEM_PLUS)
    h, f = _cards(hole, 2, "the hole"), _cards(flop, 3, "the flop")
    turn_wins, turn_ties, turn_losses, _ = thp_flop_counts(h, f)
    assert np.all(turn_wins.sum(axis=1) + turn_ties + turn_losses == THP_TURN_COMPLETIONS)
    numerators, _, _ = thp_flop_numerators(turn_wins, turn_losses, ante_multipliers(table))
    total = THP_TURNS * THP_TURN_COMPLETIONS
    return ThpDecisionOdds(
        stage=Stage.FLOP,
        ev={a: Fraction(int(n), total) for a, n in zip(THP_ACTIONS, numerators, strict=True)},
    )
