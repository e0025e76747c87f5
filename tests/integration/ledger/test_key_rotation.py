"""Key rotation on PostgreSQL and RabbitMQ as an operator does it: ``croupier serve`` with a
first key, ``rotate-key``, serve with the second key and the keyring, rotate again,
``croupier replay`` and then serve with the third; nobody touches the database. Every
result reaches the wallet once settled, nothing is set aside, and ``verify`` passes with
the keyring or each public key, and names a key left out, a revoked key and an adopted head.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import pytest
from integration.service.service_harness import (
    Wallet,
    expected_results,
    ledger_events,
    ledger_returned,
    played_tables,
    prepare_broker,
    prepare_service,
    serve_process,
    studio_feed,
    wallet_paid,
)

from croupier.ledger.signing import LedgerKey, LedgerPublicKey
from studio import FeedMessage
from studio.publisher import publish

pytestmark = pytest.mark.integration


async def croupier(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "CROUPIER_LEDGER_SIGNING_KEY": "",
        "CROUPIER_LEDGER_KEYRING": "",
        **env,
    }
    command = [sys.executable, "-m", "croupier.cli", *args]
    return await asyncio.to_thread(
        subprocess.run, command, env=environment, capture_output=True, text=True, timeout=180
    )


async def serve(
    owner: str,
    amqp: str,
    log: Path,
    env: dict[str, str],
    wallet: Wallet,
    feed: Sequence[FeedMessage],
    awaited: Sequence[str],
) -> None:
    """Serve ``feed`` until the wallet has every ``awaited`` result, then SIGTERM."""
    assert await publish(feed, amqp) == len(feed)
    with serve_process(owner, amqp, log, max_batch=50, env=env) as served:
        await served.ready()
        await wallet.wait_for(awaited, timeout=120)
        served.process.send_signal(signal.SIGTERM)
        assert await served.exit_code() == 0, served.tail()


async def owner_fetch(url: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


@pytest.mark.long
async def test_serve_and_replay_go_on_across_two_rotations(
    postgres_database: str, amqp_vhost: str, tmp_path: Path
) -> None:
    owner = postgres_database
    service = prepare_service(owner)
    pairs = [LedgerKey.generate().write(tmp_path / f"key{n}") for n in (1, 2, 3)]
    ids = [LedgerPublicKey.from_file(public).key_id for _, public in pairs]
    publics = [str(public) for _, public in pairs]
    keyring = tmp_path / "keyring.json"
    signing = [{"CROUPIER_LEDGER_SIGNING_KEY": str(private)} for private, _ in pairs]
    with_keyring = [{**env, "CROUPIER_LEDGER_KEYRING": str(keyring)} for env in signing]
    feeds = [studio_feed(f"rot{n}", 24, seed=60 + n, void=0.0) for n in range(4)]
    awaited = [list(expected_results(played_tables(feed))) for feed in feeds]
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)
    log = tmp_path / "serve.log"

    await serve(owner, amqp_vhost, log, signing[0], wallet, feeds[0], awaited[0])
    done = await croupier(
        "rotate-key", "--to", publics[1], "--keyring", str(keyring), "--ledger", service,
        env=signing[0],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = int(re.findall(r"handed over at position (\d+)", done.stdout)[0])

    # The new key without the keyring exits 2 before consuming, naming the old key.
    with serve_process(owner, amqp_vhost, log, env=signing[1]) as refused:
        assert await refused.exit_code() == 2, refused.tail()
        assert f"signed with another key ({ids[0]}), not in the keyring" in refused.tail()

    await serve(owner, amqp_vhost, log, with_keyring[1], wallet, feeds[1], awaited[1])
    done = await croupier(
        "rotate-key", "--to", publics[2], "--ledger", service, env=with_keyring[1]
    )
    assert done.returncode == 0, done.stderr
    second = int(re.findall(r"handed over at position (\d+)", done.stdout)[0])

    # Replay under the third key, then serve with it: it publishes what the replay settled.
    source = tmp_path / "feed3.jsonl"
    source.write_bytes(b"".join(m.body + b"\n" for m in feeds[2]))
    done = await croupier(
        "replay", str(source), "--out", str(tmp_path / "r.jsonl"),
        "--rejections", str(tmp_path / "x.jsonl"), "--ledger", owner, env=with_keyring[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    await serve(
        owner, amqp_vhost, log, with_keyring[2], wallet, feeds[3], [*awaited[2], *awaited[3]]
    )

    # Every result once settled reached the wallet; nothing was set aside on the way.
    await wallet.drain()
    everything = [m for feed in feeds for m in feed]
    expected = expected_results(played_tables(everything))
    unique = wallet.unique
    assert unique.keys() == expected.keys()
    assert {k: r.bets() for k, r in unique.items()} == expected
    assert wallet_paid(wallet) == ledger_returned(await ledger_events(owner))
    assert await owner_fetch(owner, "SELECT * FROM outbox_set_aside") == []
    heads = await owner_fetch(
        owner, "SELECT key_id, min(position), max(position) FROM ledger_heads GROUP BY key_id"
    )
    spans = sorted((row[1], row[2], row[0]) for row in heads)
    assert [(s[0] > 0, s[1], s[2]) for s in spans] == [
        (True, first, ids[0]),
        (True, second, ids[1]),
        (True, spans[2][1], ids[2]),
    ]
    assert spans[1][0] > first and spans[2][0] > second

    for audit in (
        ["--keyring", str(keyring)],
        ["--public-key", publics[0], "--public-key", publics[1], "--public-key", publics[2]],
        ["--public-key", publics[0]],
    ):
        done = await croupier("verify", "--ledger", owner, *audit, env={})
        assert done.returncode == 0, done.stdout + done.stderr

    # A key left out, a revoked key, an adopted head: each refused and named.
    done = await croupier(
        "verify", "--ledger", owner, "--public-key", publics[1], "--public-key", publics[2], env={}
    )
    assert done.returncode == 1
    assert f"signed with another key ({ids[0]}), not in the keyring" in done.stdout
    revoked = tmp_path / "revoked.json"
    revoked.write_text(keyring.read_text())
    done = await croupier(
        "revoke-key", ids[1], "--from", str(first + 1), "--keyring", str(revoked), env={}
    )
    assert done.returncode == 0, done.stderr
    done = await croupier("verify", "--ledger", owner, "--keyring", str(revoked), env={})
    assert done.returncode == 1
    assert f"key {ids[1]} is revoked from position {first + 1}" in done.stdout

    conn = await asyncpg.connect(owner)
    try:  # the owner's hand: the adoption the threat model warns about
        await conn.execute("ALTER TABLE ledger_heads DISABLE TRIGGER USER")
        await conn.execute("DELETE FROM ledger_heads")
        await conn.execute("ALTER TABLE ledger_heads ENABLE TRIGGER USER")
    finally:
        await conn.close()
    with serve_process(owner, amqp_vhost, log, env=with_keyring[2]) as refused:
        assert await refused.exit_code() == 2, refused.tail()
        assert "signed heads were removed, and the ledger is not adopted" in refused.tail()
    done = await croupier("verify", "--ledger", owner, "--keyring", str(keyring), "--json", env={})
    assert done.returncode == 1
    missing = [
        (p["position"], p["detail"])
        for p in json.loads(done.stdout)["problems"]
        if p["table"] == "ledger_heads"
    ]
    assert [position for position, _ in missing] == [first, second]
    assert f"key {ids[0]}'s turn 1..{first} ends here" in missing[0][1]
