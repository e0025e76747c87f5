"""``croupier demo`` in live mode, on the real RabbitMQ and PostgreSQL (a scratch vhost and
database): the same audit as embedded mode, run after run under the same seed."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import POSTGRES_URL, connect_postgres, with_database

from croupier.urls import host_port

pytestmark = pytest.mark.integration


@pytest.mark.long
def test_live_demo_runs_twice_with_one_seed_and_pays_every_round(
    tmp_path: Path, amqp_vhost: str, postgres_database: str
) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    environment |= {
        "CROUPIER_AMQP_URL": amqp_vhost,
        "CROUPIER_DATABASE_URL": postgres_database,
        "CROUPIER_HTTP_PORT": "0",
        "CROUPIER_WEB_PORT": "0",
    }
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "floor.cli", "demo", "--rounds", "16", "--seed", "5"],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"live mode: RabbitMQ at amqp://guest:***@{host_port(amqp_vhost)}/" in done.stdout
        assert "rounds dealt 16, closed 16, open 0" in done.stdout, done.stdout
        assert done.stdout.rstrip().endswith("demo: OK, every closed round paid to the unit")
        assert "Traceback" not in done.stderr


async def test_the_live_demo_needs_no_database_but_its_own(tmp_path: Path, amqp_vhost: str) -> None:
    """A missing ledger database stops the demo with how to create it; the demo never
    connects to another database (the server's maintenance one) to create it itself."""
    name = f"croupier_test_missing_{uuid.uuid4().hex[:12]}"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    environment |= {
        "CROUPIER_AMQP_URL": amqp_vhost,
        "CROUPIER_DATABASE_URL": with_database(POSTGRES_URL, name),
        "CROUPIER_HTTP_PORT": "0",
        "CROUPIER_WEB_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "floor.cli", "demo", "--rounds", "4", "--seed", "5"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f'database "{name}" does not exist' in done.stderr, done.stderr
    assert f"create it (`createdb -h 127.0.0.1 -U postgres {name}`)" in done.stderr
    assert "Traceback" not in done.stderr
    admin = await connect_postgres()
    try:
        assert await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name) is None
    finally:
        await admin.close()
