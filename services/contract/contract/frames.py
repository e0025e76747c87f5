"""Reading AMQP frames off a broker connection, the frames of a plain delivery decoded here.

aiormq reads each frame through a BytesIO, a lock and three reads, then pamqp decodes it
field by field: about 20 us for the three frames of a delivery, a fifth of the service's
CPU on a drained feed. :class:`FrameReader` reads a frame in two reads and decodes the
frames of a plain delivery itself, into the very objects pamqp builds: ``Basic.Deliver``,
a content header whose properties are at most content type, delivery mode and message id
(what Croupier and the studio publish), and the body. Any other frame, and any frame the
fast path cannot read, goes to pamqp as before, so what comes out is always what pamqp
would give. Guarded by tests/unit/contract/test_frames.py and ``python -m bench service``.

:func:`install` makes every aiormq connection opened afterwards in this process read this
way: every ``AmqpBus`` installs it when made, and ``bench service``'s wallet before it
connects.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import aiormq.connection
import aiormq.exceptions
import pamqp.exceptions
import pamqp.frame
from aiormq.exceptions import AMQPConnectionError, ProtocolSyntaxError
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

_METHOD, _HEADER, _BODY = 1, 2, 3
_DELIVER: Final = b"\x00\x3c\x00\x3c"  # Basic (60), Deliver (60)
_BASIC: Final = 60
# Property flags: content_type (bit 15), delivery_mode (bit 12), message_id (bit 7).
_CONTENT_TYPE, _DELIVERY_MODE, _MESSAGE_ID = 1 << 15, 1 << 12, 1 << 7
_PLAIN: Final = _CONTENT_TYPE | _DELIVERY_MODE | _MESSAGE_ID
_PROPERTY_DEFAULTS: Final = tuple(
    (name, getattr(spec.Basic.Properties(), name)) for name in spec.Basic.Properties.__slots__
)

Frame = tuple[int, int, Any]


class FrameReader(aiormq.connection.FrameReceiver):
    """aiormq's frame receiver, reading each frame in two reads and decoding the frames
    of a plain delivery directly."""

    async def get_frame(self) -> Frame:
        reader = self.reader
        if reader.at_eof():
            del self.reader
            raise StopAsyncIteration
        try:
            head = await reader.readexactly(7)
            if not self.started and head.startswith(b"AMQP"):
                raise ProtocolSyntaxError("Unexpected AMQP protocol header")
            self.started = True
            rest = await reader.readexactly(int.from_bytes(head[3:7], "big") + 1)
        except asyncio.IncompleteReadError as error:
            raise AMQPConnectionError(
                "Server connection unexpectedly closed. "
                f"Read {len(error.partial)} bytes but {error.expected} bytes expected"
            ) from error
        except (ConnectionError, OSError) as error:
            raise AMQPConnectionError(f"Server communication error: {error!r}") from error
        return read_frame(head, rest)


def read_frame(head: bytes, rest: bytes) -> Frame:
    """(bytes read, channel, frame) of the frame whose 7-byte header is ``head`` and whose
    payload and end octet are ``rest``: as ``pamqp.frame.unmarshal`` gives it."""
    kind, channel = head[0], int.from_bytes(head[1:3], "big")
    if rest[-1:] == b"\xce":
        try:
            frame = _plain(kind, rest)
        except (IndexError, UnicodeDecodeError):
            frame = None
        if frame is not None:
            return 7 + len(rest), channel, frame
    try:
        return pamqp.frame.unmarshal(head + rest)
    except pamqp.exceptions.PAMQPException as error:
        raise aiormq.exceptions.InvalidFrameError(str(error)) from error


def _plain(kind: int, rest: bytes) -> Any:
    """The frame, when it is one of a plain delivery's; None otherwise."""
    if kind == _BODY and len(rest) > 1:  # pamqp refuses an empty one
        return ContentBody(rest[:-1])
    if kind == _METHOD and rest[:4] == _DELIVER:
        return _deliver(rest)
    if kind == _HEADER:
        return _header(rest)
    return None


def _deliver(rest: bytes) -> spec.Basic.Deliver | None:
    at = 4
    consumer_tag, at = _shortstr(rest, at)
    delivery_tag = int.from_bytes(rest[at : at + 8], "big", signed=True)  # as pamqp reads it
    redelivered = bool(rest[at + 8] & 1)
    exchange, at = _shortstr(rest, at + 9)
    routing_key, at = _shortstr(rest, at)
    if at != len(rest) - 1:
        return None
    deliver = spec.Basic.Deliver.__new__(spec.Basic.Deliver)
    deliver.consumer_tag = consumer_tag
    deliver.delivery_tag = delivery_tag
    deliver.redelivered = redelivered
    deliver.exchange = exchange
    deliver.routing_key = routing_key
    return deliver


def _header(rest: bytes) -> ContentHeader | None:
    class_id = int.from_bytes(rest[0:2], "big")
    flags = int.from_bytes(rest[12:14], "big")
    if class_id != _BASIC or flags & ~_PLAIN:
        return None
    properties = spec.Basic.Properties.__new__(spec.Basic.Properties)
    for name, value in _PROPERTY_DEFAULTS:
        setattr(properties, name, value)
    at = 14
    if flags & _CONTENT_TYPE:
        properties.content_type, at = _shortstr(rest, at)
    if flags & _DELIVERY_MODE:
        properties.delivery_mode, at = rest[at], at + 1
    if flags & _MESSAGE_ID:
        properties.message_id, at = _shortstr(rest, at)
    if at != len(rest) - 1:
        return None
    weight, body_size = int.from_bytes(rest[2:4], "big"), int.from_bytes(rest[4:12], "big")
    header = ContentHeader(weight, body_size, properties)
    header.class_id = class_id  # type: ignore[assignment]  # pamqp sets it so when reading
    return header


def _shortstr(data: bytes, at: int) -> tuple[str, int]:
    end = at + 1 + data[at]
    if end > len(data):
        raise IndexError("a short string past the frame")
    return data[at + 1 : end].decode(), end


def install() -> None:
    """Read frames with :class:`FrameReader` on every aiormq connection opened from now on
    in this process (idempotent)."""
    aiormq.connection.FrameReceiver = FrameReader  # type: ignore[misc]
