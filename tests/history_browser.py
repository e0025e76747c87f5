"""Headless Chromium from Debian, driven by selenium; screenshots under ``artifacts/browser``.

Test modules import the ``browser`` fixture (as ``browser_fixture``) from here.

Nothing is downloaded at run time: the browser is /usr/bin/chromium and the driver
/usr/bin/chromedriver (Debian's ``chromium`` and ``chromium-driver``, which ``.ci/run``
installs). A missing browser fails the test with the command that fixes it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from croupier_feeds import RoundFeed
from history_rounds import settle
from history_web import authenticator
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from croupier.cli.commands.web import web_server
from croupier.history.store import open_store
from croupier.ledger import open_ledger
from croupier.projection import open_store as open_read_models
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections

CHROMIUM = os.environ.get("CROUPIER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CROUPIER_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "browser"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--metrics-recording-only",
    "--no-first-run",
    "--hide-scrollbars",
)


@pytest.fixture(name="browser", scope="session")
def browser_fixture() -> Iterator[webdriver.Chrome]:
    """One headless Chromium for the session, phone-sized (412 x 915)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            pytest.fail(
                f"{path} not found: install Debian's browser with "
                "`apt-get install -y chromium chromium-driver` (.ci/run does)",
                pytrace=False,
            )
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    at_width(driver, 412)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def at_width(driver: webdriver.Chrome, width: int) -> None:
    """Show pages on a screen ``width`` CSS pixels wide: a phone below 800, else a desktop."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 915 if width < 800 else 900, "deviceScaleFactor": 1,
         "mobile": width < 800},
    )  # fmt: skip


def overflow(driver: webdriver.Chrome) -> int:
    """How many CSS pixels the page is wider than the screen (0: no horizontal scroll)."""
    wide, screen = driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    return max(0, int(wide) - int(screen))


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """Save the whole page, as wide as the screen, as ``artifacts/browser/<name>.png``;
    returns the path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    width = driver.execute_script("return window.innerWidth")
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True,
         "clip": {"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1}},
    )  # fmt: skip
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


@asynccontextmanager
async def history_site(
    url: str, rounds: Sequence[RoundFeed], host: str = "127.0.0.1"
) -> AsyncIterator[str]:
    """``croupier web`` on a free port over the ledger at ``url`` holding ``rounds``
    (settled and projected first); its base address, by ``host``."""
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await settle(ledger, list(rounds))
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
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await serving
        await store.close()


async def load(driver: WebDriver, url: str) -> None:
    """Load a page in the browser while the server keeps serving on this loop."""
    await asyncio.to_thread(driver.get, url)
