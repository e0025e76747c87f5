"""The settlement contract, v1: what croupier sends wallets and what replay writes.

A :class:`SettlementResult` is what one player gets back from one round (docs/feed.md,
"Output: settlement results"); a :class:`RejectedLine` is one line of replay's rejections file. The
models check shape and sums only; the money itself is settled by the rules core.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Self

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from contract.codes import RejectionCode
from contract.feed import (
    Amount,
    ContractModel,
    Currency,
    Id,
    MessageId,
    Money,
    RoundId,
    TableId,
    is_none,
    rule_error,
)
from holdem import Outcome, Spot


class BetLine(ContractModel):
    """One settled wager; 'returned' is stake + win, the stake on push/refund, else 0."""

    bet_id: Id
    spot: Spot = Field(strict=False)
    stake: Amount
    returned: Money
    outcome: Outcome = Field(strict=False)

    @model_validator(mode="after")
    def _returned_matches_outcome(self) -> Self:
        if self.outcome in (Outcome.LOSE, Outcome.FOLD) and self.returned != 0:
            raise rule_error(
                "returned", f"must be 0 on outcome '{self.outcome}', got {self.returned}"
            )
        if self.outcome in (Outcome.PUSH, Outcome.REFUND) and self.returned != self.stake:
            detail = f"must equal the stake {self.stake} on outcome '{self.outcome}'"
            raise rule_error("returned", f"{detail}, got {self.returned}")
        if self.outcome is Outcome.WIN and self.returned <= self.stake:
            detail = f"must exceed the stake {self.stake} on a win, got {self.returned}"
            raise rule_error("returned", detail)
        return self


class SettlementResult(ContractModel):
    """What one player gets back from one round (published to wallets, written by replay)."""

    message_id: MessageId = Field(description="stable id; wallets deduplicate on it")
    table_id: TableId
    round_id: RoundId
    player_id: Id
    currency: Currency
    bets: list[BetLine] = Field(min_length=1)
    stake_total: Money = Field(description="sum of bets[].stake")
    returned_total: Money = Field(description="sum of bets[].returned")
    ledger_position: Money = Field(description="where this settlement stands in the ledger")

    @model_validator(mode="after")
    def _totals(self) -> Self:
        ids = Counter(line.bet_id for line in self.bets)
        twice = sorted(bet_id for bet_id, n in ids.items() if n > 1)
        if twice:
            raise rule_error("bets", f"each bet_id may appear once, repeated: {twice}")
        for total, part in (("stake_total", "stake"), ("returned_total", "returned")):
            expected = sum(getattr(line, part) for line in self.bets)
            if getattr(self, total) != expected:
                detail = f"must equal the sum of bets[].{part} = {expected}"
                raise rule_error(total, f"{detail}, got {getattr(self, total)}")
        return self


class RejectedLine(ContractModel):
    """One line of the replay rejections file."""

    # Not croupier.settlement.round.Rejection (the error a round raises); the published schema keeps
    # its title.
    model_config = ConfigDict(title="Rejection")

    line: int = Field(ge=1, description="1-based line number in the replayed JSONL file")
    event_id: str | None = Field(description="the raw event's event_id, when it had one")
    reason: Annotated[str, StringConstraints(min_length=1)]
    code: RejectionCode | None = Field(
        default=None,
        exclude_if=is_none,
        description="the rejection code (docs/feed.md: rejection codes)",
    )
