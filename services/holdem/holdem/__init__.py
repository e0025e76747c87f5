"""holdem: the rules core of Croupier. Pure, synchronous, no I/O.

Cards, the hand evaluator (one hand and numpy batches), versioned pay tables, and the
settlement of every bet of Casino Hold'em and Texas Hold'em Plus.
"""

from holdem.bets import (
    Action,
    BetResult,
    Deal,
    Decision,
    MeterMovement,
    Outcome,
    Settlement,
    SettlementError,
    Stage,
    Wager,
)
from holdem.cards import CardError, card_text, cards_text, parse_card, parse_cards
from holdem.evaluator import Category, HandValue, evaluate, evaluate_batch, hand_value
from holdem.paytable import (
    Game,
    PayTable,
    PayTableError,
    Spot,
    load_paytable,
    paytable_ids,
)
from holdem.settlement import settle, void

__all__ = [
    "Action",
    "BetResult",
    "CardError",
    "Category",
    "Deal",
    "Decision",
    "Game",
    "HandValue",
    "MeterMovement",
    "Outcome",
    "PayTable",
    "PayTableError",
    "Settlement",
    "SettlementError",
    "Spot",
    "Stage",
    "Wager",
    "card_text",
    "cards_text",
    "evaluate",
    "evaluate_batch",
    "hand_value",
    "load_paytable",
    "parse_card",
    "parse_cards",
    "paytable_ids",
    "settle",
    "void",
]
