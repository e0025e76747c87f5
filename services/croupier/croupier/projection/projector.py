"""The projector: follows the ledger by position and applies each batch to its projections.

One ledger page is read once for every projection behind the head; each projection gets
the events after its own checkpoint, and all of their rows and checkpoints are committed
in one transaction (see :mod:`croupier.projection` for the guarantees).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from croupier.ledger import Ledger, RecordedEvent
from croupier.projection import (
    MAX_ROWS_PER_COMMIT,
    Changes,
    CheckpointMoved,
    Projection,
    ProjectionError,
    ReadModelStore,
    Step,
)

#: Ledger events read per batch (one commit each) unless told otherwise.
DEFAULT_BATCH: Final = 2_000
MAX_BATCH: Final = 50_000


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a catch-up stands: the lowest checkpoint and the position it runs to."""

    position: int
    target: int
    events: int


class Projector:
    """Keeps ``projections`` up to date with ``ledger`` in ``store``."""

    def __init__(
        self,
        ledger: Ledger,
        store: ReadModelStore,
        projections: Sequence[Projection],
        *,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        names = [p.name for p in projections]
        if not names or len(set(names)) != len(names):
            raise ProjectionError(f"projections need distinct names, got {names}")
        if not 0 < batch <= MAX_BATCH:
            raise ProjectionError(f"batch must be 1..{MAX_BATCH}, got {batch}")
        self.ledger = ledger
        self.store = store
        self.projections = tuple(projections)
        self.batch = batch

    async def setup(self) -> list[str]:
        """Create the read-model tables (see :meth:`ReadModelStore.setup`)."""
        return await self.store.setup(self.projections)

    async def rebuild(self, on_progress: Callable[[Progress], None] | None = None) -> int:
        """Empty every read model and project the whole ledger again."""
        await self.store.reset(self.projections)
        return await self.catch_up(on_progress=on_progress)

    async def catch_up(
        self, upto: int | None = None, on_progress: Callable[[Progress], None] | None = None
    ) -> int:
        """Apply every committed event up to ``upto`` (default: the head); the position reached."""
        target = await self.ledger.last_position() if upto is None else upto
        at = await self.store.checkpoints(self.projections)
        done = 0
        while (low := min(at.values())) < target:
            events = await self.ledger.read_all(low, min(self.batch, target - low))
            if not events:
                raise ProjectionError(f"the ledger has no events after {low}, below {target}")
            _check_page(events, low)
            behind = [p for p in self.projections if at[p.name] < events[-1].position]
            for projection in behind:
                await projection.gather(_after(events, at[projection.name]), self.ledger)
            steps = [self._step(p, at[p.name], events) for p in behind]
            try:
                await self.store.commit(steps)
            except CheckpointMoved:  # another projector applied it: go on from where it is
                at = await self.store.checkpoints(self.projections)
                continue
            for step in steps:
                at[step.projection.name] = step.upto
                step.projection.committed(step.changes)
            done += len(events)
            if on_progress is not None:
                on_progress(Progress(min(at.values()), target, done))
        return min(at.values())

    async def follow(self, stop: asyncio.Event, idle: float = 0.2) -> None:
        """Catch up, then keep following the ledger until ``stop`` is set."""
        while not stop.is_set():
            before = min((await self.store.checkpoints(self.projections)).values())
            if await self.catch_up() == before:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle)

    def _step(self, projection: Projection, after: int, events: Sequence[RecordedEvent]) -> Step:
        mine = _after(events, after)
        changes = Changes()
        projection.apply(mine, changes)
        if changes.size > MAX_ROWS_PER_COMMIT:
            raise ProjectionError(
                f"projection {projection.name} wrote {changes.size} rows for one batch "
                f"(limit {MAX_ROWS_PER_COMMIT}): use a smaller batch"
            )
        return Step(projection, after, events[-1].position, changes)


def _after(events: Sequence[RecordedEvent], position: int) -> list[RecordedEvent]:
    return [e for e in events if e.position > position]


def _check_page(events: Sequence[RecordedEvent], after: int) -> None:
    """The ledger's promise, asserted where it is read: positions follow on without gaps."""
    first, last = events[0].position, events[-1].position
    if first != after + 1 or last - first + 1 != len(events):
        raise ProjectionError(
            f"ledger page after {after} runs {first}..{last} with {len(events)} events: "
            "positions must follow on without gaps"
        )
