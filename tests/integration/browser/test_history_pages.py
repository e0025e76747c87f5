"""The history pages in a real headless Chromium, served by uvicorn over PostgreSQL.

Checks what a person sees (cards with their suits in colour, amounts, hand names) on a
phone-sized window, and keeps screenshots under ``artifacts/browser/``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from history_browser import browser_fixture, screenshot  # noqa: F401  (the fixture)
from history_rounds import TABLE_CH, TABLE_THP, boxes_round, settle, shared_round, voided_round
from history_web import authenticator, player_token
from integration.conftest import scratch_database
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from croupier.commands.web import web_server
from croupier.history.store import open_store
from croupier.ledger import open_ledger
from croupier.projection import open_store as open_read_models
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def site() -> AsyncIterator[str]:
    """``croupier web`` on a free port over a ledger holding the history rounds."""
    async with scratch_database() as url, open_ledger(url) as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round(), voided_round()])
        projector = Projector(ledger, open_read_models(ledger), load_projections())
        await projector.setup()
        await projector.catch_up()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        store = open_store(url)
        server = web_server(store, authenticator(), "127.0.0.1", port)
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            await serving
            await store.close()


async def load(driver: WebDriver, url: str) -> None:
    """Load a page in the browser while the server keeps serving on this loop."""
    await asyncio.to_thread(driver.get, url)


def cards_in(driver: WebDriver, scope: Any) -> list[tuple[str, str, str]]:
    """(card, colour class, spoken label) of each card shown inside ``scope``."""
    return [
        (c.get_attribute("data-card"), c.get_attribute("class"), c.get_attribute("aria-label"))
        for c in scope.find_elements(By.CSS_SELECTOR, ".card")
    ]


async def test_the_round_page_shows_the_cards_in_colour_the_hands_and_what_was_paid(
    site: str, browser: WebDriver
) -> None:
    await load(browser, f"{site}/history/rounds/{TABLE_CH}/r-shared?token={player_token('p1')}")

    assert browser.find_element(By.TAG_NAME, "h1").text == "Casino Hold'em, round r-shared"
    dealer = browser.find_element(By.CSS_SELECTOR, "section[aria-label='Dealer']")
    assert cards_in(browser, dealer) == [
        ("As", "card black", "Ace of spades"),
        ("Kd", "card red", "King of diamonds"),
    ]
    hand = browser.find_element(By.CSS_SELECTOR, "section[aria-label='Your hand']")
    assert [c[0] for c in cards_in(browser, hand)] == ["Qh", "Th"]
    assert hand.find_element(By.CSS_SELECTOR, ".card").value_of_css_property("color") == (
        "rgba(176, 0, 30, 1)"
    )
    named = hand.find_element(By.CSS_SELECTOR, ".hand strong")
    assert named.text == "Flush, Queen high"
    assert "Flush, Queen, Ten, Nine, Seven, Two" in hand.text  # as the ledger recorded it
    assert dealer.find_element(By.CSS_SELECTOR, ".hand strong").text == "Pair of Kings"
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert any("AA Bonus" in r and "21.00 EUR" in r and "Flush pays 20 to 1" in r for r in rows)
    assert any(r.startswith("Ante") and "3.00 EUR" in r for r in rows)
    net = browser.find_element(By.CSS_SELECTOR, "tfoot td[data-net]")
    assert net.text == "+24.00 EUR"
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1] == 412  # on a phone's screen, nothing wider than it
    assert screenshot(browser, "round-casino-holdem-shared").stat().st_size > 0


async def test_the_round_page_of_a_multi_box_round(site: str, browser: WebDriver) -> None:
    await load(browser, f"{site}/history/rounds/{TABLE_THP}/r-boxes?token={player_token('p1')}")

    boxes = browser.find_elements(By.CSS_SELECTOR, "section[aria-label^='Your hand']")
    assert [b.get_attribute("aria-label") for b in boxes] == [
        "Your hand, box 1",
        "Your hand, box 3",
    ]
    assert "Royal Flush" in boxes[1].text
    assert boxes[0].find_element(By.CSS_SELECTOR, ".hand strong").text == "Three of a Kind, Aces"
    assert screenshot(browser, "round-texas-holdem-plus-boxes").stat().st_size > 0


async def test_the_history_page_lists_rounds_and_opens_one(site: str, browser: WebDriver) -> None:
    await load(browser, f"{site}/history?token={player_token('p1')}")

    assert browser.find_element(By.TAG_NAME, "h1").text == "Game history"
    items = browser.find_elements(By.CSS_SELECTOR, "li[data-round]")
    assert [i.get_attribute("data-round") for i in items] == [
        f"{TABLE_CH}/r-void",
        f"{TABLE_THP}/r-boxes",
        f"{TABLE_CH}/r-shared",
    ]
    nets = [i.find_element(By.CSS_SELECTOR, "tfoot td[data-net]").text for i in items]
    assert nets == ["0.00 EUR", "+6.00 EUR", "+24.00 EUR"]
    assert "Royal flush pays 1 to 1" in items[1].text
    assert screenshot(browser, "history").stat().st_size > 0

    link = items[2].find_element(By.TAG_NAME, "a")
    await asyncio.to_thread(link.click)
    assert browser.find_element(By.TAG_NAME, "h1").text == "Casino Hold'em, round r-shared"


async def test_an_expired_token_shows_a_sign_in_again_page(site: str, browser: WebDriver) -> None:
    await load(browser, f"{site}/history?token={player_token('p1', expires_in=-10)}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sign in again"
    assert "expired" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text
