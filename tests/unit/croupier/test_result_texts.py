"""A settlement result's message id is the UUID5 of its table, round, player and currency;
its outbox body carries its canonical text, and replay writes it as the json module does."""

from __future__ import annotations

import json
import uuid

from hypothesis import given
from hypothesis import strategies as st

from contract.canonical import Encoded, canonical_json
from croupier.settlement.replay import _result_line
from croupier.settlement.results import decided_result_messages, message_id, result_messages
from croupier.settlement.round import SETTLED

_NAMESPACE = uuid.UUID("5f0c1c1e-6a4d-4f51-9d7e-4b8f0e0d2a61")
_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=70)


@given(_TEXT, _TEXT, _TEXT, _TEXT)
def test_a_result_id_is_the_uuid5_of_its_names(
    table_id: str, round_id: str, player_id: str, currency: str
) -> None:
    name = f"{table_id}/{round_id}/{player_id}/{currency}"
    assert message_id(table_id, round_id, player_id, currency) == str(uuid.uuid5(_NAMESPACE, name))


def test_a_known_result_id_stays_what_it_was() -> None:
    # The id wallets have deduplicated on since the first release.
    assert message_id("ch-07", "r1", "p1", "EUR") == "32a22196-53b4-5951-b677-ccaed9c08cd7"


_ID = st.text(max_size=10)
_LINES = st.lists(
    st.fixed_dictionaries(
        {
            "bet_id": _ID,
            "player_id": st.sampled_from(["p1", "p2", "joueur-é", "\u2028"]),
            "box": _ID,
            "spot": st.sampled_from(["ante", "call", "aa_bonus"]),
            "stake": st.integers(min_value=0, max_value=2**53),
            "returned": st.integers(min_value=0, max_value=2**53),
            "outcome": st.sampled_from(["win", "lose", "push", "fold"]),
            "line": st.none() | _ID,
            "currency": st.sampled_from(["EUR", "GBP"]),
        }
    ),
    min_size=1,
    max_size=6,
)


@given(_LINES, _ID)
def test_a_decided_results_body_carries_its_canonical_text(
    lines: list[dict[str, object]], r: str
) -> None:
    data = {"event": {"table_id": 't"1', "round_id": r}, "results": lines}
    decided = decided_result_messages(SETTLED, data, "k")
    assert decided == result_messages(SETTLED, data, "k")
    for message in decided:
        assert type(message.body) is Encoded
        assert message.body.text == canonical_json(message.body)
        line = {**message.body, "ledger_position": 7}
        assert (
            _result_line(line) == json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        )
