"""The feed events as croupier settles them: msgspec structs read straight from the bytes.

:func:`read_event` is :func:`contract.feed.parse_event` at a fraction of the cost, for the
settlement path. Guarantees:

- It accepts exactly what ``parse_event`` accepts, and refuses with the same
  :class:`~contract.feed.ContractError` (reasons, code, event id, place): msgspec reads the
  common form of a valid event (ids, amounts, enums and every field rule of the models
  checked in C or in ``__post_init__``); anything it does not take whole (a refusal, an
  explicit ``null``, a timestamp other than ``...Z`` with up to six fractional digits, a
  ``round.voided``, whose free-text reason is left to the models) is read by ``parse_event``,
  and what that accepts is converted from the model's JSON form.
- An event read either way holds the values of the model ``parse_event`` gives: the same
  fields, ``event_id`` lower case and ``occurred_at`` as the model's JSON form writes it,
  enums as members. :func:`event_json` is then the model's ``model_dump(mode="json")`` with
  its canonical text, byte for byte (property tests hold both ways to the models).

The pydantic models in :mod:`contract.feed` stay the contract's definition: JSON Schemas,
the studio and the refusal reasons come from them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Final

import msgspec

from contract.canonical import Encoded, canonical_json
from contract.feed import (
    CARD_PATTERN,
    CURRENCY_PATTERN,
    ID_PATTERN,
    MAX_AMOUNT,
    MAX_BODY_BYTES,
    MAX_SEQ,
    PAYTABLE_PATTERN,
    ROUND_ID_PATTERN,
    SCHEMA_VERSION,
    TABLE_ID_PATTERN,
    UUID_PATTERN,
    WAGER_ACTIONS,
    EventType,
    Target,
    parse_event,
    too_large,
)
from contract.feed import FeedEvent as FeedModel
from holdem import Action, Game, Spot, Stage


def _whole(pattern: str) -> msgspec.Meta:
    # msgspec searches with Python's re, where '$' also matches before a final newline:
    # the models' patterns (Rust regex) end at the end of the text only, as '\Z' does.
    return msgspec.Meta(pattern=pattern.removesuffix("$") + r"\Z")


EventId = Annotated[str, _whole(UUID_PATTERN)]
TableId = Annotated[str, _whole(TABLE_ID_PATTERN)]
RoundId = Annotated[str, _whole(ROUND_ID_PATTERN)]
Id = Annotated[str, _whole(ID_PATTERN)]
PaytableId = Annotated[str, _whole(PAYTABLE_PATTERN)]
Card = Annotated[str, _whole(CARD_PATTERN)]
Currency = Annotated[str, _whole(CURRENCY_PATTERN)]
Amount = Annotated[int, msgspec.Meta(gt=0, le=MAX_AMOUNT)]
Seq = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQ)]
Cards = Annotated[list[Card], msgspec.Meta(min_length=1, max_length=5)]

_PLACED_SPOTS: Final = frozenset({Spot.ANTE, Spot.AA_BONUS, Spot.JACKPOT, Spot.PLUS})


class _Struct(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A contract message: no unknown fields; optional fields left out when absent."""


class RoundOpenedPayload(_Struct):
    """'round.opened': which game and pay table the round plays."""

    game: Game
    paytable: PaytableId


class BetPlacedPayload(_Struct):
    """'bet.placed': a wager on a box, in minor units of 'currency'."""

    bet_id: Id
    player_id: Id
    box: Id
    spot: Spot
    amount: Amount
    currency: Currency

    def __post_init__(self) -> None:
        if self.spot not in _PLACED_SPOTS:
            raise ValueError("not a spot a bet is placed on")


class CardsDealtPayload(_Struct):
    """'cards.dealt': cards to a player box, the dealer, the board or burn."""

    target: Target
    cards: Cards
    box: Id | None = None

    def __post_init__(self) -> None:
        if len(set(self.cards)) != len(self.cards):
            raise ValueError("a card appears twice")
        if (self.target is Target.PLAYER) != (self.box is not None):
            raise ValueError("box only, and always, for target player")


class DecisionMadePayload(_Struct):
    """'decision.made': a player's decision at a stage; call and bet add a wager."""

    ante_bet_id: Id
    stage: Stage
    action: Action
    bet_id: Id | None = None
    amount: Amount | None = None

    def __post_init__(self) -> None:
        wager = self.action in WAGER_ACTIONS
        if (self.bet_id is not None, self.amount is not None) != (wager, wager):
            raise ValueError("bet_id and amount only, and always, with a wager")


class RoundCompletedPayload(_Struct):
    """'round.completed': an empty object."""


class RoundVoidedPayload(_Struct):
    """'round.voided': why the round is void."""

    reason: str


class _Event(_Struct, tag_field="event_type"):
    """Fields every feed event carries (``event_type`` is the class's tag)."""

    event_type: ClassVar[EventType]
    event_id: EventId
    schema_version: Annotated[int, msgspec.Meta(ge=SCHEMA_VERSION, le=SCHEMA_VERSION)]
    table_id: TableId
    round_id: RoundId
    seq: Seq
    #: As the model's JSON form writes it, e.g. '2024-05-01T20:00:00.300000Z'.
    occurred_at: str


class RoundOpened(_Event, tag=EventType.ROUND_OPENED.value):
    """A round opens."""

    event_type: ClassVar[EventType] = EventType.ROUND_OPENED
    payload: RoundOpenedPayload


class BetPlaced(_Event, tag=EventType.BET_PLACED.value):
    """A wager is placed."""

    event_type: ClassVar[EventType] = EventType.BET_PLACED
    payload: BetPlacedPayload


class CardsDealt(_Event, tag=EventType.CARDS_DEALT.value):
    """Cards are dealt."""

    event_type: ClassVar[EventType] = EventType.CARDS_DEALT
    payload: CardsDealtPayload


class DecisionMade(_Event, tag=EventType.DECISION_MADE.value):
    """A player decides."""

    event_type: ClassVar[EventType] = EventType.DECISION_MADE
    payload: DecisionMadePayload


class RoundCompleted(_Event, tag=EventType.ROUND_COMPLETED.value):
    """Every card is dealt and shown."""

    event_type: ClassVar[EventType] = EventType.ROUND_COMPLETED
    payload: RoundCompletedPayload


class RoundVoided(_Event, tag=EventType.ROUND_VOIDED.value):
    """The round is void."""

    event_type: ClassVar[EventType] = EventType.ROUND_VOIDED
    payload: RoundVoidedPayload


FeedEvent = RoundOpened | BetPlaced | CardsDealt | DecisionMade | RoundCompleted | RoundVoided

# The fast path leaves round.voided out: its reason's checks are the model's.
_read_common = msgspec.json.Decoder(
    RoundOpened | BetPlaced | CardsDealt | DecisionMade | RoundCompleted
).decode
_convert_kinds: Final = FeedEvent
#: The timestamps read on the fast path: UTC 'Z', at most microseconds.
_COMMON_TIME: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z"
)


def read_event(raw: bytes | str) -> FeedEvent:
    """Decode one feed message into its event, or raise ContractError as ``parse_event``."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY_BYTES:
        raise too_large(size)
    explicit_null = b"null" in raw if isinstance(raw, bytes) else "null" in raw
    if not explicit_null:  # the models tell an explicit null from a field left out
        try:
            event: FeedEvent = _read_common(raw)
        except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
            pass  # the models say why
        else:
            stamp = _model_time(event.occurred_at)
            if stamp is not None:
                event.occurred_at = stamp
                event.event_id = event.event_id.lower()
                return event
    return from_model(parse_event(raw))


def _model_time(text: str) -> str | None:
    """A 'Z' timestamp as the model's JSON form writes it (fraction to six digits, none when
    zero), or None when it is not in the common form or not a real time."""
    if not _COMMON_TIME.fullmatch(text):
        return None
    try:
        datetime.fromisoformat(text)  # a real date and time
    except ValueError:
        return None
    fraction = text[20:-1].rstrip("0")
    return f"{text[:19]}.{fraction.ljust(6, '0')}Z" if fraction else text[:19] + "Z"


def from_model(model: FeedModel) -> FeedEvent:
    """The event a parsed model holds (its JSON form, read into the struct)."""
    form = model.__pydantic_serializer__.to_python(model, mode="json")
    event: FeedEvent = msgspec.convert(form, _convert_kinds)
    return event


_write_sorted = msgspec.json.Encoder(order="sorted").encode


def event_json(event: FeedEvent) -> Encoded:
    """The event's JSON form (the model's ``model_dump(mode="json")``) with its canonical
    text."""
    form: dict[str, Any] = msgspec.to_builtins(event)
    try:
        text = _write_sorted(event).decode()
    except UnicodeEncodeError:  # a lone surrogate in a reason: written the json way
        text = canonical_json(form)
    return Encoded.with_text(form, text)
