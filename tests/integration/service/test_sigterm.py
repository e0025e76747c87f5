"""``croupier serve`` exits within 10 s of SIGTERM in every state, failure loops included.

Each test runs ``croupier serve`` as in production (service role, signing key) with its
database and broker reached through TCP proxies, puts it in one failure state and sends
SIGTERM once it is in it: the database out of reach (a partition: nothing answers), the
broker out of reach, the relay stalled by a lease nobody at Croupier wrote, and settlement
looping (a row appended by someone else: every batch refused and retried). Exit code 0
within ``STOP_WITHIN`` seconds.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from service_harness import (
    ServeProcess,
    eventually,
    http_get,
    prepare_broker,
    serve_process,
    studio_feed,
)
from tcp_proxy import TcpProxy

from contract.canonical import canonical_json
from croupier.ledger.chain import format_timestamp, row_hash
from studio.publisher import publish

pytestmark = pytest.mark.integration

#: What ``croupier serve`` promises: SIGTERM to exit, in every state.
STOP_WITHIN = 10.0


@dataclass
class Served:
    """A running ``croupier serve``, its proxies, and the owner's and broker's URLs."""

    instance: ServeProcess
    database: TcpProxy
    broker: TcpProxy
    owner_url: str
    amqp_url: str

    async def not_ready(self) -> bool:
        try:
            status, _ = await http_get(self.instance.port, "/readyz", timeout=3)
        except (OSError, TimeoutError):
            return False
        return status != 200

    async def terminated_within(self) -> float:
        """SIGTERM; seconds until the process exited (asserting exit code 0)."""
        sent = time.monotonic()
        self.instance.process.send_signal(signal.SIGTERM)
        code = await self.instance.exit_code(timeout=STOP_WITHIN + 20)
        took = time.monotonic() - sent
        assert code == 0, self.instance.tail()
        print(f"\nexited {took:.1f} s after SIGTERM")
        return took


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit(":", 1)[0] if parts.port else parts.netloc
    return urlunsplit(parts._replace(netloc=f"{netloc}:{port}"))


@pytest.fixture
async def served(postgres_database: str, amqp_vhost: str, tmp_path: Path) -> AsyncIterator[Served]:
    database_port = urlsplit(postgres_database).port or 5432
    broker_port = urlsplit(amqp_vhost).port or 5672
    await prepare_broker(amqp_vhost)
    with (
        TcpProxy(database_port) as to_database,
        TcpProxy(broker_port) as to_broker,
        serve_process(
            _through(postgres_database, to_database.port),
            _through(amqp_vhost, to_broker.port),
            tmp_path / "serve.log",
            max_batch=50,
        ) as instance,
    ):
        await instance.ready()
        served = Served(instance, to_database, to_broker, postgres_database, amqp_vhost)
        messages = studio_feed("term", 6, seed=5)
        assert await publish(messages, amqp_vhost) == len(messages)
        yield served
        to_database.heal()
        to_broker.heal()


async def _in_state(served: Served, state: Callable[[], Awaitable[bool]], what: str) -> None:
    await eventually(state, 60, what, 0.2)
    await asyncio.sleep(2)  # well inside the loop


async def _more_feed(served: Served) -> None:
    messages = studio_feed("more", 6, seed=6)
    assert await publish(messages, served.amqp_url) == len(messages)


async def test_sigterm_with_the_database_out_of_reach(served: Served) -> None:
    served.database.black_hole()
    await _more_feed(served)
    await _in_state(served, served.not_ready, "NOT READY: the database is out of reach")
    took = await served.terminated_within()
    assert took < STOP_WITHIN, f"exited {took:.1f} s after SIGTERM"


async def test_sigterm_with_the_broker_out_of_reach(served: Served) -> None:
    served.broker.black_hole()
    await asyncio.sleep(3)  # consuming and publishing hang on a connection that answers nothing
    took = await served.terminated_within()
    assert took < STOP_WITHIN, f"exited {took:.1f} s after SIGTERM"


async def test_sigterm_with_the_relay_stalled(served: Served) -> None:
    owner = await asyncpg.connect(served.owner_url)
    try:
        await owner.execute(
            "UPDATE relay_lease SET holder = 'mallory', expires_at = now() + interval '1 day'"
        )
    finally:
        await owner.close()
    await _in_state(served, served.not_ready, "NOT READY: the relay is stalled")
    took = await served.terminated_within()
    assert took < STOP_WITHIN, f"exited {took:.1f} s after SIGTERM"


async def test_sigterm_while_every_batch_is_refused(served: Served) -> None:
    await _append_a_row_as_the_owner(served.owner_url)
    await _more_feed(served)
    await _in_state(served, served.not_ready, "NOT READY: settlement refused")
    assert "HeadNotSigned" in served.instance.log.read_text()  # retried, never appended
    took = await served.terminated_within()
    assert took < STOP_WITHIN, f"exited {took:.1f} s after SIGTERM"


async def _append_a_row_as_the_owner(owner_url: str) -> None:
    """A correctly chained row above the signed head, no head signed over it: the service
    refuses to append after it (``HeadNotSigned``), batch after batch."""
    owner = await asyncpg.connect(owner_url)
    try:
        last = "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"

        async def settled_some() -> bool:
            return await owner.fetchrow(last) is not None

        await eventually(settled_some, 60, "the first feed is settled")

        async def written_on_top() -> bool:  # the service may append meanwhile: try again
            head = await owner.fetchrow(last)
            at, prev = head["position"] + 1, head["hash"]
            data = canonical_json({"note": "written by the owner"})
            stamp = format_timestamp(datetime.now(UTC))
            digest = row_hash(prev, at, "owner:1", 1, "owner.note", data, "owner-note", stamp)
            try:
                await owner.execute(
                    "INSERT INTO events (position, stream, version, type, data, key, "
                    f"recorded_at, prev_hash, hash) VALUES ({at}, 'owner:1', 1, 'owner.note', "
                    f"'{data}', 'owner-note', '{stamp}', '{prev}', '{digest}')"
                )
            except asyncpg.UniqueViolationError:
                return False
            return True

        await eventually(written_on_top, 60, "the owner's row is written above the head")
    finally:
        await owner.close()
