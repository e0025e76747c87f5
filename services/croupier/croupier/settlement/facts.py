"""Facts: what Croupier records, as plain data the domain writes and the ledger stores.

A :class:`Fact` is the one type of a thing to record, from the Round aggregate (a round's
facts), the settler (jackpot movements), the dead-letter recorder and the tests alike; the
ledger port appends facts and encodes their data (``croupier.ledger.encoding``). The
typed dicts say what the data of each kind of fact holds, for its writers and readers alike.
Nothing here knows how facts are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

from holdem.values import quick


@quick
@dataclass(frozen=True, slots=True)
class Fact:
    """Something to record: its type, its JSON data, and its idempotency key (unique over
    the ledger, e.g. derived from the feed's ``event_id``)."""

    type: str
    data: Mapping[str, Any]
    key: str


# -- what the facts of a round hold (``croupier.settlement.round``) ---------------------


class PayTableRef(TypedDict):
    """The pay table a round played: id, version, and content hash."""

    id: str
    version: int
    hash: str


class ResultLine(TypedDict):
    """One bet's outcome in a closing fact (amounts in minor units)."""

    bet_id: str
    player_id: str
    box: str
    spot: str
    stake: int
    returned: int
    outcome: str
    line: str | None
    currency: str


class Movement(TypedDict):
    """How a settlement moved a jackpot meter of one currency: ``after`` is ``before`` plus
    what was contributed and reseeded, less what was awarded."""

    currency: str
    before: int
    contributed: int
    awarded: int
    reseeded: int
    after: int


class MeterMoved(Movement):
    """The data of a ``jackpot.meter_moved`` fact: the movement and the settlement's key."""

    settlement: str


class Posting(TypedDict):
    """One double-entry line; a round's postings of each currency sum to zero."""

    currency: str
    account: str
    amount: int


class DealCards(TypedDict):
    """The cards a round was settled on, as card text."""

    boxes: dict[str, str]
    dealer: str
    board: str


class EventFact(TypedDict):
    """What every fact recording a feed event holds: the event's JSON and fingerprint."""

    event: dict[str, Any]
    fingerprint: str


class Accepted(EventFact, total=False):
    """``feed.accepted``; the opening event's also names the pay table."""

    paytable: PayTableRef


class Delivery(TypedDict):
    """The delivery a rejection's dead letter carries: routing key and AMQP message id.

    The live service records it in every rejection it writes (and dead-letters), so the
    chain says which dead letter each rejection calls for; replay records none."""

    routing_key: str
    message_id: str | None


class Rejected(EventFact):
    """``feed.rejected``: the code and reason; ``uses_seq`` when the event took its seq."""

    code: str
    reason: str
    uses_seq: bool
    dead_letter: NotRequired[Delivery]


class Closing(EventFact):
    """What ``round.settled`` and ``round.voided`` both hold: every wager's result."""

    paytable: PayTableRef
    results: list[ResultLine]
    jackpot: list[Movement]
    postings: list[Posting]


class Settled(Closing):
    """``round.settled``: the cards, folds and hands it was settled on."""

    deal: DealCards
    folds: dict[str, str]
    hands: dict[str, str]


class Voided(Closing):
    """``round.voided``: every wager refunded; ``code`` and ``waiting_for`` when Croupier
    voided it for the round timeout."""

    reason: str
    code: NotRequired[str]
    waiting_for: NotRequired[str]


def closing(data: Mapping[str, Any]) -> Closing:
    """The data of a recorded ``round.settled`` or ``round.voided`` fact, typed."""
    return cast(Closing, data)


def event_fact(data: Mapping[str, Any]) -> EventFact:
    """The data of a recorded fact about a feed event, typed."""
    return cast(EventFact, data)
