"""The reconciliation suite against the real PostgreSQL, and a wallet kept in PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from pathlib import Path

import asyncpg
import pytest
from history_web import reader_role
from reconcile_suite import (
    HoldSuite,
    ReconcileSuite,
    cli,
    feed,
    found_keys,
    planted_keys,
    settle_feed,
    write_wallet,
)

from contract.wallet import FIELDS
from croupier.ledger import open_ledger
from croupier.settlement.replay import replay
from studio.wallet import WalletFaults

pytestmark = pytest.mark.integration


class TestPostgresHold(HoldSuite):
    @pytest.fixture
    def ledger_url(self, postgres_database: str) -> str:
        return postgres_database


class TestPostgresReconcile(ReconcileSuite):
    @pytest.fixture
    def ledger_url(self, postgres_database: str) -> str:
        return postgres_database


async def test_a_wallet_kept_in_postgresql_reconciles_like_its_file(
    postgres_database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settled = await settle_feed(postgres_database, feed(rounds=40))
    wallet = tmp_path / "wallet.csv"
    planted = write_wallet(settled, wallet, WalletFaults(drop_credit=1, change_amount=1))
    conn = await asyncpg.connect(postgres_database)
    try:
        await conn.execute(
            "CREATE TABLE wallet_transactions (transaction_id text, kind text, "
            "message_id text, table_id text, round_id text, bet_id text, player_id text, "
            "currency text, amount bigint, occurred_at timestamptz, note text)"
        )
        with wallet.open() as handle:
            rows = list(csv.DictReader(handle))
        await conn.copy_records_to_table(
            "wallet_transactions",
            records=[
                (
                    *(r[c] or None for c in FIELDS[:8]),
                    int(r["amount"]),
                    datetime.fromisoformat(r["occurred_at"]),
                    "extra columns are ignored",
                )
                for r in rows
            ],
        )
    finally:
        await conn.close()
    capsys.readouterr()  # what settling the feed logged
    base = ["reconcile", "--ledger", postgres_database, "--wallet", postgres_database, "--json"]
    for extra in ([], ["--wallet-query", "SELECT * FROM wallet_transactions WHERE amount > 0"]):
        assert await cli([*base, *extra]) == 1
        report = json.loads(capsys.readouterr().out)
        assert found_keys(report["discrepancies"]) == planted_keys(planted)
        assert report["wallet"]["rows"] == len(rows)


async def test_the_read_only_reader_role_reconciles_what_the_projector_wrote(
    postgres_database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settled = await settle_feed(postgres_database, feed(rounds=30))  # projected as the owner
    wallet = tmp_path / "wallet.csv"
    planted = write_wallet(settled, wallet, WalletFaults(drop_credit=1, debit_rejected=1))
    capsys.readouterr()
    async with reader_role(postgres_database) as reader:
        args = ["reconcile", "--ledger", reader, "--wallet", str(wallet), "--json"]
        for _ in range(2):  # a second run sees nothing the first left behind
            assert await cli(args) == 1
            report = json.loads(capsys.readouterr().out)
            assert found_keys(report["discrepancies"]) == planted_keys(planted)
        # The ledger grows and the read model falls behind: the reader may not write it,
        # so it says so and does not run, rather than report on a stale read model.
        async with open_ledger(postgres_database) as ledger:
            more = [m.body for m in feed(rounds=3, seed=12)]
            await replay(more, ledger, io.StringIO(), io.StringIO())
        assert await cli(args) == 2
        assert "croupier project" in capsys.readouterr().err
