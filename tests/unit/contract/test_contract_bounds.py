"""Hostile input: every field bounded, any bytes at all end in a rejection with a code.

What the contract accepts can be stored (no NUL or control characters anywhere), routed
(``<currency>.<player_id>`` fits AMQP's 255-byte short string with room to spare) and
published; what it refuses is a ContractError with a code, never another exception.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from contract_examples import VALID

from contract.codes import RejectionCode
from contract.feed import ID_PATTERN, MAX_BODY_BYTES, ContractError, parse_event

ROOT = Path(__file__).resolve().parents[3]


def with_payload(kind: str, **fields: Any) -> bytes:
    event = json.loads(json.dumps(VALID[kind]))
    event["payload"].update(fields)
    return json.dumps(event).encode()


def with_envelope(kind: str, **fields: Any) -> bytes:
    event = json.loads(json.dumps(VALID[kind]))
    event.update(fields)
    return json.dumps(event).encode()


def refused(raw: bytes) -> ContractError:
    with pytest.raises(ContractError) as caught:
        parse_event(raw)
    return caught.value


HOSTILE_FIELDS = {
    "300-byte player_id": with_payload("bet.placed", player_id="p" * 300),
    "65-character player_id": with_payload("bet.placed", player_id="p" * 65),
    "NUL in player_id": with_payload("bet.placed", player_id="p\u0000"),
    "newline in player_id": with_payload("bet.placed", player_id="p\n1"),
    "non-ASCII player_id": with_payload("bet.placed", player_id="p\u00e9"),
    "space in bet_id": with_payload("bet.placed", bet_id="b 1"),
    "NUL in box": with_payload("bet.placed", box="\u0000"),
    "NUL in void reason": with_payload("round.voided", reason="misdeal\u0000"),
    "escape in void reason": with_payload("round.voided", reason="\u001b[31m"),
    "C1 control in void reason": with_payload("round.voided", reason="a\u0085b"),
    "501-character void reason": with_payload("round.voided", reason="x" * 501),
    "seq 2**70": with_envelope("bet.placed", seq=2**70),
    "seq over the limit": with_envelope("bet.placed", seq=1_000_001),
    "amount 2**60": with_payload("bet.placed", amount=2**60),
    "six cards in one event": with_payload(
        "cards.dealt/board", cards=["2c", "3c", "4c", "5c", "6c", "7c"]
    ),
    "pay table id of 100 characters": with_payload("round.opened", paytable="a/" + "b" * 98),
    "NUL in pay table id": with_payload("round.opened", paytable="casino-holdem/\u0000"),
}


@pytest.mark.parametrize("raw", HOSTILE_FIELDS.values(), ids=HOSTILE_FIELDS.keys())
def test_an_unbounded_field_is_a_contract_rejection(raw: bytes) -> None:
    assert refused(raw).code is RejectionCode.CONTRACT


HOSTILE_BODIES = {
    "deep objects (100,000)": (b'{"a":' * 100_000, RejectionCode.TOO_LARGE),
    "deep objects within the size limit": (b'{"a":' * 3000, RejectionCode.NOT_JSON),
    "deep arrays within the size limit": (b"[" * 5000 + b"]" * 5000, RejectionCode.NOT_JSON),
    "deep payload": (
        with_envelope("round.completed", payload=json.loads("[" * 150 + "]" * 150)),
        RejectionCode.CONTRACT,
    ),
    "one byte over the size limit": (b" " * MAX_BODY_BYTES + b"{}", RejectionCode.TOO_LARGE),
    "not UTF-8": (b"\xff\xfe{}", RejectionCode.NOT_JSON),
    "lone surrogate escape": (b'{"event_id": "\\ud800"}', RejectionCode.NOT_JSON),
    "a NUL byte": (b"\x00", RejectionCode.NOT_JSON),
    "empty": (b"", RejectionCode.NOT_JSON),
    "a number of 5,000 digits": (b"1" * 5000, RejectionCode.NOT_JSON),
    "NaN where an event should be": (b'{"seq": NaN}', RejectionCode.CONTRACT),
}


@pytest.mark.parametrize(("raw", "code"), HOSTILE_BODIES.values(), ids=list(HOSTILE_BODIES.keys()))
def test_any_bytes_end_in_a_coded_rejection(raw: bytes, code: RejectionCode) -> None:
    error = refused(raw)
    assert error.code is code
    assert str(error)


def test_the_longest_accepted_ids_route_and_store() -> None:
    longest = "p" * 64
    event = parse_event(with_payload("bet.placed", player_id=longest, bet_id=longest, box=longest))
    routing_key = f"{event.payload.currency}.{event.payload.player_id}"  # type: ignore[union-attr]
    assert len(routing_key.encode()) <= 128 < 255
    assert re.fullmatch(ID_PATTERN[1:-1], longest)


def test_a_rejection_keeps_a_uuid_event_id_only() -> None:
    assert refused(with_payload("bet.placed", player_id="\u0000")).event_id is not None
    assert refused(with_envelope("bet.placed", event_id="x" * 300)).event_id is None


# -- the codes, listed once ------------------------------------------------------------------


def test_the_feed_page_lists_every_code_in_order() -> None:
    page = (ROOT / "docs" / "feed.md").read_text(encoding="utf-8")
    section = page.split("\n## Rejection codes\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)
    assert listed == [str(code) for code in RejectionCode]


def test_the_asyncapi_document_lists_every_code_in_order() -> None:
    doc = yaml.safe_load((ROOT / "contracts" / "asyncapi.yaml").read_text(encoding="utf-8"))
    codes = doc["components"]["schemas"]["rejectionCode"]["enum"]
    assert codes == [str(code) for code in RejectionCode]
