"""What the history API answers with: pydantic models, the source of its OpenAPI document.

Money is integer minor units of ``currency``, as everywhere in Croupier.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PayTableRef(_Model):
    """The pay table a round played: id, version and the hash of its content."""

    id: str
    version: int
    hash: str


class Wager(_Model):
    """A wager: placed as a bet, or made by a call or bet decision (``placed_by``)."""

    bet_id: str
    player_id: str
    box: str
    spot: str
    amount: int = Field(description="minor units")
    currency: str
    placed_by: str = Field(description="'bet' or 'decision'")

    @staticmethod
    def placed_fields() -> tuple[str, ...]:
        """The fields a ``bet.placed`` payload gives."""
        return ("bet_id", "player_id", "box", "spot", "amount", "currency")


class Decision(_Model):
    """A player's decision on an ante at a stage."""

    ante_bet_id: str
    player_id: str
    box: str
    stage: str
    action: str
    bet_id: str | None = None
    amount: int | None = None


class Box(_Model):
    """A box's two hole cards and, once settled, the hand they make with the board."""

    box: str
    cards: list[str]
    hand: str | None = Field(default=None, description="e.g. 'Flush, Queen, Ten, ...'")


class Cards(_Model):
    """Every card of the round, as text ('Qh', 'Tc')."""

    dealer: list[str]
    dealer_hand: str | None = None
    board: list[str]
    burns: list[str]
    boxes: list[Box]


class Result(_Model):
    """One bet's result: what was staked, returned, and why."""

    bet_id: str
    player_id: str
    box: str
    spot: str
    stake: int
    returned: int
    net: int
    outcome: str
    line: str | None = None
    currency: str
    why: str


class Total(_Model):
    """A player's totals in one currency."""

    player_id: str
    currency: str
    stake: int
    returned: int
    net: int


class MeterMovement(_Model):
    """How the round moved a progressive jackpot meter."""

    currency: str
    before: int
    contributed: int
    awarded: int
    reseeded: int
    after: int


class Posting(_Model):
    """One line of the round's balanced double-entry postings."""

    currency: str
    account: str
    amount: int


class Timeline(_Model):
    """One fact of the round's ledger stream, in position order.

    In a player's cut ``position``, ``version``, ``seq`` and ``recorded_at`` are null: their
    gaps would tell how many other players acted in the round, and when.
    """

    position: int | None = None
    version: int | None = None
    fact: str = Field(description="feed.accepted, feed.held, feed.rejected, round.settled, ...")
    event_type: str | None = None
    seq: int | None = None
    occurred_at: str | None = None
    recorded_at: str | None = None
    summary: str
    player_id: str | None = None
    bet_id: str | None = None
    box: str | None = None
    target: str | None = Field(
        default=None, description="cards.dealt: player, dealer, board or burn"
    )
    cards: list[str] | None = Field(default=None, description="cards.dealt: the cards, as text")
    spot: str | None = Field(default=None, description="bet.placed: the wager's spot")
    stage: str | None = Field(default=None, description="decision.made: the stage")
    action: str | None = Field(default=None, description="decision.made: the action")
    amount: int | None = Field(
        default=None, description="bet.placed, decision.made: the wager in minor units"
    )
    currency: str | None = None
    code: str | None = None
    reason: str | None = None
    hash: str | None = None
    prev_hash: str | None = None


class Verification(_Model):
    """The ledger facts a recall was folded from, and how to check them."""

    stream: str
    positions: list[int] = Field(
        description="each fact's ledger position (staff; empty in a player's cut)"
    )
    hashes: list[str] = Field(description="each fact's hash, as positions (staff)")
    head_position: int = Field(description="the last fact folded (a player's: the settlement)")
    head_hash: str
    facts_sha256: str = Field(
        description="sha256 of 'position:hash\\n' of every fact folded, in order: names "
        "exactly the facts a player's cut came from without telling how many they are"
    )
    how: str


class RoundRecall(_Model):
    """A round as recorded in the ledger."""

    table_id: str
    round_id: str
    game: str | None
    paytable: PayTableRef | None
    status: str = Field(description="open, settled or voided")
    opened_at: str | None
    closed_at: str | None
    closed_position: int | None
    void_reason: str | None
    cards: Cards
    wagers: list[Wager]
    decisions: list[Decision]
    results: list[Result]
    totals: list[Total]
    jackpot: list[MeterMovement]
    postings: list[Posting]
    timeline: list[Timeline]
    verification: Verification | None


class PlayerRound(_Model):
    """One round of a player's history, in one currency."""

    table_id: str
    round_id: str
    game: str
    paytable_id: str
    status: str
    closed_at: str | None
    position: int = Field(description="ledger position of the settlement")
    currency: str
    stake: int
    returned: int
    net: int
    wagers: list[Result]
    decisions: list[Decision]
    cards: Cards | None = Field(
        default=None, description="the dealer's, the board's and this player's boxes' cards"
    )
    void_reason: str | None = None


class PlayerRounds(_Model):
    """A page of a player's rounds, newest first."""

    player_id: str
    rounds: list[PlayerRound]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next (older) page; null on the last page"
    )


class TableRound(_Model):
    """One round of a table, as the rounds read model holds it."""

    table_id: str
    round_id: str
    game: str
    paytable_id: str
    status: str
    closed_at: str | None
    position: int


class TableRounds(_Model):
    """A page of a table's rounds, newest first."""

    table_id: str
    rounds: list[TableRound]
    next_cursor: str | None


class Problem(_Model):
    """An error."""

    detail: str
