"""Log lines per second: a ``round settled`` line through the process's one JSON handler
(:func:`croupier.logs.configure_logging`) against two anchors measured in the same run:
structlog's own JSON straight to a file (what every line cost before library loggers
shared the handler), and ``json.dumps`` of the same fields (no logging at all).

The service writes one such line per closed round; the ratio says what the shared handler
costs per round. Lines go to an in-memory buffer, so no disk is timed.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable

import structlog

from croupier.logs import configure_logging

LINES = 5_000
TRIALS = 5  # best of, interleaved: the machine is shared, the best trial is the least disturbed
FIELDS = {
    "table_id": "studio-1-classic",
    "round_id": "studio-1-classic:5d7e3bbd:000001",
    "event_id": "e337f7f7-be38-4586-84da-860ed5ba76ed",
    "ledger_position": 123456,
    "bets": 41,
}


def _rate(write: Callable[[], None]) -> float:
    started = time.perf_counter()
    for _ in range(LINES):
        write()
    return LINES / (time.perf_counter() - started)


def _writers() -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The three ways of writing a line, each to its own buffer."""
    configure_logging("INFO", io.StringIO())
    shared = structlog.get_logger("croupier.settlement.consumer")
    alone = structlog.wrap_logger(
        structlog.PrintLogger(io.StringIO()),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
    )
    sink = io.StringIO()
    return (
        lambda: shared.info("round settled", **FIELDS),
        lambda: alone.info("round settled", **FIELDS),
        lambda: sink.write(json.dumps({"event": "round settled", **FIELDS}) + "\n"),
    )


def run() -> None:
    """Print lines per second of each, and the ratios to the anchors."""
    writers = _writers()
    try:
        best = [0.0, 0.0, 0.0]
        for _ in range(TRIALS):
            for i, write in enumerate(writers):
                best[i] = max(best[i], _rate(write))
    finally:
        configure_logging("WARNING")
    shared, alone, plain = best
    print(f"log lines/s  json.dumps only (anchor)          {plain:>10,.0f}")
    print(f"log lines/s  structlog JSON, no handler (anchor) {alone:>8,.0f}")
    print(f"log lines/s  the one JSON handler              {shared:>10,.0f}")
    print(f"  ratio to structlog alone {shared / alone:.2f}, to json.dumps {shared / plain:.2f}")
