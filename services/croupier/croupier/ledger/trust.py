"""What the service's key vouches for: signed heads, the rows under them, and publish marks.

Shared by the adapters (signing a committed batch's head, refusing to append after rows
someone else wrote, telling real publish markers from forged ones) and by the relay
(publishing only results whose settlement is chained under a signed head).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from croupier.ledger.chain import GENESIS_HASH, ChainRow
from croupier.ledger.outbox import SetAsideRow
from croupier.ledger.signing import LedgerKey, LedgerPublicKey

log = structlog.get_logger("croupier.ledger")

#: Heads and marks remembered as trusted (signed here or verified), newest kept.
TRUSTED_LIMIT: Final = 4096
#: Head rows examined above a position before giving up finding a validly signed one.
HEADS_SCANNED: Final = 64


@dataclass(frozen=True, slots=True)
class HeadRow:
    """A ``ledger_heads`` row."""

    id: int
    position: int
    hash: str
    key_id: str
    signature: str


@dataclass(frozen=True, slots=True)
class MarkRow:
    """An ``outbox_marks`` row: the message ids one signature says were published."""

    mark: int
    message_ids: tuple[str, ...]
    key_id: str
    signature: str


class _Bounded(OrderedDict[object, object]):
    def remember(self, key: object, value: object = None) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > TRUSTED_LIMIT:
            self.popitem(last=False)


class Trust:
    """One process's signing key (or none) and the heads and marks it has checked."""

    def __init__(self, key: LedgerKey | None = None) -> None:
        self.key = key
        self.public: LedgerPublicKey | None = key.public if key else None
        self.key_id = self.public.key_id if self.public else ""
        self._heads = _Bounded()
        self._marks = _Bounded()
        self.head: tuple[int, str] | None = None  # the chain head last signed or verified

    @property
    def signing(self) -> bool:
        return self.key is not None

    # -- heads ----------------------------------------------------------------------------

    def sign_head(self, position: int, digest: str) -> tuple[int, str, str, str]:
        """(position, hash, key_id, signature) of a new head row; remembered as trusted."""
        assert self.key is not None, "signing needs a key"
        signature = self.key.sign_head(position, digest)
        self._heads.remember((position, digest))
        self.head = (position, digest)
        return position, digest, self.key_id, signature

    def trusts_head(self, row: HeadRow) -> bool:
        """Whether the row is a head this key signed (checked once, then remembered)."""
        if (row.position, row.hash) in self._heads:
            return True
        if self.public is None or not self.public.verify_head(
            row.position, row.hash, row.signature
        ):
            return False
        self._heads.remember((row.position, row.hash))
        return True

    def accept_head(
        self, head: tuple[int, str], rows_at_head: Sequence[HeadRow], any_heads: bool
    ) -> bool:
        """Whether appending after ``head`` is safe: this key signed it, or nothing is signed.

        A ledger with rows but no signed head at all is adopted (its first signature then
        vouches for the rows before it); this is logged.
        """
        if head == self.head or head[0] == 0:
            return True
        if any(row.hash == head[1] and self.trusts_head(row) for row in rows_at_head):
            self.head = head
            return True
        if not any_heads:
            log.warning("signing a ledger that has no signed head yet", head_position=head[0])
            return True
        return False

    # -- publish marks --------------------------------------------------------------------

    def sign_mark(self, message_ids: Sequence[str]) -> tuple[str, str]:
        """(key_id, signature) for a new mark over ``message_ids``."""
        assert self.key is not None, "signing needs a key"
        return self.key_id, self.key.sign_mark(message_ids)

    def sign_aside(self, message_id: str, reason: str) -> tuple[str | None, str | None]:
        """(key_id, signature) of a new set-aside row; (None, None) without a key."""
        if self.key is None:
            return None, None
        return self.key_id, self.key.sign_aside(message_id, reason)

    def trusts_aside(self, row: SetAsideRow) -> bool:
        """Whether this key signed the set-aside row (without a key: every row counts)."""
        if self.public is None:
            return True
        return self.public.verify_aside(row.message_id, row.reason, row.signature)

    def remember_mark(self, mark: int, message_ids: Iterable[str]) -> None:
        self._marks.remember(mark, frozenset(message_ids))

    def unknown_marks(self, marks: Iterable[int | None]) -> list[int]:
        """Marks not checked yet (to be fetched and passed to ``check_marks``)."""
        return sorted({m for m in marks if m is not None and m not in self._marks})

    def check_marks(self, rows: Iterable[MarkRow]) -> None:
        """Remember the validly signed ones among ``rows``; forged ones stay unknown."""
        for row in rows:
            if self.public is not None and self.public.verify_mark(row.message_ids, row.signature):
                self.remember_mark(row.mark, row.message_ids)
            else:
                log.error("publish mark not signed by this key is ignored", mark=row.mark)

    def published(self, message_id: str, marks: Sequence[int | None]) -> bool:
        """Whether a message with these markers counts as published.

        Without a key every marker counts; with one, only a marker whose mark this key
        signed and which lists the message.
        """
        if self.public is None:
            return bool(marks)
        for mark in marks:
            ids = self._marks.get(mark)
            if isinstance(ids, frozenset) and message_id in ids:
                return True
        return False


def vouch(
    rows: Sequence[ChainRow], top_hash: str | None, signed: Mapping[int, str]
) -> dict[int, ChainRow]:
    """The rows (contiguous positions, ascending) the chain vouches for.

    Walking down from the last row: a row is vouched when its content gives its hash and
    that hash is what the row above links to (for the last row: ``top_hash``, the signed
    head's). A break loses the rows below it until a signed head in ``signed`` picks the
    walk up again. With ``top_hash`` None (no key), a row is vouched when its content
    gives its hash and, above the last row, its successor links to it.
    """
    vouched: dict[int, ChainRow] = {}
    expected = top_hash
    keyed = top_hash is not None
    below: int | None = None
    for row in reversed(rows):
        if below is not None and row.position != below - 1:
            expected = None  # a gap: nothing links across it
        if row.position in signed and row.hash == signed[row.position]:
            expected = row.hash
        whole = row.computed_hash() == row.hash
        linked = row.hash == expected if (keyed or below is not None) else True
        if whole and linked and row.hash != GENESIS_HASH:
            vouched[row.position] = row
            expected = row.prev_hash
        else:
            expected = None
        below = row.position
    return vouched
