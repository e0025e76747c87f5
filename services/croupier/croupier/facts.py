"""Facts: what Croupier records, as plain data the domain writes and the ledger stores.

A :class:`Fact` is the one type of a thing to record, from the Round aggregate (a round's
facts), the settler (jackpot movements), the dead-letter recorder and the tests alike; the
ledger port appends facts and encodes their data (``croupier.ledger.encoding``). Nothing
here knows how facts are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Fact:
    """Something to record: its type, its JSON data, and its idempotency key (unique over
    the ledger, e.g. derived from the feed's ``event_id``)."""

    type: str
    data: Mapping[str, Any]
    key: str
