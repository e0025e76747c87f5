"""Round recall from a round's own ledger stream, and the pages' rendering, without services."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from history_rounds import TABLE_THP, boxes_round, settle, shared_round

from croupier.history.app import create_app, openapi_document
from croupier.history.auth import Authenticator
from croupier.history.recall import for_viewer, recall, why
from croupier.history.render import card, hand_name, money, signed
from croupier.history.store import BadCursor, Cursor
from croupier.history.viewer import Grant, Viewer
from croupier.ledger import open_ledger
from croupier.schemas import OPENAPI
from holdem import evaluate

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts"


async def test_recall_folds_every_fact_and_a_player_sees_only_their_part() -> None:
    async with open_ledger("sqlite:///:memory:") as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round()])
        facts = await ledger.read_stream(f"round:{TABLE_THP}:r-boxes")
    whole = recall(TABLE_THP, "r-boxes", facts)
    assert whole is not None
    assert [f.position for f in facts] == [t.position for t in whole.timeline]
    assert {b.box for b in whole.cards.boxes} == {"1", "2", "3"}
    assert sum(p.amount for p in whole.postings) == 0
    p3 = for_viewer(whole, Viewer(player_id="p3"))
    assert p3 is not None and [b.box for b in p3.cards.boxes] == ["2"]
    assert for_viewer(whole, Viewer(player_id="p2")) is None
    staff = for_viewer(whole, Viewer(role="support"))
    assert staff is not None and staff.verification is not None
    assert staff.verification.positions == [] and staff.verification.hashes == []
    audit = for_viewer(whole, Viewer(role="compliance", grants=frozenset(Grant)))
    assert audit is not None and audit.verification is not None
    assert audit.verification.head_hash == facts[-1].hash


def test_an_empty_stream_is_no_round() -> None:
    assert recall("t", "r", []) is None


WHY = [
    (("ante", "win", "flush", 2), "Ante won: Flush pays 2 to 1"),
    (
        ("call", "push", "dealer_does_not_qualify", None),
        "Call push, stake returned: the dealer does not qualify",
    ),
    (
        ("jackpot", "win", "royal_flush", None),
        "Jackpot won: Royal flush, a share of the jackpot meter",
    ),
    (("aa_bonus", "lose", None, None), "AA Bonus lost"),
]


@pytest.mark.parametrize(("args", "text"), WHY)
def test_why_says_what_was_paid_and_why(
    args: tuple[str, str, str | None, int | None], text: str
) -> None:
    assert why(*args) == text


def test_cards_are_coloured_by_suit_and_read_out_in_full() -> None:
    assert 'class="card red"' in card("Qh") and 'aria-label="Queen of hearts"' in card("Qh")
    assert 'class="card black"' in card("Tc") and ">10\N{BLACK CLUB SUIT}<" in card("Tc")
    assert "<script>" not in card("<script>")


@pytest.mark.parametrize(
    ("recorded", "said"),
    [
        ("Flush, Queen, Ten, Nine, Seven, Two", "Flush, Queen high"),
        ("High Card, Ace, Jack, Ten, Seven, Four", "Ace high"),
        ("Pair of Kings, Ace, Nine and Seven kickers", "Pair of Kings"),
        ("Two Pair, Queens and Nines, Five kicker", "Two Pair, Queens and Nines"),
        ("Three of a Kind, Aces, Jack and Ten kickers", "Three of a Kind, Aces"),
        ("Four of a Kind, Sixes, King kicker", "Four of a Kind, Sixes"),
        ("Straight, Nine high", "Straight, Nine high"),
        ("Full House, Kings full of Fives", "Full House, Kings full of Fives"),
        ("Royal Flush", "Royal Flush"),
    ],
)
def test_hand_names_are_what_players_say(recorded: str, said: str) -> None:
    assert hand_name(recorded) == said


def test_every_hand_the_evaluator_describes_gets_a_name() -> None:
    for cards in ("Qh Th 9h 7h 2h", "As Ac Kd Kh 2c", "2c 3d 4h 5s 6c", "Ah Kd 9c 7s 3h"):
        described = evaluate(cards).description
        assert hand_name(described).split(" ")[0].rstrip(",") in described


def test_money_is_minor_units_without_floats() -> None:
    assert money(123456, "EUR") == "1,234.56 EUR"
    assert money(-5, "EUR") == "-0.05 EUR"
    assert money(1500, "JPY") == "1,500 JPY"
    assert signed(250, "EUR") == "+2.50 EUR"


def test_cursors_round_trip_and_foreign_ones_are_refused() -> None:
    cursor = Cursor(1234, "EUR")
    assert Cursor.decode(cursor.encode()) == cursor
    for bad in ("", "!!", "MTIzNA", Cursor(-1).encode(), "eHl6OkVVUg"):
        with pytest.raises(BadCursor):
            Cursor.decode(bad)


def test_the_checked_in_openapi_document_is_what_the_service_serves() -> None:
    checked_in = json.loads((CONTRACTS / OPENAPI).read_text())
    assert checked_in == openapi_document()
    paths = checked_in["paths"]
    assert {"/v1/rounds/{table_id}/{round_id}", "/v1/players/{player_id}/rounds"} <= set(paths)
    schemes = checked_in["components"]["securitySchemes"]
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    assert schemes["APIKeyHeader"]["name"] == "X-Staff-Key"


async def test_openapi_json_is_served() -> None:
    from croupier.history.postgres import PostgresHistory

    app = create_app(PostgresHistory("postgresql://openapi.invalid/none"), Authenticator(b"k" * 32))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w") as c:
        response = await c.get("/openapi.json")
    assert response.status_code == 200
    assert response.json() == openapi_document()
