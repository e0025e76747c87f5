"""Card text and ids (docs/rules.md, "Cards and hands")."""

from __future__ import annotations

import pytest

from holdem.cards import (
    DECK,
    RANKS,
    SUITS,
    CardError,
    card_text,
    cards_text,
    parse_card,
    parse_cards,
    rank_of,
    suit_of,
)


def test_every_card_round_trips() -> None:
    texts = [card_text(card) for card in DECK]
    assert len(set(texts)) == 52
    assert texts == [rank + suit for rank in RANKS for suit in SUITS]
    for card in DECK:
        assert parse_card(card_text(card)) == card
        assert card == (rank_of(card) - 2) * 4 + suit_of(card)


@pytest.mark.parametrize(
    ("text", "card", "rank", "suit"),
    [("2c", 0, 2, 0), ("2s", 3, 2, 3), ("Td", 33, 10, 1), ("Kh", 46, 13, 2), ("As", 51, 14, 3)],
)
def test_known_ids(text: str, card: int, rank: int, suit: int) -> None:
    assert parse_card(text) == card
    assert card_text(card) == text
    assert rank_of(card) == rank
    assert suit_of(card) == suit


# Suits are lower case and tens are written T (docs/rules.md), so "AS" and "10h" are not cards.
@pytest.mark.parametrize("text", ["1s", "Ax", "AS", "as", "10h", "", "A", "s", " As", "As ", "Xx"])
def test_bad_text_names_the_card_and_the_format(text: str) -> None:
    with pytest.raises(CardError) as raised:
        parse_card(text)
    message = str(raised.value)
    assert repr(text) in message
    assert "rank" in message and "suit" in message
    assert "'As'" in message


def test_card_error_is_a_value_error() -> None:
    assert issubclass(CardError, ValueError)


@pytest.mark.parametrize("text", ["AsKdQh", "As Kd Qh", "As, Kd, Qh", " As  Kd\tQh "])
def test_parse_cards_accepts_compact_and_separated_text(text: str) -> None:
    assert parse_cards(text) == [51, 45, 42]
    assert parse_cards(["As", "Kd", "Qh"]) == [51, 45, 42]
    assert cards_text([51, 45, 42]) == "AsKdQh"


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("AsK", "'AsK' is not a list of cards: each card is two characters"),
        ("As 10h", "'As 10h' is not a list of cards: each card is two characters"),
        ("As 1h", "'1h' is not a card"),
        ("AsKx", "'Kx' is not a card"),
        (["As", "AS"], "'AS' is not a card"),
    ],
)
def test_parse_cards_names_the_bad_card(text: str | list[str], bad: str) -> None:
    with pytest.raises(CardError, match=bad):
        parse_cards(text)


def test_parse_cards_of_nothing_is_empty() -> None:
    assert parse_cards("") == []
    assert parse_cards([]) == []


@pytest.mark.parametrize("card", [-1, 52, 100])
def test_card_text_rejects_ids_outside_the_deck(card: int) -> None:
    with pytest.raises(CardError, match="0 \\(2c\\) to 51 \\(As\\)"):
        card_text(card)
