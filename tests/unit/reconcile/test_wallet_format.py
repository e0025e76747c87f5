"""The wallet log reader: its verdict on each row agrees with the JSON Schema in contracts/,
and a bad row is reported with its line number and a reason, never skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from croupier.reconcile.wallet import BadRow, WalletFormatError, WalletRow, check_row, read_file

SCHEMA = json.loads(
    (Path(__file__).parents[3] / "contracts/wallet/wallet-transaction.schema.json").read_text()
)
DEBIT = {
    "transaction_id": "w1",
    "kind": "debit",
    "table_id": "t1",
    "round_id": "r1",
    "bet_id": "b1",
    "player_id": "p1",
    "currency": "EUR",
    "amount": 500,
    "occurred_at": "2024-05-01T20:15:00+02:00",
}
CREDIT = {**{k: v for k, v in DEBIT.items() if k not in ("table_id", "round_id", "bet_id")},
          "kind": "credit", "message_id": "m1"}  # fmt: skip
CASES: list[tuple[str, dict[str, Any]]] = [
    ("debit", DEBIT),
    ("credit", CREDIT),
    ("refund", {**CREDIT, "kind": "refund"}),
    ("stake refund", {**DEBIT, "kind": "refund"}),
    ("refund of nothing", {**DEBIT, "kind": "refund", "bet_id": None}),
    ("extra columns", {**DEBIT, "note": "ignored"}),
    ("unknown kind", {**DEBIT, "kind": "bonus"}),
    ("debit without bet", {k: v for k, v in DEBIT.items() if k != "bet_id"}),
    ("credit without message", {**CREDIT, "message_id": None}),
    ("zero amount", {**DEBIT, "amount": 0}),
    ("negative amount", {**CREDIT, "amount": -5}),
    ("fractional amount", {**CREDIT, "amount": 5.5}),
    ("amount as text", {**CREDIT, "amount": "500"}),
    ("lower-case currency", {**DEBIT, "currency": "eur"}),
    ("no offset", {**DEBIT, "occurred_at": "2024-05-01T20:15:00"}),
    ("no player", {**DEBIT, "player_id": ""}),
    ("huge id", {**DEBIT, "bet_id": "b" * 201}),
]


@pytest.mark.parametrize(("name", "row"), CASES, ids=[name for name, _ in CASES])
def test_the_reader_agrees_with_the_schema(name: str, row: dict[str, Any]) -> None:
    checked = check_row(7, row)
    as_json = {k: v for k, v in row.items() if v is not None}
    schema_ok = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.FormatChecker()
    ).is_valid(as_json)
    if name == "amount as text":  # CSV carries every field as text; JSON must not
        assert isinstance(checked, WalletRow) and not schema_ok
        return
    assert isinstance(checked, WalletRow) == schema_ok, checked
    if isinstance(checked, BadRow):
        assert checked.line == 7 and checked.reason


def test_times_become_utc() -> None:
    checked = check_row(1, DEBIT)
    assert isinstance(checked, WalletRow)
    assert checked.occurred_at == "2024-05-01T18:15:00.000000Z"


def test_csv_and_jsonl_report_bad_lines_by_number(tmp_path: Path) -> None:
    csv_file = tmp_path / "w.csv"
    csv_file.write_text(
        "transaction_id,kind,message_id,table_id,round_id,bet_id,player_id,currency,amount,"
        "occurred_at,note\n"
        "w1,credit,m1,,,,p1,EUR,100,2024-05-01T00:00:00Z,x\n"
        "w2,credit,m2,,,,p1,EUR,1e3,2024-05-01T00:00:00Z,x\n"
        'w3,"credit",m3,,,,p1,EUR,100,2024-05-01T00:00:00Z\n'
        "w4,debit,,t1,r1,b1,p1,EUR,100,yesterday,x\n"
    )
    rows = list(read_file(csv_file))
    assert isinstance(rows[0], WalletRow)
    assert [(r.line, r.reason.split()[0]) for r in rows[1:] if isinstance(r, BadRow)] == [
        (3, "amount"),
        (4, "10"),
        (5, "occurred_at"),
    ]
    jsonl = tmp_path / "w.jsonl"
    jsonl.write_text(json.dumps(CREDIT) + "\n\n{not json\n[1]\n" + json.dumps(DEBIT) + "\n")
    rows = list(read_file(jsonl))
    assert [type(r).__name__ for r in rows] == ["WalletRow", "BadRow", "BadRow", "WalletRow"]
    assert [r.line for r in rows] == [1, 3, 4, 5]


def test_a_kind_that_is_no_text_is_a_bad_row() -> None:
    for kind in (["debit"], {"debit": 1}, 1, None):
        checked = check_row(4, {**DEBIT, "kind": kind})
        assert isinstance(checked, BadRow) and checked.reason.startswith("kind must be one of")


def test_a_file_that_is_no_wallet_log_is_refused(tmp_path: Path) -> None:
    for name, text in (("w.txt", "x"), ("w.csv", ""), ("w.csv", "a,b\n1,2\n")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(WalletFormatError):
            list(read_file(path))


def test_jsonl_rows_json_forbids_are_bad_rows(tmp_path: Path) -> None:
    """What the json module would take but JSON forbids is a row that is not JSON, not a
    value for the checks (a lone surrogate would not even encode to be staged)."""
    good = json.dumps(DEBIT)
    forbidden = (
        good.replace("500", "NaN"),
        good.replace("500", "1e400"),
        good.replace('"p1"', '"\\ud800"'),
        good + " trailing",
    )
    jsonl = tmp_path / "w.jsonl"
    jsonl.write_text("\n".join((good, *forbidden, good)) + "\n")
    rows = list(read_file(jsonl))
    assert [type(r).__name__ for r in rows] == ["WalletRow", *["BadRow"] * 4, "WalletRow"]
    assert all(r.reason.startswith("not JSON: ") for r in rows if isinstance(r, BadRow))
    assert [r.line for r in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[0] == rows[-1]._replace(line=1)
