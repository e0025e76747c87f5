"""How the pages show cards, money and words: Jinja filters, no logic of the game."""

from __future__ import annotations

from typing import Final

from jinja2 import Environment
from markupsafe import Markup, escape

_SUITS: Final = {
    "c": ("\N{BLACK CLUB SUIT}", "clubs", "black"),
    "d": ("\N{BLACK DIAMOND SUIT}", "diamonds", "red"),
    "h": ("\N{BLACK HEART SUIT}", "hearts", "red"),
    "s": ("\N{BLACK SPADE SUIT}", "spades", "black"),
}
_RANKS: Final = {
    "2": ("2", "Two"), "3": ("3", "Three"), "4": ("4", "Four"), "5": ("5", "Five"),
    "6": ("6", "Six"), "7": ("7", "Seven"), "8": ("8", "Eight"), "9": ("9", "Nine"),
    "T": ("10", "Ten"), "J": ("J", "Jack"), "Q": ("Q", "Queen"), "K": ("K", "King"),
    "A": ("A", "Ace"),
}  # fmt: skip
#: Minor-unit exponents of currencies that do not have two decimals.
_EXPONENTS: Final = {"JPY": 0, "KRW": 0, "ISK": 0, "CLP": 0, "BHD": 3, "KWD": 3, "JOD": 3}
_WORDS: Final = {
    "casino_holdem": "Casino Hold'em",
    "texas_holdem_plus": "Texas Hold'em Plus",
    "ante": "Ante",
    "aa_bonus": "AA Bonus",
    "jackpot": "Jackpot",
    "plus": "Plus",
    "call": "Call",
    "flop_bet": "Flop bet",
    "turn_bet": "Turn bet",
    "settled": "Settled",
    "voided": "Voided",
    "open": "Open",
}


def card(text: str) -> Markup:
    """A card as a coloured rank and suit, read out in full by screen readers."""
    rank, suit = _RANKS.get(text[:1]), _SUITS.get(text[1:2])
    if rank is None or suit is None:
        return Markup('<span class="card">{}</span>').format(text)
    symbol, suit_name, colour = suit
    return Markup(
        '<span class="card {colour}" role="img" aria-label="{name} of {suit}" '
        'data-card="{text}">{rank}{symbol}</span>'
    ).format(colour=colour, name=rank[1], suit=suit_name, text=text, rank=rank[0], symbol=symbol)


def cards(texts: list[str]) -> Markup:
    """Several cards side by side."""
    return Markup(" ").join(card(t) for t in texts)


def money(minor: int, currency: str) -> str:
    """Integer minor units as a decimal amount with its currency: ``12.50 EUR``."""
    exponent = _EXPONENTS.get(currency, 2)
    sign = "-" if minor < 0 else ""
    if exponent == 0:
        return f"{sign}{abs(minor):,} {currency}"
    units, fraction = divmod(abs(minor), 10**exponent)
    return f"{sign}{units:,}.{fraction:0{exponent}d} {currency}"


def signed(minor: int, currency: str) -> str:
    """A net amount with its sign: ``+4.00 EUR``, ``-1.00 EUR``, ``0.00 EUR``."""
    return ("+" if minor > 0 else "") + money(minor, currency)


def words(value: str | None) -> str:
    """A code as a person reads it: ``aa_bonus`` -> ``AA Bonus``."""
    if value is None:
        return ""
    return _WORDS.get(value, value.replace("_", " ").capitalize())


def when(timestamp: str | None) -> str:
    """An RFC 3339 time, to the second, in UTC."""
    if not timestamp:
        return ""
    return str(escape(timestamp.replace("T", " ")[:19])) + " UTC"


#: How many leading parts of a recorded hand description name the hand (the rest are kickers).
_NAMING_PARTS: Final = {"Pair": 1, "Two Pair": 2, "Three of a Kind": 2, "Four of a Kind": 2}


def hand_name(description: str | None) -> str:
    """A recorded hand description as players say it: ``"Flush, Queen high"``,
    ``"Pair of Kings"``, ``"Ace high"``; the rest of the description is its kickers."""
    if not description:
        return ""
    parts = description.split(", ")
    category = "Pair" if parts[0].startswith("Pair of ") else parts[0]
    if category in ("Flush", "High Card") and len(parts) > 1:
        high = f"{parts[1]} high"
        return high if category == "High Card" else f"Flush, {high}"
    if category in _NAMING_PARTS:
        return ", ".join(parts[: _NAMING_PARTS[category]])
    return description


def install(env: Environment) -> None:
    """Register the filters on a Jinja environment."""
    env.filters.update(
        card=card,
        cards=cards,
        money=money,
        signed=signed,
        words=words,
        when=when,
        hand_name=hand_name,
    )
