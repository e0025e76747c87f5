"""What the broker dead-letters is recorded once and counted once per recorded fact, however
often its copy reaches a recorder (a lost acknowledgement, another instance); a copy over the
contract's maximum is cut as it arrives and recorded by its size and digest."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aio_pika
import pytest
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec
from pamqp.header import ContentHeader

from croupier.bus import KEPT_BYTES, Oversize, Parked
from croupier.bus.amqp import AmqpBus
from croupier.bus.memory import MemoryBus
from croupier.ledger import Ledger, open_ledger
from croupier.settlement.deadletters import (
    DEAD_LETTERED,
    DEAD_LETTERS_STREAM,
    broker_fact,
    record_parked,
)
from croupier.settlement.service import Service

BODY = json.dumps({"event_id": "0b6f1f8e-5a47-4c1e-9a4e-2f1d7c3b9a10", "seq": 1}).encode()
COPY = Parked(BODY, "t1.round.opened", "m-1", "delivery_limit", "croupier.feed", 1)


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


def counted(service: Service) -> float:
    sample = service.metrics.registry.get_sample_value(
        "croupier_events_rejected_total", {"code": "delivery_limit"}
    )
    return sample or 0.0


async def recorded_by(service: Service, bus: MemoryBus, copies: int) -> None:
    """Run ``service`` while ``copies`` copies of ``COPY`` reach it, one after another."""
    await service.start()
    try:
        async with asyncio.timeout(10):
            for copy in range(1, copies + 1):
                bus.park(COPY)
                while len(bus.parked_done) < copy:
                    await asyncio.sleep(0.01)
    finally:
        await service.stop()


async def test_a_dead_letter_redelivered_to_the_recorder_is_counted_once(
    ledger: Ledger, tmp_path: Path
) -> None:
    bus = MemoryBus()
    service = Service(ledger, bus)
    await recorded_by(service, bus, 2)  # the second: its first acknowledgement was lost

    facts = await ledger.read_stream(DEAD_LETTERS_STREAM)
    assert [(f.type, f.data["code"]) for f in facts] == [(DEAD_LETTERED, "delivery_limit")]
    assert counted(service) == 1

    # Another instance on the same ledger gets the copy again: recorded already, not counted.
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as other:
        again = MemoryBus()
        standby = Service(other, again)
        await recorded_by(standby, again, 1)
    assert counted(standby) == 0
    assert len(await ledger.read_stream(DEAD_LETTERS_STREAM)) == 1


async def test_of_instances_recording_the_same_copy_exactly_one_gets_the_fact(
    ledger: Ledger, tmp_path: Path
) -> None:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as other:
        both = await asyncio.gather(*(record_parked(x, [COPY]) for x in (ledger, other, ledger)))
    assert sorted(len(written) for written in both) == [0, 0, 1]
    died_again = Parked(BODY, "t1.round.opened", "m-1", "delivery_limit", "croupier.feed", 2)
    (fact,) = await record_parked(ledger, [died_again, COPY])  # a later death is another fact
    assert fact.data["count"] == 2


async def test_an_over_size_copy_is_cut_as_it_arrives_and_recorded_by_size_and_digest() -> None:
    body = b'{"pad":"' + b"x" * 20_000 + b'"}'
    digest = hashlib.sha256(body).hexdigest()
    headers = {"x-first-death-reason": "delivery_limit", "x-first-death-queue": "croupier.feed"}
    message = aio_pika.IncomingMessage(
        DeliveredMessage(
            delivery=spec.Basic.Deliver(consumer_tag="c", delivery_tag=1, routing_key="t1.x"),
            header=ContentHeader(0, len(body), spec.Basic.Properties(headers=headers)),
            body=body,
            channel=None,
        )
    )
    bus = AmqpBus("amqp://")
    await bus._receive_parked(message)  # as the broker hands a copy over
    (parked,) = await bus.next_parked(10)
    assert message.body == b""  # kept to acknowledge it by, without its bytes
    assert parked.body == body[:KEPT_BYTES]
    assert parked.oversize == Oversize(len(body), digest)
    fact = broker_fact(parked)
    assert (fact.data["size"], fact.data["sha256"]) == (len(body), digest)
    assert fact.data["raw"] == body[:KEPT_BYTES].decode() and fact.key.endswith(digest)
    assert fact.data["event_id"] is None
