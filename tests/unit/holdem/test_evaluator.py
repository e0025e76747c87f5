"""The hand evaluator against the rules (docs/rules.md, "Cards and hands") and a brute-force
reference.

The reference below shares nothing with ``holdem.evaluator``: it classifies one five-card hand
directly and takes the best of the 21 five-card subsets of seven cards.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import combinations
from math import comb

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holdem.cards import CardError, parse_cards
from holdem.evaluator import (
    HAND_CLASSES,
    Category,
    HandValue,
    evaluate,
    evaluate_batch,
    hand_value,
)

# --- the reference ---------------------------------------------------------------------------

# Categories as plain integers, low to high; the same numbers as Category so they compare.
HIGH, PAIR, TWO_PAIR, TRIPS, STRAIGHT, FLUSH, FULL, QUADS, STRAIGHT_FLUSH, ROYAL = range(10)
RefValue = tuple[int, tuple[int, ...]]


def reference_five(cards: Sequence[int]) -> RefValue:
    """(category, five ranks in order of importance) of exactly five distinct cards.

    Tuples compare like the hands. A five-high straight lists its ace as 1.
    """
    assert len(cards) == 5 and len(set(cards)) == 5
    ranks = sorted((card // 4 + 2 for card in cards), reverse=True)
    flush = len({card % 4 for card in cards}) == 1
    counts = Counter(ranks)
    straight: tuple[int, ...] | None = None
    if len(counts) == 5:
        if ranks[0] - ranks[4] == 4:
            straight = tuple(ranks)
        elif ranks == [14, 5, 4, 3, 2]:
            straight = (5, 4, 3, 2, 1)
    if straight and flush:
        return (ROYAL if straight[0] == 14 else STRAIGHT_FLUSH), straight
    # Ranks grouped: bigger groups first, then higher ranks.
    groups = sorted(counts.items(), key=lambda rc: (rc[1], rc[0]), reverse=True)
    ordered = tuple(rank for rank, n in groups for _ in range(n))
    shape = sorted(counts.values(), reverse=True)
    if shape[0] == 4:
        return QUADS, ordered
    if shape[:2] == [3, 2]:
        return FULL, ordered
    if flush:
        return FLUSH, ordered
    if straight:
        return STRAIGHT, straight
    if shape[0] == 3:
        return TRIPS, ordered
    if shape[:2] == [2, 2]:
        return TWO_PAIR, ordered
    if shape[0] == 2:
        return PAIR, ordered
    return HIGH, ordered


def reference(cards: Sequence[int]) -> RefValue:
    """The best five-card hand among 5, 6 or 7 cards, by trying every five-card subset."""
    return max(reference_five(five) for five in combinations(cards, 5))


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def compare_reference(a: RefValue, b: RefValue) -> int:
    return (a > b) - (a < b)


def value(hole: str, board: str) -> HandValue:
    return evaluate(parse_cards(hole + board))


# --- table-driven cases from the rules and seeds ---------------------------------------------

SEED_BOARD = "9h9dQs5c2h"

# (why, first hole, second hole, board, +1 first wins / 0 push / -1 second wins)
SHOWDOWNS = [
    ("seed 000: sixth and seventh cards never count", "Qc4d", "Qd3s", SEED_BOARD, 0),
    ("seed 000: Q/7 beats Q/4, the seven is the kicker", "Qc7d", "Qd4s", SEED_BOARD, 1),
    ("wheel is below a six-high straight", "As2d", "6h2c", "3c4h5s9dKc", -1),
    ("ace-high straight beats king-high straight", "AsKd", "Kh9c", "TcJdQh2s3c", 1),
    ("five-high straight flush beats quads", "As5s", "KcKh", "2s3s4sKdKs", 1),
    ("six-high straight flush beats five-high", "6h7c", "As8d", "2h3h4h5hKc", 1),
    ("quads: the kicker decides", "Ac3d", "KcQd", "7c7d7h7s2c", 1),
    ("board quads: best kicker among the other three cards", "KcQd", "2c3d", "7c7d7h7s9d", 1),
    ("board quads with an ace on board: push", "KcQd", "2c3d", "7c7d7h7sAd", 0),
    ("board quads, both kickers below the board's: push", "8c8d", "2c3d", "7c7d7h7s9d", 0),
    ("two pair decided by the board kicker: push", "8c2d", "8d3c", "KcKd8h5sAc", 0),
    ("two pair: kings and eights beat kings and fives", "8c2d", "5c4c", "KcKd8h5sAc", 1),
    ("two pair: hole kicker beats board kicker", "Qc3d", "Jc3h", "KcKd8h8s4c", 1),
    ("three pairs: best two pairs and best kicker", "3dAh", "3hKc", "9c9d5h5s3c", 1),
    ("three pairs: the third pair's rank is the kicker", "4d2h", "Qc2c", "KcKd8h8s4c", -1),
    ("flushes compare down to the fifth card", "3h5c", "KcQd", "AhJh8h4h2h", 1),
    ("flush: hole card improves the fourth card", "9h2c", "7h2d", "AhJh8h4h3c", 1),
    ("flush on board plays for both: push", "KcQd", "KsQs", "AhJh8h4h2h", 0),
    ("full houses: trips first", "Kh2c", "5c2d", "KcKd5h5s9c", 1),
    ("full houses: kings full beats nines full of kings", "Kh2c", "9d9h", "KcKd5h5s9c", 1),
    ("two trips make a full house, beating a flush draw", "8h5h", "Ah2h", "8c8d5c5dKh", 1),
    ("board straight plays for both: push", "2c2d", "3hKd", "5c6d7h8s9c", 0),
    ("board royal flush plays for both: push", "2c2d", "3hKd", "AsKsQsJsTs", 0),
    ("flush beats straight", "Ah2h", "9c8c", "ThJd7hQh3h", 1),
    ("straight beats trips", "9c8c", "TsTc", "ThJd7hQs3h", 1),
    ("trips beat two pair", "TsTc", "JcQc", "ThJd7hQs3h", 1),
    ("pair kicker decides", "AsKc", "AdQc", "Ah8d6c4s2h", 1),
    ("high card compares down to the fifth card", "AsTc", "Ad9c", "Kh8d6c4s2h", 1),
    ("high card: sixth card never counts", "As3c", "Ad2c", "Kh8d6c5s9h", 0),
]


@pytest.mark.parametrize(
    ("first", "second", "board", "expected"),
    [case[1:] for case in SHOWDOWNS],
    ids=[case[0] for case in SHOWDOWNS],
)
def test_showdowns(first: str, second: str, board: str, expected: int) -> None:
    a, b = value(first, board), value(second, board)
    assert sign(a.strength - b.strength) == expected
    assert (a == b) == (expected == 0)
    assert (a > b) == (expected > 0)
    assert (a < b) == (expected < 0)
    ref = compare_reference(
        reference(parse_cards(first + board)), reference(parse_cards(second + board))
    )
    assert ref == expected


# (cards, category, ranks, description)
HANDS = [
    (
        "Qc4d" + SEED_BOARD,
        Category.TWO_PAIR,
        (12, 12, 9, 9, 5),
        "Two Pair, Queens and Nines, Five kicker",
    ),
    ("AsKsQsJsTs2c2d", Category.ROYAL_FLUSH, (14, 13, 12, 11, 10), "Royal Flush"),
    ("KhQhJhTh9h8h2c", Category.STRAIGHT_FLUSH, (13, 12, 11, 10, 9), "Straight Flush, King high"),
    ("As2s3s4s5sKdQc", Category.STRAIGHT_FLUSH, (5, 4, 3, 2, 1), "Straight Flush, Five high"),
    ("As2d3c4h5sKdQc", Category.STRAIGHT, (5, 4, 3, 2, 1), "Straight, Five high"),
    ("As2d3c4h5s6dQc", Category.STRAIGHT, (6, 5, 4, 3, 2), "Straight, Six high"),
    ("AsKdQcJhTs9d2c", Category.STRAIGHT, (14, 13, 12, 11, 10), "Straight, Ace high"),
    (
        "7c7d7h7sAdKcQd",
        Category.FOUR_OF_A_KIND,
        (7, 7, 7, 7, 14),
        "Four of a Kind, Sevens, Ace kicker",
    ),
    ("KhKcKd5h5s5c9c", Category.FULL_HOUSE, (13, 13, 13, 5, 5), "Full House, Kings full of Fives"),
    ("8c8d8h5c5d5hKs", Category.FULL_HOUSE, (8, 8, 8, 5, 5), "Full House, Eights full of Fives"),
    ("6c6d6hAcAdKsKh", Category.FULL_HOUSE, (6, 6, 6, 14, 14), "Full House, Sixes full of Aces"),
    ("AhJh8h4h3h2h5c", Category.FLUSH, (14, 11, 8, 4, 3), "Flush, Ace, Jack, Eight, Four, Three"),
    (
        "TsTcTh8d4c3s2h",
        Category.THREE_OF_A_KIND,
        (10, 10, 10, 8, 4),
        "Three of a Kind, Tens, Eight and Four kickers",
    ),
    (
        "KcKd8h8s4c4d2h",
        Category.TWO_PAIR,
        (13, 13, 8, 8, 4),
        "Two Pair, Kings and Eights, Four kicker",
    ),
    (
        "6s6dAh9c4d3s2c",
        Category.PAIR,
        (6, 6, 14, 9, 4),
        "Pair of Sixes, Ace, Nine and Four kickers",
    ),
    (
        "AsKc9h7d4c3s2h",
        Category.HIGH_CARD,
        (14, 13, 9, 7, 4),
        "High Card, Ace, King, Nine, Seven, Four",
    ),
]


@pytest.mark.parametrize(("cards", "category", "ranks", "description"), HANDS)
def test_categories_ranks_and_descriptions(
    cards: str, category: Category, ranks: tuple[int, ...], description: str
) -> None:
    for hand in (cards, parse_cards(cards), tuple(parse_cards(cards))):
        got = evaluate(hand)
        assert got.category is category
        assert got.ranks == ranks
        assert got.description == description
        assert str(got) == description
    assert reference(parse_cards(cards)) == (int(category), ranks)


def test_suits_never_break_ties() -> None:
    assert evaluate("AhJh8h4h2h3c5d") == evaluate("AsJs8s4s2s3d5c")
    assert evaluate("AhAdKcKs9h3c2d") == evaluate("AcAsKhKd9s3d2c")
    assert hash(evaluate("AhJh8h4h2h3c5d")) == hash(evaluate("AsJs8s4s2s3d5c"))


def test_extremes() -> None:
    assert evaluate("7c5d4h3s2c").strength == 1
    assert evaluate("AsKsQsJsTs").strength == HAND_CLASSES == 7462
    assert evaluate("AsKsQsJsTs").category is Category.ROYAL_FLUSH
    assert evaluate("KsQsJsTs9s").category is Category.STRAIGHT_FLUSH
    assert evaluate("KsQsJsTs9s").strength == HAND_CLASSES - 1


# --- every hand class ------------------------------------------------------------------------

# Distinct hand classes per category (a royal flush is one of the ten straight flushes).
CLASSES_PER_CATEGORY = {
    Category.HIGH_CARD: 1277,
    Category.PAIR: 2860,
    Category.TWO_PAIR: 858,
    Category.THREE_OF_A_KIND: 858,
    Category.STRAIGHT: 10,
    Category.FLUSH: 1277,
    Category.FULL_HOUSE: 156,
    Category.FOUR_OF_A_KIND: 156,
    Category.STRAIGHT_FLUSH: 9,
    Category.ROYAL_FLUSH: 1,
}


def example_hand(category: Category, ranks: tuple[int, ...]) -> list[int]:
    """Five cards of the given class: one suit for flushes, else suits cycling by position."""
    suited = category in (Category.FLUSH, Category.STRAIGHT_FLUSH, Category.ROYAL_FLUSH)
    return [
        (14 if rank == 1 else rank) * 4 - 8 + (3 if suited else i % 4)
        for i, rank in enumerate(ranks)
    ]


def test_distinct_strengths_per_category() -> None:
    assert HAND_CLASSES == sum(CLASSES_PER_CATEGORY.values()) == 7462
    values = [hand_value(s) for s in range(1, HAND_CLASSES + 1)]
    assert Counter(v.category for v in values) == CLASSES_PER_CATEGORY
    assert [v.strength for v in values] == list(range(1, HAND_CLASSES + 1))
    # Strengths follow the reference order strictly: categories in blocks, then ranks.
    keys = [(int(v.category), v.ranks) for v in values]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)
    # Every class is a real hand and classifies the same both ways.
    for v in values:
        hand = example_hand(v.category, v.ranks)
        assert reference_five(hand) == (int(v.category), v.ranks)
        assert evaluate(hand) is v


@pytest.mark.parametrize("strength", [0, -1, HAND_CLASSES + 1])
def test_hand_value_rejects_strengths_outside_the_classes(strength: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        hand_value(strength)


# Published counts of all C(52, 5) = 2,598,960 five-card hands.
FIVE_CARD_COUNTS = {
    Category.ROYAL_FLUSH: 4,
    Category.STRAIGHT_FLUSH: 36,
    Category.FOUR_OF_A_KIND: 624,
    Category.FULL_HOUSE: 3_744,
    Category.FLUSH: 5_108,
    Category.STRAIGHT: 10_200,
    Category.THREE_OF_A_KIND: 54_912,
    Category.TWO_PAIR: 123_552,
    Category.PAIR: 1_098_240,
    Category.HIGH_CARD: 1_302_540,
}


def test_all_five_card_hands() -> None:
    """All 2,598,960 five-card hands through ``evaluate`` (about 3 s)."""
    counts: Counter[Category] = Counter()
    strengths: dict[Category, set[int]] = {c: set() for c in Category}
    for hand in combinations(range(52), 5):
        v = evaluate(hand)
        counts[v.category] += 1
        strengths[v.category].add(v.strength)
    assert sum(counts.values()) == comb(52, 5)
    assert counts == FIVE_CARD_COUNTS
    assert {c: len(s) for c, s in strengths.items()} == CLASSES_PER_CATEGORY


# --- properties against the reference --------------------------------------------------------


def distinct_cards(n: int) -> st.SearchStrategy[list[int]]:
    """n distinct cards: from the whole deck, or from small pools so that flushes, straights,
    quads and full houses come up often."""
    pools = st.sampled_from(
        [
            list(range(52)),
            [*range(3, 52, 4), 0, 5, 10, 15, 20],  # every spade and a few others
            list(range(32, 52)),  # tens to aces: straights to the ace, quads
            [*range(0, 16), *range(48, 52)],  # twos to fives and aces: wheels
            [card for card in range(52) if card % 4 < 2],  # two suits
        ]
    )
    return pools.flatmap(
        lambda pool: st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=True)
    )


seven_cards = distinct_cards(7)


@settings(max_examples=400, deadline=None)
@given(seven_cards)
def test_evaluate_matches_the_reference_on_seven_cards(hand: list[int]) -> None:
    got = evaluate(hand)
    assert (int(got.category), got.ranks) == reference(hand)


@settings(max_examples=300, deadline=None)
@given(st.one_of(distinct_cards(5), distinct_cards(6)))
def test_evaluate_matches_the_reference_on_five_and_six_cards(hand: list[int]) -> None:
    got = evaluate(hand)
    assert (int(got.category), got.ranks) == reference(hand)


@settings(max_examples=400, deadline=None)
@given(seven_cards, seven_cards)
def test_order_matches_the_reference(first: list[int], second: list[int]) -> None:
    a, b = evaluate(first), evaluate(second)
    assert sign(a.strength - b.strength) == compare_reference(reference(first), reference(second))


@settings(max_examples=400, deadline=None)
@given(distinct_cards(9))
def test_showdown_on_a_shared_board_matches_the_reference(cards: list[int]) -> None:
    board, first, second = cards[:5], cards[5:7], cards[7:]
    a, b = evaluate(first + board), evaluate(second + board)
    expected = compare_reference(reference(first + board), reference(second + board))
    assert sign(a.strength - b.strength) == expected
    assert a.category is Category(reference(first + board)[0])


@settings(max_examples=200, deadline=None)
@given(st.lists(seven_cards, min_size=1, max_size=40))
def test_batch_matches_evaluate(hands: list[list[int]]) -> None:
    expected = [evaluate(hand).strength for hand in hands]
    for dtype in (np.uint8, np.int64):
        got = evaluate_batch(np.array(hands, dtype=dtype))
        assert got.dtype == np.uint16
        assert got.tolist() == expected
    assert evaluate_batch(hands).tolist() == expected


def random_hands(n: int, seed: int) -> npt.NDArray[np.uint8]:
    """n random seven-card hands, distinct cards within each."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((n, 52)), axis=1)[:, :7].astype(np.uint8)


def test_batch_matches_evaluate_on_many_random_hands() -> None:
    hands = random_hands(200_000, seed=7462)
    got = evaluate_batch(hands)
    expected = [evaluate(hand).strength for hand in hands.tolist()]
    assert got.tolist() == expected


def test_batch_edge_shapes() -> None:
    assert evaluate_batch(np.zeros((0, 7), dtype=np.uint8)).shape == (0,)
    for bad in (np.zeros((3, 6), dtype=np.uint8), np.zeros(7, dtype=np.uint8)):
        with pytest.raises(ValueError, match=r"\(n, 7\)"):
            evaluate_batch(bad)
    for ids in ([[0, 1, 2, 3, 4, 5, 52]], [[0, 1, 2, 3, 4, 5, -1]]):
        for dtype in (np.int64, np.int16):
            with pytest.raises(CardError):
                evaluate_batch(np.array(ids, dtype=dtype))
    with pytest.raises(CardError):
        evaluate_batch(np.array([[0, 1, 2, 3, 4, 5, 52]], dtype=np.uint8))


# --- rejected input --------------------------------------------------------------------------


@st.composite
def hands_with_a_repeat(draw: st.DrawFn) -> list[int]:
    n = draw(st.integers(5, 7))
    hand = draw(distinct_cards(n - 1))
    hand.append(draw(st.sampled_from(hand)))
    return draw(st.permutations(hand))


@settings(max_examples=300, deadline=None)
@given(hands_with_a_repeat())
def test_evaluate_rejects_repeated_cards(hand: list[int]) -> None:
    with pytest.raises(CardError, match="distinct"):
        evaluate(hand)


@pytest.mark.parametrize(
    "hand",
    [
        [51, 51, 50, 49, 48, 47, 46],  # the key sum carries past bit 32 (fixed)
        [51, 51, 51, 51, 51, 47, 46],
        [47, 47, 46, 45, 44, 51, 50],
        [0, 0, 1, 2, 3, 4, 5],
        [3, 3, 3, 3, 3],
    ],
)
def test_evaluate_rejects_repeated_high_cards(hand: list[int]) -> None:
    with pytest.raises(CardError, match="distinct"):
        evaluate(hand)


def test_evaluate_rejects_repeated_card_text() -> None:
    with pytest.raises(CardError, match="distinct"):
        evaluate("AsAsKdQcJh")


@settings(max_examples=200, deadline=None)
@given(
    st.integers(5, 7).flatmap(
        lambda n: st.lists(
            st.one_of(st.integers(-1000, -1), st.integers(52, 1000)), min_size=1, max_size=n
        ).flatmap(
            lambda bad: st.lists(
                st.integers(0, 51), min_size=n - len(bad), max_size=n - len(bad), unique=True
            ).map(lambda good: good + bad)
        )
    )
)
def test_evaluate_rejects_ids_outside_the_deck(hand: list[int]) -> None:
    with pytest.raises(CardError, match="0 \\(2c\\) to 51 \\(As\\)"):
        evaluate(hand)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 8, 9, 52])
def test_evaluate_rejects_wrong_counts(n: int) -> None:
    with pytest.raises(CardError, match="5, 6 or 7 cards"):
        evaluate(list(range(n)))


@pytest.mark.parametrize("text", ["AsKd", "AsKdQhJc", "AsKdQhJcTs9d8c7h", "AsKdQhJcXx", "AsK"])
def test_evaluate_rejects_bad_text(text: str) -> None:
    with pytest.raises(CardError):
        evaluate(text)


def test_evaluate_rejects_things_that_are_not_ids() -> None:
    with pytest.raises(CardError):
        evaluate(["As", "Kd", "Qh", "Jc", "Ts"])  # type: ignore[list-item]  # text is one string
    with pytest.raises(CardError):
        evaluate([0.5, 1, 2, 3, 4])  # type: ignore[list-item]


# --- all seven-card hands --------------------------------------------------------------------

SEVEN_CARD_HANDS = comb(52, 7)
# Published counts over all C(52, 7) = 133,784,560 seven-card hands.
SEVEN_CARD_COUNTS = {
    Category.ROYAL_FLUSH: 4_324,
    Category.STRAIGHT_FLUSH: 37_260,
    Category.FOUR_OF_A_KIND: 224_848,
    Category.FULL_HOUSE: 3_473_184,
    Category.FLUSH: 4_047_644,
    Category.STRAIGHT: 6_180_020,
    Category.THREE_OF_A_KIND: 6_461_620,
    Category.TWO_PAIR: 31_433_400,
    Category.PAIR: 58_627_800,
    Category.HIGH_CARD: 23_294_460,
}


def colex_combinations(n: int, k: int) -> npt.NDArray[np.uint8]:
    """All k-subsets of range(n), ascending within a row, rows in colex order.

    In colex order the subsets of range(m) are exactly the first comb(m, k) rows, for any m.
    """
    table = np.arange(n, dtype=np.uint8)[:, None]
    for width in range(2, k + 1):
        # Subsets of size ``width`` whose largest element is ``top``: a smaller subset of
        # range(top) (the first comb(top, width - 1) rows of the table so far) plus ``top``.
        parts = [
            np.hstack(
                [
                    table[: comb(top, width - 1)],
                    np.full((comb(top, width - 1), 1), top, dtype=np.uint8),
                ]
            )
            for top in range(width - 1, n)
        ]
        table = np.vstack(parts)
    return table


def seven_card_hands() -> Iterator[npt.NDArray[np.uint8]]:
    """Every seven-card hand exactly once, as (m, 7) uint8 chunks of card ids.

    One chunk per pair of lowest cards a < b: the other five cards are a five-subset of the
    cards above b, read from one precomputed colex table of five-subsets (counting down from
    51, so that the first comb(51 - b, 5) rows are exactly the subsets of cards above b).
    """
    above = 51 - colex_combinations(50, 5)  # rows of cards from 51 downwards
    for b in range(1, 47):
        rest = above[: comb(51 - b, 5)]
        chunk = np.empty((len(rest), 7), dtype=np.uint8)
        chunk[:, 2:] = rest
        chunk[:, 1] = b
        for a in range(b):
            chunk[:, 0] = a
            yield chunk


def category_of_strength() -> npt.NDArray[np.uint8]:
    """A look-up array: strength (1..7462) -> category number; index 0 is unused."""
    lookup = np.zeros(HAND_CLASSES + 1, dtype=np.uint8)
    for s in range(1, HAND_CLASSES + 1):
        lookup[s] = hand_value(s).category
    return lookup


def test_colex_combinations() -> None:
    table = colex_combinations(9, 4)
    assert table.shape == (comb(9, 4), 4)
    assert [tuple(row) for row in table.tolist()] == sorted(
        combinations(range(9), 4), key=lambda c: c[::-1]
    )


def test_seven_card_generator_on_a_small_slice() -> None:
    """The generator's first chunks are the hands whose two lowest cards are (0, 1), (0, 2),
    (1, 2): each hand once, seven distinct cards per hand."""
    binomials = np.array([[comb(n, k) for k in range(6)] for n in range(52)], dtype=np.int64)
    chunks = seven_card_hands()
    first = [next(chunks).copy() for _ in range(3)]
    assert [(c[0, 0], c[0, 1]) for c in first] == [(0, 1), (0, 2), (1, 2)]
    for chunk, (a, b) in zip(first, [(0, 1), (0, 2), (1, 2)], strict=True):
        assert len(chunk) == comb(51 - b, 5)
        assert (np.diff(chunk[:, 2:].astype(np.int16), axis=1) < 0).all()
        assert (chunk[:, 2:] > b).all()
        assert (chunk[:, :2] == (a, b)).all()
        # Rows are distinct: the colex ranks of the five upper cards run 0, 1, 2, ...
        upper = 51 - chunk[:, 2:].astype(np.int64)  # ascending
        ranks = sum(binomials[upper[:, i], i + 1] for i in range(5))
        assert (ranks == np.arange(len(chunk))).all()


def test_all_seven_card_hands() -> None:
    """All 133,784,560 seven-card hands through ``evaluate_batch``."""
    lookup = category_of_strength()
    counts = np.zeros(len(Category), dtype=np.int64)
    seen = np.zeros(HAND_CLASSES + 1, dtype=bool)
    total = 0
    started = time.perf_counter()
    for chunk in seven_card_hands():
        strengths = evaluate_batch(chunk)
        counts += np.bincount(lookup[strengths], minlength=len(Category))
        seen[strengths] = True
        total += len(chunk)
    elapsed = time.perf_counter() - started
    print(f"\n{total:,} seven-card hands in {elapsed:.1f} s ({total / elapsed / 1e6:.1f} M/s)")
    assert total == SEVEN_CARD_HANDS == 133_784_560
    assert dict(zip(Category, counts.tolist(), strict=True)) == SEVEN_CARD_COUNTS
    assert counts[Category.STRAIGHT_FLUSH] + counts[Category.ROYAL_FLUSH] == 41_584
    # Seven cards always hold a pair, a straight or five distinct ranks above 7-5-4-3-2: the
    # weakest high cards, e.g. 7-5-4-3-2 itself, never show.
    assert seen.sum() == 4824
