"""``croupier web --workers 2``: processes sharing one port answer as the application does."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from history_rounds import TABLE_CH
from history_web import SECRET, SUPPORT_KEY, Web, web_fixture  # noqa: F401  (the fixture)

from croupier.history.auth import key_digest
from croupier.history.staff import LOGIN_COOKIE, SESSION_COOKIE

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def workers(web: Web, **settings: str) -> AsyncIterator[str]:
    """``croupier web --workers 2`` over the fixture's ledger; yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "CROUPIER_DATABASE_URL": web.url,
        "CROUPIER_WEB_PORT": str(port),
        "CROUPIER_PLAYER_TOKEN_SECRET": SECRET,
        **settings,
    }
    command = [sys.executable, "-m", "croupier.cli", "web", "--host", "127.0.0.1"]
    server = subprocess.Popen([*command, "--workers", "2"], env=env, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base) as client:
            for _ in range(400):
                try:
                    await client.get("/healthz")
                    break
                except httpx.TransportError:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    await asyncio.sleep(0.1)
        yield base
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0


async def test_two_workers_on_one_port_answer_like_the_application(web: Web) -> None:
    path = f"/v1/rounds/{TABLE_CH}/r-shared"
    async with workers(web) as base, httpx.AsyncClient(base_url=base) as client:
        answers = [await client.get(path, headers=web.as_player("p1")) for _ in range(4)]
    expected = await web.client.get(path, headers=web.as_player("p1"))
    assert [a.status_code for a in answers] == [200] * 4
    assert all(a.json() == expected.json() for a in answers)


async def test_a_staff_session_from_one_worker_is_good_on_every_worker(web: Web) -> None:
    keys = {"keys": [{"name": "desk-1", "role": "support", "sha256": key_digest(SUPPORT_KEY)}]}
    framing = "https://casino.example"
    page = f"/history/rounds/{TABLE_CH}/r-shared"
    async with workers(
        web, CROUPIER_STAFF_KEYS=json.dumps(keys), CROUPIER_WEB_FRAME_ANCESTORS=framing
    ) as base:
        async with httpx.AsyncClient(base_url=base) as client:
            form = await client.get("/staff/login")
            token = form.text.split('name="form_token" value="')[1].split('"')[0]
            signed = await client.post(
                "/staff/login",
                data={"form_token": token, "next": page, "key": SUPPORT_KEY},
                headers={"Cookie": f"{LOGIN_COOKIE}={form.cookies[LOGIN_COOKIE]}"},
            )
        assert signed.status_code == 303
        session = signed.cookies[SESSION_COOKIE]
        answers = []
        for _ in range(12):  # a connection each: the kernel spreads them over the workers
            async with httpx.AsyncClient(base_url=base) as client:
                cookie = {"Cookie": f"{SESSION_COOKIE}={session}"}  # as behind a TLS proxy
                answers.append(await client.get(page, headers=cookie))
    assert [a.status_code for a in answers] == [200] * 12
    assert all("Staff view (support: desk-1)" in a.text for a in answers)
    policy = answers[0].headers["Content-Security-Policy"]
    assert policy.endswith(f"frame-ancestors {framing}")
