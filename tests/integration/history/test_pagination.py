"""A player's history pages stay stable while rounds arrive between two requests."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from history_rounds import settle, simple_round
from history_web import Web, web_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration

TABLE = "pg-1"


async def page(web: Web, cursor: str | None, limit: int = 3) -> Any:
    params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
    response = await web.client.get(
        "/v1/players/pager/rounds", headers=web.as_player("pager"), params=params
    )
    assert response.status_code == 200, response.text
    return response.json()


async def arrive(web: Web, first: int, count: int) -> None:
    feeds = [
        simple_round(TABLE, f"r{n:03d}", "pager", 100 + n) for n in range(first, first + count)
    ]
    await settle(web.ledger, feeds)
    await web.projector.catch_up()


async def test_pages_neither_repeat_nor_skip_rounds_while_new_ones_arrive(web: Web) -> None:
    await arrive(web, 0, 8)
    seen: list[str] = []
    cursor = None
    arrived = 8
    while True:
        body = await page(web, cursor)
        seen += [r["round_id"] for r in body["rounds"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
        await arrive(web, arrived, 2)  # two more settle between every two pages
        arrived += 2

    assert seen == [f"r{n:03d}" for n in range(7, -1, -1)]
    newest = await page(web, None, limit=100)
    assert [r["round_id"] for r in newest["rounds"]] == [
        f"r{n:03d}" for n in range(arrived - 1, -1, -1)
    ]
    assert [r["stake"] for r in newest["rounds"]][-1] == 100 + 2 * 100  # ante + call


async def test_the_last_page_has_no_cursor_and_a_full_walk_covers_every_round(web: Web) -> None:
    total = len((await page(web, None, limit=100))["rounds"])
    cursor, walked = None, 0
    for _ in range(total):
        body = await page(web, cursor, limit=4)
        walked += len(body["rounds"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert walked == total and cursor is None


async def test_a_round_settled_a_moment_ago_shows_within_a_second(web: Web) -> None:
    stop = asyncio.Event()
    following = asyncio.create_task(web.projector.follow(stop, idle=0.1))
    try:
        await settle(web.ledger, [simple_round(TABLE, "r-fresh", "fresh")])
        settled = time.perf_counter()
        while time.perf_counter() - settled < 5:
            response = await web.client.get(
                "/v1/players/fresh/rounds", headers=web.as_player("fresh")
            )
            if response.json()["rounds"]:
                break
            await asyncio.sleep(0.05)
        shown = time.perf_counter() - settled
    finally:
        stop.set()
        await following
    assert [r["round_id"] for r in response.json()["rounds"]] == ["r-fresh"]
    assert shown < 1.0, f"shown {shown:.2f}s after it settled"
