"""HTTP for operators: ``/metrics`` (Prometheus), ``/healthz`` (alive), ``/readyz`` (ready).

A deliberately small asyncio HTTP/1.1 server: three routes, GET and HEAD, no framework.
Every request is answered with a status, never with a dropped connection or a traceback:
a request line that is no HTTP or a head cut short is 400, a head over :data:`MAX_HEAD` bytes
is 431, a head not sent within :data:`READ_TIMEOUT` is 408, another method is 405, a fault
while answering is 500 (and logged).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from croupier.metrics import Metrics

ReadinessProbe = Callable[[], Awaitable[dict[str, bool]]]
Answer = tuple[str, str, bytes]

MAX_HEAD: Final = 8192  # bytes of request line and headers
READ_TIMEOUT: Final = 5.0  # seconds to send the request head
METHODS: Final = ("GET", "HEAD")

log = structlog.get_logger("croupier.web")


class ProbeServer:
    """Serves metrics and the health probes on one port."""

    def __init__(self, metrics: Metrics, readiness: ReadinessProbe) -> None:
        self.metrics = metrics
        self.readiness = readiness
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEAD)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, answer = await self._answer(reader)
            status, content_type, body = answer
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n"
            )
            if status.startswith("405"):
                head += f"Allow: {', '.join(METHODS)}\r\n"
            writer.write(head.encode() + b"\r\n" + (b"" if method == "HEAD" else body))
            await writer.drain()
        except ConnectionError:
            pass  # the client went away
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[str, Answer]:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
        except asyncio.LimitOverrunError:
            return "", ("431 Request Header Fields Too Large", "text/plain", b"head too large\n")
        except TimeoutError:
            return "", ("408 Request Timeout", "text/plain", b"request head incomplete\n")
        except asyncio.IncompleteReadError:
            return "", ("400 Bad Request", "text/plain", b"request head incomplete\n")
        parts = request.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return "", ("400 Bad Request", "text/plain", b"not an HTTP/1.x request\n")
        method, target, _ = parts
        if method not in METHODS:
            return method, ("405 Method Not Allowed", "text/plain", b"GET or HEAD only\n")
        try:
            return method, await self._route(target.split("?")[0])
        except Exception:
            log.exception("probe request failed", path=target[:200])
            return method, ("500 Internal Server Error", "text/plain", b"internal error\n")

    async def _route(self, path: str) -> Answer:
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)
        if path == "/healthz":
            return "200 OK", "text/plain", b"alive\n"
        if path == "/readyz":
            checks = await self.readiness()
            lines = "".join(
                f"{name}: {'ok' if ok else 'NOT READY'}\n" for name, ok in checks.items()
            )
            status = "200 OK" if all(checks.values()) else "503 Service Unavailable"
            return status, "text/plain", lines.encode()
        return "404 Not Found", "text/plain", b"try /metrics, /healthz or /readyz\n"
