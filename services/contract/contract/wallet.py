"""The wallet's transaction log, v1: the rows a wallet writes and ``croupier reconcile`` reads.

Format (``contracts/wallet/wallet-transaction.schema.json``): CSV with a header, or JSON
Lines, with the fields :data:`FIELDS`; extra columns are ignored.

- ``debit``: a stake taken when the game server accepted a wager; ``table_id``,
  ``round_id`` and ``bet_id`` name the wager.
- ``credit``: a settlement result applied; ``message_id`` names the result.
- ``refund``: a voided round's result applied (its wagers returned); ``message_id`` names it.
  The wallet may refund the result in one row, or wager by wager: one row per wager, with
  the result's ``message_id`` and the wager's ``bet_id``, of that wager's stake. Or, with no
  ``message_id``, a stake returned: ``table_id``, ``round_id`` and ``bet_id`` name the wager
  (the wallet debited it, and the settlement service rejected it).

``amount`` is a positive integer in minor units; ``occurred_at`` an RFC 3339 time with an
offset. The studio's wallet writes this format; croupier's reader checks rows by hand (it
reads millions) and a test holds it to :class:`WalletTransaction`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from contract.feed import CURRENCY_PATTERN

#: The log's columns, in the order a CSV header lists them.
FIELDS: Final = (
    "transaction_id",
    "kind",
    "message_id",
    "table_id",
    "round_id",
    "bet_id",
    "player_id",
    "currency",
    "amount",
    "occurred_at",
)
KINDS: Final = ("debit", "credit", "refund")
MAX_TEXT: Final = 200  # characters in any id
MAX_AMOUNT: Final = 2**63 - 1
RFC3339_PATTERN: Final = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)$"
_Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)]
_Currency = Annotated[str, StringConstraints(pattern=CURRENCY_PATTERN)]


class WalletTransaction(BaseModel):
    """One row of a wallet's transaction log (a CSV line with a header, or a JSON line).

    ``debit``: a stake taken when the game server accepted a wager (``table_id``,
    ``round_id`` and ``bet_id`` name it). ``credit``: a settlement result applied
    (``message_id`` names it). ``refund``: a voided round's result applied (in one row, or
    one row per wager naming its ``bet_id``), or (no ``message_id``; ``table_id``,
    ``round_id``, ``bet_id``) a debited stake returned. Extra fields are allowed and ignored.
    """

    model_config = ConfigDict(
        extra="allow",
        title="WalletTransaction",
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "debit"}}},
                    "then": {"required": ["table_id", "round_id", "bet_id"]},
                },
                {
                    "if": {"properties": {"kind": {"const": "credit"}}},
                    "then": {"required": ["message_id"]},
                },
                {
                    "if": {"properties": {"kind": {"const": "refund"}}},
                    "then": {
                        "anyOf": [
                            {"required": ["message_id"]},
                            {"required": ["table_id", "round_id", "bet_id"]},
                        ]
                    },
                },
            ]
        },
    )

    transaction_id: _Id = Field(description="the wallet's own id of the movement")
    kind: Literal["debit", "credit", "refund"]
    message_id: _Id | None = Field(
        default=None, description="credit, refund of a voided round: the result's id"
    )
    table_id: _Id | None = Field(
        default=None, description="debit, refund of a stake: the wager's table"
    )
    round_id: _Id | None = Field(default=None, description="debit: the wager's round")
    bet_id: _Id | None = Field(
        default=None,
        description="debit, refund of a stake, refund of one wager of a voided round: the "
        "wager's bet id",
    )
    player_id: _Id
    currency: _Currency = Field(description="ISO 4217 code")
    amount: int = Field(gt=0, le=MAX_AMOUNT, description="minor units, positive")
    occurred_at: str = Field(
        description="RFC 3339 time with a UTC offset",
        pattern=RFC3339_PATTERN,
        json_schema_extra={"format": "date-time"},
    )
