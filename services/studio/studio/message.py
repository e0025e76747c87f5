"""One feed message as the studio sends it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FeedMessage:
    """A feed event ready to send: its routing key, JSON body and the event it encodes.

    ``event`` is None for a torn line (the ``malformed`` fault), whose ``body`` is not JSON;
    its ``event_id`` is that of the event it tore, as the studio's sender knew it (it goes out
    as the AMQP ``message_id``). ``fault`` names the fault this message carries, if any; it
    is the simulator's own note for tests and summaries and is never sent.
    """

    routing_key: str
    body: bytes
    event_id: str
    event: dict[str, Any] | None
    table_id: str
    fault: str | None = None
