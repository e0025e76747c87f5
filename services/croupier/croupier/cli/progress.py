"""Progress of long work on a terminal: done, total, rate and ETA, then a summary line.

Live updates are written to stderr only when both stdout and stderr are terminals, at most
a few times a second; a program reading the output never sees them. The summary line
(count, time, rate) is written to stderr at the end in every case.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Final, TextIO, TypeVar

T = TypeVar("T")
UPDATE_EVERY: Final = 0.25  # seconds between two live updates


class Progress:
    """``with Progress("replay", "events", total) as p: ... p.advance(n)``."""

    def __init__(
        self,
        what: str,
        unit: str,
        total: int | None = None,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.unit = unit
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.live = _on_terminal(self.stream) if live is None else live
        self._clock = clock
        self._started = clock()
        self._shown = self._started
        self._width = 0

    def advance(self, count: int = 1) -> None:
        """Count ``count`` more units done; refresh the live line now and then."""
        self.done += count
        if self.live:
            now = self._clock()
            if now - self._shown >= UPDATE_EVERY:
                self._shown = now
                self._show(self.status(now))

    def track(self, items: Iterable[T], weigh: Callable[[T], int] = lambda _: 1) -> Iterator[T]:
        """Yield ``items``, advancing by ``weigh(item)`` for each."""
        for item in items:
            yield item
            self.advance(weigh(item))

    def status(self, now: float | None = None) -> str:
        """``what: done/total unit, rate/s, ETA``."""
        elapsed = max((now or self._clock()) - self._started, 1e-9)
        rate = self.done / elapsed
        text = f"{self.what}: {self.done:,}"
        if self.total:
            text += f"/{self.total:,} {self.unit} ({self.done / self.total:.0%})"
        else:
            text += f" {self.unit}"
        text += f", {rate:,.0f}/s"
        if self.total and rate > 0 and self.done < self.total:
            text += f", ETA {_duration((self.total - self.done) / rate)}"
        return text

    def summary(self) -> str:
        """``what: done unit in time (rate/s)``."""
        elapsed = max(self._clock() - self._started, 1e-9)
        return (
            f"{self.what}: {self.done:,} {self.unit} in {_duration(elapsed)} "
            f"({self.done / elapsed:,.0f}/s)"
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.live:
            self._show("")
        if exc_type is None:
            print(self.summary(), file=self.stream, flush=True)

    def _show(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self._width))
        if not text:
            self.stream.write("\r")
        self.stream.flush()
        self._width = len(text)


def _on_terminal(stream: TextIO) -> bool:
    try:
        return sys.stdout.isatty() and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
