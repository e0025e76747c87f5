"""The read-model suite against the real PostgreSQL, plus the projector role's rights."""

from __future__ import annotations

import asyncpg
import pytest
from projection_suite import ProjectionSuite, settle, studio_feed

from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.projection.projector import Projector
from croupier.projection.rounds import RoundsProjection
from croupier.projection.wagers import WagersProjection

pytestmark = pytest.mark.integration


class TestPostgresProjection(ProjectionSuite):
    @pytest.fixture
    def ledger_url(self, postgres_database: str) -> str:
        return postgres_database


async def test_the_projector_role_writes_read_models_but_not_the_ledger(
    postgres_database: str,
) -> None:
    async with open_ledger(postgres_database) as owner:
        await owner.migrate()
        await settle(owner, studio_feed(rounds=12))
        await Projector(owner, open_store(owner), [WagersProjection()]).setup()
    as_projector = f"{postgres_database}?role=croupier_projector"
    async with open_ledger(as_projector) as ledger:
        projector = Projector(ledger, open_store(ledger), [WagersProjection()])
        assert await projector.setup() == []
        assert await projector.catch_up() == await ledger.last_position()
    conn = await asyncpg.connect(as_projector)
    try:
        assert await conn.fetchval("SELECT current_user") == "croupier_projector"
        assert await conn.fetchval("SELECT count(*) FROM results") > 0
        for statement in (
            "INSERT INTO events SELECT * FROM events LIMIT 1",
            "INSERT INTO outbox (message_id, position, exchange, routing_key, body) "
            "VALUES ('m', 1, 'x', 'y', '{}')",
            "DELETE FROM events",
            "CREATE TABLE sneaky (x int)",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    finally:
        await conn.close()
    reader = await asyncpg.connect(f"{postgres_database}?role=croupier_reader")
    try:
        assert await reader.fetchval("SELECT count(*) FROM wagers") > 0
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await reader.execute("DELETE FROM wagers")
    finally:
        await reader.close()


async def test_recalls_of_shared_hands_stay_in_their_rows(postgres_database: str) -> None:
    """A shared hand's recall (several kB of JSON, under 4 kB after lz4) is compressed in its
    row, not moved out of line; a table made before the option takes it at the next setup
    that writes DDL."""
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()
        await settle(ledger, studio_feed(rounds=4, tables=("classic:shared=40",)))
        conn = await asyncpg.connect(postgres_database)
        try:
            await conn.execute(
                "CREATE TABLE history_recalls (table_id text NOT NULL, round_id text NOT NULL, "
                "player_id text NOT NULL, document text NOT NULL, "
                "PRIMARY KEY (table_id, round_id, player_id))"
            )
            projector = Projector(ledger, open_store(ledger), [RoundsProjection()])
            await projector.setup()
            await projector.catch_up()
            options = await conn.fetchval(
                "SELECT reloptions FROM pg_class WHERE relname = 'history_recalls'"
            )
            assert options == ["toast_tuple_target=4080"]
            longest, stored = await conn.fetchrow(
                "SELECT octet_length(document), pg_column_size(document) FROM history_recalls "
                "ORDER BY octet_length(document) DESC LIMIT 1"
            )
            assert longest > 4080 and stored < 4080  # compressed, and short enough to stay
            toasted = await conn.fetchval(
                "SELECT pg_relation_size(reltoastrelid) FROM pg_class "
                "WHERE relname = 'history_recalls'"
            )
            assert toasted == 0
        finally:
            await conn.close()
