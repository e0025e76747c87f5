"""One logging configuration: every line JSON, library loggers included, with the logger's
name, bound context ids, exceptions inside the line, and no password."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import aio_pika
import pytest
import structlog
from croupier_feeds import RoundFeed
from yarl import URL

from croupier.bus.memory import MemoryBus
from croupier.ledger import open_ledger
from croupier.logs import configure_logging, context_ids
from croupier.settlement.service import Service
from croupier.settlement.settler import Inbound


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    configure_logging("INFO", stream)
    yield stream
    configure_logging("WARNING")  # back to stderr


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(text) for text in stream.getvalue().splitlines()]


def test_croupier_lines_carry_the_logger_name_level_and_time(logs: io.StringIO) -> None:
    structlog.get_logger("croupier.settlement.consumer").info("round settled", table_id="T1")
    (line,) = lines(logs)
    assert line["logger"] == "croupier.settlement.consumer"
    assert line["level"] == "info"
    assert line["event"] == "round settled"
    assert line["table_id"] == "T1"
    assert line["timestamp"].endswith("Z")


async def test_the_amqp_library_logs_json_and_masks_the_password(logs: io.StringIO) -> None:
    # Closed here: a failed connection collected outside the event loop warns
    # "coroutine 'Connection.close' was never awaited".
    refused = aio_pika.Connection(URL("amqp://guest:s3cret@127.0.0.1:1/"))
    try:
        with pytest.raises(OSError):  # nothing listens on port 1: aiormq logs, then raises
            await refused.connect(timeout=5)
    finally:
        await refused.close()
    found = lines(logs)
    assert any(line["logger"].startswith("aiormq") for line in found), found
    assert "s3cret" not in logs.getvalue()


async def test_asyncio_errors_are_one_json_line_with_the_exception(logs: io.StringIO) -> None:
    loop = asyncio.get_running_loop()
    try:
        raise ValueError("broken on amqp://guest:s3cret@broker/")
    except ValueError as error:
        loop.call_exception_handler({"message": "callback failed", "exception": error})
    (line,) = lines(logs)
    assert line["logger"] == "asyncio"
    assert line["level"] == "error"
    assert "Traceback" in line["exception"] and "ValueError" in line["exception"]
    assert "s3cret" not in logs.getvalue() and "guest:***@broker" in line["exception"]


def test_stdlib_loggers_of_every_library_get_the_bound_context(logs: io.StringIO) -> None:
    with structlog.contextvars.bound_contextvars(table_id="T9", round_id="R9"):
        logging.getLogger("asyncpg.pool").warning("connection lost")
    (line,) = lines(logs)
    assert (line["logger"], line["table_id"], line["round_id"]) == ("asyncpg.pool", "T9", "R9")


def test_context_ids_are_read_from_a_raw_message_as_far_as_it_goes() -> None:
    event = RoundFeed("T1", "R1").opened()
    assert context_ids(json.dumps(event).encode()) == {
        "table_id": "T1",
        "round_id": "R1",
        "event_id": event["event_id"],
    }
    assert context_ids(b'{"table_id": 5, "round_id": "R"') == {}
    assert context_ids(b"[" * 100_000) == {}


async def test_a_quarantined_message_is_logged_with_its_table_round_and_event(
    logs: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    poison = RoundFeed("t-poison", "r1").opened()
    bus = MemoryBus()
    async with open_ledger("sqlite:///:memory:") as ledger:
        service = Service(ledger, bus)
        settle = service.settler.handle

        async def handle(batch: Sequence[Inbound]) -> Any:
            if any(b"t-poison" in message.body for message in batch):
                raise RuntimeError("settlement blew up")
            return await settle(batch)

        monkeypatch.setattr(service.settler, "handle", handle)
        await ledger.migrate()
        await service.start()
        await bus.publish_feed("t-poison.round.opened", json.dumps(poison).encode(), "m1")
        for _ in range(200):
            if bus.dead_letters:
                break
            await asyncio.sleep(0.01)
        await service.stop()
    found = lines(logs)
    ids = {"table_id": "t-poison", "round_id": "r1", "event_id": poison["event_id"]}
    quarantined = [x for x in found if x["event"].startswith("quarantining")]
    rejected = [x for x in found if x["event"] == "event rejected"]
    assert quarantined and rejected, found
    for line in (*quarantined, *rejected):
        assert ids.items() <= line.items(), line
    assert "RuntimeError: settlement blew up" in quarantined[0]["exception"]
