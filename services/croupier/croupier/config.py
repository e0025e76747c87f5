"""Configuration from the environment (12-factor), with working local defaults."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Final

import structlog

DEFAULT_DATABASE_URL: Final = "postgresql://postgres@127.0.0.1:5432/croupier"
DEFAULT_AMQP_URL: Final = "amqp://guest:guest@127.0.0.1:5672/"
DEFAULT_HTTP_PORT: Final = 9464
EMBEDDED_LEDGER_URL: Final = "sqlite:///var/croupier.sqlite"


@dataclass(frozen=True)
class Settings:
    """Where Croupier finds its ledger and broker, and where it serves HTTP."""

    database_url: str
    amqp_url: str
    http_port: int
    database_configured: bool
    amqp_configured: bool

    @classmethod
    def from_env(cls) -> Settings:
        """Read ``CROUPIER_DATABASE_URL``, ``CROUPIER_AMQP_URL`` and ``CROUPIER_HTTP_PORT``."""
        database = os.environ.get("CROUPIER_DATABASE_URL")
        amqp = os.environ.get("CROUPIER_AMQP_URL")
        port = os.environ.get("CROUPIER_HTTP_PORT", str(DEFAULT_HTTP_PORT))
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"CROUPIER_HTTP_PORT must be a TCP port number, got {port!r}")
        return cls(
            database_url=database or DEFAULT_DATABASE_URL,
            amqp_url=amqp or DEFAULT_AMQP_URL,
            http_port=int(port),
            database_configured=database is not None,
            amqp_configured=amqp is not None,
        )


def configure_logging(level: str | None = None) -> None:
    """JSON logs on stderr; bind ``table_id``, ``round_id`` and ``event_id`` where known."""
    name = (level or os.environ.get("CROUPIER_LOG_LEVEL", "INFO")).upper()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(name)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
