"""The keyring: which public keys may sign the ledger, and at which positions.

Keys rotate without anyone touching the database (``docs/keys.md``):

* A *handover* is a fact in the chain. ``croupier rotate-key`` appends one
  ``ledger.key_rotated`` event (stream ``ledger:keys``) alone in its batch, under the
  outgoing key, so the head the outgoing key signs at that position covers it: "key A hands
  over to key B (its public key) after this position". From the next position on, only B
  may sign heads. Trust passes along the chain: to ``verify``, a key that a handover vouched
  for by its predecessor's head names is trusted like its predecessor.
* A *keyring file* (JSON, ``croupier rotate-key`` keeps it) lists public keys, each with the
  head positions it may sign (``first``..``last``; no ``last``: open) and, for a compromised
  key, ``revoked_from``: from that position on nothing it signed counts, neither heads nor
  the publish marks and set-aside rows of messages reporting an event at or above it. The
  service reads it (``CROUPIER_LEDGER_KEYRING``) to trust its predecessors' heads and marks;
  ``croupier verify --keyring`` checks the ledger against it.

A head counts when the key that signed it is in the keyring, the signature holds, and the
position lies in the key's range (and, for ``verify``, in its turn between handovers) below
any revocation. A key's turn that ended must end with a head that key signed: when the heads
are deleted and a later key signs over the older rows (the ledger *adopted*), that head is
missing and ``verify`` says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from croupier.ledger.chain import ChainRow, Problem
from croupier.ledger.signing import LedgerPublicKey, SigningKeyError
from croupier.settlement.facts import Fact

#: The type of a handover fact, and the stream that holds them.
ROTATED: Final = "ledger.key_rotated"
KEYS_STREAM: Final = "ledger:keys"

HeadsAt = Callable[[int], Awaitable[Sequence[Any]]]


class KeyringError(SigningKeyError):
    """A keyring file is unreadable or inconsistent, or lacks a key it must hold."""


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One public key of the keyring and the head positions it may sign."""

    public: LedgerPublicKey
    first: int = 1
    last: int | None = None
    revoked_from: int | None = None

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def span(self) -> str:
        return f"{self.first}..{'' if self.last is None else self.last}"

    def refusal(self, position: int) -> str | None:
        """Why this key may not sign a head at ``position``, or None."""
        if self.revoked_from is not None and position >= self.revoked_from:
            return f"key {self.key_id} is revoked from position {self.revoked_from}"
        if self.last is not None and self.last < self.first:
            return f"key {self.key_id} holds no turn in the chain's key handovers"
        if position < self.first or (self.last is not None and position > self.last):
            return f"key {self.key_id} signs positions {self.span()} only"
        return None

    def counts_for(self, position: int) -> bool:
        """Whether a mark or set-aside row of this key counts for a message at ``position``."""
        return self.revoked_from is None or position < self.revoked_from

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "key_id": self.key_id,
            "public_key": self.public.raw_hex(),
            "first": self.first,
        }
        if self.last is not None:
            entry["last"] = self.last
        if self.revoked_from is not None:
            entry["revoked_from"] = self.revoked_from
        return entry


class Keyring:
    """Public keys by key id, each with the positions it may sign."""

    def __init__(self, entries: Iterable[KeyEntry] = ()) -> None:
        self.entries: dict[str, KeyEntry] = {}
        for entry in entries:
            if entry.key_id in self.entries:
                raise KeyringError(f"key {entry.key_id} is in the keyring twice")
            self.entries[entry.key_id] = entry

    @classmethod
    def of(cls, *keys: LedgerPublicKey) -> Keyring:
        """Keys that may sign any position (one key, or an auditor's ``--public-key``s)."""
        return cls(KeyEntry(key) for key in {key.key_id: key for key in keys}.values())

    def __contains__(self, key_id: object) -> bool:
        return key_id in self.entries

    def __iter__(self) -> Iterator[KeyEntry]:
        return iter(sorted(self.entries.values(), key=lambda e: (e.first, e.key_id)))

    def get(self, key_id: str | None) -> KeyEntry | None:
        return self.entries.get(key_id or "")

    def merged(self, other: Keyring) -> Keyring:
        """This keyring with ``other``'s keys that it lacks."""
        return Keyring([*self.entries.values(), *(e for e in other if e.key_id not in self)])

    def with_entry(self, entry: KeyEntry) -> Keyring:
        """This keyring with ``entry`` added or replacing the entry of its key."""
        return Keyring([*(e for e in self if e.key_id != entry.key_id), entry])

    def head_problem(
        self,
        position: int,
        digest: str,
        key_id: str,
        signature: str,
        published: int | None = None,
    ) -> str | None:
        """Why a head row does not count, or None."""
        entry = self.entries.get(key_id)
        if entry is None:
            return f"signed with another key ({key_id}), not in the keyring"
        if not entry.public.verify_head(position, digest, signature, published):
            return "signature does not match"
        return entry.refusal(position)

    def mark_problem(
        self, key_id: str, message_ids: Sequence[str], signature: str | None
    ) -> str | None:
        """Why a publish mark's signature does not hold, or None (revocation aside)."""
        entry = self.entries.get(key_id)
        if entry is None:
            return f"signed with another key ({key_id}), not in the keyring"
        if not entry.public.verify_mark(message_ids, signature):
            return "signature does not match"
        return None

    def aside_problem(
        self,
        key_id: str | None,
        message_id: str,
        reason: str,
        signature: str | None,
        position: int,
    ) -> str | None:
        """Why a set-aside row of a message at ``position`` does not count, or None."""
        if not signature:
            return "unsigned"
        entry = self.entries.get(key_id or "")
        if entry is None:
            return f"signed with another key ({key_id}), not in the keyring"
        if not entry.public.verify_aside(message_id, reason, signature):
            return "signature does not match (changed?)"
        if not entry.counts_for(position):
            return f"key {entry.key_id} is revoked from position {entry.revoked_from}"
        return None

    def revoked_at(self, position: int) -> bool:
        """Whether ``position`` lies in a key's range at or above that key's revocation: what
        the chain holds there is vouched for by a revoked key only."""
        return any(
            e.revoked_from is not None
            and max(e.first, e.revoked_from) <= position
            and (e.last is None or position <= e.last)
            for e in self.entries.values()
        )

    def earlier_than(self, key_id: str) -> KeyEntry | None:
        """A key that signed before ``key_id`` may (so a ledger with no head has lost them)."""
        own = self.entries.get(key_id)
        if own is not None and own.first > 1:
            return own
        return next((e for e in self if e.key_id != key_id), None)

    # -- the file -------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"keys": [entry.to_json() for entry in self]}

    @classmethod
    def from_json(cls, data: Any, source: str = "keyring") -> Keyring:
        """Read the file's content; a :class:`KeyringError` says what is wrong."""
        keys = data.get("keys") if isinstance(data, Mapping) else None
        if not isinstance(keys, list):
            raise KeyringError(f'{source}: expected {{"keys": [...]}}')
        entries = []
        for number, item in enumerate(keys, 1):
            entries.append(_entry(item, f"{source}: key {number}"))
        return cls(entries)

    @classmethod
    def load(cls, path: str | Path) -> Keyring:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as error:
            raise KeyringError(f"cannot read the keyring {path} ({error.strerror})") from error
        try:
            data = json.loads(text)
        except ValueError as error:
            raise KeyringError(f"{path} is not JSON ({error})") from error
        return cls.from_json(data, str(path))

    def save(self, path: str | Path) -> None:
        """Write the file whole (a new file renamed over the old)."""
        target = Path(path)
        draft = target.with_name(f".{target.name}.new")
        draft.write_text(json.dumps(self.to_json(), indent=2) + "\n", "utf-8")
        os.replace(draft, target)


def _entry(item: Any, where: str) -> KeyEntry:
    if not isinstance(item, Mapping):
        raise KeyringError(f"{where}: expected an object")
    try:
        public = LedgerPublicKey.from_hex(str(item["public_key"]))
    except (KeyError, ValueError) as error:
        raise KeyringError(f"{where}: public_key must be 64 hex digits ({error})") from None
    if "key_id" in item and item["key_id"] != public.key_id:
        raise KeyringError(f"{where}: key_id {item['key_id']} is not its public key's")
    numbers: dict[str, int | None] = {}
    for name in ("first", "last", "revoked_from"):
        value = item.get(name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise KeyringError(f"{where}: {name} must be a position (1 or more)")
        numbers[name] = value
    return KeyEntry(public, numbers["first"] or 1, numbers["last"], numbers["revoked_from"])


# -- handovers in the chain ---------------------------------------------------------------


def handover(outgoing: LedgerPublicKey, incoming: LedgerPublicKey) -> Fact:
    """The fact that hands the ledger over from ``outgoing`` to ``incoming``."""
    data = {
        "from_key_id": outgoing.key_id,
        "key_id": incoming.key_id,
        "public_key": incoming.raw_hex(),
    }
    return Fact(ROTATED, data, f"{ROTATED}:{outgoing.key_id}:{incoming.key_id}")


@dataclass(frozen=True, slots=True)
class Handover:
    """A handover as the chain holds it."""

    position: int
    hash: str
    whole: bool  # the row's content gives its hash
    from_key_id: str
    incoming: LedgerPublicKey | None

    @property
    def key_id(self) -> str:
        return self.incoming.key_id if self.incoming else ""

    @classmethod
    def of(cls, row: ChainRow) -> Handover:
        try:
            data = json.loads(row.data)
            incoming: LedgerPublicKey | None = LedgerPublicKey.from_hex(data["public_key"])
            from_key_id = str(data["from_key_id"])
        except (ValueError, KeyError, TypeError):
            incoming, from_key_id = None, ""
        return cls(row.position, row.hash, row.computed_hash() == row.hash, from_key_id, incoming)


def handed_to(type_: str, data: str) -> str | None:
    """The incoming key id when (type, data) is a handover, else None."""
    if type_ != ROTATED:
        return None
    try:
        return str(json.loads(data)["key_id"])
    except (ValueError, KeyError, TypeError):
        return ""


async def follow(
    keyring: Keyring, handovers: Sequence[ChainRow], heads_at: HeadsAt, head_position: int
) -> tuple[Keyring, list[Problem]]:
    """The keyring the chain's handovers make of ``keyring``, and what is wrong with them.

    Each handover ends a turn: the turns cut each key's range down to its own, and a key
    that a handover names, vouched for by the outgoing key's head at its position, is
    trusted from the next position. Every turn that ended (and every range the keyring
    closes) must end with a head its key signed; one that does not is *missing* (heads
    deleted, or the ledger adopted by a later key).
    """
    entries = dict(keyring.entries)
    turns: list[tuple[str, int, int | None]] = []
    turn_key, turn_first = "", 1
    for chained in sorted((Handover.of(row) for row in handovers), key=lambda h: h.position):
        outgoing = turn_key or chained.from_key_id
        entry = entries.get(outgoing)
        vouched = (
            chained.whole
            and chained.from_key_id == outgoing
            and entry is not None
            and entry.refusal(chained.position) is None
            and any(
                h.hash == chained.hash
                and h.key_id == outgoing
                and entry.public.verify_head(h.position, h.hash, h.signature, h.published)
                for h in await heads_at(chained.position)
            )
        )
        turns.append((outgoing, turn_first, chained.position))
        incoming = chained.incoming
        if vouched and incoming is not None and incoming.key_id not in entries:
            entries[incoming.key_id] = KeyEntry(incoming, chained.position + 1)
        turn_key, turn_first = chained.key_id, chained.position + 1
    if turns:
        turns.append((turn_key, turn_first, None))
        for key_id, entry in list(entries.items()):
            entries[key_id] = _in_turn(entry, [(f, t) for k, f, t in turns if k == key_id])
    followed = Keyring(entries.values())
    problems = [
        *[
            _turn_problem(key_id, first, last)
            for key_id, first, last in turns
            if last is not None and key_id not in followed
        ],
        *[
            problem
            for entry in followed
            if entry.last is not None
            and entry.last <= head_position
            and entry.last >= entry.first
            and (problem := await _turn_end(entry, heads_at))
        ],
    ]
    return followed, problems


def _in_turn(entry: KeyEntry, turns: list[tuple[int, int | None]]) -> KeyEntry:
    if not turns:
        return replace(entry, first=1, last=0)  # it holds no turn
    first = max(entry.first, min(f for f, _ in turns))
    lasts = [t for _, t in turns]
    turn_last = None if None in lasts else max(t for t in lasts if t is not None)
    last = min((x for x in (entry.last, turn_last) if x is not None), default=None)
    return replace(entry, first=first, last=last)


def _turn_problem(key_id: str, first: int, last: int) -> Problem:
    why = f"key {key_id or '(unnamed)'} signs positions {first}..{last}, and is not in the keyring"
    return Problem("missing", last, why, "ledger_heads", f"turn {first}..{last}")


async def _turn_end(entry: KeyEntry, heads_at: HeadsAt) -> Problem | None:
    """A problem unless a head ``entry``'s key signed ends its turn."""
    assert entry.last is not None
    for head in await heads_at(entry.last):
        if head.key_id == entry.key_id and entry.public.verify_head(
            head.position, head.hash, head.signature, head.published
        ):
            return None
    why = (
        f"key {entry.key_id}'s turn {entry.span()} ends here, and no head it signed is here "
        "(signed heads removed, the ledger adopted by a later key?)"
    )
    return Problem("missing", entry.last, why, "ledger_heads", f"position {entry.last}")
