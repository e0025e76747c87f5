"""What the service's keyring vouches for: signed heads, the rows under them, and publish marks.

Shared by the adapters (signing a committed batch's head, refusing to append after rows
someone else wrote, telling real publish markers from forged ones) and by the relay
(publishing only results whose settlement is chained under a signed head).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

import structlog

from croupier.ledger.chain import GENESIS_HASH, ChainRow
from croupier.ledger.keyring import Keyring, KeyringError, handed_to
from croupier.ledger.outbox import SetAsideRow
from croupier.ledger.signing import LedgerKey, LedgerPublicKey

log = structlog.get_logger("croupier.ledger")

#: Heads and marks remembered as trusted (signed here or verified), newest kept.
TRUSTED_LIMIT: Final = 4096
#: Rows remembered as vouched for (position and hash), newest kept.
VOUCHED_LIMIT: Final = 50_000
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
    #: How far the outbox was published when it was signed (None: no claim; older heads).
    published: int | None = None


@dataclass(frozen=True, slots=True)
class MarkRow:
    """An ``outbox_marks`` row: the message ids one signature says were published."""

    mark: int
    message_ids: tuple[str, ...]
    key_id: str
    signature: str


class _Bounded(OrderedDict[object, object]):
    def __init__(self, limit: int = TRUSTED_LIMIT) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: object, value: object = None) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class Trust:
    """One process's signing key (or none), the keyring it trusts, and the heads and marks
    it has checked.

    With a key, the keyring (by default the key alone) says whose heads, publish marks and
    set-aside rows count: its predecessors' after a rotation (``croupier.ledger.keyring``).
    """

    def __init__(self, key: LedgerKey | None = None, keyring: Keyring | None = None) -> None:
        self.key = key
        self.public: LedgerPublicKey | None = key.public if key else None
        self.key_id = self.public.key_id if self.public else ""
        self.keyring: Keyring | None = None
        if self.public is not None:
            self.keyring = keyring if keyring is not None else Keyring.of(self.public)
            if self.key_id not in self.keyring:
                raise KeyringError(
                    f"the signing key {self.key_id} is not in the keyring: add it with "
                    "`croupier rotate-key`"
                )
        self._heads = _Bounded()
        self._marks = _Bounded()
        self._vouched = _Bounded(VOUCHED_LIMIT)
        #: The highest claim of a published outbox (``HeadRow.published``) trusted so far.
        self.claimed = 0
        self.head: tuple[int, str] | None = None  # the chain head last signed or verified

    @property
    def signing(self) -> bool:
        return self.key is not None

    # -- heads ----------------------------------------------------------------------------

    def sign_head(
        self, position: int, digest: str, published: int
    ) -> tuple[int, str, str, str, int]:
        """(position, hash, key_id, signature, published) of a new head row that claims
        ``published`` (raised to the highest claim seen: claims never go back); remembered
        as trusted."""
        assert self.key is not None, "signing needs a key"
        self.claim(published)
        signature = self.key.sign_head(position, digest, self.claimed)
        self._heads.remember((position, digest))
        self.head = (position, digest)
        return position, digest, self.key_id, signature, self.claimed

    def claim(self, published: int | None) -> None:
        """A trusted head (or this process) says every outbox row up to ``published`` is
        published or set aside."""
        if published is not None and published > self.claimed:
            self.claimed = published

    def retire(self, position: int) -> None:
        """This key handed the ledger over at ``position``: it signs nothing above it."""
        assert self.keyring is not None and self.public is not None, "signing needs a key"
        own = self.keyring.get(self.key_id)
        assert own is not None
        self.keyring = self.keyring.with_entry(replace(own, last=position))

    def may_sign(self, position: int) -> str | None:
        """Why this key may not sign a head at ``position`` (its range, a revocation)."""
        assert self.keyring is not None, "signing needs a key"
        entry = self.keyring.get(self.key_id)
        return entry.refusal(position) if entry else "this key is not in the keyring"

    def trusts_head(self, row: HeadRow) -> bool:
        """Whether the row is a head the keyring vouches for (checked once, remembered)."""
        if (row.position, row.hash) in self._heads:
            return True
        if self.keyring is None or self.keyring.head_problem(
            row.position, row.hash, row.key_id, row.signature, row.published
        ):
            return False
        self._heads.remember((row.position, row.hash))
        self.claim(row.published)
        return True

    def accept_head(
        self,
        head: tuple[int, str],
        rows_at_head: Sequence[HeadRow],
        any_heads: bool,
        event: tuple[str, str] | None = None,
        handed_over: bool = False,
    ) -> str | None:
        """Why appending after ``head`` is not safe, or None: a key of the keyring signed
        it and it hands nothing over to another key, or nothing is signed at all.

        ``event`` is (type, data) of the row at the head. A ledger with rows but no signed
        head at all is adopted (its first signature then vouches for the rows before it;
        logged), unless the keyring says other keys signed before, or the chain holds a
        key handover (``handed_over``): then its heads were removed.
        """
        if head == self.head or head[0] == 0:
            return None
        assert self.keyring is not None, "signing needs a key"
        if any(row.hash == head[1] and self.trusts_head(row) for row in rows_at_head):
            to = handed_to(*event) if event else None
            if to is not None and to != self.key_id:
                return f"key {self.key_id} handed the ledger over to key {to or '?'} there"
            self.head = head
            return None
        if not any_heads:
            earlier = self.keyring.earlier_than(self.key_id)
            if earlier is not None:
                return (
                    f"no head is signed at all, yet the keyring says key {earlier.key_id} "
                    f"signs positions {earlier.span()}: signed heads were removed, and the "
                    "ledger is not adopted"
                )
            if handed_over:
                return (
                    "no head is signed at all, yet the chain holds key handovers: signed "
                    "heads were removed, and the ledger is not adopted"
                )
            log.warning("signing a ledger that has no signed head yet", head_position=head[0])
            return None
        problems = [
            self.keyring.head_problem(
                row.position, row.hash, row.key_id, row.signature, row.published
            )
            for row in rows_at_head
            if row.hash == head[1]
        ]
        return next((p for p in problems if p), "no signed head is there")

    # -- rows vouched for -----------------------------------------------------------------

    def remember_vouched(self, rows: Iterable[ChainRow]) -> None:
        """These rows were vouched for: their hashes may anchor later walks below them."""
        for row in rows:
            self._vouched.remember(row.position, row.hash)

    def vouched_between(self, low: int, high: int) -> dict[int, str]:
        """The remembered vouched rows in ``low..high`` (position: hash)."""
        kept = self._vouched
        found = (
            ((p, kept.get(p)) for p in range(low, high + 1))
            if high - low < len(kept)
            else kept.items()
        )
        return {
            p: h for p, h in found if isinstance(p, int) and isinstance(h, str) and low <= p <= high
        }

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

    def trusts_aside(self, row: SetAsideRow, position: int) -> bool:
        """Whether a key of the keyring signed the set-aside row of a message reporting the
        event at ``position`` (without a key: every row counts)."""
        if self.keyring is None:
            return True
        problem = self.keyring.aside_problem(
            row.key_id, row.message_id, row.reason, row.signature, position
        )
        return problem is None

    def remember_mark(self, mark: int, message_ids: Iterable[str], key_id: str = "") -> None:
        self._marks.remember(mark, (frozenset(message_ids), key_id or self.key_id))

    def unknown_marks(self, marks: Iterable[int | None]) -> list[int]:
        """Marks not checked yet (to be fetched and passed to ``check_marks``)."""
        return sorted({m for m in marks if m is not None and m not in self._marks})

    def check_marks(self, rows: Iterable[MarkRow]) -> None:
        """Remember the validly signed ones among ``rows``; forged ones stay unknown."""
        for row in rows:
            problem = (
                self.keyring.mark_problem(row.key_id, row.message_ids, row.signature)
                if self.keyring is not None
                else "no key"
            )
            if problem is None:
                self.remember_mark(row.mark, row.message_ids, row.key_id)
            else:
                log.error("publish mark ignored", mark=row.mark, why=problem)

    def published(self, message_id: str, marks: Sequence[int | None], position: int) -> bool:
        """Whether a message (reporting the event at ``position``) with these markers
        counts as published.

        Without a key every marker counts; with one, only a marker whose mark a key of the
        keyring signed, which lists the message, and whose key is not revoked at
        ``position``.
        """
        if self.keyring is None:
            return bool(marks)
        for mark in marks:
            known = self._marks.get(mark)
            if not isinstance(known, tuple):
                continue
            ids, key_id = known
            entry = self.keyring.get(key_id)
            if message_id in ids and entry is not None and entry.counts_for(position):
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
