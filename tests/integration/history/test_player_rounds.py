"""``GET /v1/players/{player}/rounds`` and ``/v1/tables/{table}/rounds`` from the read model."""

from __future__ import annotations

import sqlite3
from typing import Any

import asyncpg
import pytest
from history_rounds import TABLE_CH, TABLE_THP
from history_web import Web, web_fixture  # noqa: F401  (the fixture)

from croupier.history.postgres import PostgresHistory
from croupier.history.sqlite import SqliteHistory

pytestmark = pytest.mark.integration


async def rounds_of(web: Web, player: str, headers: dict[str, str], **query: Any) -> Any:
    response = await web.client.get(f"/v1/players/{player}/rounds", headers=headers, params=query)
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_player_sees_their_rounds_newest_first_with_wagers_decisions_and_net(
    web: Web,
) -> None:
    body = await rounds_of(web, "p1", web.as_player("p1"))

    assert [(r["table_id"], r["round_id"]) for r in body["rounds"]] == [
        (TABLE_CH, "r-void"),
        (TABLE_THP, "r-boxes"),
        (TABLE_CH, "r-shared"),
    ]
    positions = [r["position"] for r in body["rounds"]]
    assert positions == sorted(positions, reverse=True)
    void, boxes, shared = body["rounds"]
    assert (void["status"], void["net"]) == ("voided", 0)
    assert (boxes["game"], boxes["stake"], boxes["returned"], boxes["net"]) == (
        "texas_holdem_plus",
        700,
        1300,
        600,
    )
    assert {w["box"] for w in boxes["wagers"]} == {"1", "3"}
    assert [(d["box"], d["stage"], d["action"]) for d in boxes["decisions"]] == [
        ("1", "preflop", "call"),
        ("3", "preflop", "call"),
        ("1", "flop", "check"),
        ("3", "flop", "bet"),
    ]
    assert shared["net"] == 2400 and shared["game"] == "casino_holdem"
    assert {w["bet_id"]: w["why"] for w in shared["wagers"]}["b1"] == (
        "AA Bonus won: Flush pays 20 to 1"
    )
    assert body["next_cursor"] is None


async def test_in_a_shared_hand_each_player_sees_only_their_own_wagers(web: Web) -> None:
    p2 = await rounds_of(web, "p2", web.as_player("p2"))
    p3 = await rounds_of(web, "p3", web.as_player("p3"))

    [shared] = p2["rounds"]
    assert [(w["bet_id"], w["player_id"]) for w in shared["wagers"]] == [("a2", "p2")]
    assert [d["action"] for d in shared["decisions"]] == ["fold"]
    [boxes] = p3["rounds"]
    assert [w["box"] for w in boxes["wagers"]] == ["2"]
    assert [(d["box"], d["action"]) for d in boxes["decisions"]] == [("2", "fold")]


async def test_another_players_history_is_404_and_staff_see_any(web: Web) -> None:
    other = await web.client.get("/v1/players/p2/rounds", headers=web.as_player("p1"))
    assert other.status_code == 404 and other.json() == {"detail": "round not found"}
    for headers in (web.as_support(), web.as_compliance()):
        body = await rounds_of(web, "p2", headers)
        assert [r["round_id"] for r in body["rounds"]] == ["r-shared"]


async def test_a_history_without_a_token_is_401(web: Web) -> None:
    assert (await web.client.get("/v1/players/p1/rounds")).status_code == 401


async def test_a_players_empty_history_and_foreign_cursors(web: Web) -> None:
    body = await rounds_of(web, "p-new", web.as_player("p-new"))
    assert body == {"player_id": "p-new", "rounds": [], "next_cursor": None}
    bad = await web.client.get(
        "/v1/players/p1/rounds", headers=web.as_player("p1"), params={"cursor": "bm9wZQ"}
    )
    assert bad.status_code == 400
    huge = await web.client.get(
        "/v1/players/p1/rounds", headers=web.as_player("p1"), params={"limit": 1000}
    )
    assert huge.status_code == 422


async def test_staff_list_a_tables_rounds_and_players_may_not(web: Web) -> None:
    response = await web.client.get(f"/v1/tables/{TABLE_CH}/rounds", headers=web.as_support())
    assert response.status_code == 200
    assert [(r["round_id"], r["status"]) for r in response.json()["rounds"]] == [
        ("r-void", "voided"),
        ("r-shared", "settled"),
    ]
    player = await web.client.get(f"/v1/tables/{TABLE_CH}/rounds", headers=web.as_player("p1"))
    assert player.status_code == 404


async def test_the_service_reads_as_a_role_that_cannot_write(web: Web) -> None:
    if not isinstance(web.store, PostgresHistory):
        assert isinstance(web.store, SqliteHistory)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            web.store._connect().execute("DELETE FROM history_rounds")
        return
    pool = await web.store.pool()
    with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError):
        await pool.execute("INSERT INTO history_decisions VALUES ('t','r','a','s','x',NULL,NULL,1)")
    async with pool.acquire() as conn:
        await conn.execute("SET default_transaction_read_only = off")
        for statement in (
            "INSERT INTO history_decisions VALUES ('t','r','a','s','x',NULL,NULL,1)",
            "DELETE FROM history_player_rounds",
            "UPDATE history_rounds SET status = 'x'",
            "INSERT INTO outbox (message_id, position, exchange, routing_key, body) "
            "VALUES ('m', 1, 'e', 'k', '{}')",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
        await conn.execute("RESET default_transaction_read_only")


async def test_no_endpoint_writes(web: Web) -> None:
    document = (await web.client.get("/openapi.json")).json()
    methods = {method for path in document["paths"].values() for method in path}
    assert methods == {"get"}
    for method in ("post", "put", "patch", "delete"):
        response = await web.client.request(method, "/v1/players/p1/rounds")
        assert response.status_code == 405
