"""How the pages show cards, money and words: Jinja filters, no logic of the game.

What a page says is the player's words: cards as ranks and suits, money as an amount with its
currency, codes as words; never a raw card code, minor units or an internal name.
"""

from __future__ import annotations

from typing import Final

from jinja2 import Environment
from markupsafe import Markup, escape

from croupier.history.models import RoundRecall, Timeline

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
    "preflop": "Before the flop",
    "flop": "Flop",
    "turn": "Turn",
}
_DONE: Final = {"call": "called", "fold": "folded", "check": "checked", "bet": "bet"}
_EVENTS: Final = {
    "round.opened": "the round's opening",
    "bet.placed": "a bet",
    "cards.dealt": "a deal",
    "decision.made": "a decision",
    "round.completed": "the round's completion",
    "round.voided": "the round's void",
}
#: What a deal to the board is called, by the board cards before it and the cards dealt.
_BOARD: Final = {(0, 3): "Flop", (3, 1): "Turn", (3, 2): "Turn and river", (4, 1): "River"}


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


def outcome(why: str, spot: str) -> str:
    """A result's why without the bet's name, shown under it: ``"Ante won: Flush pays 2 to 1"``
    under "Ante" reads ``"Won: Flush pays 2 to 1"``."""
    named = words(spot) + " "
    if not why.startswith(named):
        return why
    rest = why[len(named) :]
    return rest[:1].upper() + rest[1:]


def when(timestamp: str | None) -> str:
    """An RFC 3339 time, to the second, in UTC."""
    if not timestamp:
        return ""
    return str(escape(timestamp.replace("T", " ")[:19])) + " UTC"


def clock(timestamp: str | None) -> str:
    """The time of day of an RFC 3339 time, to the second: ``12:34:56``."""
    if not timestamp or "T" not in timestamp:
        return ""
    return timestamp.split("T", 1)[1][:8]


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


def timeline(round_: RoundRecall, staff: bool) -> list[tuple[Timeline, Markup]]:
    """Each fact of the round's timeline with what it says in the player's words:
    ``"AA Bonus bet: 1.00 EUR"``, ``"Your cards: Q♥ 10♥"``, ``"Flop: you called 2.00 EUR"``.
    Staff see whose wager or box each line is about."""
    lines, board = [], 0
    for entry in round_.timeline:
        text = _told(entry, round_, staff, board)
        if entry.target == "board" and entry.cards:
            board += len(entry.cards)
        lines.append((entry, text))
    return lines


def _told(entry: Timeline, round_: RoundRecall, staff: bool, board: int) -> Markup:
    who = f"{entry.player_id}, " if staff and entry.player_id else ""
    on_box = f" (box {entry.box})" if entry.box not in (None, "main") else ""
    if entry.fact == "round.settled":
        return Markup("Round settled: every bet paid as shown above")
    if entry.fact == "round.voided":
        return Markup("Round voided: {}. Every wager refunded").format(round_.void_reason or "")
    if entry.fact != "feed.accepted":  # held and rejected events: staff only
        what = _EVENTS.get(entry.event_type or "")
        if what is None:
            return Markup("{}").format(entry.summary)
        return Markup("{}: {}").format("Held" if entry.fact == "feed.held" else "Refused", what)
    if entry.event_type == "round.opened":
        return Markup("Round opened: {}").format(words(round_.game) or "a new round")
    if entry.spot is not None and entry.amount is not None and entry.currency:
        return Markup("{}{} bet{}: {}").format(
            who, words(entry.spot), on_box, money(entry.amount, entry.currency)
        )
    if entry.cards is not None:
        return Markup("{}: {}").format(_dealt_to(entry, staff, board), cards(entry.cards))
    if entry.stage is not None and entry.action is not None:
        done = _DONE.get(entry.action, entry.action)
        amount = ""
        if entry.amount is not None and entry.currency:
            amount = " " + money(entry.amount, entry.currency)
        you = f"{entry.player_id}{on_box}" if staff else f"you{on_box}"
        return Markup("{}: {} {}{}").format(words(entry.stage), you, done, amount)
    if entry.event_type == "round.completed":
        return Markup("All cards dealt")
    return Markup("{}").format(entry.summary)


def _dealt_to(entry: Timeline, staff: bool, board: int) -> str:
    dealt = len(entry.cards or [])
    if entry.target == "player":
        if staff:
            return "Players' hand" if entry.box == "main" else f"Box {entry.box}"
        return "Your cards" + (f" (box {entry.box})" if entry.box != "main" else "")
    if entry.target == "dealer":
        return "Dealer's cards"
    if entry.target == "board":
        return _BOARD.get((board, dealt), "Board")
    return "Burn card" if dealt == 1 else "Burn cards"


def refunds(round_: RoundRecall) -> list[str]:
    """What a voided round gave back, per player and currency: ``["3.00 EUR"]``; staff
    (several players) see ``"p1: 3.00 EUR"``."""
    players = {t.player_id for t in round_.totals}
    return [
        (f"{t.player_id}: " if len(players) > 1 else "") + money(t.returned, t.currency)
        for t in round_.totals
    ]


def install(env: Environment) -> None:
    """Register the filters on a Jinja environment."""
    env.filters.update(
        card=card,
        cards=cards,
        money=money,
        signed=signed,
        words=words,
        when=when,
        clock=clock,
        outcome=outcome,
        hand_name=hand_name,
        timeline=timeline,
        refunds=refunds,
    )
