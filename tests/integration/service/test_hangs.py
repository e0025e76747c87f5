"""A hung instance is replaced within 15 s and never holds the ledger for longer.

A SIGSTOPped process keeps its sockets open: only heartbeats (AMQP) and server-side timeouts
(PostgreSQL's ``idle_in_transaction_session_timeout``, ``statement_timeout``,
``lock_timeout``) notice it. The first tests hang a session on the append lock directly; the
last one SIGSTOPs the active ``croupier serve`` of three and resumes it later.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import asyncpg
import pytest
from service_harness import (
    ServeProcess,
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    closed_rounds,
    eventually,
    expected_results,
    http_get,
    ledger_events,
    ledger_returned,
    played_tables,
    prepare_broker,
    round_streams,
    serve_process,
    studio_feed,
    wallet_paid,
)

from croupier.ledger import LedgerUnavailable, RecordedEvent, StreamAppend
from croupier.ledger.postgres import APPEND_LOCK, PostgresLedger
from croupier.settlement.facts import Fact
from studio.publisher import publish

#: Under ``make test``'s workers: this module's clocked takeovers run one after another with
#: the other's (test_hangs, test_partitions), never against each other.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("takeover")]

#: What the service promises: a hung instance is replaced, and the ledger free, within this.
TAKEOVER_SECONDS = 15.0


def _one_event(name: str) -> list[StreamAppend]:
    return [StreamAppend(name, 0, [Fact("test.event", {"n": 1}, f"{name}:1")])]


async def test_a_transaction_whose_client_hangs_frees_the_append_lock(
    postgres_database: str,
) -> None:
    hung, other = PostgresLedger(postgres_database), PostgresLedger(postgres_database)
    try:
        await hung.migrate()
        connection = await (await hung.pool()).acquire()
        transaction = connection.transaction()
        await transaction.start()
        await connection.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)
        backend = await connection.fetchval("SELECT pg_backend_pid()")
        # The client now says nothing, as a SIGSTOPped one would, holding the lock.
        started = time.monotonic()
        recorded = await _append_retrying(other, _one_event("after-the-hang"))
        waited = time.monotonic() - started
        assert [r.stream for r in recorded] == ["after-the-hang"]
        assert waited < TAKEOVER_SECONDS, f"the append lock was held {waited:.1f}s"
        # The server ended the hung session (what its client then sees of it varies).
        async with (await other.pool()).acquire() as watcher:
            found = await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", backend
            )
        assert found == 0, f"the hung session {backend} is still open"
        await (await hung.pool()).release(connection, timeout=1)
    finally:
        await hung.close()
        await other.close()


async def test_a_wait_for_the_append_lock_gives_up_for_a_retry(postgres_database: str) -> None:
    # The holder is busy, not hung: the server leaves its session alone.
    holder = PostgresLedger(f"{postgres_database}?idle_in_transaction_session_timeout=0")
    waiter = PostgresLedger(postgres_database)
    try:
        await holder.migrate()
        async with (await holder.pool()).acquire() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)
            started = time.monotonic()
            with pytest.raises(LedgerUnavailable) as raised:
                await waiter.append(_one_event("waiting"))
            assert isinstance(raised.value.__cause__, asyncpg.LockNotAvailableError)
            assert time.monotonic() - started < TAKEOVER_SECONDS
    finally:
        await holder.close()
        await waiter.close()


async def test_session_limits_can_be_set_in_the_url(postgres_database: str) -> None:
    ledger = PostgresLedger(f"{postgres_database}?lock_timeout=1500ms")
    try:
        async with (await ledger.pool()).acquire() as connection:
            assert await connection.fetchval("SHOW lock_timeout") == "1500ms"
            assert await connection.fetchval("SHOW idle_in_transaction_session_timeout") == "5s"
    finally:
        await ledger.close()


async def _append_retrying(
    ledger: PostgresLedger, appends: list[StreamAppend]
) -> list[RecordedEvent]:
    deadline = time.monotonic() + 60
    while True:
        try:
            return await ledger.append(appends)
        except LedgerUnavailable as unavailable:
            assert isinstance(unavailable.__cause__, asyncpg.LockNotAvailableError)
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)


async def _consumed(instance: ServeProcess) -> float:
    _, text = await http_get(instance.port, "/metrics")
    return sum(
        float(row.split()[1])
        for row in text.splitlines()
        if row.startswith("croupier_events_consumed_total{")
    )


async def test_a_sigstopped_active_instance_is_replaced_and_does_no_harm_on_resume(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    messages = studio_feed("hang", 120, seed=41)
    third = len(messages) // 3
    thirds = [messages[:third], messages[third : 2 * third], messages[2 * third :]]
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)
    logs = [tmp_path / f"serve-{n}.log" for n in range(3)]

    with serve_process(postgres_database, amqp_vhost, logs[0], max_batch=20) as active:
        await active.ready()
        with (
            serve_process(postgres_database, amqp_vhost, logs[1], max_batch=20) as standby,
            serve_process(postgres_database, amqp_vhost, logs[2], max_batch=20) as other,
        ):
            await standby.ready()
            await other.ready()
            assert await publish(thirds[0], amqp_vhost) == len(thirds[0])
            await wallet.wait_for(expected_results(played_tables(thirds[0])), timeout=90)
            assert await _consumed(active) > 0
            assert await _consumed(standby) == await _consumed(other) == 0

            before = await closed_rounds(postgres_database)
            active.process.send_signal(signal.SIGSTOP)
            stopped_at = time.monotonic()
            try:
                assert await publish(thirds[1], amqp_vhost) == len(thirds[1])

                async def taken_over() -> bool:
                    return await closed_rounds(postgres_database) > before

                await eventually(taken_over, 60, "a standby settles rounds", every=0.1)
                takeover = time.monotonic() - stopped_at
                so_far = expected_results(played_tables(messages[: 2 * third]))
                await wallet.wait_for(so_far, timeout=90)
            finally:
                active.process.send_signal(signal.SIGCONT)
            assert takeover < TAKEOVER_SECONDS, f"a standby took over after {takeover:.1f}s"

            # Resumed, the old active instance finds its sessions ended and becomes a standby.
            await active.ready(timeout=60)
            assert await publish(thirds[2], amqp_vhost) == len(thirds[2])
            tables = played_tables(messages)
            expected = expected_results(tables)
            await wallet.wait_for(expected, timeout=90)
            for instance in (active, standby, other):
                assert instance.process.poll() is None, instance.tail()

    events = await ledger_events(postgres_database)
    assert_one_closure_per_round(events, round_streams(tables))
    assert_postings_balance(events)
    assert {k: r.bets() for k, r in wallet.unique.items()} == expected
    assert wallet_paid(wallet) == ledger_returned(events)
    print(f"takeover after SIGSTOP: {takeover:.1f}s")
