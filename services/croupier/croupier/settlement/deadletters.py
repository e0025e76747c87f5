"""Dead letters through the outbox: a rejection and its dead letter commit together.

A rejected feed message is recorded in the ledger, and in the same transaction an outbox
message to ``croupier.dead-letter`` carries its bytes, original routing key and message id,
code and reason. The relay publishes it like a settlement result, with confirms, and marks
it published; a crash between commit and publish, or a publishing channel that is down,
only delays it. Its outbox id is derived from the rejection fact and the delivery, so a
redelivered message that is rejected again writes nothing new: each rejection recorded in
the ledger is dead-lettered once (at least once on the wire, with the same message id).

The rejection fact records the delivery its dead letter carries (routing key and AMQP
message id: the delivery's for a message the contract refuses, the feed contract's for an
event the rules refuse), so each rejection the live service records calls for exactly one
dead letter. ``letter_problem`` is the rule the relay and ``verify`` hold a dead letter to:
it must be exactly ``dead_letter`` of the chained rejection it names (fact key, delivery,
code and reason), and its bytes must be the rejected message's: of a contract rejection,
the bytes whose SHA-256 keys the fact; of a rule rejection, an event whose fingerprint the
fact records. ``LETTERS`` gives ``verify`` that rule and which rejections call for a letter
(a missing one is reported). Rejections written before deliveries were recorded name none:
their letters are bound to the delivery by the outbox id alone, and none is called for.

Bounded whatever the message's size: the dead letter of a message over the contract's
maximum carries its first ``KEPT_BYTES`` only, with its full ``size`` and ``sha256`` (in
the letter, and published in the ``x-original-size`` and ``x-original-sha256`` headers),
as the rejection fact keeps it; ``croupier redrive`` never re-publishes such a cut. A copy
the broker dead-lettered over that maximum arrives cut (``croupier.bus.keep``) and is
recorded as its first ``KEPT_BYTES`` with its size and SHA-256 too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic_core import from_json

from contract.codes import BROKER_REASONS, RejectionCode
from contract.events import read_event
from contract.feed import MAX_BODY_BYTES, ContractError
from croupier.bus import (
    CODE_HEADER,
    DEAD_LETTER_EXCHANGE,
    KEPT_BYTES,
    ORIGINAL_ROUTING_KEY_HEADER,
    REASON_HEADER,
    SHA256_HEADER,
    SIZE_HEADER,
    Outgoing,
    Oversize,
    Parked,
)
from croupier.ledger import Ledger, OutboxMessage, PendingMessage, RecordedEvent, StreamAppend
from croupier.ledger.audit import LetterRule
from croupier.ledger.chain import ChainRow
from croupier.settlement.facts import Fact
from croupier.settlement.round import REJECTED, received

#: The ledger stream and fact type of what the broker itself dead-lettered.
DEAD_LETTERS_STREAM: Final = "dead-letters"
DEAD_LETTERED: Final = "feed.dead_lettered"

ORIGINAL_ROUTING_KEY: Final = ORIGINAL_ROUTING_KEY_HEADER
#: The dead-letter reason header is cut here (AMQP headers share one frame with the rest).
MAX_REASON_HEADER: Final = 4000


def dead_letter(
    fact_key: str,
    body: bytes,
    routing_key: str,
    message_id: str | None,
    code: str,
    reason: str,
    oversize: Oversize | None = None,
) -> OutboxMessage:
    """The outbox message that dead-letters ``body``, rejected as ledger fact ``fact_key``.

    With ``oversize``, ``body`` is the first ``KEPT_BYTES`` of a bigger message: the letter
    keeps that much, and the whole message's size and SHA-256.
    """
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
    if oversize is not None:
        letter |= {"size": oversize.size, "sha256": oversize.sha256}
    return OutboxMessage(
        outbox_id, DEAD_LETTER_EXCHANGE, routing_key or "unknown", letter, fact_key
    )


def outgoing(message: PendingMessage | OutboxMessage) -> Outgoing:
    """What the relay publishes for a pending dead letter: the original bytes, with why."""
    letter: Mapping[str, Any] = message.body
    text = letter.get("text")
    raw = text.encode("utf-8") if isinstance(text, str) else base64.b64decode(letter["base64"])
    headers = {
        CODE_HEADER: str(letter["code"]),
        REASON_HEADER: str(letter["reason"])[:MAX_REASON_HEADER],
        ORIGINAL_ROUTING_KEY: str(letter["routing_key"]),
    }
    if "size" in letter:
        headers |= {SIZE_HEADER: str(letter["size"]), SHA256_HEADER: str(letter["sha256"])}
    return Outgoing(
        message.message_id,
        message.routing_key,
        letter,
        exchange=message.exchange,
        raw=raw,
        headers=headers,
        amqp_message_id=letter.get("message_id") or "",
    )


def letter_problem(
    fact: ChainRow, message_id: str, routing_key: str, letter: Mapping[str, Any]
) -> str | None:
    """Why an outbox row is not a dead letter the chained ``fact`` calls for, or None."""
    if fact.type != REJECTED:
        return f"position {fact.position} holds a {fact.type}, no rejection"
    data = json.loads(fact.data)
    if letter.get("fact") != fact.key:
        return f"it names fact {letter.get('fact')!r}, position {fact.position} holds another"
    raw = _letter_bytes(letter)
    if raw is None or not isinstance(letter.get("routing_key"), str):
        return "it is no dead letter"
    delivery_id = letter.get("message_id")
    if delivery_id is not None and not isinstance(delivery_id, str):
        return "it is no dead letter"
    recorded = data.get("dead_letter")
    if recorded is not None and recorded != {
        "routing_key": letter["routing_key"],
        "message_id": delivery_id,
    }:
        return f"it carries another delivery than the rejection at position {fact.position} records"
    oversize = _oversize(letter)
    if "size" in letter and oversize is None:
        return "it is no dead letter"
    code, reason = data.get("code"), data.get("reason")
    want = dead_letter(fact.key, raw, letter["routing_key"], delivery_id, code, reason, oversize)
    if (want.message_id, want.routing_key, dict(want.body)) != (message_id, routing_key, letter):
        return f"it differs from the dead letter of the rejection at position {fact.position}"
    if not _rejected_bytes(fact.key, data, raw, oversize):
        return f"its bytes are not the message rejected at position {fact.position}"
    return None


def letter_wanted(fact: ChainRow) -> bool:
    """Whether the chained ``fact`` is a rejection that calls for a dead letter."""
    return fact.type == REJECTED and "dead_letter" in json.loads(fact.data)


class Letters(LetterRule):
    """The dead letters' rule, as ``verify`` holds the outbox to it."""

    def problem(
        self, fact: ChainRow, message_id: str, routing_key: str, letter: Mapping[str, Any]
    ) -> str | None:
        return letter_problem(fact, message_id, routing_key, letter)

    def wanted(self, fact: ChainRow) -> bool:
        return letter_wanted(fact)


LETTERS: Final = Letters()


def _letter_bytes(letter: Mapping[str, Any]) -> bytes | None:
    text, coded = letter.get("text"), letter.get("base64")
    if isinstance(text, str):
        return text.encode("utf-8")
    try:
        return base64.b64decode(coded, validate=True) if isinstance(coded, str) else None
    except binascii.Error:
        return None


def _oversize(letter: Mapping[str, Any]) -> Oversize | None:
    """The whole message's size and digest a cut letter names, or None (one is missing or
    not of its type)."""
    size, digest = letter.get("size"), letter.get("sha256")
    if isinstance(size, int) and not isinstance(size, bool) and isinstance(digest, str):
        return Oversize(size, digest)
    return None


def _rejected_bytes(
    key: str, data: Mapping[str, Any], raw: bytes, oversize: Oversize | None
) -> bool:
    """Whether ``raw`` is the message the rejection fact (``key``, ``data``) keeps: the
    whole of it, or (``oversize``) the first ``KEPT_BYTES`` of the message the fact names
    by size and digest."""
    if "raw" in data and oversize is not None:  # a contract rejection of a cut message
        return (
            len(raw) == KEPT_BYTES < oversize.size
            and key.rpartition(":")[2] == oversize.sha256 == data.get("sha256")
            and data.get("size") == oversize.size
            and data["raw"] == raw.decode("utf-8", errors="replace")
        )
    if "raw" in data:  # a contract rejection: keyed by the bytes' SHA-256
        return key.rpartition(":")[2] == hashlib.sha256(raw).hexdigest()
    if "fingerprint" in data and oversize is None:  # a rule rejection: the event's fingerprint
        try:
            return bool(received(read_event(raw)).digest == data["fingerprint"])
        except ContractError:
            return False
    return False


def broker_fact(parked: Parked) -> Fact:
    """The ledger fact of a message the broker dead-lettered: its bytes, where and why.

    Keyed by where, why and how often it died, then the body's SHA-256: the same copy
    recorded twice is one fact, and a message dead-lettered again after a redrive is another.
    """
    reason = parked.reason or "unknown"
    code = BROKER_REASONS.get(reason, RejectionCode.BROKER_REJECTED)
    whole = parked.oversize or Oversize(len(parked.body), hashlib.sha256(parked.body).hexdigest())
    digest = whole.sha256
    where = "\x00".join((parked.message_id or "", parked.queue, reason))
    place = hashlib.sha256(where.encode()).hexdigest()[:16]
    data = {
        "raw": parked.body[:KEPT_BYTES].decode("utf-8", errors="replace"),
        "size": whole.size,
        "sha256": digest,
        "event_id": _event_id(parked.body) if parked.oversize is None else None,
        "routing_key": parked.routing_key,
        "message_id": parked.message_id,
        "queue": parked.queue,
        "count": parked.count,
        "code": code,
        "reason": (
            f"the broker dead-lettered it from {parked.queue or 'a queue'} ({reason}, "
            f"death {parked.count}); re-publish it with `croupier redrive` once the cause "
            "is fixed"
        ),
    }
    return Fact(DEAD_LETTERED, data, f"dead-lettered:{place}:{parked.count}:{digest}")


def _event_id(body: bytes) -> str | None:
    """The body's ``event_id`` when it is a feed event's (parsed with the bounded parser;
    a body over the contract's maximum is no event's and is not parsed)."""
    if len(body) > MAX_BODY_BYTES:
        return None
    try:
        data = from_json(body)
    except ValueError:
        return None
    event_id = data.get("event_id") if isinstance(data, dict) else None
    return event_id if isinstance(event_id, str) and len(event_id) <= 64 else None


async def record_parked(ledger: Ledger, batch: list[Parked]) -> list[RecordedEvent]:
    """Record what the broker dead-lettered (Croupier's own letters are recorded already).

    Returns the facts this call wrote: a copy recorded before (redelivered to the recorder,
    or recorded by another instance) is not returned again, so counting what this returns
    counts each fact once.
    """
    facts = list({f.key: f for f in (broker_fact(p) for p in batch if p.reason)}.values())
    return await ledger.append_new([StreamAppend(DEAD_LETTERS_STREAM, None, [f]) for f in facts])
