"""The ledger's encoding of a fact's data is byte for byte its canonical JSON, spliced or not."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contract.canonical import Encoded, canonical_json
from contract.codes import RejectionCode
from croupier.ledger.encoding import data_text

_KEYS = st.text(min_size=1, max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)


def _maybe_encoded(value: Any, encode: bool) -> Any:
    return Encoded(value) if encode and isinstance(value, dict) else value


@given(st.dictionaries(_KEYS, st.tuples(_JSON, st.booleans()), max_size=6))
def test_data_text_is_the_canonical_json(members: dict[str, tuple[Any, bool]]) -> None:
    data = {key: _maybe_encoded(value, encode) for key, (value, encode) in members.items()}
    assert data_text(data) == canonical_json(data)


def test_an_event_fact_splices_the_events_text() -> None:
    event = Encoded({"event_id": "e1", "seq": 1, "payload": {"amount": 500, "spot": "ante"}})
    data = {"event": event, "fingerprint": "ab" * 16, "code": "late", "reason": "après 2 s"}
    assert data_text(data) == canonical_json(data)
    assert event.text in data_text(data)


_PLAIN_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
_PLAIN = st.recursive(
    _PLAIN_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)


@given(st.dictionaries(_KEYS, st.tuples(_PLAIN, st.booleans()), max_size=6))
def test_data_encoded_whole_is_its_canonical_json(members: dict[str, tuple[Any, bool]]) -> None:
    data = {key: _maybe_encoded(value, encode) for key, (value, encode) in members.items()}
    whole = Encoded.plain(data)
    assert whole == data
    assert data_text(whole) == canonical_json(data)


def test_a_rejection_code_is_written_as_its_text() -> None:
    data = {"code": RejectionCode.SEQ_TAKEN, "event": Encoded({"b": [1, None], "a": "é"})}
    assert data_text(Encoded.plain(data)) == canonical_json(data)
