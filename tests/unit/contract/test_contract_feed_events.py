"""Every feed event of docs/feed.md parses into its typed model and round-trips."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from contract_examples import VALID, broken, text
from pydantic import ValidationError

from contract.feed import (
    EVENT_MODELS,
    BetPlaced,
    BetPlacedPayload,
    CardsDealt,
    DecisionMade,
    EventType,
    RoundCompleted,
    RoundOpened,
    RoundVoided,
    Target,
    parse_event,
)
from holdem import Action, Game, Outcome, Spot, Stage

EXPECTED_CLASS = {
    "round.opened": RoundOpened,
    "bet.placed": BetPlaced,
    "cards.dealt": CardsDealt,
    "decision.made": DecisionMade,
    "round.completed": RoundCompleted,
    "round.voided": RoundVoided,
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_event_parses_into_its_type(name: str) -> None:
    raw = VALID[name]
    parsed = parse_event(text(raw))
    assert type(parsed) is EXPECTED_CLASS[raw["event_type"]]
    assert parsed.event_type == raw["event_type"]
    assert parsed.occurred_at == datetime(2024, 5, 1, 20, 15, 0, 250000, tzinfo=UTC)


@pytest.mark.parametrize("name", sorted(VALID))
def test_parses_bytes_as_well_as_text(name: str) -> None:
    assert parse_event(text(VALID[name]).encode()) == parse_event(text(VALID[name]))


@pytest.mark.parametrize("name", sorted(VALID))
def test_round_trip_through_json(name: str) -> None:
    parsed = parse_event(text(VALID[name]))
    assert parse_event(parsed.model_dump_json()) == parsed
    again = json.loads(parsed.model_dump_json())
    again["occurred_at"] = VALID[name]["occurred_at"]  # same instant, maybe other spelling
    assert again == VALID[name]


def test_bet_fields_are_typed() -> None:
    bet = parse_event(text(VALID["bet.placed"]))
    assert isinstance(bet, BetPlaced)
    assert bet.payload.spot is Spot.ANTE
    assert bet.payload.amount == 500
    assert bet.payload.currency == "EUR"


def test_decision_and_cards_fields_are_typed() -> None:
    decision = parse_event(text(VALID["decision.made/call"]))
    assert isinstance(decision, DecisionMade)
    assert (decision.payload.stage, decision.payload.action) == (Stage.FLOP, Action.CALL)
    assert (decision.payload.bet_id, decision.payload.amount) == ("b-3", 1000)
    fold = parse_event(text(VALID["decision.made/fold"]))
    assert isinstance(fold, DecisionMade)
    assert fold.payload.bet_id is None and fold.payload.amount is None
    dealt = parse_event(text(VALID["cards.dealt/board"]))
    assert isinstance(dealt, CardsDealt)
    assert dealt.payload.target is Target.BOARD
    assert dealt.payload.box is None
    assert dealt.payload.cards == ["9s", "9h", "Qc"]


def test_offsets_are_kept_and_instants_compare() -> None:
    raw = broken("round.completed", "occurred_at", "2024-05-01T22:15:00.25+02:00")
    parsed = parse_event(text(raw))
    assert parsed.occurred_at.utcoffset() == timedelta(hours=2)
    assert parsed.occurred_at == datetime(2024, 5, 1, 20, 15, 0, 250000, tzinfo=UTC)


@pytest.mark.parametrize(
    "stamp", ["2024-05-01T20:15:00Z", "2024-05-01t20:15:00z", "2024-05-01 20:15:00-03:30"]
)
def test_rfc3339_spellings_accepted(stamp: str) -> None:
    parse_event(text(broken("round.completed", "occurred_at", stamp)))


def test_event_id_is_normalised_to_lower_case() -> None:
    raw = broken("round.completed", "event_id", "0B6F1F8E-5A47-4C1E-9A4E-00000000000D")
    assert parse_event(text(raw)).event_id == "0b6f1f8e-5a47-4c1e-9a4e-00000000000d"


def test_game_rules_are_not_the_contracts_business() -> None:
    # A call that is not 2x the ante, a preflop check: the Round aggregate rejects these.
    raw = broken("decision.made/call", "payload.amount", 7)
    raw["payload"]["stage"] = "preflop"
    assert isinstance(parse_event(text(raw)), DecisionMade)


def test_events_are_immutable() -> None:
    parsed = parse_event(text(VALID["bet.placed"]))
    with pytest.raises(ValidationError):
        parsed.seq = 9


def test_events_can_be_built_in_python() -> None:
    built = BetPlaced(
        event_id="0b6f1f8e-5a47-4c1e-9a4e-000000000003",
        event_type=EventType.BET_PLACED,
        schema_version=1,
        table_id="ch-07",
        round_id="ch-07:2024-05-01:000123",
        seq=2,
        occurred_at=datetime(2024, 5, 1, 20, 15, 0, 250000, tzinfo=UTC),
        payload=BetPlacedPayload(
            bet_id="b-1",
            player_id="p-1042",
            box="main",
            spot=Spot.ANTE,
            amount=500,
            currency="EUR",
        ),
    )
    assert built == parse_event(text(VALID["bet.placed"]))


def test_every_event_type_has_a_model() -> None:
    assert set(EVENT_MODELS) == set(EventType)
    assert {str(t) for t in EventType} == set(EXPECTED_CLASS)


def test_wire_vocabulary() -> None:
    assert [str(s) for s in Spot] == [
        "ante",
        "aa_bonus",
        "jackpot",
        "plus",
        "call",
        "flop_bet",
        "turn_bet",
    ]
    assert [str(o) for o in Outcome] == ["win", "lose", "push", "fold", "refund"]
    assert [str(g) for g in Game] == ["casino_holdem", "texas_holdem_plus"]
    assert [str(t) for t in Target] == ["player", "dealer", "board", "burn"]
    assert [str(s) for s in Stage] == ["preflop", "flop", "turn"]
    assert [str(a) for a in Action] == ["call", "fold", "bet", "check"]


def test_wire_vocabulary_matches_the_rules_core() -> None:
    import holdem

    pairs = [(Spot, holdem.Spot), (Outcome, holdem.Outcome), (Game, holdem.Game)]
    pairs += [(Stage, holdem.Stage), (Action, holdem.Action)]
    for wire, core in pairs:
        assert {str(v) for v in wire} == {str(v) for v in core}, wire.__name__
