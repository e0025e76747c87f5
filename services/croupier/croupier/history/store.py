"""The history store port: what ``croupier web`` reads, and nothing it could write.

Adapters: ``croupier.history.postgres``, ``croupier.history.sqlite``. Staff recall reads a
round's facts straight from its ledger stream; players' recalls and players' and tables'
rounds come from the rounds read model (``croupier.projection.rounds``), where each is a
document ready to send, found by one indexed lookup.

Pagination: pages run newest first by the ledger position of a round's settlement (of its
opening, for a table's rounds). A position never changes once written, and a round that
arrives later has a higher one, so a cursor (the last row's position) gives the same next
page however many rounds arrive between two requests.
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Final, NamedTuple

from croupier.history.models import TableRound
from croupier.ledger import RecordedEvent

MAX_PAGE: Final = 100
#: Ledger positions are 64-bit signed integers; a cursor past the last one names no row.
MAX_POSITION: Final = 2**63 - 1


class BadCursor(ValueError):
    """A cursor this service did not hand out."""


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """Where a page ends: the last row's position (and currency, for a player's rows)."""

    position: int
    currency: str = ""

    def encode(self) -> str:
        """The opaque text handed to clients."""
        raw = f"{self.position}:{self.currency}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The cursor ``encode`` made; raises :class:`BadCursor` for anything else."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            position, currency = raw.split(":", 1)
            cursor = cls(int(position), currency)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise BadCursor(f"cursor {text[:40]!r} is not one this service handed out") from None
        if (
            not 0 < cursor.position <= MAX_POSITION
            or len(currency) > 3
            or (currency and not (currency.isascii() and currency.isalpha()))
        ):
            raise BadCursor(f"cursor {text[:40]!r} is not one this service handed out")
        return cursor


class StoredRound(NamedTuple):
    """A row of a player's history: where it sorts, and the ``PlayerRound`` JSON to send."""

    position: int
    currency: str
    document: str


class HistoryStore(ABC):
    """Read-only access to round streams and the rounds read model."""

    @abstractmethod
    async def round_facts(self, table_id: str, round_id: str) -> list[RecordedEvent]:
        """The facts of the round's ledger stream in version order (empty if none)."""

    @abstractmethod
    async def player_recall(self, table_id: str, round_id: str, player_id: str) -> str | None:
        """A closed round's ``RoundRecall`` JSON as the player sees it (``None``: not theirs)."""

    @abstractmethod
    async def player_rounds(
        self, player_id: str, limit: int, before: Cursor | None
    ) -> list[StoredRound]:
        """Up to ``limit`` of the player's closed rounds, newest first, older than ``before``."""

    @abstractmethod
    async def table_rounds(
        self, table_id: str, limit: int, before: Cursor | None
    ) -> list[TableRound]:
        """Up to ``limit`` of the table's rounds, newest first, older than ``before``."""

    @abstractmethod
    async def ready(self) -> bool:
        """Whether the ledger and the read model answer."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""


def open_store(url: str) -> HistoryStore:
    """The adapter ``url`` names (``sqlite:///...`` or ``postgresql://...``)."""
    if url.startswith("sqlite:///"):
        from croupier.history.sqlite import SqliteHistory

        return SqliteHistory(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        from croupier.history.postgres import PostgresHistory

        return PostgresHistory(url)
    raise ValueError(f"unsupported database url {url!r}: use sqlite:///... or postgresql://...")
