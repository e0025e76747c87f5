"""The reconciliation suite against the SQLite ledger (a temporary file per test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reconcile_suite import HoldSuite, ReconcileSuite


class TestSqliteHold(HoldSuite):
    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"


class TestSqliteReconcile(ReconcileSuite):
    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"
