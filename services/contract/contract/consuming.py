"""Consuming over AMQP 0-9-1 with each delivery handed to a plain function as it is read:
how croupier takes its feed (docs/feed.md), and how a wallet can take its results.

aiormq runs a consumer callback in a task of its own per delivery, created, kept in the
channel's and the connection's future stores, then awaited: a quarter of the CPU it takes
to read a delivery off the socket. :func:`consume_inline` has the channel's reader call the
function directly instead, in delivery order, for the consumer tags it registered; every
other consumer of the channel is served as aiormq serves it. The aiormq attributes it
relies on are held by a test (``tests/integration/test_aiormq_internals.py``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, Final

import aiormq
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

log = logging.getLogger(__name__)

#: The aiormq.Channel attributes :func:`consume_inline` uses, beyond its public API.
CHANNEL_INTERNALS: Final = ("_on_deliver_frame", "_read_content", "_Channel__get_content_header")

#: What a delivery is handed to; it must not block (it runs in the channel's reader).
Receiver = Callable[[DeliveredMessage], None]


async def consume_inline(
    channel: aiormq.Channel, queue: str, receive: Receiver, *, no_ack: bool = False
) -> str:
    """Consume ``queue`` on ``channel``, each delivery handed to ``receive`` as the channel
    reads it (acknowledged by the caller unless ``no_ack``); the consumer tag.

    The tag is chosen and registered before the broker is asked, so no delivery can reach
    the consumer before ``receive`` does. An exception ``receive`` raises is logged, as
    aiormq logs a failed consumer callback; the channel goes on.
    """
    tag = f"inline.{uuid.uuid4().hex}"
    receivers = _receivers(channel)
    receivers[tag] = receive
    try:
        await channel.basic_consume(queue, _unused, no_ack=no_ack, consumer_tag=tag)
    except BaseException:
        del receivers[tag]
        raise
    return tag


def _receivers(channel: aiormq.Channel) -> dict[str, Receiver]:
    """The inline receivers of ``channel`` by consumer tag, its reader set up to call them."""
    receivers: dict[str, Receiver] | None = vars(channel).get("_inline_receivers")
    if receivers is not None:
        return receivers
    receivers = {}
    served = channel._on_deliver_frame
    content_header = channel._Channel__get_content_header  # type: ignore[attr-defined]

    async def on_deliver(frame: spec.Basic.Deliver) -> None:
        receive = receivers.get(frame.consumer_tag or "")
        if receive is None:
            await served(frame)
            return
        message = await channel._read_content(frame, await content_header())
        try:
            receive(message)
        except Exception:
            log.exception("consumer failed on a delivery")

    setattr(channel, "_inline_receivers", receivers)  # noqa: B010
    setattr(channel, "_on_deliver_frame", on_deliver)  # noqa: B010 (an instance's method)
    return receivers


async def _unused(message: Any) -> None:  # pragma: no cover (deliveries go to the receiver)
    raise AssertionError("an inline consumer's deliveries go to its receiver")
