"""Publishing persistent JSON messages over AMQP 0-9-1 with publisher confirms, a page of
messages per socket write: the feed's transport (docs/feed.md) as the studio publishes it
and the path croupier publishes its results and dead letters on.

It works on aiormq's channel directly and does, for a whole page, what
``channel.basic_publish`` does for one message: delivery tags registered under the channel
lock, returns matched by ``message_id``. Where ``basic_publish`` registers a future per
message, a page registers light confirmations that share one future (``_Answers``), so the
publisher's CPU is spent on frames, not on futures. The aiormq attributes it relies on are
held by a test (``tests/integration/test_aiormq_internals.py``).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import aiormq
from aiormq.abc import ChannelFrame
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

log = logging.getLogger(__name__)

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
    "_confirm_delivery",
    "_on_confirm_frame",
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
    This does what ``channel.basic_publish`` does for one message (delivery tags
    registered under the channel lock, returns matched by ``message_id``) for a whole page
    at once, so a page costs a few writes and one future rather than one write, one task,
    one future and one lock round per message. ``message_id`` s of mandatory
    publications must be distinct within a call, as the broker's returns are matched by them.
    """
    if not channel.publisher_confirms:
        raise ValueError("publish_confirmed needs a channel with publisher confirms")
    if not publications:
        return []
    _confirm_in_tag_order(channel)
    # Encoded before anything is registered: a message that cannot be encoded must not
    # leave a delivery tag behind that the broker never confirms.
    encoded = [p.frames(channel.number, channel.max_content_size) for p in publications]
    # One future per call, in the channel's store so that closing the channel fails it.
    answers = _Answers(len(publications), channel.create_future())
    returnable: list[tuple[str, int]] = []
    try:
        async with channel.lock:
            for start in range(0, len(publications), chunk):
                if channel.is_closed:
                    raise aiormq.exceptions.ChannelInvalidStateError(f"{channel!r} closed")
                for index in range(start, min(start + chunk, len(publications))):
                    channel.delivery_tag += 1
                    tag = channel.delivery_tag
                    channel.confirmations[tag] = cast(Any, _Confirmation(answers, index))
                    if publications[index].mandatory:
                        message_id = publications[index].message_id
                        channel.message_id_delivery_tag[message_id] = tag
                        returnable.append((message_id, tag))
                payload = b"".join(encoded[start : start + chunk])
                await channel.write_queue.put(ChannelFrame(payload, should_close=False))
                await asyncio.sleep(0)  # the writer sends this chunk while the next is built
        return await answers.all()
    finally:
        for message_id, tag in returnable:
            if channel.message_id_delivery_tag.get(message_id) == tag:
                del channel.message_id_delivery_tag[message_id]


def _confirm_in_tag_order(channel: aiormq.Channel) -> None:
    """Make ``channel`` answer a multiple ack by taking its confirmations from the oldest
    up to the acked tag. aiormq walks every outstanding confirmation for each multiple ack
    and schedules a callback for each one covered: with a page of N in flight, each of the
    broker's ack frames cost O(N). Confirmations are registered in tag order, so the
    covered ones are the oldest (a returned message's placeholder, put back at the end, is
    taken once the tags before it are)."""
    if "_on_confirm_frame" in vars(channel):
        return

    async def on_confirm(frame: spec.Basic.Ack | spec.Basic.Nack) -> None:
        confirmations = channel.confirmations
        if frame.delivery_tag not in confirmations:
            log.error("unexpected confirmation frame from the broker: %r", frame)
            return
        if not frame.multiple:
            channel._confirm_delivery(frame.delivery_tag, frame)
            return
        while confirmations:
            tag = next(iter(confirmations))
            if tag > frame.delivery_tag:
                return
            channel._confirm_delivery(tag, frame)

    setattr(channel, "_on_confirm_frame", on_confirm)  # noqa: B010 (an instance's method)


class _Answers:
    """The broker's answer to each publication of one call, by its index: None when
    confirmed, the exception otherwise; ``whole`` resolves when every one is in."""

    __slots__ = ("left", "outcomes", "whole")

    def __init__(self, count: int, whole: asyncio.Future[Any]) -> None:
        self.outcomes: list[BaseException | object | None] = [_UNANSWERED] * count
        self.left = count
        self.whole = whole

    def answer(self, index: int, outcome: BaseException | None) -> None:
        self.outcomes[index] = outcome
        self.left -= 1
        if self.left == 0 and not self.whole.done():
            self.whole.set_result(None)

    async def all(self) -> list[BaseException | None]:
        """Every outcome, once all are in; those the channel closed on get its reason."""
        failure: BaseException | None = None
        try:
            await self.whole
        except Exception as error:  # the channel closed: rejected by its store
            failure = error
        return [
            failure if o is _UNANSWERED else cast(BaseException | None, o) for o in self.outcomes
        ]


class _Confirmation:
    """What the channel holds for one delivery tag in place of a future: aiormq calls
    ``set_result`` (an ack, or a returned message when returns do not raise) or
    ``set_exception`` (a nack, a return) on it, as on the futures ``basic_publish``
    registers. A whole page shares one future: a future per message, kept in the
    channel's and the connection's stores, cost the publisher a quarter of its CPU."""

    __slots__ = ("answered", "answers", "index")

    def __init__(self, answers: _Answers, index: int) -> None:
        self.answers = answers
        self.index = index
        self.answered = False

    def done(self) -> bool:
        return self.answered

    def cancelled(self) -> bool:
        return False

    def set_result(self, result: object) -> None:
        failure = None
        if not isinstance(result, spec.Basic.Ack):
            failure = aiormq.exceptions.DeliveryError(cast(Any, result), cast(Any, None))
        self._answer(failure)

    def set_exception(self, exception: BaseException) -> None:
        self._answer(exception)

    def _answer(self, outcome: BaseException | None) -> None:
        if not self.answered:
            self.answered = True
            self.answers.answer(self.index, outcome)


_UNANSWERED: Final = object()


def _body_frames(body: bytes, limit: int) -> list[ContentBody]:
    return [ContentBody(body[i : i + limit]) for i in range(0, len(body), limit)]


def json_properties(
    message_id: str, headers: dict[str, Any] | None = None
) -> spec.Basic.Properties:
    """Persistent JSON message properties."""
    return spec.Basic.Properties(
        content_type=JSON, delivery_mode=PERSISTENT, message_id=message_id or None, headers=headers
    )
