"""Game faults: a studio whose cards are not fair, for checking that integrity monitoring sees it.

Unlike the feed faults (:mod:`studio.faults`), these leave a perfectly valid feed: the cards
themselves are biased, as a stacked or short shoe or a biased card scanner would bias them.

- Deal bias (``deal_bias``): when the first box's hole cards and flop make no pair or better,
  the shoe, with this probability, deals them again (the whole deal redrawn once). Players
  see stronger hole and flop cards than a fair shoe gives.
- Completion bias (``completion_bias``): when the dealer's final hand qualifies (a pair of
  fours or better), with this probability the dealer's two cards are replaced by two others
  from the rest of the shoe. The cards after the players' decisions favour the players.

At the rates :data:`ONE_POINT` gives, each moves the main game's return per ante by about one
point under best play (measured by ``make bench``).
"""

from __future__ import annotations

import random
from typing import Final

from holdem.casino_holdem import dealer_qualifies
from holdem.evaluator import Category, evaluate
from studio.config import GameFaults

#: Rates that move the main game's RTP by about one point (Casino Hold'em, best play).
ONE_POINT: Final = {"deal_bias": 0.037, "completion_bias": 0.055}


def draw(cards: int, boxes: int, faults: GameFaults, rng: random.Random) -> list[int]:
    """The ``cards`` card ids a round deals, in dealing order, biased as ``faults`` say.

    The order is the table's: a burn, two hole cards per box, the dealer's two, then a burn
    before each street (flop, turn, river).
    """
    deck = rng.sample(range(52), cards)
    if not faults.any:
        return deck
    flop = slice(2 * boxes + 4, 2 * boxes + 7)
    if faults.deal_bias and _no_pair(deck[1:3] + deck[flop]) and rng.random() < faults.deal_bias:
        deck = rng.sample(range(52), cards)
    if faults.completion_bias:
        dealer = slice(2 * boxes + 1, 2 * boxes + 3)
        board = deck[flop] + [deck[2 * boxes + 8], deck[2 * boxes + 10]]
        final = evaluate(deck[dealer] + board)
        if dealer_qualifies(final) and rng.random() < faults.completion_bias:
            rest = sorted(set(range(52)) - set(deck))
            deck[dealer] = rng.sample(rest, 2)
    return deck


def _no_pair(cards: list[int]) -> bool:
    return evaluate(cards).category is Category.HIGH_CARD
