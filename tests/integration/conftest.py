"""Integration test services: the real PostgreSQL and RabbitMQ (found as
:mod:`service_discovery` says: configured, local, or containers where Docker runs).

A service that cannot be reached fails the test with instructions; integration tests are
never skipped. Tests touch only what they create: scratch databases and vhosts, dropped
afterwards; never the default vhost, never a service's configuration.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from urllib.parse import quote, urlsplit, urlunsplit

import aio_pika
import asyncpg
import pytest
import service_discovery
from aio_pika.exceptions import AMQPError
from private_services import PrivatePostgres, PrivateRabbitMQ
from private_services import private_postgres as start_private_postgres
from private_services import private_rabbitmq as start_private_rabbitmq

from croupier.urls import host_port, mask_url

POSTGRES_URL = service_discovery.postgres_url()

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
    except asyncpg.InvalidCatalogNameError:
        name = urlsplit(url).path.lstrip("/")
        pytest.fail(
            f"PostgreSQL at {host_port(url)} answers but has no database {name!r} (the tests "
            f"create and drop their scratch databases from it): create it with `createdb -h "
            f"{urlsplit(url).hostname} -U postgres {name}`, or point CROUPIER_TEST_DATABASE_URL "
            "at an existing database",
            pytrace=False,
        )
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        pytest.fail(
            f"PostgreSQL at {mask_url(url)} is unreachable ({error}); {_START_HINT}", pytrace=False
        )


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
            # the login role `croupier serve` ran as on it (service_harness.prepare_service)
            await admin.execute(f'DROP ROLE IF EXISTS "{service_role_name(name)}"')
        finally:
            await admin.close()


def service_role_name(database: str) -> str:
    """The service's login role the tests make for ``database`` (one per database)."""
    return f"croupier_svc_{hashlib.sha256(database.encode()).hexdigest()[:16]}"


RABBITMQ_URL = service_discovery.rabbitmq_url()

_RABBITMQ_HINT = (
    "start it with `make services` or `rabbitmq-server -detached`, "
    "or point CROUPIER_TEST_AMQP_URL at a reachable broker"
)


async def connect_rabbitmq(url: str = RABBITMQ_URL) -> aio_pika.abc.AbstractConnection:
    """A connection to ``url``; fails the test with a how-to-start message if unreachable."""
    try:
        return await aio_pika.connect(url, timeout=10)
    except (OSError, AMQPError, TimeoutError) as error:
        pytest.fail(
            f"RabbitMQ at {mask_url(url)} is unreachable ({error}); {_RABBITMQ_HINT}",
            pytrace=False,
        )


_RABBITMQCTL_HINT = (
    "the tests make a vhost of their own with `rabbitmqctl` (run them as root or the rabbitmq "
    "user) or with the management API (enable the rabbitmq_management plugin and set "
    "CROUPIER_TEST_RABBITMQ_API=http://guest:guest@127.0.0.1:15672/api)"
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
    api = service_discovery.management_url(RABBITMQ_URL)
    user = urlsplit(RABBITMQ_URL).username or "guest"
    if api is not None:
        everything = {"configure": ".*", "write": ".*", "read": ".*"}
        await asyncio.to_thread(_management, api, "PUT", f"vhosts/{name}")
        deleting = ("DELETE", f"vhosts/{name}")
        permissions = ("PUT", f"permissions/{name}/{user}", everything)
    else:
        await asyncio.to_thread(rabbitmqctl, "add_vhost", name)
        deleting = ("delete_vhost", name)
    try:
        if api is not None:
            await asyncio.to_thread(_management, api, *permissions)
        else:
            await asyncio.to_thread(
                rabbitmqctl, "set_permissions", "-p", name, user, ".*", ".*", ".*"
            )
        yield with_vhost(RABBITMQ_URL, name)
    finally:
        if api is not None:
            await asyncio.to_thread(_management, api, *deleting)
        else:
            await asyncio.to_thread(rabbitmqctl, *deleting)


def _management(api: str, method: str, path: str, body: dict[str, str] | None = None) -> None:
    """One call to the RabbitMQ management API at ``api`` (with its credentials)."""
    parts = urlsplit(api)
    plain = urlunsplit(parts._replace(netloc=parts.hostname + f":{parts.port}"))
    request = urllib.request.Request(
        f"{plain.rstrip('/')}/{quote(path, safe='/')}",
        data=json.dumps(body or {}).encode(),
        method=method,
        headers={"content-type": "application/json"},
    )
    passwords = urllib.request.HTTPPasswordMgrWithDefaultRealm()
    passwords.add_password(None, plain, parts.username or "guest", parts.password or "guest")
    opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(passwords))
    try:
        opener.open(request, timeout=30).close()
    except OSError as error:
        pytest.fail(f"RabbitMQ management API {method} {path}: {error}; {_RABBITMQCTL_HINT}")


@pytest.fixture
async def amqp_vhost() -> AsyncIterator[str]:
    """A fresh RabbitMQ vhost for one test; deleted afterwards. Yields its AMQP URL."""
    async with scratch_vhost() as url:
        yield url


# -- private instances, for tests that restart, kill or pause a service ---------------------


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of this test's own (see ``private_services``)."""
    with start_private_postgres() as instance:
        yield instance


@pytest.fixture
def private_rabbitmq() -> Iterator[PrivateRabbitMQ]:
    """A RabbitMQ node of this test's own (see ``private_services``)."""
    with start_private_rabbitmq() as instance:
        yield instance
