"""Dead letters through the outbox: a rejection and its dead letter commit together.

A rejected feed message is recorded in the ledger, and in the same transaction an outbox
message to ``croupier.dead-letter`` carries its bytes, original routing key and message id,
code and reason. The relay publishes it like a settlement result, with confirms, and marks
it published; a crash between commit and publish, or a publishing channel that is down,
only delays it. Its outbox id is derived from the rejection fact and the delivery, so a
redelivered message that is rejected again writes nothing new: each rejection recorded in
the ledger is dead-lettered once (at least once on the wire, with the same message id).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any, Final

from croupier.bus import CODE_HEADER, DEAD_LETTER_EXCHANGE, REASON_HEADER, Outgoing
from croupier.ledger import OutboxMessage, PendingMessage

ORIGINAL_ROUTING_KEY: Final = "x-original-routing-key"
#: The dead-letter reason header is cut here (AMQP headers share one frame with the rest).
MAX_REASON_HEADER: Final = 4000


def dead_letter(
    fact_key: str,
    body: bytes,
    routing_key: str,
    message_id: str | None,
    code: str,
    reason: str,
) -> OutboxMessage:
    """The outbox message that dead-letters ``body``, rejected as ledger fact ``fact_key``."""
    delivery = f"{fact_key}\x00{routing_key}\x00{message_id or ''}".encode()
    outbox_id = "dead-letter:" + hashlib.sha256(delivery).hexdigest()[:40]
    letter: dict[str, Any] = {
        "fact": fact_key,
        "routing_key": routing_key,
        "message_id": message_id,
        "code": code,
        "reason": reason,
    }
    try:
        letter["text"] = body.decode("utf-8")
    except UnicodeDecodeError:
        letter["base64"] = base64.b64encode(body).decode("ascii")
    return OutboxMessage(
        outbox_id, DEAD_LETTER_EXCHANGE, routing_key or "unknown", letter, fact_key
    )


def outgoing(message: PendingMessage) -> Outgoing:
    """What the relay publishes for a pending dead letter: the original bytes, with why."""
    letter: Mapping[str, Any] = message.body
    text = letter.get("text")
    raw = text.encode("utf-8") if isinstance(text, str) else base64.b64decode(letter["base64"])
    headers = {
        CODE_HEADER: str(letter["code"]),
        REASON_HEADER: str(letter["reason"])[:MAX_REASON_HEADER],
        ORIGINAL_ROUTING_KEY: str(letter["routing_key"]),
    }
    return Outgoing(
        message.message_id,
        message.routing_key,
        letter,
        exchange=message.exchange,
        raw=raw,
        headers=headers,
        amqp_message_id=letter.get("message_id") or "",
    )
