"""The hand evaluator: the best five-card poker hand out of five, six or seven cards.

Every five-card hand falls in one of 7,462 equivalence classes. A hand's *strength* is its
class's place in that order: 1 is 7-5-4-3-2 unsuited, 7,462 is a royal flush, and a larger
strength is a stronger hand. Suits never break ties; the sixth and seventh cards never count.

How it is fast: each card has a 32-bit key, ``face_key << 9 | suit_key``. The face keys are
chosen so the sum over seven cards identifies their multiset of ranks, and the suit keys so
the low nine bits of the sum tell whether five or more cards share a suit, and which. One sum,
one table look-up for the ranks, and only for flushes a second look-up on a 13-bit rank mask.
The same sums vectorise over numpy arrays in :func:`evaluate_batch`; numpy is imported only
then, so settling a round (which evaluates hand by hand) never loads it.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property, total_ordering
from itertools import combinations, combinations_with_replacement
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from holdem.cards import RANK_NAMES, CardError, parse_cards

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# Sums of up to seven face keys, each rank used at most four times, are all distinct
# (checked when the tables are built). Index: rank - 2.
_FACE_KEYS: Final = (0, 1, 5, 22, 98, 453, 2031, 8698, 22854, 83661, 262349, 636345, 1479181)
_SUIT_KEYS: Final = (0, 1, 8, 57)
_SUIT_BITS: Final = 9
_CARD_KEYS: Final = tuple(
    (_FACE_KEYS[card >> 2] << _SUIT_BITS) | _SUIT_KEYS[card & 3] for card in range(52)
)
_CARD_RANK_BITS: Final = tuple(1 << ((card >> 2) + 2) for card in range(52))


class Category(IntEnum):
    """Hand categories, low to high."""

    HIGH_CARD = 0
    PAIR = 1
    TWO_PAIR = 2
    THREE_OF_A_KIND = 3
    STRAIGHT = 4
    FLUSH = 5
    FULL_HOUSE = 6
    FOUR_OF_A_KIND = 7
    STRAIGHT_FLUSH = 8
    ROYAL_FLUSH = 9

    @property
    def label(self) -> str:
        """The category as a person writes it, e.g. ``"Two Pair"``."""
        return _CATEGORY_LABELS[self]


_CATEGORY_LABELS: Final = {
    Category.HIGH_CARD: "High Card",
    Category.PAIR: "Pair",
    Category.TWO_PAIR: "Two Pair",
    Category.THREE_OF_A_KIND: "Three of a Kind",
    Category.STRAIGHT: "Straight",
    Category.FLUSH: "Flush",
    Category.FULL_HOUSE: "Full House",
    Category.FOUR_OF_A_KIND: "Four of a Kind",
    Category.STRAIGHT_FLUSH: "Straight Flush",
    Category.ROYAL_FLUSH: "Royal Flush",
}


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class HandValue:
    """The value of a hand: compares like poker hands.

    ``ranks`` are the five cards' ranks in order of importance (``(12, 12, 9, 9, 5)`` for
    queens and nines with a five); a five-high straight lists its ace as 1.
    """

    strength: int
    category: Category
    ranks: tuple[int, ...]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HandValue) and self.strength == other.strength

    def __lt__(self, other: HandValue) -> bool:
        return self.strength < other.strength

    def __hash__(self) -> int:
        return self.strength

    @property
    def description(self) -> str:
        """A readable description, e.g. ``"Two Pair, Queens and Nines, Five kicker"``."""
        return _describe(self.category, self.ranks)

    def __str__(self) -> str:
        return self.description


def _plural(rank: int) -> str:
    name = RANK_NAMES[rank - 2] if rank >= 2 else RANK_NAMES[12]
    return name + ("es" if name == "Six" else "s")


def _name(rank: int) -> str:
    return RANK_NAMES[rank - 2]


def _kickers(ranks: Iterable[int]) -> str:
    names = [_name(r) for r in ranks]
    if len(names) == 1:
        return f"{names[0]} kicker"
    return f"{', '.join(names[:-1])} and {names[-1]} kickers"


def _describe(category: Category, r: tuple[int, ...]) -> str:
    label = category.label
    if category is Category.ROYAL_FLUSH:
        return label
    if category in (Category.STRAIGHT_FLUSH, Category.STRAIGHT):
        return f"{label}, {_name(r[0])} high"
    if category is Category.FOUR_OF_A_KIND:
        return f"{label}, {_plural(r[0])}, {_kickers(r[4:])}"
    if category is Category.FULL_HOUSE:
        return f"{label}, {_plural(r[0])} full of {_plural(r[3])}"
    if category is Category.THREE_OF_A_KIND:
        return f"{label}, {_plural(r[0])}, {_kickers(r[3:])}"
    if category is Category.TWO_PAIR:
        return f"{label}, {_plural(r[0])} and {_plural(r[2])}, {_kickers(r[4:])}"
    if category is Category.PAIR:
        return f"Pair of {_plural(r[0])}, {_kickers(r[2:])}"
    return f"{label}, {', '.join(_name(x) for x in r)}"


# --- building the tables -------------------------------------------------------------------

_STRAIGHT_TOPS: Final = tuple(range(14, 4, -1))
_Class = tuple[Category, tuple[int, ...]]


def _straight_ranks(top: int) -> tuple[int, ...]:
    return (5, 4, 3, 2, 1) if top == 5 else tuple(range(top, top - 5, -1))


def _straight_top(present: set[int]) -> int | None:
    with_low_ace = present | ({1} if 14 in present else set())
    for top in _STRAIGHT_TOPS:
        if all(r in with_low_ace for r in range(top - 4, top + 1)):
            return top
    return None


def _all_classes() -> list[_Class]:
    """Every five-card class as (category, ranks), weakest first."""
    ranks = range(14, 1, -1)
    distinct = [c for c in combinations(ranks, 5) if _straight_top(set(c)) is None]
    classes: list[_Class] = []
    classes += [(Category.HIGH_CARD, c) for c in distinct]
    classes += [
        (Category.PAIR, (p, p, *k))
        for p in ranks
        for k in combinations([r for r in ranks if r != p], 3)
    ]
    classes += [
        (Category.TWO_PAIR, (hi, hi, lo, lo, k))
        for hi, lo in combinations(ranks, 2)
        for k in ranks
        if k not in (hi, lo)
    ]
    classes += [
        (Category.THREE_OF_A_KIND, (t, t, t, *k))
        for t in ranks
        for k in combinations([r for r in ranks if r != t], 2)
    ]
    classes += [(Category.STRAIGHT, _straight_ranks(top)) for top in _STRAIGHT_TOPS]
    classes += [(Category.FLUSH, c) for c in distinct]
    classes += [(Category.FULL_HOUSE, (t, t, t, p, p)) for t in ranks for p in ranks if p != t]
    classes += [(Category.FOUR_OF_A_KIND, (q, q, q, q, k)) for q in ranks for k in ranks if k != q]
    classes += [(Category.STRAIGHT_FLUSH, _straight_ranks(top)) for top in _STRAIGHT_TOPS]
    # A wheel lists its ace as 1, so (5, 4, 3, 2, 1) sorts below (6, 5, 4, 3, 2).
    classes.sort()
    classes[-1] = (Category.ROYAL_FLUSH, classes[-1][1])
    return classes


def _best_of_ranks(ranks: Sequence[int]) -> _Class:
    """The best class made of these ranks, ignoring suits (no flushes)."""
    counts = Counter(ranks)
    by_count = sorted(counts.items(), key=lambda rc: (rc[1], rc[0]), reverse=True)
    top_count = by_count[0][1]

    def highest(exclude: set[int], k: int) -> tuple[int, ...]:
        return tuple(sorted((r for r in counts if r not in exclude), reverse=True)[:k])

    if top_count == 4:
        q = by_count[0][0]
        return Category.FOUR_OF_A_KIND, (q, q, q, q, *highest({q}, 1))
    trips = sorted((r for r, n in counts.items() if n >= 3), reverse=True)
    if trips:
        t = trips[0]
        pairs = sorted((r for r, n in counts.items() if n >= 2 and r != t), reverse=True)
        if pairs:
            return Category.FULL_HOUSE, (t, t, t, pairs[0], pairs[0])
    straight = _straight_top(set(counts))
    if straight is not None:
        return Category.STRAIGHT, _straight_ranks(straight)
    if trips:
        t = trips[0]
        return Category.THREE_OF_A_KIND, (t, t, t, *highest({t}, 2))
    pairs = sorted((r for r, n in counts.items() if n == 2), reverse=True)
    if len(pairs) >= 2:
        hi, lo = pairs[:2]
        return Category.TWO_PAIR, (hi, hi, lo, lo, *highest({hi, lo}, 1))
    if pairs:
        p = pairs[0]
        return Category.PAIR, (p, p, *highest({p}, 3))
    return Category.HIGH_CARD, highest(set(), 5)


def _best_of_flush(rank_mask: int) -> _Class:
    present = {r for r in range(2, 15) if rank_mask >> r & 1}
    straight = _straight_top(present)
    if straight is not None:
        return Category.STRAIGHT_FLUSH, _straight_ranks(straight)
    return Category.FLUSH, tuple(sorted(present, reverse=True)[:5])


def _suit_flush_table(n_cards: int) -> list[int]:
    """Suit-key sum -> the suit holding five or more of ``n_cards`` cards, else -1."""
    table = [-1] * (1 << _SUIT_BITS)
    seen: dict[int, int] = {}
    for suits in combinations_with_replacement(range(4), n_cards):
        total = sum(_SUIT_KEYS[s] for s in suits)
        flush = next((s for s in range(4) if suits.count(s) >= 5), -1)
        if seen.setdefault(total, flush) != flush:
            raise AssertionError(f"suit keys collide for {n_cards} cards")
        table[total] = flush
    return table


def _rank_sums(
    n_cards: int, strength_of: dict[tuple[Category, tuple[int, ...]], int]
) -> dict[int, int]:
    """Face-key sum of ``n_cards`` ranks -> strength of their best non-flush hand."""
    table: dict[int, int] = {}
    for ranks in combinations_with_replacement(range(2, 15), n_cards):
        if max(Counter(ranks).values()) > 4:
            continue
        total = sum(_FACE_KEYS[r - 2] for r in ranks)
        if total in table:
            raise AssertionError(f"face keys collide for {n_cards} cards")
        table[total] = strength_of[_best_of_ranks(ranks)]
    return table


def _cache_file() -> Path:
    # Keyed on this module's source: any change to how hands are classified rebuilds.
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "croupier" / f"holdem-ranks-{digest}.marshal"


def _cached_tables(strength_of: dict[_Class, int]) -> tuple[list[int], list[dict[int, int]]]:
    """The flush table and the face-sum tables for 5, 6 and 7 cards: a few seconds to
    build, so kept on disk (plain integers, read back in milliseconds)."""
    path = _cache_file()
    try:
        flush, ranks = marshal.loads(path.read_bytes())
        if len(flush) == 1 << 15 and len(ranks) == 8:
            return flush, ranks
    except (OSError, EOFError, ValueError, TypeError):
        pass
    flush = [0] * (1 << 15)
    for mask in range(1 << 15):
        if mask & 0b11 == 0 and mask.bit_count() >= 5:
            flush[mask] = strength_of[_best_of_flush(mask)]
    ranks = [_rank_sums(n, strength_of) if n >= 5 else {} for n in range(8)]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
            handle.write(marshal.dumps((flush, ranks)))
        os.replace(handle.name, path)
    except OSError:
        pass  # a read-only home only costs the rebuild
    return flush, ranks


class _Tables:
    """Look-up tables, built once per process (read from the on-disk cache when present);
    their numpy forms, for :func:`evaluate_batch` and the compiled sweeps, on first use."""

    def __init__(self) -> None:
        classes = _all_classes()
        strength_of = {cls: i + 1 for i, cls in enumerate(classes)}
        strength_of[(Category.STRAIGHT_FLUSH, _straight_ranks(14))] = len(classes)
        no_hand = HandValue(0, Category.HIGH_CARD, ())
        self.values: tuple[HandValue, ...] = (
            no_hand,
            *(HandValue(i + 1, category, ranks) for i, (category, ranks) in enumerate(classes)),
        )
        self.suits = [_suit_flush_table(n) if n >= 5 else [] for n in range(8)]
        self.flush, self.ranks = _cached_tables(strength_of)

    @cached_property
    def rank7(self) -> npt.NDArray[np.uint16]:
        import numpy as np

        seven = self.ranks[7]
        table = np.zeros(max(seven) + 1, dtype=np.uint16)
        table[np.fromiter(seven.keys(), np.int64)] = np.fromiter(seven.values(), np.uint16)
        return table

    @cached_property
    def np_card_keys(self) -> npt.NDArray[np.uint32]:
        import numpy as np

        return np.array(_CARD_KEYS, dtype=np.uint32)

    @cached_property
    def np_suit7(self) -> npt.NDArray[np.int8]:
        import numpy as np

        return np.array(self.suits[7], dtype=np.int8)

    @cached_property
    def np_flush(self) -> npt.NDArray[np.uint16]:
        import numpy as np

        return np.array(self.flush, dtype=np.uint16)

    @cached_property
    def np_rank_bits(self) -> npt.NDArray[np.uint16]:
        import numpy as np

        return np.array(_CARD_RANK_BITS, dtype=np.uint16)


_T: Final = _Tables()
_VALUES: Final = _T.values
_FLUSH: Final = _T.flush
_SUITS: Final = _T.suits
_RANKS: Final = _T.ranks
_SUIT_MASK: Final = (1 << _SUIT_BITS) - 1
# Each card's key also carries a bit of its own above the face sum: distinct cards add up to
# exactly n such bits, a repeated card carries into fewer. Seven distinct cards keep the key
# sum below 2**32, but a repeated ace or king can carry it into bit 32: the presence bits start
# at 33 so that carry cannot pass for a card (seven keys of any cards stay below 2**33).
_PRESENCE_SHIFT: Final = 33
_CHECKED_KEYS: Final = {
    card: key | 1 << (_PRESENCE_SHIFT + card) for card, key in enumerate(_CARD_KEYS)
}

#: Number of distinct hand classes; strengths run from 1 to this.
HAND_CLASSES: Final = len(_VALUES) - 1


def hand_value(strength: int) -> HandValue:
    """The hand value of a strength (1..7462), e.g. one from :func:`evaluate_batch`."""
    if not 1 <= strength <= HAND_CLASSES:
        raise ValueError(f"strength {strength} is outside 1..{HAND_CLASSES}")
    return _VALUES[strength]


def _make_evaluate() -> Callable[[Sequence[int] | str], HandValue]:
    # Closure cells are the fastest look-ups CPython has, and a list the fastest index:
    # seven card ids go straight through; anything else takes the checked path (negative
    # ids by the sign test, 52..103 by the distinct-cards test, larger ones by IndexError).
    keys = [_CHECKED_KEYS[card] for card in range(52)] + [0] * 52  # ids 52..103 add no card
    values, flush_table, rank_bits = _VALUES, _FLUSH, _CARD_RANK_BITS
    suits7, ranks7 = _SUITS[7], _RANKS[7]

    def evaluate(cards: Any) -> HandValue:  # typed Sequence[int] | str by the factory
        """The value of the best five-card hand among 5, 6 or 7 distinct cards.

        ``cards`` are card ids (0-51) or card text such as ``"AsKdQh7c2s"``.
        """
        try:
            a, b, c, d, e, f, g = cards
            if a | b | c | d | e | f | g < 0:  # a negative index would wrap onto a real card
                return _evaluate_checked(cards)
            key = keys[a] + keys[b] + keys[c] + keys[d] + keys[e] + keys[f] + keys[g]
        except (ValueError, IndexError, TypeError):
            return _evaluate_checked(cards)
        if (key >> 33).bit_count() != 7:
            return _evaluate_checked(cards)
        suit = suits7[key & 511]
        if suit < 0:
            return values[ranks7[(key >> 9) & 0x7FFFFF]]
        mask = 0
        for card in cards:
            if card & 3 == suit:
                mask |= rank_bits[card]
        return values[flush_table[mask]]

    return evaluate


def _evaluate_checked(cards: Sequence[int] | str) -> HandValue:
    """Any hand :func:`evaluate` accepts, every input checked: text, 5 or 6 cards, errors."""
    if isinstance(cards, str):
        cards = parse_cards(cards)
    n = len(cards)
    if not 5 <= n <= 7:
        raise CardError(f"a hand is 5, 6 or 7 cards, got {n}")
    try:
        key = sum([_CHECKED_KEYS[card] for card in cards])
    except (KeyError, TypeError):
        raise CardError(f"card ids run from 0 (2c) to 51 (As), got {list(cards)!r}") from None
    if (key >> _PRESENCE_SHIFT).bit_count() != n:
        raise CardError(f"a hand's cards must be distinct, got {list(cards)!r}")
    suit = _SUITS[n][key & _SUIT_MASK]
    if suit < 0:
        return _VALUES[_RANKS[n][(key >> _SUIT_BITS) & 0x7FFFFF]]
    mask = 0
    for card in cards:
        if card & 3 == suit:
            mask |= _CARD_RANK_BITS[card]
    return _VALUES[_FLUSH[mask]]


evaluate = _make_evaluate()


_CHUNK: Final = 1 << 14


def evaluate_batch(ids: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Strengths of many seven-card hands: an ``(n, 7)`` array of card ids -> ``n`` integers.

    A larger integer is a stronger hand, in exactly the order of :func:`evaluate`.
    Rows must hold seven distinct card ids (0-51); this is not checked per row.
    """
    import numpy as np

    hands = np.asarray(ids)
    if hands.ndim != 2 or hands.shape[1] != 7:
        raise ValueError(f"evaluate_batch takes an (n, 7) array of card ids, got {hands.shape}")
    if hands.dtype != np.uint8:
        if hands.size and (hands.min() < 0 or hands.max() > 51):
            raise CardError("card ids run from 0 (2c) to 51 (As)")
        hands = hands.astype(np.uint8)
    elif hands.size and hands.max() > 51:
        raise CardError("card ids run from 0 (2c) to 51 (As)")
    out = np.empty(len(hands), dtype=np.uint16)
    for start in range(0, len(hands), _CHUNK):
        _evaluate_block(hands[start : start + _CHUNK], out[start : start + _CHUNK])
    return out


def _evaluate_block(block: npt.NDArray[np.uint8], out: npt.NDArray[np.uint16]) -> None:
    import numpy as np

    keys = _T.np_card_keys[block.T]
    total = keys[0] + keys[1]
    for column in keys[2:]:
        total += column
    suit = _T.np_suit7[total & _SUIT_MASK]
    np.take(_T.rank7, total >> _SUIT_BITS, out=out)
    flushed = np.flatnonzero(suit >= 0)
    if flushed.size:
        cards = block[flushed]
        in_suit = (cards & 3) == suit[flushed, None]
        mask = np.where(in_suit, _T.np_rank_bits[cards], 0).sum(axis=1)
        out[flushed] = _T.np_flush[mask]
