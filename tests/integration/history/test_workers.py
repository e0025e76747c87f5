"""``croupier web --workers 2``: processes sharing one port answer as the application does."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest
from history_rounds import TABLE_CH
from history_web import SECRET, Web, web_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_two_workers_on_one_port_answer_like_the_application(web: Web) -> None:
    port = free_port()
    env = {
        **os.environ,
        "CROUPIER_DATABASE_URL": web.url,
        "CROUPIER_WEB_PORT": str(port),
        "CROUPIER_PLAYER_TOKEN_SECRET": SECRET,
    }
    command = [sys.executable, "-m", "croupier.cli", "web", "--host", "127.0.0.1"]
    server = subprocess.Popen([*command, "--workers", "2"], env=env, stderr=subprocess.PIPE)
    path = f"/v1/rounds/{TABLE_CH}/r-shared"
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(400):
                try:
                    await client.get("/healthz")
                    break
                except httpx.TransportError:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    await asyncio.sleep(0.1)
            answers = [await client.get(path, headers=web.as_player("p1")) for _ in range(4)]
        expected = await web.client.get(path, headers=web.as_player("p1"))
        assert [a.status_code for a in answers] == [200] * 4
        assert all(a.json() == expected.json() for a in answers)
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0
