"""``GET /v1/rounds/{table}/{round}`` for every role, on rounds of both games."""

from __future__ import annotations

from typing import Any

import pytest
from history_rounds import TABLE_CH, TABLE_JACKPOT, TABLE_THP
from history_web import Web, player_token, web_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration

SHARED = f"/v1/rounds/{TABLE_CH}/r-shared"
BOXES = f"/v1/rounds/{TABLE_THP}/r-boxes"
VOIDED = f"/v1/rounds/{TABLE_CH}/r-void"


async def get(web: Web, path: str, headers: dict[str, str]) -> dict[str, Any]:
    response = await web.client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def player_ids(body: dict[str, Any]) -> set[str]:
    """Every player id anywhere in the answer."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key == "player_id" and inner is not None:
                    found.add(inner)
                elif key == "account" and str(inner).startswith("player:"):
                    found.add(str(inner).removeprefix("player:"))
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(body)
    return found


async def test_a_player_in_a_shared_hand_sees_the_cards_and_only_their_own_wagers(
    web: Web,
) -> None:
    body = await get(web, SHARED, web.as_player("p1"))

    assert body["game"] == "casino_holdem"
    assert body["paytable"]["id"] == "casino-holdem/classic"
    assert body["status"] == "settled"
    cards = body["cards"]
    assert cards["dealer"] == ["As", "Kd"]
    assert cards["board"] == ["2h", "7h", "9h", "Kc", "3d"]
    assert cards["burns"] == ["4c"]
    assert cards["boxes"] == [
        {"box": "main", "cards": ["Qh", "Th"], "hand": "Flush, Queen, Ten, Nine, Seven, Two"}
    ]
    assert cards["dealer_hand"] == "Pair of Kings, Ace, Nine and Seven kickers"
    assert {w["bet_id"] for w in body["wagers"]} == {"a1", "b1", "c1"}
    paid = {r["bet_id"]: (r["stake"], r["returned"], r["why"]) for r in body["results"]}
    assert paid == {
        "a1": (100, 300, "Ante won: Flush pays 2 to 1"),
        "b1": (100, 2100, "AA Bonus won: Flush pays 20 to 1"),
        "c1": (200, 400, "Call won: beats the dealer's hand, pays 1 to 1"),
    }
    assert body["totals"] == [
        {"player_id": "p1", "currency": "EUR", "stake": 400, "returned": 2800, "net": 2400}
    ]
    assert player_ids(body) == {"p1"}
    assert body["postings"] == [] and body["jackpot"] == []
    check = body["verification"]
    assert check["positions"] == [] and check["hashes"] == []
    assert check["head_position"] == body["closed_position"]
    assert "give support the round ID and this reference" in check["how"]
    assert all(t["hash"] is None and t["fact"] != "feed.rejected" for t in body["timeline"])


async def test_the_other_player_of_the_shared_hand_sees_their_fold_and_nothing_of_p1(
    web: Web,
) -> None:
    body = await get(web, SHARED, web.as_player("p2"))

    assert player_ids(body) == {"p2"}
    assert [(r["bet_id"], r["outcome"], r["returned"]) for r in body["results"]] == [
        ("a2", "fold", 0)
    ]
    assert [d["action"] for d in body["decisions"]] == ["fold"]
    assert body["cards"]["boxes"][0]["cards"] == ["Qh", "Th"]  # one shared hand
    assert not any("p1" in str(t) for t in body["timeline"])


async def test_a_player_on_two_boxes_sees_both_and_not_the_third_players_box(web: Web) -> None:
    body = await get(web, BOXES, web.as_player("p1"))

    assert body["game"] == "texas_holdem_plus"
    assert [(b["box"], b["cards"], b["hand"]) for b in body["cards"]["boxes"]] == [
        ("1", ["As", "Ad"], "Three of a Kind, Aces, Jack and Ten kickers"),
        ("3", ["Kh", "Qh"], "Royal Flush"),
    ]
    assert player_ids(body) == {"p1"}
    assert {r["bet_id"] for r in body["results"]} == {"a1", "c1", "a4", "c4", "f4"}
    assert body["totals"][0]["net"] == 600
    decisions = [(d["box"], d["stage"], d["action"]) for d in body["decisions"]]
    assert decisions == [
        ("1", "preflop", "call"),
        ("3", "preflop", "call"),
        ("1", "flop", "check"),
        ("3", "flop", "bet"),
    ]


async def test_a_player_of_one_box_sees_only_that_box(web: Web) -> None:
    body = await get(web, BOXES, web.as_player("p3"))

    assert [b["box"] for b in body["cards"]["boxes"]] == ["2"]
    assert player_ids(body) == {"p3"}
    for other_boxes_card in ("As", "Ad", "Kh", "Qh"):  # boxes 1 and 3 are p1's
        assert other_boxes_card not in str(body)
    assert {t["box"] for t in body["timeline"]} <= {"2", None}
    assert body["totals"] == [
        {"player_id": "p3", "currency": "EUR", "stake": 100, "returned": 0, "net": -100}
    ]


async def test_a_voided_round_shows_the_refund(web: Web) -> None:
    body = await get(web, VOIDED, web.as_player("p1"))

    assert body["status"] == "voided" and body["void_reason"] == "misdeal"
    assert [(r["outcome"], r["stake"], r["returned"]) for r in body["results"]] == [
        ("refund", 300, 300)
    ]


@pytest.mark.parametrize("path", [SHARED, BOXES, VOIDED])
async def test_support_sees_every_wager_but_no_rejections_or_hashes(web: Web, path: str) -> None:
    body = await get(web, path, web.as_support())

    facts = {t["fact"] for t in body["timeline"]}
    assert "feed.rejected" not in facts and "feed.held" not in facts
    assert all(t["hash"] is None and t["prev_hash"] is None for t in body["timeline"])
    check = body["verification"]
    assert check["positions"] == [] and check["hashes"] == []  # the digest, not each hash
    assert "croupier verify --read-models" in check["how"]
    assert sum(p["amount"] for p in body["postings"]) == 0  # balanced to the unit
    results = sum(r["returned"] for r in body["results"])
    assert results == sum(t["returned"] for t in body["totals"])


async def test_support_sees_every_player_of_a_shared_hand(web: Web) -> None:
    body = await get(web, SHARED, web.as_support())

    assert player_ids(body) == {"p1", "p2"}
    assert {w["bet_id"] for w in body["wagers"]} == {"a1", "b1", "a2", "c1"}


async def test_compliance_sees_rejections_with_reasons_and_hashes_to_verify(web: Web) -> None:
    body = await get(web, SHARED, web.as_compliance())

    rejected = [t for t in body["timeline"] if t["fact"] == "feed.rejected"]
    assert [(t["code"], t["seq"]) for t in rejected] == [("wrong_wager_size", 10)]
    assert "2x the ante" in rejected[0]["reason"]
    facts = await web.ledger.read_stream(f"round:{TABLE_CH}:r-shared")
    assert [(t["position"], t["hash"], t["prev_hash"]) for t in body["timeline"]] == [
        (f.position, f.hash, f.prev_hash) for f in facts
    ]
    check = body["verification"]
    assert check["positions"] == [f.position for f in facts]
    assert check["hashes"] == [f.hash for f in facts]
    assert check["head_position"] == facts[-1].position
    assert f"croupier verify --anchor {facts[-1].position}:{facts[-1].hash}" in check["how"]
    assert player_ids(body) == {"p1", "p2"}


async def test_compliance_sees_both_games(web: Web) -> None:
    for path, game in [(SHARED, "casino_holdem"), (BOXES, "texas_holdem_plus")]:
        body = await get(web, path, web.as_compliance())
        assert body["game"] == game
        assert body["closed_position"] == body["verification"]["head_position"]


async def test_staff_see_the_jackpot_meter_move_and_a_player_sees_only_their_win(
    web: Web,
) -> None:
    path = f"/v1/rounds/{TABLE_JACKPOT}/r-jackpot"
    staff = await get(web, path, web.as_compliance())
    [meter] = staff["jackpot"]
    assert (meter["currency"], meter["before"], meter["contributed"], meter["awarded"]) == (
        "EUR",
        5_000_000,
        40,
        0,
    )
    assert meter["after"] == meter["before"] + meter["contributed"]
    jackpot = [p["amount"] for p in staff["postings"] if p["account"] == "jackpot"]
    assert jackpot == [40] and sum(p["amount"] for p in staff["postings"]) == 0

    p4 = await get(web, path, web.as_player("p4"))
    assert p4["jackpot"] == [] and p4["postings"] == []
    assert player_ids(p4) == {"p4"}
    won = {r["bet_id"]: (r["returned"], r["why"]) for r in p4["results"]}
    assert won["j4"] == (5100, "Jackpot won: Flush pays 50 to 1")


# -- who may not see -----------------------------------------------------------------------


async def test_no_token_is_401(web: Web) -> None:
    response = await web.client.get(SHARED)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_an_expired_token_is_401(web: Web) -> None:
    token = player_token("p1", expires_in=-60)
    response = await web.client.get(SHARED, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json() == {"detail": "the token has expired"}


async def test_a_tampered_token_is_401(web: Web) -> None:
    header, claims, signature = player_token("p1").split(".")
    forged = player_token("p2").split(".")[1]  # p2's claims under p1's signature
    for token in (f"{header}.{forged}.{signature}", f"{header}.{claims}.{signature[:-4]}AAAA"):
        response = await web.client.get(SHARED, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, token


async def test_a_token_signed_with_another_secret_or_none_is_401(web: Web) -> None:
    import jwt

    other = player_token("p1", secret="another secret of thirty-two bytes or more!!")
    unsigned = jwt.encode({"sub": "p1", "exp": 2**40}, key=None, algorithm="none")
    for token in (other, unsigned, "not-a-jwt"):
        response = await web.client.get(SHARED, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, token


async def test_a_token_without_expiry_is_401(web: Web) -> None:
    import jwt
    from history_web import SECRET

    token = jwt.encode({"sub": "p1"}, SECRET, algorithm="HS256")
    response = await web.client.get(SHARED, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


async def test_an_unknown_staff_key_is_401(web: Web) -> None:
    response = await web.client.get(SHARED, headers={"X-Staff-Key": "guess"})
    assert response.status_code == 401


async def test_a_round_the_player_was_not_in_is_the_same_404_as_no_round(web: Web) -> None:
    not_in = await web.client.get(BOXES, headers=web.as_player("p2"))
    missing = await web.client.get(f"/v1/rounds/{TABLE_THP}/r-nope", headers=web.as_player("p2"))
    probing = await web.client.get(f"/v1/rounds/{TABLE_CH}/r-boxes", headers=web.as_player("p3"))

    for response in (not_in, missing, probing):
        assert response.status_code == 404
        assert response.json() == {"detail": "round not found"}
    assert not_in.content == missing.content
    assert dict(not_in.headers) == dict(missing.headers)


async def test_a_malformed_round_id_reveals_nothing_either(web: Web) -> None:
    response = await web.client.get(f"/v1/rounds/{TABLE_CH}/r%20x", headers=web.as_player("p1"))
    assert response.status_code == 404
