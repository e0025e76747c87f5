"""Cards: text such as ``As``, ``Td`` or ``2c``, and their ids 0-51.

A card id is ``(rank - 2) * 4 + suit`` with ranks 2..14 (ace high) and suits in the
order c, d, h, s: ``2c`` is 0 and ``As`` is 51.
"""

from __future__ import annotations

from collections.abc import Iterable

RANKS = "23456789TJQKA"
SUITS = "cdhs"
RANK_NAMES = (
    "Two", "Three", "Four", "Five", "Six", "Seven", "Eight",
    "Nine", "Ten", "Jack", "Queen", "King", "Ace",
)  # fmt: skip
DECK: tuple[int, ...] = tuple(range(52))

_IDS = {rank + suit: r * 4 + s for r, rank in enumerate(RANKS) for s, suit in enumerate(SUITS)}
_TEXTS = tuple(sorted(_IDS, key=_IDS.__getitem__))


class CardError(ValueError):
    """Text that is not a card."""


def parse_card(text: str) -> int:
    """The id of one card written as rank + suit, e.g. ``"As"`` -> 51."""
    card = _IDS.get(text)
    if card is None:
        raise CardError(
            f"{text!r} is not a card: a card is a rank {RANKS!r} then a suit {SUITS!r}, "
            "e.g. 'As', 'Td', '2c'"
        )
    return card


def parse_cards(text: str | Iterable[str]) -> list[int]:
    """Ids of several cards: ``"AsKd"``, ``"As Kd"`` or ``["As", "Kd"]``."""
    if isinstance(text, str):
        compact = "".join(text.replace(",", " ").split())
        if len(compact) % 2:
            raise CardError(f"{text!r} is not a list of cards: each card is two characters")
        return [parse_card(compact[i : i + 2]) for i in range(0, len(compact), 2)]
    return [parse_card(card) for card in text]


def card_text(card: int) -> str:
    """The text of a card id, e.g. 51 -> ``"As"``."""
    if not 0 <= card < 52:
        raise CardError(f"{card!r} is not a card id: ids run from 0 (2c) to 51 (As)")
    return _TEXTS[card]


def cards_text(cards: Iterable[int]) -> str:
    """Cards as compact text, e.g. ``"AsKd"``."""
    return "".join(card_text(card) for card in cards)


def rank_of(card: int) -> int:
    """The rank of a card id: 2..14, ace high."""
    return (card >> 2) + 2


def suit_of(card: int) -> int:
    """The suit of a card id: 0..3 for c, d, h, s."""
    return card & 3
