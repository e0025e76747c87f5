"""The history store on PostgreSQL: the ledger's events and the rounds read model.

Every session runs with ``default_transaction_read_only = on``, on top of the read-only
role ``croupier_web`` the service is meant to connect as (granted SELECT only).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from croupier.history.models import Decision, PlayerRound, Result, TableRound
from croupier.history.store import Cursor, HistoryStore
from croupier.ledger import RecordedEvent

_FACTS = """
    SELECT position, stream, version, type, data, key, recorded_at, prev_hash, hash
    FROM events WHERE stream = $1 ORDER BY version
"""
_PLAYER_ROUNDS = """
    SELECT table_id, round_id, game, paytable, status, closed_at, position, currency,
           stake, returned, wagers
    FROM history_player_rounds
    WHERE player_id = $1 AND (position, currency) < ($2, $3)
    ORDER BY position DESC, currency DESC LIMIT $4
"""
_DECISIONS = """
    SELECT d.table_id, d.round_id, d.ante_bet_id, d.stage, d.action, d.bet_id, d.amount
    FROM unnest($1::text[], $2::text[]) AS r(table_id, round_id)
    JOIN history_decisions d ON d.table_id = r.table_id AND d.round_id = r.round_id
    ORDER BY d.position
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
                    self.url, min_size=1, max_size=self._max_size
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

    async def player_rounds(
        self, player_id: str, limit: int, before: Cursor | None
    ) -> list[PlayerRound]:
        position, currency = (before.position, before.currency) if before else _NEWEST
        pool = await self.pool()
        rows = await pool.fetch(_PLAYER_ROUNDS, player_id, position, currency, limit)
        if not rows:
            return []
        rounds = list(dict.fromkeys((r["table_id"], r["round_id"]) for r in rows))
        tables, ids = [t for t, _ in rounds], [i for _, i in rounds]
        decided = await pool.fetch(_DECISIONS, tables, ids)
        return player_rounds(rows, decided)

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


def player_rounds(rows: Sequence[Any], decided: Sequence[Any]) -> list[PlayerRound]:
    """Read-model rows as the API answers them, each with the decisions on its antes."""
    by_round: dict[tuple[str, str], list[Any]] = {}
    for d in decided:
        by_round.setdefault((d[0], d[1]), []).append(d)
    out = []
    for row in rows:
        wagers = [Result.model_validate(w) for w in json.loads(row["wagers"])]
        antes = {w.bet_id: w for w in wagers if w.spot == "ante"}
        decisions = [
            Decision(
                ante_bet_id=d[2],
                player_id=antes[d[2]].player_id,
                box=antes[d[2]].box,
                stage=d[3],
                action=d[4],
                bet_id=d[5],
                amount=d[6],
            )
            for d in by_round.get((row["table_id"], row["round_id"]), [])
            if d[2] in antes
        ]
        out.append(
            PlayerRound(
                table_id=row["table_id"],
                round_id=row["round_id"],
                game=row["game"],
                paytable_id=row["paytable"],
                status=row["status"],
                closed_at=row["closed_at"],
                position=row["position"],
                currency=row["currency"],
                stake=row["stake"],
                returned=row["returned"],
                net=row["returned"] - row["stake"],
                wagers=wagers,
                decisions=decisions,
            )
        )
    return out


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
