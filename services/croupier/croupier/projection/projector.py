"""The projector: follows the ledger by position and applies each batch to its projections.

One ledger page is read once for every projection behind the head; each projection gets
the events after its own checkpoint, and all of their rows and checkpoints are committed
in one transaction (see :mod:`croupier.projection` for the guarantees). A projection whose
rows for the page are more than one commit may hold goes fact by fact, and a fact too large
for one commit goes in pieces, so no round size stops a projection. While a page is folded,
the next one is read and the last one's commit runs: the fold runs in a worker thread, so
the database's work and the fold overlap, and commits still go one after another, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from croupier.ledger import Ledger, RecordedEvent
from croupier.projection import (
    MAX_ROWS_PER_COMMIT,
    Changes,
    CheckpointMoved,
    Mark,
    Oversized,
    Projection,
    ProjectionError,
    ReadModelStore,
    Step,
)

#: Ledger events read per batch (one commit each) unless told otherwise.
DEFAULT_BATCH: Final = 10_000
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
        rows_per_commit: int = MAX_ROWS_PER_COMMIT,
    ) -> None:
        names = [p.name for p in projections]
        if not names or len(set(names)) != len(names):
            raise ProjectionError(f"projections need distinct names, got {names}")
        if not 0 < batch <= MAX_BATCH:
            raise ProjectionError(f"batch must be 1..{MAX_BATCH}, got {batch}")
        if not 0 < rows_per_commit <= MAX_ROWS_PER_COMMIT:
            raise ProjectionError(
                f"rows per commit must be 1..{MAX_ROWS_PER_COMMIT}, got {rows_per_commit}"
            )
        self.ledger = ledger
        self.store = store
        self.projections = tuple(projections)
        self.batch = batch
        self.rows_per_commit = rows_per_commit
        #: Facts this projector wrote in pieces (each too large for one commit), by projection.
        self.pieces: Counter[str] = Counter()

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
        marks = await self.store.marks(self.projections)
        done = 0
        ahead = _Ahead(self.ledger)  # the next page, read while this one is applied
        committing: asyncio.Task[None] | None = None  # the last page's commit
        try:
            while True:
                low = min(m.position for m in marks.values())
                steps: list[Step] = []
                oversized: list[tuple[Projection, list[RecordedEvent]]] = []
                events: list[RecordedEvent] = []
                if low < target:
                    events = await ahead.page(low, min(self.batch, target - low))
                    if not events:
                        raise ProjectionError(
                            f"the ledger has no events after {low}, below {target}"
                        )
                    _check_page(events, low)
                    end = events[-1].position
                    if end < target:
                        ahead.start(end, min(self.batch, target - end))
                    steps, oversized = await self._prepare(events, marks)
                if committing is not None:
                    task, committing = committing, None
                    try:
                        await task
                    except CheckpointMoved:  # another projector applied it: go on from there
                        marks = await self.store.marks(self.projections)
                        continue
                if not events:
                    break
                if oversized:
                    try:
                        await self._commit(steps, marks)
                        for projection, mine in oversized:
                            await self._fact_by_fact(projection, mine, marks)
                    except CheckpointMoved:
                        marks = await self.store.marks(self.projections)
                        continue
                elif steps:
                    # Committed while the next page is folded; ``marks`` say where it leaves
                    # each projection, and are read again if another projector came first.
                    committing = asyncio.create_task(self._commit(steps, {}))
                    for step in steps:
                        marks[step.projection.name] = Mark(step.upto, step.part_upto)
                done += len(events)
                if on_progress is not None:
                    on_progress(Progress(min(m.position for m in marks.values()), target, done))
        finally:
            await ahead.drop()
            if committing is not None:  # a failure folding the next page: this one stands
                with contextlib.suppress(CheckpointMoved):
                    await committing
        return min(m.position for m in marks.values())

    async def _prepare(
        self, events: Sequence[RecordedEvent], marks: dict[str, Mark]
    ) -> tuple[list[Step], list[tuple[Projection, list[RecordedEvent]]]]:
        """One ledger page folded into every projection behind its end: the steps that fit
        one commit, and the projections to apply fact by fact (rows more than one commit may
        hold, or mid-way through a fact written in pieces, which it finishes first)."""
        steps: list[Step] = []
        oversized: list[tuple[Projection, list[RecordedEvent]]] = []
        for projection in self.projections:
            mark = marks[projection.name]
            if mark.position >= events[-1].position:
                continue
            mine = _after(events, mark.position)
            if mark.part:
                oversized.append((projection, mine[:1]))
                continue
            await projection.gather(mine, self.ledger)
            changes = await _fold(projection, mine, self.rows_per_commit)
            if changes is None:
                oversized.append((projection, mine))
            else:
                steps.append(Step(projection, mark.position, events[-1].position, changes))
        return steps, oversized

    async def _fact_by_fact(
        self, projection: Projection, events: Sequence[RecordedEvent], marks: dict[str, Mark]
    ) -> None:
        """Apply ``events`` in runs that fit one commit (each fact sized on its own first);
        a fact with too many rows alone, in pieces."""
        at = 0
        while at < len(events):
            mark = marks[projection.name]
            event = events[at]
            upto, rows = at, 0
            while upto < len(events) and not mark.part:
                await projection.gather([events[upto]], self.ledger)
                # A fact that does not fit after this run is folded again as the next one's
                # first; the first fact of a run is folded whole, to be written in pieces.
                try:
                    changes = changes_of(
                        projection, [events[upto]], rows and self.rows_per_commit - rows
                    )
                except Oversized:
                    break
                if rows + changes.size > self.rows_per_commit:
                    break
                rows += changes.size
                upto += 1
            if upto > at:
                run = events[at:upto]
                await projection.gather(run, self.ledger)
                step = Step(
                    projection, mark.position, run[-1].position, changes_of(projection, run)
                )
                await self._commit([step], marks)
                at = upto
                continue
            if mark.part:  # resuming a fact begun in pieces
                await projection.gather([event], self.ledger)
                changes = changes_of(projection, [event])
            at += 1
            for piece, written in changes.pieces(self.rows_per_commit, skip=mark.part):
                whole = written == changes.size
                step = Step(
                    projection,
                    mark.position,
                    event.position if whole else mark.position,
                    piece,
                    part_after=marks[projection.name].part,
                    part_upto=0 if whole else written,
                )
                await self._commit([step], marks, count=False)
            if marks[projection.name].position < event.position:  # nothing left after part
                step = Step(projection, mark.position, event.position, Changes(), mark.part, 0)
                await self._commit([step], marks, count=False)
            projection.committed(changes)
            self.pieces[projection.name] += 1

    async def _commit(
        self, steps: Sequence[Step], marks: dict[str, Mark], *, count: bool = True
    ) -> None:
        """Commit ``steps`` and move ``marks``; tell each projection (unless a piece)."""
        if not steps:
            return
        await self.store.commit(steps)
        for step in steps:
            marks[step.projection.name] = Mark(step.upto, step.part_upto)
            if count:
                step.projection.committed(step.changes)

    async def follow(self, stop: asyncio.Event, idle: float = 0.2) -> None:
        """Catch up, then keep following the ledger until ``stop`` is set."""
        while not stop.is_set():
            before = min((await self.store.checkpoints(self.projections)).values())
            if await self.catch_up() == before:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle)

    def _step(self, projection: Projection, after: int, events: Sequence[RecordedEvent]) -> Step:
        mine = _after(events, after)
        return Step(projection, after, events[-1].position, changes_of(projection, mine))


def changes_of(projection: Projection, events: Sequence[RecordedEvent], limit: int = 0) -> Changes:
    """What ``events`` do to ``projection``'s read model (after its ``gather``); at most
    ``limit`` rows (0: any number), or :class:`Oversized` as soon as there would be more.

    The cyclic garbage collector waits meanwhile: a batch allocates objects by the hundred
    thousand beside a large live heap, which it would otherwise scan again and again (it
    nearly doubles the time a shared hand takes); what ``apply`` leaves is freed by
    reference counting, and any cycle at the next collection.
    """
    changes = Changes(limit=limit)
    collecting = gc.isenabled()
    gc.disable()
    try:
        projection.apply(events, changes)
    finally:
        if collecting:
            gc.enable()
    return changes


async def _fold(
    projection: Projection, events: Sequence[RecordedEvent], limit: int
) -> Changes | None:
    """:func:`changes_of` in a worker thread, or None when it holds more than ``limit`` rows
    (the fold is abandoned there: the batch goes fact by fact). In a thread, the event loop
    meanwhile sends the last page's commit and reads the next page: their round trips and
    the database's work on them overlap the fold instead of waiting for it. A fold cancelled
    midway is still waited for, so that no two folds of one projection ever run at once."""
    task = asyncio.ensure_future(asyncio.to_thread(changes_of, projection, events, limit))
    try:
        return await asyncio.shield(task)
    except Oversized:
        return None
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise


class _Ahead:
    """One ledger page read in the background, taken when it is the page asked for next."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.task: asyncio.Task[list[RecordedEvent]] | None = None
        self.at = (-1, -1)

    def start(self, after: int, limit: int) -> None:
        self.task = asyncio.create_task(self.ledger.read_all(after, limit))
        self.at = (after, limit)

    async def page(self, after: int, limit: int) -> list[RecordedEvent]:
        if self.task is not None and self.at == (after, limit):
            task, self.task = self.task, None
            return await task
        await self.drop()
        return await self.ledger.read_all(after, limit)

    async def drop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


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
