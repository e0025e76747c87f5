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
import re
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


#: Where a command's ledger and broker URLs come from, named in the fix of an error.
LEDGER_SETTING = "CROUPIER_DATABASE_URL or --ledger"
BROKER_SETTING = "CROUPIER_AMQP_URL"


@contextmanager
def reaching(
    *,
    ledger: str = "",
    broker: str = "",
    ledger_setting: str = LEDGER_SETTING,
    broker_setting: str = BROKER_SETTING,
) -> Iterator[None]:
    """Turn failures to reach the ledger at ``ledger`` or the broker at ``broker`` into
    :class:`CommandError` lines naming the setting to fix; anything else passes through.
    (``ledger`` may be any PostgreSQL database, e.g. a wallet's, with its own setting.)"""
    try:
        yield
    except Exception as error:
        explained = explain(
            error,
            ledger=ledger,
            broker=broker,
            ledger_setting=ledger_setting,
            broker_setting=broker_setting,
        )
        if explained is None:
            raise
        raise explained from error


def explain(
    error: BaseException,
    *,
    ledger: str = "",
    broker: str = "",
    ledger_setting: str = LEDGER_SETTING,
    broker_setting: str = BROKER_SETTING,
) -> CommandError | None:
    """A :class:`CommandError` for a known failure to reach the ledger or the broker, or
    None. ``ledger`` and ``broker`` are the URLs in use, to name the server; the settings
    they came from are named in the fix."""
    # the drivers load here, not with every command's --help
    import aiormq.exceptions
    import asyncpg

    from croupier.bus import BusError
    from croupier.ledger import LedgerUnavailable

    if isinstance(error, CommandError):
        return error
    if isinstance(error, LedgerUnavailable) and error.__cause__ is not None:
        error = error.__cause__  # explained as the driver's fault it translates
    if broker and isinstance(error, BusError) and error.__cause__ is not None:
        error = error.__cause__
    if broker and isinstance(error, aiormq.exceptions.AMQPError | BusError):
        return _broker_error(error, broker, broker_setting)
    if ledger and isinstance(error, asyncpg.PostgresError | sqlite3.Error):
        return _ledger_error(error, ledger, ledger_setting)
    if isinstance(error, OSError) and error.errno in (errno.EADDRINUSE, errno.EACCES):
        return CommandError(
            f"cannot listen for HTTP: {error.strerror}",
            "set CROUPIER_HTTP_PORT to a free port (0: any)",
        )
    if isinstance(error, OSError | TimeoutError) and not isinstance(error, _FILE_ERRORS):
        if ledger:
            return unreachable("PostgreSQL", ledger, error, ledger_setting)
        if broker:
            return unreachable("RabbitMQ", broker, error, broker_setting)
    return None


_FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def _ledger_error(error: BaseException, url: str, setting: str) -> CommandError | None:
    import asyncpg

    if isinstance(error, asyncpg.InvalidCatalogNameError):
        return CommandError(
            f"PostgreSQL at {host_port(url)}: {error}",
            f"create it (`createdb -h {_host(url)} -U postgres {_database(url)}`) or fix {setting}",
        )
    if isinstance(
        error, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
    ):
        return CommandError(
            f"PostgreSQL at {host_port(url)} refused the login: {error}",
            f"fix the user and password in {setting}",
        )
    if isinstance(error, asyncpg.CannotConnectNowError):
        return unreachable("PostgreSQL", url, error, setting)
    if isinstance(error, sqlite3.DatabaseError):
        return CommandError(
            f"SQLite ledger {url}: {error}", "check --ledger: is it a Croupier ledger file?"
        )
    return None


def _broker_error(error: BaseException, url: str, setting: str) -> CommandError:
    import aiormq.exceptions

    if isinstance(error, aiormq.exceptions.ProbableAuthenticationError):
        return CommandError(
            f"RabbitMQ at {host_port(url)} refused the login",
            f"fix the user and password in {setting}",
        )
    if "vhost" in str(error).lower() or "Connection.Close" in str(error):
        vhost = unquote(urlsplit(url).path[1:]) or "/"
        return CommandError(
            f"RabbitMQ at {host_port(url)} closed the connection at login: the virtual host "
            f"{vhost!r} does not exist or the user may not use it",
            f"create and grant it (`rabbitmqctl add_vhost`, `set_permissions`) or fix {setting}",
        )
    return unreachable("RabbitMQ", url, error, setting)


def unreachable(service: str, url: str, error: BaseException, variable: str) -> CommandError:
    """``service`` at ``url`` does not answer."""
    if isinstance(error, socket.gaierror):
        return CommandError(
            f"{service} host in {url} is unknown ({reason(error)})", f"fix {variable}"
        )
    return CommandError(
        f"{service} at {host_port(url)} does not answer ({reason(error)})",
        f"{START_SERVICES}, or point {variable} at a running server",
    )


def reason(error: BaseException) -> str:
    """What went wrong, in words: an operating-system error's text without its number."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = _ERRNO.sub("", str(error)).strip()
    return text or type(error).__name__


_ERRNO = re.compile(r"\[Errno -?\d+\]\s*")


def _host(url: str) -> str:
    return host_port(url).rpartition(":")[0]


def _database(url: str) -> str:
    return url.rpartition("/")[2].partition("?")[0] or "croupier"
