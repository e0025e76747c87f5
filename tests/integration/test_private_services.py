"""The private instances behave as the crash tests assume: kill loses nothing committed,
pause makes the instance answer nothing until resumed."""

from __future__ import annotations

import asyncpg
import pytest
from private_services import PrivatePostgres

pytestmark = pytest.mark.integration


async def test_a_killed_private_postgres_restarts_with_what_it_committed(
    private_postgres: PrivatePostgres,
) -> None:
    connection = await asyncpg.connect(private_postgres.url)
    await connection.execute("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
    await connection.close()
    private_postgres.kill()
    assert not private_postgres.running
    private_postgres.start()
    connection = await asyncpg.connect(private_postgres.url)
    try:
        assert await connection.fetchval("SELECT n FROM kept") == 7
    finally:
        await connection.close()


async def test_a_paused_private_postgres_answers_nothing_until_resumed(
    private_postgres: PrivatePostgres,
) -> None:
    connection = await asyncpg.connect(private_postgres.url)
    private_postgres.pause()
    try:
        with pytest.raises(TimeoutError):
            await connection.fetchval("SELECT 1", timeout=1)
    finally:
        private_postgres.resume()
    connection = await asyncpg.connect(private_postgres.url)
    try:
        assert await connection.fetchval("SELECT 1") == 1
    finally:
        await connection.close()
