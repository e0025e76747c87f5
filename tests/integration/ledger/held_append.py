"""A PostgreSQL ledger whose append holds its transaction open after writing, until released:
for the tests of what may or may not happen while an append is in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from croupier.ledger.batch import Plan
from croupier.ledger.postgres import PostgresLedger

if TYPE_CHECKING:
    from croupier.ledger.postgres import Conn


class HeldAppend(PostgresLedger):
    """Holds its append transaction open after writing, until released."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.written = asyncio.Event()
        self.release = asyncio.Event()

    async def _write(self, conn: Conn, plan: Plan, head: Sequence[Any]) -> None:
        await super()._write(conn, plan, head)
        self.written.set()
        await self.release.wait()
