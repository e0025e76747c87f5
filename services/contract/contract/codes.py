"""Why input is refused: every rejection code, in one place, in the order the checks run.

The code is the ``code`` label of ``croupier_events_rejected_total`` and
``croupier_dead_lettered_total``, the ``x-croupier-code`` header of a dead letter and the
``code`` of the ledger fact that keeps the message. docs/feed.md and contracts/asyncapi.yaml list
the same codes in the same order (a unit test holds them to it).
"""

from __future__ import annotations

from enum import StrEnum


class RejectionCode(StrEnum):
    """Rejection codes, in the order they are checked."""

    # The message as bytes (contract.feed.parse_event).
    TOO_LARGE = "too_large"
    """The body is larger than the contract's ``MAX_BODY_BYTES``."""
    NOT_JSON = "not_json"
    """Not UTF-8 JSON, or nested deeper than any JSON parser here follows."""
    CONTRACT = "contract"
    """JSON that breaks the feed contract: a field missing, unknown, out of bounds."""

    # The round (croupier.settlement.round.Round.receive), event by event.
    REUSED_EVENT_ID = "reused_event_id"
    AFTER_TIMEOUT = "after_timeout"
    """An event of a round Croupier voided because it stayed open past the round timeout."""
    SEQ_TAKEN = "seq_taken"
    ALREADY_OPEN = "already_open"
    OPEN_NOT_FIRST = "open_not_first"
    UNKNOWN_PAYTABLE = "unknown_paytable"
    PAYTABLE_GAME_MISMATCH = "paytable_game_mismatch"
    NEVER_OPENED = "never_opened"
    ROUND_CLOSED = "round_closed"
    BETTING_CLOSED = "betting_closed"
    DUPLICATE_BET_ID = "duplicate_bet_id"
    SPOT_NOT_OFFERED = "spot_not_offered"
    STAKE_LIMITS = "stake_limits"
    DUPLICATE_ANTE = "duplicate_ante"
    SIDE_BET_WITHOUT_ANTE = "side_bet_without_ante"
    CURRENCY_MISMATCH = "currency_mismatch"
    DUPLICATE_CARD = "duplicate_card"
    TOO_MANY_CARDS = "too_many_cards"
    UNKNOWN_ANTE = "unknown_ante"
    WRONG_STAGE = "wrong_stage"
    WRONG_ACTION = "wrong_action"
    SECOND_DECISION = "second_decision"
    AFTER_FOLD = "after_fold"
    WRONG_WAGER_SIZE = "wrong_wager_size"
    CARDS_MISSING = "cards_missing"

    # Time (croupier.settlement.settler.Settler.expire): what waited longer than its limit.
    HELD_TIMEOUT = "held_timeout"
    """An event held for a gap in ``seq`` that did not fill within the held-event timeout."""
    ROUND_TIMEOUT = "round_timeout"
    """A round still open after the open-round timeout: Croupier voids it (every wager
    refunded); the code of its ``round.voided`` fact."""

    # Settlement itself (croupier.settlement.consumer): a message the settler fails on.
    POISON = "poison"

    # The broker, as it dead-letters a feed message (x-first-death-reason).
    DELIVERY_LIMIT = "delivery_limit"
    EXPIRED = "expired"
    MAXLEN = "maxlen"
    BROKER_REJECTED = "rejected"


#: Broker dead-letter reasons (x-first-death-reason) and the code each is recorded under.
BROKER_REASONS = {
    "delivery_limit": RejectionCode.DELIVERY_LIMIT,
    "expired": RejectionCode.EXPIRED,
    "maxlen": RejectionCode.MAXLEN,
    "rejected": RejectionCode.BROKER_REJECTED,
}
