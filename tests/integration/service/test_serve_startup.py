"""``croupier serve`` start-up: it never migrates, and says what to do when it cannot start."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from service_harness import service_role

from croupier.ledger.signing import LedgerKey

pytestmark = pytest.mark.integration


async def _serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "croupier.cli", "serve"]
    environment = {**os.environ, "CROUPIER_HTTP_PORT": "1", **env}
    return await asyncio.to_thread(
        subprocess.run, command, env=environment, capture_output=True, text=True, timeout=120
    )


async def test_serve_does_not_migrate_and_says_who_should(
    postgres_database: str, tmp_path: Path
) -> None:
    private, _ = LedgerKey.generate().write(tmp_path)
    env = {"CROUPIER_DATABASE_URL": postgres_database, "CROUPIER_LEDGER_SIGNING_KEY": str(private)}
    done = await _serve(env)
    assert done.returncode == 2, done.stderr
    assert "run `croupier migrate` as the database owner" in done.stderr
    assert "Traceback" not in done.stderr
    conn = await asyncpg.connect(postgres_database)
    try:  # nothing was created
        assert await conn.fetchval("SELECT to_regclass('schema_migrations')") is None
    finally:
        await conn.close()


async def test_serve_needs_its_signing_key(postgres_database: str) -> None:
    async with service_role(postgres_database) as url:
        done = await _serve({"CROUPIER_DATABASE_URL": url, "CROUPIER_LEDGER_SIGNING_KEY": ""})
    assert done.returncode == 2
    assert "CROUPIER_LEDGER_SIGNING_KEY is not set" in done.stderr
    assert "croupier keygen --out DIR" in done.stderr


async def test_the_service_role_has_croupier_app_rights_and_nothing_more(
    postgres_database: str,
) -> None:
    async with service_role(postgres_database) as url:
        conn = await asyncpg.connect(url)
        try:
            role = await conn.fetchrow(
                "SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, rolreplication "
                "FROM pg_roles WHERE rolname = current_user"
            )
            assert not any(role.values())
            groups = await conn.fetch(
                "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
                "WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)"
            )
            assert [g[0] for g in groups] == ["croupier_app"]
            owned = await conn.fetchval(
                "SELECT count(*) FROM pg_tables WHERE tableowner = current_user"
            )
            assert owned == 0
        finally:
            await conn.close()
