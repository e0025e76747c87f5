"""The wallet log row and the reconciliation report as models: their JSON Schemas live in
``contracts/wallet/`` and ``contracts/reconcile/`` (``make contracts``).

The reader in :mod:`croupier.reconcile.wallet` checks rows by hand (it reads millions); a
test holds it to this schema.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from croupier.contract import CURRENCY_PATTERN

RFC3339_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)$"
_Id = Annotated[str, StringConstraints(min_length=1, max_length=200)]
_Currency = Annotated[str, StringConstraints(pattern=CURRENCY_PATTERN)]
_Count = Annotated[int, Field(ge=0)]
Kind = Literal[
    "missing_in_wallet",
    "unknown_to_ledger",
    "duplicate_credit",
    "amount_mismatch",
    "currency_mismatch",
    "debit_without_wager",
    "wager_without_debit",
    "in_transit",
]


class WalletTransaction(BaseModel):
    """One row of a wallet's transaction log (a CSV line with a header, or a JSON line).

    ``debit``: a stake taken when the game server accepted a wager (``table_id``,
    ``round_id`` and ``bet_id`` name it). ``credit``: a settlement result applied
    (``message_id`` names it). ``refund``: a voided round's result applied. Extra fields
    are allowed and ignored.
    """

    model_config = ConfigDict(
        extra="allow",
        title="WalletTransaction",
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "debit"}}},
                    "then": {"required": ["table_id", "round_id", "bet_id"]},
                    "else": {"required": ["message_id"]},
                }
            ]
        },
    )

    transaction_id: _Id = Field(description="the wallet's own id of the movement")
    kind: Literal["debit", "credit", "refund"]
    message_id: _Id | None = Field(default=None, description="credit, refund: the result's id")
    table_id: _Id | None = Field(default=None, description="debit: the wager's table")
    round_id: _Id | None = Field(default=None, description="debit: the wager's round")
    bet_id: _Id | None = Field(default=None, description="debit: the wager's bet id")
    player_id: _Id
    currency: _Currency = Field(description="ISO 4217 code")
    amount: int = Field(gt=0, le=2**63 - 1, description="minor units, positive")
    occurred_at: str = Field(
        description="RFC 3339 time with a UTC offset",
        pattern=RFC3339_PATTERN,
        json_schema_extra={"format": "date-time"},
    )


class Movement(BaseModel):
    count: _Count
    amount: int


class Matched(Movement):
    debit: Movement
    credit: Movement
    refund: Movement


class KindTotals(BaseModel):
    count: _Count
    wallet_amount: int
    ledger_amount: int


class CurrencyTotals(BaseModel):
    currency: str
    matched: Matched
    discrepancies: dict[Kind, KindTotals]


class LedgerRange(BaseModel):
    url: str
    first_position: int = Field(ge=1)
    last_position: int = Field(ge=1)
    first_recorded_at: str
    last_recorded_at: str
    last_hash: str = Field(description="hash at last_position: croupier verify --anchor")
    head_position: int = Field(ge=1)
    head_hash: str


class BadWalletRow(BaseModel):
    line: int = Field(ge=1)
    reason: str


class Outside(BaseModel):
    earlier: _Count
    later: _Count


class WalletSide(BaseModel):
    source: str
    rows: _Count
    bad_row_count: _Count
    bad_rows: list[BadWalletRow] = Field(description="the first 1,000 bad rows")
    outside_period: Outside


class Discrepancy(BaseModel):
    kind: Kind
    movement: Literal["debit", "credit", "refund"]
    line: int | None = Field(description="the wallet row's line, when it has one")
    transaction_id: str | None
    message_id: str | None
    table_id: str | None
    round_id: str | None
    bet_id: str | None
    player_id: str | None
    wallet_currency: str | None
    wallet_amount: int | None
    ledger_currency: str | None
    ledger_amount: int | None
    ledger_position: int | None
    occurred_at: str | None
    detail: str | None


class PlayerDifference(BaseModel):
    player_id: str
    currency: str
    net_difference: int = Field(description="what the wallet did to the balance less the ledger")


class ReconciliationReport(BaseModel):
    """``croupier reconcile --json``."""

    model_config = ConfigDict(extra="forbid", title="ReconciliationReport")

    report: Literal["croupier.reconciliation"]
    version: Literal[1]
    ok: bool
    ledger: LedgerRange
    wallet: WalletSide
    lag_seconds: _Count
    currencies: list[CurrencyTotals]
    discrepancies: list[Discrepancy]
    players: list[PlayerDifference]
