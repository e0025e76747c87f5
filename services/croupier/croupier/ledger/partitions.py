"""The partition ownership port: which instance may append for which tables, fenced by epoch.

What it promises
----------------
Partitions
    A ledger has a fixed number of partitions ``P``, stored when the ledger is created
    (``croupier migrate --partitions P``, 64 by default) and never changed afterwards: the
    row is insert-only, and migrating again with another count is refused
    (``PartitionsFixed``). A table belongs to partition :func:`partition_of`
    (``int.from_bytes(sha256(table_id)[:8]) % P``), so a round, its held events and its
    timeout always stay with one writer.

Leases with epochs
    Each partition has one lease row ``(partition, owner, epoch, expires_at)``, the time
    always the database's clock (instances need not agree on the time). ``take`` gives an
    instance partitions that are free or whose lease expired, and every take increments the
    partition's epoch (the database refuses an owner change without it). ``renew`` extends
    only the leases the instance still holds unexpired, at their epoch: a lease that
    expired, even one nobody took yet, is not renewed but taken again with a new epoch.
    ``release`` frees leases at once (their expiry set to now: a release is never a way
    to prolong ownership). A take names the owner whose lease ran out unreleased (killed,
    paused, cut off), if any: what that owner committed and had not published yet is left
    in the outbox for the new owner (``croupier.settlement.relay``). Two instances racing
    to take the same partitions get disjoint sets: the rows are locked in partition order,
    skipping rows another transaction holds.

Balanced assignment
    Instances register (``register``: ``instances (id, seen_at, live_until)``), each live
    for its term from then; each takes at most ``ceil(P / live)`` (``fair_share``). What an
    instance holds beyond its share it gives back (``croupier.settlement.partitions``).

Fencing
    ``Ledger.append(..., fence=Fence(owner, {partition: epoch}))`` checks, in the append
    transaction and before it writes anything, that ``owner`` holds every partition named at
    exactly that epoch and that the lease has not expired, by the database's clock at the
    moment of the check; the lease rows are locked shared until the append commits, so no
    takeover, renewal or release of them can commit in between (PostgreSQL; SQLite's single
    writer lock serialises the same). Otherwise the append is refused with ``Fenced``,
    naming the partitions, and nothing is written (a fence naming no partition checks
    nothing). So an instance that lost a partition (paused, cut off, too slow to renew)
    can never append for its tables again, whatever it believes it holds. An append
    without a fence is not checked: the single-instance service appends as before.

Bounds
    After an owner is killed, its partitions are free once their lease expires (the term)
    and taken at the next poll of another instance (``POLL_SECONDS``); on a graceful stop
    the owner releases them and leaves, and the others take them at their next poll.

Leases are not ledger data and protect no fact: whoever may write them (the service role)
can stall an instance or move a partition, never write into the chain a fact the owner's
checks would not have let through.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Final, NamedTuple

from croupier.ledger import Fence, Fenced, PartitionsFixed

#: Partitions of a new ledger unless ``croupier migrate --partitions`` says otherwise.
DEFAULT_PARTITIONS: Final = 64
#: The most partitions a ledger may have (and the least is 1).
MAX_PARTITIONS: Final = 4096
#: Seconds a lease lasts after its last renewal; renewed every third of it.
DEFAULT_TERM: Final = 10.0
#: Seconds between an instance's looks for free or expired partitions (and its renewals
#: when due): a released partition is taken within this, an expired one within it too.
POLL_SECONDS: Final = 1.0
#: An instance not seen for this long is forgotten (its row deleted by the next to register).
FORGET_SECONDS: Final = 3600.0

__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_TERM",
    "MAX_PARTITIONS",
    "POLL_SECONDS",
    "Fence",
    "Fenced",
    "Instance",
    "Lease",
    "PartitionLeases",
    "PartitionsFixed",
    "Taken",
    "fair_share",
    "partition_of",
]


def partition_of(table_id: str, partitions: int) -> int:
    """The partition of ``table_id`` among ``partitions``: the first 8 bytes of its SHA-256,
    big-endian, modulo the count."""
    digest = hashlib.sha256(table_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % partitions


def fair_share(partitions: int, live: int) -> int:
    """The most partitions one of ``live`` instances takes: ``ceil(partitions / live)``."""
    return math.ceil(partitions / max(1, live))


class Lease(NamedTuple):
    """A partition's lease as stored: ``owner`` None when free; ``expires_in`` seconds by the
    database's clock (negative: expired)."""

    partition: int
    owner: str | None
    epoch: int
    expires_in: float


class Instance(NamedTuple):
    """A registered instance and how long ago (seconds, the database's clock) it was seen."""

    id: str
    seen_ago: float


class Taken(NamedTuple):
    """A partition just taken, at its new ``epoch``; ``unowned`` the seconds it had been
    without a valid lease (None when it had never been owned); ``lapsed`` the owner whose
    lease ran out unreleased (None when the partition was free: released, or never owned)."""

    partition: int
    epoch: int
    unowned: float | None
    lapsed: str | None = None


class PartitionLeases(ABC):
    """The partition ownership port. Adapters: ``croupier.ledger.postgres`` and
    ``croupier.ledger.sqlite`` (``Ledger.partition_leases()``), sharing the ledger's
    connections. Every method is one transaction."""

    @abstractmethod
    async def count(self) -> int:
        """The ledger's partition count (fixed when it was created)."""

    @abstractmethod
    async def register(self, instance: str, seconds: float) -> int:
        """Record ``instance`` as seen now and live for ``seconds`` (its term); how many
        instances are live now, itself included. Instances unseen for ``FORGET_SECONDS``
        are forgotten."""

    @abstractmethod
    async def take(self, owner: str, seconds: float, limit: int) -> list[Taken]:
        """Take up to ``limit`` free or expired partitions for ``seconds``, lowest first,
        each at its epoch plus one (naming the owner whose lease lapsed, if any); those
        another transaction has locked are skipped."""

    @abstractmethod
    async def renew(self, owner: str, seconds: float) -> dict[int, int]:
        """Extend every unexpired lease ``owner`` holds to ``seconds`` from now; the
        partitions it holds (partition -> epoch)."""

    @abstractmethod
    async def release(self, owner: str, partitions: Collection[int] | None = None) -> list[int]:
        """Free the leases ``owner`` holds (of ``partitions``, or all) at once; those freed."""

    @abstractmethod
    async def leave(self, instance: str) -> list[int]:
        """A graceful stop: release every lease of ``instance`` and forget it (so the others'
        share grows at once); the partitions freed."""

    @abstractmethod
    async def leases(self) -> list[Lease]:
        """Every partition's lease, by partition."""

    @abstractmethod
    async def instances(self) -> list[Instance]:
        """The registered instances, most recently seen first."""


def check_count(partitions: int) -> int:
    """``partitions`` if it is a count a ledger may have, else ``ValueError``."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"a ledger has 1 to {MAX_PARTITIONS} partitions, not {partitions}")
    return partitions
