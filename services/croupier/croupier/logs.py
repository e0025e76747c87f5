"""One logging configuration for the whole process: JSON lines on stderr.

Croupier's own structlog loggers and the standard-library loggers of the libraries
(aiormq, aio_pika, asyncio, asyncpg, warnings) end in the same handler and the same
renderer, so every line is one JSON object with ``timestamp``, ``level``, ``logger`` and
``event``, plus whatever the line binds (``table_id``, ``round_id``, ``event_id``, ...)
and whatever is bound in the context (:func:`structlog.contextvars.bound_contextvars`).
Exceptions are rendered into the ``exception`` field, never as loose lines. Passwords in
URLs are masked in every field.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Final, TextIO

import structlog
from structlog.typing import Processor

from croupier.urls import mask_secrets

# Chatty at INFO; their warnings and errors still come through.
_QUIET_LIBRARIES = ("aiormq", "aio_pika")


def configure_logging(
    level: str = "INFO", stream: TextIO | None = None, *, libraries: bool = True
) -> None:
    """Send every log line of the process, at ``level`` and above, to ``stream`` as JSON.
    Without ``libraries``, the drivers' own lines are left out: a command that is not a
    service says what went wrong in its one error line instead."""
    number = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    rendering: list[Processor] = [
        structlog.processors.format_exc_info,
        _mask_secrets,
        structlog.processors.JSONRenderer(),
    ]
    # Croupier's own lines are rendered by structlog and handed over finished; the stdlib
    # handler renders the libraries' records with the same processors. The level is the
    # root logger's, read on every call, so cached loggers follow a new configuration.
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared, *rendering, _finished],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream) if stream else _Stderr()
    handler.setFormatter(
        _JsonFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(number)
    for name in _QUIET_LIBRARIES:
        quiet = logging.WARNING if libraries else logging.CRITICAL + 1
        logging.getLogger(name).setLevel(max(number, quiet))
    logging.captureWarnings(True)


_FINISHED = "croupier_finished"


def _finished(_logger: Any, _method: str, line: Any) -> tuple[Any, ...]:
    """Hand the rendered line to the stdlib logger, marked as finished."""
    return (line,), {"extra": {_FINISHED: True}}


class _JsonFormatter(structlog.stdlib.ProcessorFormatter):
    """Croupier's lines as they come (already JSON); every other record rendered as JSON."""

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, _FINISHED, False):
            return str(record.msg)
        return super().format(record)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to whatever ``sys.stderr`` is when a line is written."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


CONTEXT_IDS: Final = ("table_id", "round_id", "event_id")


def context_ids(body: bytes) -> dict[str, str]:
    """The ``table_id``, ``round_id`` and ``event_id`` a raw feed message names, as far as it
    can be read (a torn or hostile body names none); for binding to log lines."""
    try:
        event = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(event, dict):
        return {}
    return {name: value[:200] for name in CONTEXT_IDS if isinstance(value := event.get(name), str)}


def _mask_secrets(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = mask_secrets(value)
        elif not isinstance(value, int | float | bool | type(None)) and "://" in str(value):
            event[key] = mask_secrets(str(value))
    return event
