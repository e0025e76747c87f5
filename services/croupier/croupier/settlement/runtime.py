"""Interpreter tuning for the settlement paths: fewer cyclic garbage collector passes.

Settling allocates many small containers per event (parsed models, their JSON dumps, facts,
ledger rows) while a large state stays alive (the rounds in memory, a replayed feed). With
CPython's default thresholds (700, 10, 10) the cyclic collector runs every few events and
its older generations rescan that state again and again: about 30% of a replay's time on
the bench feed. Reference counting frees these objects anyway; the collector only finds
cycles, so running it 70 times less often costs a little memory and nothing else.
"""

from __future__ import annotations

import gc
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
