"""The ledger suite against the SQLite adapter (a temporary file per test)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from ledger_suite import LedgerSuite, append

from croupier.ledger import open_ledger
from croupier.ledger.sqlite import SqliteLedger


def _path(url: str) -> str:
    return url.removeprefix("sqlite:///")


class TestSqliteLedger(LedgerSuite):
    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"

    async def raw(self, url: str, statement: str) -> None:
        with sqlite3.connect(_path(url)) as conn:
            conn.execute(statement)

    def out_of_reach(self, url: str) -> str:
        return f"sqlite:///{Path(_path(url)).parent / 'no such directory' / 'ledger.db'}"

    async def tamper(self, url: str, *statements: str) -> None:
        conn = sqlite3.connect(_path(url))
        try:
            triggers = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
            ).fetchall()
            for name, _ in triggers:
                conn.execute(f"DROP TRIGGER {name}")
            for statement in statements:
                conn.execute(statement)
            for _, sql in triggers:
                conn.execute(sql)
            conn.commit()
        finally:
            conn.close()


async def test_memory_ledger_works_without_a_file() -> None:
    ledger = open_ledger("sqlite:///:memory:")
    assert isinstance(ledger, SqliteLedger)
    assert await ledger.migrate() == [
        "0001_ledger.sql",
        "0002_relay.sql",
        "0003_signed_heads.sql",
        "0004_signed_set_aside.sql",
        "0005_open_floor.sql",
        "0006_published_claim.sql",
        "0007_partition_leases.sql",
    ]
    await ledger.append([append("s", 0, 3)])
    assert [e.version for e in await ledger.read_stream("s")] == [1, 2, 3]
    assert (await ledger.verify()).ok
    await ledger.close()


async def test_file_ledger_uses_wal_and_survives_reopening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await ledger.append([append("s", 0, 2)])
    async with open_ledger(url) as ledger:
        assert await ledger.migrate() == []
        assert await ledger.last_position() == 2
    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unknown_url_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported ledger url"):
        open_ledger("mysql://localhost/ledger")
