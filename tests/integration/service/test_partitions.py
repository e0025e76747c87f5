"""A partitioned instance is replaced within 15 s and never holds the ledger for longer.

The active ``croupier serve`` of two reaches its PostgreSQL and RabbitMQ (private ones this
test starts) through TCP proxies (``tcp_proxy.py``); the standby connects directly. While
the active instance holds the ledger's append lock, both proxies black-hole its traffic: its
sockets stay open and nothing arrives, as in a cut network (no reset, no FIN: only
heartbeats and server-side timeouts can notice). The test measures how long the append lock
stays held, and how long until the standby consumes and relays; then it heals the network
and checks that the old active instance rejoins as a standby and did no harm.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import pytest
from private_services import private_postgres, private_rabbitmq
from service_harness import (
    ServeProcess,
    Wallet,
    assert_one_closure_per_round,
    assert_postings_balance,
    eventually,
    expected_results,
    http_get,
    ledger_events,
    ledger_returned,
    metric,
    played_tables,
    prepare_broker,
    round_streams,
    serve_process,
    studio_feed,
    wallet_paid,
)
from tcp_proxy import TcpProxy

from croupier.ledger.postgres import APPEND_LOCK
from studio.publisher import publish

#: Under ``make test``'s workers: this module's clocked takeovers run one after another with
#: the other's (test_hangs, test_partitions), never against each other.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("takeover")]

#: What the service promises: a partitioned instance is replaced, the ledger free, within this.
TAKEOVER_SECONDS = 15.0
#: Tries at cutting the network while the active instance holds the append lock.
CUT_TRIES = 200


async def _figure(instance: ServeProcess, name: str) -> float:
    _, text = await http_get(instance.port, "/metrics", timeout=3)
    return metric(text, name)


async def _consumed(instance: ServeProcess) -> float:
    _, text = await http_get(instance.port, "/metrics", timeout=3)
    return sum(
        float(row.split()[1])
        for row in text.splitlines()
        if row.startswith("croupier_events_consumed_total{")
    )


async def _append_lock_holder(connection: asyncpg.Connection) -> int | None:
    """The client port of the session holding the ledger's append lock, if any."""
    rows = await connection.fetch(
        "SELECT a.client_port, l.classid, l.objid FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    )
    for port, high, low in rows:
        if (int(high) << 32) | int(low) == APPEND_LOCK:
            return int(port)
    return None


async def _cut_while_holding_the_lock(
    watcher: asyncpg.Connection, proxies: list[TcpProxy]
) -> tuple[float, int]:
    """Black-hole ``proxies`` at a moment the instance behind them holds the append lock
    (still held once cut); the time of the cut and the tries it took. A try that misses
    heals at once (a cut of a few milliseconds, which TCP rides out) and waits for the
    next batch."""
    for tries in range(1, CUT_TRIES + 1):
        await eventually(
            lambda: _holds(watcher, proxies[0]), 60, "the active instance takes the lock", 0.001
        )
        for proxy in proxies:
            proxy.black_hole()
        cut = time.monotonic()
        if await _holds(watcher, proxies[0]):
            return cut, tries
        for proxy in proxies:
            proxy.heal()
        await asyncio.sleep(0.05)
    raise AssertionError(f"never cut the network while the lock was held in {CUT_TRIES} tries")


async def _holds(watcher: asyncpg.Connection, proxy: TcpProxy) -> bool:
    return await _append_lock_holder(watcher) in proxy.upstream_ports


async def test_a_partitioned_active_instance_is_replaced_and_frees_the_ledger_in_time(
    tmp_path: Path,
) -> None:
    messages = studio_feed("cut", 180, seed=43)
    third = len(messages) // 3
    thirds = [messages[:third], messages[third : 2 * third], messages[2 * third :]]
    with (
        private_postgres() as database,
        private_rabbitmq() as broker,
        TcpProxy(database.port) as to_database,
        TcpProxy(broker.port) as to_broker,
    ):
        owner = database.database_url("croupier")
        through = f"postgresql://postgres@127.0.0.1:{to_database.port}/croupier"
        amqp_through = f"amqp://guest:guest@127.0.0.1:{to_broker.port}/"
        await prepare_broker(broker.url)
        wallet = Wallet(broker.url)
        logs = [tmp_path / "serve-active.log", tmp_path / "serve-standby.log"]
        with serve_process(through, amqp_through, logs[0], max_batch=200) as active:
            await active.ready()
            with serve_process(owner, broker.url, logs[1], max_batch=200) as standby:
                await standby.ready()

                async def relays(instance: ServeProcess) -> bool:
                    return await _figure(instance, "croupier_relay_active") == 1

                await eventually(lambda: relays(active), 30, "the first instance relays")
                assert await publish(thirds[0], broker.url) == len(thirds[0])
                await wallet.wait_for(expected_results(played_tables(thirds[0])), timeout=90)
                assert await _consumed(active) > 0 and await _consumed(standby) == 0
                assert not await relays(standby)

                watcher = await asyncpg.connect(owner, timeout=10)
                try:
                    publishing = asyncio.create_task(publish(thirds[1], broker.url))
                    cut, tries = await _cut_while_holding_the_lock(
                        watcher, [to_database, to_broker]
                    )
                    try:
                        await eventually(
                            lambda: _not_held_by(watcher, to_database),
                            60,
                            "the lock is freed",
                            0.05,
                        )
                    except AssertionError as failed:
                        raise AssertionError(f"{failed}; {await _holder(watcher)}") from None
                    lock_held = time.monotonic() - cut
                    await eventually(lambda: _moves(standby), 60, "the standby consumes", 0.1)
                    consuming = time.monotonic() - cut
                    await eventually(lambda: relays(standby), 60, "the standby relays", 0.1)
                    relaying = time.monotonic() - cut
                    assert await publishing == len(thirds[1])
                    so_far = expected_results(played_tables(messages[: 2 * third]))
                    await wallet.wait_for(so_far, timeout=90)
                finally:
                    await watcher.close()
                    to_database.heal()
                    to_broker.heal()
                print(
                    f"\npartition of the active instance holding the append lock (cut at try "
                    f"{tries}; load {_load()}): lock freed after {lock_held:.1f}s, standby "
                    f"consuming after {consuming:.1f}s, relaying after {relaying:.1f}s"
                )
                assert lock_held < TAKEOVER_SECONDS, f"the append lock was held {lock_held:.1f}s"
                assert consuming < TAKEOVER_SECONDS, f"the standby consumed after {consuming:.1f}s"
                assert relaying < TAKEOVER_SECONDS, f"the standby relayed after {relaying:.1f}s"

                # Healed, the old active instance finds its sessions ended and stands by.
                await eventually(lambda: _relay_gauge_is(active, 0), 60, "it stands by", 0.2)
                await active.ready(timeout=60)
                assert await publish(thirds[2], broker.url) == len(thirds[2])
                tables = played_tables(messages)
                expected = expected_results(tables)
                await wallet.wait_for(expected, timeout=90)
                for instance in (active, standby):
                    assert instance.process.poll() is None, instance.tail()

        events = await ledger_events(owner)
    assert_one_closure_per_round(events, round_streams(tables))
    assert_postings_balance(events)
    assert {k: r.bets() for k, r in wallet.unique.items()} == expected
    assert wallet_paid(wallet) == ledger_returned(events)


async def _holder(watcher: asyncpg.Connection) -> str:
    """What the session holding the append lock is doing, for a failure's message."""
    rows = await watcher.fetch(
        "SELECT a.pid, a.state, a.wait_event_type, a.wait_event, now() - a.xact_start AS xact, "
        "now() - a.state_change AS since, left(a.query, 200) AS query FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
    )
    return "; ".join(str(dict(row)) for row in rows) or "no holder"


async def _not_held_by(watcher: asyncpg.Connection, proxy: TcpProxy) -> bool:
    return not await _holds(watcher, proxy)


async def _moves(instance: ServeProcess) -> bool:
    return await _consumed(instance) > 0


async def _relay_gauge_is(instance: ServeProcess, value: float) -> bool:
    try:
        return await _figure(instance, "croupier_relay_active") == value
    except (OSError, TimeoutError):
        return False


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 1)[0]
