"""The player's pages, as HTML (the browser tests check what a person sees)."""

from __future__ import annotations

import re

import pytest
from history_rounds import TABLE_CH, TABLE_THP
from history_web import Web, player_token, web_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


def shows(html: str, player: str) -> bool:
    """Whether ``player`` stands in the page as a word of its own: the tokens in its links are
    runs of base64url characters, which hold any two of them now and then."""
    return re.search(rf"(?<![\w.-]){re.escape(player)}(?![\w.-])", html) is not None


async def test_the_round_page_shows_cards_hands_and_what_was_paid(web: Web) -> None:
    token = player_token("p1")
    response = await web.client.get(f"/history/rounds/{TABLE_CH}/r-shared?token={token}")

    assert response.status_code == 200
    html = response.text
    assert 'aria-label="Queen of hearts"' in html and 'class="card red"' in html
    assert "Flush, Queen, Ten, Nine, Seven, Two" in html
    assert 'AA Bonus<span class="why">Won: Flush pays 20 to 1</span>' in html
    assert "21.00 EUR" in html and "+24.00 EUR" in html
    assert 'data-bet="a2"' not in html and not shows(html, "p2")
    assert response.headers["Referrer-Policy"] == "no-referrer"


async def test_the_round_page_of_a_multi_box_round_shows_each_of_the_players_boxes(
    web: Web,
) -> None:
    token = player_token("p1")
    response = await web.client.get(f"/history/rounds/{TABLE_THP}/r-boxes?token={token}")

    assert response.status_code == 200
    assert "Royal Flush" in response.text and "(box 3)" in response.text
    assert "(box 2)" not in response.text


@pytest.mark.parametrize(
    "query", ["", "?token=garbage", f"?token={player_token('p1', expires_in=-5)}"]
)
async def test_pages_without_a_valid_token_are_401(web: Web, query: str) -> None:
    for path in ("/history", f"/history/rounds/{TABLE_CH}/r-shared"):
        response = await web.client.get(path + query)
        if path != "/history" and not query:  # a bare link: staff, who sign in first
            assert response.status_code == 303
            assert response.headers["location"] == f"/staff/login?next={path}"
            continue
        assert response.status_code == 401
        assert "<h1>Sign in again</h1>" in response.text


async def test_another_players_round_page_is_404(web: Web) -> None:
    token = player_token("p3")
    response = await web.client.get(f"/history/rounds/{TABLE_CH}/r-shared?token={token}")
    assert response.status_code == 404
    assert "round not found" in response.text


async def test_the_history_page_lists_the_players_rounds_and_links_each(web: Web) -> None:
    token = player_token("p1")
    response = await web.client.get(f"/history?token={token}")

    assert response.status_code == 200
    html = response.text
    assert html.index(f'"{TABLE_CH}/r-void"') < html.index(f'"{TABLE_THP}/r-boxes"')
    assert html.index(f'"{TABLE_THP}/r-boxes"') < html.index(f'"{TABLE_CH}/r-shared"')
    assert f"/history/rounds/{TABLE_THP}/r-boxes?token=" in html
    assert "+6.00 EUR" in html and "+24.00 EUR" in html
    assert "<strong>Voided</strong>: misdeal. Your 3.00 EUR was refunded." in html
    assert not shows(html, "p2") and not shows(html, "p3")


async def test_compliance_opens_the_round_page_with_rejections_and_hashes(web: Web) -> None:
    response = await web.client.get(
        f"/history/rounds/{TABLE_CH}/r-shared", headers=web.as_compliance()
    )

    assert response.status_code == 200
    html = response.text
    assert "Staff view (compliance: audit-1)" in html
    assert shows(html, "p1") and shows(html, "p2")  # every player's wagers
    assert 'data-fact="feed.rejected"' in html
    assert "must be exactly 2x the ante 200, got 300" in html  # p2's call, and why
    assert "croupier verify --anchor" in html and "hash <code>" in html


async def test_support_opens_the_round_page_without_rejections_or_hashes(web: Web) -> None:
    response = await web.client.get(
        f"/history/rounds/{TABLE_THP}/r-boxes", headers=web.as_support()
    )

    assert response.status_code == 200
    html = response.text
    assert "Staff view (support: desk-1)" in html and "need the compliance role" in html
    assert "Box 2" in html and "p3" in html
    assert "feed.rejected" not in html
    assert html.count("hash <code>") == 1  # the round's reference, no fact's hash
    assert "croupier verify --read-models" in html


async def test_a_wrong_staff_key_on_a_page_is_401(web: Web) -> None:
    response = await web.client.get(
        f"/history/rounds/{TABLE_CH}/r-shared", headers={"X-Staff-Key": "guess"}
    )
    assert response.status_code == 401 and "<h1>Sign in again</h1>" in response.text
