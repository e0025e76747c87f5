"""A heavy shared hand harms nobody else, live (RabbitMQ and PostgreSQL): another table's
round that arrives with its ``round.completed`` is settled and acknowledged first, while the
hand is decided in its lane; every result equals the independent reference's, and every
feed delivery is acknowledged once (nothing goes back to the queue when the service stops).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from urllib.parse import unquote, urlsplit

import pytest
from conftest import rabbitmqctl
from service_harness import (
    Wallet,
    closures,
    eventually,
    expected_results,
    ledger_events,
    played_tables,
    prepare_broker,
    serving,
)

from croupier.bus import FEED_QUEUE
from croupier.ledger import open_ledger
from studio import StudioConfig, TableSpec, simulate
from studio.message import FeedMessage
from studio.publisher import publish

pytestmark = pytest.mark.integration

#: Players of a shared hand of more than ``HEAVY_WAGERS`` wagers (an ante each, and more).
PLAYERS = 4_000


def _feed(table: str, players: int) -> list[FeedMessage]:
    spec = TableSpec(table, "casino-holdem/classic", players=players)
    return list(simulate(StudioConfig(tables=(spec,), rounds=1, seed=19)))


async def _feed_queue(url: str) -> tuple[int, int]:
    """Messages ready and unacknowledged in the feed queue, as the broker counts them."""
    vhost = unquote(urlsplit(url).path.lstrip("/")) or "/"
    out = await asyncio.to_thread(
        rabbitmqctl,
        *("list_queues", "-p", vhost, "name", "messages_ready", "messages_unacknowledged"),
        *("--no-table-headers", "--quiet"),
    )
    rows = {row.split()[0]: row.split()[1:] for row in out.splitlines() if len(row.split()) == 3}
    ready, unacked = rows.get(FEED_QUEUE, ["0", "0"])
    return int(ready), int(unacked)


async def test_another_tables_round_is_settled_first_beside_a_heavy_hand(
    amqp_vhost: str, postgres_database: str
) -> None:
    heavy, other = _feed("heavy", PLAYERS), _feed("other", 1)
    expected = expected_results(played_tables([*heavy, *other]))
    round_id = str(heavy[0].event["round_id"]) if heavy[0].event else ""
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)
    async with open_ledger(postgres_database) as ledger:
        async with serving(ledger, amqp_vhost) as service:
            await publish(heavy[:-1], amqp_vhost)

            async def heavy_in_memory() -> bool:
                return service.settler.closes_heavy("heavy", round_id)

            await eventually(heavy_in_memory, 120, "the heavy hand's bets settled")
            await publish([heavy[-1], *other], amqp_vhost)
            await wallet.wait_for(expected, timeout=120)
        assert await _feed_queue(amqp_vhost) == (0, 0), "every delivery acknowledged"
        assert (await ledger.verify()).ok

    events = await ledger_events(postgres_database)
    order = [e.data["event"]["table_id"] for e in closures(events)]
    assert order == ["other", "heavy"]  # committed first, though it arrived after
    assert wallet.duplicates() == Counter()
    received = wallet.unique
    assert received.keys() == expected.keys()
    assert {k: received[k].bets() for k in expected} == expected
