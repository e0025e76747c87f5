"""The history store on the embedded SQLite ledger, opened read-only (``mode=ro``)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime
from typing import Any

from croupier.history.models import TableRound
from croupier.history.postgres import table_round
from croupier.history.store import Cursor, HistoryStore, StoredRound
from croupier.ledger import RecordedEvent

_FACTS = """
    SELECT position, stream, version, type, data, key, recorded_at, prev_hash, hash
    FROM events WHERE stream = ? ORDER BY version
"""
_PLAYER_ROUNDS = """
    SELECT position, currency, document FROM history_player_rounds
    WHERE player_id = ? AND (position < ? OR (position = ? AND currency < ?))
    ORDER BY position DESC, currency DESC LIMIT ?
"""
_RECALL = """
    SELECT document FROM history_recalls WHERE table_id = ? AND round_id = ? AND player_id = ?
"""
_TABLE_ROUNDS = """
    SELECT table_id, round_id, game, paytable, status, closed_at, position
    FROM history_rounds
    WHERE table_id = ? AND position < ?
    ORDER BY position DESC LIMIT ?
"""
_NEWEST = (2**63 - 1, "~")


class SqliteHistory(HistoryStore):
    """One read-only connection, used by one worker thread at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            uri = f"file:{self.path}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.row_factory = sqlite3.Row
            self._conn = conn
        return self._conn

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        async with self._lock:
            return await asyncio.to_thread(lambda: self._connect().execute(sql, params).fetchall())

    async def round_facts(self, table_id: str, round_id: str) -> list[RecordedEvent]:
        rows = await self._fetch(_FACTS, (f"round:{table_id}:{round_id}",))
        return [
            RecordedEvent(
                r["position"], r["stream"], r["version"], r["type"], json.loads(r["data"]),
                r["key"], datetime.fromisoformat(r["recorded_at"]), r["prev_hash"], r["hash"],
            )
            for r in rows
        ]  # fmt: skip

    async def player_recall(self, table_id: str, round_id: str, player_id: str) -> str | None:
        rows = await self._fetch(_RECALL, (table_id, round_id, player_id))
        return str(rows[0][0]) if rows else None

    async def player_rounds(
        self, player_id: str, limit: int, before: Cursor | None
    ) -> list[StoredRound]:
        position, currency = (before.position, before.currency) if before else _NEWEST
        params = (player_id, position, position, currency, limit)
        return [StoredRound(*row) for row in await self._fetch(_PLAYER_ROUNDS, params)]

    async def table_rounds(
        self, table_id: str, limit: int, before: Cursor | None
    ) -> list[TableRound]:
        position = before.position if before else _NEWEST[0]
        params = (table_id, position, limit)
        return [table_round(r) for r in await self._fetch(_TABLE_ROUNDS, params)]

    async def ready(self) -> bool:
        try:
            await self._fetch("SELECT 1 FROM history_rounds LIMIT 1", ())
        except sqlite3.Error:
            return False
        return True

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
