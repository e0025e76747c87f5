"""The aiormq channel internals the publish path (``contract.publishing``) and the inline
consumer (``contract.consuming``) rely on are still there, with the types they use them as:
an aiormq upgrade that moves them fails here, not in production."""

from __future__ import annotations

import asyncio
import uuid
from typing import cast

import aio_pika
import aiormq
import pytest
from aiormq.abc import DeliveredMessage

from contract import consuming, frames
from contract.consuming import consume_inline
from contract.publishing import CHANNEL_INTERNALS, Publication, publish_confirmed

pytestmark = pytest.mark.integration


async def test_a_confirming_channel_has_what_publish_confirmed_touches(amqp_vhost: str) -> None:
    connection = await aio_pika.connect(amqp_vhost)
    try:
        robust = await connection.channel(publisher_confirms=True)
        channel = cast(aiormq.Channel, await robust.get_underlay_channel())
        internals = (*CHANNEL_INTERNALS, *consuming.CHANNEL_INTERNALS)
        missing = [name for name in internals if not hasattr(channel, name)]
        assert not missing, f"aiormq.Channel no longer has {missing}"
        assert hasattr(channel.lock, "__aenter__")  # held while tags are registered
        assert isinstance(channel.delivery_tag, int)
        assert isinstance(channel.confirmations, dict)
        assert isinstance(channel.message_id_delivery_tag, dict)
        assert isinstance(channel.write_queue, asyncio.Queue)
        assert channel.publisher_confirms is True
        assert channel.max_content_size > 0

        exchange = await robust.declare_exchange("test.internals", auto_delete=True)
        queue = await robust.declare_queue(f"test.internals.{uuid.uuid4().hex[:8]}", exclusive=True)
        await queue.bind(exchange, "k")
        pages = [Publication("test.internals", "k", b'{"n":%d}' % n, f"m{n}") for n in range(3)]
        nowhere = Publication("test.internals-none", "k", b"{}", "lost")
        outcomes = await publish_confirmed(channel, pages)
        assert outcomes == [None, None, None]  # confirmed through the registered futures
        assert channel.confirmations == {}  # each confirmation resolved and removed
        assert channel.message_id_delivery_tag == {}
        declared = await robust.declare_queue(queue.name, passive=True)
        assert declared.declaration_result.message_count == 3
        failed = await publish_confirmed(channel, [nowhere])
        assert failed and failed[0] is not None  # no such exchange: the channel closes
    finally:
        await connection.close()


async def test_each_publication_gets_its_own_answer_in_one_page(amqp_vhost: str) -> None:
    """Confirmed, nacked (a full queue refusing publishes) and returned (unroutable,
    mandatory) messages of one call each get their own outcome, in order."""
    connection = await aio_pika.connect(amqp_vhost)
    try:
        robust = await connection.channel(publisher_confirms=True, on_return_raises=True)
        channel = cast(aiormq.Channel, await robust.get_underlay_channel())
        suffix = uuid.uuid4().hex[:8]
        await robust.declare_queue(f"open.{suffix}", exclusive=True)
        full = {"x-max-length": 0, "x-overflow": "reject-publish"}
        await robust.declare_queue(f"full.{suffix}", exclusive=True, arguments=full)
        kinds = ["open", "full", "nowhere", "open", "full", "open"]
        page = [
            Publication("", f"{kind}.{suffix}", b"{}", f"m{n}", mandatory=True)
            for n, kind in enumerate(kinds)
        ]
        outcomes = await publish_confirmed(channel, page, chunk=2)
        assert [o is None for o in outcomes] == [k == "open" for k in kinds]
        assert isinstance(outcomes[2], aiormq.exceptions.PublishError)  # returned unroutable
        assert channel.message_id_delivery_tag == {}
        assert await publish_confirmed(channel, page[:1]) == [None]  # the channel goes on
    finally:
        await connection.close()


async def test_a_call_given_up_leaves_the_channel_usable(amqp_vhost: str) -> None:
    """Cancelling a call while the broker confirms does not break the answers that
    arrive afterwards, nor the next call on the channel."""
    connection = await aio_pika.connect(amqp_vhost)
    try:
        robust = await connection.channel(publisher_confirms=True)
        channel = cast(aiormq.Channel, await robust.get_underlay_channel())
        queue = await robust.declare_queue(f"given-up.{uuid.uuid4().hex[:8]}", exclusive=True)
        page = [Publication("", queue.name, b"{}", f"m{n}") for n in range(2_000)]
        call = asyncio.ensure_future(publish_confirmed(channel, page))
        await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await publish_confirmed(channel, page[:3]) == [None, None, None]
        async with asyncio.timeout(10):
            while channel.confirmations:  # the given-up call's answers drain
                await asyncio.sleep(0.01)
    finally:
        await connection.close()


async def test_an_inline_consumer_takes_every_delivery_in_order(amqp_vhost: str) -> None:
    """Deliveries reach the receiver in order; one it fails on is logged and the rest go
    on; a consumer of the same channel aiormq serves itself is served as before."""
    connection = await aio_pika.connect(amqp_vhost)
    try:
        robust = await connection.channel(publisher_confirms=True)
        channel = cast(aiormq.Channel, await robust.get_underlay_channel())
        suffix = uuid.uuid4().hex[:8]
        inline = await robust.declare_queue(f"inline.{suffix}", exclusive=True)
        served = await robust.declare_queue(f"served.{suffix}", exclusive=True)
        got: list[bytes] = []
        other: list[bytes] = []

        def receive(message: DeliveredMessage) -> None:
            if message.body == b"3":
                raise ValueError("a receiver failing on one delivery")
            got.append(message.body)

        async def plain(message: DeliveredMessage) -> None:
            other.append(message.body)

        await consume_inline(channel, inline.name, receive, no_ack=True)
        await channel.basic_consume(served.name, plain, no_ack=True)
        bodies = [str(n).encode() for n in range(1_000)]
        pages = [Publication("", inline.name, b, f"i{n}") for n, b in enumerate(bodies)]
        pages += [Publication("", served.name, b"x", "s")]
        assert not any(await publish_confirmed(channel, pages))
        async with asyncio.timeout(10):
            while len(got) < 999 or not other:
                await asyncio.sleep(0.01)
        assert got == [b for b in bodies if b != b"3"]
        assert other == [b"x"]
    finally:
        await connection.close()


async def test_a_connection_made_after_install_reads_with_the_frame_reader(
    amqp_vhost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once installed, a new connection's frames go through ``contract.frames``: plain
    deliveries and ones with headers arrive whole, with their properties, in order; a
    large body spans frames; confirms answer as before."""
    monkeypatch.setattr(aiormq.connection, "FrameReceiver", aiormq.connection.FrameReceiver)
    frames.install()
    reads = 0
    read_frame = frames.read_frame

    def counted(head: bytes, rest: bytes) -> frames.Frame:
        nonlocal reads
        reads += 1
        return read_frame(head, rest)

    monkeypatch.setattr(frames, "read_frame", counted)
    connection = await aio_pika.connect(amqp_vhost)
    try:
        robust = await connection.channel(publisher_confirms=True)
        channel = cast(aiormq.Channel, await robust.get_underlay_channel())
        queue = await robust.declare_queue(f"frames.{uuid.uuid4().hex[:8]}", exclusive=True)
        got: list[DeliveredMessage] = []
        await consume_inline(channel, queue.name, got.append, no_ack=True)
        big = b"x" * (channel.max_content_size * 2 + 5)
        pages = [
            Publication("", queue.name, b"plain", "m-plain"),
            Publication("", queue.name, b"headed", "m-headed", {"x-croupier-code": "malformed"}),
            Publication("", queue.name, big, "m-big"),
        ]
        assert await publish_confirmed(channel, pages) == [None, None, None]
        async with asyncio.timeout(10):
            while len(got) < 3:
                await asyncio.sleep(0.01)
        assert [m.body for m in got] == [b"plain", b"headed", big]
        assert [m.header.properties.message_id for m in got] == ["m-plain", "m-headed", "m-big"]
        assert got[1].header.properties.headers == {"x-croupier-code": "malformed"}
        assert got[0].header.properties.content_type == "application/json"
        assert got[0].header.properties.delivery_mode == 2
        assert reads > 0
    finally:
        await connection.close()
