"""The history store on PostgreSQL: the ledger's events and the rounds read model.

Every session runs with ``default_transaction_read_only = on``, on top of the read-only
role ``croupier_web`` the service is meant to connect as (granted SELECT only).

Each request is one statement, prepared once per connection (asyncpg's statement cache).
A connection goes back to the pool without the reset round trip (``RESET ALL``, ...): its
sessions only read, and leave no locks, listeners, cursors or settings behind.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from croupier.history.models import TableRound
from croupier.history.store import Cursor, HistoryStore, StoredRound
from croupier.ledger import RecordedEvent

_FACTS = """
    SELECT position, stream, version, type, data, key, recorded_at, prev_hash, hash
    FROM events WHERE stream = $1 ORDER BY version
"""
_PLAYER_ROUNDS = """
    SELECT position, currency, document FROM history_player_rounds
    WHERE player_id = $1 AND (position, currency) < ($2, $3)
    ORDER BY position DESC, currency DESC LIMIT $4
"""
_RECALL = """
    SELECT document FROM history_recalls
    WHERE table_id = $1 AND round_id = $2 AND player_id = $3
"""
_TABLE_ROUNDS = """
    SELECT table_id, round_id, game, paytable, status, closed_at, position
    FROM history_rounds
    WHERE table_id = $1 AND position < $2
    ORDER BY position DESC LIMIT $3
"""
_NEWEST = (2**63 - 1, "~")  # sorts after every position and currency


def read_only_url(url: str) -> str:
    """``url`` with every transaction read-only (a server setting asyncpg passes on)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "default_transaction_read_only"]
    query.append(("default_transaction_read_only", "on"))
    return urlunsplit(parts._replace(query=urlencode(query)))


class PostgresHistory(HistoryStore):
    """Reads the ledger and the read model through a small pool (created on first use)."""

    def __init__(self, url: str, *, max_size: int = 10) -> None:
        self.url = read_only_url(url)
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._lock = asyncio.Lock()

    async def pool(self) -> asyncpg.Pool:
        """The connection pool."""
        async with self._lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self.url, min_size=1, max_size=self._max_size, reset=_nothing_to_reset
                )
        return self._pool

    async def round_facts(self, table_id: str, round_id: str) -> list[RecordedEvent]:
        rows = await (await self.pool()).fetch(_FACTS, f"round:{table_id}:{round_id}")
        return [
            RecordedEvent(
                r["position"], r["stream"], r["version"], r["type"], json.loads(r["data"]),
                r["key"], r["recorded_at"], r["prev_hash"], r["hash"],
            )
            for r in rows
        ]  # fmt: skip

    async def player_recall(self, table_id: str, round_id: str, player_id: str) -> str | None:
        found = await (await self.pool()).fetchval(_RECALL, table_id, round_id, player_id)
        return str(found) if found is not None else None

    async def player_rounds(
        self, player_id: str, limit: int, before: Cursor | None
    ) -> list[StoredRound]:
        position, currency = (before.position, before.currency) if before else _NEWEST
        rows = await (await self.pool()).fetch(_PLAYER_ROUNDS, player_id, position, currency, limit)
        return [StoredRound(*row) for row in rows]

    async def table_rounds(
        self, table_id: str, limit: int, before: Cursor | None
    ) -> list[TableRound]:
        position = before.position if before else _NEWEST[0]
        rows = await (await self.pool()).fetch(_TABLE_ROUNDS, table_id, position, limit)
        return [table_round(r) for r in rows]

    async def ready(self) -> bool:
        try:
            pool = await self.pool()
            await pool.fetchval("SELECT 1 FROM history_rounds LIMIT 1")
        except (TimeoutError, OSError, asyncpg.PostgresError):
            return False
        return True

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


async def _nothing_to_reset(_: asyncpg.Connection) -> None:
    """Read-only sessions leave nothing to reset."""


def table_round(row: Any) -> TableRound:
    """A rounds read-model row as the API answers it."""
    return TableRound(
        table_id=row["table_id"],
        round_id=row["round_id"],
        game=row["game"],
        paytable_id=row["paytable"],
        status=row["status"],
        closed_at=row["closed_at"],
        position=row["position"],
    )
