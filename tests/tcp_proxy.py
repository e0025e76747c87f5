"""A TCP proxy for partition tests: pure asyncio, in a thread of its own.

An instance connects to the proxy instead of its database or broker. ``black_hole()`` cuts
the network the way a partition does: nothing is forwarded in either direction and no
socket is closed, so both peers keep an open connection over which nothing arrives and
nothing is refused; a new connection is accepted but never reaches the other side.
``heal()`` forwards again (what was held back flows on, as after a partition heals).

It runs its own event loop in a daemon thread, so a test that blocks its own loop (a
subprocess, a synchronous wait) never stalls the traffic it carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Final

_CHUNK: Final = 1 << 16


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_host``:``upstream_port`` until closed."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.connections = 0
        self._upstream_ports: set[int] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"tcp-proxy-{upstream_port}", daemon=True
        )
        self._open = asyncio.Event()
        self._server: asyncio.Server | None = None

    def start(self) -> TcpProxy:
        """Listen on a free port (``port``) and forward; returns the proxy."""
        self._thread.start()
        self._call(self._listen())
        return self

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def upstream_ports(self) -> set[int]:
        """Local ports of the connections the proxy opened upstream (the server sees these
        as its clients' ports, e.g. ``pg_stat_activity.client_port``)."""
        return set(self._upstream_ports)

    def black_hole(self) -> None:
        """Stop forwarding, both ways, on every connection; close nothing. Returns once the
        proxy forwards no further byte."""
        self._call(self._set(open_=False))

    def heal(self) -> None:
        """Forward again."""
        self._call(self._set(open_=True))

    def close(self) -> None:
        """Close every connection and the listening socket; stop the thread."""
        if self._thread.is_alive():
            self._call(self._shut())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(30)

    async def _set(self, *, open_: bool) -> None:
        if open_:
            self._open.set()
        else:
            self._open.clear()

    async def _listen(self) -> None:
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _shut(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    async def _accept(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        try:
            await self._open.wait()  # cut off: accepted, but the other side never hears of it
            upstream, to_upstream = await asyncio.open_connection(*self.upstream)
        except (OSError, asyncio.CancelledError):
            to_client.close()
            return
        self._upstream_ports.add(int(to_upstream.get_extra_info("sockname")[1]))
        self.connections += 1
        pumps = [
            asyncio.ensure_future(self._pump(client, to_upstream)),
            asyncio.ensure_future(self._pump(upstream, to_client)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (to_client, to_upstream):
                writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction until end of stream; hold everything back while cut off."""
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                await self._open.wait()
                data = await reader.read(_CHUNK)
                if not data:
                    return
                await self._open.wait()  # read just as the cut began: held back too
                writer.write(data)
                await writer.drain()
