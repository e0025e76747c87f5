"""The output models: settlement results to wallets and replay rejections."""

from __future__ import annotations

import copy
import json
from enum import StrEnum
from typing import Any

import pytest
from contract_examples import SETTLEMENT
from pydantic import ValidationError

from contract.settlement import BetLine, RejectedLine, SettlementResult
from holdem import Outcome, Spot


def result(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(SETTLEMENT)
    data.update(changes)
    return data


def test_result_parses_from_json_and_round_trips() -> None:
    parsed = SettlementResult.model_validate_json(json.dumps(SETTLEMENT))
    assert parsed.bets[2].spot is Spot.CALL
    assert parsed.bets[0].outcome is Outcome.WIN
    assert json.loads(parsed.model_dump_json()) == SETTLEMENT


def test_result_accepts_the_rules_cores_own_enums() -> None:
    class CoreSpot(StrEnum):  # stands in for holdem's Spot: same strings, other class
        FLOP_BET = "flop_bet"

    class CoreOutcome(StrEnum):
        REFUND = "refund"

    line = BetLine(
        bet_id="b-4", spot=CoreSpot.FLOP_BET, stake=500, returned=500, outcome=CoreOutcome.REFUND
    )
    assert line.spot is Spot.FLOP_BET
    assert line.outcome is Outcome.REFUND


def test_stake_total_must_be_the_sum() -> None:
    with pytest.raises(ValidationError, match=r"stake_total: must equal the sum of bets\[\]"):
        SettlementResult.model_validate(result(stake_total=1500))


def test_returned_total_must_be_the_sum() -> None:
    with pytest.raises(ValidationError, match=r"returned_total: .* = 2000, got 2001"):
        SettlementResult.model_validate(result(returned_total=2001))


def test_a_bet_appears_once() -> None:
    bets = [*SETTLEMENT["bets"], SETTLEMENT["bets"][1]]
    with pytest.raises(ValidationError, match="each bet_id may appear once"):
        SettlementResult.model_validate(result(bets=bets, stake_total=1700))


def test_a_result_has_bets() -> None:
    with pytest.raises(ValidationError):
        SettlementResult.model_validate(result(bets=[], stake_total=0, returned_total=0))


@pytest.mark.parametrize(
    ("outcome", "stake", "returned"),
    [
        ("lose", 100, 100),
        ("fold", 100, 1),
        ("push", 100, 0),
        ("refund", 100, 200),
        ("win", 100, 100),
    ],
)
def test_returned_must_fit_the_outcome(outcome: str, stake: int, returned: int) -> None:
    line = {"bet_id": "b", "spot": "ante", "stake": stake, "returned": returned, "outcome": outcome}
    with pytest.raises(ValidationError, match="returned: must"):
        BetLine.model_validate_json(json.dumps(line))


@pytest.mark.parametrize(
    ("field", "value"),
    [("stake", 0), ("stake", 1.5), ("returned", -1), ("spot", "side"), ("outcome", "lost")],
)
def test_bet_line_values(field: str, value: object) -> None:
    line = {"bet_id": "b", "spot": "ante", "stake": 100, "returned": 0, "outcome": "lose"}
    line[field] = value
    with pytest.raises(ValidationError):
        BetLine.model_validate_json(json.dumps(line))


def test_rejection_line() -> None:
    rejection = RejectedLine(line=3, event_id=None, reason="not valid JSON (EOF)")
    assert json.loads(rejection.model_dump_json()) == {
        "line": 3,
        "event_id": None,
        "reason": "not valid JSON (EOF)",
    }
    with pytest.raises(ValidationError):
        RejectedLine(line=0, event_id="x", reason="r")
    with pytest.raises(ValidationError):
        RejectedLine(line=1, event_id="x", reason="")
