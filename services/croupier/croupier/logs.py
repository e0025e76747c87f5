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


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send every log line of the process, at ``level`` and above, to ``stream`` as JSON."""
    number = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(number),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream) if stream else _Stderr()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                _mask_secrets,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(number)
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(number, logging.WARNING))
    logging.captureWarnings(True)


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
