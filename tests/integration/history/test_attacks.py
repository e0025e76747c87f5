"""``croupier web`` as an attacker tries it: forged cursors, ids no one has, framing, staff
sign-in. Every bad request is a 4xx; every response carries the security headers."""

from __future__ import annotations

import base64
import itertools
import random
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
from history_rounds import TABLE_CH
from history_web import (
    COMPLIANCE_KEY,
    SUPPORT_KEY,
    Web,
    authenticator,
    player_token,
    web_fixture,  # noqa: F401  (the fixture)
)
from structlog.testing import capture_logs

from croupier.history.app import create_app
from croupier.history.headers import security_headers
from croupier.history.postgres import PostgresHistory
from croupier.history.staff import LOGIN_COOKIE, SESSION_COOKIE, SignInLimiter, StaffSignIn

pytestmark = pytest.mark.integration

HEADERS = security_headers()


def secured(response: httpx.Response) -> httpx.Response:
    """``response``, after checking it carries every security header."""
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code)
    return response


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


FORGED_CURSORS = [
    cursor(f"{2**63}:EUR"),
    cursor(f"{2**64 + 5}:"),
    cursor(f"{10**40}:EUR"),
    cursor("0:EUR"),
    cursor("-1:EUR"),
    cursor("5:EURO"),
    cursor("5:\u00e9u"),
    cursor("5:E\x00"),
    cursor("x:EUR"),
    "not base64 !",
    "%00",
    cursor("\x00"),
]


@pytest.mark.parametrize("forged", FORGED_CURSORS)
async def test_a_forged_cursor_is_400_on_every_paginated_route(web: Web, forged: str) -> None:
    q = f"cursor={quote(forged)}"
    asks = [
        (f"/v1/players/p1/rounds?{q}", web.as_player("p1")),
        (f"/v1/players/p1/rounds?{q}", web.as_support()),
        (f"/v1/tables/{TABLE_CH}/rounds?{q}", web.as_support()),
        (f"/history?token={player_token('p1')}&{q}", {}),
    ]
    for path, headers in asks:
        response = secured(await web.client.get(path, headers=headers))
        assert response.status_code == 400, (path, response.text)


async def test_the_last_possible_position_is_a_valid_cursor(web: Web) -> None:
    newest = cursor(f"{2**63 - 1}:")
    response = await web.client.get(
        f"/v1/tables/{TABLE_CH}/rounds?cursor={newest}", headers=web.as_support()
    )
    assert secured(response).status_code == 200
    assert response.json()["rounds"]


BAD_IDS = ["p\x00", "\x00", "p1\n", "a" * 129, "p\x7f1", "p\x1b[31m"]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_ids_no_one_can_have_are_404_for_staff_too(web: Web, bad: str) -> None:
    each = quote(bad, safe="")
    asks = [
        f"/v1/players/{each}/rounds",
        f"/v1/tables/{each}/rounds",
        f"/v1/rounds/{each}/r-shared",
        f"/v1/rounds/{TABLE_CH}/{each}",
    ]
    for path in asks:
        response = secured(await web.client.get(path, headers=web.as_compliance()))
        assert response.status_code == 404, (path, response.text)
    page = await web.client.get(f"/history/rounds/{each}/{each}", headers=web.as_compliance())
    assert secured(page).status_code == 404


async def test_oversized_and_control_character_credentials_are_401_with_headers(web: Web) -> None:
    for headers in (
        {"X-Staff-Key": "k" * 10_000},
        {"X-Staff-Key": "k\x01"},
        {"Authorization": "Bearer " + "a" * 10_000},
        {"Authorization": "Bearer a\tb"},
    ):
        response = await web.client.get("/v1/players/p1/rounds", headers=headers)
        assert secured(response).status_code == 401


@pytest.mark.parametrize(
    "path",
    [
        "/v1/players/p1/rounds?limit=0",
        "/v1/players/p1/rounds?limit=101",
        "/v1/players/p1/rounds?limit=x",
        "/v1/players/p1/rounds?cursor=" + "A" * 65,
        "/nowhere",
        "/history/rounds/only-one-part",
    ],
)
async def test_other_bad_requests_are_4xx_with_the_headers(web: Web, path: str) -> None:
    response = await web.client.get(path, headers=web.as_player("p1"))
    assert 400 <= secured(response).status_code < 500


async def test_a_method_not_allowed_is_405_with_the_headers(web: Web) -> None:
    response = await web.client.delete("/v1/players/p1/rounds", headers=web.as_player("p1"))
    assert secured(response).status_code == 405


async def test_a_fault_of_the_service_is_a_500_that_still_carries_the_headers() -> None:
    unreachable = PostgresHistory("postgresql://postgres@127.0.0.1:1/none")
    app = create_app(unreachable, authenticator())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
        response = await client.get("/v1/players/p1/rounds", headers={"X-Staff-Key": SUPPORT_KEY})
    assert secured(response).status_code == 500
    assert response.json() == {"detail": "internal error"}  # no traceback, no database URL


async def test_pages_and_the_api_refuse_framing_by_default(web: Web) -> None:
    for path, headers in (
        (f"/history?token={player_token('p1')}", {}),
        ("/v1/players/p1/rounds", web.as_player("p1")),
        ("/staff/login", {}),
    ):
        response = await web.client.get(path, headers=headers)
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Frame-Options"] == "DENY"


async def test_the_game_clients_origin_may_frame_the_pages_and_no_other(web: Web) -> None:
    app = create_app(web.store, authenticator(), frame_ancestors=("https://casino.example",))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
        response = await client.get(f"/history?token={player_token('p1')}")
    assert response.status_code == 200
    policy = response.headers["Content-Security-Policy"]
    assert policy.endswith("frame-ancestors https://casino.example")
    assert "X-Frame-Options" not in response.headers


# Staff sign-in, over HTTPS as the Secure cookies require.


_addresses = itertools.count(1)


@pytest.fixture
async def browser(web: Web) -> AsyncIterator[httpx.AsyncClient]:
    """A client that keeps cookies as a browser would, over https://web, from an address
    of its own (the sign-in limit is per address)."""
    address = f"198.51.100.{next(_addresses)}"
    transport = httpx.ASGITransport(app=web.app, client=(address, 50000))
    async with httpx.AsyncClient(transport=transport, base_url="https://web") as client:
        yield client


async def sign_in(
    client: httpx.AsyncClient, key: str, next_page: str = "/staff/login", **extra: str
) -> httpx.Response:
    form = await client.get(f"/staff/login?next={quote(next_page)}")
    token = form.text.split('name="form_token" value="')[1].split('"')[0]
    data = {"form_token": token, "next": next_page, "key": key, **extra}
    return await client.post("/staff/login", data=data)


def set_cookie(response: httpx.Response, name: str) -> str:
    found = [c for c in response.headers.get_list("set-cookie") if c.startswith(name + "=")]
    assert len(found) == 1, response.headers.get_list("set-cookie")
    return found[0]


async def test_a_round_link_leads_staff_through_sign_in_to_the_round(
    web: Web, browser: httpx.AsyncClient
) -> None:
    page = f"/history/rounds/{TABLE_CH}/r-shared"
    first = await browser.get(page)
    assert secured(first).status_code == 303
    assert first.headers["location"] == f"/staff/login?next={page}"

    form = await browser.get(first.headers["location"])
    assert secured(form).status_code == 200 and 'name="key"' in form.text
    login_cookie = set_cookie(form, LOGIN_COOKIE).lower()
    for flag in ("httponly", "secure", "samesite=strict", "path=/"):
        assert flag in login_cookie

    token = form.text.split('name="form_token" value="')[1].split('"')[0]
    signed = await browser.post(
        "/staff/login", data={"form_token": token, "next": page, "key": COMPLIANCE_KEY}
    )
    assert secured(signed).status_code == 303 and signed.headers["location"] == page
    session = set_cookie(signed, SESSION_COOKIE).lower()
    for flag in ("httponly", "secure", "samesite=lax", "path=/", "max-age=28800"):
        assert flag in session
    assert "domain=" not in session  # __Host-: this host only
    assert COMPLIANCE_KEY.lower() not in session

    shown = await browser.get(page)
    assert secured(shown).status_code == 200
    assert "Staff view (compliance: audit-1)" in shown.text and "p2" in shown.text
    assert 'action="/staff/logout"' in shown.text


async def test_a_wrong_key_is_refused_and_logged_without_the_key(
    browser: httpx.AsyncClient,
) -> None:
    with capture_logs() as logs:
        response = await sign_in(browser, "guess-the-key")
    assert secured(response).status_code == 401 and "Sign-in refused" in response.text
    assert SESSION_COOKIE not in response.headers.get("set-cookie", "")
    attempt = [e for e in logs if e["event"] == "staff sign-in"]
    assert attempt and attempt[0]["outcome"] == "refused"
    assert attempt[0]["client"].startswith("198.51.100.")
    assert "guess-the-key" not in repr(logs)


async def test_sign_in_without_the_forms_token_is_refused(browser: httpx.AsyncClient) -> None:
    # another site's page posting a key it learned: no form token, no login cookie
    bare = await browser.post(
        "/staff/login", data={"key": SUPPORT_KEY, "form_token": "x", "next": "/"}
    )
    assert secured(bare).status_code == 403
    await browser.get("/staff/login")  # the cookie set, but the form's token not sent
    wrong = await browser.post("/staff/login", data={"key": SUPPORT_KEY, "form_token": "x"})
    assert wrong.status_code == 403


async def test_sign_in_posted_from_another_origin_is_refused(browser: httpx.AsyncClient) -> None:
    response = await sign_in(browser, SUPPORT_KEY, origin="ignored")
    assert response.status_code == 303  # the form's own origin (no Origin header): fine
    form = await browser.get("/staff/login")
    token = form.text.split('name="form_token" value="')[1].split('"')[0]
    forged = await browser.post(
        "/staff/login",
        data={"form_token": token, "key": SUPPORT_KEY},
        headers={"Origin": "https://evil.example"},
    )
    assert secured(forged).status_code == 403


@pytest.mark.parametrize(
    "next_page", ["https://evil.example/", "//evil.example/x", "/history?token=x", "/\\evil"]
)
async def test_sign_in_never_sends_the_browser_to_another_site(
    browser: httpx.AsyncClient, next_page: str
) -> None:
    response = await sign_in(browser, SUPPORT_KEY, next_page)
    assert response.status_code == 303 and response.headers["location"] == "/staff/login"


async def test_a_forged_or_tampered_session_cookie_goes_back_to_sign_in(
    web: Web, browser: httpx.AsyncClient
) -> None:
    page = f"/history/rounds/{TABLE_CH}/r-shared"
    signed = await sign_in(browser, SUPPORT_KEY, page)
    value = browser.cookies[SESSION_COOKIE]
    body, _, mac = value.partition(".")
    other = StaffSignIn(authenticator()).with_key(COMPLIANCE_KEY)[1]  # another secret
    raw = base64.urlsafe_b64decode(body + "==").replace(b"support", b"compliance")
    promoted = base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + mac
    for forged in (other, promoted, "x", value + "x"):
        browser.cookies.clear()
        browser.cookies.set(SESSION_COOKIE, forged, domain="web.local")
        response = await browser.get(page)
        assert secured(response).status_code == 303, forged
    assert signed.status_code == 303


async def test_signing_out_needs_the_pages_token_and_ends_the_session(
    browser: httpx.AsyncClient,
) -> None:
    page = f"/history/rounds/{TABLE_CH}/r-shared"
    await sign_in(browser, SUPPORT_KEY, page)
    shown = await browser.get(page)
    form = shown.text.split('action="/staff/logout">')[1]
    logout_token = form.split('name="form_token" value="')[1].split('"')[0]
    refused = await browser.post("/staff/logout", data={"form_token": "forged"})
    assert secured(refused).status_code == 403
    out = await browser.post("/staff/logout", data={"form_token": logout_token})
    assert out.status_code == 303
    assert (await browser.get(page)).status_code == 303  # signed out


async def test_sign_in_attempts_are_limited_per_address_and_overall(web: Web) -> None:
    limiter = SignInLimiter(per_address=3, overall=5, window=3600)
    app = create_app(web.store, authenticator(), staff_sign_in=StaffSignIn(
        authenticator(), limiter=limiter))  # fmt: skip

    def client(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 1234))
        return httpx.AsyncClient(transport=transport, base_url="https://web")

    async def attempt(address: str, key: str) -> httpx.Response:
        async with client(address) as browser:
            return await sign_in(browser, key)

    statuses = [(await attempt("203.0.113.1", "wrong")).status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    with capture_logs() as logs:
        limited = await attempt("203.0.113.1", SUPPORT_KEY)  # even the right key waits
    assert secured(limited).status_code == 429 and int(limited.headers["Retry-After"]) > 0
    assert [e["outcome"] for e in logs if e["event"] == "staff sign-in"] == ["limited"]
    assert (await attempt("203.0.113.2", SUPPORT_KEY)).status_code == 303  # its own allowance
    assert (await attempt("203.0.113.2", "wrong")).status_code == 401  # the 5th overall
    assert (await attempt("203.0.113.3", SUPPORT_KEY)).status_code == 429  # overall spent


async def test_an_oversized_sign_in_form_is_413(browser: httpx.AsyncClient) -> None:
    response = await browser.post("/staff/login", content=b"key=" + b"k" * 20_000)
    assert secured(response).status_code == 413


async def test_staff_open_a_round_by_its_ids_once_signed_in(browser: httpx.AsyncClient) -> None:
    await sign_in(browser, SUPPORT_KEY)
    landing = await browser.get("/staff/login")
    assert "Signed in as <strong>desk-1</strong>" in landing.text
    opened = await browser.get(f"/staff/open?table={TABLE_CH}&round=r-shared")
    assert opened.status_code == 303
    assert opened.headers["location"] == f"/history/rounds/{TABLE_CH}/r-shared"
    bad = await browser.get("/staff/open?table=x%00&round=r")
    assert secured(bad).status_code == 400


async def test_guessing_staff_keys_in_the_header_is_limited_too(web: Web) -> None:
    limiter = SignInLimiter(per_address=3, overall=100, window=3600)
    sign_in = StaffSignIn(authenticator(), limiter=limiter)
    app = create_app(web.store, authenticator(), staff_sign_in=sign_in)

    def client(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 1234))
        return httpx.AsyncClient(transport=transport, base_url="http://web")

    path = f"/v1/tables/{TABLE_CH}/rounds"
    async with client("203.0.113.9") as guesser, client("203.0.113.10") as desk:
        right = [await guesser.get(path, headers={"X-Staff-Key": SUPPORT_KEY}) for _ in range(5)]
        assert [r.status_code for r in right] == [200] * 5  # right keys take nothing
        guesses = [await guesser.get(path, headers={"X-Staff-Key": f"guess-{n}"}) for n in range(4)]
        assert [g.status_code for g in guesses] == [401, 401, 401, 429]
        with capture_logs() as logs:
            limited = await guesser.get(path, headers={"X-Staff-Key": SUPPORT_KEY})
        assert secured(limited).status_code == 429 and int(limited.headers["Retry-After"]) > 0
        assert [e["outcome"] for e in logs if e["event"] == "staff sign-in"] == ["limited"]
        page = await guesser.get(
            f"/history/rounds/{TABLE_CH}/r-shared", headers={"X-Staff-Key": SUPPORT_KEY}
        )
        assert secured(page).status_code == 429
        assert (await desk.get(path, headers={"X-Staff-Key": SUPPORT_KEY})).status_code == 200


NASTY = [
    "",
    "\x00",
    "p1\x00",
    "p1\n",
    "\r\nSet-Cookie: x=1",
    "..",
    "../../etc/passwd",
    "/",
    "%",
    "%00",
    "\ud800",  # a lone surrogate
    "\u202e\u0000",
    "é" * 200,
    "9" * 400,
    str(2**63),
    "-1",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "{}",
    "a" * 5000,
]


async def test_no_input_reaches_a_500(web: Web) -> None:
    """Nasty text in every part of every route's request: a 4xx or a 2xx/3xx, never a 500,
    always with the security headers."""
    rng = random.Random(24)
    valid_token, session_junk = player_token("p1"), "x.y"
    limits = SignInLimiter(per_address=10**6, overall=10**6)  # every key is looked at
    app = create_app(web.store, authenticator(), staff_sign_in=StaffSignIn(
        authenticator(), limiter=limits))  # fmt: skip
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="https://web")

    def text() -> str:
        return rng.choice([*NASTY, "p1", TABLE_CH, "r-shared", valid_token])

    def segment() -> str:
        return quote(text().encode("utf-8", "surrogatepass"), safe="")

    statuses = []
    for _ in range(400):
        route = rng.choice(
            [
                f"/v1/rounds/{segment()}/{segment()}",
                f"/v1/players/{segment()}/rounds",
                f"/v1/tables/{segment()}/rounds",
                "/history",
                f"/history/rounds/{segment()}/{segment()}",
                "/staff/login",
                "/staff/open",
            ]
        )
        query = "&".join(
            f"{rng.choice(['cursor', 'limit', 'token', 'next', 'table', 'round'])}={segment()}"
            for _ in range(rng.randrange(4))
        )
        headers = {}
        if rng.random() < 0.5:
            headers["X-Staff-Key"] = rng.choice([COMPLIANCE_KEY, "guess", "k" * 300])
        if rng.random() < 0.5:
            headers["Authorization"] = f"Bearer {rng.choice([valid_token, 'x', 'a.b.c'])}"
        if rng.random() < 0.3:
            headers["Cookie"] = f"{SESSION_COOKIE}={rng.choice([session_junk, 'a' * 3000])}"
        method = "POST" if route.startswith("/staff/") and rng.random() < 0.5 else "GET"
        body = f"key={segment()}&form_token={segment()}&next={segment()}".encode()
        response = await client.request(
            method, f"{route}?{query}", headers=headers, content=body if method == "POST" else None
        )
        statuses.append(secured(response).status_code)
    await client.aclose()
    assert max(statuses) < 500, sorted(set(statuses))
    assert len(set(statuses)) >= 5, sorted(set(statuses))  # many different answers


async def test_the_sign_in_page_says_when_it_cannot_keep_a_session(web: Web) -> None:
    plain = await web.client.get("/staff/login")  # http://web: not HTTPS, not loopback
    assert "Sign-in needs HTTPS here" in plain.text
    transport = httpx.ASGITransport(app=web.app)
    async with httpx.AsyncClient(transport=transport, base_url="https://web") as client:
        assert "Sign-in needs HTTPS" not in (await client.get("/staff/login")).text
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        assert "Sign-in needs HTTPS" not in (await client.get("/staff/login")).text
