"""The read-model suite against the SQLite ledger (a temporary file per test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from projection_suite import ProjectionSuite


class TestSqliteProjection(ProjectionSuite):
    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"
