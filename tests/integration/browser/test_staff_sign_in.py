"""Staff open a round from a link in a real headless Chromium: the link leads to the sign-in,
the staff key is typed into the form, and the browser comes back to the round with a
session cookie it keeps HttpOnly, Secure and SameSite. Served by uvicorn over SQLite.

Screenshots (the whole page) under ``artifacts/browser/``: ``staff-sign-in``,
``staff-round-compliance``, ``staff-round-support``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from history_browser import ARTIFACTS, browser_fixture, history_site, load  # noqa: F401
from history_rounds import TABLE_CH, TABLE_THP, boxes_round, shared_round
from history_web import COMPLIANCE_KEY, SUPPORT_KEY, player_token
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from croupier.history.staff import SESSION_COOKIE

#: One headless Chromium for these pages: the tests run one after another on one worker.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("browser")]


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """``croupier web`` on a free port over a SQLite ledger holding two rounds."""
    url = f"sqlite:///{tmp_path_factory.mktemp('staff') / 'ledger.sqlite'}"
    # localhost: a secure context, so Secure cookies work over http
    async with history_site(url, [shared_round(), boxes_round()], "localhost") as site:
        yield site


async def click(driver: WebDriver, selector: str) -> None:
    """Click and wait for the next page (the server answers on this loop meanwhile)."""
    driver.execute_script("window.beforeClick = true")

    def clicked() -> None:
        driver.find_element(By.CSS_SELECTOR, selector).click()
        WebDriverWait(driver, 10, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.execute_script(
                "return !window.beforeClick && document.readyState === 'complete'"
            )
        )

    await asyncio.to_thread(clicked)


async def sign_in(driver: WebDriver, key: str) -> None:
    """Type the key into the sign-in form and send it, as a person would."""
    field = driver.find_element(By.NAME, "key")
    field.clear()
    field.send_keys(key)
    await click(driver, "form[aria-label='Sign in'] button")


@contextmanager
def desktop(driver: WebDriver) -> Iterator[None]:
    """The page on a desktop's screen (1280 x 900), then the phone's again."""
    metrics = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        phone = {"width": 412, "height": 915, "deviceScaleFactor": 1, "mobile": True}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", phone)  # type: ignore[attr-defined]


def whole_page(driver: WebDriver, name: str) -> Path:
    """A screenshot of the whole page, beyond the window's height."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]  # type: ignore[attr-defined]
    shot = driver.execute_cdp_cmd(  # type: ignore[attr-defined]
        "Page.captureScreenshot",
        {
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


async def test_compliance_opens_a_round_link_through_the_sign_in(
    site: str, browser: WebDriver
) -> None:
    browser.delete_all_cookies()
    round_page = f"{site}/history/rounds/{TABLE_CH}/r-shared"
    await load(browser, round_page)
    assert browser.current_url == f"{site}/staff/login?next=/history/rounds/{TABLE_CH}/r-shared"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Staff sign-in"
    assert whole_page(browser, "staff-sign-in").stat().st_size > 0

    await sign_in(browser, "not the key")
    assert "Sign-in refused" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text
    await sign_in(browser, COMPLIANCE_KEY)

    assert browser.current_url == round_page
    assert "Staff view (compliance: audit-1)" in browser.page_source
    session = next(c for c in browser.get_cookies() if c["name"] == SESSION_COOKIE)
    assert session["httpOnly"] is True and session["secure"] is True
    assert session["sameSite"] == "Lax" and session["path"] == "/"
    assert browser.execute_script("return document.cookie") == ""  # no script reads it
    results = browser.find_element(By.CSS_SELECTOR, "table").text
    assert "p1" in results and "p2" in results  # every player's wagers
    rejected = browser.find_element(By.CSS_SELECTOR, "li[data-fact='feed.rejected']").text
    assert "must be exactly 2x the ante 200, got 300" in rejected
    assert "croupier verify --anchor" in browser.page_source
    assert whole_page(browser, "staff-round-compliance").stat().st_size > 0
    with desktop(browser):
        assert whole_page(browser, "staff-round-compliance-desktop").stat().st_size > 0

    # a second link in the same browser opens without signing in again
    await load(browser, f"{site}/history/rounds/{TABLE_THP}/r-boxes")
    assert "Staff view (compliance: audit-1)" in browser.page_source

    await click(browser, "form[action='/staff/logout'] button")
    assert browser.current_url == f"{site}/staff/login"
    await load(browser, round_page)
    assert "/staff/login" in browser.current_url  # signed out


async def test_support_signs_in_and_opens_a_round_by_its_ids(site: str, browser: WebDriver) -> None:
    browser.delete_all_cookies()
    await load(browser, f"{site}/staff/login")
    await sign_in(browser, SUPPORT_KEY)
    assert "Signed in as desk-1 (support)" in browser.find_element(By.TAG_NAME, "main").text
    browser.find_element(By.NAME, "table").send_keys(TABLE_THP)
    browser.find_element(By.NAME, "round").send_keys("r-boxes")
    await click(browser, "form[aria-label='Open a round'] button")

    assert browser.current_url == f"{site}/history/rounds/{TABLE_THP}/r-boxes"
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "Staff view (support: desk-1)" in text and "Box 2" in text
    assert "feed.rejected" not in browser.page_source
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1]  # a phone's width: nothing wider than the screen
    assert whole_page(browser, "staff-round-support").stat().st_size > 0


async def test_the_players_round_page_says_how_to_have_the_round_checked(
    site: str, browser: WebDriver
) -> None:
    browser.delete_all_cookies()
    await load(browser, f"{site}/history/rounds/{TABLE_CH}/r-shared?token={player_token('p1')}")
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "give support the round ID and this reference" in text
    assert "prove that this page shows exactly what was recorded" in text
    assert "croupier verify" not in text  # support's tool, not the player's
    assert "p2" not in text and "position 10" not in text  # nothing of the other player
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1]
    assert whole_page(browser, "player-round-check").stat().st_size > 0
