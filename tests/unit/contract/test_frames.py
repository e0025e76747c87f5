"""contract.frames: every frame reads as pamqp reads it, the frames of a plain delivery
decoded directly, and the connection's failures surface as aiormq's."""

from __future__ import annotations

import asyncio
from typing import Any

import aiormq.connection
import pamqp.frame
import pytest
from aiormq.exceptions import AMQPConnectionError, ProtocolSyntaxError
from hypothesis import given
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader
from pamqp.heartbeat import Heartbeat

from contract.frames import FrameReader, install, read_frame

short = st.text(max_size=40).filter(lambda s: len(s.encode()) < 256)
exchange_name = st.from_regex(r"[A-Za-z0-9_.:-]{0,40}", fullmatch=True)


def _state(frame: Any) -> Any:
    """What a frame holds, to compare two decodings of it."""
    if isinstance(frame, ContentHeader):
        return (
            type(frame),
            frame.class_id,
            frame.weight,
            frame.body_size,
            _state(frame.properties),
        )
    if isinstance(frame, ContentBody):
        return (type(frame), frame.value)
    slots = getattr(type(frame), "__slots__", ())
    return (type(frame), {name: getattr(frame, name) for name in slots} or vars(frame))


def _read(wire: bytes) -> tuple[int, int, Any]:
    return read_frame(wire[:7], wire[7:])


def _same_as_pamqp(wire: bytes) -> None:
    mine, theirs = _read(wire), pamqp.frame.unmarshal(wire)
    assert mine[:2] == theirs[:2]
    assert _state(mine[2]) == _state(theirs[2])


@given(
    consumer_tag=short,
    delivery_tag=st.integers(0, 2**63 - 1),
    redelivered=st.booleans(),
    exchange=exchange_name,
    routing_key=short,
    channel=st.integers(1, 2047),
)
def test_a_deliver_frame_reads_as_pamqp_reads_it(
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    channel: int,
) -> None:
    deliver = spec.Basic.Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)
    _same_as_pamqp(pamqp.frame.marshal(deliver, channel))


@given(
    content_type=st.none() | short,
    delivery_mode=st.none() | st.sampled_from([1, 2]),
    message_id=st.none() | short,
    headers=st.none() | st.dictionaries(short, st.integers(0, 1000), max_size=3),
    timestamp=st.booleans(),
    body_size=st.integers(0, 2**40),
)
def test_a_content_header_reads_as_pamqp_reads_it(
    content_type: str | None,
    delivery_mode: int | None,
    message_id: str | None,
    headers: dict[str, int] | None,
    timestamp: bool,
    body_size: int,
) -> None:
    """Plain properties are decoded here; with headers or a timestamp, pamqp decodes."""
    properties = spec.Basic.Properties(
        content_type=content_type,
        delivery_mode=delivery_mode,
        message_id=message_id,
        headers=headers,
        app_id="studio" if timestamp else None,
    )
    _same_as_pamqp(pamqp.frame.marshal(ContentHeader(0, body_size, properties), 3))


@given(st.binary(min_size=1, max_size=300))
def test_a_body_frame_reads_as_pamqp_reads_it(body: bytes) -> None:
    _same_as_pamqp(pamqp.frame.marshal(ContentBody(body), 5))


def test_an_empty_body_frame_is_refused_as_pamqp_refuses_it() -> None:
    with pytest.raises(aiormq.exceptions.InvalidFrameError, match="No frame size"):
        _read(b"\x03\x00\x05\x00\x00\x00\x00\xce")


@pytest.mark.parametrize(
    "frame",
    [
        Heartbeat(),
        spec.Basic.Ack(7, multiple=True),
        spec.Basic.Return(312, "NO_ROUTE", "croupier.settlements", "EUR.p1"),
        spec.Channel.Close(406, "PRECONDITION_FAILED", 60, 40),
        spec.Basic.ConsumeOk("ctag"),
    ],
)
def test_other_frames_go_to_pamqp(frame: Any) -> None:
    _same_as_pamqp(pamqp.frame.marshal(frame, 0 if isinstance(frame, Heartbeat) else 1))


def test_a_short_string_running_past_its_frame_goes_to_pamqp_and_is_refused() -> None:
    wire = bytearray(pamqp.frame.marshal(spec.Basic.Deliver("c", 1, False, "x", "rk"), 1))
    wire[11] = 200  # the consumer tag's length, far past the frame's end
    with pytest.raises(aiormq.exceptions.InvalidFrameError):
        _read(bytes(wire))


def _deliveries(count: int) -> bytes:
    frames = []
    for n in range(count):
        body = f'{{"n":{n}}}'.encode()
        properties = spec.Basic.Properties(
            content_type="application/json", delivery_mode=2, message_id=f"m{n}"
        )
        frames += [
            pamqp.frame.marshal(spec.Basic.Deliver("ctag", n + 1, False, "studio.feed", "t.a"), 1),
            pamqp.frame.marshal(ContentHeader(0, len(body), properties), 1),
            pamqp.frame.marshal(ContentBody(body), 1),
        ]
    return b"".join(frames)


async def _all(reader: asyncio.StreamReader) -> list[Any]:
    return [frame async for frame in FrameReader(reader)]


async def test_frames_split_across_reads_come_out_whole_and_in_order() -> None:
    wire = _deliveries(50)
    reader = asyncio.StreamReader()

    async def feed() -> None:
        for start in range(0, len(wire), 37):
            if start:
                await asyncio.sleep(0)
            reader.feed_data(wire[start : start + 37])
        reader.feed_eof()  # with the last bytes: a clean end, as a closing connection

    frames, _ = await asyncio.gather(_all(reader), feed())
    expected = []
    at = 0
    while at < len(wire):
        weight, channel, frame = pamqp.frame.unmarshal(wire[at:])
        expected.append((weight, channel, _state(frame)))
        at += weight
    assert [(w, c, _state(f)) for w, c, f in frames] == expected


async def test_a_connection_cut_in_a_frame_is_a_connection_error() -> None:
    wire = _deliveries(2)
    reader = asyncio.StreamReader()
    reader.feed_data(wire[:-5])
    reader.feed_eof()
    with pytest.raises(AMQPConnectionError, match="unexpectedly closed"):
        await _all(reader)


async def test_a_protocol_header_first_is_refused() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"AMQP\x00\x00\x09\x01")
    reader.feed_eof()
    with pytest.raises(ProtocolSyntaxError):
        await _all(reader)


def test_install_makes_new_connections_read_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiormq.connection, "FrameReceiver", aiormq.connection.FrameReceiver)
    install()
    install()
    assert aiormq.connection.FrameReceiver is FrameReader
