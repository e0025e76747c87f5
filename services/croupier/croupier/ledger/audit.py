"""What ``verify`` checks beyond the hash chain: signed heads, the outbox, publish markers.

* Head rows: each must carry the signature of a key of the keyring over its (position,
  hash), at a position that key may sign (its range and turn, below any revocation:
  ``croupier.ledger.keyring``); the valid ones become the chain's anchors
  (``ChainVerifier.signed``).
* Outbox rows: each must name an event of the chain by position and hash and, given the
  rule that says what each event puts in the outbox, be exactly one of those messages.
  A message the rule calls for that is not in the outbox is *missing* (suppressed). Rows
  on an ``unruled`` exchange (dead letters) are held to the ``letter_rule`` instead, if
  given: it says why a row is not what its event calls for, and which events call for
  one (an event with none that passes is *missing* its letter).
* Publish marks and markers: each mark must carry a keyring key's signature over its
  message ids, and each marker must belong to such a mark that lists its message and whose
  key is not revoked at its message's position.
* Set-aside rows: each must carry a keyring key's signature over its message id and reason;
  the valid ones are listed as notes (what the relay could not publish, and why).
* Leases: one held beyond the longest term Croupier takes was written by no instance of
  it, and stalls relaying until it expires.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Final, NamedTuple

from croupier.ledger.chain import ChainRow, Problem
from croupier.ledger.keyring import Keyring
from croupier.ledger.outbox import OutboxRow, SetAsideRow
from croupier.ledger.trust import HeadRow, MarkRow


class Expected(NamedTuple):
    """An outbox message as an event calls for it; ``body`` is canonical JSON text."""

    message_id: str
    exchange: str
    routing_key: str
    body: str


#: What an event (type, canonical data text) puts in the outbox.
OutboxRule = Callable[[str, str], list[Expected]]


class LetterRule(ABC):
    """What a chained event asks of the outbox rows on the ``unruled`` exchanges."""

    @abstractmethod
    def problem(
        self, event: ChainRow, message_id: str, routing_key: str, letter: Mapping[str, Any]
    ) -> str | None:
        """Why an outbox row (message id, routing key, body) is not what ``event`` calls
        for, or None."""

    @abstractmethod
    def wanted(self, event: ChainRow) -> bool:
        """Whether ``event`` calls for such a row (one that is absent is *missing*)."""


HeadPage = Callable[[int, int], Awaitable[list[HeadRow]]]
MarkPage = Callable[[int, int], Awaitable[list[MarkRow]]]
MarkerPage = Callable[[tuple[int, str], int], Awaitable[list[tuple[int, str]]]]
Positions = Callable[[Sequence[str]], Awaitable[dict[str, int]]]
#: Message ids whose positions one look-up reads at most (marks of a revoked key).
POSITIONS_READ: Final = 10_000
#: Notes kept by one walk (set-aside rows listed); the rest are counted.
NOTES_KEPT: Final = 10_000

AsidePage = Callable[[int, int], Awaitable[list[tuple[SetAsideRow, OutboxRow]]]]


class Audit:
    """Findings outside the events table, gathered during one ``verify`` walk."""

    def __init__(
        self,
        keyring: Keyring | None,
        rule: OutboxRule | None,
        unruled: Collection[str] = (),
        letter_rule: LetterRule | None = None,
    ) -> None:
        self.keyring = keyring
        self.rule = rule
        self.unruled = unruled
        self.letter_rule = letter_rule
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        #: The highest claim of a published outbox a valid head makes, and that head's position.
        self.published: tuple[int, int] = (0, 0)

    def _flag(self, table: str, kind: str, position: int, row: str, detail: str) -> None:
        self.problems.append(Problem(kind, position, detail, table, row))  # type: ignore[arg-type]

    async def heads(self, page: HeadPage, size: int) -> dict[int, str]:
        """The validly signed heads (position: hash); every other head row is flagged."""
        assert self.keyring is not None
        signed: dict[int, str] = {}
        after = 0
        while rows := await page(after, size):
            for head in rows:
                name = f"id {head.id} position {head.position}"
                why = self.keyring.head_problem(
                    head.position, head.hash, head.key_id, head.signature, head.published
                )
                if why is not None:
                    self._flag("ledger_heads", "forged", head.position, name, why)
                elif signed.get(head.position, head.hash) != head.hash:
                    self._flag("ledger_heads", "forged", head.position, name, "two signed hashes")
                else:
                    signed[head.position] = head.hash
                    if head.published is not None and head.published > self.published[0]:
                        self.published = (head.published, head.position)
            after = rows[-1].id
        return signed

    def outbox(self, events: Sequence[ChainRow], rows: Sequence[OutboxRow]) -> None:
        """Judge the outbox rows whose positions fall in this page of events."""
        by_position: dict[int, list[OutboxRow]] = {}
        claim, head = self.published
        for row in rows:
            by_position.setdefault(row.position, []).append(row)
            if row.seq <= claim and not row.marks and not row.aside:
                why = (
                    f"the head signed at position {head} records the outbox published through "
                    f"seq {claim}; no publish marker of this message is left (marks deleted?)"
                )
                self._flag("outbox_published", "missing", row.position, _name(row), why)
        for event in events:
            found = by_position.pop(event.position, [])
            self._judge_event(event, found)
        for position, orphans in by_position.items():
            for row in orphans:
                self._flag("outbox", "forged", position, _name(row), "no event at its position")

    def _judge_event(self, event: ChainRow, rows: list[OutboxRow]) -> None:
        expected = {e.message_id: e for e in self.rule(event.type, event.data)} if self.rule else {}
        lettered = False
        for row in rows:
            want = expected.pop(row.message_id, None)
            if row.event_hash != event.hash:
                why = "names an event hash the chain does not hold here"
                self._flag("outbox", "forged", row.position, _name(row), why)
            elif row.exchange in self.unruled:
                lettered = self._judge_letter(event, row) or lettered
            elif self.rule is None:
                continue
            elif want is None:
                why = f"the {event.type} at this position reports no such message"
                self._flag("outbox", "forged", row.position, _name(row), why)
            elif (row.exchange, row.routing_key, row.body) != want[1:]:
                why = f"differs from what the {event.type} at this position reports"
                self._flag("outbox", "changed", row.position, _name(row), why)
        for want in expected.values():
            why = f"the {event.type} at this position reports it, the outbox lacks it"
            name = f"message_id {want.message_id}"
            self._flag("outbox", "missing", event.position, name, why)
        if self.letter_rule and not lettered and self.letter_rule.wanted(event):
            why = f"the {event.type} at this position calls for a dead letter, the outbox lacks it"
            self._flag("outbox", "missing", event.position, f"dead letter of {event.key}", why)

    def _judge_letter(self, event: ChainRow, row: OutboxRow) -> bool:
        """Whether the row is the letter ``event`` calls for (else it is flagged)."""
        if self.letter_rule is None:
            return True
        body = json.loads(row.body)
        problem = self.letter_rule.problem(event, row.message_id, row.routing_key, body)
        if problem is not None:
            names = isinstance(body, dict) and body.get("fact") == event.key
            self._flag(
                "outbox", "changed" if names else "forged", row.position, _name(row), problem
            )
        return problem is None

    async def marks(
        self, marks: MarkPage, markers: MarkerPage, size: int, positions: Positions
    ) -> None:
        """Flag marks no keyring key signed, and markers no valid mark lists (or only one
        whose key is revoked at the message's position)."""
        assert self.keyring is not None
        valid: set[int] = set()
        after = 0
        while rows := await marks(after, size):
            revoked: list[tuple[MarkRow, int]] = []  # marks of a revoked key, and since when
            for row in rows:
                why = self.keyring.mark_problem(row.key_id, row.message_ids, row.signature)
                if why is None:
                    valid.add(row.mark)
                    entry = self.keyring.get(row.key_id)
                    if entry is not None and entry.revoked_from is not None:
                        revoked.append((row, entry.revoked_from))
                else:
                    self._flag("outbox_marks", "forged", 0, f"mark {row.mark}", why)
            if revoked:
                await self._revoked_markers(revoked, positions)
            after = rows[-1].mark
        # Markers come ordered by mark: one mark's ids are held at a time.
        current: tuple[int, frozenset[str]] = (-2, frozenset())
        cursor = (-(2**63), "")
        while page := await markers(cursor, size):
            for mark, message_id in page:
                if mark != current[0]:
                    current = (mark, await _ids(marks, mark) if mark in valid else frozenset())
                if message_id not in current[1]:
                    why = "no mark signed by a key of the keyring lists it"
                    name = f"message_id {message_id} mark {mark if mark >= 0 else 'none'}"
                    self._flag("outbox_published", "forged", 0, name, why)
            cursor = page[-1]

    async def _revoked_markers(
        self, marks: Sequence[tuple[MarkRow, int]], positions: Positions
    ) -> None:
        """Flag what marks of a revoked key say of messages at or above its revocation (the
        messages' positions looked up ``POSITIONS_READ`` at a time)."""
        group: list[tuple[MarkRow, int]] = []
        ids = 0
        for index, (row, since) in enumerate(marks):
            group.append((row, since))
            ids += len(row.message_ids)
            if index + 1 == len(marks) or ids >= POSITIONS_READ:
                await self._flag_revoked(group, positions)
                group, ids = [], 0

    async def _flag_revoked(
        self, marks: Sequence[tuple[MarkRow, int]], positions: Positions
    ) -> None:
        at = await positions(sorted({i for row, _ in marks for i in row.message_ids}))
        for row, since in marks:
            for message_id in row.message_ids:
                position = at.get(message_id)
                if position is not None and position >= since:
                    why = f"its mark's key is revoked from position {since}"
                    name = f"message_id {message_id} mark {row.mark}"
                    self._flag("outbox_published", "forged", position, name, why)

    async def set_aside(self, page: AsidePage, size: int) -> None:
        """Flag set-aside rows this key did not sign; note the others (the first
        ``NOTES_KEPT``, then how many more)."""
        after, unlisted = 0, 0
        while rows := await page(after, size):
            for aside, row in rows:
                name = f"id {aside.id} message_id {aside.message_id}"
                why = (
                    self.keyring.aside_problem(
                        aside.key_id, aside.message_id, aside.reason, aside.signature, row.position
                    )
                    if self.keyring is not None
                    else None
                )
                if why is None:
                    since = "published since" if row.marks else "not published"
                    if len(self.notes) < NOTES_KEPT:
                        self.notes.append(f"outbox_set_aside: {name}: {aside.reason} ({since})")
                    else:
                        unlisted += 1
                    continue
                self._flag("outbox_set_aside", "forged", row.position, name, why)
            after = rows[-1][0].id
        if unlisted:
            self.notes.append(f"outbox_set_aside: and {unlisted:,} more rows set aside")

    def leases(self, leases: Sequence[tuple[str, str, float]], limit: float) -> None:
        """Flag leases held beyond ``limit`` seconds from now."""
        for name, holder, left in leases:
            if left > limit:
                why = (
                    f"held for {left:,.0f} s more, beyond any term Croupier takes "
                    f"({limit:g} s): nothing relays until it expires; end it with "
                    f"UPDATE relay_lease SET expires_at = now() WHERE name = '{name}'"
                )
                self._flag("relay_lease", "forged", 0, f"{name} holder {holder!r}", why)


async def _ids(marks: MarkPage, mark: int) -> frozenset[str]:
    rows = await marks(mark - 1, 1)
    return frozenset(rows[0].message_ids) if rows and rows[0].mark == mark else frozenset()


def _name(row: OutboxRow) -> str:
    return f"seq {row.seq} message_id {row.message_id}"
