"""Output that never goes quiet: a line of its own whenever nothing was printed for a while.

``croupier demo`` prints through it, so a person watching sees it is at work from the first
line to the last, also while it loads, or while the service keeps its event loop busy (the
line comes from a thread of its own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final

#: Seconds without a line after which it says it is still at work.
QUIET_SECONDS: Final = 1.0


class SteadyOutput:
    """``with SteadyOutput() as say: say("...")``; :meth:`rest` before a deliberate wait."""

    def __init__(
        self, write: Callable[[str], None] | None = None, every: float = QUIET_SECONDS
    ) -> None:
        self.write = write or (lambda line: print(line, flush=True))
        self.every = every
        self.started = self.last = time.monotonic()
        self._lock = threading.Lock()
        self._resting = threading.Event()
        self._watch = threading.Thread(target=self._watching, name="steady-output", daemon=True)

    def __call__(self, line: str) -> None:
        with self._lock:
            self.write(line)
            self.last = time.monotonic()

    def rest(self) -> None:
        """Say nothing more of its own (the caller now waits on purpose)."""
        self._resting.set()

    def __enter__(self) -> SteadyOutput:
        self._watch.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.rest()
        self._watch.join()

    def _watching(self) -> None:
        while not self._resting.wait(self.every / 4):
            now = time.monotonic()
            if now - self.last >= self.every:
                self(f"  ... still at work ({now - self.started:.1f}s)")
