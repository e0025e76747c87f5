"""Bad configurations only the real PostgreSQL and RabbitMQ can show: one line each, exit 2,
no traceback, no password, no raw errno, and no library's log line before it (a service
logs JSON lines; a command only its error). The rest of the table is in tests/unit/cli."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import POSTGRES_URL, RABBITMQ_URL, with_database, with_vhost

from croupier.ledger.signing import LedgerKey

pytestmark = pytest.mark.integration

SECRET = "s3cret-pw"


def with_login(url: str, user: str, password: str | None) -> str:
    parts = urlsplit(url)
    login = f"{user}:{password}" if password else user
    return urlunsplit(parts._replace(netloc=f"{login}@{parts.netloc.rpartition('@')[2]}"))


PG, MQ = urlsplit(POSTGRES_URL), urlsplit(RABBITMQ_URL)
PG_AT, MQ_AT = f"{PG.hostname}:{PG.port or 5432}", f"{MQ.hostname}:{MQ.port or 5672}"
# serve gets as far as the broker: a migrated ledger and a signing key (made in the test).
SERVE_ON_SQLITE = {
    "CROUPIER_DATABASE_URL": "sqlite:///serve.db",
    "CROUPIER_HTTP_PORT": "0",
    "CROUPIER_LEDGER_SIGNING_KEY": "keys/ledger-signing.key",
}


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]
    message: str
    env: dict[str, str] = field(default_factory=dict)


CASES = [
    Case(
        "verify-missing-database",
        ["verify", "--ledger", with_database(POSTGRES_URL, "croupier_no_such_db")],
        f'PostgreSQL at {PG_AT}: database "croupier_no_such_db" does not exist; create it '
        f"(`createdb -h {PG.hostname} -U postgres croupier_no_such_db`)",
    ),
    Case(
        "replay-missing-database",
        ["replay", "feed.jsonl", "--out", "o", "--rejections", "r"],
        'database "croupier_no_such_db" does not exist',
        {"CROUPIER_DATABASE_URL": with_database(POSTGRES_URL, "croupier_no_such_db")},
    ),
    Case(
        "migrate-unknown-role",
        ["migrate", "--ledger", with_login(POSTGRES_URL, "croupier_nobody", SECRET)],
        f'PostgreSQL at {PG_AT} refused the login: role "croupier_nobody" does not exist',
    ),
    Case(
        "serve-wrong-broker-password",
        ["serve"],
        f"RabbitMQ at {MQ_AT} refused the login; fix the user and password in CROUPIER_AMQP_URL",
        {"CROUPIER_AMQP_URL": with_login(RABBITMQ_URL, "guest", SECRET)} | SERVE_ON_SQLITE,
    ),
    Case(
        "serve-missing-vhost",
        ["serve"],
        f"RabbitMQ at {MQ_AT} closed the connection at login: the virtual host "
        "'croupier-no-such-vhost' does not exist",
        {
            "CROUPIER_AMQP_URL": with_vhost(RABBITMQ_URL, "croupier-no-such-vhost"),
            **SERVE_ON_SQLITE,
        },
    ),
]


DOWN = "amqp://guest:guest@127.0.0.1:1/"
WRONG_PASSWORD = with_login(RABBITMQ_URL, "guest", SECRET)
NO_VHOST = with_vhost(RABBITMQ_URL, "croupier-no-such-vhost")
for command in (
    ["simulate", "--rounds", "2"],
    ["redrive", "--dry-run"],
    ["topology", "routed", "--partitions", "4", "--apply"],
):
    CASES += [
        Case(
            f"{command[0]}-broker-down",
            [*command, "--amqp", DOWN],
            "RabbitMQ at 127.0.0.1:1 does not answer (Connect call failed",
        ),
        Case(
            f"{command[0]}-wrong-broker-password",
            [*command, "--amqp", WRONG_PASSWORD],
            f"RabbitMQ at {MQ_AT} refused the login; fix the user and password in --amqp",
        ),
        Case(
            f"{command[0]}-missing-vhost",
            [*command, "--amqp", NO_VHOST],
            f"RabbitMQ at {MQ_AT} closed the connection at login: the virtual host "
            "'croupier-no-such-vhost' does not exist",
        ),
    ]
RECONCILE = ["reconcile", "--ledger", "sqlite:///serve.db", "--wallet"]
CASES += [
    Case(
        "reconcile-wallet-database-down",
        [*RECONCILE, "postgresql://postgres@127.0.0.1:1/wallet"],
        "PostgreSQL at 127.0.0.1:1 does not answer (Connect call failed ('127.0.0.1', 1)); "
        "start it with `make services`, or point --wallet at a running server",
    ),
    Case(
        "reconcile-wallet-missing-database",
        [*RECONCILE, with_database(POSTGRES_URL, "croupier_no_such_wallet")],
        f'PostgreSQL at {PG_AT}: database "croupier_no_such_wallet" does not exist; create it '
        f"(`createdb -h {PG.hostname} -U postgres croupier_no_such_wallet`) or fix --wallet",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_service_configuration_is_one_line_and_exit_2(case: Case, tmp_path: Path) -> None:
    (tmp_path / "feed.jsonl").write_text("")
    LedgerKey.generate().write(tmp_path / "keys")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    croupier = [sys.executable, "-m", "floor.cli"]
    ledger = ["--ledger", "sqlite:///serve.db"]
    subprocess.run([*croupier, "migrate", *ledger], cwd=tmp_path, env=environment, check=True)
    if case.args[0] == "reconcile":  # a ledger with rounds in it, to reconcile against
        for step in (
            ["simulate", "--rounds", "2", "--seed", "1", "--out", "played.jsonl"],
            ["replay", "played.jsonl", *ledger, "--out", "o.jsonl", "--rejections", "r.jsonl"],
        ):
            subprocess.run(
                [*croupier, *step], cwd=tmp_path, env=environment, check=True, capture_output=True
            )
    done = subprocess.run(
        [*croupier, *case.args],
        cwd=tmp_path,
        env={**environment, **case.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    *logs, line = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert case.message in line, done.stderr
    if case.args[0] == "serve":
        assert all(json.loads(log)["logger"] for log in logs), done.stderr
    else:  # its own progress lines may come first, no log line of a library
        assert not [log for log in logs if log.startswith("{")], done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stdout + done.stderr
    assert "Errno" not in done.stderr
    if case.args[0] == "reconcile":  # the wallet's database is at fault, not the ledger
        assert "--ledger" not in line and "CROUPIER_DATABASE_URL" not in line
