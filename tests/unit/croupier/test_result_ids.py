"""A settlement result's message id is the UUID5 of its table, round, player and currency."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from croupier.results import message_id

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
