"""The in-process bus: the embedded default, behind the same port as RabbitMQ."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from croupier.bus import (
    DEAD_LETTER_EXCHANGE,
    TOO_LONG,
    UNROUTABLE,
    Bus,
    Delivery,
    Inbox,
    Outgoing,
    Parked,
    Refused,
    delivered,
    feed_inbox,
    unframeable,
)

Subscriber = Callable[[Outgoing], None]


def topic_matches(pattern: str, routing_key: str) -> bool:
    """AMQP topic matching: ``*`` is one word, ``#`` is zero or more words."""
    return _match(pattern.split("."), routing_key.split("."))


def _match(pattern: list[str], words: list[str]) -> bool:
    if not pattern:
        return not words
    if pattern[0] == "#":
        return _match(pattern[1:], words) or (bool(words) and _match(pattern, words[1:]))
    return bool(words) and pattern[0] in ("*", words[0]) and _match(pattern[1:], words[1:])


class MemoryBus(Bus):
    """Feed deliveries from an in-process inbox; settlement results to in-process subscribers.

    Unacknowledged deliveries stay pending (``unacked``) like a broker's; results whose
    routing key no subscriber binds are refused as unroutable, like ``mandatory`` publishes.
    """

    def __init__(self) -> None:
        self._inbox = feed_inbox()
        self._tags = 0
        self._consuming = False
        self._bindings: list[tuple[str, Subscriber]] = []
        self.unacked: dict[int, Delivery] = {}
        self.dead_letters: list[Outgoing] = []
        self.published = 0
        self._parked: Inbox[Parked] = Inbox()
        self.parked_done: list[Parked] = []

    # -- the studio side -------------------------------------------------------------------

    async def publish_feed(self, routing_key: str, body: bytes, message_id: str | None) -> None:
        """What the studio publishes to ``studio.feed``."""
        self._tags += 1
        self._inbox.put(delivered(body, self._tags, routing_key, message_id))

    def park(self, parked: Parked) -> None:
        """A copy of a dead letter for the recorder, as the broker's record queue hands it
        over (the same copy twice: a redelivery whose acknowledgement was lost)."""
        self._parked.put(parked)

    def subscribe(self, pattern: str, subscriber: Subscriber) -> None:
        """Bind a settlement subscriber (a wallet) to a routing pattern."""
        self._bindings.append((pattern, subscriber))

    @property
    def backlog(self) -> int:
        """Deliveries not yet taken by the consumer."""
        return len(self._inbox)

    # -- the port --------------------------------------------------------------------------

    async def connect(self) -> None:
        self._consuming = True

    async def close(self) -> None:
        self._consuming = False

    @property
    def connected(self) -> bool:
        return True

    @property
    def attached(self) -> bool:
        return self._consuming

    async def stop_consuming(self) -> None:
        self._consuming = False

    async def next_batch(self, max_messages: int, linger: float) -> list[Delivery]:
        batch = await self._inbox.take(max_messages, linger)
        self.unacked.update((d.tag, d) for d in batch)
        return batch

    async def next_parked(self, max_messages: int) -> list[Parked]:
        return await self._parked.take(max_messages, 0.01)

    async def finish_parked(self, batch: Sequence[Parked]) -> None:
        self.parked_done += batch

    async def finish_batch(self, batch: Sequence[Delivery]) -> None:
        for delivery in batch:
            self.unacked.pop(delivery.tag, None)

    async def finish_each(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            assert self.unacked.pop(delivery.tag, None) is not None, "acknowledged once"

    async def publish(self, messages: Sequence[Outgoing]) -> list[Refused]:
        refused = []
        for message in messages:
            too_long = unframeable(message)
            if too_long:
                refused.append(Refused(message.message_id, TOO_LONG, too_long))
                continue
            if message.exchange == DEAD_LETTER_EXCHANGE:
                self.dead_letters.append(message)
                continue
            targets = [s for p, s in self._bindings if topic_matches(p, message.routing_key)]
            if not targets:
                reason = f"no queue is bound for routing key {message.routing_key!r}"
                refused.append(Refused(message.message_id, UNROUTABLE, reason))
            for subscriber in targets:
                subscriber(message)
            self.published += bool(targets)
        return refused
