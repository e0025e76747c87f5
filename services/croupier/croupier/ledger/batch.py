"""Append planning shared by the adapters: idempotency, version checks, positions, hashes.

An adapter opens its write transaction, takes the append lock, loads what the plan needs
(rows already recorded under the batch's keys, current stream versions, the chain head,
outbox messages already recorded) and hands it to ``plan_append``; it then inserts
``Plan.rows`` and ``Plan.outbox`` and commits. The plan is pure: it raises before
anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from contract.canonical import Encoded, canonical_json
from croupier.ledger import (
    IdempotencyConflict,
    OutboxMessage,
    RecordedEvent,
    StreamAppend,
    VersionConflict,
)
from croupier.ledger.chain import ChainRow, format_timestamp, row_hash
from croupier.ledger.encoding import data_text
from croupier.settlement.facts import Fact

# (message_id, position, exchange, routing_key, body as canonical JSON, event hash)
OutboxInsert = tuple[str, int, str, str, str, str]


@dataclass(frozen=True, slots=True)
class Plan:
    """What one append writes and returns."""

    rows: list[ChainRow]
    outbox: list[OutboxInsert]
    results: list[RecordedEvent]


def batch_keys(appends: Sequence[StreamAppend]) -> list[str]:
    """Every idempotency key of the batch; duplicates inside one batch are refused."""
    keys = [event.key for append in appends for event in append.events]
    if len(set(keys)) != len(keys):
        raise ValueError("an idempotency key appears twice in one append batch")
    return keys


def batch_streams(appends: Sequence[StreamAppend]) -> list[str]:
    return list(dict.fromkeys(append.stream for append in appends))


def outbox_ids(outbox: Sequence[OutboxMessage]) -> list[str]:
    ids = [message.message_id for message in outbox]
    if len(set(ids)) != len(ids):
        raise ValueError("an outbox message_id appears twice in one append batch")
    return ids


def recorded(row: ChainRow, data: Mapping[str, object] | None = None) -> RecordedEvent:
    """A ``RecordedEvent`` from a stored row (``data`` saves re-parsing when known)."""
    return RecordedEvent(
        position=row.position,
        stream=row.stream,
        version=row.version,
        type=row.type,
        data=json.loads(row.data) if data is None else data,
        key=row.key,
        recorded_at=datetime.fromisoformat(row.recorded_at),
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


def plan_append(
    appends: Sequence[StreamAppend],
    outbox: Sequence[OutboxMessage],
    *,
    existing: Mapping[str, ChainRow],
    versions: Mapping[str, int],
    head: tuple[int, str],
    existing_outbox: Mapping[str, tuple[str, str, str]],
    recorded_at: datetime,
) -> Plan:
    """Decide the batch's rows, or raise ``VersionConflict``/``IdempotencyConflict``.

    An outbox message names its event by position and hash (the batch head's when it
    names no event).

    ``existing`` maps recorded keys to their rows, ``versions`` streams to their current
    version, ``head`` is (last position, last hash), ``existing_outbox`` maps recorded
    message ids to (exchange, routing_key, body text).
    """
    stamp = format_timestamp(recorded_at)
    moment = datetime.fromisoformat(stamp)
    position, prev_hash = head
    current = dict(versions)
    rows: list[ChainRow] = []
    results: list[RecordedEvent] = []
    for append in appends:
        known = _recorded_prefix(append, existing)
        results.extend(recorded(row) for row in known)
        fresh = append.events[len(known) :]
        if not fresh:
            continue  # a replay: the events' keys already fix where they are
        version = current.get(append.stream, 0)
        _check_version(append, known, version)
        for event in fresh:
            position += 1
            version += 1
            data = data_text(event.data)
            digest = row_hash(
                prev_hash, position, append.stream, version, event.type, data, event.key, stamp
            )
            rows.append(
                ChainRow(
                    position,
                    append.stream,
                    version,
                    event.type,
                    data,
                    event.key,
                    stamp,
                    prev_hash,
                    digest,
                )
            )
            results.append(
                RecordedEvent(
                    position,
                    append.stream,
                    version,
                    event.type,
                    event.data,
                    event.key,
                    moment,
                    prev_hash,
                    digest,
                )
            )
            prev_hash = digest
        current[append.stream] = version
    events = {r.key: (r.position, r.hash) for r in results}
    return Plan(rows, _plan_outbox(outbox, existing_outbox, events, (position, prev_hash)), results)


def _recorded_prefix(append: StreamAppend, existing: Mapping[str, ChainRow]) -> list[ChainRow]:
    known: list[ChainRow] = []
    for index, event in enumerate(append.events):
        row = existing.get(event.key)
        if row is None:
            if any(later.key in existing for later in append.events[index + 1 :]):
                raise IdempotencyConflict(
                    event.key, "recorded events must come before new ones in a stream append"
                )
            break
        _check_same(event, append.stream, row)
        known.append(row)
    return known


def _check_same(event: Fact, stream: str, row: ChainRow) -> None:
    if row.stream != stream:
        raise IdempotencyConflict(event.key, f"recorded in stream {row.stream!r}")
    if row.type != event.type or row.data != data_text(event.data):
        raise IdempotencyConflict(
            event.key, f"recorded at position {row.position} with other content"
        )


def _check_version(append: StreamAppend, known: list[ChainRow], version: int) -> None:
    if append.expected_version is None:
        return
    expected = append.expected_version + len(known)
    prefix_in_place = all(
        row.version == append.expected_version + offset for offset, row in enumerate(known, start=1)
    )
    if version != expected or not prefix_in_place:
        raise VersionConflict(append.stream, expected, version)


def _plan_outbox(
    outbox: Sequence[OutboxMessage],
    existing: Mapping[str, tuple[str, str, str]],
    events: Mapping[str, tuple[int, str]],
    head: tuple[int, str],
) -> list[OutboxInsert]:
    planned: list[OutboxInsert] = []
    for message in outbox:
        position, digest = events[message.event_key] if message.event_key else head
        # A body that carries its canonical text (a settlement result) is not encoded again.
        body = message.body.text if type(message.body) is Encoded else canonical_json(message.body)
        stored = existing.get(message.message_id)
        if stored is None:
            planned.append(
                (message.message_id, position, message.exchange, message.routing_key, body, digest)
            )
        elif stored != (message.exchange, message.routing_key, body):
            raise IdempotencyConflict(
                message.message_id, "outbox message recorded with other content"
            )
    return planned
