"""Interpreter tuning for the settlement paths: fewer cyclic garbage collector passes, and
turns on the event loop.

Settling allocates many small containers per event (parsed models, their JSON dumps, facts,
ledger rows) while a large state stays alive (the rounds in memory, a replayed feed). With
CPython's default thresholds (700, 10, 10) the cyclic collector runs every few events and
its older generations rescan that state again and again: about 30% of a replay's time on
the bench feed. Reference counting frees these objects anyway; the collector only finds
cycles, so running it 70 times less often costs a little memory and nothing else.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

#: gen0 threshold 50,000 allocations (default 700); the older generations as by default.
#: Guarded by `python -m bench replay` (settlement only, into SQLite and PostgreSQL).
GC_THRESHOLDS: Final = (50_000, 10, 10)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's thresholds for the duration; restore them afterwards."""
    previous = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


#: The longest a settler's CPU-bound work holds the event loop between turns. A commit in
#: flight needs the loop for each of its round trips to the database: at 128 messages a turn
#: (7 ms) a replay's commits took longer than deciding the next batch, and its wall clock
#: was 1.3 times its CPU time. Guarded by `python -m bench replay` ("of deciding alone").
TURN_SECONDS: Final = 0.001


class Turn:
    """Gives the event loop a turn once ``seconds`` of work have passed since the last:
    ``if turn.over(): await turn.give()``. Checking costs a clock read."""

    __slots__ = ("_due", "_seconds")

    def __init__(self, seconds: float = TURN_SECONDS) -> None:
        assert seconds > 0
        self._seconds = seconds
        self._due = time.perf_counter() + seconds

    def over(self) -> bool:
        """Whether this turn has lasted its ``seconds``."""
        return time.perf_counter() >= self._due

    async def give(self) -> None:
        """Let the event loop run what is ready (I/O, other tasks), then start a new turn."""
        await asyncio.sleep(0)
        self._due = time.perf_counter() + self._seconds
