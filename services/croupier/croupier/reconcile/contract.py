"""The reconciliation report as a model: its JSON Schema lives in ``contracts/reconcile/``
(``make contracts``). The wallet log row it reads is :class:`contract.wallet.WalletTransaction`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class Movement(BaseModel):
    count: _Count
    amount: int


class Matched(Movement):
    """Movements the ledger accounts for (count and amount: debits, credits, refunds)."""

    debit: Movement
    credit: Movement
    refund: Movement
    refunded_stake: Movement = Field(
        description="debits the ledger does not account for (a wager it rejected or never "
        "saw, a second debit) that the wallet returned with a stake refund: not in count "
        "and amount"
    )


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
    """One exception, with the ids that locate it and the amounts on each side."""

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
