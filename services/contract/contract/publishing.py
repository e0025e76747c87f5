"""Publishing persistent JSON messages over AMQP 0-9-1 with publisher confirms, a page of
messages per socket write: the feed's transport (docs/feed.md) as the studio publishes it
and the path croupier publishes its results and dead letters on.

It works on aiormq's channel directly and does, for a whole page, what
``channel.basic_publish`` does for one message: delivery tags and confirmation futures
registered under the channel lock, returns matched by ``message_id``. The aiormq
attributes it relies on are held by a test (``tests/unit/contract/test_publishing.py``).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import aiormq
from aiormq.abc import ChannelFrame
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

#: AMQP's limit on a short string (exchange, routing key, message id), in bytes.
SHORTSTR_MAX: Final = 255
#: The aiormq.Channel attributes :func:`publish_confirmed` uses, beyond its public API.
CHANNEL_INTERNALS: Final = (
    "lock",
    "delivery_tag",
    "confirmations",
    "message_id_delivery_tag",
    "write_queue",
    "create_future",
    "publisher_confirms",
    "max_content_size",
    "number",
    "is_closed",
)
JSON: Final = "application/json"
PERSISTENT: Final = 2
#: Publishes per socket write; between writes the loop sends them and reads confirms.
WRITE_CHUNK: Final = 500


@dataclass(frozen=True, slots=True)
class Publication:
    """One persistent JSON message for :func:`publish_confirmed`."""

    exchange: str
    routing_key: str
    body: bytes
    message_id: str
    headers: dict[str, Any] | None = None
    mandatory: bool = False

    def frames(self, channel: int, max_content: int) -> bytes:
        """The method, header and body frames of this publish, as they go on the wire.

        Encoded here for the plain case (no headers): pamqp's general encoder costs about
        ten times as much per message. Messages with headers go through pamqp.
        """
        # Guarded by `python -m bench service` ("shared hand, 10,000 results").
        if self.headers is not None:
            properties = json_properties(self.message_id, self.headers)
            frames: list[Any] = [
                spec.Basic.Publish(
                    exchange=self.exchange, routing_key=self.routing_key, mandatory=self.mandatory
                ),
                ContentHeader(properties=properties, body_size=len(self.body)),
                *_body_frames(self.body, max_content),
            ]
            return ChannelFrame.marshall(channel, frames).payload
        method = b"".join(
            (
                _PUBLISH,
                _shortstr(self.exchange),
                _shortstr(self.routing_key),
                b"\x01" if self.mandatory else b"\x00",
            )
        )
        header = b"".join(
            (_HEADER.pack(60, 0, len(self.body), _PLAIN_FLAGS), _JSON, _shortstr(self.message_id))
        )
        parts = [_frame(1, channel, method), _frame(2, channel, header)]
        body = self.body
        parts += [
            _frame(3, channel, body[i : i + max_content]) for i in range(0, len(body), max_content)
        ]
        return b"".join(parts)


# AMQP 0-9-1 framing: type, channel, size, payload, frame end.
_FRAME_HEAD = struct.Struct(">BHI")
_FRAME_END = b"\xce"
# Basic.Publish (class 60, method 40) and its reserved short.
_PUBLISH = struct.pack(">HHH", 60, 40, 0)
# Content header: class, weight, body size, property flags.
_HEADER = struct.Struct(">HHQH")
# content_type (bit 15), delivery_mode (bit 12), message_id (bit 7), in that order.
_PLAIN_FLAGS = (1 << 15) | (1 << 12) | (1 << 7)
_JSON = bytes([len(JSON)]) + JSON.encode() + bytes([PERSISTENT])


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return b"".join((_FRAME_HEAD.pack(kind, channel, len(payload)), payload, _FRAME_END))


def _shortstr(value: str) -> bytes:
    data = value.encode()
    if len(data) > SHORTSTR_MAX:
        raise ValueError(f"AMQP short string longer than 255 bytes: {value[:40]!r}...")
    return bytes([len(data)]) + data


async def publish_confirmed(
    channel: aiormq.Channel, publications: Sequence[Publication], *, chunk: int = WRITE_CHUNK
) -> list[BaseException | None]:
    """Publish in order on a confirming channel, ``chunk`` messages per socket write.

    Returns one outcome per publication once the broker has answered all of them: None when
    confirmed, :class:`aiormq.exceptions.PublishError` when a ``mandatory`` one was returned
    unroutable, another exception when it was nacked or the channel closed first.

    Guarded by `python -m bench service` ("shared hand, 10,000 results" and "studio
    publisher alone").
    This does what ``channel.basic_publish`` does for one message (delivery tags and
    confirmation futures registered under the channel lock, returns matched by
    ``message_id``) for a whole page at once, so a page costs a few writes rather than one
    write, one task and one lock round per message. ``message_id`` s of mandatory
    publications must be distinct within a call, as the broker's returns are matched by them.
    """
    if not channel.publisher_confirms:
        raise ValueError("publish_confirmed needs a channel with publisher confirms")
    # Encoded before anything is registered: a message that cannot be encoded must not
    # leave a delivery tag behind that the broker never confirms.
    encoded = [p.frames(channel.number, channel.max_content_size) for p in publications]
    confirmations: list[asyncio.Future[Any]] = []
    returnable: list[tuple[str, int]] = []
    try:
        async with channel.lock:
            for start in range(0, len(publications), chunk):
                if channel.is_closed:
                    raise aiormq.exceptions.ChannelInvalidStateError(f"{channel!r} closed")
                for p in publications[start : start + chunk]:
                    channel.delivery_tag += 1
                    tag = channel.delivery_tag
                    confirmation = channel.create_future()
                    channel.confirmations[tag] = confirmation
                    confirmations.append(confirmation)
                    if p.mandatory:
                        channel.message_id_delivery_tag[p.message_id] = tag
                        returnable.append((p.message_id, tag))
                payload = b"".join(encoded[start : start + chunk])
                await channel.write_queue.put(ChannelFrame(payload, should_close=False))
                await asyncio.sleep(0)  # the writer sends this chunk while the next is built
        outcomes = await asyncio.gather(*confirmations, return_exceptions=True)
    finally:
        for message_id, tag in returnable:
            if channel.message_id_delivery_tag.get(message_id) == tag:
                del channel.message_id_delivery_tag[message_id]
    return [o if isinstance(o, BaseException) else None for o in outcomes]


def _body_frames(body: bytes, limit: int) -> list[ContentBody]:
    return [ContentBody(body[i : i + limit]) for i in range(0, len(body), limit)]


def json_properties(
    message_id: str, headers: dict[str, Any] | None = None
) -> spec.Basic.Properties:
    """Persistent JSON message properties."""
    return spec.Basic.Properties(
        content_type=JSON, delivery_mode=PERSISTENT, message_id=message_id or None, headers=headers
    )
