"""``Encoded.plain`` gives byte for byte the canonical text the json module gives, and
the feed event's JSON form its model dump gives, whatever the text holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from contract_examples import VALID
from hypothesis import given
from hypothesis import strategies as st

from contract.canonical import Encoded, canonical_json, read_json
from contract.events import from_model, read_event
from contract.feed import EventType, RoundVoided, RoundVoidedPayload, parse_event
from croupier.settlement.round import received

_KEYS = st.text(max_size=8)
_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=16,
)


@given(st.dictionaries(_KEYS, _PLAIN, max_size=6))
def test_plain_is_the_canonical_json_of_a_value_without_floats(value: dict[str, Any]) -> None:
    encoded = Encoded.plain(value)
    assert encoded == value
    assert encoded.text == canonical_json(value)
    assert type(encoded) is Encoded


@pytest.mark.parametrize(
    "text",
    [
        '{"\\ud800":"lone"}',
        '{"k":"\\udfff"}',
        '{"k":"\\u0000\\u001f\\u007f\\u2028\\ud83d\\ude00"}',
        '{"z":1,"a":{"y":[],"b":{}},"é":"\\"\\\\"}',
    ],
)
def test_plain_of_surrogates_and_escapes(text: str) -> None:
    value = json.loads(text)
    encoded = Encoded.plain(value)
    assert encoded == value
    assert encoded.text == canonical_json(value)


_OFFSETS = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(minutes=-330))])


@given(
    st.sampled_from(sorted(VALID)),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2999, 1, 1)),
    _OFFSETS,
    st.text(min_size=1, max_size=40).filter(lambda r: r.strip() and r.isprintable()),
)
def test_an_events_json_form_is_its_model_dump(
    name: str, moment: datetime, zone: timezone, reason: str
) -> None:
    data = dict(VALID[name], occurred_at=moment.replace(tzinfo=zone).isoformat())
    data["event_id"] = data["event_id"].upper()
    if data["event_type"] == EventType.ROUND_VOIDED:
        data["payload"] = {"reason": reason}
    try:
        parsed = parse_event(json.dumps(data))
    except ValueError:
        return  # a reason the contract refuses
    dump = parsed.model_dump(mode="json")
    arrival = received(read_event(json.dumps(data)))
    assert arrival.dump == dump
    assert arrival.dump.text == canonical_json(dump)


def test_a_void_croupier_writes_itself_is_dumped_the_same() -> None:
    void = RoundVoided(
        event_id="0b6f1f8e-5a47-4c1e-9a4e-000000000001",
        event_type=EventType.ROUND_VOIDED,
        schema_version=1,
        table_id="ch-07",
        round_id="r1",
        seq=3,
        occurred_at=datetime(2024, 5, 1, 20, 0, 0, 123456, UTC),
        payload=RoundVoidedPayload(reason='voided by Croupier: "late" \\ après 2 s 😀'),
    )
    arrival = received(from_model(void))
    assert arrival.dump == void.model_dump(mode="json")
    assert arrival.dump.text == canonical_json(void.model_dump(mode="json"))


_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _FINITE | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=16,
)


@given(_JSON_VALUES)
def test_read_json_reads_what_the_json_module_reads(value: Any) -> None:
    for text in (canonical_json(value), json.dumps(value), json.dumps(value, indent=1)):
        got = read_json(text)
        assert got == json.loads(text) and canonical_json(got) == canonical_json(value)


@pytest.mark.parametrize(
    "text",
    ["1e400", "-1e400", "NaN", '"\\ud800"', '{"a":"\\udfff x"}', "123456789012345678901234567890"],
)
def test_read_json_takes_what_msgspec_refuses_as_the_json_module_does(text: str) -> None:
    want, got = json.loads(text), read_json(text)
    assert repr(got) == repr(want)
