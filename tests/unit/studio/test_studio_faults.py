"""Each fault option produces its fault, and only that one."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from studio_checks import read_rounds

from contract.feed import ContractError, parse_event
from studio.config import ConfigError, Faults, StudioConfig, TableSpec, every_paytable
from studio.feed import FeedMessage, FeedTally, simulate

TABLES = (
    *every_paytable(players=6),
    TableSpec("studio-5-boxes", "casino-holdem/progressive", players=3, boxes=5),
    TableSpec("studio-6-boxes", "texas-holdem-plus/standard", players=7, boxes=7),
)
ROUNDS = 30


def faulty_feed(faults: Faults, seed: int = 1) -> list[FeedMessage]:
    return list(simulate(StudioConfig(TABLES, rounds=ROUNDS, seed=seed, faults=faults)))


def test_no_fault_unless_asked() -> None:
    messages = faulty_feed(Faults())
    assert all(m.fault is None for m in messages)
    assert all(view.defects() == set() for view in read_rounds(messages).values())


@pytest.mark.parametrize("kind", Faults.kinds())
def test_each_fault_option_gives_exactly_its_fault(kind: str) -> None:
    messages = faulty_feed(Faults.only(kind))
    rounds = read_rounds(messages)
    assert len(rounds) == ROUNDS
    for view in rounds.values():
        assert view.defects() == {kind}, view.round_id
    marked = Counter(m.fault for m in messages if m.fault)
    assert marked == {kind: ROUNDS}
    tally = FeedTally()
    for message in messages:
        tally.add(message)
    assert tally.total.faults == {kind: ROUNDS}


@pytest.mark.parametrize("kind", Faults.kinds())
def test_a_fault_rate_is_a_rate(kind: str) -> None:
    rounds = read_rounds(faulty_feed(Faults.only(kind, 0.3), seed=2)).values()
    hit = sum(1 for view in rounds if view.defects())
    assert 0 < hit < ROUNDS
    assert all(view.defects() <= {kind} for view in rounds)


def test_contract_faults_fail_the_contract_and_rule_faults_pass_it() -> None:
    torn = [m for m in faulty_feed(Faults.only("malformed")) if m.fault]
    for message in torn:
        with pytest.raises(ContractError, match="not valid JSON"):
            parse_event(message.body)
    bad = [m for m in faulty_feed(Faults.only("bad_card")) if m.fault]
    for message in bad:
        with pytest.raises(ContractError, match="cards"):
            parse_event(message.body)
    for kind in ("void", "duplicate_card", "missing_cards", "wrong_call", "late_bet"):
        for message in faulty_feed(Faults.only(kind)):
            parse_event(message.body)


def test_redelivery_is_the_same_event_later() -> None:
    messages = faulty_feed(Faults.only("redelivery"))
    first = {}
    for i, message in enumerate(messages):
        if message.fault == "redelivery":
            original = first[message.event_id]
            assert messages[original].body == message.body and original < i
        else:
            first.setdefault(message.event_id, i)


def test_void_has_a_reason_and_ends_the_round() -> None:
    for view in read_rounds(faulty_feed(Faults.only("void"))).values():
        last = view.in_seq_order()[-1]
        assert last["event_type"] == "round.voided" and last["payload"]["reason"].strip()
        assert not view.of_type("round.completed")
        assert len(view.of_type("bet.placed")) >= 1


def test_late_bet_is_valid_but_after_the_first_deal() -> None:
    for view in read_rounds(faulty_feed(Faults.only("late_bet"))).values():
        first_deal = view.of_type("cards.dealt")[0]["seq"]
        late = [e for e in view.of_type("bet.placed") if e["seq"] > first_deal]
        assert len(late) == 1 and late[0]["payload"]["spot"] == "ante"


def test_torn_line_is_followed_by_the_whole_event() -> None:
    messages = faulty_feed(Faults.only("malformed"))
    for i, message in enumerate(messages):
        if message.fault == "malformed":
            whole = next(m for m in messages[i + 1 :] if m.table_id == message.table_id)
            assert whole.body.startswith(message.body)
            assert whole.event_id == message.event_id and message.event is None
            with pytest.raises(ValueError):
                json.loads(message.body)


def test_fault_rates_must_be_rates() -> None:
    with pytest.raises(ConfigError):
        Faults(void=1.5)
    with pytest.raises(ConfigError):
        Faults.only("gremlins")


def test_a_round_voided_before_its_deal_takes_no_late_bet() -> None:
    """With void and late_bet both drawn, a round voided before any card is dealt has no
    betting to close: it is sent voided, without a late bet (no card to come after)."""
    messages = faulty_feed(Faults(void=0.5, late_bet=0.5))
    late = [m for m in messages if m.fault == "late_bet"]
    assert late, "some rounds take a late bet"
    for view in read_rounds(messages).values():
        assert view.defects() <= {"void", "late_bet"}, view.round_id
