"""The studio feed contract, v1: the events a studio sends, and the field types all messages share.

These models are the wire vocabulary of docs/feed.md: they check shape and field values only.
Game rules (card uniqueness across a round, call size, stage order) belong to the Round
aggregate. Parse feed messages with :func:`parse_event`; it raises :class:`ContractError`
with a reason a person can act on.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError, from_json

from contract.codes import RejectionCode
from holdem import Action, Game, Spot, Stage
from holdem.schedule import SCHEDULES

SCHEMA_VERSION = 1

STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)


class EventType(StrEnum):
    """Feed event types."""

    ROUND_OPENED = "round.opened"
    BET_PLACED = "bet.placed"
    CARDS_DEALT = "cards.dealt"
    DECISION_MADE = "decision.made"
    ROUND_COMPLETED = "round.completed"
    ROUND_VOIDED = "round.voided"


class Target(StrEnum):
    """Who or what a 'cards.dealt' event deals to."""

    PLAYER = "player"
    DEALER = "dealer"
    BOARD = "board"
    BURN = "burn"


PlacedSpot = Literal[Spot.ANTE, Spot.AA_BONUS, Spot.JACKPOT, Spot.PLUS]
#: The actions that add a play wager, as the decision schedule says (holdem.schedule).
WAGER_ACTIONS = frozenset(s.wager_action for stages in SCHEDULES.values() for s in stages)

#: The largest feed message the contract reads (a valid event is well under 2 KiB).
MAX_BODY_BYTES: Final = 16 * 1024
#: The highest ``seq`` of a round (a shared hand of 10,000 players needs about 50,000).
MAX_SEQ: Final = 1_000_000
#: The largest amount in minor units (2**53 - 1: exact in every JSON reader).
MAX_AMOUNT: Final = 2**53 - 1
MAX_REASON_LENGTH: Final = 500

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
TABLE_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
ROUND_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
#: Bet, player and box ids: ASCII only, so ``<currency>.<player_id>`` is at most 68 bytes.
ID_PATTERN = r"^[A-Za-z0-9_.:@+=-]{1,64}$"
PAYTABLE_PATTERN = r"^[A-Za-z0-9_.-]{1,32}/[A-Za-z0-9_.-]{1,32}$"
#: Free text: at least one non-space, no control characters (C0, DEL, C1).
TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
CARD_PATTERN = r"^[2-9TJQKA][cdhs]$"
CURRENCY_PATTERN = r"^[A-Z]{3}$"
RFC3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_RFC3339 = re.compile(RFC3339_PATTERN)


def _rfc3339_text(value: object) -> object:
    """Admit only a datetime or RFC 3339 text (pydantic alone also takes '20:00Z', numbers)."""
    if isinstance(value, datetime) or (isinstance(value, str) and _RFC3339.match(value)):
        return value
    raise PydanticCustomError("rfc3339", "not an RFC 3339 timestamp")


EventId = Annotated[
    str,
    StringConstraints(pattern=UUID_PATTERN, to_lower=True),
    Field(json_schema_extra={"format": "uuid"}),
]
TableId = Annotated[str, StringConstraints(pattern=TABLE_ID_PATTERN)]
RoundId = Annotated[str, StringConstraints(pattern=ROUND_ID_PATTERN)]
Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
MessageId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@+=-]{1,128}$")]
PaytableId = Annotated[str, StringConstraints(pattern=PAYTABLE_PATTERN)]
Reason = Annotated[str, StringConstraints(max_length=MAX_REASON_LENGTH, pattern=TEXT_PATTERN)]
Card = Annotated[str, StringConstraints(pattern=CARD_PATTERN)]
Currency = Annotated[str, StringConstraints(pattern=CURRENCY_PATTERN)]
Amount = Annotated[int, Field(gt=0, le=MAX_AMOUNT)]
Money = Annotated[int, Field(ge=0)]
Timestamp = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339_text),
    Field(strict=False, json_schema_extra={"pattern": RFC3339_PATTERN}),
]
_OptionalId = Annotated[Id | None, WithJsonSchema({"pattern": ID_PATTERN, "type": "string"})]
_OptionalAmount = Annotated[
    Amount | None,
    WithJsonSchema({"exclusiveMinimum": 0, "maximum": MAX_AMOUNT, "type": "integer"}),
]


def is_none(value: object) -> bool:
    """Optional feed fields are left out when absent; null is not part of the contract."""
    return value is None


def rule_error(field: str, detail: str) -> PydanticCustomError:
    """An error about 'field' raised from a model-level check."""
    return PydanticCustomError(
        "contract_rule", "{field}: {detail}", {"field": field, "detail": detail}
    )


class ContractModel(BaseModel):
    """A contract message: strict types, no unknown fields, immutable."""

    model_config = STRICT


# ---------------------------------------------------------------- feed payloads


class RoundOpenedPayload(ContractModel):
    """'round.opened': which game and pay table the round plays."""

    game: Game
    paytable: PaytableId = Field(description="pay table id, e.g. casino-holdem/classic")


class BetPlacedPayload(ContractModel):
    """'bet.placed': a wager on a box, in minor units of 'currency'."""

    bet_id: Id = Field(description="unique in the round")
    player_id: Id
    box: Id = Field(description="the hand the bet rides on; 'main' for one shared hand")
    spot: PlacedSpot
    amount: Amount = Field(description="minor units")
    currency: Currency = Field(description="ISO 4217 code")


class CardsDealtPayload(ContractModel):
    """'cards.dealt': cards to a player box, the dealer, the board (deal order) or burn."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"target": {"const": "player"}}, "required": ["target"]},
            "then": {"required": ["box"]},
            "else": {"not": {"required": ["box"]}},
        }
    )

    target: Target
    box: _OptionalId = Field(
        default=None, exclude_if=is_none, description="only (and always) for target player"
    )
    cards: list[Card] = Field(min_length=1, max_length=5, json_schema_extra={"uniqueItems": True})

    @field_validator("cards")
    @classmethod
    def _distinct(cls, cards: list[str]) -> list[str]:
        twice = sorted(card for card, n in Counter(cards).items() if n > 1)
        if twice:
            raise PydanticCustomError(
                "duplicate_card", "a card appears twice in one event: {cards}", {"cards": twice}
            )
        return cards

    @model_validator(mode="after")
    def _box_for_player_only(self) -> Self:
        if self.target is Target.PLAYER and self.box is None:
            raise rule_error("box", "required when target is 'player'")
        if self.target is not Target.PLAYER and "box" in self.model_fields_set:
            raise rule_error("box", f"only allowed when target is 'player', not '{self.target}'")
        return self


class DecisionMadePayload(ContractModel):
    """'decision.made': a player's decision at a stage; call and bet add a wager."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"action": {"enum": ["call", "bet"]}}, "required": ["action"]},
            "then": {"required": ["bet_id", "amount"]},
            "else": {
                "allOf": [{"not": {"required": ["bet_id"]}}, {"not": {"required": ["amount"]}}]
            },
        }
    )

    ante_bet_id: Id = Field(description="the ante this decision belongs to")
    stage: Stage
    action: Action
    bet_id: _OptionalId = Field(
        default=None, exclude_if=is_none, description="the new wager's id (call, bet)"
    )
    amount: _OptionalAmount = Field(
        default=None, exclude_if=is_none, description="the new wager (call, bet)"
    )

    @model_validator(mode="after")
    def _wager_fields(self) -> Self:
        for name in ("bet_id", "amount"):
            if self.action in WAGER_ACTIONS and getattr(self, name) is None:
                raise rule_error(name, f"required when action is '{self.action}'")
            if self.action not in WAGER_ACTIONS and name in self.model_fields_set:
                raise rule_error(
                    name, f"only allowed when action is 'call' or 'bet', not '{self.action}'"
                )
        return self


class RoundCompletedPayload(ContractModel):
    """'round.completed': an empty object; every card is dealt and shown, settle now."""


class RoundVoidedPayload(ContractModel):
    """'round.voided': a misdeal or fault; every wager of the round is refunded."""

    reason: Reason = Field(description="text, not blank, no control characters")


# ---------------------------------------------------------------- feed events


class EventEnvelope(ContractModel):
    """Fields every feed event carries."""

    event_id: EventId = Field(description="UUID; unique forever, the idempotency key")
    event_type: EventType
    schema_version: int = Field(json_schema_extra={"const": SCHEMA_VERSION})
    table_id: TableId
    round_id: RoundId = Field(description="unique per table")
    seq: int = Field(ge=1, le=MAX_SEQ, description="place in the round: 1, 2, 3, ... with no gaps")
    occurred_at: Timestamp = Field(description="RFC 3339, when it happened at the source")

    @field_validator("schema_version")
    @classmethod
    def _version(cls, version: int) -> int:
        if version != SCHEMA_VERSION:
            raise PydanticCustomError(
                "schema_version",
                "unsupported version {version}; this service reads schema_version {supported}",
                {"version": version, "supported": SCHEMA_VERSION},
            )
        return version


class RoundOpened(EventEnvelope):
    """A round opens."""

    event_type: Literal[EventType.ROUND_OPENED]
    payload: RoundOpenedPayload


class BetPlaced(EventEnvelope):
    """A wager is placed."""

    event_type: Literal[EventType.BET_PLACED]
    payload: BetPlacedPayload


class CardsDealt(EventEnvelope):
    """Cards are dealt."""

    event_type: Literal[EventType.CARDS_DEALT]
    payload: CardsDealtPayload


class DecisionMade(EventEnvelope):
    """A player decides."""

    event_type: Literal[EventType.DECISION_MADE]
    payload: DecisionMadePayload


class RoundCompleted(EventEnvelope):
    """Every card is dealt and shown."""

    event_type: Literal[EventType.ROUND_COMPLETED]
    payload: RoundCompletedPayload


class RoundVoided(EventEnvelope):
    """The round is void."""

    event_type: Literal[EventType.ROUND_VOIDED]
    payload: RoundVoidedPayload


FeedEvent = Annotated[
    RoundOpened | BetPlaced | CardsDealt | DecisionMade | RoundCompleted | RoundVoided,
    Field(discriminator="event_type"),
]
EVENT_MODELS: dict[EventType, type[EventEnvelope]] = {
    EventType.ROUND_OPENED: RoundOpened,
    EventType.BET_PLACED: BetPlaced,
    EventType.CARDS_DEALT: CardsDealt,
    EventType.DECISION_MADE: DecisionMade,
    EventType.ROUND_COMPLETED: RoundCompleted,
    EventType.ROUND_VOIDED: RoundVoided,
}
FEED_EVENT_ADAPTER: TypeAdapter[FeedEvent] = TypeAdapter(FeedEvent)


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True, slots=True)
class Place:
    """Where a refused message stands in the feed: its round and its ``seq`` in that round,
    each valid by the contract (docs/feed.md, "A refused message keeps its place")."""

    table_id: str
    round_id: str
    seq: int


class ContractError(ValueError):
    """A feed message breaks the contract; 'str(err)' says what to fix, 'code' which rule.

    ``place``: the message's round and ``seq`` when those fields are readable and valid.
    """

    def __init__(
        self,
        reasons: list[str],
        event_id: str | None = None,
        code: RejectionCode = RejectionCode.CONTRACT,
        place: Place | None = None,
    ) -> None:
        super().__init__("; ".join(reasons))
        self.reasons: tuple[str, ...] = tuple(reasons)
        self.event_id = event_id
        self.code = code
        self.place = place


def too_large(size: int) -> ContractError:
    """The refusal of a message of ``size`` bytes, over ``MAX_BODY_BYTES`` (unread)."""
    reason = f"message of {size:,} bytes; the contract allows at most {MAX_BODY_BYTES:,}"
    return ContractError([reason], None, RejectionCode.TOO_LARGE)


def parse_event(raw: bytes | str) -> FeedEvent:
    """Decode one feed message (JSON text) into its typed event, or raise ContractError.

    Any input ends in one of the two: the body size is checked before parsing, and the
    parser (jiter) refuses nesting beyond its recursion limit as invalid JSON instead of
    raising RecursionError.
    """
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY_BYTES:
        raise too_large(size)
    try:
        return FEED_EVENT_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        reasons = [describe_error(error) for error in errors]
        if any(error["type"] == "json_invalid" for error in errors):
            raise ContractError(reasons, None, RejectionCode.NOT_JSON) from None
        event_id, place = _readable(raw)
        raise ContractError(reasons, event_id, place=place) from None


def _readable(raw: bytes | str) -> tuple[str | None, Place | None]:
    """What a refused message still says validly: its UUID ``event_id``, and its place
    (``table_id``, ``round_id`` and ``seq``, all three valid), each or None."""
    try:
        data = from_json(raw)  # the same bounded parser: no RecursionError
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    event_id, table_id, round_id, seq = (
        data.get(name) for name in ("event_id", "table_id", "round_id", "seq")
    )
    place = None
    if (
        isinstance(table_id, str)
        and _TABLE_ID.fullmatch(table_id)
        and isinstance(round_id, str)
        and _ROUND_ID.fullmatch(round_id)
        and type(seq) is int
        and 1 <= seq <= MAX_SEQ
    ):
        place = Place(table_id, round_id, seq)
    readable_id = event_id if isinstance(event_id, str) and _UUID.fullmatch(event_id) else None
    return readable_id, place


_UUID = re.compile(UUID_PATTERN)
_TABLE_ID = re.compile(TABLE_ID_PATTERN)
_ROUND_ID = re.compile(ROUND_ID_PATTERN)
_ONE_OF = {
    "event_type": EventType,
    "game": Game,
    "target": Target,
    "stage": Stage,
    "action": Action,
}
_EXPECTED = {
    "event_id": "a UUID string, e.g. '0b6f1f8e-5a47-4c1e-9a4e-2f1d7c3b9a10'",
    "table_id": "1-64 characters of A-Z a-z 0-9 _ -",
    "round_id": "1-128 characters of A-Z a-z 0-9 _ . : -",
    "schema_version": f"the integer {SCHEMA_VERSION}",
    "occurred_at": "an RFC 3339 timestamp with a UTC offset, e.g. '2024-05-01T20:15:00Z'",
    "payload": "a JSON object",
    "seq": f"an integer from 1 to {MAX_SEQ:,}",
    "paytable": "a pay table id, e.g. 'casino-holdem/classic'",
    "bet_id": "1-64 characters of A-Z a-z 0-9 _ . : @ + = -",
    "ante_bet_id": "1-64 characters of A-Z a-z 0-9 _ . : @ + = -",
    "player_id": "1-64 characters of A-Z a-z 0-9 _ . : @ + = -",
    "box": "1-64 characters of A-Z a-z 0-9 _ . : @ + = -",
    "spot": "one of 'ante', 'aa_bonus', 'jackpot', 'plus'",
    "amount": f"a positive integer in minor units, at most {MAX_AMOUNT:,}",
    "currency": "an ISO 4217 code of three upper-case letters, e.g. 'EUR'",
    "cards": "a list of 1 to 5 distinct cards",
    "card": "a card: rank 2-9 T J Q K A then suit c d h s, e.g. 'As', 'Td', '2c'",
    "reason": f"text of at most {MAX_REASON_LENGTH} characters, not blank, no control characters",
} | {name: "one of " + ", ".join(f"'{v}'" for v in enum) for name, enum in _ONE_OF.items()}
_NOT_OBJECT = frozenset({"model_type", "model_attributes_type", "dict_type"})
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def describe_error(error: ErrorDetails) -> str:
    """One pydantic error as '<field path>: <what is wrong and what is expected>'."""
    loc = list(error["loc"])
    if loc and loc[0] in EVENT_MODELS:
        loc = loc[1:]  # the discriminated union puts the event type first
    kind, ctx = error["type"], error.get("ctx", {})
    if kind == "contract_rule":
        loc.append(ctx["field"])
    path = _path(loc)
    detail = _detail(kind, error, path, loc)
    return f"{path}: {detail}" if path else detail


def _detail(kind: str, error: ErrorDetails, path: str, loc: list[int | str]) -> str:
    ctx = error.get("ctx", {})
    if kind == "json_invalid":
        return f"not valid JSON ({ctx.get('error', error['msg'])})"
    if kind == "union_tag_invalid":
        given = error["input"]
        tag = _show(given.get("event_type") if isinstance(given, dict) else ctx.get("tag"))
        return f"event_type: unknown event type {tag}; expected {_EXPECTED['event_type']}"
    if kind == "union_tag_not_found":
        return "event_type: required field is missing"
    if kind in _NOT_OBJECT:
        subject = "must be" if path else "a feed event must be"
        return f"{subject} a JSON object, got {_json_type(error['input'])}"
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field, not part of the v1 contract; remove it"
    if kind == "contract_rule":
        return str(ctx["detail"])
    if kind in ("schema_version", "duplicate_card"):
        return error["msg"]
    key = (
        "card"
        if loc and isinstance(loc[-1], int) and "cards" in loc
        else str(loc[-1] if loc else "")
    )
    expected = _EXPECTED.get(key)
    if expected is None:
        return f"{error['msg']}, got {_show(error['input'])}"
    return f"must be {expected}, got {_show(error['input'])}"


def _path(loc: list[int | str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in _JSON_TYPES.items():
        if isinstance(value, kind):
            return name
    return "a number"


def _show(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
