"""``croupier partitions --prune-bindings`` on the real RabbitMQ and PostgreSQL: the bindings
of the tables the ledger has not seen lately are removed, the others stay, and a table
pruned while a partitioned ``croupier serve`` runs (whose router bound it before) still has
its next round settled, its binding made again.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import rabbitmqctl
from service_harness import (
    assert_one_closure_per_round,
    closed_rounds,
    eventually,
    ledger_events,
    played_tables,
    prepare_routed_broker,
    round_streams,
    serve_process,
)

from croupier.bus.topology import ROUTED_EXCHANGE
from croupier.ledger.partitions import partition_of
from studio.config import StudioConfig, TableSpec, parse_table_specs
from studio.feed import FeedMessage, simulate
from studio.publisher import publish

pytestmark = pytest.mark.integration

PARTITIONS = 4
#: Stale tables are last seen at least this long before the fresh ones play again: the
#: bound on how late the prune command may take its clock (its start-up and ledger read,
#: several seconds on a loaded CI) before it would take the fresh tables for stale too.
QUIET = 20.0


def feed(tables: tuple[TableSpec, ...], seed: int) -> list[FeedMessage]:
    """One round on each of ``tables``, none faulted (each must close)."""
    config = StudioConfig(tables=tables, rounds=len(tables), seed=seed, timeout_rate=0.0)
    return list(simulate(config))


async def older_than(database_url: str, stale: set[str]) -> str:
    """An ``--older-than`` whose cutoff falls a second or two after the stale tables' last
    fact, however late the command starts (up to the fresh tables' return, QUIET later)."""
    recorded = [
        e.recorded_at
        for e in await ledger_events(database_url)
        if e.stream.startswith("round:") and e.stream.split(":")[1] in stale
    ]
    return f"{math.floor((datetime.now(UTC) - max(recorded)).total_seconds()) - 1}s"


def croupier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "croupier.cli", *args], capture_output=True, text=True, timeout=120
    )


def routed_bindings(url: str) -> dict[str, str]:
    """Each binding key from ``croupier.feed.in``, and its queue."""
    vhost = url.rsplit("/", 1)[1]
    listing = rabbitmqctl(
        "list_bindings", "-p", vhost, "source_name", "routing_key", "destination_name"
    )
    rows = [line.split("\t") for line in listing.splitlines()]
    return {row[1]: row[2] for row in rows if len(row) == 3 and row[0] == ROUTED_EXCHANGE}


async def test_stale_bindings_go_fresh_stay_and_a_pruned_table_still_settles(
    postgres_database: str, amqp_vhost: str, tmp_path: Path
) -> None:
    tables = parse_table_specs(["classic*6:shared=3"], prefix=f"prune-{secrets.token_hex(3)}")
    stale, fresh = tables[:3], tables[3:]
    migrate = croupier("migrate", "--ledger", postgres_database, "--partitions", str(PARTITIONS))
    assert migrate.returncode == 0, migrate.stderr
    await prepare_routed_broker(amqp_vhost, PARTITIONS)
    env = {"CROUPIER_PARTITIONED": "1", "CROUPIER_PARTITION_TERM": "3"}
    first, again, back = feed(tables, 1), feed(fresh, 2), feed(stale[:1], 3)
    with serve_process(postgres_database, amqp_vhost, tmp_path / "serve.log", env=env) as served:
        await served.ready()

        async def closed(count: int) -> None:
            async def reached() -> bool:
                return await closed_rounds(postgres_database) >= count

            await eventually(reached, 60, f"{count} rounds closed")

        await publish(first, amqp_vhost)
        await closed(6)
        assert {b.rsplit(".", 1)[0] for b in routed_bindings(amqp_vhost)} == {
            t.table_id for t in tables
        }
        await asyncio.sleep(QUIET)
        await publish(again, amqp_vhost)
        await closed(9)

        pruned = croupier(
            "partitions",
            "--prune-bindings",
            "--older-than",
            await older_than(postgres_database, {t.table_id for t in stale}),
            "--ledger",
            postgres_database,
            "--amqp",
            amqp_vhost,
            "--json",
        )
        assert pruned.returncode == 0, pruned.stderr
        document = json.loads(pruned.stdout)
        assert [t["table_id"] for t in document["tables"]] == sorted(t.table_id for t in stale)
        assert document["seen"] == 6 and document["dry_run"] is False
        bindings = routed_bindings(amqp_vhost)
        assert bindings == {
            f"{t.table_id}.#": f"croupier.feed.p{partition_of(t.table_id, PARTITIONS):02d}"
            for t in fresh
        }

        await asyncio.sleep(1.0)  # every table now older than 1 s
        listed = croupier(
            "partitions",
            "--prune-bindings",
            "--older-than",
            "1s",
            "--dry-run",
            "--ledger",
            postgres_database,
            "--amqp",
            amqp_vhost,
        )
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.count("would remove ") == 6, listed.stdout
        assert routed_bindings(amqp_vhost) == bindings, "a dry run removes nothing"

        # The instance's router bound this table before: the binding is made again all the same.
        await publish(back, amqp_vhost)
        await closed(10)
        assert f"{stale[0].table_id}.#" in routed_bindings(amqp_vhost)
        served.process.send_signal(signal.SIGTERM)
        assert await served.exit_code(30) == 0

    events = await ledger_events(postgres_database)
    assert_one_closure_per_round(events, round_streams(played_tables([*first, *again, *back])))
    assert [e for e in events if e.stream == "rejections"] == []
