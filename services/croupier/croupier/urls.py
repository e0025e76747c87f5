"""URLs as operators give them: passwords masked wherever a URL is printed or logged, and
ledger URLs read one way everywhere.

Ledger URLs:

* ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`` (or ``postgres://``);
* ``sqlite:///RELATIVE/PATH``: three slashes, a path relative to the working directory;
* ``sqlite:////ABSOLUTE/PATH``: four slashes, an absolute path;
* ``sqlite:///:memory:``: an in-memory ledger (tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

MASK: Final = "***"

# scheme://user:password@ ; the password ends at the last "@" before the host.
_CREDENTIALS: Final = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^\s/]*@")
_POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
_AMQP_SCHEMES: Final = ("amqp", "amqps")


def mask_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    return mask_secrets(url)


def mask_secrets(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` in it masked."""
    if "://" not in text:
        return text
    return _CREDENTIALS.sub(lambda m: f"{m['head']}{MASK}@", text)


@dataclass(frozen=True)
class LedgerLocation:
    """Where a ledger URL points: a PostgreSQL database, a SQLite file, or memory."""

    url: str
    kind: str  # "postgresql" | "sqlite"
    path: Path | None = None  # SQLite file, resolved; None for :memory: and PostgreSQL

    def describe(self) -> str:
        """For messages: the masked URL, or the resolved SQLite file."""
        if self.kind == "sqlite":
            return f"SQLite ledger {self.path}" if self.path else "in-memory SQLite ledger"
        parts = urlsplit(self.url)
        return f"PostgreSQL database {parts.path.lstrip('/')!r} at {_host_port(self.url, 5432)}"


def parse_ledger_url(url: str) -> LedgerLocation:
    """Read a ledger URL (see the module docstring); ``ValueError`` says what is wrong."""
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        if not url.startswith("sqlite:///"):
            raise ValueError(
                f"{url!r} is not a SQLite ledger URL: use sqlite:///relative/file or "
                "sqlite:////absolute/file"
            )
        rest = url.removeprefix("sqlite:///")
        if rest == ":memory:":
            return LedgerLocation(url, "sqlite")
        if not rest or rest.endswith("/"):
            raise ValueError(f"{url!r} names no file: use sqlite:///relative/file")
        return LedgerLocation(url, "sqlite", Path(rest).absolute())
    if scheme in _POSTGRES_SCHEMES:
        parts = urlsplit(url)
        if not parts.hostname or not parts.path.strip("/"):
            raise ValueError(
                f"{mask_url(url)!r} names no host or database: "
                "use postgresql://USER@HOST:PORT/DATABASE"
            )
        return LedgerLocation(url, "postgresql")
    raise ValueError(
        f"{mask_url(url)!r} is not a ledger URL: use postgresql://USER@HOST:PORT/DATABASE "
        "or sqlite:///FILE"
    )


def check_amqp_url(url: str) -> str:
    """``url`` if it is an AMQP URL with a host; ``ValueError`` otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in _AMQP_SCHEMES or not parts.hostname:
        raise ValueError(
            f"{mask_url(url)!r} is not a broker URL: use amqp://USER:PASSWORD@HOST:PORT/VHOST"
        )
    return url


def host_port(url: str) -> str:
    """``host:port`` of a server URL, with the scheme's default port when none is given."""
    default = 5672 if urlsplit(url).scheme in _AMQP_SCHEMES else 5432
    return _host_port(url, default)


def _host_port(url: str, default: int) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port or default
    except ValueError:
        port = default
    return f"{parts.hostname or '127.0.0.1'}:{port}"
