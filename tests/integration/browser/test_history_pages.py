"""The history pages in a real headless Chromium, served by uvicorn over PostgreSQL.

Checks what a player sees (cards with their suits in colour, amounts with their currency,
hand names, labels that say what they hold, a timeline in words) on a 360 px phone and a
1280 px desktop, with no horizontal scroll on either, and keeps full-page screenshots of
both under ``artifacts/browser/``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, RoundFeed
from history_browser import (  # noqa: F401  (the fixture)
    at_width,
    browser_fixture,
    history_site,
    load,
    overflow,
    screenshot,
)
from history_rounds import TABLE_CH, TABLE_THP, boxes_round, shared_round, voided_round
from history_web import player_token
from integration.conftest import scratch_database
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

#: One headless Chromium for these pages: the tests run one after another on one worker.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("browser")]

PHONE, DESKTOP = 360, 1280
#: A round id as long as studios make them: the pages must not show it where it does not fit.
HIGH_ROLLER = "20261204-123456-9f8e7d6c5b4a3928-1706f5e4d3c2b1a0-high-roller"
#: A card as the feed writes it ("9h", "Tc"): never on a page a player reads.
RAW_CARD = re.compile(r"\b[2-9TJQKA][cdhs]\b")


def high_roller_round() -> RoundFeed:
    """Casino Hold'em with stakes whose amounts run to four figures (a 1,000.00 EUR call)."""
    feed = RoundFeed(TABLE_CH, HIGH_ROLLER)
    feed.opened(CH_CLASSIC)
    feed.bet("a1", "ante", 50_000, player="p1")
    feed.bet("b1", "aa_bonus", 10_000, player="p1")
    feed.hole("Ah Ad")
    feed.cards("dealer", "9s 9c")
    feed.cards("board", "Ac 7d 2s")
    feed.decide("a1", "flop", "call", "c1", 100_000)
    feed.cards("board", "Kh 4c")
    feed.completed()
    return feed


@pytest.fixture(scope="module")
async def site() -> AsyncIterator[str]:
    """``croupier web`` on a free port over a ledger holding the history rounds."""
    rounds = [shared_round(), boxes_round(), voided_round(), high_roller_round()]
    async with scratch_database() as url, history_site(url, rounds) as site:
        yield site


def cards_in(driver: WebDriver, scope: Any) -> list[tuple[str, str, str]]:
    """(card, colour class, spoken label) of each card shown inside ``scope``."""
    return [
        (c.get_attribute("data-card"), c.get_attribute("class"), c.get_attribute("aria-label"))
        for c in scope.find_elements(By.CSS_SELECTOR, ".card")
    ]


def texts(driver: WebDriver, css: str, scope: Any = None) -> list[str]:
    """The text of each element matching ``css``, its lines joined by spaces."""
    return [" ".join(e.text.split()) for e in (scope or driver).find_elements(By.CSS_SELECTOR, css)]


def totals(scope: Any) -> dict[str, str]:
    """The labelled totals of a round: {"Staked": ..., "Paid": ..., "Net": ...}."""
    box = scope.find_element(By.CSS_SELECTOR, "dl.totals")
    labels = [e.text for e in box.find_elements(By.TAG_NAME, "dt")]
    return dict(zip(labels, [e.text for e in box.find_elements(By.TAG_NAME, "dd")], strict=True))


async def shown_at_both_widths(driver: WebDriver, url: str, name: str) -> None:
    """Load ``url`` on a phone and a desktop: no horizontal scroll, a screenshot of each;
    leaves the page loaded on the phone."""
    for width in (DESKTOP, PHONE):
        at_width(driver, width)
        await load(driver, url)
        # A phone widens its layout to fit content wider than the screen: that is a sideways
        # scroll too, so the window must stay as wide as the screen.
        assert driver.execute_script("return window.innerWidth") == width
        assert overflow(driver) == 0, f"{name} scrolls sideways at {width} px"
        assert screenshot(driver, f"{name}-{width}").stat().st_size > 0


async def test_the_round_page_shows_the_cards_in_colour_the_hands_and_what_was_paid(
    site: str, browser: WebDriver
) -> None:
    url = f"{site}/history/rounds/{TABLE_CH}/r-shared?token={player_token('p1')}"
    await shown_at_both_widths(browser, url, "round-casino-holdem-shared")

    assert browser.find_element(By.TAG_NAME, "h1").text == "Casino Hold'em"
    about = browser.find_element(By.CSS_SELECTOR, "h1 + p").text
    assert "Round ID r-shared" in about and "Pay table Classic, version 1" in about
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
    board = browser.find_element(By.CSS_SELECTOR, "section[aria-label='Board']")
    assert [c[0] for c in cards_in(browser, board)] == ["2h", "7h", "9h", "Kc", "3d"]
    assert texts(browser, "table.bets th") == ["Bet", "Staked", "Paid"]
    rows = texts(browser, "tbody tr")
    assert "AA Bonus Won: Flush pays 20 to 1 1.00 EUR 21.00 EUR" in rows
    assert any(r.startswith("Ante") and "3.00 EUR" in r for r in rows)
    assert totals(browser) == {"Staked": "4.00 EUR", "Paid": "28.00 EUR", "Net": "+24.00 EUR"}

    timeline = texts(browser, "ol.timeline li")
    said = [line.split(" ", 1)[1] for line in timeline]  # after the time of day
    assert said == [
        "Round opened: Casino Hold'em",
        "Ante bet: 1.00 EUR",
        "AA Bonus bet: 1.00 EUR",
        "Burn card: 4\N{BLACK CLUB SUIT}",
        "Your cards: Q\N{BLACK HEART SUIT} 10\N{BLACK HEART SUIT}",
        "Dealer's cards: A\N{BLACK SPADE SUIT} K\N{BLACK DIAMOND SUIT}",
        "Flop: 2\N{BLACK HEART SUIT} 7\N{BLACK HEART SUIT} 9\N{BLACK HEART SUIT}",
        "Flop: you called 2.00 EUR",
        "Turn and river: K\N{BLACK CLUB SUIT} 3\N{BLACK DIAMOND SUIT}",
        "Round settled: every bet paid as shown above",
    ]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", line.split(" ", 1)[0]) for line in timeline)
    page = browser.find_element(By.TAG_NAME, "main").text
    assert not RAW_CARD.search(page.replace("r-shared", "")), "a raw card code on the page"
    assert "aa_bonus" not in page and "player box" not in page


async def test_the_round_page_of_a_multi_box_round(site: str, browser: WebDriver) -> None:
    url = f"{site}/history/rounds/{TABLE_THP}/r-boxes?token={player_token('p1')}"
    await shown_at_both_widths(browser, url, "round-texas-holdem-plus-boxes")

    boxes = browser.find_elements(By.CSS_SELECTOR, "section[aria-label^='Your hand']")
    assert [b.get_attribute("aria-label") for b in boxes] == [
        "Your hand, box 1",
        "Your hand, box 3",
    ]
    assert "Royal Flush" in boxes[1].text
    assert boxes[0].find_element(By.CSS_SELECTOR, ".hand strong").text == "Three of a Kind, Aces"
    said = [line.split(" ", 1)[1] for line in texts(browser, "ol.timeline li")]
    assert "Your cards (box 3): K\N{BLACK HEART SUIT} Q\N{BLACK HEART SUIT}" in said
    assert "Before the flop: you (box 1) called 2.00 EUR" in said
    assert "Flop: you (box 1) checked" in said and "Flop: you (box 3) bet 1.00 EUR" in said
    assert said.index("Turn: 4\N{BLACK SPADE SUIT}") < said.index("River: 3\N{BLACK CLUB SUIT}")
    assert not any("box 2" in line for line in said)  # another player's box


async def test_a_voided_round_says_why_and_what_was_refunded(site: str, browser: WebDriver) -> None:
    url = f"{site}/history/rounds/{TABLE_CH}/r-void?token={player_token('p1')}"
    await shown_at_both_widths(browser, url, "round-voided")

    notice = browser.find_element(By.CSS_SELECTOR, "section[aria-label='Round voided']")
    assert notice.text.splitlines() == [
        "This round was voided",
        "Why: misdeal.",
        "Every wager was refunded: 3.00 EUR back.",
    ]
    assert browser.find_elements(By.CSS_SELECTOR, ".hands section") == []  # no empty boxes
    assert "Board" not in texts(browser, "h2, h3") and "Cards" not in texts(browser, "h2")
    assert "What was refunded" in texts(browser, "h2")
    assert texts(browser, "table.bets th") == ["Bet", "Staked", "Refunded"]
    assert totals(browser) == {"Staked": "3.00 EUR", "Refunded": "3.00 EUR", "Net": "0.00 EUR"}
    said = [line.split(" ", 1)[1] for line in texts(browser, "ol.timeline li")]
    assert said[-1] == "Round voided: misdeal. Every wager refunded"


async def test_the_history_page_lists_rounds_and_opens_one(site: str, browser: WebDriver) -> None:
    url = f"{site}/history?token={player_token('p1')}"
    await shown_at_both_widths(browser, url, "history")

    assert browser.find_element(By.TAG_NAME, "h1").text == "Game history"
    items = browser.find_elements(By.CSS_SELECTOR, "li[data-round]")
    assert [i.get_attribute("data-round") for i in items] == [
        f"{TABLE_CH}/{HIGH_ROLLER}",
        f"{TABLE_CH}/r-void",
        f"{TABLE_THP}/r-boxes",
        f"{TABLE_CH}/r-shared",
    ]
    links = [i.find_element(By.CSS_SELECTOR, "h2 a").text for i in items]
    assert all(
        re.fullmatch(r"(Casino|Texas) Hold'em( Plus)?, [-0-9]{10} [:0-9]{8} UTC", t) for t in links
    )
    assert not any(item_id in " ".join(links) for item_id in ("r-void", "r-shared", HIGH_ROLLER))
    assert [totals(i) for i in items] == [
        {"Staked": "1,600.00 EUR", "Paid": "3,800.00 EUR", "Net": "+2,200.00 EUR"},
        {"Staked": "3.00 EUR", "Refunded": "3.00 EUR", "Net": "0.00 EUR"},
        {"Staked": "7.00 EUR", "Paid": "13.00 EUR", "Net": "+6.00 EUR"},
        {"Staked": "4.00 EUR", "Paid": "28.00 EUR", "Net": "+24.00 EUR"},
    ]
    glance = texts(browser, ".glance .line", items[3])
    assert glance == [
        "You Q\N{BLACK HEART SUIT} 10\N{BLACK HEART SUIT} Flush, Queen high",
        "Dealer A\N{BLACK SPADE SUIT} K\N{BLACK DIAMOND SUIT} Pair of Kings",
        "Board 2\N{BLACK HEART SUIT} 7\N{BLACK HEART SUIT} 9\N{BLACK HEART SUIT} "
        "K\N{BLACK CLUB SUIT} 3\N{BLACK DIAMOND SUIT}",
    ]
    boxes = texts(browser, ".glance .line", items[2])
    assert boxes[0].startswith("Box 1 A") and boxes[0].endswith("Three of a Kind, Aces")
    assert boxes[1].endswith("Royal Flush") and boxes[2].startswith("Dealer 9")
    assert items[1].find_element(By.CSS_SELECTOR, ".notice").text == (
        "Voided: misdeal. Your 3.00 EUR was refunded."
    )
    assert items[1].find_elements(By.CSS_SELECTOR, ".glance") == []
    assert "Won: Royal flush pays 1 to 1" in items[2].text
    assert "Before the flop: Call 2.00 EUR (box 1)" in items[2].text
    assert not RAW_CARD.search(browser.find_element(By.TAG_NAME, "main").text)

    link = items[3].find_element(By.CSS_SELECTOR, "h2 a")
    await asyncio.to_thread(link.click)
    assert browser.find_element(By.TAG_NAME, "h1").text == "Casino Hold'em"
    assert "Round ID r-shared" in browser.find_element(By.CSS_SELECTOR, "h1 + p").text


async def test_an_expired_token_shows_a_sign_in_again_page(site: str, browser: WebDriver) -> None:
    await load(browser, f"{site}/history?token={player_token('p1', expires_in=-10)}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sign in again"
    assert "expired" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text
