"""The probe server: GET and HEAD on every route, process and build metrics, and a status
for every bad request, never a traceback."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator

import pytest

from croupier import croupier_version
from croupier.logs import configure_logging
from croupier.metrics import Metrics
from croupier.web import MAX_HEAD, ProbeServer


async def ready() -> dict[str, bool]:
    return {"broker": True, "database": True}


@pytest.fixture
async def port() -> AsyncIterator[int]:
    server = ProbeServer(Metrics(), ready)
    yield await server.start("127.0.0.1", 0)
    await server.close()


async def ask(port: int, request: bytes, *, close_write: bool = False) -> tuple[str, bytes]:
    """Send raw bytes; the status line and the body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    if close_write:
        writer.write_eof()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
async def test_head_answers_like_get_without_a_body(port: int, path: str) -> None:
    get_status, get_body = await ask(port, f"GET {path} HTTP/1.1\r\n\r\n".encode())
    head_status, head_body = await ask(port, f"HEAD {path} HTTP/1.1\r\n\r\n".encode())
    assert get_status == head_status == "HTTP/1.1 200 OK"
    assert get_body and head_body == b""


async def test_metrics_carry_process_python_and_build_info(port: int) -> None:
    _, body = await ask(port, b"GET /metrics HTTP/1.1\r\n\r\n")
    text = body.decode()
    for family in ("process_resident_memory_bytes", "process_cpu_seconds_total"):
        assert f"\n{family} " in text, family
    assert "python_info{" in text and "python_gc_collections_total{" in text
    assert 'croupier_build_info{python="' in text
    assert f'version="{croupier_version()}"' in text


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", "400 Bad Request"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "400 Bad Request"),
        (b"GET /healthz\r\n\r\n", "400 Bad Request"),
        (b"POST /healthz HTTP/1.1\r\n\r\n", "405 Method Not Allowed"),
        (b"GET /nothing HTTP/1.1\r\n\r\n", "404 Not Found"),
        (
            b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * (MAX_HEAD * 2) + b"\r\n\r\n",
            "431 Request Header Fields Too Large",
        ),
    ],
)
async def test_a_bad_request_gets_a_status(port: int, request_bytes: bytes, status: str) -> None:
    assert (await ask(port, request_bytes))[0] == f"HTTP/1.1 {status}"


async def test_a_request_cut_short_gets_400(port: int) -> None:
    status, _ = await ask(port, b"GET /healthz HTTP/1.1\r\n", close_write=True)
    assert status == "HTTP/1.1 400 Bad Request"


async def test_a_failing_probe_is_500_and_one_json_log_line() -> None:
    async def broken() -> dict[str, bool]:
        raise RuntimeError("probe broke")

    logs = io.StringIO()
    configure_logging("INFO", logs)
    server = ProbeServer(Metrics(), broken)
    try:
        port = await server.start("127.0.0.1", 0)
        status, _ = await ask(port, b"GET /readyz HTTP/1.1\r\n\r\n")
        assert (await ask(port, b"GET /healthz HTTP/1.1\r\n\r\n"))[0] == "HTTP/1.1 200 OK"
    finally:
        await server.close()
        configure_logging("WARNING")
    assert status == "HTTP/1.1 500 Internal Server Error"
    (line,) = [json.loads(x) for x in logs.getvalue().splitlines()]
    assert line["logger"] == "croupier.web" and "RuntimeError: probe broke" in line["exception"]


async def test_a_head_never_finished_gets_408(port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("croupier.web.READ_TIMEOUT", 0.2)
    assert (await ask(port, b"GET /healthz HTTP/1.1\r\n"))[0] == "HTTP/1.1 408 Request Timeout"


def test_the_append_lock_s_held_seconds_are_read_at_each_scrape() -> None:
    metrics, held = Metrics(), [1.5]
    metrics.watch_append_lock(lambda: held[0])
    name = "croupier_append_lock_held_seconds_total"
    assert metrics.registry.get_sample_value(name) == 1.5
    held[0] = 2.25
    assert metrics.registry.get_sample_value(name) == 2.25
    metrics.watch_append_lock(lambda: 7.0)  # another ledger: it replaces the first
    assert metrics.registry.get_sample_value(name) == 7.0
