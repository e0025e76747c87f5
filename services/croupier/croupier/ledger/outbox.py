"""The outbox as the adapters read it back: rows with their markers, set-aside rows, and the
published floor."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

#: Messages one process may set aside (refused or unpublishable) before it stops listing.
ASIDE_LIMIT: Final = 100_000


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """An ``outbox`` row, the marks of its publish markers (None: an unsigned marker), and
    whether a set-aside row names it."""

    seq: int
    message_id: str
    exchange: str
    routing_key: str
    body: str
    position: int
    event_hash: str
    marks: tuple[int | None, ...] = ()
    aside: bool = False


@dataclass(frozen=True, slots=True)
class SetAsideRow:
    """An ``outbox_set_aside`` row: a message the relay did not publish, why, and the
    signature (None: unsigned) of the key that says so."""

    id: int
    message_id: str
    reason: str
    key_id: str | None
    signature: str | None


class PublishedFloor:
    """Where ``pending_outbox`` may start: every outbox row with ``seq <= floor`` is done.

    Done means published (a marker that counts) or set aside by this process. Without the
    floor, listing pending messages would scan the whole outbox, which grows with every
    result ever published. It holds because outbox rows get their ``seq`` under the append
    lock, so they become visible in ``seq`` order, and markers are never removed. Listing
    moves the floor over the done rows it meets before the first pending one; once every
    row of a listed page is marked published (or set aside), over the whole page.

    A page may be listed while the one before it is still in flight (the relay lists the
    next page while the broker confirms the last, and leaves that one's rows out): the
    pages listed so are kept in order, and the floor moves over a page only once it and
    every page listed before it are done. A listing with nothing in flight starts over.
    """

    def __init__(self) -> None:
        self.seq = 0
        self.aside: set[str] = set()
        #: Beyond the floor, by event position: every row of that event with ``seq`` up to
        #: this is done (met by a listing that took turns: the floor waits on another event).
        self.resume: dict[int, int] = {}
        #: Listed pages not done yet, oldest first: the highest seq of each, and its
        #: messages not marked yet.
        self._pages: deque[tuple[int, set[str]]] = deque()
        #: The last listing, when it took every pending row from its start to its end:
        #: that end, and the events of its messages (a listing while they are in flight
        #: starts there).
        self.through: tuple[int, frozenset[int]] | None = None

    def listed(
        self,
        page: Sequence[tuple[str, int]],
        *,
        in_flight: bool = False,
        whole: bool = False,
        positions: Iterable[int] = (),
    ) -> None:
        """``pending_outbox`` returned these (message_id, seq), in seq order; with
        ``in_flight``, while the pages listed before were not marked yet; ``whole``: it
        took every pending row from its start to its end (the events: ``positions``)."""
        if not in_flight:
            self._pages.clear()
        if page:
            self._pages.append((max(seq for _, seq in page), {m for m, _ in page}))
        self.through = (page[-1][1], frozenset(positions)) if whole and page else None

    def marked(self, message_ids: Iterable[str]) -> None:
        """``mark_published`` recorded these message ids."""
        done = set(message_ids) | self.aside
        for _, waiting in self._pages:
            waiting -= done
        moved = False
        while self._pages and not self._pages[0][1]:
            self.seq = max(self.seq, self._pages.popleft()[0])
            moved = True
        if moved:
            self.resume = {p: s for p, s in self.resume.items() if s > self.seq}

    def set_aside(self, message_ids: Iterable[str]) -> None:
        """Leave these out from now on (this process will not publish them)."""
        self.aside.update(message_ids)
        assert len(self.aside) <= ASIDE_LIMIT, "too many outbox messages set aside"
        self.marked(())
