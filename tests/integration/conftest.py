"""Integration test services: the real PostgreSQL and RabbitMQ.

A service that cannot be reached fails the test with instructions; integration tests are
never skipped.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote, urlsplit, urlunsplit

import aio_pika
import asyncpg
import pytest
from aio_pika.exceptions import AMQPError

POSTGRES_URL = os.environ.get(
    "CROUPIER_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)

_START_HINT = (
    "start it with `make services` or "
    "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, "
    "or point CROUPIER_TEST_DATABASE_URL at a reachable server"
)


def with_database(url: str, database: str) -> str:
    """``url`` with its database name replaced."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


async def connect_postgres(url: str = POSTGRES_URL) -> asyncpg.Connection:
    """A connection to ``url``; fails the test with a how-to-start message if unreachable."""
    try:
        return await asyncpg.connect(url, timeout=10)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        pytest.fail(f"PostgreSQL at {url} is unreachable ({error}); {_START_HINT}", pytrace=False)


@pytest.fixture
async def postgres_database() -> AsyncIterator[str]:
    """A fresh, uniquely named database for one test; dropped afterwards. Yields its URL."""
    async with scratch_database() as url:
        yield url


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """``async with scratch_database() as url``: a new database, dropped on exit."""
    name = f"croupier_test_{uuid.uuid4().hex[:12]}"
    admin = await connect_postgres()
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield with_database(POSTGRES_URL, name)
    finally:
        admin = await connect_postgres()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


RABBITMQ_URL = os.environ.get("CROUPIER_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")

_RABBITMQ_HINT = (
    "start it with `make services` or `rabbitmq-server -detached`, "
    "or point CROUPIER_TEST_AMQP_URL at a reachable broker"
)


async def connect_rabbitmq(url: str = RABBITMQ_URL) -> aio_pika.abc.AbstractConnection:
    """A connection to ``url``; fails the test with a how-to-start message if unreachable."""
    try:
        return await aio_pika.connect(url, timeout=10)
    except (OSError, AMQPError, TimeoutError) as error:
        pytest.fail(f"RabbitMQ at {url} is unreachable ({error}); {_RABBITMQ_HINT}", pytrace=False)


@pytest.fixture
async def rabbitmq_url() -> str:
    """The test broker's URL, once a connection to it has been proven."""
    connection = await connect_rabbitmq()
    await connection.close()
    return RABBITMQ_URL


_RABBITMQCTL_HINT = (
    "RabbitMQ isolation needs `rabbitmqctl` on PATH and the right to run it (as root or the "
    "rabbitmq user); start the broker with `make services`"
)


def rabbitmqctl(*args: str, timeout: float = 60) -> str:
    """Run ``rabbitmqctl`` with ``args``; fails the test with a how-to message on error."""
    try:
        done = subprocess.run(
            ["rabbitmqctl", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        pytest.fail(f"rabbitmqctl not found; {_RABBITMQCTL_HINT}", pytrace=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rabbitmqctl {' '.join(args)} took over {timeout}s", pytrace=False)
    if done.returncode != 0:
        pytest.fail(
            f"rabbitmqctl {' '.join(args)} failed ({done.returncode}): "
            f"{done.stderr.strip() or done.stdout.strip()}; {_RABBITMQCTL_HINT}",
            pytrace=False,
        )
    return done.stdout


def with_vhost(url: str, vhost: str) -> str:
    """``url`` with its virtual host replaced (URL-encoded)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{quote(vhost, safe='')}"))


@asynccontextmanager
async def scratch_vhost() -> AsyncIterator[str]:
    """``async with scratch_vhost() as url``: a new RabbitMQ vhost for guest, deleted on exit.

    The service declares fixed names (``studio.feed``, ``croupier.feed``, ...), so tests
    that run it get a vhost of their own rather than sharing the default one.
    """
    connection = await connect_rabbitmq()
    await connection.close()
    name = f"croupier-test-{uuid.uuid4().hex[:12]}"
    await asyncio.to_thread(rabbitmqctl, "add_vhost", name)
    try:
        await asyncio.to_thread(
            rabbitmqctl, "set_permissions", "-p", name, "guest", ".*", ".*", ".*"
        )
        yield with_vhost(RABBITMQ_URL, name)
    finally:
        await asyncio.to_thread(rabbitmqctl, "delete_vhost", name)


@pytest.fixture
async def amqp_vhost() -> AsyncIterator[str]:
    """A fresh RabbitMQ vhost for one test; deleted afterwards. Yields its AMQP URL."""
    async with scratch_vhost() as url:
        yield url
