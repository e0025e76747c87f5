"""The books checked again where they are read: closed rounds balance, meters are continuous.

The Round asserts its postings balance when it writes a settlement, and the settler asserts
each jackpot meter moves on from its last level. This module checks the same invariants
again from the ledger as recorded, fact by fact in position order, so a ledger that verifies
as a chain is also proven to hold consistent money (``croupier verify`` runs it):

- every closed round (settled or voided), per currency: the postings sum to zero, the escrow
  gives up exactly the stakes, and each player's posting is what their results returned;
- every jackpot meter movement: ``before + contributed - awarded + reseeded == after``, and
  ``before`` is the previous movement's ``after`` in the same meter (the seed for the first).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from croupier.ledger import RecordedEvent
from croupier.settlement.facts import closing
from croupier.settlement.meters import METER_MOVED, METER_PREFIX
from croupier.settlement.round import SETTLED, VOIDED
from holdem import PayTableError, load_paytable

#: Problems kept in a report; past this only the count grows.
MAX_LISTED: Final = 1_000


@dataclass
class BooksReport:
    """What the audit walked and every problem it found, by ledger position."""

    rounds: int = 0
    movements: int = 0
    problems: list[str] = field(default_factory=list)
    found: int = 0

    @property
    def ok(self) -> bool:
        """Whether the books hold."""
        return self.found == 0

    def summary(self) -> str:
        """One line for a person."""
        verdict = "balanced" if self.ok else f"{self.found} problems"
        return f"books: {self.rounds} closed rounds, {self.movements} meter movements: {verdict}"


class BooksAudit:
    """Folds recorded facts, in position order, into a :class:`BooksReport`."""

    def __init__(self) -> None:
        self.report = BooksReport()
        self._meters: dict[str, int] = {}

    def read(self, events: Iterable[RecordedEvent]) -> None:
        """Check every closed round and meter movement among ``events``."""
        for event in events:
            if event.type in (SETTLED, VOIDED):
                self.report.rounds += 1
                for problem in round_problems(event.data):
                    self._found(event, problem)
            elif event.type == METER_MOVED:
                self.report.movements += 1
                for problem in self._meter_problems(event.stream, event.data):
                    self._found(event, problem)

    def _meter_problems(self, stream: str, movement: Mapping[str, Any]) -> list[str]:
        problems = []
        before, after = movement["before"], movement["after"]
        moved = before + movement["contributed"] - movement["awarded"] + movement["reseeded"]
        if moved != after:
            problems.append(f"meter {stream} moves {before} to {after}, its parts to {moved}")
        expected = self._meters.get(stream, _seed(stream))
        if expected is not None and before != expected:
            problems.append(f"meter {stream} starts at {before}; it stood at {expected}")
        self._meters[stream] = after
        return problems

    def _found(self, event: RecordedEvent, problem: str) -> None:
        self.report.found += 1
        if len(self.report.problems) < MAX_LISTED:
            self.report.problems.append(f"position {event.position} ({event.stream}): {problem}")


def round_problems(closed: Mapping[str, Any]) -> list[str]:
    """What does not hold in a closed round's postings against its results."""
    data = closing(closed)
    problems = []
    stakes: dict[str, int] = defaultdict(int)
    returned: dict[tuple[str, str], int] = defaultdict(int)
    for r in data["results"]:
        stakes[r["currency"]] += r["stake"]
        returned[(r["currency"], f"player:{r['player_id']}")] += r["returned"]
    totals: dict[str, int] = defaultdict(int)
    posted = {(p["currency"], p["account"]) for p in data["postings"]}
    problems += [f"{c} {a} has results but no posting" for c, a in returned if (c, a) not in posted]
    for p in data["postings"]:
        currency, account, amount = p["currency"], p["account"], p["amount"]
        totals[currency] += amount
        if account == "escrow" and amount != -stakes[currency]:
            problems.append(f"{currency} escrow posts {amount}; the stakes are {stakes[currency]}")
        elif account.startswith("player:") and amount != returned.get((currency, account)):
            paid = returned.get((currency, account))
            problems.append(f"{currency} {account} posts {amount}; the results return {paid}")
    problems += [f"{c} postings sum to {total}, not 0" for c, total in totals.items() if total]
    return problems


def _seed(stream: str) -> int | None:
    """The seed of a meter stream ``jackpot:<paytable>:<currency>``, None if unknown."""
    paytable_id = stream.removeprefix(METER_PREFIX).rpartition(":")[0]
    try:
        jackpot = load_paytable(paytable_id).jackpot
    except (PayTableError, KeyError, ValueError):
        return None
    return jackpot.seed if jackpot is not None else None
