"""``croupier demo --instances N`` on the real RabbitMQ and PostgreSQL (a scratch vhost and
database): two partitioned ``croupier serve`` processes share the ledger's partitions, each
settles some of the feed, every round is closed once and paid, and both stop gracefully,
leases released; with ``--kill-one`` the survivor takes the killed one's partitions. Without
RabbitMQ or PostgreSQL, or on a vhost that carries the single-queue feed, it stops saying
what is missing and how to start it, and plays nothing (never embedded)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import aio_pika
import asyncpg
import pytest
from conftest import POSTGRES_URL, RABBITMQ_URL

from croupier.bus.amqp import declare_topology
from croupier.urls import host_port

pytestmark = pytest.mark.integration

PARTITIONS = 8
ROUNDS = 24
#: One instance's closing line: its name, the most partitions it held, what it settled, and
#: how it ended.
FINAL = re.compile(r"^fleet: (i\d) held up to (\d+) partitions, settled ([\d,]+) messages, (.*)$")


def demo(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    environment |= {"CROUPIER_HTTP_PORT": "0", "CROUPIER_WEB_PORT": "0", **env}
    return subprocess.run(
        [sys.executable, "-m", "floor.cli", "demo", *args],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("kill", [False, True], ids=["both-to-the-end", "kill-one"])
async def test_two_instances_share_the_partitions_and_settle_every_round_once(
    tmp_path: Path, amqp_vhost: str, postgres_database: str, kill: bool
) -> None:
    migrate = [sys.executable, "-m", "croupier.cli", "migrate", "--ledger", postgres_database]
    migrated = subprocess.run(
        [*migrate, "--partitions", str(PARTITIONS)], capture_output=True, text=True, timeout=120
    )
    assert migrated.returncode == 0, migrated.stderr
    env = {
        "CROUPIER_AMQP_URL": amqp_vhost,
        "CROUPIER_DATABASE_URL": postgres_database,
        # a short term and relay lease: the killed instance's are taken over within seconds
        "CROUPIER_PARTITION_TERM": "3",
        "CROUPIER_RELAY_LEASE": "3",
    }
    args = ["--instances", "2", "--rounds", str(ROUNDS), "--seed", "5"]
    done = demo(tmp_path, env, *args, *(["--kill-one"] if kill else []))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert (
        f"partitioned mode: 2 instances, RabbitMQ at amqp://guest:***@{host_port(amqp_vhost)}"
        in out
    )
    finals = {m[1]: m for line in out.splitlines() if (m := FINAL.match(line))}
    assert sorted(finals) == ["i1", "i2"], out
    for name, final in finals.items():
        assert int(final[2]) >= 1, f"{name} took no partition:\n{out}"
        assert int(final[3].replace(",", "")) > 0, f"{name} settled nothing:\n{out}"
    endings = sorted(final[4] for final in finals.values())
    if kill:
        assert endings == ["killed midway", "stopped, exit 0"], out
        (survivor,) = (f for f in finals.values() if f[4] == "stopped, exit 0")
        assert int(survivor[2]) == PARTITIONS, f"the survivor took every partition:\n{out}"
        assert "  killed i" in out
    else:
        assert endings == ["stopped, exit 0"] * 2, out
    assert "fleet: leases held after the stop 0" in out
    closed = re.search(r"^rounds dealt (\d+), closed (\d+), open \d+$", out, re.M)
    assert closed is not None and int(closed[1]) == ROUNDS, out
    assert f"closed once each: {closed[2]} of {closed[2]}; postings balanced in {closed[2]}" in out
    assert out.rstrip().endswith("demo: OK, every closed round paid to the unit"), out
    assert "Traceback" not in done.stderr
    connection = await asyncpg.connect(postgres_database)
    try:
        twice = await connection.fetch(
            "SELECT stream FROM events WHERE type IN ('round.settled', 'round.voided') "
            "GROUP BY stream HAVING count(*) > 1"
        )
        held = await connection.fetchval(
            "SELECT count(*) FROM partition_leases WHERE owner IS NOT NULL AND expires_at > now()"
        )
    finally:
        await connection.close()
    assert twice == [] and held == 0


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("missing", ["RabbitMQ", "PostgreSQL"])
def test_a_service_missing_stops_it_saying_what_and_how_to_start_it(
    tmp_path: Path, missing: str
) -> None:
    port = closed_port()
    env = {"CROUPIER_AMQP_URL": RABBITMQ_URL, "CROUPIER_DATABASE_URL": POSTGRES_URL}
    if missing == "RabbitMQ":
        env["CROUPIER_AMQP_URL"] = f"amqp://guest:guest@127.0.0.1:{port}/"
        variable = "CROUPIER_AMQP_URL"
    else:
        env["CROUPIER_DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:{port}/croupier"
        variable = "CROUPIER_DATABASE_URL"
    done = demo(tmp_path, env, "--instances", "2", "--rounds", "4")
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        f"croupier demo --instances 2 runs partitioned `croupier serve` processes, which need "
        f"RabbitMQ and PostgreSQL: {missing} at 127.0.0.1:{port} ({variable}) not reachable; "
        "start it with `make services`"
    ) in done.stderr
    assert "embedded" not in done.stdout and "instance i1" not in done.stdout
    assert not (tmp_path / "var" / "demo.sqlite").exists()
    assert "Traceback" not in done.stderr


async def test_a_vhost_of_the_single_queue_feed_is_refused(
    tmp_path: Path, amqp_vhost: str, postgres_database: str
) -> None:
    connection = await aio_pika.connect(amqp_vhost)
    try:
        await declare_topology(await connection.channel())  # the single-queue feed
    finally:
        await connection.close()
    env = {"CROUPIER_AMQP_URL": amqp_vhost, "CROUPIER_DATABASE_URL": postgres_database}
    done = demo(tmp_path, env, "--instances", "2", "--rounds", "4")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "carries the single-queue feed (croupier.feed)" in done.stderr
    assert "rabbitmqctl add_vhost croupier-partitioned" in done.stderr
    assert "instance i1" not in done.stdout
