"""HTTP for operators: ``/metrics`` (Prometheus), ``/healthz`` (alive), ``/readyz`` (ready).

A deliberately small asyncio HTTP/1.1 server: three GET routes, no framework.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from croupier.metrics import Metrics

ReadinessProbe = Callable[[], Awaitable[dict[str, bool]]]


class ProbeServer:
    """Serves metrics and the health probes on one port."""

    def __init__(self, metrics: Metrics, readiness: ReadinessProbe) -> None:
        self.metrics = metrics
        self.readiness = readiness
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            method, path, *_ = request.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            status, content_type, body = await self._route(method, path.split("?")[0])
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ValueError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
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
