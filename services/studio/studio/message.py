"""One feed message as the studio sends it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FeedMessage:
    """A feed event ready to send: its routing key, JSON body and the event it encodes.

    ``event`` and ``event_id`` are None for a torn line (the ``malformed`` fault), whose
    ``body`` is not JSON. ``fault`` names the fault this message carries, if any; it is
    the simulator's own note for tests and summaries and is never sent.
    """

    routing_key: str
    body: bytes
    event_id: str | None
    event: dict[str, Any] | None
    table_id: str
    fault: str | None = None

    @classmethod
    def of(cls, event: dict[str, Any], fault: str | None = None) -> FeedMessage:
        """The message of one feed event."""
        table_id = event["table_id"]
        return cls(
            routing_key=f"{table_id}.{event['event_type']}",
            body=json.dumps(event, separators=(",", ":")).encode(),
            event_id=event["event_id"],
            event=event,
            table_id=table_id,
            fault=fault,
        )
