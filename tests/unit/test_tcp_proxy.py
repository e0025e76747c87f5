"""The partition tests' TCP proxy forwards both ways, holds everything back while cut off
without closing a socket, and delivers what it held once healed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from tcp_proxy import TcpProxy


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    async with server:
        yield int(server.sockets[0].getsockname()[1])


async def test_forwards_then_holds_back_without_closing_then_delivers(echo_port: int) -> None:
    with TcpProxy(echo_port) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"before")
        assert await asyncio.wait_for(reader.readexactly(6), 5) == b"before"
        (upstream_port,) = proxy.upstream_ports
        assert upstream_port != proxy.port

        proxy.black_hole()
        writer.write(b"during")
        await writer.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(6), 0.5)
        assert not reader.at_eof() and not writer.is_closing()
        # A new connection is accepted, but nothing reaches the other side.
        late_reader, late_writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        late_writer.write(b"late")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(late_reader.readexactly(4), 0.5)
        assert proxy.connections == 1

        proxy.heal()
        assert await asyncio.wait_for(reader.readexactly(6), 5) == b"during"
        assert await asyncio.wait_for(late_reader.readexactly(4), 5) == b"late"
        assert proxy.connections == 2
        for w in (writer, late_writer):
            w.close()
