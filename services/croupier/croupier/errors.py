"""Exit codes and the one error style of every ``croupier`` command.

Exit codes, in order:

====  ==========================================================================
0     done, nothing found
1     a finding: a broken chain, a discrepancy, unpaid rounds, stale files
2     a usage or configuration error: a bad option or variable, a path that cannot be
      used, a database or broker that is missing, refuses us, or does not answer
3     an internal error (a bug): rerun with ``--debug`` for the traceback
130   interrupted (Ctrl-C)
====  ==========================================================================

A :class:`CommandError` carries one line naming what is wrong and how to fix it.
:func:`explain` turns the errors of the libraries Croupier talks through (asyncpg, aiormq,
sqlite3, the operating system) into such a line, passwords masked.
"""

from __future__ import annotations

import errno
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum
from urllib.parse import unquote, urlsplit

from croupier.urls import host_port, mask_secrets


class ExitCode(IntEnum):
    """What a ``croupier`` process returns."""

    OK = 0
    FINDING = 1
    USAGE = 2
    INTERNAL = 3
    INTERRUPTED = 130


class CommandError(Exception):
    """An error an operator can fix: ``what`` is wrong, ``fix`` says how."""

    def __init__(self, what: str, fix: str = "", code: ExitCode = ExitCode.USAGE) -> None:
        self.what = mask_secrets(what)
        self.fix = mask_secrets(fix)
        self.code = code
        super().__init__(self.line())

    def line(self) -> str:
        """The message, one line: ``what; fix``."""
        text = f"{self.what}; {self.fix}" if self.fix else self.what
        return " ".join(text.split())


START_SERVICES = "start it with `make services`"


@contextmanager
def reaching(*, ledger: str = "", broker: str = "") -> Iterator[None]:
    """Turn failures to reach the ledger at ``ledger`` or the broker at ``broker`` into
    :class:`CommandError` lines; anything else passes through."""
    try:
        yield
    except Exception as error:
        explained = explain(error, ledger=ledger, broker=broker)
        if explained is None:
            raise
        raise explained from error


def explain(error: BaseException, *, ledger: str = "", broker: str = "") -> CommandError | None:
    """A :class:`CommandError` for a known failure to reach the ledger or the broker, or
    None. ``ledger`` and ``broker`` are the URLs in use, to name the server."""
    # the drivers load here, not with every command's --help
    import aiormq.exceptions
    import asyncpg

    from croupier.bus import BusError
    from croupier.ledger import LedgerUnavailable

    if isinstance(error, CommandError):
        return error
    if isinstance(error, LedgerUnavailable) and error.__cause__ is not None:
        error = error.__cause__  # explained as the driver's fault it translates
    if broker and isinstance(error, BusError | aiormq.exceptions.AMQPError):
        return _broker_error(error.__cause__ or error, broker)
    if ledger and isinstance(error, asyncpg.PostgresError | sqlite3.Error):
        return _ledger_error(error, ledger)
    if isinstance(error, OSError) and error.errno in (errno.EADDRINUSE, errno.EACCES):
        return CommandError(
            f"cannot listen for HTTP: {error.strerror}",
            "set CROUPIER_HTTP_PORT to a free port (0: any)",
        )
    if isinstance(error, OSError | TimeoutError) and not isinstance(error, _FILE_ERRORS):
        if ledger:
            return unreachable("PostgreSQL", ledger, error, "CROUPIER_DATABASE_URL or --ledger")
        if broker:
            return unreachable("RabbitMQ", broker, error, "CROUPIER_AMQP_URL")
    return None


_FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def _ledger_error(error: BaseException, url: str) -> CommandError | None:
    import asyncpg

    if isinstance(error, asyncpg.InvalidCatalogNameError):
        return CommandError(
            f"PostgreSQL at {host_port(url)}: {error}",
            f"create it (`createdb -h {_host(url)} -U postgres {_database(url)}`) "
            "or fix CROUPIER_DATABASE_URL / --ledger",
        )
    if isinstance(
        error, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
    ):
        return CommandError(
            f"PostgreSQL at {host_port(url)} refused the login: {error}",
            "fix the user and password in CROUPIER_DATABASE_URL / --ledger",
        )
    if isinstance(error, asyncpg.CannotConnectNowError):
        return unreachable("PostgreSQL", url, error, "CROUPIER_DATABASE_URL or --ledger")
    if isinstance(error, sqlite3.DatabaseError):
        return CommandError(
            f"SQLite ledger {url}: {error}", "check --ledger: is it a Croupier ledger file?"
        )
    return None


def _broker_error(error: BaseException, url: str) -> CommandError:
    import aiormq.exceptions

    if isinstance(error, aiormq.exceptions.ProbableAuthenticationError):
        return CommandError(
            f"RabbitMQ at {host_port(url)} refused the login",
            "fix the user and password in CROUPIER_AMQP_URL",
        )
    if "vhost" in str(error).lower() or "Connection.Close" in str(error):
        vhost = unquote(urlsplit(url).path[1:]) or "/"
        return CommandError(
            f"RabbitMQ at {host_port(url)} closed the connection at login: the virtual host "
            f"{vhost!r} does not exist or the user may not use it",
            "create and grant it (`rabbitmqctl add_vhost`, `set_permissions`) or fix "
            "CROUPIER_AMQP_URL",
        )
    return unreachable("RabbitMQ", url, error, "CROUPIER_AMQP_URL")


def unreachable(service: str, url: str, error: BaseException, variable: str) -> CommandError:
    """``service`` at ``url`` does not answer."""
    if isinstance(error, socket.gaierror):
        return CommandError(f"{service} host in {url} is unknown ({error})", f"fix {variable}")
    reason = str(error) or type(error).__name__
    return CommandError(
        f"{service} at {host_port(url)} does not answer ({reason})",
        f"{START_SERVICES}, or point {variable} at a running server",
    )


def _host(url: str) -> str:
    return host_port(url).rpartition(":")[0]


def _database(url: str) -> str:
    return url.rpartition("/")[2].partition("?")[0] or "croupier"
