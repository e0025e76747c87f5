"""The live service in-process on RabbitMQ and PostgreSQL: a studio feed in, results out.

A generated feed (both games, every pay table, shared hands and boxes, a few voids) is
published to ``studio.feed``; a test wallet bound to ``croupier.settlements`` must receive
exactly the results the independent reference settlement computes, the ledger must hold one
closure per round with balanced postings and an intact hash chain, and the probes must tell
the truth about readiness.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import pytest
from conftest import connect_postgres
from service_harness import (
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    closures,
    eventually,
    expected_results,
    http_get,
    ledger_events,
    ledger_returned,
    metric,
    played_tables,
    prepare_broker,
    round_streams,
    serving,
    studio_feed,
    wallet_paid,
)

from croupier.ledger import Ledger, open_ledger
from croupier.settlement.service import Service
from croupier.web import ProbeServer
from studio.publisher import publish

pytestmark = pytest.mark.integration

ROUNDS = 120


async def test_a_published_feed_settles_like_the_reference(
    amqp_vhost: str, postgres_database: str
) -> None:
    messages = studio_feed("live", ROUNDS)
    tables = played_tables(messages)
    expected = expected_results(tables)
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)

    async with open_ledger(postgres_database) as ledger:
        async with serving(ledger, amqp_vhost) as service:
            assert service.http_port
            assert await http_get(service.http_port, "/readyz") == (
                200,
                "broker: ok\nconsumer: ok\ndatabase: ok\nrelay: ok\n",
            )
            assert await publish(messages, amqp_vhost) == len(messages)
            await wallet.wait_for(expected, timeout=120)
            await eventually(
                lambda: _outbox_empty(service), 30, "the outbox is published to the end"
            )
            status, exposition = await http_get(service.http_port, "/metrics")
            assert status == 200
            assert await http_get(service.http_port, "/healthz") == (200, "alive\n")
        after_stop = ProbeServer(service.metrics, service.readiness)
        port = await after_stop.start("127.0.0.1", 0)
        try:
            status, text = await http_get(port, "/readyz")
        finally:
            await after_stop.close()
        assert status == 503, text
        assert "consumer: NOT READY" in text
        report = await ledger.verify()
        assert report.ok, report.summary()

    # Every result, once, equal to the reference's.
    await wallet.drain()
    assert wallet.duplicates() == Counter()
    received = wallet.unique
    assert received.keys() == expected.keys()
    wrong = {
        key: (received[key].bets(), bets)
        for key, bets in expected.items()
        if received[key].bets() != bets
    }
    assert wrong == {}
    for result in received.values():
        body = result.body
        assert result.routing_key == f"{body['currency']}.{body['player_id']}"
        assert body["message_id"] == result.message_id
        assert body["stake_total"] == sum(b["stake"] for b in body["bets"])
        assert body["returned_total"] == sum(b["returned"] for b in body["bets"])

    # The ledger: one closure per round, at the position the results name; balanced.
    events = await ledger_events(postgres_database)
    assert_one_closure_per_round(events, round_streams(tables))
    assert_postings_balance(events)
    position = {(e.data["event"]["table_id"], e.data["event"]["round_id"]): e.position
                for e in closures(events)}  # fmt: skip
    for result in received.values():
        body = result.body
        assert body["ledger_position"] == position[(body["table_id"], body["round_id"])]
    assert wallet_paid(wallet) == ledger_returned(events)

    # The feed covered what it means to: both games, every pay table, voids, shared and boxes.
    assert {t.paytable for t in tables} == {
        "casino-holdem/classic",
        "casino-holdem/progressive",
        "casino-holdem/royal-20",
        "texas-holdem-plus/standard",
    }
    endings = Counter(t.ending for t in tables)
    assert endings["voided"] > 0 and endings["completed"] > 0
    boxes = {box for t in tables for box in t.holes}
    assert "main" in boxes and len(boxes) > 1  # one shared hand, and tables with boxes
    assert metric(exposition, "croupier_results_published_total") == len(expected)
    assert metric(exposition, "croupier_results_unroutable_total") == 0


async def _outbox_empty(service: Service) -> bool:
    return not await service.ledger.pending_outbox(1)


async def test_readiness_fails_while_the_database_is_down(
    amqp_vhost: str, postgres_database: str
) -> None:
    database = postgres_database.rsplit("/", 1)[1]
    async with open_ledger(postgres_database) as ledger, serving(ledger, amqp_vhost) as service:
        assert service.http_port
        port = service.http_port
        assert (await http_get(port, "/readyz"))[0] == 200
        await _refuse_connections(database, refuse=True)
        try:
            status, text = await http_get(port, "/readyz")
            assert status == 503, text
            assert "database: NOT READY" in text
            assert "broker: ok" in text
            assert (await http_get(port, "/healthz"))[0] == 200
        finally:
            await _refuse_connections(database, refuse=False)
        await eventually(lambda: _ready(port), 30, "/readyz is 200 again once the database is back")


async def _ready(port: int) -> bool:
    return (await http_get(port, "/readyz"))[0] == 200


async def _refuse_connections(database: str, *, refuse: bool) -> None:
    """Take one scratch database away (no new connections, existing ones ended) or back."""
    admin: asyncpg.Connection = await connect_postgres()
    try:
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {not refuse}')
        if refuse:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                database,
            )
    finally:
        await admin.close()


async def test_a_database_outage_mid_stream_loses_and_quarantines_nothing(
    amqp_vhost: str, postgres_database: str
) -> None:
    messages = studio_feed("dbdown", 60, seed=37)
    tables = played_tables(messages)
    expected = expected_results(tables)
    database = postgres_database.rsplit("/", 1)[1]
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)
    async with (
        open_ledger(postgres_database) as ledger,
        serving(ledger, amqp_vhost, max_batch=20) as service,
    ):
        await publish(messages, amqp_vhost)
        await eventually(lambda: _closed_some(ledger), 60, "a few rounds settled", every=0.05)
        await _refuse_connections(database, refuse=True)
        try:
            await eventually(lambda: _not_ready(service), 30, "/readyz reports the database down")
            await asyncio.sleep(2)  # long enough for the consumer to retry meanwhile
        finally:
            await _refuse_connections(database, refuse=False)
        await wallet.wait_for(expected, timeout=120)
    events = await ledger_events(postgres_database)
    assert_one_closure_per_round(events, round_streams(tables))
    assert [e.data for e in events if e.stream == "rejections"] == []
    assert {k: r.bets() for k, r in wallet.unique.items()} == expected


async def _closed_some(ledger: Ledger) -> bool:
    return len(closures(await ledger.read_all(0, 100_000))) >= 3


async def _not_ready(service: Service) -> bool:
    assert service.http_port
    return (await http_get(service.http_port, "/readyz"))[0] == 503
