"""Input that breaks the contract gives one ContractError whose reason says what to fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from contract_examples import DELETE, VALID, broken, text

from contract.feed import ContractError, parse_event


@dataclass(frozen=True)
class Bad:
    """A broken feed message and what its reason must say."""

    id: str
    raw: str | bytes
    says: tuple[str, ...]
    # False where a JSON Schema validator cannot see it: 100.0 is an integer to JSON Schema, and
    # calendar dates are "format": "date-time", which jsonschema checks only with extra packages.
    schema_can_tell: bool = True


def bad(id: str, name: str, path: str, value: Any, *says: str, schema: bool = True) -> Bad:
    """The VALID[name] event with one field broken."""
    return Bad(id, text(broken(name, path, value)), says, schema)


AMOUNT = (
    "payload.amount: must be a positive integer in minor units, at most 9,007,199,254,740,991, got "
)
CARD = "must be a card: rank 2-9 T J Q K A then suit c d h s"

NOT_EVENTS = [
    Bad("malformed", '{"event_id": "0b6f', ("not valid JSON",)),
    Bad("truncated", text(VALID["bet.placed"])[:-1], ("not valid JSON",)),
    Bad("empty", "", ("not valid JSON",)),
    Bad("not utf-8", b"\xff\xfe{}", ("not valid JSON",)),
    Bad("array", "[]", ("a feed event must be a JSON object, got an array",)),
    Bad("string", '"bet.placed"', ("a feed event must be a JSON object, got a string",)),
    Bad("null", "null", ("a feed event must be a JSON object, got null",)),
    Bad("number", "42", ("a feed event must be a JSON object, got a number",)),
]

BROKEN_FIELDS = [
    # envelope
    bad(
        "unknown type",
        "round.completed",
        "event_type",
        "bet.cancelled",
        'event_type: unknown event type "bet.cancelled"; expected one of',
        "'round.opened', 'bet.placed', 'cards.dealt', 'decision.made'",
    ),
    bad("no type", "round.completed", "event_type", DELETE, "event_type: required field"),
    bad("type not text", "round.completed", "event_type", 3, "unknown event type 3"),
    bad(
        "version 2",
        "bet.placed",
        "schema_version",
        2,
        "schema_version: unsupported version 2; this service reads schema_version 1",
    ),
    bad("version text", "bet.placed", "schema_version", "1", 'must be the integer 1, got "1"'),
    bad("version bool", "bet.placed", "schema_version", True, "must be the integer 1, got true"),
    bad("no version", "bet.placed", "schema_version", DELETE, "schema_version: required field"),
    bad(
        "event_id",
        "bet.placed",
        "event_id",
        "evt-17",
        "event_id: must be a UUID string",
        'got "evt-17"',
    ),
    bad("event_id int", "bet.placed", "event_id", 17, "event_id: must be a UUID string"),
    bad("table_id space", "bet.placed", "table_id", "ch 07", "table_id: must be 1-64 characters"),
    bad("table_id empty", "bet.placed", "table_id", "", "table_id: must be 1-64 characters"),
    bad("table_id long", "bet.placed", "table_id", "t" * 65, "table_id: must be 1-64 characters"),
    bad("table_id dot", "bet.placed", "table_id", "ch.07", 'got "ch.07"'),
    bad("round_id slash", "bet.placed", "round_id", "r/1", "round_id: must be 1-128 characters"),
    bad("round_id long", "bet.placed", "round_id", "r" * 129, "round_id: must be 1-128"),
    bad("seq 0", "bet.placed", "seq", 0, "seq: must be an integer from 1 to 1,000,000, got 0"),
    bad(
        "seq text", "bet.placed", "seq", "2", 'seq: must be an integer from 1 to 1,000,000, got "2"'
    ),
    bad(
        "seq float",
        "bet.placed",
        "seq",
        2.5,
        "seq: must be an integer from 1 to 1,000,000, got 2.5",
    ),
    bad(
        "no tz",
        "bet.placed",
        "occurred_at",
        "2024-05-01T20:15:00",
        "occurred_at: must be an RFC 3339",
    ),
    bad(
        "no seconds",
        "bet.placed",
        "occurred_at",
        "2024-05-01T20:15Z",
        "occurred_at: must be an RFC",
    ),
    bad("epoch", "bet.placed", "occurred_at", 1714594500, "occurred_at: must be an RFC 3339"),
    bad("no date", "bet.placed", "occurred_at", "yesterday", 'got "yesterday"'),
    bad(
        "bad month",
        "bet.placed",
        "occurred_at",
        "2024-13-01T20:15:00Z",
        "occurred_at: must be",
        schema=False,
    ),
    bad(
        "extra field",
        "bet.placed",
        "source",
        "studio-2",
        "source: unknown field, not part of the v1",
    ),
    bad("no payload", "bet.placed", "payload", DELETE, "payload: required field is missing"),
    bad(
        "payload list", "bet.placed", "payload", [], "payload: must be a JSON object, got an array"
    ),
    # round.opened
    bad("game", "round.opened", "payload.game", "blackjack", "payload.game: must be one of"),
    bad(
        "paytable empty", "round.opened", "payload.paytable", "", "payload.paytable: must be a pay"
    ),
    # bet.placed
    bad("amount 0", "bet.placed", "payload.amount", 0, AMOUNT + "0"),
    bad("amount -5", "bet.placed", "payload.amount", -5, AMOUNT + "-5"),
    bad("amount 12.5", "bet.placed", "payload.amount", 12.5, AMOUNT + "12.5"),
    bad("amount text", "bet.placed", "payload.amount", "100", AMOUNT + '"100"'),
    bad("amount true", "bet.placed", "payload.amount", True, AMOUNT + "true"),
    bad("amount null", "bet.placed", "payload.amount", None, AMOUNT + "null"),
    bad("amount 100.0", "bet.placed", "payload.amount", 100.0, AMOUNT + "100.0", schema=False),
    bad("no amount", "bet.placed", "payload.amount", DELETE, "payload.amount: required field"),
    bad(
        "currency lower",
        "bet.placed",
        "payload.currency",
        "eur",
        "payload.currency: must be an ISO",
    ),
    bad("currency long", "bet.placed", "payload.currency", "EURO", 'got "EURO"'),
    bad(
        "currency digit",
        "bet.placed",
        "payload.currency",
        "E1R",
        "payload.currency: must be an ISO",
    ),
    bad("spot call", "bet.placed", "payload.spot", "call", "payload.spot: must be one of 'ante'"),
    bad("spot unknown", "bet.placed", "payload.spot", "side", 'got "side"'),
    bad("no bet_id", "bet.placed", "payload.bet_id", DELETE, "payload.bet_id: required field"),
    bad(
        "empty player",
        "bet.placed",
        "payload.player_id",
        "",
        "payload.player_id: must be 1-64 characters",
    ),
    bad("player number", "bet.placed", "payload.player_id", 1042, "got 1042"),
    bad("payload extra", "bet.placed", "payload.odds", 2, "payload.odds: unknown field"),
    # cards.dealt
    bad(
        "card text",
        "cards.dealt/board",
        "payload.cards",
        ["9s", "Xx", "Qc"],
        "payload.cards[1]: " + CARD,
    ),
    bad("card ten", "cards.dealt/board", "payload.cards", ["10h", "9h", "Qc"], 'got "10h"'),
    bad("card case", "cards.dealt/board", "payload.cards", ["AS", "9h", "Qc"], "cards[0]: " + CARD),
    bad(
        "card int",
        "cards.dealt/board",
        "payload.cards",
        [14, "9h", "Qc"],
        "payload.cards[0]: " + CARD,
    ),
    bad(
        "duplicate",
        "cards.dealt/board",
        "payload.cards",
        ["9s", "9h", "9s"],
        "payload.cards: a card appears twice in one event: ['9s']",
    ),
    bad(
        "no cards",
        "cards.dealt/board",
        "payload.cards",
        [],
        "payload.cards: must be a list of 1 to 5 distinct cards",
    ),
    bad(
        "cards text",
        "cards.dealt/board",
        "payload.cards",
        "9s9hQc",
        "payload.cards: must be a list of 1 to 5",
    ),
    bad("target", "cards.dealt/board", "payload.target", "table", "payload.target: must be one of"),
    bad("player no box", "cards.dealt/player", "payload.box", DELETE, "payload.box: required when"),
    bad("player null box", "cards.dealt/player", "payload.box", None, "payload.box: required when"),
    bad(
        "player empty box",
        "cards.dealt/player",
        "payload.box",
        "",
        "payload.box: must be 1-64 characters",
    ),
    bad(
        "dealer box",
        "cards.dealt/dealer",
        "payload.box",
        "main",
        "payload.box: only allowed when target is 'player', not 'dealer'",
    ),
    bad(
        "board null box", "cards.dealt/board", "payload.box", None, "payload.box: only allowed when"
    ),
    # decision.made
    bad(
        "call no bet_id",
        "decision.made/call",
        "payload.bet_id",
        DELETE,
        "payload.bet_id: required when action is 'call'",
    ),
    bad(
        "call no amount",
        "decision.made/call",
        "payload.amount",
        DELETE,
        "payload.amount: required when action is 'call'",
    ),
    bad(
        "bet no amount",
        "decision.made/bet",
        "payload.amount",
        DELETE,
        "payload.amount: required when action is 'bet'",
    ),
    bad("call amount 0", "decision.made/call", "payload.amount", 0, AMOUNT + "0"),
    bad(
        "fold bet_id",
        "decision.made/fold",
        "payload.bet_id",
        "b-9",
        "payload.bet_id: only allowed when action is 'call' or 'bet', not 'fold'",
    ),
    bad(
        "check amount", "decision.made/check", "payload.amount", 500, "payload.amount: only allowed"
    ),
    bad("fold null", "decision.made/fold", "payload.bet_id", None, "payload.bet_id: only allowed"),
    bad(
        "stage",
        "decision.made/fold",
        "payload.stage",
        "river",
        "payload.stage: must be one of 'preflop', 'flop', 'turn'",
    ),
    bad(
        "action", "decision.made/fold", "payload.action", "raise", "payload.action: must be one of"
    ),
    bad(
        "no ante",
        "decision.made/fold",
        "payload.ante_bet_id",
        DELETE,
        "payload.ante_bet_id: required",
    ),
    # round.completed, round.voided
    bad(
        "completed extra",
        "round.completed",
        "payload.cards",
        ["As"],
        "payload.cards: unknown field",
    ),
    bad(
        "void empty",
        "round.voided",
        "payload.reason",
        "",
        "payload.reason: must be text of at most 500 characters, not blank",
    ),
    bad(
        "void blank",
        "round.voided",
        "payload.reason",
        "   ",
        "payload.reason: must be text of at most 500 characters, not blank",
    ),
    bad(
        "void no reason", "round.voided", "payload.reason", DELETE, "payload.reason: required field"
    ),
]

ALL_BAD = NOT_EVENTS + BROKEN_FIELDS


@pytest.mark.parametrize("case", ALL_BAD, ids=[case.id for case in ALL_BAD])
def test_bad_input_gives_a_reason(case: Bad) -> None:
    with pytest.raises(ContractError) as caught:
        parse_event(case.raw)
    for phrase in case.says:
        assert phrase in str(caught.value)
    assert str(caught.value) == "; ".join(caught.value.reasons)


@pytest.mark.parametrize("case", BROKEN_FIELDS, ids=[case.id for case in BROKEN_FIELDS])
def test_one_broken_field_gives_one_reason(case: Bad) -> None:
    with pytest.raises(ContractError) as caught:
        parse_event(case.raw)
    assert len(caught.value.reasons) == 1, caught.value.reasons


def test_contract_error_is_a_value_error() -> None:
    assert issubclass(ContractError, ValueError)


def test_error_keeps_the_raw_event_id_for_the_rejection_record() -> None:
    with pytest.raises(ContractError) as caught:
        parse_event(text(broken("bet.placed", "payload.amount", 0)))
    assert caught.value.event_id == VALID["bet.placed"]["event_id"]
    with pytest.raises(ContractError) as caught:
        parse_event("[]")
    assert caught.value.event_id is None


def test_all_problems_are_reported_at_once() -> None:
    raw = broken("bet.placed", "payload.amount", -1)
    raw["payload"]["currency"] = "eur"
    raw["seq"] = 0
    with pytest.raises(ContractError) as caught:
        parse_event(text(raw))
    assert [reason.split(":")[0] for reason in caught.value.reasons] == [
        "seq",
        "payload.amount",
        "payload.currency",
    ]


def test_long_inputs_are_shortened_in_the_reason() -> None:
    with pytest.raises(ContractError) as caught:
        parse_event(text(broken("bet.placed", "table_id", "x y" * 500)))
    assert len(str(caught.value)) < 200
