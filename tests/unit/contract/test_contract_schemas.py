"""The checked-in JSON Schemas are current, valid, and agree with the models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from contract_examples import SETTLEMENT, VALID
from jsonschema import Draft202012Validator
from test_contract_errors import BROKEN_FIELDS, Bad

from croupier.schemas import OPENAPI, check_schemas, expected_files, write_schemas

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts"


def validator(relative: str) -> Draft202012Validator:
    schema = json.loads((CONTRACTS / relative).read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_committed_schemas_are_up_to_date() -> None:
    stale = check_schemas(CONTRACTS)
    assert not stale, (
        "contracts/ does not match the models in the contract package: "
        + ", ".join(stale)
        + ". Run `make contracts` and commit the result."
    )


def test_generation_is_deterministic(tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in write_schemas(tmp_path)}
    second = {p.name: p.read_bytes() for p in write_schemas(tmp_path)}
    assert first == second
    assert all(body.endswith(b"}\n") and b'\n  "' in body for body in first.values())
    assert check_schemas(tmp_path) == []


def test_check_reports_missing_changed_and_stale_files(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    (tmp_path / "feed/bet.placed.schema.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "feed/round.opened.schema.json").unlink()
    (tmp_path / "feed/bet.cancelled.schema.json").write_text("{}\n", encoding="utf-8")
    assert check_schemas(tmp_path) == [
        "feed/bet.placed.schema.json (out of date)",
        "feed/round.opened.schema.json (missing)",
        "feed/bet.cancelled.schema.json (no longer generated)",
    ]
    write_schemas(tmp_path)
    assert check_schemas(tmp_path) == []
    assert not (tmp_path / "feed/bet.cancelled.schema.json").exists()


@pytest.mark.parametrize("relative", sorted(set(expected_files()) - {OPENAPI}))
def test_each_schema_is_valid_draft_2020_12(relative: str) -> None:
    schema = json.loads((CONTRACTS / relative).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_events_validate_against_the_schemas(name: str) -> None:
    event: dict[str, Any] = VALID[name]
    validator("feed/event.schema.json").validate(event)
    validator(f"feed/{event['event_type']}.schema.json").validate(event)


CAN_TELL = [case for case in BROKEN_FIELDS if case.schema_can_tell]


@pytest.mark.parametrize("case", CAN_TELL, ids=[case.id for case in CAN_TELL])
def test_events_the_models_reject_the_schema_rejects(case: Bad) -> None:
    event = json.loads(case.raw)
    assert not validator("feed/event.schema.json").is_valid(event)


def test_settlement_result_validates_against_its_schema() -> None:
    validator("settlement/settlement-result.schema.json").validate(SETTLEMENT)
    assert not validator("settlement/settlement-result.schema.json").is_valid(
        {**SETTLEMENT, "currency": "eur"}
    )


def test_rejection_validates_against_its_schema() -> None:
    check = validator("replay/rejection.schema.json")
    check.validate({"line": 7, "event_id": None, "reason": "not valid JSON"})
    assert not check.is_valid({"line": 0, "event_id": None, "reason": "x"})


def test_contracts_command_writes_and_checks(tmp_path: Path) -> None:
    from croupier.cli import main

    assert main(["contracts", "--out", str(tmp_path)]) == 0
    assert main(["contracts", "--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "replay/rejection.schema.json").write_text("{}\n", encoding="utf-8")
    assert main(["contracts", "--out", str(tmp_path), "--check"]) == 1
