"""``croupier demo`` in live mode, on the real RabbitMQ and PostgreSQL (a scratch vhost and
database): the same audit as embedded mode, run after run under the same seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from croupier.urls import host_port

pytestmark = pytest.mark.integration


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
            [sys.executable, "-m", "croupier.cli", "demo", "--rounds", "16", "--seed", "5"],
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
