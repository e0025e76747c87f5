"""``read_event`` accepts and refuses exactly as ``parse_event``, with the same reasons, and
an accepted event's JSON form and canonical text are the model's, byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chaos.hostile import corpus, inside_rounds
from contract_examples import VALID, text
from hypothesis import given, settings
from hypothesis import strategies as st
from test_contract_errors import ALL_BAD

from contract.canonical import canonical_json
from contract.events import BetPlaced, RoundVoided, event_json, from_model, read_event
from contract.feed import ContractError, parse_event
from studio import StudioConfig, every_paytable, simulate


def same(raw: bytes | str) -> None:
    """``read_event`` and ``parse_event`` agree on ``raw``."""
    try:
        model = parse_event(raw)
    except ContractError as expected:
        with pytest.raises(ContractError) as caught:
            read_event(raw)
        got = caught.value
        assert (got.reasons, got.code, got.event_id, got.place) == (
            expected.reasons,
            expected.code,
            expected.event_id,
            expected.place,
        )
        return
    event = read_event(raw)
    form = model.model_dump(mode="json")
    dumped = event_json(event)
    assert dumped == form
    assert dumped.text == canonical_json(form)
    assert event == from_model(model)


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_valid_example(name: str) -> None:
    same(text(VALID[name]))
    same(text(VALID[name]).encode())


@pytest.mark.parametrize("case", ALL_BAD, ids=[case.id for case in ALL_BAD])
def test_every_refusal_has_the_models_reasons(case: Any) -> None:
    same(case.raw)


def test_the_hostile_corpus() -> None:
    messages = [m.body for m in corpus(7, "ev")]
    messages += [m.body for m in inside_rounds("ev").served]
    assert len(messages) > 100
    for raw in messages:
        same(raw)


@pytest.mark.parametrize("depth", [100, 10_000, 100_000])
def test_deep_nesting(depth: int) -> None:
    for field in ("payload", "table_id", "seq"):
        for opening in "[{":
            raw = json.dumps(VALID["bet.placed"])
            same(raw.replace(f'"{field}": ', f'"{field}": ' + opening * depth))


def test_a_studio_feed_of_every_pay_table() -> None:
    config = StudioConfig(tables=every_paytable(players=3), rounds=40, seed=11)
    for message in simulate(config):
        same(message.body)


def test_the_struct_holds_the_models_values() -> None:
    upper = dict(VALID["bet.placed"], event_id=VALID["bet.placed"]["event_id"].upper())
    event = read_event(text(upper))
    assert isinstance(event, BetPlaced)
    assert event.event_id == VALID["bet.placed"]["event_id"].lower() != upper["event_id"]
    void = read_event(text(VALID["round.voided"]))
    assert isinstance(void, RoundVoided)
    assert void.payload.reason == VALID["round.voided"]["payload"]["reason"]


_STAMP_PARTS = st.tuples(
    st.integers(0, 10_000),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 25),
    st.integers(0, 61),
    st.integers(0, 61),
    st.sampled_from(["", ".", ".0", ".000", ".5", ".000001", ".123456", ".1234567", ".999999999"]),
    st.sampled_from(["Z", "z", "+00:00", "-05:30", "+24:00", "", "Z\n"]),
    st.sampled_from(["T", "t", " "]),
)
_ODD = st.sampled_from(
    [
        None,
        True,
        0,
        -1,
        1.0,
        2**53,
        2**64,
        "",
        "t1\n",
        "a b",
        "A" * 65,
        "As",
        "ante",
        "jackpot",
        "call",
        "flop_bet",
        "player",
        "\u00e9",
        "0B6F1F8E-5A47-4C1E-9A4E-2F1D7C3B9A10",
        [],
        {},
        ["As", "As"],
        ["As", "Kd"],
    ]
)


def _stamp(parts: tuple[int, int, int, int, int, int, str, str, str]) -> str:
    year, month, day, hour, minute, second, fraction, zone, sep = parts
    return (
        f"{year:04d}-{month:02d}-{day:02d}{sep}{hour:02d}:{minute:02d}:{second:02d}{fraction}{zone}"
    )


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(VALID)), _STAMP_PARTS)
def test_any_timestamp(
    name: str, parts: tuple[int, int, int, int, int, int, str, str, str]
) -> None:
    same(json.dumps(dict(VALID[name], occurred_at=_stamp(parts))))


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(sorted(VALID)),
    st.data(),
    _ODD | st.text(max_size=6) | st.integers(-3, 3),
    st.booleans(),
)
def test_any_one_field_changed(name: str, data: st.DataObject, value: Any, drop: bool) -> None:
    event = json.loads(json.dumps(VALID[name]))
    payload = event["payload"]
    where = data.draw(st.sampled_from([event, payload]))
    field = data.draw(st.sampled_from([*where, "box", "bet_id", "amount", "extra"]))
    if drop:
        where.pop(field, None)
    else:
        where[field] = value
    same(json.dumps(event))
    same(json.dumps(event).replace(f'"{field}": ', f'"{field}": 1, "{field}": ', 1))


def test_the_common_form_is_read_without_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(raw: bytes | str) -> None:
        raise AssertionError("read by the models")

    monkeypatch.setattr("contract.events.parse_event", refuse)
    config = StudioConfig(tables=every_paytable(players=2), rounds=4, seed=3)
    for message in simulate(config):
        if b'"round.voided"' not in message.body:
            read_event(message.body)
