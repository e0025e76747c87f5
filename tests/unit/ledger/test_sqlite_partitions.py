"""The partition ownership suite against the SQLite adapter (a temporary file per test)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from partitions_suite import PartitionSuite


class TestSqlitePartitions(PartitionSuite):
    refused = (sqlite3.IntegrityError,)

    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"

    async def raw(self, url: str, statement: str) -> None:
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement)
